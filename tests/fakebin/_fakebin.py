"""Fake command-line tools that replay recorded (real) outputs, for driving `collect` through real
subprocesses without a GPU, RDMA NICs or a Docker engine.

Every tool in this directory is a three-line script calling `main(TOOL)`. Behaviour comes from the
environment, so a test sets it per run:

- ``FAKEBIN_DIR``: directory of recordings under vllm-medic's canonical file names
  (``nvidia-smi.txt``, ``nvidia-smi-q.xml``, ``nvidia-smi-topo-m.txt``, ``docker-image-inspect.json``...).
  The invocation's argv selects the file (``nvidia-smi -q -x`` -> ``nvidia-smi-q.xml``).
- ``FAKEBIN_<TOOL>_EXIT=N``: exit with N after printing (TOOL upper-cased, ``-`` -> ``_``: NVIDIA_SMI).
- ``FAKEBIN_<TOOL>_STREAM=stderr``: print the recording on stderr instead of stdout.
- ``FAKEBIN_<TOOL>_HANG=1``: never return (a wedged driver); ``=child`` also leaves a child process
  that never returns, to check that the whole process group is killed.
- ``FAKEBIN_<TOOL>_GARBAGE=1``: print random bytes instead of the recording.
- ``FAKEBIN_LOG=FILE``: append one JSON line per invocation (tool, argv) to FILE.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def _recording(tool: str, args: list[str]) -> str | None:
    if tool == "nvidia-smi":
        if not args:
            return "nvidia-smi.txt"
        if args[:2] == ["-q", "-x"]:
            return "nvidia-smi-q.xml"
        if args[:1] in (["-q"], ["-a"]):
            return "nvidia-smi-q.txt"
        if args[0].startswith("--query-gpu"):
            return "nvidia-smi-query-gpu.csv"
        if args[0].startswith("--query-compute-apps"):
            return "nvidia-smi-query-compute-apps.csv"
        if args[:2] == ["topo", "-m"]:
            return "nvidia-smi-topo-m.txt"
        return None
    if tool == "docker":
        if args[:2] == ["image", "inspect"]:
            return "docker-image-inspect.json"
        if args[:2] == ["images", "--digests"]:
            return "docker-images-digests.txt"
        if args[:1] == ["inspect"]:
            return "docker-inspect.json"
        return None
    if tool == "vllm":
        return "vllm-version.txt" if args == ["--version"] else None
    if tool == "ibv_devinfo":
        return "ibv-devinfo.txt"
    if tool == "rdma":
        return "rdma-link.txt" if args[:1] == ["link"] else None
    if tool == "ip":
        if args == ["link"]:
            return "ip-link.txt"
        if args == ["-br", "link"]:
            return "ip-br-link.txt"
        return None
    return f"{tool}.txt"


def _knob(tool: str, name: str) -> str | None:
    return os.environ.get(f"FAKEBIN_{tool.upper().replace('-', '_')}_{name}")


def main(tool: str) -> None:
    args = sys.argv[1:]
    log = os.environ.get("FAKEBIN_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"tool": tool, "argv": args, "pid": os.getpid()}) + "\n")
    hang = _knob(tool, "HANG")
    if hang:
        if hang == "child":
            child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(3600)"])
            if log:
                with open(log, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"tool": tool, "child_pid": child.pid}) + "\n")
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a wedged tool ignores polite requests
        while True:
            time.sleep(3600)
    out = sys.stderr if _knob(tool, "STREAM") == "stderr" else sys.stdout
    if _knob(tool, "GARBAGE"):
        sys.stdout.buffer.write(os.urandom(4096))
        sys.stdout.flush()
    else:
        name = _recording(tool, args)
        directory = os.environ.get("FAKEBIN_DIR", "")
        path = os.path.join(directory, name) if name and directory else None
        if path is None or not os.path.isfile(path):
            print(f"{tool}: fake has no recording for {args!r} in FAKEBIN_DIR", file=sys.stderr)
            sys.exit(int(_knob(tool, "EXIT") or 1))
        with open(path, encoding="utf-8", errors="replace") as fh:
            out.write(fh.read())
        out.flush()
    sys.exit(int(_knob(tool, "EXIT") or 0))
