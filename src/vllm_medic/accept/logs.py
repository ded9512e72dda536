"""Server logs for the start step: read them (files, `docker logs`, `kubectl logs`) and count ranks.

Reading is bounded (size and time); a source that cannot be read becomes a note, never an exception.
The rank check is pure: distinct worker prefixes seen vs ``tensor_parallel_size x
pipeline_parallel_size`` from the logged engine config.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

MAX_LOG_BYTES = 64 * 1024 * 1024
COMMAND_TIMEOUT_S = 60.0

# (Worker_TP0 pid=70) / (Worker_DP1_PP0_TP3 pid=..) / (VllmWorker TP0 pid=..) / (RayWorkerWrapper pid=.., ip=..)
_WORKER_PREFIX = re.compile(
    r"^\((?P<name>(?:Vllm)?Worker(?:[ _][A-Z]+\d+)*|RayWorkerWrapper|VllmWorkerProcess)\s+pid=(?P<pid>\d+)(?:,\s*ip=(?P<ip>[^)\s]+))?\)"
)
_TP = re.compile(r"\btensor_parallel_size=(\d+)")
_PP = re.compile(r"\bpipeline_parallel_size=(\d+)")
_DP = re.compile(r"\bdata_parallel_size=(\d+)")


@dataclass
class LogSource:
    name: str
    lines: list[str] = field(default_factory=list)
    error: str | None = None


def read_sources(paths: tuple[Path, ...], docker: str | None, kubectl: str | None) -> list[LogSource]:
    sources: list[LogSource] = []
    for path in paths:
        sources.append(_read_file(path))
    if docker:
        sources.append(_run_logs(f"docker:{docker}", ["docker", "logs", docker]))
    if kubectl:
        sources.append(_run_logs(f"kubectl:{kubectl}", ["kubectl", "logs", kubectl]))
    return sources


def _read_file(path: Path) -> LogSource:
    src = LogSource(name=str(path))
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_LOG_BYTES)
    except OSError as exc:
        src.error = f"cannot read {path}: {exc.strerror or exc}"
        return src
    src.lines = data.decode("utf-8", "replace").splitlines()
    return src


def _run_logs(name: str, argv: list[str]) -> LogSource:
    src = LogSource(name=name)
    try:
        done = subprocess.run(argv, capture_output=True, timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        src.error = f"{argv[0]} is not installed or not on PATH"
        return src
    except subprocess.TimeoutExpired:
        src.error = f"`{' '.join(argv)}` did not finish within {COMMAND_TIMEOUT_S:.0f}s"
        return src
    if done.returncode != 0:
        src.error = f"`{' '.join(argv)}` exited {done.returncode}: {done.stderr.decode('utf-8', 'replace')[-300:].strip()}"
        return src
    # docker logs writes the container's stderr to our stderr: both are the server's log.
    text = (done.stdout + b"\n" + done.stderr).decode("utf-8", "replace")
    src.lines = text.splitlines()[: MAX_LOG_BYTES // 80]
    return src


@dataclass
class RankSummary:
    expected: int | None
    expected_evidence: str | None
    workers: dict[str, str]  # worker name (with ip for Ray) -> "source:line"

    @property
    def seen(self) -> int:
        return len(self.workers)


def rank_summary(sources: list[LogSource]) -> RankSummary:
    expected: int | None = None
    evidence: str | None = None
    workers: dict[str, str] = {}
    for src in sources:
        for i, line in enumerate(src.lines, start=1):
            m = _WORKER_PREFIX.match(line)
            if m:
                key = m.group("name")
                if m.group("name") in ("RayWorkerWrapper", "VllmWorkerProcess"):
                    key = f"{key} pid={m.group('pid')}" + (f" ip={m.group('ip')}" if m.group("ip") else "")
                workers.setdefault(key, f"{src.name}:{i}")
            if expected is None and "tensor_parallel_size=" in line:
                tp = _TP.search(line)
                pp = _PP.search(line)
                dp = _DP.search(line)
                if tp:
                    n = int(tp.group(1)) * (int(pp.group(1)) if pp else 1)
                    # Data-parallel ranks each run their own TP x PP workers (non-default DP only).
                    if dp and int(dp.group(1)) > 1:
                        n *= int(dp.group(1))
                    expected = n
                    evidence = (
                        f"{src.name}:{i}: tensor_parallel_size={tp.group(1)}"
                        + (f", pipeline_parallel_size={pp.group(1)}" if pp else "")
                        + (f", data_parallel_size={dp.group(1)}" if dp else "")
                    )
    return RankSummary(expected=expected, expected_evidence=evidence, workers=workers)


def first_matching(sources: list[LogSource], pattern: re.Pattern[str], limit: int = 5) -> list[str]:
    """``source:line: text`` for the first lines matching ``pattern`` (evidence for findings)."""
    hits: list[str] = []
    for src in sources:
        for i, line in enumerate(src.lines, start=1):
            if pattern.search(line):
                hits.append(f"{src.name}:{i}: {line.strip()[:300]}")
                if len(hits) >= limit:
                    return hits
    return hits
