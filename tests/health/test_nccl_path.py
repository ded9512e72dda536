"""`vllm-medic nccl-path`: the per-rank communication table and its findings, on real NCCL_DEBUG=INFO logs."""

from __future__ import annotations

import gzip
import json

from healthkit import DATA, data, ids
from typer.testing import CliRunner

from vllm_medic.cli import app
from vllm_medic.health.nccl_path import nccl_findings, normalise_transport, parse_nccl_logs

runner = CliRunner()
NCCL = DATA / "nccl"


def _run(*paths, extra=()):
    res = runner.invoke(app, ["nccl-path", *[str(p) for p in paths], "--json", *extra])
    return res.exit_code, json.loads(res.stdout)


def test_transport_names():
    assert normalise_transport("NET/IB/0/GDRDMA") == "NET/IB/GDRDMA"
    assert normalise_transport("NET/IBext_v8/2") == "NET/IBext_v8"
    assert normalise_transport("NET/Socket/3") == "NET/Socket"
    assert normalise_transport("P2P/CUMEM/read") == "P2P/CUMEM"
    assert normalise_transport("P2P/IPC/read") == "P2P/IPC"


def test_gdrdma_path_passes_and_ranks_come_from_channel_lines():
    code, out = _run(NCCL / "ib-gdrdma-a100-nccl-707-excerpt.txt")
    assert code == 0
    assert [(r["rank"], r["dev"], r["transports"], r["gdr"]) for r in out["table"]] == [
        (str(i), str(i), "NET/IB/GDRDMA", "yes") for i in range(4)
    ]
    assert ids(out)["HLT-NCCL000"]["severity"] == "pass"


def test_ib_without_gpu_direct_rdma_warns():
    code, out = _run(NCCL / "ib-without-gdr-no-module-nccl-899-excerpt.txt")
    f = ids(out)["HLT-NCCL003"]
    assert f["severity"] == "warn" and code == 0
    assert any("mlx5_1: Disabled (no module)" in e for e in f["evidence"])
    assert "nvidia_peermem" in f["fix"][0]
    assert {r["host"]: r["gdr"] for r in out["table"]} == {"6a5a91752e39": "no", "21346d5cefce": "no"}


def test_sockets_between_nodes_without_rdma_warn():
    code, out = _run(NCCL / "socket-between-nodes-nccl-952-excerpt.txt")
    f = ids(out)["HLT-NCCL002"]
    assert f["severity"] == "warn" and "TCP sockets" in f["title"]
    assert out["table"][-1]["rank"] == "15" and "NET/Socket" in out["table"][-1]["transports"]


def test_sockets_while_ib_exists_fail_and_link_local_bootstrap_is_flagged():
    code, out = _run(NCCL / "ib-present-but-socket-channels-link-local-SYNTHETIC.txt")
    assert code == 1
    found = ids(out)
    assert found["HLT-NCCL002"]["severity"] == "fail"
    assert any("mlx5_0:1/IB" in e for e in found["HLT-NCCL002"]["evidence"])
    bad = found["HLT-NCCL004"]
    assert (
        "nodeA:4100[0]: OOB interface docker0:169.254.20.10 - docker0 is a loopback/virtual/container interface"
        in bad["evidence"]
    )
    assert "NCCL_SOCKET_IFNAME" in bad["fix"][0]
    assert [r["rank"] for r in out["table"]] == ["0", "8"]


def test_version_mismatch_across_ranks_fails():
    code, out = _run(NCCL / "version-mismatch-two-hosts-SYNTHETIC.txt")
    f = ids(out)["HLT-NCCL001"]
    assert code == 1 and f["severity"] == "fail"
    assert f["title"] == "Ranks run different NCCL versions: 2.26.2, 2.27.6"


def test_same_version_on_two_hosts_and_env_seen():
    parsed = parse_nccl_logs([("x", data("nccl/two-hosts-nccl-2.27.6-cuda13-nccl-1866-excerpt.txt"))])
    rows = parsed["ranks"]
    assert {(r.host, r.nccl_version, r.nccl_cuda) for r in rows} == {
        ("cl4-gpu03-vm", "2.27.6", "13.0"),
        ("cl4-gpu04-vm", "2.27.6", "13.0"),
    }
    assert rows[0].env["NCCL_SOCKET_IFNAME"] == "enp9s0np0"
    assert "HLT-NCCL001" not in {f.id for f in nccl_findings(parsed)}


def test_unprefixed_version_line_and_roce_oob():
    parsed = parse_nccl_logs([("x", data("nccl/roce-2node-h100-nccl-tests-185-excerpt.txt"))])
    by_host = {r.host: r for r in parsed["ranks"]}
    assert by_host["dgxh100-4"].nccl_version == "2.19.3"
    assert by_host["dgxh100-3"].hcas == ["mlx5_10:1/RoCE", "mlx5_11:1/RoCE"]
    assert by_host["dgxh100-3"].oob_iface == "enp220s0np0:11.1.128.128"
    assert by_host["dgxh100-3"].network == "IB"
    # init seen, no channel lines: says the transports are not in the log instead of passing
    (f,) = nccl_findings(parsed)
    assert f.id == "HLT-NCCL000" and f.severity.value == "info"


def test_several_files_gz_and_directory(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    (d / "node0.log.gz").write_bytes(gzip.compress(data("nccl/ib-gdrdma-a100-nccl-707-excerpt.txt").encode()))
    (d / "node1.log").write_text(data("nccl/socket-single-node-no-ib-vllm-4277-excerpt.txt"))
    code, out = _run(d)
    assert len(out["table"]) == 5 and {r["host"] for r in out["table"]} == {"10-90-43-152", "modal"}
    modal = next(r for r in out["table"] if r["host"] == "modal")
    assert modal["network"] == "Socket" and "eth0:172.20.104.2" in modal["interfaces"]


def test_terminal_table_and_usage_errors(fake_host, tmp_path):
    proc = fake_host.run_cli("nccl-path", str(NCCL / "ib-without-gdr-no-module-nccl-899-excerpt.txt"))
    assert proc.returncode == 0
    assert "NCCL communication path per rank" in proc.stdout and "21346d5cefce" in proc.stdout
    assert "[!] RDMA is used without GPU Direct RDMA" in proc.stdout
    proc = fake_host.run_cli("nccl-path", str(tmp_path / "missing.log"))
    assert proc.returncode == 2 and "no such file" in proc.stderr
    empty = tmp_path / "empty.log"
    empty.write_text("no nccl here\n\x00\x01\n")
    proc = fake_host.run_cli("nccl-path", str(empty), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["findings"][0]["severity"] == "info"


def test_line_prefixes_from_real_logs():
    from vllm_medic.health.nccl_path import split_nccl_line

    # Ray worker wrapper (vllm#15769) and a WARN with a source location (nccl-tests#166)
    ray = (
        "(RayWorkerWrapper pid=539) vllm-0:539:539 [6] NCCL INFO NVLS multicast support is available on dev 6"
    )
    assert split_nccl_line(ray) == (("vllm-0", 539, 6), "NVLS multicast support is available on dev 6")
    warn = "ubuntu:9621:9688 [3] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment"
    assert split_nccl_line(warn) == (
        ("ubuntu", 9621, 3),
        "misc/shmutils.cc:112 Error while creating shared memory segment",
    )
    assert split_nccl_line("include/shm.h:28 NCCL WARN Call to posix_fallocate failed") is None
    assert split_nccl_line("NCCL version 2.4.7+cuda10.0") is None


def test_sockets_fail_when_the_bundle_shows_rdma_ports(fake_host, tmp_path):
    """NCCL inside the container found no IB device, but the node's ibdev2netdev lists RDMA ports Up."""
    bundle = tmp_path / "node"
    bundle.mkdir()
    ib = DATA.parent / "collect" / "ibdev2netdev" / "hgx-12hca-roce-ens-naming-bond0-aihub0009.txt"
    (bundle / "ibdev2netdev.txt").write_text(ib.read_text())
    code, out = _run(NCCL / "socket-between-nodes-nccl-952-excerpt.txt", extra=("--from", str(bundle)))
    f = ids(out)["HLT-NCCL002"]
    assert code == 1 and f["severity"] == "fail"
    assert any("mlx5_0:1 (ens108np0, Up)" in e for e in f["evidence"])
    assert not any("mlx5_2:1" in e for e in f["evidence"])  # Down ports are not offered as the fix
    proc = fake_host.run_cli(
        "nccl-path", str(NCCL / "ib-gdrdma-a100-nccl-707-excerpt.txt"), "--from", str(tmp_path / "none")
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_cumem_channels_interleaved_lines_and_ray_wrapped_init():
    code, out = _run(
        NCCL / "p2p-cumem-interleaved-vllm-pr-27521-excerpt.txt",
        NCCL / "nvls-mnnvl-ray-vllm-15769-excerpt.txt",
    )
    rows = {r["process"]: r for r in out["ranks"]}
    cumem = rows["os-node-created-f8h54:5016[1]"]
    assert cumem["transports"] == {"P2P/CUMEM": 4} and cumem["rank"] == 1
    ray = rows["vllm-0:539[6]"]
    assert (ray["rank"], ray["nranks"], ray["nnodes"]) == (6, 8, 1)
    assert ray["env"] == {"NCCL_P2P_LEVEL": "NVL", "NCCL_CUMEM_ENABLE": "0"}  # Ray's "[repeated Nx]" stripped
    assert (
        next(t for t in out["table"] if t["host"] == "vllm-0")["transports"] == "- (NVLS multicast available)"
    )
    assert code == 0
