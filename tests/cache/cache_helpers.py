"""Run the public CLI in a subprocess (exit codes and stderr as the user sees them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "cache"
EXE = [sys.executable, "-m", "vllm_medic.cli"]


def run(*args: str, timeout: float = 300) -> tuple[int, Any, str]:
    env = {**os.environ, "COLUMNS": "400"}  # keep rich from wrapping messages mid-phrase
    proc = subprocess.run([*EXE, "cache", *args], capture_output=True, text=True, timeout=timeout, env=env)
    out: Any = proc.stdout
    if "--json" in args and proc.stdout.strip():
        out = json.loads(proc.stdout)
    return proc.returncode, out, proc.stderr


def write(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj))
    return path
