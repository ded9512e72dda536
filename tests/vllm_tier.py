"""The real vLLM test tier: a real vLLM OpenAI server (CPU build) serving a tiny random-weight model.

How to use it from any test area (the fixtures are registered in ``tests/conftest.py``)::

    import pytest

    @pytest.mark.real_vllm
    def test_something(vllm_server_cached):
        url = vllm_server_cached.url          # "http://127.0.0.1:PORT"
        ...

Fixtures (lazy: a server starts only when a test first asks for it, then lives for the session):

- ``vllm_server_cached``: ``--enable-prefix-caching --enable-prompt-tokens-details
  --enable-auto-tool-choice --tool-call-parser hermes --max-model-len 2048``.
- ``vllm_server_uncached``: ``--no-enable-prefix-caching``, no tool parser.

Each yields a :class:`VllmServer` with ``.url``, ``.log_path`` (the server's combined stdout/stderr),
``.model_dir``, ``.process`` (the ``Popen``, leader of its own process group), ``.block_size`` (from
``vllm:cache_config_info``), ``.served_model_name`` (``"tiny"``) and ``.args``. A test may kill the
server (``server.kill()``); mark it ``@pytest.mark.vllm_destructive`` so it runs after every other test
(the root conftest reorders), and the next test that asks for the same fixture gets a fresh server
anyway, so a destructive test never poisons later ones.

Where the vLLM venv is missing (``scripts/setup-real-vllm.sh`` installs it; ``scripts/test.sh`` and
``.ci/run`` run that script) the tests that use these fixtures are skipped by name with the reason.
Where the venv exists but the server does not come up, the test *errors* with the log tail: in CI
that is a real failure, not a skip.

Environment: ``VLLM_MEDIC_VLLM_VENV`` (default ``~/.cache/vllm-medic/vllm-cpu-venv``),
``VLLM_MEDIC_VLLM_START_TIMEOUT`` (seconds, default 420: two servers starting together on two cores
take minutes). The model (``tests/vllm_tier_model.py``, synthetic: random weights, tiny BPE tokenizer
with ``<tool_call>`` tokens and a tools-aware chat template) is generated once into
``~/.cache/vllm-medic/tiny-model-<hash of the generator>`` and reused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vllm-medic"
VENV = Path(os.environ.get("VLLM_MEDIC_VLLM_VENV", CACHE_ROOT / "vllm-cpu-venv"))
START_TIMEOUT_S = float(os.environ.get("VLLM_MEDIC_VLLM_START_TIMEOUT", "420"))
MODEL_GENERATOR = Path(__file__).with_name("vllm_tier_model.py")
SERVED_MODEL_NAME = "tiny"

CACHED_ARGS = (
    "--enable-prefix-caching",
    "--enable-prompt-tokens-details",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
)
UNCACHED_ARGS = ("--no-enable-prefix-caching",)

_BLOCK_SIZE_RE = re.compile(r'vllm:cache_config_info\{[^}]*block_size="(\d+)"')


class VllmUnavailable(Exception):
    """The tier is not installed here: tests skip by name with this message."""


class VllmStartFailed(Exception):
    """The tier is installed but the server did not come up: tests error with the log tail."""


@dataclass
class VllmServer:
    name: str
    url: str
    port: int
    log_path: Path
    model_dir: Path
    process: subprocess.Popen
    args: tuple[str, ...]
    block_size: int
    served_model_name: str = SERVED_MODEL_NAME
    _log_file: object = field(default=None, repr=False)

    def alive(self) -> bool:
        if self.process.poll() is not None:
            return False
        try:
            return _http_status(self.url + "/health", timeout=5) == 200
        except OSError:
            return False

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log_path, lines)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Kill the whole process group (API server, engine core, workers)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGKILL)
            self.process.wait(timeout=30)
        # Stragglers in the group (engine core) after the leader exited.
        self.kill(signal.SIGKILL)
        if self._log_file is not None:
            self._log_file.close()  # type: ignore[attr-defined]


def vllm_python() -> Path:
    """The vLLM venv's python, or raise VllmUnavailable saying why."""
    py = VENV / "bin" / "python"
    if not py.exists():
        raise VllmUnavailable(
            f"real vLLM tier not installed: {py} missing (run scripts/setup-real-vllm.sh; scripts/test.sh does)"
        )
    probe = subprocess.run(
        [str(py), "-c", "import vllm, sys; print(vllm.__version__)"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if probe.returncode != 0:
        raise VllmUnavailable(f"real vLLM tier broken: `import vllm` failed in {py}: {probe.stderr[-400:]}")
    return py


def tiny_model_dir(py: Path) -> Path:
    """Generate (once, keyed by the generator's content hash) the synthetic tiny model."""
    digest = hashlib.sha256(MODEL_GENERATOR.read_bytes()).hexdigest()[:16]
    target = CACHE_ROOT / f"tiny-model-{digest}"
    if (target / "config.json").exists() and (target / "tokenizer.json").exists():
        return target
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="tiny-model-", dir=CACHE_ROOT))
    done = subprocess.run(
        [str(py), str(MODEL_GENERATOR), str(staging)], capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise VllmStartFailed(f"tiny model generation failed: {done.stderr[-2000:]}")
    try:
        staging.rename(target)
    except OSError:  # another process won the race; use theirs
        shutil.rmtree(staging, ignore_errors=True)
    return target


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(name: str, extra_args: tuple[str, ...], log_dir: Path) -> VllmServer:
    """Start a real vLLM server and return once ``/health`` answers 200 (bounded; no fixed sleeps)."""
    py = vllm_python()
    model_dir = tiny_model_dir(py)
    port = free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"vllm-{name}-{port}.log"
    args = (
        "--model",
        str(model_dir),
        "--served-model-name",
        SERVED_MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "2048",
        *extra_args,
    )
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1", TRANSFORMERS_OFFLINE="1", NO_COLOR="1")
    log_file = log_path.open("wb")
    proc = subprocess.Popen(
        [str(py), "-m", "vllm.entrypoints.openai.api_server", *args],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    server = VllmServer(
        name=name,
        url=f"http://127.0.0.1:{port}",
        port=port,
        log_path=log_path,
        model_dir=model_dir,
        process=proc,
        args=args,
        block_size=0,
        _log_file=log_file,
    )
    try:
        _wait_ready(server)
        server.block_size = _block_size(server.url)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: VllmServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        code = server.process.poll()
        if code is not None:
            raise VllmStartFailed(
                f"vLLM ({server.name}) exited with {code} before it was ready; log {server.log_path}:\n"
                + server.log_tail()
            )
        try:
            if _http_status(server.url + "/health", timeout=2) == 200:
                return
        except OSError:
            pass
        # Between polls we wait on the process itself, so an early exit is seen at once.
        _sleep_poll(server.process, 0.5)
    raise VllmStartFailed(
        f"vLLM ({server.name}) not ready after {START_TIMEOUT_S:.0f}s; log {server.log_path}:\n"
        + server.log_tail()
    )


def _sleep_poll(proc: subprocess.Popen, seconds: float) -> None:
    """Wait for the process to exit or for the poll interval to pass, whichever is first."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=seconds)


def _http_status(url: str, timeout: float) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _block_size(url: str) -> int:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode("utf-8", "replace")
    m = _BLOCK_SIZE_RE.search(text)
    return int(m.group(1)) if m else 0


def _tail(path: Path, lines: int) -> str:
    try:
        data = path.read_bytes()[-20000:].decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    return "\n".join(data.splitlines()[-lines:])


class ServerPool:
    """Session-wide owner of the real servers: starts lazily, restarts a server a test killed."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._servers: dict[str, VllmServer] = {}
        self._failures: dict[str, str] = {}
        self._lock = threading.Lock()

    def get(self, name: str, extra_args: tuple[str, ...]) -> VllmServer:
        with self._lock:
            if name in self._failures:
                raise VllmStartFailed(self._failures[name])
            server = self._servers.get(name)
            if server is not None and server.alive():
                return server
            if server is not None:
                server.stop()
            try:
                server = start_server(name, extra_args, self.log_dir)
            except VllmStartFailed as exc:
                self._failures[name] = str(exc)
                raise
            self._servers[name] = server
            return server

    def close(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()


def describe(server: VllmServer) -> str:
    return json.dumps({"name": server.name, "url": server.url, "log": str(server.log_path)})
