"""Container limits that break multi-GPU vLLM: /dev/shm size, locked memory, open files, cgroup memory.

Parsers read the captured files (``shm.txt`` = `df -k /dev/shm`, ``ulimit.txt`` = `ulimit -a`,
``cgroup-memory.txt`` = the contents of ``memory.max`` / ``memory.limit_in_bytes``); ``probe_live``
reads the same facts from this process. Sizes are bytes; ``None`` means unlimited or unknown as noted.
"""

from __future__ import annotations

import os
import re
import resource
from pathlib import Path

from vllm_medic.snapshot_health import CgroupMemory, LimitsFacts, Rlimit, ShmFacts, UlimitFacts

#: cgroup v1 reports "no limit" as a page-aligned LONG_MAX.
CGROUP_V1_UNLIMITED = 0x7FFFFFFFFFFFF000

_DF_ROW = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\d+%\s+(\S+)\s*$", re.M)
_ULIMIT_A = re.compile(
    r"^(?P<name>[a-z][a-z ()/-]*?)\s+\((?P<unit>[^)]*?)-?(?P<flag>-[a-zA-Z])\)\s+(?P<value>\S+)\s*$", re.M
)
# /proc/<pid>/limits: "Max locked memory         8388608              8388608              bytes"
_PROC_LIMITS = re.compile(r"^Max (?P<what>locked memory|open files)\s+(?P<soft>\S+)\s+(?P<hard>\S+)", re.M)
_ULIMIT_KV = re.compile(r"^\s*(?P<key>memlock|nofile|-l|-n)\s*[=:]\s*(?P<value>\S+)\s*$", re.M)


def parse_df_shm(text: str) -> ShmFacts:
    """`df -k /dev/shm` -> size, filesystem and mount; the row mounted on /dev/shm wins."""
    rows = _DF_ROW.findall(text or "")
    for fs, blocks, _used, _avail, mount in rows:
        if mount == "/dev/shm":
            return ShmFacts(int(blocks) * 1024, filesystem=fs, mount=mount)
    if rows:
        fs, blocks, _u, _a, mount = rows[0]
        return ShmFacts(int(blocks) * 1024, filesystem=fs, mount=mount)
    return ShmFacts(None, unparsed=(text or "").strip()[:200])


def _limit_value(value: str, unit_kib: bool) -> int | None | str:
    v = value.strip().lower()
    if v in ("unlimited", "infinity", "max", "-1"):
        return None
    if v.isdecimal():
        return int(v) * (1024 if unit_kib else 1)
    return "unparsed"


def parse_ulimit(text: str) -> UlimitFacts:
    """`ulimit -a` (bash/dash), /proc/self/limits, or `memlock=...`/`nofile=...` lines -> memlock bytes / nofile count.

    A limit is set only when found; ``Rlimit(None)`` means unlimited.
    """
    out = UlimitFacts()
    for m in _ULIMIT_A.finditer(text or ""):
        flag, unit = m.group("flag"), m.group("unit")
        if flag == "-l":
            val = _limit_value(m.group("value"), "kbytes" in unit or "kib" in unit.lower())
            if not isinstance(val, str):
                out.memlock_bytes = Rlimit(val)
        elif flag == "-n":
            val = _limit_value(m.group("value"), False)
            if not isinstance(val, str):
                out.nofile = Rlimit(val)
    for m in _PROC_LIMITS.finditer(text or ""):
        soft, hard = _limit_value(m.group("soft"), False), _limit_value(m.group("hard"), False)
        if isinstance(soft, str) or isinstance(hard, str):
            continue
        if m.group("what") == "locked memory":
            out.memlock_bytes, out.memlock_hard_bytes = Rlimit(soft), Rlimit(hard)
        else:
            out.nofile, out.nofile_hard = Rlimit(soft), Rlimit(hard)
    for m in _ULIMIT_KV.finditer(text or ""):
        key = m.group("key")
        if key in ("memlock", "-l"):
            val = _limit_value(m.group("value"), True)
            if not isinstance(val, str):
                out.memlock_bytes = Rlimit(val)
        else:
            val = _limit_value(m.group("value"), False)
            if not isinstance(val, str):
                out.nofile = Rlimit(val)
    return out


def parse_cgroup_memory(text: str) -> CgroupMemory:
    """`memory.max` ("max" or bytes) or v1 `memory.limit_in_bytes` -> the limit in bytes (None: no limit)."""
    t = (text or "").strip().splitlines()
    if not t:
        return CgroupMemory(None, known=False)
    v = t[0].strip()
    if v == "max":
        return CgroupMemory(None, known=True)
    if v.isdecimal():
        n = int(v)
        return CgroupMemory(None if n >= CGROUP_V1_UNLIMITED else n, known=True)
    return CgroupMemory(None, known=False, unparsed=v[:200])


def probe_live(
    shm_path: str = "/dev/shm", cgroup_root: str = "/sys/fs/cgroup"
) -> tuple[LimitsFacts, dict[str, str]]:
    """The same facts read from this process (statvfs, getrlimit, cgroup files); raw texts for the bundle."""
    facts = LimitsFacts(source="live")
    raw: dict[str, str] = {}
    try:
        st = os.statvfs(shm_path)
        facts.shm = ShmFacts(st.f_blocks * st.f_frsize, mount=shm_path)
        raw["shm.txt"] = (
            "Filesystem     1K-blocks  Used Available Use% Mounted on\n"
            f"shm {st.f_blocks * st.f_frsize // 1024} {(st.f_blocks - st.f_bfree) * st.f_frsize // 1024} "
            f"{st.f_bavail * st.f_frsize // 1024} 0% {shm_path}\n"
        )
    except OSError as exc:
        facts.shm = ShmFacts(None, error=str(exc))
    soft_l, hard_l = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    soft_n, hard_n = resource.getrlimit(resource.RLIMIT_NOFILE)
    unl = resource.RLIM_INFINITY
    facts.ulimit = UlimitFacts(
        memlock_bytes=Rlimit(None if soft_l == unl else soft_l),
        memlock_hard_bytes=Rlimit(None if hard_l == unl else hard_l),
        nofile=Rlimit(None if soft_n == unl else soft_n),
        nofile_hard=Rlimit(None if hard_n == unl else hard_n),
    )
    raw["ulimit.txt"] = (
        f"memlock={'unlimited' if soft_l == unl else soft_l // 1024}\n"
        f"nofile={'unlimited' if soft_n == unl else soft_n}\n"
    )
    for rel in ("memory.max", "memory/memory.limit_in_bytes"):
        p = Path(cgroup_root) / rel
        try:
            text = p.read_text()
        except OSError:
            continue
        facts.cgroup_memory = parse_cgroup_memory(text)
        facts.cgroup_memory.file = str(p)
        raw["cgroup-memory.txt"] = text
        break
    else:
        facts.cgroup_memory = CgroupMemory(None, known=False, error="no cgroup memory file found")
    return facts, raw


def from_files(files: dict[str, str]) -> LimitsFacts:
    """Facts from captured files (any may be missing)."""
    facts = LimitsFacts(source="captured")
    if "shm.txt" in files:
        facts.shm = parse_df_shm(files["shm.txt"])
    for name in ("ulimit.txt", "proc-self-limits.txt"):
        if name in files:
            facts.ulimit = parse_ulimit(files[name])
            break
    for name in ("cgroup-memory.txt", "cgroup-memory-v1.txt"):
        if name in files:
            facts.cgroup_memory = parse_cgroup_memory(files[name])
            break
    return facts
