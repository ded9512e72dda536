"""Parsers never raise, whatever they are fed (random text, truncations of real outputs)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.collect.conftest import DATA

from vllm_medic.collect.build import build_snapshot
from vllm_medic.collect.launch import parse_launch
from vllm_medic.collect.parsers.amd import parse_amd_smi, parse_rocm_smi
from vllm_medic.collect.parsers.docker import parse_image_inspect, parse_images_digests
from vllm_medic.collect.parsers.infiniband import (
    parse_ibstat,
    parse_ibstatus,
    parse_ibv_devinfo,
    parse_rdma_link,
)
from vllm_medic.collect.parsers.network import parse_ibdev2netdev, parse_ip_link
from vllm_medic.collect.parsers.nvidia_smi import parse_nvidia_smi_table
from vllm_medic.collect.parsers.nvidia_smi_query import (
    parse_compute_apps_csv,
    parse_nvidia_smi_q,
    parse_nvidia_smi_xml,
    parse_query_gpu_csv,
)
from vllm_medic.collect.parsers.python_env import parse_collect_env, parse_pip_freeze, parse_vllm_version
from vllm_medic.collect.parsers.residue import clean
from vllm_medic.collect.parsers.system import (
    parse_container,
    parse_env,
    parse_lsmod,
    parse_proc_driver_version,
)
from vllm_medic.collect.parsers.toolkit import parse_nvcc_version
from vllm_medic.collect.parsers.topology import parse_topology

PARSERS = [
    parse_nvidia_smi_table,
    parse_nvidia_smi_xml,
    parse_nvidia_smi_q,
    parse_query_gpu_csv,
    parse_topology,
    parse_ibdev2netdev,
    parse_ip_link,
    parse_lsmod,
    parse_proc_driver_version,
    parse_image_inspect,
    parse_images_digests,
    parse_vllm_version,
    parse_pip_freeze,
    parse_collect_env,
    parse_env,
    parse_container,
    parse_launch,
    parse_nvcc_version,
    parse_compute_apps_csv,
    parse_ibstat,
    parse_ibstatus,
    parse_ibv_devinfo,
    parse_rdma_link,
    parse_rocm_smi,
    parse_amd_smi,
    clean,
]
REAL = sorted(p for p in DATA.rglob("*") if p.is_file() and p.name != "SOURCES.md")
ALPHABET = st.sampled_from(
    list("|+-=:./ \t\n\"'{}[]<>$#()0123456789abcXNVGPUMiB%_")
    + ["NVIDIA-SMI ", "Driver Version: ", "GPU0", "\u2019"]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(ALPHABET, max_size=300).map("".join))
def test_random_text(text):
    for parse in PARSERS:
        parse(text)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(REAL), st.integers(min_value=0, max_value=20000), st.sampled_from(PARSERS))
def test_truncated_real_outputs(path, cut, parse):
    parse(path.read_text(encoding="utf-8", errors="replace")[:cut])


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=2000))
def test_build_snapshot_from_random_bytes_under_every_name(data):
    from vllm_medic.collect.build import CANONICAL_FILES

    raw = {names[0]: data for names in CANONICAL_FILES.values()}
    snap, _notes = build_snapshot(raw, {}, {})
    assert snap.to_dict()["schema_version"] == 1
