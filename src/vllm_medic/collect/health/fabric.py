"""NVLink fabric facts: per-GPU fabric state from `nvidia-smi -q`, Fabric Manager / IMEX service state.

Pure parsers; the probe that runs the commands lives in ``probe.py``.
"""

from __future__ import annotations

import re

from vllm_medic.snapshot_health import FabricGpu, FmMismatch, ServiceState, SmiQuery

_DRIVER = re.compile(r"^Driver Version\s*:\s*(\S+)", re.M)
_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$")
_KV = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*?)\s*$")

# `systemctl status` / `is-active` outputs
_NO_SYSTEMD = re.compile(
    r"(System has not been booted with systemd|Failed to connect to bus|systemctl: command not found)", re.I
)
_NOT_FOUND = re.compile(r"(could not be found|not-found|Unit .* not found|No such file)", re.I)
_ACTIVE_LINE = re.compile(r"^\s*Active:\s*(\S+)(?:\s*\(([^)]*)\))?", re.M)
_FM_MISMATCH = re.compile(
    r"fabric manager NVIDIA GPU driver interface version (?P<fm>\d+(?:\.\d+)*) do(?:n['’]t|esn['’]t) match with driver version (?P<drv>\d+(?:\.\d+)*)",
    re.I,
)
_NOTHING_TO_DO = re.compile(r"NV_WARN_NOTHING_TO_DO")

#: GPUs whose 8-GPU baseboards route NVLink through NVSwitch (Fabric Manager required).
NVSWITCH_PRODUCTS = re.compile(
    r"\b(A100-SXM|A800-SXM|H100 80GB HBM3|H100 SXM|H800|H200|H20\b|B100|B200|B300)", re.I
)
#: Grace-Blackwell NVL systems: multi-node NVLink (IMEX, MNNVL).
NVL_PRODUCTS = re.compile(r"\bGB(200|300)\b", re.I)
_ZERO_UUID = re.compile(r"^[0-]+$")


#: `nvidia-smi -q` Fabric section key -> FabricGpu field
_FABRIC_KEYS = {
    "State": "fabric_state",
    "Status": "fabric_status",
    "CliqueId": "clique_id",
    "ClusterUUID": "cluster_uuid",
}


def parse_nvidia_smi_q(text: str) -> SmiQuery:
    """Driver version and, per GPU, product name and the Fabric section (state/status/clique/cluster)."""
    out = SmiQuery()
    m = _DRIVER.search(text)
    if m:
        out.driver_version = m.group(1)
    gpu: FabricGpu | None = None
    in_fabric_indent: int | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        h = _GPU_HEADER.match(line.strip())
        if h and not line.startswith(" "):
            gpu = FabricGpu(bus_id=h.group(1))
            out.gpus.append(gpu)
            in_fabric_indent = None
            continue
        if gpu is None:
            continue
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        if stripped == "Fabric":
            in_fabric_indent = indent
            continue
        if in_fabric_indent is not None and indent <= in_fabric_indent and stripped:
            in_fabric_indent = None
        kv = _KV.match(line)
        if not kv:
            continue
        key, value = kv.group(2).strip(), kv.group(3).strip()
        if key == "Product Name" and gpu.product is None:
            gpu.product = value
        if in_fabric_indent is not None and indent == in_fabric_indent + 4 and key in _FABRIC_KEYS:
            setattr(gpu, _FABRIC_KEYS[key], value)
    return out


def parse_nvidia_smi_q_xml(text: str) -> SmiQuery:
    """The same facts from `nvidia-smi -q -x` (what `vllm-medic collect` captures as nvidia-smi-q.xml)."""
    from xml.etree import ElementTree as ET

    out = SmiQuery()
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return out
    out.driver_version = (root.findtext("driver_version") or "").strip() or None
    for g in root.findall("gpu"):

        def val(path: str, g: ET.Element = g) -> str | None:
            v = g.findtext(path)
            return v.strip() if v and v.strip() else None

        out.gpus.append(
            FabricGpu(
                bus_id=g.get("id"),
                product=val("product_name"),
                fabric_state=val("fabric/state"),
                fabric_status=val("fabric/status"),
                clique_id=val("fabric/cliqueId"),
                cluster_uuid=val("fabric/clusterUuid"),
            )
        )
    return out


def parse_service(text: str, exit_code: int | None = None) -> ServiceState:
    """State of a systemd unit from `systemctl is-active X` or `systemctl status X` output.

    state: active | inactive | failed | activating | not_found | no_systemd | unknown
    """
    t = text or ""
    info = ServiceState()
    mm = _FM_MISMATCH.search(t)
    if mm:
        info.fm_version_mismatch = FmMismatch(mm.group("fm"), mm.group("drv"), mm.group(0))
    info.nothing_to_do = bool(_NOTHING_TO_DO.search(t))
    no_systemd = _NO_SYSTEMD.search(t)
    if no_systemd:
        info.state = "no_systemd"
        info.detail = no_systemd.group(0)
        return info
    act = _ACTIVE_LINE.search(t)
    if act:
        word = act.group(1).lower()
        info.state = word if word in ("active", "inactive", "failed", "activating") else "unknown"
        info.detail = act.group(0).strip()
        return info
    first = t.strip().splitlines()[0].strip().lower() if t.strip() else ""
    if first in ("active", "inactive", "failed", "activating", "deactivating"):
        info.state = "inactive" if first == "deactivating" else first
        info.detail = f"systemctl is-active: {first}"
        return info
    if _NOT_FOUND.search(t):
        info.state = "not_found"
        info.detail = t.strip().splitlines()[0][:200]
        return info
    if mm or info.nothing_to_do:
        info.state = "failed"
        info.detail = mm.group(0) if mm else "NV_WARN_NOTHING_TO_DO"
    return info


def system_kind(gpus: list[FabricGpu]) -> str:
    """nvl (GB200/GB300 multi-node NVLink) | nvswitch (8-GPU HGX/DGX) | other | unknown."""
    products = [g.product or "" for g in gpus]
    if not products:
        return "unknown"
    if any(NVL_PRODUCTS.search(p) for p in products):
        return "nvl"
    states = [g.fabric_state for g in gpus]
    supported = [s for s in states if s and s not in ("N/A", "Not Supported")]
    if len(gpus) >= 8 and any(NVSWITCH_PRODUCTS.search(p) for p in products):
        return "nvswitch"
    if supported and len(gpus) >= 2:
        return "nvswitch"
    return "other"


def is_multi_node_nvlink(gpus: list[FabricGpu]) -> bool:
    """A GPU registered in an NVLink clique spanning trays: a non-zero ClusterUUID."""
    for g in gpus:
        uuid = (g.cluster_uuid or "").strip()
        if uuid and uuid not in ("N/A",) and not _ZERO_UUID.match(uuid):
            return True
    return False
