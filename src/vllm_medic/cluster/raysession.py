"""One way to reach Ray for every cluster feature (collect, triage, distributed load).

Ray is an optional extra: without it the user is told how to get it (exit 2). An explicit address
where nothing listens fails at once instead of after ``ray.init``'s minutes of retries. vllm-medic
itself is shipped to the nodes with ``runtime_env`` ``py_modules``, so nothing needs installing there.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from vllm_medic.errors import UsageError

RAY_REQUIRED = "{what} needs Ray: pip install 'vllm-medic[ray]' (the nodes already run it for vLLM's multi-node executor)"


def import_ray(what: str = "Ray fan-out") -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError(RAY_REQUIRED.format(what=what)) from None
    return ray


def check_port(address: str | None, timeout_s: float) -> None:
    """Fail fast on an explicit ``host:port`` where nothing listens: ``ray.init`` would otherwise retry
    the GCS connection for minutes before giving up."""
    if not address or address == "auto":
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdecimal() or not host:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=max(timeout_s, 0.5)):
            pass
    except OSError as exc:
        raise UsageError(
            f"cannot connect to the Ray cluster at {address}: nothing answers on {host}:{port} "
            f"({exc.strerror or exc}); give the head node's GCS address (default port 6379), or "
            "ray://HOST:10001 for Ray Client"
        ) from None


def connect(
    address: str | None,
    *,
    what: str = "Ray fan-out",
    ship_package: bool = True,
    probe_timeout_s: float = 10.0,
    start_local: bool = False,
) -> Any:
    """``ray.init`` on the cluster at ``address`` ('auto' / None: the running one; with ``start_local``
    a fresh local Ray when none is given). Returns the ray module; the caller shuts it down."""
    ray = import_ray(what)
    kwargs: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False}
    if address or not start_local:
        kwargs["address"] = address or "auto"
    if ship_package:
        import vllm_medic

        kwargs["runtime_env"] = {"py_modules": [str(Path(vllm_medic.__file__).parent)]}
    check_port(address, probe_timeout_s)
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(f"cannot connect to the Ray cluster at {address or 'auto'}: {exc}") from None
    return ray
