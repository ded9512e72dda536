"""Turn raw log lines into events: strip colour/CR, peel off process prefixes and timestamps.

Everything here is pure and line-at-a-time so the scanner can call it only on the few lines its
prefilter lets through. `normalize_line` never raises, whatever bytes it is given (fuzzed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

# ANSI CSI sequences ("\x1b[36m"), the bare "[36m" left when ESC was lost by copy-paste, and the
# "#033[36m" that syslog/rsyslog write for an escaped ESC (octal 033).
_ANSI = re.compile(
    r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|#033\[[0-9;?]*[A-Za-z]|(?<![\w\]])\[(?:\d{1,3};)*\d{1,3}m"
)
# Every _ANSI match holds one of these; a line without any (most lines: "[file.py:1]" is no colour
# code) skips the substitution, which is slow because of the lookbehind.
_ANSI_HINT = re.compile(r"\x1b|#033\[|\[\d")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

# Timestamps, tried in this order at the start of what is left of the line.
# Ascend's plog writes "2025-12-29-03:16:15.787.356" (a dash before the time, ms.us as two fields).
_ISO = re.compile(
    r"^\[?(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[T \-](?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})"
    r"(?P<frac>[.,]\d+(?:\.\d{3})?)?(?P<tz>Z|[+-]\d{2}:?\d{2})?\]?\s*"
)
_JOURNALD = re.compile(
    r"^(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(?P<d>\d{1,2}) "
    r"(?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2}) (?P<host>[\w.\-]+) (?P<unit>[\w.\-@/]+?)(?:\[(?P<pid>\d+)\])?: "
)
# vLLM: "INFO 11-30 02:01:46 [file.py:123] msg" (new) or "INFO 11-30 02:01:46 file.py:123] msg" (old)
_VLLM = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL) (?P<mo>\d{2})-(?P<d>\d{2}) "
    r"(?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})(?P<frac>\.\d+)? \[?(?P<where>[\w.\-/]+:\d+)\]\s?"
)
# glog / torch C++: "[W1130 02:36:44.515165417 utils.cpp:68] msg", "E1130 02:36:44.5 123 file.cc:1] msg"
# (torch's c10 logger does not zero-pad the month: "[E429 13:55:49.384 ProcessGroupNCCL.cpp:1743]")
_GLOG = re.compile(
    r"^\[?(?P<lv>[IWEF])(?P<mo>\d{1,2})(?P<d>\d{2}) (?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})(?P<frac>\.\d+)?"
    r"(?: +\d+)? (?P<where>[\w.\-/]+:\d+)\]\s?"
)
# Python logging default: "2024-04-17 20:07:13,727 - name - ERROR - msg" handled by _ISO then level words.
_LEVEL_WORD = re.compile(
    r"^(?:\[(?P<b>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]|(?P<w>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"
    r"(?=[\s:\]]))[:\s]*"
)

# Process prefixes: "(APIServer pid=1) ", "(EngineCore_DP0 pid=7)", "(VllmWorker TP0 pid=3)",
# "(RayWorkerWrapper pid=1355, ip=192.168.201.208)", "(pid=1058)".
_PROC = re.compile(
    r"^\((?P<name>[A-Za-z][\w\-:.]*(?: [A-Za-z]*\d+)?)?(?P<kv>(?:\s+(?:rank|local_rank|dp_rank|tp_rank)=\d+)*)"
    r"\s*(?:pid=(?P<pid>\d+))(?:,\s*ip=(?P<ip>[\w.:\-]+))?\)\s?"
)
# SGLang: "[2025-05-06 10:00:00 TP3] msg" (the ISO part is peeled first, this takes "TP3] ")
_SGLANG_TAGS = re.compile(r"^(?P<tags>(?:(?:TP|DP|PP|EP|CP)\d+\s*)+)\]\s?")
# docker compose: "vllm  | msg", "vllm-1  | msg"
_COMPOSE = re.compile(r"^(?P<svc>[\w.\-]+)?\s*\|\s(?=\S)")
# NCCL: "host:pid:tid [rank] NCCL WARN msg" (rank is the local device index)
_NCCL = re.compile(r"^(?P<host>[\w.\-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")
# torch distributed: "[rank0]: msg" and "[rank3]:[E ProcessGroupNCCL.cpp:563] msg"
_TORCH_RANK = re.compile(r"^\[rank(?P<rank>\d+)\]:\s?")
_TORCH_CPP = re.compile(r"^\[(?P<lv>[IWEF]) (?P<where>[\w.\-/]+:\d+)\]\s?")
# kubectl --prefix: "[pod/vllm-0/vllm] msg"
_KUBE_PREFIX = re.compile(r"^\[pod/(?P<pod>[\w.\-]+)/(?P<container>[\w.\-]+)\]\s")
# Collector/launcher prefixes that name a process or task: Ascend's "[PID: 749] ", srun --label's
# "15: " (the task number, before a "[rank15]:" or a log line), OpenMPI --tag-output's "[1,0]<stderr>:".
_PID_TAG = re.compile(r"^\[(?:PID|pid|Pid)[:=]? ?(?P<pid>\d+)\]\s?")
_SRUN_TASK = re.compile(
    r"^(?P<task>\d{1,5}): (?=\[rank\d|\[?\d{4}-\d\d-\d\d|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b|Traceback \(| +File \")"
)
# Ray's C++ components after their ISO stamp: "[2025-06-13 01:49:41,730 E 1 1] gcs_rpc_client.h:179: msg"
# (level letter, pid, tid, file:line); spdlog's "[logger] [error] [file.cpp:910] msg" (InfiniStore).
_RAY_CPP = re.compile(r"^(?P<lv>[DIWEC]) \d+ \d+\] (?P<where>[\w.\-/]+:\d+):\s?")
_SPDLOG = re.compile(
    r"^\[(?P<logger>[A-Za-z][\w.\-]*)\] \[(?P<lv>trace|debug|info|warn|warning|error|critical)\]\s"
    r"(?:\[(?P<where>[\w.\-/]+:\d+)\]\s?)?"
)
# round 16: TensorFlow/XLA's C++ logging (tsl) after its ISO stamp: "2022-04-04 00:27:49.642380: E
# tensorflow/compiler/xla/xla_client/xla_util.cc:88] msg" (jaxlib, torch_xla, TensorFlow). The
# indentation after it is the status's own list layout (`  (1) RESOURCE_EXHAUSTED: …`), never code.
_TSL = re.compile(r"^: (?P<lv>[IWEF])(?: +\d+)? (?P<where>[\w.\-/]+:\d+)\]\s*")
# round 16: SkyPilot's logger (sky_logging: level letter, "%m-%d %H:%M:%S", file:line):
# "I 10-09 17:42:16 instance_setup.py:131] msg".
_SKY = re.compile(
    r"^(?P<lv>[DIWEC]) (?P<mo>\d{2})-(?P<d>\d{2}) (?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})(?P<frac>\.\d+)? "
    r"(?P<where>[\w.\-/]+:\d+)\]\s?"
)
_LEVEL_OF_RAY_CPP = {"D": "DEBUG", "I": "INFO", "W": "WARNING", "E": "ERROR", "C": "FATAL"}
_MPI_TAG = re.compile(r"^\[(?P<job>\d+),(?P<rank>\d+)\]<(?:stdout|stderr)>:\s?")
# An exception line indented by a paste (a quote in prose, a block indented by two spaces): Python
# writes it at the margin, so the indentation is the paste's, not a traceback's code line.
_INDENTED_EXCEPTION = re.compile(r"^[ \t]+(?=(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S)")
# round 11: an uncaught C++ exception's message, which std::terminate prints indented under its
# `terminate called after throwing an instance of '…'` line (`  what():  [FT][ERROR] CUDA … out of memory`).
_CXX_WHAT = re.compile(r"^[ \t]+(?=what\(\): )")

_TAGS = re.compile(r"^(?:\[[A-Za-z][\w .\-]*\]\s*)+(?:>>>\s?)?")
_RAY_REPEAT = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_TP_IN_NAME = re.compile(r"TP\s?(?P<n>\d+)")  # "Worker_PP0_TP1_EP1", "VllmWorker TP3": the TP rank
_RANK_IN_NAME = re.compile(r"(?:TP|DP|PP|EP|_|-|rank)(?P<n>\d+)$", re.IGNORECASE)
_RANK_IN_MSG = re.compile(r"\[(?:PG \d+ )?Rank (?P<n>\d+)\]")
_MONTHS = {
    m: i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}
_LEVEL_OF_GLOG = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}

MAX_LINE_CHARS = 64 * 1024
DEFAULT_YEAR = 2000  # leap year so "02-29" parses; used only for ordering yearless vLLM stamps


@dataclass
class Event:
    """One normalised log line (or one traceback collapsed onto its exception line)."""

    source: str
    line: int
    text: str
    message: str
    level: str | None = None
    process: str | None = None
    pid: int | None = None
    rank: int | None = None
    node: str | None = None
    timestamp: datetime | None = None
    timestamp_text: str | None = None
    offset: int = 0
    traceback_start: int | None = None
    frames: list[str] = field(default_factory=list)
    # Who emitted the line, as its prefix said: the logger's `file.py:N`, glog/torch `file.cc:N`, and
    # bracketed tags peeled off the message ("[c10d]"). The message itself no longer holds them.
    origin: str | None = None
    # What is left of a traceback cut before its exception line (tracebacks.py): "raise" (the message
    # was rebuilt from the quoted `raise X("...")` statement; `text` is the line as written),
    # "announce" (the `Exception in thread ...:` line above its header), "header", or "announce-only"
    # (an announcing line the process wrote last: its traceback was cut off).
    cut: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "line": self.line,
            "text": self.text,
            "message": self.message,
            "level": self.level,
            "process": self.process,
            "pid": self.pid,
            "rank": self.rank,
            "node": self.node,
            "timestamp": timestamp_str(self.timestamp),
        }


def timestamp_str(ts: datetime | None) -> str | None:
    """ISO-8601 when the log gave a year; vLLM's own stamps have none, so those print as `MM-DD HH:MM:SS`."""
    if ts is None:
        return None
    if ts.year == DEFAULT_YEAR:
        return ts.strftime("%m-%d %H:%M:%S") + (f".{ts.microsecond:06d}" if ts.microsecond else "")
    return ts.isoformat()


def decode(raw: bytes) -> str:
    """Bytes to text: UTF-8 with replacement, NULs dropped, capped so one huge line cannot blow memory."""
    if len(raw) > MAX_LINE_CHARS:
        raw = raw[:MAX_LINE_CHARS]
    return raw.replace(b"\x00", b"").decode("utf-8", "replace").rstrip("\r\n")


def strip_ansi(text: str) -> str:
    if _ANSI_HINT.search(text):
        text = _ANSI.sub("", text)
    if "\r" in text:
        # A carriage return inside a line is a progress bar redraw: keep what was drawn last.
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    return _CONTROL.sub("", text)


def _iso_time(m: re.Match[str]) -> datetime | None:
    try:
        frac = m.group("frac")
        micro = int((frac[1:].replace(".", "") + "000000")[:6]) if frac else 0
        return datetime(
            int(m.group("y")),
            int(m.group("mo")),
            int(m.group("d")),
            int(m.group("h")),
            int(m.group("mi")),
            int(m.group("s")),
            micro,
        )
    except (ValueError, TypeError):
        return None


def _short_time(m: re.Match[str], year: int) -> datetime | None:
    try:
        mo = _MONTHS[m.group("mon")] if "mon" in m.re.groupindex else int(m.group("mo"))
        frac = m.groupdict().get("frac")
        micro = int((frac[1:] + "000000")[:6]) if frac else 0
        return datetime(
            year, mo, int(m.group("d")), int(m.group("h")), int(m.group("mi")), int(m.group("s")), micro
        )
    except (ValueError, TypeError, KeyError):
        return None


# Every prefix that gives a line its timestamp (_ISO, _VLLM, _GLOG, _JOURNALD, _SKY) holds `hh:mm:ss` in
# ASCII digits; text that `decode`/`strip_ansi` could still reshape into one holds a control byte, a
# non-ASCII byte (a decimal digit of another script), a `#033[` escape or a `[<digit>` colour code.
_MAY_HOLD_TIME = re.compile(rb"\d\d:\d\d:\d\d|[\x00-\x08\x0b-\x1f\x7f-\xff]|#033\[|\[\d")


def may_hold_time(raw: bytes) -> bool:
    """False only when `normalize_line(raw)` cannot find a timestamp: a look back for the last time
    seen skips an access log's undated lines for the price of one byte search each."""
    return _MAY_HOLD_TIME.search(raw) is not None


def normalize_line(
    raw: str | bytes, source: str = "<text>", line: int = 1, *, year: int | None = None
) -> Event:
    """Parse one line into an Event. Prefixes are peeled in the order real tools stack them:
    docker/kubectl timestamp, compose/kubectl prefix, Ray/vLLM process, torch rank, level+time, NCCL."""
    text = decode(raw) if isinstance(raw, bytes) else raw[:MAX_LINE_CHARS].rstrip("\r\n")
    clean = strip_ansi(text)
    ev = Event(source=source, line=line, text=text, message=clean)
    rest = clean.lstrip(" ")
    outer_year: int | None = year
    for _ in range(8):  # bounded: each pass must consume a prefix
        before = rest
        if m := _ISO.match(rest):
            ts = _iso_time(m)
            if ts is not None:
                outer_year = ts.year
                if ev.timestamp is None or ev.timestamp.year == DEFAULT_YEAR:
                    ev.timestamp, ev.timestamp_text = ts, m.group(0).strip(" []")
            rest = rest[m.end() :]
        elif m := _SGLANG_TAGS.match(rest):
            if r := re.search(r"TP(\d+)", m.group("tags")):
                ev.rank = int(r.group(1))
            ev.process = ev.process or m.group("tags").strip()
            rest = rest[m.end() :]
        elif m := _KUBE_PREFIX.match(rest):
            ev.node = ev.node or m.group("pod")
            rest = rest[m.end() :]
        elif m := _PID_TAG.match(rest):
            ev.pid = ev.pid or int(m.group("pid"))
            rest = rest[m.end() :]
        elif m := _MPI_TAG.match(rest):
            ev.rank = ev.rank if ev.rank is not None else int(m.group("rank"))
            rest = rest[m.end() :]
        elif _ == 0 and (m := _SRUN_TASK.match(rest)):
            ev.rank = ev.rank if ev.rank is not None else int(m.group("task"))
            rest = rest[m.end() :]
        elif m := _PROC.match(rest):
            ev.process = (m.group("name") or "").strip() or None
            ev.pid = int(m.group("pid"))
            if m.group("ip"):
                ev.node = m.group("ip")
            if m.group("kv") and (r := re.search(r"\brank=(\d+)", m.group("kv"))):
                ev.rank = int(r.group(1))
            elif ev.process and (
                r := _TP_IN_NAME.search(ev.process) or _RANK_IN_NAME.search(ev.process.replace(" ", ""))
            ):
                ev.rank = int(r.group("n"))
            rest = rest[m.end() :]
            if rest[:1] == " " and rest.lstrip(" ")[:1] in ("[", ""):
                rest = rest.lstrip(" ")
        elif m := _TORCH_RANK.match(rest):
            ev.rank = int(m.group("rank"))
            rest = rest[m.end() :]
        elif m := _VLLM.match(rest):
            ev.level = "WARNING" if m.group("level") == "WARN" else m.group("level")
            ts = _short_time(m, outer_year or DEFAULT_YEAR)
            if ts is not None and ev.timestamp is None:
                ev.timestamp, ev.timestamp_text = ts, m.group(0)[len(m.group("level")) + 1 :][:14].strip()
            ev.origin = m.group("where")
            rest = rest[m.end() :]
            break
        elif m := _GLOG.match(rest):
            ev.level = _LEVEL_OF_GLOG[m.group("lv")]
            ts = _short_time(m, outer_year or DEFAULT_YEAR)
            if ts is not None and ev.timestamp is None:
                ev.timestamp, ev.timestamp_text = (
                    ts,
                    f"{m.group('mo')}-{m.group('d')} {m.group('h')}:{m.group('mi')}:{m.group('s')}",
                )
            ev.origin = m.group("where")
            rest = rest[m.end() :]
            break
        elif m := _TORCH_CPP.match(rest):
            ev.level = _LEVEL_OF_GLOG[m.group("lv")]
            ev.origin = m.group("where")
            rest = rest[m.end() :]
            break
        elif m := _JOURNALD.match(rest):
            ts = _short_time(m, outer_year or DEFAULT_YEAR)
            if ts is not None and ev.timestamp is None:
                ev.timestamp, ev.timestamp_text = ts, m.group(0).split(m.group("host"))[0].strip()
            ev.node = ev.node or m.group("host")
            if m.group("pid"):
                ev.pid = int(m.group("pid"))
            rest = rest[m.end() :]
        elif m := _NCCL.match(rest):
            ev.node = ev.node or m.group("host")
            ev.pid = int(m.group("pid"))
            if ev.rank is None:
                ev.rank = int(m.group("dev"))
            ev.process = ev.process or "NCCL"
            rest = rest[m.end() :]
            if rest.startswith("NCCL WARN") or " NCCL WARN " in rest[:80]:
                ev.level = "WARNING"
            elif rest.startswith("NCCL INFO"):
                ev.level = "INFO"
            break
        elif m := _TSL.match(rest):
            ev.level = _LEVEL_OF_GLOG[m.group("lv")]
            ev.origin = m.group("where")
            rest = rest[m.end() :]
            break
        elif m := _SKY.match(rest):
            ev.level = _LEVEL_OF_RAY_CPP[m.group("lv")]
            ts = _short_time(m, outer_year or DEFAULT_YEAR)
            if ts is not None and ev.timestamp is None:
                ev.timestamp, ev.timestamp_text = ts, m.group(0)[2:16]
            ev.origin = m.group("where")
            rest = rest[m.end() :]
            break
        elif m := _RAY_CPP.match(rest):
            ev.level = _LEVEL_OF_RAY_CPP[m.group("lv")]
            ev.origin = m.group("where")
            rest = rest[m.end() :]
            break
        elif m := _SPDLOG.match(rest):
            lv = m.group("lv").upper()
            ev.level = {"TRACE": "DEBUG", "WARN": "WARNING", "CRITICAL": "FATAL"}.get(lv, lv)
            ev.origin = " ".join(x for x in (m.group("logger"), m.group("where")) if x)
            rest = rest[m.end() :]
            break
        elif m := _COMPOSE.match(rest):
            if m.group("svc"):
                ev.node = ev.node or m.group("svc")
            rest = rest[m.end() :]
        elif m := _LEVEL_WORD.match(rest):
            ev.level = (
                "WARNING" if (m.group("b") or m.group("w")) == "WARN" else (m.group("b") or m.group("w"))
            )
            rest = rest[m.end() :]
        if rest == before:
            break
    consumed = len(rest) != len(clean.lstrip(" "))
    if not consumed:
        rest = _INDENTED_EXCEPTION.sub("", clean)  # no prefix: keep the indentation, tracebacks need it
        rest = _CXX_WHAT.sub("", rest)
    if ev.rank is None and (r := _RANK_IN_MSG.search(rest[:200])):
        ev.rank = int(r.group("n"))
    if ev.level is not None and (m := _TAGS.match(rest)):
        tags = m.group(0).strip().removesuffix(">>>").strip()
        ev.origin = f"{ev.origin} {tags}" if ev.origin else tags
        rest = rest[m.end() :]  # "[MainThread] [asyncio] >>> " left by custom logging formats
    if "[repeated " in rest:
        rest = _RAY_REPEAT.sub("", rest)
    ev.message = rest
    return ev


def normalize(lines: list[str] | str, source: str = "<text>") -> list[Event]:
    """Normalise lines (or one text) into events, collapsing tracebacks onto their exception line."""
    from vllm_medic.triage.tracebacks import TracebackFolder

    if isinstance(lines, str):
        lines = lines.splitlines()
    folder = TracebackFolder()
    out: list[Event] = []
    for i, raw in enumerate(lines, 1):
        ev = normalize_line(raw, source, i)
        kept = folder.feed(ev)
        if kept is not None:
            out.append(kept)
    # A bare `ValueError:` is reported on the code line above it, which can precede a line another
    # process emitted in between: keep file order.
    out.sort(key=lambda e: e.line)
    return out
