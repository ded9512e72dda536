"""The probe runner sent to a remote node (SSH, `kubectl exec`): standard library only.

It is shipped as the ``-c`` program of the node's ``python3``, with the probe specification (argv
lists, files to read, timeout) as one JSON argument, so nothing is ever composed into a shell
string. It answers one JSON document: every raw output base64-encoded under its canonical file
name, and a manifest entry per source (status, exit code, duration) in the same shape as a local
collection, so the caller rebuilds the snapshot with the very same parsers.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time


def select_env(environ: dict, rules: dict) -> dict:
    """The variables the spec's ``env`` rules pick (names, prefixes, suffixes): the collector's own
    ``collected`` selection from data/env_vocabulary.yaml, sent along because this file imports nothing."""
    names = set(rules.get("names") or ())
    prefixes = tuple(rules.get("prefixes") or ())
    suffixes = tuple(rules.get("suffixes") or ())
    return {k: v for k, v in environ.items() if k in names or k.startswith(prefixes) or k.endswith(suffixes)}


def _run(name: str, argv: list[str], file: str, timeout: float, out: dict, lock: threading.Lock) -> None:
    t0 = time.monotonic()
    entry: dict[str, object] = {
        "name": name,
        "command": " ".join(argv),
        "file": None,
        "exit_code": None,
        "status": "ok",
        "message": "",
    }
    data = b""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        entry.update(status="missing", message=f"{argv[0]}: command not found on PATH")
    except OSError as exc:
        entry.update(status="error", message=f"{argv[0]}: cannot start: {exc}")
    else:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
            entry["exit_code"] = proc.returncode
            data = stdout or stderr
            if proc.returncode != 0:
                first = (stderr or stdout).decode("utf-8", "replace").strip().splitlines()
                entry.update(status="nonzero", message=f"exit {proc.returncode}: {first[0] if first else ''}")
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
            proc.communicate()
            entry.update(status="timeout", message=f"{argv[0]}: no answer within {timeout:g} s; killed")
    entry["duration_s"] = round(time.monotonic() - t0, 3)
    with lock:
        if data.strip():
            out["files"][file] = base64.b64encode(data[: 32 * 1024 * 1024]).decode("ascii")
            entry["file"] = file
        out["sources"].append(entry)


def vllm_python() -> tuple[str, str]:
    """The interpreter of the node's vLLM environment (the `vllm` script's shebang, else ours), and how
    it was chosen."""
    for d in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(d, "vllm")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            try:
                with open(candidate, "rb") as fh:
                    first = fh.readline(512).decode("utf-8", "replace").strip()
            except OSError:
                break
            if first.startswith("#!"):
                interp = first[2:].strip().split()[0]
                if os.path.basename(interp) not in ("env", "sh") and os.access(interp, os.X_OK):
                    return interp, f"the interpreter of the vllm script {candidate} on the node"
            return sys.executable, f"the node's python3 (no usable interpreter in {candidate}'s first line)"
    return sys.executable, "the node's python3 (no `vllm` on the node's PATH)"


def collect(spec: dict) -> dict:
    out: dict = {"files": {}, "sources": [], "host": os.uname().nodename, "time": time.time()}
    lock = threading.Lock()
    timeout = float(spec.get("timeout_s", 10.0))
    python, origin = vllm_python()
    out["python"], out["python_origin"] = python, origin
    threads = [
        threading.Thread(
            target=_run,
            args=(
                p["name"],
                [python if a == "{python}" else a for a in p["argv"]],
                p["file"],
                timeout,
                out,
                lock,
            ),
            daemon=True,
        )
        for p in spec.get("probes", [])
    ]
    for t in threads:
        t.start()
    for f in spec.get("files", []):
        entry = {
            "name": f["name"],
            "command": f"(read {f['path']})",
            "file": None,
            "status": "ok",
            "message": "",
        }
        try:
            with open(f["path"], "rb") as fh:
                out["files"][f["file"]] = base64.b64encode(fh.read(32 * 1024 * 1024)).decode("ascii")
            entry["file"] = f["file"]
        except FileNotFoundError:
            entry.update(status="missing", message=f"{f['path']} does not exist")
        except PermissionError:
            entry.update(status="permission", message=f"{f['path']}: permission denied")
        except OSError as exc:
            entry.update(status="error", message=str(exc))
        out["sources"].append(entry)
    env = select_env(dict(os.environ), spec.get("env") or {})
    out["files"]["env.txt"] = base64.b64encode(
        "".join(f"{k}={v}\n" for k, v in sorted(env.items())).encode()
    ).decode()
    out["sources"].append(
        {"name": "env", "command": "(remote environment)", "file": "env.txt", "status": "ok", "message": ""}
    )
    markers = [
        f"{m}: {'present' if os.path.exists(m) else 'absent'}" for m in ("/.dockerenv", "/run/.containerenv")
    ]
    markers.append(f"KUBERNETES_SERVICE_HOST: {os.environ.get('KUBERNETES_SERVICE_HOST') or 'absent'}")
    out["files"]["container.txt"] = base64.b64encode(("\n".join(markers) + "\n").encode()).decode()
    out["sources"].append(
        {
            "name": "container",
            "command": "(remote markers)",
            "file": "container.txt",
            "status": "ok",
            "message": "",
        }
    )
    for t in threads:
        t.join(timeout + 5)
    out["time_end"] = time.time()  # the caller's receive time minus this bounds the clock offset
    return out


def main() -> None:
    spec = json.loads(sys.argv[1])
    sys.stdout.write(json.dumps(collect(spec)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
