"""Readers by grammar (issue 11): residue stripped, topo -m by header, -q per GPU with health
fields, CSV columns from header / command line / value shapes, the RDMA and AMD readers, docker
inspect fragments, and partial / unparsable made visible. Every case goes through
`collect --from DIR --json` on real samples (sources in tests/data/collect/SOURCES.md); where a
real sample is transformed (separators removed, escapes stripped) the test says so: SYNTHETIC.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.collect.conftest import DATA, fake_env, run_cli
from tests.collect.test_dev_outputs import dig
from typer.testing import CliRunner

from vllm_medic.cli import app

HGX_TOPO = "nvidia-smi-topo-m/hgx-8gpu-nv18-12nic-pix-single-numa-aihub0007.txt"
ANSI_TOPO = "nvidia-smi-topo-m/rtx2080super-1gpu-610.57.04-ansi-underline-header-nvidia-gpu-exporter.txt"


def read(rel: str) -> str:
    return (DATA / rel).read_text(encoding="utf-8")


def collect(tmp_path: Path, files: dict[str, str], name: str = "captured") -> dict[str, Any]:
    d = tmp_path / name
    d.mkdir()
    for fname, text in files.items():
        (d / fname).write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["collect", "--from", str(d), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def errors(snap: dict[str, Any]) -> dict[str, str]:
    return {e["source"]: e["kind"] for e in snap["errors"]}


# ---------------------------------------------------------------- residue


def test_topo_header_underlined_by_the_driver_is_read(tmp_path):
    """610/590/595 drivers underline the topo -m header with ESC[4m ... ESC[0m (real capture)."""
    snap = collect(tmp_path, {"nvidia-smi-topo-m.txt": read(ANSI_TOPO)})
    assert snap["topology"]["devices"] == ["GPU0"]
    assert snap["topology"]["cpu_affinity"] == {"GPU0": "0-23"}
    assert snap["extra"]["gpu_numa_id"] == {"GPU0": "N/A"}
    assert snap["errors"] == [] and snap["partial"] == {}


def test_escape_residue_without_the_esc_byte_is_still_removed(tmp_path):
    """SYNTHETIC: the same capture pasted through a terminal that dropped the ESC bytes ("[4m")."""
    text = read(ANSI_TOPO).replace("\x1b", "")
    assert "[4mGPU0" in text
    snap = collect(tmp_path, {"nvidia-smi-topo-m.txt": text})
    assert snap["topology"]["devices"] == ["GPU0"] and snap["errors"] == []


def test_paste_residue_gives_the_same_topology(tmp_path):
    """SYNTHETIC variations of a real matrix: NBSP instead of spaces, CRLF, a bracketed-paste
    prompt, a GitHub quote block, a code fence. Each must read exactly as the original."""
    original = read(HGX_TOPO)
    clean = collect(tmp_path, {"nvidia-smi-topo-m.txt": original}, "clean")["topology"]
    variants = {
        "nbsp": original.replace("\t", "\u00a0\u00a0"),
        "crlf": original.replace("\n", "\r\n"),
        "prompt": "\x1b[?2004hroot@gpu-07:~# nvidia-smi topo -m\r\n\x1b[?2004l\r" + original,
        "quote": "".join(f"> {line}\n" for line in original.splitlines()),
        "fence": "```\n$ nvidia-smi topo -m\n" + original + "```\n",
        "bash": "bash-5.2# nvidia-smi topo -m\n" + original,
    }
    for name, text in variants.items():
        got = collect(tmp_path, {"nvidia-smi-topo-m.txt": text}, name)
        assert got["topology"] == clean, name
        assert got["errors"] == [] and got["partial"] == {}, name


# ---------------------------------------------------------------- topo -m


def test_glued_link_tokens_are_split_not_shifted(tmp_path):
    """SYNTHETIC from the real 12-NIC HGX matrix: tabs lost, and in GPU rows two link cells and a
    link cell + the CPU affinity glued together (`NODENODE`, `NODE0-191`)."""
    original = read(HGX_TOPO)
    clean = collect(tmp_path, {"nvidia-smi-topo-m.txt": original}, "clean")["topology"]
    glued = []
    for line in original.splitlines():
        if line.startswith("GPU"):
            line = line.replace("NODE\tNODE", "NODENODE", 2).replace("NODE\t0-191", "NODE0-191")
        glued.append(line.replace("\t", "  "))
    snap = collect(tmp_path, {"nvidia-smi-topo-m.txt": "\n".join(glued) + "\n"})
    assert "NODENODE" in "\n".join(glued) and "NODE0-191" in "\n".join(glued)
    assert snap["topology"]["matrix"] == clean["matrix"]
    assert snap["topology"]["cpu_affinity"] == clean["cpu_affinity"]
    assert snap["partial"] == {}


def test_a_row_that_does_not_fit_is_partial_and_never_shifted(tmp_path):
    """SYNTHETIC: one cell of GPU3's row mangled (`NOD`): the row is kept up to that cell only, its
    affinity is not guessed, and the source is partial (the other rows are intact)."""
    text = read(HGX_TOPO)
    rows = text.splitlines()
    i = next(k for k, row in enumerate(rows) if row.startswith("GPU3\t"))
    cells = rows[i].split("\t")
    cells[12] = "NOD"  # NIC3's cell
    rows[i] = "\t".join(cells)
    snap = collect(tmp_path, {"nvidia-smi-topo-m.txt": "\n".join(rows) + "\n"})
    topo = snap["topology"]
    assert list(topo["matrix"]["GPU3"]) == topo["devices"][:11]  # up to NIC2, nothing after
    assert "GPU3" not in topo["cpu_affinity"] and topo["cpu_affinity"]["GPU4"] == "0-191"
    assert "GPU3" in snap["partial"]["nvidia-smi-topo-m"]


def test_a_cut_matrix_is_partial(tmp_path):
    snap = collect(
        tmp_path,
        {
            "nvidia-smi-topo-m.txt": read(
                "nvidia-smi-topo-m/h20-8gpu-pcie-sys-10nic-pix-gpu-numa-id-deepep-128-EXCERPT.txt"
            )
        },
    )
    assert len(snap["topology"]["matrix"]) == 6 and len(snap["topology"]["devices"]) == 18
    assert "6 of 18 rows" in snap["partial"]["nvidia-smi-topo-m"]


# ---------------------------------------------------------------- nvidia-smi -q


def test_q_text_with_eight_gpu_sections(tmp_path):
    snap = collect(
        tmp_path,
        {"nvidia-smi-q.txt": read("nvidia-smi-q/h100-sxm-8gpu-565.57.01-nvidia-smi-a-full-thamada-gls.txt")},
    )
    assert [g["index"] for g in snap["gpus"]] == list(range(8))
    assert {g["name"] for g in snap["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    assert snap["gpus"][1]["bus_id"] == "00000000:2A:00.0"
    assert [g["ecc_volatile_uncorrectable"] for g in snap["gpus"]] == [0] * 8
    assert [g["remapped_rows_pending"] for g in snap["gpus"]] == [False] * 8
    assert snap["extra"]["nvidia_smi_attached_gpus"] == 8 and snap["partial"] == {}


def test_q_text_old_ecc_layout_and_retired_pages(tmp_path):
    """V100, 550 driver: Single Bit / Double Bit totals, page retirement, `Remapped Rows : N/A`."""
    snap = collect(
        tmp_path,
        {
            "nvidia-smi-q.txt": read(
                "nvidia-smi-q/v100-8gpu-single-double-bit-ecc-retired-pages-thamada-gls.txt"
            )
        },
    )
    g = snap["gpus"]
    assert len(g) == 8 and g[0]["name"] == "Tesla V100-SXM2-16GB"
    assert [x["ecc_aggregate_uncorrectable"] for x in g] == [0] * 8
    assert [x["retired_pages_pending"] for x in g] == [False] * 8
    assert [x["remapped_rows_pending"] for x in g] == [None] * 8  # N/A: not "no"


def test_q_text_sram_parity_secded_counts(tmp_path):
    snap = collect(
        tmp_path,
        {
            "nvidia-smi-q.txt": read(
                "nvidia-smi-q/h200-1gpu-590.48.01-sram-parity-secded-remapped-rows-nvidia-gpu-exporter.txt"
            )
        },
    )
    g = snap["gpus"][0]
    assert (g["ecc_volatile_uncorrectable"], g["ecc_aggregate_correctable"]) == (0, 0)
    assert (g["remapped_rows_pending"], g["remapped_rows_failure"]) == (False, False)


def test_q_excerpt_with_remap_pending_is_read_and_partial(tmp_path):
    """stas00's Xid 63 example: 8 attached, one GPU shown with `[...]` cuts, Pending: Yes."""
    snap = collect(
        tmp_path,
        {
            "nvidia-smi-q.txt": read(
                "nvidia-smi-q/a100-8gpu-attached-1-shown-elided-xid63-remap-pending-stas00-debug.txt"
            )
        },
    )
    (g,) = snap["gpus"]
    assert g["remapped_rows_pending"] is True and g["remapped_rows_correctable"] == 1
    assert g["ecc_volatile_correctable"] == 177 and g["ecc_volatile_uncorrectable"] == 0
    assert snap["extra"]["nvidia_smi_attached_gpus"] == 8
    why = snap["partial"]["nvidia-smi-q"]
    assert "8 GPUs attached, 1 shown" in why and "[...]" in why


def test_q_filtered_with_d_and_i_is_a_selection(tmp_path):
    snap = collect(
        tmp_path,
        {
            "nvidia-smi-q.txt": read(
                "nvidia-smi-q/ecc-row-remapper-pending-yes-d-i-filtered-8-attached-gpu-runbook.txt"
            )
        },
    )
    (g,) = snap["gpus"]
    assert g["bus_id"] == "00000000:52:00.0" and g["ecc_mode"] is None  # "Unknown Error"
    assert (g["remapped_rows_uncorrectable"], g["remapped_rows_pending"], g["remapped_rows_failure"]) == (
        1,
        True,
        False,
    )
    assert g["ecc_volatile_uncorrectable"] is None  # every count N/A: unknown, not 0
    why = snap["partial"]["nvidia-smi-q"]
    assert "-i 52:00.0" in why and "ECC,ROW_REMAPPER" in why


def test_a_grepped_q_gives_no_gpu_list(tmp_path):
    snap = collect(
        tmp_path, {"nvidia-smi-q.txt": read("nvidia-smi-q/grep-correctable-two-lines-stas00-debug.txt")}
    )
    assert snap["gpus"] == [] and errors(snap)["nvidia-smi-q"] == "unparsable"
    assert "grep -i correctable" in snap["partial"]["nvidia-smi-q"]


def test_one_gpu_selected_with_i_lands_on_its_bus_id(tmp_path):
    """SYNTHETIC selection from a real 8-GPU node: its table, and `-q -i 3` cut from its -q."""
    q = read("nvidia-smi-q/h100-sxm-8gpu-565.57.01-nvidia-smi-a-full-thamada-gls.txt")
    head, *sections = re.split(r"(?m)^(?=GPU 0000)", q)
    selected = (
        "$ nvidia-smi -q -i 3\n"
        + head
        + sections[3].replace(
            "Pending                           : No", "Pending                           : Yes", 1
        )
    )
    snap = collect(
        tmp_path,
        {
            "nvidia-smi.txt": read("nvidia-smi/h100-sxm-8gpu-565.57.01-same-node-as-q-thamada-gls.txt"),
            "nvidia-smi-q.txt": selected,
        },
    )
    gpus = snap["gpus"]
    assert len(gpus) == 8 and gpus[3]["bus_id"] == sections[3].split()[1]
    assert [g["retired_pages_pending"] for g in gpus] == [None] * 8
    assert [g["remapped_rows_pending"] for g in gpus] == [None, None, None, True, None, None, None, None]
    assert gpus[3]["uuid"] and gpus[0]["uuid"] is None
    assert "-i 3" in snap["partial"]["nvidia-smi-q"] and "nvidia-smi" not in snap["partial"]


# ---------------------------------------------------------------- CSV


def test_query_gpu_columns_from_an_aliased_header_and_elided_rows(tmp_path):
    snap = collect(
        tmp_path,
        {
            "nvidia-smi-query-gpu.csv": read(
                "nvidia-smi-query-gpu/h100-name-bus-vbios-gpu_name-alias-elided-stas00-debug.csv"
            )
        },
    )
    assert [g["bus_id"] for g in snap["gpus"]] == ["00000000:04:00.0", "00000000:8B:00.0"]
    assert "[...]" in snap["partial"]["nvidia-smi-query-gpu"]


def test_query_gpu_with_health_columns(tmp_path):
    snap = collect(
        tmp_path,
        {
            "nvidia-smi-query-gpu.csv": read(
                "nvidia-smi-query-gpu/h200-267-columns-ecc-remapped-rows-nvidia-gpu-exporter.csv"
            )
        },
    )
    (g,) = snap["gpus"]
    assert (g["name"], g["bus_id"], g["memory_total_mib"], g["ecc_mode"]) == (
        "NVIDIA H200",
        "00000000:83:00.0",
        143771,
        "Enabled",
    )
    assert (g["ecc_volatile_uncorrectable"], g["remapped_rows_pending"], g["remapped_rows_failure"]) == (
        0,
        False,
        False,
    )
    assert snap["driver"]["version"] == "590.48.01" and snap["partial"] == {}


def test_query_gpu_noheader_columns_inferred_from_values_are_partial(tmp_path):
    snap = collect(
        tmp_path,
        {
            "nvidia-smi-query-gpu.csv": read(
                "nvidia-smi-query-gpu/noheader-index-name-three-memory-columns-2x-h100-log-label-EXCERPT.csv"
            )
        },
    )
    assert [(g["index"], g["name"], g["memory_total_mib"], g["memory_used_mib"]) for g in snap["gpus"]] == [
        (0, "NVIDIA H100 80GB HBM3", 81559, 0),
        (1, "NVIDIA H100 80GB HBM3", 81559, 37155),
    ]
    assert "inferred" in snap["partial"]["nvidia-smi-query-gpu"]


def test_query_gpu_noheader_columns_from_the_pasted_command(tmp_path):
    """The akash output line; the `$ ` command line in front is SYNTHETIC (the PR quotes it above)."""
    line = read("nvidia-smi-query-gpu/noheader-name-pci-device-id-h100-nvl-akash-provider-configs-91.csv")
    alone = collect(tmp_path, {"nvidia-smi-query-gpu.csv": line}, "alone")
    assert "inferred" in alone["partial"]["nvidia-smi-query-gpu"]
    cmd = "$ nvidia-smi --query-gpu=name,pci.device_id --format=csv,noheader\n" + line
    snap = collect(tmp_path, {"nvidia-smi-query-gpu.csv": cmd}, "with-command")
    assert [g["name"] for g in snap["gpus"]] == ["NVIDIA H100 NVL"] and snap["partial"] == {}


def test_compute_apps_placed_on_their_gpu(tmp_path):
    snap = collect(
        tmp_path,
        {
            "nvidia-smi-query-compute-apps.csv": read(
                "nvidia-smi-query-compute-apps/h200-3-processes-header-units-nvidia-gpu-exporter.csv"
            ),
            "nvidia-smi-query-gpu.csv": read(
                "nvidia-smi-query-gpu/h200-267-columns-ecc-remapped-rows-nvidia-gpu-exporter.csv"
            ),
        },
    )
    procs = [(p["pid"], p["name"], p["used_mib"], p["gpu_index"]) for p in snap["gpu_processes"]]
    assert procs == [
        (10291, "/root/tools/memhog", 2566, 0),
        (10293, "/root/tools/memhog", 1542, 0),
        (10309, "./gpu_burn", 28234, 0),
    ]


# ---------------------------------------------------------------- RDMA


def test_ibstatus_cut_inside_a_block_is_partial(tmp_path):
    snap = collect(
        tmp_path,
        {
            "ibstatus.txt": read(
                "ibstatus/3-mlx5-roce-100g-edr-ethernet-cut-inside-third-nccl-1866-EXCERPT.txt"
            )
        },
    )
    ports = [
        (p["device"], p["state"], p["physical_state"], p["rate_gbps"], p["link_layer"])
        for p in snap["ib_ports"]
    ]
    assert ports[:2] == [
        ("mlx5_0", "Active", "LinkUp", 100.0, "Ethernet"),
        ("mlx5_1", "Active", "LinkUp", 100.0, "Ethernet"),
    ]
    assert ports[2] == ("mlx5_2", None, None, None, None)
    assert "mlx5_2 port 1: no state" in snap["partial"]["ibstatus"]


def test_ibstat_with_tool_noise_and_a_cut_port(tmp_path):
    snap = collect(
        tmp_path,
        {"ibstat.txt": read("ibstat/mlx4-2-ports-ibwarn-debug-lines-set-x-rdma-core-847-EXCERPT.txt")},
    )
    assert [(p["port"], p["state"], p["physical_state"], p["rate_gbps"]) for p in snap["ib_ports"]] == [
        (1, "Down", "Disabled", 10.0),
        (2, "Active", "LinkUp", 56.0),
    ]
    assert "port 2: no link_layer" in snap["partial"]["ibstat"]


def test_ibstat_elided_and_stopped_by_ibpanic(tmp_path):
    snap = collect(tmp_path, {"ibstat.txt": read("ibstat/elided-head-ibpanic-mlx5_8-gpud-752.txt")})
    (p,) = snap["ib_ports"]
    assert (p["device"], p["state"], p["link_layer"], p["ca_type"], p["firmware"]) == (
        "mlx5_7",
        "Active",
        "InfiniBand",
        None,
        None,
    )
    why = snap["partial"]["ibstat"]
    assert "(...)" in why and "ibpanic" in why


def test_rdma_link_forms(tmp_path):
    roce = collect(
        tmp_path,
        {"rdma-link.txt": read("rdma-link/roce-2-links-netdev-trailing-space-root-prompt-3fs-283.txt")},
        "a",
    )
    assert [
        (p["device"], p["state"], p["physical_state"], p["netdev"], p["link_layer"]) for p in roce["ib_ports"]
    ] == [
        ("mlx5_0", "Active", "LinkUp", "p1p1", None),
        ("mlx5_1", "Active", "LinkUp", "p1p2", None),
    ]
    ib = collect(
        tmp_path, {"rdma-link.txt": read("rdma-link/ib-port-down-polling-lid-sm-lid-rccl-1423.txt")}, "b"
    )
    (p,) = ib["ib_ports"]
    assert (p["state"], p["physical_state"], p["link_layer"], p["lid"], p["sm_lid"]) == (
        "Down",
        "Polling",
        "InfiniBand",
        3403,
        1,
    )
    rxe = collect(tmp_path, {"rdma-link.txt": read("rdma-link/soft-roce-rxe-prompt-3fs-263.txt")}, "c")
    assert [p["device"] for p in rxe["ib_ports"]] == ["rxe_0"] and rxe["errors"] == []


def test_ib_sources_merge_per_port(tmp_path):
    """SYNTHETIC pairing: ibstat of a node and an `rdma link` line for the same device give one
    port with the state, rate and link layer of ibstat and the netdev of rdma link."""
    snap = collect(
        tmp_path,
        {
            "ibstat.txt": read("ibstat/bf3-roce-mlx5_bond_0-1-ethernet-link-layer-excerpt-pplx.txt"),
            "rdma-link.txt": "link mlx5_bond_0/1 state ACTIVE physical_state LINK_UP netdev bond0\n",
        },
    )
    first = snap["ib_ports"][0]
    assert (first["device"], first["rate_gbps"], first["link_layer"], first["netdev"]) == (
        "mlx5_bond_0",
        200.0,
        "Ethernet",
        "bond0",
    )
    assert len(snap["ib_ports"]) == 2


# ---------------------------------------------------------------- AMD


def test_rocm_smi_key_value_form(tmp_path):
    snap = collect(
        tmp_path, {"rocm-smi.txt": read("rocm-smi/mi300x-4gpu-rocm-smi-a-key-value-thamada-gls.txt")}
    )
    assert [(g["name"], g["vendor"]) for g in snap["gpus"]] == [("AMD Instinct MI300X OAM", "amd")] * 4
    assert snap["gpus"][0]["bus_id"] and snap["extra"]["amdgpu_version"] == "6.7.0"
    assert snap["driver"]["version"] is None and snap["driver"]["status"] == "unknown"


def test_amd_smi_static_and_version(tmp_path):
    snap = collect(
        tmp_path,
        {
            "amd-smi.txt": read("amd-smi/mi350x-static-asic-bus-vram-gpu0-rocm-systems-2987-EXCERPT.txt"),
            "amd-smi-version.txt": read(
                "amd-smi/amd-smi-version-25.3.0-rocm6.4.0-amdgpu-field-k8s-device-plugin-157.txt"
            ),
        },
    )
    (g,) = snap["gpus"]
    assert (g["name"], g["bus_id"], g["vendor"]) == ("AMD Instinct MI350X", "0000:05:00.0", "amd")
    assert snap["extra"]["rocm_version"] == "6.4.0" and snap["extra"]["gfx_targets"] == ["gfx950"]


def test_rocm_collect_env_gives_no_nvidia_gpu(tmp_path):
    for name, model, gfx in (
        ("flat-rocm-mi300x-info-platform-rocm-vllm-14397-EXCERPT.txt", "AMD Instinct MI300X", "gfx942"),
        (
            "flat-rocm-mi210-k8s-prompt-transformers-cache-notice-vllm-10855-EXCERPT.txt",
            "AMD Instinct MI210",
            "gfx90a",
        ),
        (
            "sectioned-rocm-rx7900xtx-gfx1100-empty-cuda-module-loading-vllm-34154-EXCERPT.txt",
            "AMD Radeon RX 7900 XTX",
            "gfx1100",
        ),
    ):
        snap = collect(tmp_path, {"vllm-collect-env.txt": read(f"vllm-collect-env/{name}")}, name)
        assert snap["gpus"] == [], name  # one model of device 0, not a count
        assert (
            snap["extra"]["gpu_vendor"],
            snap["extra"]["amd_gpu_model"],
            snap["extra"]["gfx_targets"],
        ) == ("amd", model, [gfx])
        assert snap["driver"]["version"] is None and snap["topology"]["matrix"] == {}
        assert "not how many" in snap["partial"]["vllm-collect-env"]


def test_rocm_smi_weights_are_not_link_types(tmp_path):
    snap = collect(
        tmp_path,
        {
            "vllm-collect-env.txt": read(
                "vllm-collect-env/vllm-info-rocm-smi-weight-matrix-8-mi-gpus-vllm-46179-EXCERPT.txt"
            )
        },
    )
    assert snap["topology"]["matrix"] == {} and snap["extra"]["gpu_vendor"] == "amd"
    assert snap["vllm"]["version"] == "0.23.1rc1.dev196" and snap["vllm"]["git_sha"] == "b9a7cd464"


def test_nvidia_collect_env_topology_cut_is_partial(tmp_path):
    snap = collect(
        tmp_path,
        {
            "vllm-collect-env.txt": read(
                "vllm-collect-env/vllm-info-tab-topology-8gpu-8nic-cut-at-nic2-vllm-22372-EXCERPT.txt"
            )
        },
    )
    topo = snap["topology"]
    assert len(topo["matrix"]) == 10 and topo["matrix"]["GPU4"]["NIC4"] == "PIX"
    assert topo["cpu_affinity"]["GPU7"] == "56-111,168-223" and "gpu_vendor" not in snap["extra"]
    assert "10 of 16 rows" in snap["partial"]["vllm-collect-env"]


def test_flat_collect_env_keeps_its_environment_block(tmp_path):
    """SYNTHETIC tail of the flat layout (libraries, vLLM info, then `VAR=value` lines, as the
    pre-2025 collect_env prints it): the environment block after the libraries is read."""
    text = (
        "Versions of relevant libraries:\n[pip3] numpy==1.26.4\n[pip3] torch==2.5.1+rocm6.2\n[conda] Could not collect\n"
        "ROCM Version: 6.2.41134-65d174c3e\nNeuron SDK Version: N/A\nvLLM Version: 0.6.6.post1\n"
        "vLLM Build Flags:\nCUDA Archs: Not Set; ROCm: Enabled; Neuron: Disabled\nGPU Topology:\n"
        "NCCL_CUMEM_ENABLE=0\nPYTORCH_ROCM_ARCH=gfx90a;gfx942\nVLLM_USE_TRITON_FLASH_ATTN=0\n"
    )
    snap = collect(tmp_path, {"vllm-collect-env.txt": text})
    assert snap["env"]["NCCL_CUMEM_ENABLE"] == "0" and snap["env"]["VLLM_USE_TRITON_FLASH_ATTN"] == "0"
    assert snap["extra"]["rocm_version"] == "6.2.41134-65d174c3e"


# ---------------------------------------------------------------- docker inspect, lsmod


def test_docker_inspect_fragments(tmp_path):
    go_list = collect(
        tmp_path,
        {
            "docker-image-inspect.json": read(
                "docker-image-inspect/format-repodigests-go-list-hub-feedback-863.txt"
            )
        },
        "a",
    )
    assert (
        go_list["image"]["digest"]
        == "sha256:970bd38ce55af4648dd39fbe8918fb28f785d2006d036ae51345e7e9f47539e2"
    )
    assert "RepoDigests" in go_list["partial"]["docker-image-inspect"] and go_list["image"]["present"] is True
    bare = collect(
        tmp_path,
        {
            "docker-image-inspect.json": read(
                "docker-image-inspect/bare-sha256-image-id-go-vela-community-500.txt"
            )
        },
        "b",
    )
    assert bare["image"]["id"] is None and bare["image"]["digest"] is None  # which field it is is not known
    assert bare["extra"]["docker_inspect_fragment"]["sha256"].startswith("sha256:f951fe")
    assert "docker-image-inspect" in bare["partial"]
    # SYNTHETIC: `jq` fragments of an inspect
    digests = collect(
        tmp_path,
        {
            "docker-image-inspect.json": "$ docker inspect vllm/vllm-openai:v0.11.0 | jq '.[0].RepoDigests'\n[\n  \"vllm/vllm-openai@sha256:"
            + "a" * 64
            + '"\n]\n'
        },
        "c",
    )
    assert digests["image"]["digest"] == "sha256:" + "a" * 64 and "docker-image-inspect" in digests["partial"]
    empty_field = collect(
        tmp_path, {"docker-image-inspect.json": "$ docker inspect x | jq '.[0].RepoDigests'\n[]\n"}, "d"
    )
    assert (
        empty_field["image"]["present"] is True
        and "not a missing image" in empty_field["partial"]["docker-image-inspect"]
    )
    absent = collect(tmp_path, {"docker-image-inspect.json": "[]\n"}, "e")
    assert absent["image"]["present"] is False and absent["errors"] == [] and absent["partial"] == {}


def test_lsmod_without_header_or_command_is_partial(tmp_path):
    snap = collect(tmp_path, {"lsmod.txt": read("lsmod/nvidia-peermem-loaded-ib-core-users-gpud-39.txt")})
    assert "nvidia_peermem" in snap["kernel_modules"] and "header" in snap["partial"]["lsmod"]


def test_transcript_with_the_new_commands(tmp_path):
    """One pasted transcript: `$ ibstat`, `$ rdma link show`, `$ lsmod | grep nvidia_peermem`."""
    paste = tmp_path / "paste.txt"
    paste.write_text(
        "$ ibstat\n"
        + read("ibstat/bf3-roce-mlx5_bond_0-1-ethernet-link-layer-excerpt-pplx.txt")
        + read("rdma-link/roce-2-links-netdev-trailing-space-root-prompt-3fs-283.txt")
        + "$ lsmod | grep nvidia_peermem\n$ \n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["collect", "--from", str(paste), "--json"])
    assert result.exit_code == 0, result.output
    snap = json.loads(result.stdout)
    assert [p["device"] for p in snap["ib_ports"]] == ["mlx5_bond_0", "mlx5_bond_1", "mlx5_0", "mlx5_1"]
    assert snap["kernel_modules"] == [] and snap["lsmod_grep"]["patterns"] == ["nvidia_peermem"]
    assert "grep nvidia_peermem" in snap["partial"]["lsmod"]


# ---------------------------------------------------------------- live


def test_live_collect_runs_the_rdma_and_compute_apps_probes(tmp_path, recordings):
    (recordings / "ibstat.txt").write_text(
        read("ibstat/h-series-12ca-cx7-ndr400-ib-plus-cx6dx-ethernet-mooncake.txt")
    )
    (recordings / "rdma-link.txt").write_text(read("rdma-link/ib-port-down-polling-lid-sm-lid-rccl-1423.txt"))
    (recordings / "nvidia-smi-query-compute-apps.csv").write_text(
        read("nvidia-smi-query-compute-apps/h200-3-processes-header-units-nvidia-gpu-exporter.csv")
    )
    out = tmp_path / "bundle"
    proc = run_cli(["collect", "-o", str(out), "--json", "--timeout", "20"], fake_env(recordings))
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(proc.stdout)
    manifest = json.loads((out / "manifest.json").read_text())
    status = {s["name"]: s["status"] for s in manifest["sources"]}
    assert (
        status["ibstat"] == "ok"
        and status["rdma-link"] == "ok"
        and status["nvidia-smi-query-compute-apps"] == "ok"
    )
    assert status["ibv-devinfo"] == "nonzero"  # the fake has no recording for it
    ports = {(p["device"], p["port"]): p for p in snap["ib_ports"]}
    assert len(ports) == 12 and ports[("mlx5_7", 1)]["state"] == "Active"
    # ibstat's values win (state Active, lid 0); rdma link only fills what ibstat left empty
    assert (ports[("mlx5_7", 1)]["state"], ports[("mlx5_7", 1)]["lid"]) == ("Active", 0)
    assert (out / "ibstat.txt").exists() and (out / "rdma-link.txt").exists()
    assert dig(snap, "#gpu_processes") >= 1


def test_the_summary_says_partial(tmp_path):
    d = tmp_path / "captured"
    d.mkdir()
    (d / "lsmod.txt").write_text(
        read("lsmod/lsmod-grep-nvidia-rhel8-no-uvm-no-peermem-data-science-stack-90.txt")
    )
    result = CliRunner().invoke(app, ["collect", "--from", str(d)])
    assert result.exit_code == 0, result.output
    assert "partial: captured through `grep nvidia`" in result.output and "(1 partial)" in result.output
    again = CliRunner().invoke(app, ["collect", "--from", str(d), "-o", str(tmp_path / "b")])
    assert again.exit_code == 0
    reread = CliRunner().invoke(app, ["collect", "--from", str(tmp_path / "b"), "--json"])
    assert json.loads(reread.stdout)["partial"]["lsmod"].startswith("captured through `grep nvidia`")


def test_a_pipe_that_only_reformats_is_not_partial(tmp_path):
    """`ibdev2netdev | column -t` keeps every line (real paste, cluster-health#4)."""
    snap = collect(
        tmp_path,
        {
            "ibdev2netdev.txt": read(
                "ibdev2netdev/12hca-column-t-with-comments-ib-down-roce-up-cluster-health-4.txt"
            )
        },
    )
    assert len(snap["rdma"]) == 12 and snap["partial"] == {}


def test_compute_apps_rows_none_read_is_unparsable_not_no_processes(tmp_path):
    """A compute-apps CSV whose rows fit no column reading must not come out as "no processes"."""
    snap = collect(
        tmp_path,
        {"nvidia-smi-query-compute-apps.csv": "pid, process_name, used_memory [MiB]\nabc, x, 1 MiB\n"},
    )
    assert snap["gpu_processes"] == []
    assert errors(snap)["nvidia-smi-query-compute-apps"] == "unparsable"


def test_compute_apps_without_pid_column_keeps_the_rows(tmp_path):
    """`--query-compute-apps=gpu_uuid,name`: the user left pid out; each row is still a process."""
    text = (
        "# nvidia-smi --query-compute-apps=gpu_uuid,name --format=csv\n"
        "gpu_uuid, process_name\nGPU-d0180485-9584-433c-6782-c335d5df2cb3, vgpu\n"
    )
    snap = collect(tmp_path, {"nvidia-smi-query-compute-apps.csv": text})
    assert [(p["pid"], p["name"], p["gpu_uuid"]) for p in snap["gpu_processes"]] == [
        (None, "vgpu", "GPU-d0180485-9584-433c-6782-c335d5df2cb3")
    ]


def test_topology_last_row_cut_inside_a_cell_drops_that_cell(tmp_path):
    text = (
        "        GPU0    GPU1    GPU2    CPU Affinity    NUMA Affinity\n"
        "GPU0     X      NV18    NV18    0-31    0\n"
        "GPU1    NV18     X      NV1\n"
    )
    snap = collect(tmp_path, {"nvidia-smi-topo-m.txt": text})
    assert snap["topology"]["matrix"]["GPU1"] == {"GPU0": "NV18", "GPU1": "X"}
    assert "row GPU1 is the last line and stops after 3 of 3 cells" in snap["partial"]["nvidia-smi-topo-m"]
    assert snap["topology"]["matrix"]["GPU0"]["GPU2"] == "NV18"  # a whole row keeps every cell


def test_ibstat_of_one_named_device_is_partial(tmp_path):
    text = read("ibstat/one-ca-mlx5_7-down-but-linkup-no-sm-prompt-network-operator-249.txt")
    snap = collect(tmp_path, {"ibstat.txt": text})
    assert [p["device"] for p in snap["ib_ports"]] == ["mlx5_7"]
    assert "limited to mlx5_7" in snap["partial"]["ibstat"]
