"""Run probe commands concurrently, each with its own timeout, never through a shell.

A command that does not finish in time is killed with its whole process group (its children
too), so a hung `nvidia-smi` costs at most its timeout and the collection's wall time is bounded
by the slowest probe, not the sum.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from vllm_medic.waits import future_result

MAX_OUTPUT_BYTES = 32 * 1024 * 1024


@dataclass
class ProbeOutcome:
    name: str
    argv: list[str]
    status: str  # ok | missing | timeout | nonzero | permission | error | interrupted
    started: str
    duration_s: float
    exit_code: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    message: str = ""


class ProcessRegistry:
    """The process groups still running, so Ctrl-C can end exactly the ones we started."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._closed = False

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        """Register a started process; one started after Ctrl-C (a race with kill_all) dies at once,
        so no worker thread is left waiting out its timeout while the interpreter exits."""
        with self._lock:
            self._procs[proc.pid] = proc
            closed = self._closed
        if closed:
            _kill_group(proc)

    def remove(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.pop(proc.pid, None)

    def kill_all(self) -> None:
        with self._lock:
            self._closed = True
            procs = list(self._procs.values())
        for proc in procs:
            _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        with contextlib.suppress(OSError):
            proc.kill()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_probe(
    name: str,
    argv: Sequence[str],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    registry: ProcessRegistry | None = None,
) -> ProbeOutcome:
    started = _now()
    t0 = time.monotonic()
    argv = [str(a) for a in argv]

    def outcome(
        status: str, exit_code: int | None = None, stdout: bytes = b"", stderr: bytes = b"", message: str = ""
    ) -> ProbeOutcome:
        return ProbeOutcome(
            name=name,
            argv=argv,
            status=status,
            started=started,
            duration_s=round(time.monotonic() - t0, 3),
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            message=message,
        )

    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            close_fds=True,
        )
    except FileNotFoundError:
        return outcome("missing", message=f"{argv[0]}: command not found on PATH")
    except PermissionError as exc:
        return outcome("permission", message=f"{argv[0]}: permission denied ({exc.strerror})")
    except OSError as exc:
        return outcome("error", message=f"{argv[0]}: cannot start: {exc.strerror or exc}")
    if registry is not None:
        registry.add(proc)
    try:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            try:
                out, err = proc.communicate(timeout=2.0)
            except subprocess.TimeoutExpired:
                out, err = b"", b""
            return outcome(
                "timeout",
                exit_code=None,
                stdout=(out or b"")[:MAX_OUTPUT_BYTES],
                stderr=(err or b"")[:MAX_OUTPUT_BYTES],
                message=f"no answer within {timeout_s:g} s; killed",
            )
    finally:
        if registry is not None:
            registry.remove(proc)
    code = proc.returncode
    out = (out or b"")[:MAX_OUTPUT_BYTES]
    err = (err or b"")[:MAX_OUTPUT_BYTES]
    if code is not None and code < 0:
        return outcome("error", exit_code=code, stdout=out, stderr=err, message=f"killed by signal {-code}")
    if code == 0:
        return outcome("ok", exit_code=0, stdout=out, stderr=err)
    text = (err or out).decode("utf-8", "replace").strip()
    first = text.splitlines()[0] if text else ""
    if code in (126,) or "permission denied" in text.lower():
        return outcome(
            "permission", exit_code=code, stdout=out, stderr=err, message=first or "permission denied"
        )
    return outcome("nonzero", exit_code=code, stdout=out, stderr=err, message=f"exit {code}: {first}".strip())


def run_all(
    jobs: Sequence[tuple[str, Sequence[str]]],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    registry: ProcessRegistry | None = None,
) -> dict[str, ProbeOutcome]:
    """Run every job at once; return outcomes by name. Ctrl-C kills what is still running."""
    registry = registry or ProcessRegistry()
    results: dict[str, ProbeOutcome] = {}
    if not jobs:
        return results
    pool = ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="probe")
    futures: dict[str, Future[ProbeOutcome]] = {}
    try:
        # submitting is inside the try: a Ctrl-C while the first probes already run must still end
        # them, or the interpreter waits out their timeout joining the pool's threads at exit
        for name, argv in jobs:
            futures[name] = pool.submit(run_probe, name, argv, timeout_s, env, registry)
        for name, fut in futures.items():
            results[name] = future_result(fut)
    except KeyboardInterrupt:
        # Ctrl-C: end what is still running (only our own process groups), keep what had finished
        registry.kill_all()
        argv_by_name = dict(jobs)
        for name in argv_by_name:
            if name in results:
                continue
            pending = futures.get(name)
            try:
                outcome = future_result(pending, 3.0) if pending is not None else None
            except BaseException:  # noqa: BLE001 - a probe that did not come back is "interrupted"
                outcome = None
            if outcome is None or outcome.status != "ok":
                outcome = ProbeOutcome(
                    name=name,
                    argv=list(argv_by_name[name]),
                    status="interrupted",
                    started=outcome.started if outcome else _now(),
                    duration_s=outcome.duration_s if outcome else 0.0,
                    stdout=outcome.stdout if outcome else b"",
                    stderr=outcome.stderr if outcome else b"",
                    message="interrupted (Ctrl-C) before it finished",
                )
            results[name] = outcome
        pool.shutdown(wait=False, cancel_futures=True)
        raise ProbesInterrupted(results) from None
    pool.shutdown(wait=True)
    return results


class ProbesInterrupted(KeyboardInterrupt):
    """Ctrl-C during collection, carrying what had already been measured."""

    def __init__(self, partial: dict[str, ProbeOutcome]) -> None:
        super().__init__("interrupted")
        self.partial = partial
