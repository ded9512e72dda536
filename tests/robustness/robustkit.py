"""Shared bad inputs for the robustness sweep: files, directories, loopback servers that misbehave.

Everything is built once per session (tmp files are cheap, servers are threads on 127.0.0.1) and
every subprocess is bounded by a timeout, so a command that hangs fails its test instead of the run.
"""

from __future__ import annotations

import gzip
import http.server
import io
import json
import os
import random
import socket
import socketserver
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MEDIC = Path(sys.executable).parent / "vllm-medic"
TRACEBACK = "Traceback (most recent call last)"
DOCUMENTED_EXIT_CODES = {0, 1, 2, 3, 130}


@dataclass
class Outcome:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout + self.stderr

    def describe(self) -> str:
        return (
            f"argv={self.argv}\nexit={self.returncode}\n--- stdout (tail)\n{self.stdout[-3000:]}"
            f"\n--- stderr (tail)\n{self.stderr[-3000:]}"
        )


def medic_env(home: Path, **extra: str) -> dict[str, str]:
    """A clean environment: own HOME/XDG dirs and history DB, no proxy, no colour, no debug re-raise."""
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    env.pop("VLLM_MEDIC_DEBUG", None)
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"),
        VLLM_MEDIC_DB=f"sqlite:///{home / 'history.db'}",
        NO_COLOR="1",
        COLUMNS="200",
        PYTHONIOENCODING="utf-8",
        NO_PROXY="*",
    )
    env.update(extra)
    return env


def run_medic(
    argv: list[str],
    env: dict[str, str],
    *,
    stdin: bytes | None = None,
    timeout: float = 90,
    cwd: Path | None = None,
) -> Outcome:
    proc = subprocess.run(
        [str(MEDIC), *argv],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env=env,
        timeout=timeout,
        cwd=cwd,
    )
    return Outcome(
        argv,
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        return


class _HtmlHandler(_Quiet):
    """A reverse proxy's login page: 200 OK with HTML on every path (not JSON, not Prometheus)."""

    def _answer(self) -> None:
        body = b"<!doctype html><html><body><h1>Sign in</h1><form></form></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _answer


class _ErrorHandler(_Quiet):
    """A broken gateway: 500 with a plain-text body on every path."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = b"upstream connect error or disconnect/reset before headers"
        self.send_response(500)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _answer


class _GarbageJsonHandler(_Quiet):
    """200 application/json whose bodies are JSON of the wrong shape, or not JSON at all."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path.startswith("/metrics"):
            body = b"vllm:num_requests_running{{{ not prometheus \x00\xff\n# TYPE\n"
            ctype = "text/plain; version=0.0.4"
        elif self.path.startswith("/v1/models"):
            body = b'{"data": "not-a-list", "object": 7}'
            ctype = "application/json"
        else:
            body = b'[1, 2, {"choices": null}]'
            ctype = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _answer


class _RawGarbage(socketserver.BaseRequestHandler):
    """Not HTTP at all: random bytes, then close."""

    def handle(self) -> None:
        try:
            self.request.recv(4096)
            self.request.sendall(random.Random(7).randbytes(512))
        except OSError:
            pass


class _ThreadingHTTP(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _ThreadingTCP(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _serve(server: socketserver.BaseServer) -> str:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    return f"http://{host}:{port}"


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class BadInputs:
    root: Path
    missing: Path
    directory: Path
    empty: Path
    binary: Path
    nul: Path
    bad_utf8: Path
    truncated_tgz: Path
    truncated_gz: Path
    not_a_tgz: Path
    bad_json: Path
    bad_yaml: Path
    json_list: Path
    json_wrong_obj: Path
    yaml_scalar: Path
    socket_file: Path
    noexec_child: Path | None
    url_dead: str
    url_html: str
    url_500: str
    url_badjson: str
    url_raw: str

    def all_files(self) -> dict[str, Path]:
        names = [
            "missing",
            "directory",
            "empty",
            "binary",
            "nul",
            "bad_utf8",
            "truncated_tgz",
            "truncated_gz",
            "not_a_tgz",
            "bad_json",
            "bad_yaml",
            "json_list",
            "json_wrong_obj",
            "yaml_scalar",
            "socket_file",
        ]
        return {name: getattr(self, name) for name in names}


def _truncated_tgz(path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = ("nvidia-smi output line\n" * 4000).encode()
        info = tarfile.TarInfo("bundle/nvidia-smi.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("bundle/snapshot.json")
        payload = json.dumps({"schema": 1}).encode()
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    raw = buf.getvalue()
    path.write_bytes(raw[: len(raw) // 2])


@pytest.fixture(scope="session")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BadInputs]:
    root = tmp_path_factory.mktemp("bad-inputs")
    rng = random.Random(1234)
    (root / "a-directory").mkdir()
    (root / "a-directory" / "noise.txt").write_bytes(rng.randbytes(300))
    (root / "empty.log").write_bytes(b"")
    (root / "random.bin").write_bytes(rng.randbytes(64 * 1024))
    (root / "nul.log").write_bytes(b"\x00" * 8192 + b"INFO ok\x00\x00\n" * 10)
    (root / "bad-utf8.log").write_bytes(
        b"INFO 11-30 03:00:00 [api_server.py:1] vLLM \xff\xfe\xc3\x28 started\n" * 50 + b"\xed\xa0\x80\n"
    )
    _truncated_tgz(root / "truncated.tar.gz")
    (root / "truncated.gz").write_bytes(gzip.compress(b"RuntimeError: CUDA error\n" * 1000)[:200])
    (root / "not-a.tar.gz").write_bytes(b"this is plain text pretending to be a tarball\n")
    (root / "bad.json").write_text('{"model_type": "llama", "hidden_size": 40', encoding="utf-8")
    (root / "bad.yaml").write_text("name: [unclosed\n  - : : {\n\t tab: here\n", encoding="utf-8")
    (root / "list.json").write_text("[1, 2, 3]", encoding="utf-8")
    (root / "wrong.json").write_text(
        json.dumps({"hidden_size": "big", "num_hidden_layers": -3, "model_type": 7, "nodes": "x"}),
        encoding="utf-8",
    )
    (root / "scalar.yaml").write_text("just a string\n", encoding="utf-8")
    sock_path = root / "unreadable.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(sock_path))
    noexec_child: Path | None = None
    if os.geteuid() != 0:  # root reads through any mode bits; the socket file covers "unreadable" there
        locked = root / "locked"
        locked.mkdir()
        (locked / "inside.log").write_text("x\n")
        locked.chmod(0o600)
        noexec_child = locked / "inside.log"

    servers = [
        _ThreadingHTTP(("127.0.0.1", 0), _HtmlHandler),
        _ThreadingHTTP(("127.0.0.1", 0), _ErrorHandler),
        _ThreadingHTTP(("127.0.0.1", 0), _GarbageJsonHandler),
        _ThreadingTCP(("127.0.0.1", 0), _RawGarbage),
    ]
    urls = [_serve(server) for server in servers]
    try:
        yield BadInputs(
            root=root,
            missing=root / "does-not-exist" / "nothing.log",
            directory=root / "a-directory",
            empty=root / "empty.log",
            binary=root / "random.bin",
            nul=root / "nul.log",
            bad_utf8=root / "bad-utf8.log",
            truncated_tgz=root / "truncated.tar.gz",
            truncated_gz=root / "truncated.gz",
            not_a_tgz=root / "not-a.tar.gz",
            bad_json=root / "bad.json",
            bad_yaml=root / "bad.yaml",
            json_list=root / "list.json",
            json_wrong_obj=root / "wrong.json",
            yaml_scalar=root / "scalar.yaml",
            socket_file=sock_path,
            noexec_child=noexec_child,
            url_dead=f"http://127.0.0.1:{_dead_port()}",
            url_html=urls[0],
            url_500=urls[1],
            url_badjson=urls[2],
            url_raw=urls[3],
        )
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        sock.close()
        if noexec_child is not None:
            noexec_child.parent.chmod(0o700)


@pytest.fixture(scope="session")
def medic_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("medic-home")
