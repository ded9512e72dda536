"""Hostile bundles and inputs (issue 14): nothing outside a bundle is read, no FIFO blocks a command,
decompression and tar members are capped, malformed values are usage errors. Every case drives the
console script in a subprocess with a wall-clock bound; the memory cases assert the child's peak RSS."""

from __future__ import annotations

import gzip
import http.server
import io
import json
import os
import socketserver
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from robustkit import MEDIC, REPO, TRACEBACK, medic_env, run_medic

DATA = REPO / "tests" / "data"
RSS_LIMIT_MIB = 256
MARKER = "OUTSIDE-THE-BUNDLE-7f3a9c"


def _peak_rss_mib(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, float, str]:
    """Run the console script in a fresh wrapper process: (exit code, peak RSS MiB of the command, output)."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "sys.stdout.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) + '\\n')\n"
        "sys.stdout.write(str(p.returncode) + '\\n' + (p.stdout + p.stderr).decode('utf-8', 'replace'))\n"
    )
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, str(MEDIC), *argv], capture_output=True, env=env, timeout=timeout
    )
    elapsed = time.monotonic() - start
    rss_kib, code, *rest = proc.stdout.decode("utf-8", "replace").split("\n")
    return int(code), int(rss_kib) / 1024, "\n".join(rest) + f"\n(ran {elapsed:.1f} s)"


@pytest.fixture()
def captured(tmp_path: Path) -> Path:
    root = tmp_path / "captured"
    root.mkdir()
    for f in (DATA / "checks" / "bundles" / "b200-r575-k3").iterdir():
        (root / f.name).write_bytes(f.read_bytes())
    return root


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "private" / "key.txt"
    secret.parent.mkdir()
    secret.write_text(f"{MARKER}\n" * 10, encoding="utf-8")
    return secret


def test_collect_from_a_directory_never_follows_a_symlink_out_of_it(
    captured: Path, outside: Path, medic_home: Path, tmp_path: Path
) -> None:
    (captured / "env.txt").symlink_to(outside)
    (captured / "dmesg.txt").symlink_to(outside)
    out = tmp_path / "bundle"
    outcome = run_medic(["collect", "--from", str(captured), "-o", str(out), "--json"], medic_env(medic_home))
    assert outcome.returncode in (0, 1), outcome.describe()
    assert MARKER not in outcome.text
    written = "".join(p.read_text("utf-8", "replace") for p in out.rglob("*") if p.is_file())
    assert "nvidia" in written.lower() and MARKER not in written


def test_health_from_a_directory_never_follows_a_symlink(
    captured: Path, outside: Path, medic_home: Path
) -> None:
    (captured / "dmesg.txt").symlink_to(outside)
    outcome = run_medic(["health", "--from", str(captured), "--json", "-v"], medic_env(medic_home))
    assert outcome.returncode in (0, 1), outcome.describe()
    assert MARKER not in outcome.text and TRACEBACK not in outcome.text


@pytest.mark.parametrize("node_dir", ["../elsewhere", "/etc", "nodes/../../elsewhere"])
def test_cluster_json_node_dirs_outside_the_bundle_are_refused(
    captured: Path, medic_home: Path, tmp_path: Path, node_dir: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "nvidia-smi.txt").write_text(MARKER, encoding="utf-8")
    bundle = tmp_path / "multi"
    (bundle / "nodes" / "a").mkdir(parents=True)
    for f in captured.iterdir():
        (bundle / "nodes" / "a" / f.name).write_bytes(f.read_bytes())
    nodes = [{"node": "a", "dir": "nodes/a", "status": "ok"}, {"node": "b", "dir": node_dir, "status": "ok"}]
    (bundle / "cluster.json").write_text(json.dumps({"nodes": nodes}), encoding="utf-8")
    outcome = run_medic(["check", "--from", str(bundle), "--json"], medic_env(medic_home))
    assert outcome.returncode == 2, outcome.describe()
    assert "not inside the bundle" in outcome.stderr and MARKER not in outcome.text


FIFO_CASES = {
    "collect --from": lambda f, o: ["collect", "--from", f, "-o", o],
    "check --from": lambda f, o: ["check", "--from", f],
    "health --from": lambda f, o: ["health", "--from", f],
    "nccl-path": lambda f, o: ["nccl-path", f],
    "cache flag --launch": lambda f, o: ["cache", "flag", "--launch", f],
    "cache flag --log": lambda f, o: ["cache", "flag", "--log", f],
    "check --launch": lambda f, o: [
        "check",
        "--from",
        str(DATA / "checks" / "bundles" / "b200-r575-k3"),
        "--launch",
        f,
    ],
    "check --snapshot": lambda f, o: ["check", "--snapshot", f],
    "check --recipe": lambda f, o: [
        "check",
        "--from",
        str(DATA / "checks" / "bundles" / "b200-r575-k3"),
        "--recipe",
        f,
    ],
    "check --model": lambda f, o: [
        "check",
        "--from",
        str(DATA / "checks" / "bundles" / "b200-r575-k3"),
        "--model",
        f,
    ],
    "plan --config": lambda f, o: ["plan", "--config", f, "--gpu", "H200"],
    "plan --recipe": lambda f, o: ["plan", "--recipe", f],
    "triage --catalogue": lambda f, o: [
        "triage",
        str(DATA / "checks" / "bundles" / "b200-r575-k3" / "env.txt"),
        "--catalogue",
        f,
    ],
    "cache diff": lambda f, o: ["cache", "diff", f, f],
    "cache flag --model-config": lambda f, o: [
        "cache",
        "flag",
        "--launch",
        "vllm serve m",
        "--model-config",
        f,
    ],
    "accept --logs": lambda f, o: ["accept", "http://127.0.0.1:9", "--logs", f, "--quick", "--no-collect"],
}


@pytest.mark.parametrize("case", sorted(FIFO_CASES))
def test_a_fifo_where_a_file_is_expected_is_a_usage_error_not_a_hang(
    case: str, medic_home: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    start = time.monotonic()
    outcome = run_medic(FIFO_CASES[case](str(fifo), str(tmp_path / "out")), medic_env(medic_home), timeout=30)
    assert time.monotonic() - start < 30
    assert outcome.returncode == 2, outcome.describe()
    assert "FIFO" in outcome.stderr, outcome.describe()


def _tgz(members: dict[str, bytes | int]) -> bytes:
    """A tarball; an int value is a sparse-looking member of that many zero bytes (streamed, not held)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(data, int):
                info.size = data

                class _Zeros(io.RawIOBase):
                    left = data

                    def readable(self) -> bool:
                        return True

                    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
                        n = min(len(b), self.left)
                        b[:n] = bytes(n)
                        self.left -= n
                        return n

                tar.addfile(info, io.BufferedReader(_Zeros()))
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.slow
def test_health_from_a_tiny_tarball_with_a_1_gib_member_is_bounded(medic_home: Path, tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.tgz"
    bomb.write_bytes(_tgz({"bundle/uname.txt": b"Linux x 6.8.0\n", "bundle/dmesg.txt": 1 << 30}))
    assert bomb.stat().st_size < 2 * 1024 * 1024
    code, rss, text = _peak_rss_mib(["health", "--from", str(bomb), "--json"], medic_env(medic_home), 120)
    assert code in (0, 1), text
    print(f"peak RSS {rss:.0f} MiB")
    assert rss < RSS_LIMIT_MIB, f"peak RSS {rss:.0f} MiB\n{text[-2000:]}"


@pytest.mark.parametrize("argv", [["nccl-path", "{f}"], ["cache", "flag", "--log", "{f}"]])
def test_a_gzip_bomb_is_decompressed_streaming_with_a_cap(
    argv: list[str], medic_home: Path, tmp_path: Path
) -> None:
    bomb = tmp_path / "bomb.log.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as fh:
        line = b"NCCL INFO nothing to see here, just filler for the decompression cap test\n"
        for _ in range((512 << 20) // (len(line) * 4096)):
            fh.write(line * 4096)
    assert bomb.stat().st_size < 8 * 1024 * 1024
    code, rss, text = _peak_rss_mib([a.format(f=bomb) for a in argv], medic_env(medic_home), 120)
    assert code in (0, 1, 2), text
    assert TRACEBACK not in text
    print(f"peak RSS {rss:.0f} MiB")
    assert rss < RSS_LIMIT_MIB, f"peak RSS {rss:.0f} MiB\n{text[-2000:]}"


@pytest.mark.parametrize(
    "argv",
    [
        ["cache", "probe", "http://[::1"],
        ["cache", "flag", "--server", "http://[::1"],
        ["cache", "flag", "--launch", "/no/such/file"],
        ["accept", "http://[::1"],
        ["accept", "http://127.0.0.1:9", "--bundle", "/nonexistent", "--quick"],
        ["sim", "--max-model-len", "-5"],
        ["sim", "--itl-ms", "nan"],
        ["sim", "--error-status", "99"],
    ],
)
def test_malformed_values_are_usage_errors(argv: list[str], medic_home: Path) -> None:
    outcome = run_medic(argv, medic_env(medic_home), timeout=60)
    assert outcome.returncode == 2, outcome.describe()
    assert outcome.stderr.strip() and TRACEBACK not in outcome.text


BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--from", str(DATA / "checks" / "bundles" / "b200-r575-k3"), "--recipe", "{f}"],
        ["plan", "--recipe", "{f}"],
        ["triage", "{log}", "--catalogue", "{f}"],
    ],
)
def test_yaml_aliases_billion_laughs_are_refused_at_once(
    argv: list[str], medic_home: Path, tmp_path: Path
) -> None:
    bomb = tmp_path / "laughs.yaml"
    bomb.write_text(BILLION_LAUGHS, encoding="utf-8")
    log = tmp_path / "a.log"
    log.write_text("INFO all good\n", encoding="utf-8")
    start = time.monotonic()
    outcome = run_medic([a.format(f=bomb, log=log) for a in argv], medic_env(medic_home), timeout=60)
    assert time.monotonic() - start < 30, outcome.describe()
    assert outcome.returncode == 2, outcome.describe()
    assert "alias" in outcome.stderr and str(bomb.name) in outcome.stderr, outcome.describe()


def test_collect_timeout_nan_is_a_usage_error(medic_home: Path, tmp_path: Path) -> None:
    for value in ("nan", "inf", "-1"):
        outcome = run_medic(["collect", "--timeout", value, "-o", str(tmp_path / "b")], medic_env(medic_home))
        assert outcome.returncode == 2, outcome.describe()
        assert "--timeout" in outcome.stderr and TRACEBACK not in outcome.text


def _deep_json(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize(
    "where",
    [
        "check --snapshot",
        "plan --config",
        "cache diff",
        "manifest.json",
        "cluster.json",
        "health snapshot.json",
    ],
)
def test_json_nested_1000_deep_is_a_usage_error_naming_the_file(
    where: str, depth: int, captured: Path, medic_home: Path, tmp_path: Path
) -> None:
    deep = tmp_path / "deep-input.json"
    deep.write_text(_deep_json(depth), encoding="utf-8")
    if where == "manifest.json":
        (captured / "manifest.json").write_text(_deep_json(depth), encoding="utf-8")
        argv, name = ["check", "--from", str(captured)], "manifest.json"
    elif where == "health snapshot.json":
        (captured / "snapshot.json").write_text(_deep_json(depth), encoding="utf-8")
        argv, name = ["health", "--from", str(captured)], "snapshot.json"
    elif where == "cluster.json":
        (captured / "cluster.json").write_text(_deep_json(depth), encoding="utf-8")
        argv, name = ["check", "--from", str(captured)], "cluster.json"
    else:
        argv = {
            "check --snapshot": ["check", "--snapshot", str(deep)],
            "plan --config": ["plan", "--config", str(deep), "--gpu", "H200"],
            "cache diff": ["cache", "diff", str(deep), str(deep)],
        }[where]
        name = deep.name
    outcome = run_medic(argv, medic_env(medic_home))
    assert outcome.returncode == 2, outcome.describe()
    assert "nested more than 100 levels deep" in outcome.stderr and name in outcome.stderr, outcome.describe()


def _user_catalogue(tmp_path: Path, pattern: str) -> Path:
    cat = tmp_path / "mine.yaml"
    cat.write_text(
        "signatures:\n  - id: user.evil\n    category: other\n    role: root\n    priority: 50\n"
        f"    title: evil\n    patterns: [{json.dumps(pattern)}]\n",
        encoding="utf-8",
    )
    return cat


def test_a_catastrophic_user_pattern_runs_in_linear_time(medic_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("ERROR " + "a" * 40 + "b\n", encoding="utf-8")
    start = time.monotonic()
    outcome = run_medic(
        ["triage", str(log), "--catalogue", str(_user_catalogue(tmp_path, "(a+)+$")), "--json"],
        medic_env(medic_home),
        timeout=60,
    )
    assert time.monotonic() - start < 20, "(a+)+$ backtracked: the pattern ran under Python re"
    assert outcome.returncode in (0, 1), outcome.describe()


def test_a_user_pattern_re2_cannot_run_is_refused_by_name(medic_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("ERROR x\n", encoding="utf-8")
    pattern = r"(?=ERROR)(a+)+$"  # a lookahead RE2 cannot run, around a group that backtracks
    outcome = run_medic(
        ["triage", str(log), "--catalogue", str(_user_catalogue(tmp_path, pattern))], medic_env(medic_home)
    )
    assert outcome.returncode == 2, outcome.describe()
    assert "(a+)+$" in outcome.stderr and "user.evil" in outcome.stderr, outcome.describe()


def test_a_4_mib_word_in_launch_txt_is_cut_in_linear_time(
    captured: Path, medic_home: Path, tmp_path: Path
) -> None:
    """shlex builds words a character at a time: a 4 MiB word (a 5 KB tgz) hung check and collect."""
    (captured / "launch.txt").write_text(
        "vllm serve moonshotai/Kimi-K3 --served-model-name "
        + "A" * (4 << 20)
        + " --tensor-parallel-size 8\n",
        encoding="utf-8",
    )
    for argv in (
        ["check", "--from", str(captured), "--json"],
        ["collect", "--from", str(captured), "-o", str(tmp_path / "b")],
    ):
        start = time.monotonic()
        outcome = run_medic(argv, medic_env(medic_home), timeout=60)
        assert time.monotonic() - start < 30, outcome.describe()
        assert outcome.returncode in (0, 1), outcome.describe()


HUGE_BODY = 200 << 20


class _HugeBodyHandler(http.server.BaseHTTPRequestHandler):
    """200 MB bodies (``Content-Length`` honest, sent in 1 MiB writes). ``server.mode``: ``all`` answers
    every path so; ``models`` serves a real /health and /v1/models first, so accept reaches every step;
    ``server.framing``: ``raw`` (no newline at all) or ``sse`` (well-framed events that never end)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        return

    def _send(self, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.server.mode == "models" and self.path.startswith("/health"):  # type: ignore[attr-defined]
            return self._send(b"")
        if self.server.mode == "models" and self.path.startswith("/v1/models"):  # type: ignore[attr-defined]
            return self._send(
                json.dumps({"object": "list", "data": [{"id": "m", "max_model_len": 4096}]}).encode()
            )
        event = b'data: {"choices": [{"index": 0, "delta": {"content": "' + b"y" * 200 + b'"}}]}\n\n'
        unit = event if self.server.framing == "sse" else b"x"  # type: ignore[attr-defined]
        piece = unit * ((1 << 20) // len(unit))
        self.send_response(200)
        stream = self.path.endswith("completions")
        self.send_header("Content-Type", "text/event-stream" if stream else "application/json")
        self.send_header("Content-Length", str(HUGE_BODY))
        self.end_headers()
        sent = 0
        try:
            while sent < HUGE_BODY:
                part = piece[: HUGE_BODY - sent]
                self.wfile.write(part)
                sent += len(part)
        except OSError:  # the client dropped the connection at its cap: what this test wants
            pass

    do_GET = do_POST = _answer


class _QuietThreadingHTTP(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        return


@pytest.fixture()
def huge_server(request: pytest.FixtureRequest) -> Iterator[str]:
    mode, framing = request.param
    server = _QuietThreadingHTTP(("127.0.0.1", 0), _HugeBodyHandler)
    server.mode, server.framing = mode, framing  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "huge_server", [("all", "raw"), ("models", "raw"), ("models", "sse")], indirect=True, ids=str
)
def test_accept_against_200_mb_bodies_is_bounded_and_says_what_was_cut(
    huge_server: str, medic_home: Path
) -> None:
    argv = ["accept", huge_server, "--quick", "--no-collect", "--ready-timeout", "3s", "--json"]
    start = time.monotonic()
    code, rss, text = _peak_rss_mib(argv, medic_env(medic_home), 120)
    print(f"peak RSS {rss:.0f} MiB, {time.monotonic() - start:.0f} s")
    assert code == 1 and TRACEBACK not in text, text[-3000:]
    assert "cut at 16 MiB" in text, text[-3000:]
    assert rss < RSS_LIMIT_MIB, f"peak RSS {rss:.0f} MiB\n{text[-2000:]}"


@pytest.mark.parametrize("huge_server", [("all", "raw")], indirect=True, ids=str)
def test_cache_flag_server_against_a_200_mb_metrics_page_is_bounded(
    huge_server: str, medic_home: Path
) -> None:
    code, rss, text = _peak_rss_mib(["cache", "flag", "--server", huge_server], medic_env(medic_home), 60)
    print(f"peak RSS {rss:.0f} MiB")
    assert code == 3 and TRACEBACK not in text, text[-3000:]
    assert "larger than 16 MiB: cut at 16 MiB" in text, text[-3000:]
    assert rss < RSS_LIMIT_MIB, f"peak RSS {rss:.0f} MiB\n{text[-2000:]}"


def _bundle_tgz(captured: Path, extra: dict[str, bytes | int]) -> bytes:
    members: dict[str, bytes | int] = {f"bundle/{f.name}": f.read_bytes() for f in sorted(captured.iterdir())}
    return _tgz(members | extra)


@pytest.mark.slow
def test_a_tarball_of_100k_empty_members_is_read_to_the_member_cap(
    captured: Path, medic_home: Path, tmp_path: Path
) -> None:
    many = tmp_path / "many.tgz"
    many.write_bytes(_bundle_tgz(captured, {f"bundle/e{i}.txt": b"" for i in range(100_000)}))
    out = tmp_path / "b"
    for argv in (
        ["collect", "--from", str(many), "-o", str(out)],
        ["check", "--from", str(many)],
        ["health", "--from", str(many)],
    ):
        start = time.monotonic()
        outcome = run_medic(argv, medic_env(medic_home), timeout=60)
        elapsed = time.monotonic() - start
        print(f"{argv[0]}: {elapsed:.1f} s")
        assert elapsed < 30 and outcome.returncode in (0, 1), outcome.describe()
        if argv[0] == "health":
            assert "more than 10,000 members" in outcome.stderr, outcome.describe()
    cut = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["cut"]
    assert any("more than 10,000 members" in note for note in cut), cut


def test_a_member_over_64_mib_is_noted_in_the_manifest(
    captured: Path, medic_home: Path, tmp_path: Path
) -> None:
    big = tmp_path / "big.tgz"
    big.write_bytes(_bundle_tgz(captured, {"bundle/dmesg.txt": 65 << 20}))
    out = tmp_path / "b"
    outcome = run_medic(["collect", "--from", str(big), "-o", str(out)], medic_env(medic_home))
    assert outcome.returncode in (0, 1), outcome.describe()
    cut = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["cut"]
    assert any("bundle/dmesg.txt" in note and "not read" in note for note in cut), cut


def _multinode(captured: Path, root: Path) -> Path:
    for node in ("a", "b"):
        (root / "nodes" / node).mkdir(parents=True)
        for f in captured.iterdir():
            (root / "nodes" / node / f.name).write_bytes(f.read_bytes())
    nodes = [{"node": n, "dir": f"nodes/{n}", "status": "ok"} for n in ("a", "b")]
    (root / "cluster.json").write_text(json.dumps({"kind": "multi-node", "nodes": nodes}), encoding="utf-8")
    return root


@pytest.mark.parametrize("packed", [True, False], ids=["tgz", "dir"])
def test_collect_from_a_multinode_bundle_refuses_to_flatten_it(
    captured: Path, medic_home: Path, tmp_path: Path, packed: bool
) -> None:
    source = _multinode(captured, tmp_path / "cluster")
    if packed:
        tgz = tmp_path / "cluster.tgz"
        with tarfile.open(tgz, "w:gz") as tar:
            tar.add(source, arcname="cluster")
        source = tgz
    outcome = run_medic(["collect", "--from", str(source), "-o", str(tmp_path / "b")], medic_env(medic_home))
    assert outcome.returncode == 2, outcome.describe()
    assert "multi-node bundle" in outcome.stderr and "check --from" in outcome.stderr, outcome.describe()
    assert not (tmp_path / "b").exists()
    checked = run_medic(["check", "--from", str(source), "--json"], medic_env(medic_home))
    assert checked.returncode in (0, 1), checked.describe()
    assert '"a"' in checked.stdout and '"b"' in checked.stdout, checked.describe()
