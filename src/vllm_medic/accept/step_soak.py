"""Step 5, soak: fixed traffic for ``--soak DURATION`` in windows, the logs followed for NCCL / RDMA / NIC
errors, and drift tracked (p99 slope by least squares, error bursts, KV creep)."""

from __future__ import annotations

import re
from typing import Any

from vllm_medic.accept.context import RunContext
from vllm_medic.accept.outcome import StepOutcome
from vllm_medic.accept.traffic import health_failures, ms_percentiles, run_level
from vllm_medic.model import Category, Finding, Severity

NETWORK_LINE = re.compile(
    r"NCCL (?:error|WARN)|ncclSystemError|ncclRemoteError|unhandled system error|Watchdog caught collective|"
    r"ibv_\w+ failed|IBV_WC_\w+|mlx5\w*:.*(?:error|down)|NET/IB|RDMA.*(?:error|fail)|Link is Down|"
    r"NIC Link is Down|transport retry counter exceeded",
    re.IGNORECASE,
)
MIN_WINDOW_S = 2.0
P99_DRIFT_LIMIT = 0.5  # p99 growing by more than 50% of its start over the soak
DRIFT_MIN_DURATION_S = 60.0  # shorter soaks are dominated by warm-up noise: drift is not judged
DRIFT_MIN_WINDOWS = 5
KV_CREEP_LIMIT = 0.2  # KV usage 20 points higher at the end than at the start


def least_squares_slope(points: list[tuple[float, float]]) -> float | None:
    """Slope of y over x (units of y per unit of x), or None with fewer than 3 points."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def judge_soak(
    samples: list[dict[str, Any]], duration_s: float, error_budget: float, net_lines: list[str]
) -> list[Finding]:
    findings: list[Finding] = []
    if net_lines:
        findings.append(
            Finding(
                "ACC-SOAK-001", Severity.FAIL, Category.NCCL_NETWORK,
                f"{len(net_lines)} NCCL / RDMA / NIC error line(s) in the log during the soak", net_lines[:10],
                ["run `vllm-medic triage LOG` on the full log for the first failing rank",
                 "check the fabric: `ibstat`, `ibv_devinfo`, NCCL_DEBUG=INFO, and nccl-tests across the same nodes"],
            )
        )  # fmt: skip
    bursts = [s for s in samples if s["requests"] and s["errors"] > max(0, int(error_budget * s["requests"]))]
    if bursts:
        findings.append(
            Finding(
                "ACC-SOAK-002", Severity.FAIL, Category.OTHER,
                f"error bursts in {len(bursts)} of {len(samples)} soak windows",
                [f"t={s['t_s']:.0f}s: {s['errors']}/{s['requests']} failed ({s.get('error_kinds')})" for s in bursts[:10]],
                ["read the server log at those times (`vllm-medic triage LOG`); rerun the soak with --logs"],
            )
        )  # fmt: skip
    p99 = [(s["t_s"], s["e2e_p99_ms"]) for s in samples if s.get("e2e_p99_ms") is not None]
    slope = least_squares_slope(p99)
    judge_drift = duration_s >= DRIFT_MIN_DURATION_S and len(p99) >= DRIFT_MIN_WINDOWS
    if samples and not judge_drift:
        findings.append(
            Finding(
                "ACC-SOAK-006", Severity.INFO, Category.OTHER,
                f"soak too short to judge drift ({duration_s:.0f}s, {len(p99)} windows; needs "
                f"≥{DRIFT_MIN_DURATION_S:.0f}s and ≥{DRIFT_MIN_WINDOWS} windows)",
                ["E2E p99 per window (ms): " + ", ".join(f"{y:.0f}" for _, y in p99)],
                ["use --soak 10m (or longer) for a sign-off run"],
            )
        )  # fmt: skip
    if slope is not None and judge_drift and p99[0][1] > 0:
        growth = slope * duration_s / p99[0][1]
        if growth > P99_DRIFT_LIMIT:
            findings.append(
                Finding(
                    "ACC-SOAK-003", Severity.WARN, Category.OTHER,
                    f"E2E p99 drifted up {growth * 100:.0f}% over the soak",
                    [f"least-squares slope {slope:.2f} ms/s over {len(p99)} windows; p99 per window (ms): "
                     + ", ".join(f"{y:.0f}" for _, y in p99)],
                    ["look for growing queues or memory (KV creep, fragmentation); soak longer to confirm"],
                )
            )  # fmt: skip
    kv = [(s["t_s"], s["kv_cache_usage"]) for s in samples if s.get("kv_cache_usage") is not None]
    if (
        judge_drift
        and len(kv) >= 3
        and kv[-1][1] - kv[0][1] > KV_CREEP_LIMIT
        and (least_squares_slope(kv) or 0) > 0
    ):
        findings.append(
            Finding(
                "ACC-SOAK-004", Severity.WARN, Category.OOM_RUNTIME,
                f"KV-cache usage crept from {kv[0][1]:.2f} to {kv[-1][1]:.2f} under constant load",
                ["KV usage per window: " + ", ".join(f"{v:.2f}" for _, v in kv)],
                ["constant traffic should hold KV usage flat: check for requests that never finish (client "
                 "disconnects not aborted) and for prefix-cache retention settings"],
            )
        )  # fmt: skip
    invalid = [s for s in samples if s.get("valid") is False]
    if invalid:
        findings.append(
            Finding(
                "ACC-SOAK-008", Severity.WARN, Category.OTHER,
                f"the load generator saturated in {len(invalid)} of {len(samples)} soak windows",
                [f"windows at t={', '.join(str(s['t_s']) for s in invalid[:10])}s: latencies there include client delay"],
                ["run accept from a less busy host, or soak at a lower concurrency"],
            )
        )  # fmt: skip
    if not any(f.severity is Severity.FAIL for f in findings) and samples:
        total = sum(s["requests"] for s in samples)
        errs = sum(s["errors"] for s in samples)
        findings.append(
            Finding(
                "ACC-SOAK-000", Severity.PASS, Category.OTHER,
                f"soak held for {duration_s:.0f}s: {total - errs}/{total} requests ok",
                [f"{len(samples)} windows; p99 slope "
                 + ("n/a" if slope is None else f"{slope:.2f} ms/s"), "no NCCL/RDMA/NIC errors in the followed logs"
                 if net_lines == [] else ""],
            )
        )  # fmt: skip
    if not samples:
        findings.append(
            Finding(
                "ACC-SOAK-005", Severity.FAIL, Category.OTHER, "the soak produced no measurements", [], []
            )
        )
    return findings


class TriageFollower:
    """Triage's follow mode in a thread; anomalies in lines that existed before the soak are ignored
    (it reads files from their beginning)."""

    def __init__(self, ctx: RunContext) -> None:
        import threading

        from vllm_medic.triage import api as triage_api

        opts = ctx.opts
        self.skip_lines = {str(p): _count_lines(p) for p in opts.log_paths}
        self.anomalies: list[Any] = []
        self.error: str | None = None
        self.stop = threading.Event()
        inputs = [str(p) for p in opts.log_paths]
        docker = [opts.docker] if opts.docker else []
        kubectl = [opts.kubectl] if opts.kubectl else []

        def target() -> None:
            try:
                triage_api.follow(inputs, self.anomalies.append, self.stop, docker=docker, kubectl=kubectl)
            except Exception as exc:  # noqa: BLE001 - reported as a finding, the soak goes on
                self.error = f"{type(exc).__name__}: {exc}"

        self.thread = threading.Thread(target=target, name="accept-soak-follow", daemon=True)
        self.thread.start()

    def new_network_lines(self) -> list[str]:
        hits: list[str] = []
        while self.anomalies:
            a = self.anomalies.pop(0)
            if a.line <= self.skip_lines.get(a.source, 0):
                continue
            if a.category == "nccl_network" or NETWORK_LINE.search(a.text):
                hits.append(f"{a.source}:{a.line}: {a.text.strip()[:300]}")
        return hits

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


class LogFollower:
    """Follows log files from their current end (used where triage's follow mode is not available)."""

    def __init__(self, ctx: RunContext) -> None:
        self.paths = list(ctx.opts.log_paths)
        self.pos: dict[str, int] = {}
        for p in self.paths:
            try:
                self.pos[str(p)] = p.stat().st_size
            except OSError:
                self.pos[str(p)] = 0
        self.line_no: dict[str, int] = {str(p): _count_lines(p) for p in self.paths}

    def close(self) -> None:
        return None

    def new_network_lines(self) -> list[str]:
        hits: list[str] = []
        for p in self.paths:
            key = str(p)
            try:
                with p.open("rb") as fh:
                    fh.seek(self.pos.get(key, 0))
                    data = fh.read()
            except OSError:
                continue
            cut = data.rfind(b"\n") + 1  # keep a partial last line for the next read
            self.pos[key] = self.pos.get(key, 0) + cut
            for line in data[:cut].decode("utf-8", "replace").splitlines():
                self.line_no[key] = self.line_no.get(key, 0) + 1
                if NETWORK_LINE.search(line):
                    hits.append(f"{p}:{self.line_no[key]}: {line.strip()[:300]}")
        return hits


def _count_lines(path: Any) -> int:
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


async def run_soak(ctx: RunContext) -> StepOutcome:
    out = StepOutcome("soak")
    opts = ctx.opts
    concurrency = ctx.sustainable_concurrency or min(4, max(opts.concurrency))
    windows = max(1, min(10, int(opts.soak_s // MIN_WINDOW_S)))
    window_s = opts.soak_s / windows
    follower = make_follower(ctx)
    samples: list[dict[str, Any]] = []
    net_lines: list[str] = []
    out.data.update(
        {"concurrency": concurrency, "duration_s": opts.soak_s, "window_s": round(window_s, 2), "samples": samples,
         "logs_followed": [str(p) for p in opts.log_paths] or "none (pass --logs to follow NCCL/RDMA errors)"}
    )  # fmt: skip
    try:
        await _soak_windows(ctx, out, follower, concurrency, windows, window_s, samples, net_lines)
    finally:
        follower.close()
    net_lines += follower.new_network_lines()  # what the follower's last poll saw
    out.data["network_log_lines"] = net_lines[:50]
    elapsed = samples[-1]["t_s"] if samples else 0.0
    if getattr(follower, "error", None):
        out.data["follow_error"] = follower.error
        out.add(
            Finding(
                "ACC-SOAK-007", Severity.WARN, Category.OTHER, "the logs could not be followed during the soak",
                [str(follower.error)], ["check --logs / --docker / --kubectl; NCCL/RDMA errors were not watched"],
            )
        )  # fmt: skip
    for f in judge_soak(samples, elapsed or opts.soak_s, opts.error_budget, net_lines):
        out.add(f)
    return out.settle()


def opts_left(ctx: RunContext, elapsed: float) -> float:
    return max(0.0, ctx.opts.soak_s - elapsed)


def make_follower(ctx: RunContext) -> Any:
    if not ctx.opts.has_logs:
        return LogFollower(ctx)
    try:
        return TriageFollower(ctx)
    except ImportError:
        return LogFollower(ctx)


async def _soak_windows(
    ctx: RunContext,
    out: StepOutcome,
    follower: Any,
    concurrency: int,
    windows: int,
    window_s: float,
    samples: list[dict[str, Any]],
    net_lines: list[str],
) -> None:
    elapsed = 0.0
    for w in range(windows):
        label = (
            f"soak c={concurrency} window {w + 1}/{windows} ({opts_left(ctx, elapsed):.0f} s of soak left)"
        )
        run = await run_level(ctx, concurrency, None, window_s, label=label)
        res = run.result
        elapsed += res.duration_s
        e2e = ms_percentiles(res.percentiles()["e2e"])
        samples.append(
            {
                "t_s": round(elapsed, 2),
                "requests": res.sent,
                "errors": res.failed,
                "error_kinds": dict(res.errors_by_kind),
                "e2e_p99_ms": e2e.get("p99") if e2e else None,
                "kv_cache_usage": res.server_peaks()["kv_cache_usage_max"],
                "health_failures": len(health_failures(res)),
                "valid": res.valid,
                "gpu_memory_mib": run.gpu_memory_peak_mib,
            }
        )
        net_lines += follower.new_network_lines()
        out.data["network_log_lines"] = net_lines[:50]
        ctx.progress("soak", out.data)
        if res.sent and res.ok == 0 and health_failures(res):
            out.data["stopped_early"] = "every request failed and /health failed: the server is gone"
            break
