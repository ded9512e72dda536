"""Gather the health facts: live on this machine (commands with timeouts) or from captured files.

Both paths produce the same ``HealthFacts`` (``Snapshot.health``) and use the same canonical file
names, so a bundle written by a live run reads back identically with ``--from``:

  dmesg.txt, journalctl-k.txt          kernel log (Xid events)
  nvidia-smi.txt, nvidia-smi-q.txt     host GPUs, fabric state
  systemctl-fabricmanager.txt          `systemctl status nvidia-fabricmanager`
  systemctl-imex.txt, imex-channels.txt, imex-nodes-config.txt   IMEX (GB200/GB300 NVL)
  shm.txt, ulimit.txt, cgroup-memory.txt                        container limits
  in-image-nvidia-smi.txt, in-image-versions.txt, in-image-pip-list.txt   probes inside the image
"""

from __future__ import annotations

import os
from pathlib import Path

from vllm_medic.collect.env_vocabulary import HEALTH_PROBE
from vllm_medic.collect.health import fabric, in_image, kernel_log, limits
from vllm_medic.collect.health.files import HEALTH_FILES
from vllm_medic.collect.health.runner import Runner, run_command
from vllm_medic.errors import UsageError
from vllm_medic.snapshot_health import FabricFacts, HealthFacts

CANONICAL_FILES: tuple[str, ...] = (
    "nvidia-smi.txt",
    "nvidia-smi-q.txt",
    "nvidia-smi-q.xml",
    *HEALTH_FILES.values(),
)

IMEX_CONFIG = "/etc/nvidia-imex/nodes_config.cfg"
IMEX_CHANNELS = "/dev/nvidia-caps-imex-channels"


def _fabric_from(files: dict[str, str]) -> FabricFacts:
    fab = FabricFacts()
    if "nvidia-smi-q.xml" in files and files["nvidia-smi-q.xml"].lstrip().startswith("<"):
        fab.nvidia_smi_q = fabric.parse_nvidia_smi_q_xml(files["nvidia-smi-q.xml"])
    elif "nvidia-smi-q.txt" in files:
        fab.nvidia_smi_q = fabric.parse_nvidia_smi_q(files["nvidia-smi-q.txt"])
    if fab.nvidia_smi_q is not None and not fab.nvidia_smi_q.gpus:
        text = files.get("nvidia-smi-q.xml") or files.get("nvidia-smi-q.txt") or ""
        fab.nvidia_smi_q_error = (text.strip().splitlines() or ["empty output"])[0][:300]
    if "systemctl-fabricmanager.txt" in files:
        fab.fabric_manager = fabric.parse_service(files["systemctl-fabricmanager.txt"])
    if "systemctl-imex.txt" in files:
        fab.imex = fabric.parse_service(files["systemctl-imex.txt"])
    if "imex-channels.txt" in files:
        fab.imex_channels = [
            ln.strip() for ln in files["imex-channels.txt"].splitlines() if ln.strip().startswith("channel")
        ]
    if "imex-nodes-config.txt" in files:
        fab.imex_nodes_config = "present" if files["imex-nodes-config.txt"].strip() else "empty"
    return fab


def from_files(files: dict[str, str]) -> HealthFacts:
    """Health facts from captured outputs (canonical names -> text)."""
    health = HealthFacts()
    for name in ("dmesg.txt", "journalctl-k.txt"):
        if name in files:
            facts = kernel_log.from_text(files[name], name)
            if facts.readable or health.xid is None:
                health.xid = facts
            if facts.readable:
                break
    if "nvidia-smi.txt" in files:
        health.host_gpu = in_image.parse_nvidia_smi(files["nvidia-smi.txt"])
    fab = _fabric_from(files)
    if fab != FabricFacts():
        health.fabric = fab
    lim = limits.from_files(files)
    if lim.measured():
        health.limits = lim
    if any(k.startswith("in-image-") for k in files):
        health.in_image = in_image.from_outputs(files)
        health.in_image.image = files.get("in-image-image.txt", "").strip() or None
    return health


def read_dir(path: Path, cut: list[str] | None = None) -> dict[str, str]:
    """Canonical files from a directory (or the one bundle directory inside it) or a .tar.gz bundle;
    what the member cap left out is appended to ``cut``."""
    import tarfile

    from vllm_medic.safeio import MAX_FILE_BYTES, is_regular, kind_of, read_text

    wanted = set(CANONICAL_FILES) | {"snapshot.json"}
    files: dict[str, str] = {}
    if not path.is_dir() and kind_of(path.resolve()) is not None:
        raise UsageError(
            f"--from {path} is {kind_of(path.resolve())}: expected a bundle directory or .tar.gz"
        )
    if path.is_file() and tarfile.is_tarfile(path):
        from vllm_medic.collect.api import tar_members

        with tarfile.open(path, "r:*") as tar:
            for member in tar_members(
                tar, path, [] if cut is None else cut
            ):  # member count capped: 100,000 empty ones took 37 s
                name = Path(member.name).name
                if member.isfile() and name in wanted and (fh := tar.extractfile(member)) is not None:
                    # capped: a sparse 1 GiB member in an 827-byte tarball is read as its first 16 MiB
                    files[name] = fh.read(MAX_FILE_BYTES).decode("utf-8", "replace")
        return files
    dirs = [path] + [p for p in path.iterdir() if kind_of(p) == "a directory"] if path.is_dir() else []
    for d in dirs:
        for name in wanted:
            p = d / name
            if is_regular(p) and name not in files:  # never a symlink out of the bundle, a FIFO or a device
                files[name] = read_text(p, MAX_FILE_BYTES, "bundle file")
        if files:
            break
    return files


def collect_live(
    image: str | None = None,
    run: Runner = run_command,
    timeout: float = 20.0,
    image_timeout: float = 180.0,
    raw: dict[str, str] | None = None,
) -> tuple[HealthFacts, dict[str, str]]:
    """Run every health probe here. Returns (health facts, raw outputs by canonical file name).

    ``raw`` is filled as each probe finishes, so a caller interrupted by Ctrl-C still holds what was measured.
    """
    raw = {} if raw is None else raw
    health = HealthFacts()
    health.xid, xraw = kernel_log.probe(run, timeout)
    raw.update(xraw)
    for argv, name in (
        (["nvidia-smi"], "nvidia-smi.txt"),
        (["nvidia-smi", "-q"], "nvidia-smi-q.txt"),
        (
            ["systemctl", "status", "nvidia-fabricmanager", "--no-pager", "-l", "-n", "20"],
            "systemctl-fabricmanager.txt",
        ),
        (["systemctl", "status", "nvidia-imex", "--no-pager", "-l", "-n", "20"], "systemctl-imex.txt"),
    ):
        res = run(argv, timeout)
        raw[name] = res.output if (res.output or not res.missing) else res.describe()
        if res.missing and argv[0] == "systemctl":
            raw[name] = "systemctl: command not found"
    if Path(IMEX_CHANNELS).is_dir():
        raw["imex-channels.txt"] = "\n".join(sorted(os.listdir(IMEX_CHANNELS))) + "\n"
    if Path(IMEX_CONFIG).is_file():
        raw["imex-nodes-config.txt"] = Path(IMEX_CONFIG).read_text("utf-8", "replace")
    host = in_image.parse_nvidia_smi(raw.get("nvidia-smi.txt", ""))
    if host.driver_version:
        health.host_gpu = host
    # without GPUs it says what could not be checked
    health.fabric = _fabric_from({k: v for k, v in raw.items() if k != "nvidia-smi.txt"})
    health.limits, lraw = limits.probe_live()
    raw.update(lraw)
    health.env = HEALTH_PROBE.select(os.environ)
    if image:
        health.in_image, iraw = in_image.probe(image, run, image_timeout)
        raw.update(iraw)
        raw["in-image-image.txt"] = image + "\n"
    return health, raw


def write_raw(raw: dict[str, str], out_dir: Path) -> list[Path]:
    """Save raw outputs (redacted) under ``out_dir`` with their canonical names."""
    from vllm_medic.redact import redact_text

    written = []
    for name, text in raw.items():
        p = out_dir / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(redact_text(text), "utf-8")
        written.append(p)
    return written
