"""NVML through `nvidia-ml-py` (optional extra `nvml`), when it is importable.

NVML calls can block on a wedged driver, so the query runs in a daemon thread that the collector
waits on for at most the probe timeout; the thread is abandoned, never joined, after that.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from vllm_medic.waits import event_wait


def nvml_available() -> bool:
    try:
        import pynvml  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return False
    return True


def _query() -> dict[str, Any]:
    import pynvml

    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    pynvml.nvmlInit()
    try:
        data: dict[str, Any] = {"driver_version": text(pynvml.nvmlSystemGetDriverVersion())}
        try:
            cuda = int(pynvml.nvmlSystemGetCudaDriverVersion())
            data["cuda_driver_version"] = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        except Exception:  # noqa: BLE001 - older drivers lack this call
            pass
        gpus = []
        for i in range(int(pynvml.nvmlDeviceGetCount())):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            gpus.append(
                {
                    "index": i,
                    "name": text(pynvml.nvmlDeviceGetName(h)),
                    "uuid": text(pynvml.nvmlDeviceGetUUID(h)),
                    "bus_id": text(pynvml.nvmlDeviceGetPciInfo(h).busId),
                    "memory_total_mib": int(mem.total) // (1024 * 1024),
                    "memory_used_mib": int(mem.used) // (1024 * 1024),
                }
            )
        data["gpus"] = gpus
        return data
    finally:
        pynvml.nvmlShutdown()


class NvmlProbe:
    """Start the query now; `result(timeout)` gives (status, bytes, message, duration)."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._data: dict[str, Any] | None = None
        self._error: str | None = None
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="nvml", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._data = _query()
        except Exception as exc:  # noqa: BLE001 - an NVML error is data for the bundle
            self._error = f"{type(exc).__name__}: {exc}"
        finally:
            self._done.set()

    def result(self, timeout_s: float) -> tuple[str, bytes, str, float]:
        remaining = max(0.0, timeout_s - (time.monotonic() - self._t0))
        finished = event_wait(self._done, remaining)
        duration = round(time.monotonic() - self._t0, 3)
        if not finished:
            return "timeout", b"", f"NVML did not answer within {timeout_s:g} s", duration
        if self._error is not None:
            return "error", b"", self._error, duration
        return "ok", (json.dumps(self._data, indent=2) + "\n").encode(), "", duration
