"""Collect on every node of a cluster: through Ray (the default for vLLM clusters), SSH or kubectl.

Ray runs the very same ``collect_here`` in one task per alive node, pinned with node-affinity
scheduling. SSH and ``kubectl exec`` ship the standard-library probe runner (``remote_probe``) as the
``-c`` program of the node's ``python3`` with the probe list as one JSON argument; its raw outputs
come back and go through the same parsers as a local collection.
"""

from __future__ import annotations

import base64
import json
import shlex
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from vllm_medic.collect.api import CollectOptions, CollectResult, load_captured
from vllm_medic.collect.env_vocabulary import COLLECTED
from vllm_medic.errors import UsageError

REMOTE_PYTHON = "python3"
SSH_HANDSHAKES_AT_ONCE = 16


@dataclass
class NodeCollection:
    node: str
    transport: str  # ray | ssh | k8s
    address: str | None = None
    result: CollectResult | None = None
    error: str | None = None
    duration_s: float = 0.0
    clock_offset_s: float | None = None  # node clock minus ours (NTP-style midpoint estimate)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.result is not None and self.error is None


class Tally:
    """Nodes planned / answered / failed so far, updated by the workers as each node finishes: what the
    terminal's progress line shows (plain counters, read from the drawing thread)."""

    def __init__(self) -> None:
        self.planned: int | None = None
        self.answered = 0
        self.failed = 0
        self._lock = threading.Lock()

    def plan(self, n: int) -> None:
        self.planned = n

    def done(self, node: NodeCollection) -> NodeCollection:
        with self._lock:
            if node.ok:
                self.answered += 1
            else:
                self.failed += 1
        return node


def progress_line(transport: str, tally: Tally, elapsed_s: float) -> str:
    """The terminal's progress line (pure)."""
    if tally.planned is None:
        return f"collect via {transport}: finding the nodes, {elapsed_s:.0f} s"
    return (
        f"collect via {transport}: nodes answered {tally.answered}/{tally.planned}, "
        f"failures {tally.failed}, {elapsed_s:.0f} s"
    )


# ---------------------------------------------------------------- the probe specification


def probe_spec(opts: CollectOptions) -> dict[str, Any]:
    """The probes of a local collection, with placeholders filled for a remote node; ``{python}``
    (the vLLM environment's interpreter) is resolved on the node itself; ``env`` is which variables
    the node reports, the same selection a local collection keeps."""
    from vllm_medic.collect.api import source_table  # the one list of probes and canonical names

    table = source_table()
    values = {"image": opts.image, "python": "{python}", "container": None}
    probes = []
    for p in table["probes"]:
        need = p.get("needs")
        if need and not values.get(need):
            continue
        argv = [
            values.get(a[1:-1]) or "" if a.startswith("{") and a.endswith("}") and a[1:-1] in values else a
            for a in map(str, p["argv"])
        ]
        probes.append({"name": p["name"], "file": p["file"], "argv": argv})
    return {
        "timeout_s": opts.timeout_s,
        "probes": probes,
        "files": list(table.get("files") or []),
        "env": COLLECTED.to_spec(),
    }


def remote_argv(spec: dict[str, Any], python: str = REMOTE_PYTHON) -> list[str]:
    script = resources.files("vllm_medic.cluster").joinpath("remote_probe.py").read_text(encoding="utf-8")
    return [python, "-c", script, json.dumps(spec, separators=(",", ":"))]


def result_from_remote(payload: dict[str, Any], node: str, transport: str) -> CollectResult:
    """Rebuild a collection from the remote runner's answer with the local parsers."""
    files = payload.get("files") or {}
    if not isinstance(files, dict):
        raise ValueError("the remote probe answered without a files map")
    with tempfile.TemporaryDirectory(prefix="vllm-medic-node-") as tmp:
        root = Path(tmp)
        for name, b64 in files.items():
            safe = Path(str(name)).name
            (root / safe).write_bytes(base64.b64decode(b64))
        manifest = {
            "tool_version": None,
            "collected_at": None,
            "options": {
                "transport": transport,
                "python": payload.get("python"),
                "python_origin": payload.get("python_origin"),
            },
            "sources": payload.get("sources") or [],
        }
        (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        result = load_captured(root)
    result.snapshot.node = node
    result.snapshot.host.hostname = str(payload.get("host") or node)
    result.manifest["mode"] = transport
    result.manifest["from"] = node
    return result


def _offset(t_send: float, remote_time: float | None, t_recv: float) -> float | None:
    if not isinstance(remote_time, int | float):
        return None
    return round(float(remote_time) - (t_send + t_recv) / 2.0, 3)


def _fan_out(
    targets: list[Any], work: Callable[[Any], NodeCollection], tally: Tally | None, workers: int = 64
) -> list[NodeCollection]:
    tally = tally or Tally()
    tally.plan(len(targets))
    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=min(workers, len(targets)), thread_name_prefix="fanout") as pool:
        return list(pool.map(lambda t: tally.done(work(t)), targets))


# ---------------------------------------------------------------- SSH


@dataclass(frozen=True)
class SshTarget:
    host: str
    port: int = 22
    user: str | None = None

    @property
    def name(self) -> str:
        return self.host if self.port == 22 else f"{self.host}:{self.port}"


def parse_hosts_file(path: Path) -> list[SshTarget]:
    """One node per line: ``[user@]host[:port]``; blank lines and ``#`` comments ignored."""
    from vllm_medic.safeio import kind_of

    kind = kind_of(Path(path).expanduser().resolve())
    if kind not in (None, "missing") and not kind.startswith("unreadable"):
        raise UsageError(f"the hosts file {path} is {kind}, not a regular file: refused")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read the hosts file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path} is not a text hosts file (byte {exc.start} is not UTF-8); "
            "expected one [user@]host[:port] per line"
        ) from None
    targets = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        user, _, hostport = line.rpartition("@")
        host, _, port = hostport.partition(":")
        bad_port = bool(port) and not (port.isdecimal() and 0 < int(port) < 65536)
        if not host or bad_port or not line.isprintable() or " " in line:
            raise UsageError(f"{path}:{lineno}: expected [user@]host[:port], got {raw.strip()!r}")
        targets.append(SshTarget(host=host, port=int(port) if port else 22, user=user or None))
    if not targets:
        raise UsageError(f"{path} lists no hosts")
    return targets


def collect_ssh(
    targets: list[SshTarget],
    opts: CollectOptions,
    *,
    key_filename: str | None = None,
    user: str | None = None,
    accept_new_host_keys: bool = False,
    connect_timeout_s: float = 10.0,
    remote_python: str = REMOTE_PYTHON,
    tally: Tally | None = None,
) -> list[NodeCollection]:
    try:
        import paramiko
    except ImportError:
        raise UsageError("SSH collection needs paramiko: pip install 'vllm-medic[ssh]'") from None
    argv = remote_argv(probe_spec(opts), remote_python)
    command = shlex.join(argv)
    # Handshakes are CPU work in this process; a bounded number at once keeps 64+ nodes from
    # starving each other into timeouts, while the remote probes still all run concurrently.
    handshakes = threading.BoundedSemaphore(SSH_HANDSHAKES_AT_ONCE)

    def one(t: SshTarget) -> NodeCollection:
        t0 = time.monotonic()
        node = NodeCollection(node=t.name, transport="ssh", address=t.name)
        client = paramiko.SSHClient()
        try:
            client.load_system_host_keys()
            client.set_missing_host_key_policy(
                paramiko.AutoAddPolicy() if accept_new_host_keys else paramiko.RejectPolicy()
            )
            with handshakes:
                client.connect(
                    t.host,
                    port=t.port,
                    username=t.user or user,
                    key_filename=key_filename,
                    timeout=connect_timeout_s,
                    banner_timeout=connect_timeout_s,
                    auth_timeout=connect_timeout_s,
                    allow_agent=key_filename is None,
                    look_for_keys=key_filename is None,
                )
            _stdin, stdout, stderr = client.exec_command(command, timeout=opts.timeout_s * 2 + 15)
            out = stdout.read()
            t_recv = time.time()
            err = stderr.read()
            code = stdout.channel.recv_exit_status()
            if code != 0 or not out.strip():
                node.error = f"remote probe exited {code}: {err.decode('utf-8', 'replace').strip()[-300:]}"
            else:
                payload = json.loads(out)
                node.result = result_from_remote(payload, t.name, "ssh")
                node.clock_offset_s = end_offset(payload, t_recv)
        except (paramiko.SSHException, EOFError) as exc:
            node.error = f"ssh {t.name}: {type(exc).__name__}: {exc}"
        except TimeoutError:
            node.error = f"ssh {t.name}: timed out (connect {connect_timeout_s:g} s / command {opts.timeout_s * 2 + 15:g} s)"
        except OSError as exc:
            node.error = f"ssh {t.name}: {exc.strerror or str(exc) or type(exc).__name__}"
        except (ValueError, json.JSONDecodeError) as exc:
            node.error = f"ssh {t.name}: unreadable answer from the remote probe ({exc})"
        finally:
            client.close()
        node.duration_s = round(time.monotonic() - t0, 3)
        return node

    return _fan_out(targets, one, tally)


def end_offset(payload: dict[str, Any], t_recv: float) -> float | None:
    """Node clock minus ours from the runner's last timestamp and our receive time: the error is
    bounded by the one-way transit of the answer's last bytes (milliseconds on a LAN)."""
    remote = payload.get("time_end")
    if not isinstance(remote, int | float):
        return None
    return round(float(remote) - t_recv, 3)


# ---------------------------------------------------------------- Kubernetes


def _kubectl(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["kubectl", *args], capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL
    )


def collect_k8s(
    selector: str,
    opts: CollectOptions,
    *,
    namespace: str | None = None,
    container: str | None = None,
    remote_python: str = REMOTE_PYTHON,
    tally: Tally | None = None,
) -> list[NodeCollection]:
    ns = ["-n", namespace] if namespace else []
    try:
        listing = _kubectl(["get", "pods", "-l", selector, *ns, "-o", "json"], opts.timeout_s + 20)
    except FileNotFoundError:
        raise UsageError("--k8s needs kubectl on PATH") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"kubectl get pods -l {selector} did not answer in time") from None
    if listing.returncode != 0:
        raise UsageError(
            f"kubectl get pods -l {selector} failed: {listing.stderr.decode('utf-8', 'replace').strip()}"
        )
    try:
        items = json.loads(listing.stdout).get("items") or []
    except (json.JSONDecodeError, AttributeError):
        raise UsageError("kubectl get pods answered something that is not JSON") from None
    pods = [
        (i["metadata"]["name"], (i.get("spec") or {}).get("nodeName"))
        for i in items
        if (i.get("status") or {}).get("phase") == "Running"
    ]
    if not pods:
        raise UsageError(f"no Running pods match -l {selector}")
    argv = remote_argv(probe_spec(opts), remote_python)

    def one(pod: tuple[str, str | None]) -> NodeCollection:
        name, k8s_node = pod
        t0 = time.monotonic()
        node = NodeCollection(node=name, transport="k8s", address=k8s_node, details={"k8s_node": k8s_node})
        cmd = ["exec", *ns, name, *(["-c", container] if container else []), "--", *argv]
        try:
            done = _kubectl(cmd, opts.timeout_s * 2 + 20)
            t_recv = time.time()
            if done.returncode != 0 or not done.stdout.strip():
                node.error = f"kubectl exec {name} exited {done.returncode}: {done.stderr.decode('utf-8', 'replace').strip()[-300:]}"
            else:
                payload = json.loads(done.stdout)
                node.result = result_from_remote(payload, name, "k8s")
                node.clock_offset_s = end_offset(payload, t_recv)
        except subprocess.TimeoutExpired:
            node.error = f"kubectl exec {name}: no answer in time"
        except (ValueError, json.JSONDecodeError) as exc:
            node.error = f"kubectl exec {name}: unreadable answer ({exc})"
        node.duration_s = round(time.monotonic() - t0, 3)
        return node

    return _fan_out(pods, one, tally)


# ---------------------------------------------------------------- Ray


def _ray_collect_task(opts_dict: dict[str, Any]) -> dict[str, Any]:
    """Runs on the node: the local collection itself, shipped back as plain data."""
    import os

    from vllm_medic.collect.api import CollectOptions, collect_here

    t = time.time()
    result = collect_here(CollectOptions(**opts_dict))
    return {
        "snapshot": result.snapshot.to_dict(),
        "manifest": result.manifest,
        "raw": result.raw,
        "time": t,
        "hostname": os.uname().nodename,
    }


def _now_task() -> float:
    return time.time()


def _best_offset(samples: list[tuple[float, float, float]]) -> float | None:
    """NTP-style: the sample with the shortest round trip bounds the error by half of it."""
    usable = [s for s in samples if isinstance(s[1], int | float)]
    if not usable:
        return None
    t_send, remote, t_recv = min(usable, key=lambda s: s[2] - s[0])
    return _offset(t_send, remote, t_recv)


def collect_ray(
    address: str | None, opts: CollectOptions, *, ship_package: bool = True, tally: Tally | None = None
) -> list[NodeCollection]:
    from vllm_medic.cluster.raysession import connect
    from vllm_medic.snapshot import Snapshot

    ray = connect(address, ship_package=ship_package, probe_timeout_s=min(opts.timeout_s, 10.0))
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        tally = tally or Tally()
        tally.plan(len(nodes))
        task = ray.remote(num_cpus=0, max_retries=0)(_ray_collect_task)
        opts_dict = {
            "image": opts.image,
            "launch": opts.launch,
            "timeout_s": opts.timeout_s,
            "env": None,
            "model_path": opts.model_path,
        }
        pending = {}
        for n in nodes:
            ref = task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
            ).remote(opts_dict)
            pending[ref] = (n, time.monotonic())
        names = _ray_node_names(nodes)
        out: list[NodeCollection] = []
        deadline = time.monotonic() + opts.timeout_s * 2 + 60
        remaining = list(pending)
        while remaining and time.monotonic() < deadline:
            ready, remaining = ray.wait(
                remaining, num_returns=1, timeout=max(0.1, deadline - time.monotonic())
            )
            for ref in ready:
                n, m0 = pending[ref]
                node = NodeCollection(
                    node=names[n["NodeID"]],
                    transport="ray",
                    address=n.get("NodeManagerAddress"),
                    details={"node_id": n["NodeID"]},
                )
                try:
                    data = ray.get(ref)
                    snap = Snapshot.from_dict(data["snapshot"])
                    snap.node = node.node
                    node.result = CollectResult(snapshot=snap, manifest=data["manifest"], raw=data["raw"])
                    node.clock_offset_s = _ray_clock_offset(ray, n["NodeID"])
                except Exception as exc:  # noqa: BLE001 - a failed node is a finding, not a crash
                    node.error = (
                        f"collection task failed on {node.node}: {type(exc).__name__}: {str(exc)[-300:]}"
                    )
                node.duration_s = round(time.monotonic() - m0, 3)
                out.append(tally.done(node))
        for ref in remaining:
            n, m0 = pending[ref]
            ray.cancel(ref, force=True)
            out.append(
                tally.done(
                    NodeCollection(
                        node=names[n["NodeID"]],
                        transport="ray",
                        address=n.get("NodeManagerAddress"),
                        error="no answer before the deadline (node busy, hung probe or lost)",
                        duration_s=round(time.monotonic() - m0, 3),
                    )
                )
            )
        return sorted(out, key=lambda c: c.node)
    finally:
        ray.shutdown()


def _ray_clock_offset(ray: Any, node_id: str, pings: int = 3) -> float | None:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ping = ray.remote(num_cpus=0, max_retries=0)(_now_task)
    samples = []
    for _ in range(pings):
        t_send = time.time()
        try:
            remote = ray.get(
                ping.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
                ).remote(),
                timeout=10,
            )
        except Exception:  # noqa: BLE001 - an unmeasured offset is reported as unknown
            return None
        samples.append((t_send, remote, time.time()))
    return _best_offset(samples)


def _ray_node_names(nodes: list[dict[str, Any]]) -> dict[str, str]:
    """Node names by address; several raylets on one address get their short node id appended."""
    by_addr: dict[str, list[str]] = {}
    for n in nodes:
        by_addr.setdefault(str(n.get("NodeManagerAddress") or n.get("NodeName") or "node"), []).append(
            n["NodeID"]
        )
    names = {}
    for addr, ids in by_addr.items():
        for node_id in ids:
            names[node_id] = addr if len(ids) == 1 else f"{addr}-{node_id[:8]}"
    return names
