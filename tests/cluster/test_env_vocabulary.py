"""One environment vocabulary (data/env_vocabulary.yaml): the remote probe keeps what a local collection keeps.

The remote probe is standard-library only, so it cannot read the YAML; it gets the ``collected`` section
in its JSON spec. These tests hold the two selections equal and run the real probe program.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from vllm_medic.cluster import remote_probe
from vllm_medic.cluster.fanout import probe_spec, remote_argv, result_from_remote
from vllm_medic.collect.api import CollectOptions
from vllm_medic.collect.env_vocabulary import COLLECTED, HEALTH_PROBE, MUST_MATCH_ACROSS_NODES
from vllm_medic.collect.parsers.system import is_relevant_env, select_env

SRC = Path(__file__).resolve().parents[2] / "src" / "vllm_medic"
# the variables issue 13 found missing from a node collected over SSH / kubectl
ONCE_MISSING = {
    "LD_PRELOAD": "/opt/lib/libfake.so",
    "RANK": "1",
    "LOCAL_RANK": "0",
    "WORLD_SIZE": "8",
    "FI_PROVIDER": "efa",
    "TORCHINDUCTOR_CACHE_DIR": "/cache/inductor",
    "HUGGING_FACE_HUB_TOKEN_PATH": "/secrets/hf",
    "ETH0_SOCKET_IFNAME": "eth0",
}
UNRELATED = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/root",
    "HOSTNAME": "node-a",
    "SHELL": "/bin/bash",
    "LANG": "C",
}


def _names() -> list[str]:
    """A name for every rule of the table, plus names no rule picks."""
    return sorted(
        {p + "X" for p in COLLECTED.prefixes}
        | set(COLLECTED.names)
        | {"ANY" + s for s in COLLECTED.suffixes}
        | set(ONCE_MISSING)
        | set(UNRELATED)
    )


def test_the_remote_selection_is_the_local_one() -> None:
    spec = probe_spec(CollectOptions(timeout_s=1))
    env = dict.fromkeys(_names(), "v")
    remote = remote_probe.select_env(env, json.loads(json.dumps(spec["env"])))
    assert set(remote) == {n for n in env if is_relevant_env(n)}
    assert set(ONCE_MISSING) <= set(remote)
    assert not set(UNRELATED) & set(remote)


def test_the_consistency_and_health_selections_only_read_collected_variables() -> None:
    for section in (MUST_MATCH_ACROSS_NODES, HEALTH_PROBE):
        for prefix in section.prefixes:
            assert any(prefix.startswith(q) for q in COLLECTED.prefixes), prefix
    assert not MUST_MATCH_ACROSS_NODES.matches("CUDA_VISIBLE_DEVICES")
    assert MUST_MATCH_ACROSS_NODES.matches("NCCL_IB_HCA")
    assert not MUST_MATCH_ACROSS_NODES.matches("HF_HOME")  # collected, but per node


def test_the_real_probe_program_reports_the_variables_a_local_collection_keeps(tmp_path: Path) -> None:
    spec = probe_spec(CollectOptions(timeout_s=1))
    spec.update(probes=[], files=[])  # only the environment is under test here
    env = {**UNRELATED, **ONCE_MISSING, "NCCL_IB_HCA": "mlx5_0", "HF_TOKEN": "hf_" + "a" * 34}
    proc = subprocess.run(
        remote_argv(spec, python=sys.executable), env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    snap = result_from_remote(json.loads(proc.stdout), "node-a", "ssh").snapshot
    local = select_env(env)
    assert snap.env == local
    assert set(ONCE_MISSING) <= set(snap.env)
    assert "hf_" + "a" * 34 not in json.dumps(snap.env)  # redacted on the way in, as locally


def test_no_module_keeps_its_own_env_prefix_list() -> None:
    """A literal tuple/list of two or more table prefixes in the source is a copy that will drift."""
    prefixes = set(COLLECTED.prefixes) | set(MUST_MATCH_ACROSS_NODES.prefixes)
    copies = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                hits = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in prefixes]
                if len(hits) >= 2:
                    copies.append(f"{path.relative_to(SRC)}:{node.lineno} {hits}")
    assert not copies, copies
