"""Benchmark: `vllm-medic triage` against `grep -E -n` with the catalogue's patterns, same files, same run.

    python bench/bench_triage.py [--gib 1] [--ranks 8] [--runs 3] [--candidate-every N] [--grep-patterns K] [--no-root]

Generates (once, under bench/out/, git-ignored) GIB of realistic rank-file noise built from a real
vLLM log (bench/gen_triage_noise.py) with one root cause near the end of one file, then times,
alternately, N runs of each:
  * baseline: `grep -E -n -e <alternation of catalogue patterns, translated to ERE>` over the files:
    every line pattern of the catalogue by default; with `--grep-patterns K` the first K patterns of
    the catalogue's root-cause signatures (role `root`, catalogue order: the shipped files in name
    order), i.e. what an operator's own `grep -E` for known failures would look like (issue 10 uses 40)
  * triage:   `vllm-medic triage DIR --json`
and prints the medians, the ratio, and triage's peak RSS (max over its runs, from wait4()), then
the same for CPU time (user + sys, worker processes included): on a shared machine the wall clock
also measures the other jobs, CPU time much less so.
`--candidate-every N` makes the noise hold one of the real log's harmless WARNING lines every N
serving lines (gen_triage_noise.py), the density a real serving log has (issue 10 benches N=50).
Targets: issue 3: ratio <= 2.0 against every pattern; issue 10: ratio <= 1.0 against 40 root-cause
patterns at 1 candidate in 50 lines; peak RSS < 200 MB whatever the input size.
Last measured (2026-12-04, 2-core machine, quiet, docs/triage.md "Sixth pass"): 0.5 GiB, 1 in 50, 40 patterns,
same-run alternation: planted root 0.70 s against grep's 0.67 s (1.05x; 1.00x in an earlier run), `--no-root`
0.65 s against 0.63 s, 1.03x (the fifth pass: 1.26x); peak RSS 35 MiB.
The package is byte-compiled first, as an install leaves it (PYTHONDONTWRITEBYTECODE would
otherwise make every timed run compile the sources again).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_triage_noise import DEFAULT_ROOT, write_bench_set  # noqa: E402


def ere(pattern: str) -> str:
    """Python regex -> POSIX ERE as GNU grep -E reads it (\\w, \\s, \\S, \\b are GNU extensions it has)."""
    p = re.sub(r"^\(\?[aiLmsux]+\)", "", pattern)
    p = p.replace("(?:", "(").replace("(?i:", "(")
    p = p.replace("\\d", "[0-9]")
    p = re.sub(r"\}\?", "}", p)  # lazy bounded repeats -> greedy (same lines match)
    p = re.sub(r"([*+?])\?", r"\1", p)
    return p


def _wait_rss(cmd: list[str]) -> tuple[float, int, int, bytes, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    chunks = []
    while True:
        b = proc.stdout.read(1 << 16)
        if not b:
            break
        chunks.append(b)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, proc.returncode, usage.ru_maxrss, b"".join(chunks), usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "out" / "triage-bench")
    ap.add_argument("--candidate-every", type=int, default=0, help="one real WARNING every N lines")
    ap.add_argument("--grep-patterns", type=int, default=0, help="first K root-cause patterns (0: all)")
    ap.add_argument(
        "--no-root",
        action="store_true",
        help="healthy set: no root cause planted (triage's weak pass runs too)",
    )
    args = ap.parse_args()

    dense = f"-c{args.candidate_every}" if args.candidate_every else ""
    out = args.out / f"{args.gib:g}g-{args.ranks}r{dense}{'-noroot' if args.no_root else ''}"
    marker = out / "ROOT_CAUSE"
    if not marker.exists():
        print(f"generating {args.gib:g} GiB in {args.ranks} rank files under {out} ...", flush=True)
        path, line = write_bench_set(
            out,
            total_bytes=int(args.gib * (1 << 30)),
            ranks=args.ranks,
            root_cause="" if args.no_root else DEFAULT_ROOT,
            candidate_every=args.candidate_every,
        )
        marker.write_text("none\n" if args.no_root else f"{path}:{line}\n")
    expected = marker.read_text().strip()
    files = sorted(str(p) for p in out.glob("rank*.log"))
    size = sum(Path(f).stat().st_size for f in files)

    sys.path.insert(0, str(HERE.parent / "src"))
    from vllm_medic.triage.catalogue import load_catalogue

    cat = load_catalogue()
    if args.grep_patterns > 0:
        roots = [p.pattern for s in cat.signatures if s.role == "root" for p in s.patterns]
        patterns = [ere(p) for p in roots[: args.grep_patterns]]
        which = f"first {len(patterns)} root-cause patterns"
    else:
        patterns = [ere(p) for p in cat.raw_patterns()]
        which = "every catalogue pattern"
    grep = shutil.which("grep") or "grep"
    grep_cmd = [grep, "-E", "-n", "-e", "|".join(f"({p})" for p in patterns), *files]
    medic = str(Path(sys.executable).with_name("vllm-medic"))
    triage_cmd = [medic, "triage", str(out), "--json"]

    # Time the tool as an install leaves it: pip byte-compiles a package it installs, an editable install
    # (this checkout) is compiled on first import, except where PYTHONDONTWRITEBYTECODE is set (CI,
    # sandboxes), which would make every timed run compile the sources again (~0.06 s).
    import vllm_medic

    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(vllm_medic.__file__).parent)], check=False
    )
    # warm the page cache once for both
    for cmd in (grep_cmd, triage_cmd):
        _wait_rss(cmd)
    g_times, t_times, g_cpu, t_cpu, rss = [], [], [], [], 0
    found = None
    for _ in range(args.runs):
        w, rc, _, _, cpu = _wait_rss(grep_cmd)
        g_times.append(w)
        g_cpu.append(cpu)
        w, rc, r, stdout, cpu = _wait_rss(triage_cmd)
        t_times.append(w)
        t_cpu.append(cpu)
        rss = max(rss, r)
        rc_json = json.loads(stdout)["root_cause"]
        found = f"{rc_json['source']}:{rc_json['line']}" if rc_json else None
    g, t = statistics.median(g_times), statistics.median(t_times)
    density = f"1 WARNING in {args.candidate_every} lines" if args.candidate_every else "no recurring WARNING"
    print(f"input: {len(files)} files, {size / (1 << 30):.2f} GiB, {density}; grep: {which}")
    print(
        f"baseline grep -E -n ({len(patterns)} patterns):            median {g:.2f} s over {args.runs} runs "
        f"({', '.join(f'{x:.2f}' for x in g_times)})"
    )
    print(
        f"vllm-medic triage --json:                         median {t:.2f} s over {args.runs} runs "
        f"({', '.join(f'{x:.2f}' for x in t_times)})"
    )
    target = "1.0" if args.grep_patterns else "2.0"
    print(f"ratio triage/grep: {t / g:.2f}x (target <= {target})")
    print(f"triage peak RSS: {rss / 1024:.0f} MiB (target < 200 MiB; the largest of its processes)")
    gc, tc = statistics.median(g_cpu), statistics.median(t_cpu)
    print(
        f"CPU time (user+sys): grep median {gc:.2f} s, triage median {tc:.2f} s "
        f"({', '.join(f'{x:.2f}' for x in t_cpu)}), ratio {tc / gc:.2f}x"
    )
    if args.no_root:
        print(f"root cause found: {found or 'none'} (healthy set): {'OK' if found is None else 'MISMATCH'}")
        return
    same = (
        found is not None
        and Path(found.rsplit(":", 1)[0]).resolve() == Path(expected.rsplit(":", 1)[0]).resolve()
        and found.rsplit(":", 1)[1] == expected.rsplit(":", 1)[1]
    )
    print(f"root cause found at {found} (planted at {expected}): {'OK' if same else 'MISMATCH'}")


if __name__ == "__main__":
    main()
