"""nvidia-smi parsers on real captured outputs (facts from tests/data/collect/SOURCES.md and INDEX.md)."""

from __future__ import annotations

import pytest
from tests.collect.conftest import sample

from vllm_medic.collect.parsers.nvidia_smi import classify_failure, parse_nvidia_smi_table
from vllm_medic.collect.parsers.nvidia_smi_query import (
    parse_nvidia_smi_q,
    parse_nvidia_smi_xml,
    parse_query_gpu_csv,
)

# file, driver, cuda, gpu count, first GPU name, total MiB, used MiB of GPU 0, processes, process section seen
TABLES = [
    (
        "nvidia-smi/h200-8gpu-570.124.06-cuda12.8-vllm-tp8-8-processes-truncated-names.txt",
        "570.124.06",
        "12.8",
        8,
        "NVIDIA H200",
        143771,
        84474,
        8,
        True,
    ),
    (
        "nvidia-smi/b200-8gpu-575.57.08-cuda12.9-idle-no-process-section-modal-glossary.txt",
        "575.57.08",
        "12.9",
        8,
        "NVIDIA B200",
        183359,
        0,
        0,
        False,
    ),
    (
        "nvidia-smi/gb300-4gpu-580.105.08-cuda13.0-oci-bm-gpu-gb300-4.txt",
        "580.105.08",
        "13.0",
        4,
        "NVIDIA GB300",
        284208,
        1,
        0,
        True,
    ),
    (
        "nvidia-smi/a100-sxm4-80gb-4gpu-555.42.02-cuda12.5-idle-thamada-gls.txt",
        "555.42.02",
        "12.5",
        4,
        "NVIDIA A100-SXM4-80GB",
        81920,
        1,
        0,
        True,
    ),
    (
        "nvidia-smi/a100-sxm4-40gb-580.126.09-cuda13.0-exclusive-process-bottlerocket-EXCERPT.txt",
        "580.126.09",
        "13.0",
        2,
        "NVIDIA A100-SXM4-40GB",
        40960,
        598,
        0,
        False,
    ),
    (
        "nvidia-smi/p100-470.82.01-legacy-narrow-inforom-corrupted-warning.txt",
        "470.82.01",
        "11.4",
        1,
        "Tesla P100-PCIE...",
        16280,
        0,
        0,
        True,
    ),
    (
        "nvidia-smi/rtx6000ada-1gpu-575.57.08-cuda12.9-vllm-enginecore-process-truncated-gpu-name.txt",
        "575.57.08",
        "12.9",
        1,
        "NVIDIA RTX 6000 Ada Gene...",
        49140,
        44578,
        1,
        True,
    ),
    (
        "nvidia-smi/b200-r610-kmd-version-cuda-umd-13.3-sglang-27487-EXCERPT.txt",
        "610.43.02",
        "13.3",
        2,
        "NVIDIA B200",
        183359,
        0,
        0,
        False,
    ),
    (
        "nvidia-smi/h100-535.129.03-cuda12.2-mid-width-gvisor-10413-EXCERPT.txt",
        "535.129.03",
        "12.2",
        1,
        "NVIDIA H100 80GB HBM3",
        81559,
        72459,
        0,
        False,
    ),
    (
        "nvidia-smi/gb200-1gpu-580.126.20-cuda13.0-k8s-pod-no-processes-eks-p6e.txt",
        "580.126.20",
        "13.0",
        1,
        "NVIDIA GB200",
        189471,
        0,
        0,
        True,
    ),
    (
        "nvidia-smi/gtx680-331.62-no-cuda-version-two-line-rows-cbio-38-EXCERPT.txt",
        "331.62",
        None,
        3,
        "GeForce GTX 680",
        4095,
        9,
        0,
        False,
    ),
]


@pytest.mark.parametrize(
    "rel,driver,cuda,count,name,total,used,nproc,psection",
    TABLES,
    ids=[t[0].split("/")[1][:40] for t in TABLES],
)
def test_table_facts(rel, driver, cuda, count, name, total, used, nproc, psection):
    r = parse_nvidia_smi_table(sample(rel))
    assert r.driver.status == "ok"
    assert (r.driver.version, r.driver.cuda_version) == (driver, cuda)
    assert len(r.gpus) == count
    assert [g.index for g in r.gpus] == list(range(count))
    g0 = r.gpus[0]
    assert (g0.name, g0.memory_total_mib, g0.memory_used_mib) == (name, total, used)
    assert len(r.processes) == nproc
    assert r.processes_section is psection
    assert r.problems == []


def test_h200_process_rows_keep_pid_name_and_memory():
    r = parse_nvidia_smi_table(sample(TABLES[0][0]))
    p0, p7 = r.processes[0], r.processes[-1]
    assert (p0.gpu_index, p0.pid, p0.name, p0.used_mib, p0.type) == (
        0,
        915920,
        "...niconda3/envs/vllm/bin/python",
        84464,
        "C",
    )
    assert (p7.gpu_index, p7.pid, p7.used_mib) == (7, 916344, 84272)
    assert [g.bus_id for g in r.gpus][:2] == ["00000000:19:00.0", "00000000:3B:00.0"]
    assert {g.mig_mode for g in r.gpus} == {"Disabled"}


def test_gb300_pci_domains_and_compute_mode():
    r = parse_nvidia_smi_table(sample(TABLES[2][0]))
    assert [g.bus_id.split(":")[0] for g in r.gpus] == ["00000008", "00000009", "00000018", "00000019"]
    assert {g.compute_mode for g in r.gpus} == {"Default"}


def test_exclusive_process_mode_and_utilisation():
    r = parse_nvidia_smi_table(sample(TABLES[4][0]))
    assert r.gpus[0].compute_mode == "E. Process" and r.gpus[0].utilization_pct == 11


def test_enginecore_process_seen_from_host():
    r = parse_nvidia_smi_table(sample(TABLES[6][0]))
    assert [(p.pid, p.name, p.used_mib) for p in r.processes] == [(86711, "VLLM::EngineCore", 44568)]


def test_trailing_warning_is_kept_not_parsed_as_gpu():
    r = parse_nvidia_smi_table(sample(TABLES[5][0]))
    assert r.warnings == ["WARNING: infoROM is corrupted at gpu 0000:0B:00.0"]


def test_mig_devices_section_is_read():
    r = parse_nvidia_smi_table(sample("nvidia-smi-mig/a100-mig-devices-section-nvitop-8-EXCERPT.txt"))
    assert [(m["gpu_index"], m["gi_id"], m["mig_dev"], m["memory_used_mib"]) for m in r.mig_devices] == [
        (1, 3, 0, 14366),
        (1, 5, 1, 9826),
        (1, 6, 2, 13),
    ]


@pytest.mark.parametrize(
    "rel,status,nvml,kmod",
    [
        (
            "nvidia-smi-errors/no-driver-couldnt-communicate-curly-quote-two-lines.txt",
            "no_driver",
            None,
            None,
        ),
        ("nvidia-smi-errors/nvml-version-mismatch-570.124.txt", "version_mismatch", "570.124", None),
        (
            "nvidia-smi-errors/nvml-version-mismatch-580.178-plus-proc-driver-version.txt",
            "version_mismatch",
            "580.178",
            "580.173.02",
        ),
    ],
)
def test_failure_texts(rel, status, nvml, kmod):
    r = parse_nvidia_smi_table(sample(rel))
    assert r.driver.status == status
    assert r.driver.nvml_library_version == nvml
    assert r.driver.kernel_module_version == kmod
    assert r.gpus == [] and r.problems == []


def test_no_driver_sentence_matches_with_straight_quote_and_one_line():
    text = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
    assert classify_failure(text)[0] == "no_driver"  # type: ignore[index]


@pytest.mark.parametrize("text", ["", "garbage\x00\x01 not a table", "| half | a | row", "+---+\n|===|\n"])
def test_garbage_never_raises(text):
    r = parse_nvidia_smi_table(text)
    assert r.gpus == [] and r.driver.status == "unknown"


def test_truncated_table_keeps_what_was_complete():
    text = sample(TABLES[0][0])
    cut = text[: text.index("|   3  NVIDIA H200")]
    r = parse_nvidia_smi_table(cut)
    assert [g.index for g in r.gpus] == [0, 1, 2] and r.processes_section is False


def test_xml_mig_a100():
    r = parse_nvidia_smi_xml(sample("nvidia-smi-q-x/a100-sxm4-40gb-mig-510.47.03-v11-netdata.xml"))
    assert (r.driver.version, r.driver.cuda_version) == ("510.47.03", "11.6")
    g = r.gpus[0]
    assert (g.name, g.uuid, g.mig_mode, g.memory_total_mib) == (
        "NVIDIA A100-SXM4-40GB",
        "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a",
        "Enabled",
        40960,
    )
    assert [(m["mig_dev"], m["gi_id"]) for m in r.mig_devices] == [(0, 1), (1, 2)]
    assert r.processes_section and r.processes == []


def test_xml_truncated_is_a_problem_not_a_crash():
    text = sample("nvidia-smi-q-x/a100-sxm4-40gb-mig-510.47.03-v11-netdata.xml")[:3000]
    r = parse_nvidia_smi_xml(text)
    assert r.gpus == [] and r.problems and "XML" in r.problems[0]


@pytest.mark.parametrize(
    "rel,driver,cuda,name,total,used,bus,fabric",
    [
        (
            "nvidia-smi-q/h100-1gpu-545.23.08-cuda12.3-nvidia-smi-a-full-della.txt",
            "545.23.08",
            "12.3",
            "NVIDIA H100 80GB HBM3",
            81559,
            2,
            "00000000:19:00.0",
            "Completed",
        ),
        (
            "nvidia-smi-q/h200-1gpu-550.90.12-nvidia-smi-a-full.txt",
            "550.90.12",
            "12.4",
            "NVIDIA H200",
            143771,
            1,
            None,
            "Completed",
        ),
    ],
)
def test_q_text(rel, driver, cuda, name, total, used, bus, fabric):
    r = parse_nvidia_smi_q(sample(rel))
    assert (r.driver.version, r.driver.cuda_version) == (driver, cuda)
    g = r.gpus[0]
    assert (g.name, g.memory_total_mib, g.memory_used_mib, g.fabric_state, g.fabric_status) == (
        name,
        total,
        used,
        fabric,
        "Success",
    )
    if bus:
        assert g.bus_id == bus
    assert r.processes_section and r.processes == []


def test_query_gpu_csv_with_units_and_elided_rows():
    r = parse_query_gpu_csv(
        sample("nvidia-smi-query-gpu/h100-pcie-switch-8gpu-clocks.sm-alias-header-590.48.01-elided.csv")
    )
    assert [(g.index, g.name, g.memory_total_mib) for g in r.gpus] == [(0, "NVIDIA H100 80GB HBM3", 81559)]
    assert r.driver.version == "590.48.01"
    assert "skipped" in r.problems[0]  # the author's "... 8 identical rows ..." line is not data


def test_query_gpu_csv_stops_at_the_next_query_header():
    r = parse_query_gpu_csv(
        sample("nvidia-smi-query-gpu/rtx3090-a6000-used-util-power-plus-empty-compute-apps-header.csv")
    )
    assert [(g.name, g.memory_used_mib, g.utilization_pct) for g in r.gpus] == [
        ("NVIDIA GeForce RTX 3090", 1, 0),
        ("NVIDIA RTX A6000", 1, 0),
    ]


def test_query_gpu_csv_without_header_uses_our_columns():
    row = (
        "3, NVIDIA H200, GPU-abc, 00000000:5D:00.0, 143771, 84522, 1, Enabled, Default, Disabled, 570.124.06"
    )
    r = parse_query_gpu_csv(row)
    g = r.gpus[0]
    assert (g.index, g.memory_total_mib, g.memory_used_mib, g.bus_id) == (
        3,
        143771,
        84522,
        "00000000:5D:00.0",
    )
    assert r.driver.version == "570.124.06"


@pytest.mark.parametrize(
    "rel,detail",
    [
        ("nvidia-smi-errors/gpu-is-lost-reboot-owod-81.txt", "GPU is lost"),
        (
            "nvidia-smi-errors/device-handle-unknown-error-prompt-syno-22.txt",
            "Unable to determine the device handle",
        ),
    ],
)
def test_gpu_lost_texts(rel, detail):
    r = parse_nvidia_smi_table(sample(rel))
    assert r.driver.status == "gpu_lost" and detail in r.driver.status_detail


def test_container_banner_then_a_table_cut_inside_its_header():
    r = parse_nvidia_smi_table(
        sample("nvidia-smi/in-container-cuda-banner-525.85.12-TRUNCATED-nvidia-container-toolkit-69.txt")
    )
    assert (r.driver.version, r.driver.cuda_version) == ("525.85.12", "12.0")
    assert r.gpus == [] and "no GPU rows" in r.problems[0]


def test_err_in_a_gpu_row_is_flagged():
    r = parse_nvidia_smi_table(
        sample("nvidia-smi/v100-err-power-usage-narrow-azhpc-diagnostics-77-EXCERPT.txt")
    )
    assert [(g.index, g.memory_used_mib, g.bus_id) for g in r.gpus] == [(1, 593, "00008ED0:00:00.0")]
    assert r.gpus_showing_err == [1] and "ERR! / 250W" in r.warnings[0]
