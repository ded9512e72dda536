"""GPU memory peak during a load level: NVML when the server is on this host and NVML is importable.

vLLM's ``/metrics`` has no GPU-memory gauge, so a remote server's peak is ``unknown`` (and the sheet
says so) unless the user runs ``accept`` on the server's host. NVML calls can block on a wedged driver:
sampling runs in a daemon thread that is never joined for long.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from urllib.parse import urlparse

SAMPLE_INTERVAL_S = 0.5
LOCAL_NAMES = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


def is_local(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    if host in LOCAL_NAMES or host.startswith("127."):
        return True
    try:
        return host in {socket.gethostname().lower(), socket.getfqdn().lower()}
    except OSError:
        return False


@dataclass
class GpuMemorySampler:
    """``start()`` / ``stop()`` around a level; ``peak_mib`` and ``source`` afterwards."""

    url: str
    peak_mib: float | None = None
    source: str = "unknown"
    error: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> GpuMemorySampler:
        if not is_local(self.url):
            self.source = (
                "unknown (remote server: vLLM's /metrics has no GPU memory gauge; run accept on its host)"
            )
            return self
        try:
            import pynvml  # noqa: F401
        except Exception:  # noqa: BLE001 - not installed or broken: no NVML here
            self.source = "unknown (NVML not importable here: pip install 'vllm-medic[nvml]')"
            return self
        self.source = "nvml (local GPUs, sum of used memory)"
        self._thread = threading.Thread(target=self._run, name="accept-gpumem", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                handles = [
                    pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(pynvml.nvmlDeviceGetCount()))
                ]
                while True:
                    used = sum(int(pynvml.nvmlDeviceGetMemoryInfo(h).used) for h in handles) / (1024 * 1024)
                    self.peak_mib = used if self.peak_mib is None else max(self.peak_mib, used)
                    if self._stop.wait(SAMPLE_INTERVAL_S):
                        return
            finally:
                pynvml.nvmlShutdown()
        except Exception as exc:  # noqa: BLE001 - reported on the sheet, never fatal
            self.error = f"{type(exc).__name__}: {exc}"
            self.source = f"unknown (NVML failed: {self.error})"

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
