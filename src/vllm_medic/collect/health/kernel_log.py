"""Read the kernel log (dmesg, else journalctl -k), bounded, and say why when it cannot be read.

Returns the ``XidFacts`` of ``Snapshot.health.xid``: where the text came from, every Xid event, and -
when nothing could be read - what was tried and how to check by hand.
"""

from __future__ import annotations

import re

from vllm_medic.collect.health.runner import CommandResult, Runner, run_command
from vllm_medic.collect.health.xid import parse_xid_events
from vllm_medic.snapshot_health import LogAttempt, XidFacts

#: Only the newest lines are scanned: a long-running host can have millions of kernel lines.
MAX_LINES = 200_000
JOURNAL_LINES = 50_000
MAX_EVENTS = 5_000

DMESG_ARGV = ["dmesg"]
JOURNAL_ARGV = ["journalctl", "-k", "--no-pager", "-q", "-n", str(JOURNAL_LINES)]

_PERMISSION = re.compile(
    r"(read kernel buffer failed|Operation not permitted|Permission denied|not seeing messages from other users)",
    re.IGNORECASE,
)
_NO_JOURNAL = re.compile(r"(No journal files were found|System has not been booted with systemd)", re.I)

HOW_TO_CHECK = (
    "On the host as root: `sudo dmesg -T | grep -E 'NVRM: Xid|fallen off the bus'` "
    "or `sudo journalctl -k | grep -E 'NVRM: Xid|fallen off the bus'`; in a container add `--cap-add SYSLOG` "
    "(or read the host's log), and re-run `vllm-medic health`."
)


def classify_failure(result: CommandResult) -> str:
    """permission | missing | timeout | no_journal | nonzero - why a kernel-log command gave nothing."""
    if result.missing:
        return "missing"
    if result.timed_out:
        return "timeout"
    if _PERMISSION.search(result.output):
        return "permission"
    if _NO_JOURNAL.search(result.output):
        return "no_journal"
    return "nonzero"


def from_text(text: str, source: str) -> XidFacts:
    """Facts from an already captured kernel log (``dmesg.txt`` / ``journalctl-k.txt``)."""
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        text = "\n".join(lines[-MAX_LINES:])
    fake = CommandResult(argv=[source], exit_code=0, stdout=text)
    if len(lines) <= 3 and classify_failure(fake) in ("permission", "no_journal"):
        return _unreadable([LogAttempt(source, classify_failure(fake), text.strip()[:300])])
    events = parse_xid_events(text)
    facts = XidFacts(
        source=source, readable=True, lines=min(len(lines), MAX_LINES), events=events[:MAX_EVENTS]
    )
    if len(events) > MAX_EVENTS:
        # a GPU stuck in a fault loop can print the same Xid every second: keep the first ones and the count
        facts.events_total = len(events)
    return facts


def _unreadable(attempts: list[LogAttempt]) -> XidFacts:
    return XidFacts(source=None, readable=False, attempts=attempts, how_to_check=HOW_TO_CHECK)


def probe(run: Runner = run_command, timeout: float = 20.0) -> tuple[XidFacts, dict[str, str]]:
    """Live: try dmesg, then journalctl -k. Returns (facts, raw outputs by canonical file name)."""
    attempts: list[LogAttempt] = []
    raw: dict[str, str] = {}
    for argv, canonical in ((DMESG_ARGV, "dmesg.txt"), (JOURNAL_ARGV, "journalctl-k.txt")):
        res = run(argv, timeout)
        text = res.stdout
        if res.ok and text.strip() and not (len(text.splitlines()) <= 3 and _PERMISSION.search(text)):
            raw[canonical] = text
            facts = from_text(text, " ".join(argv))
            facts.attempts = attempts
            return facts, raw
        if res.output:
            raw[canonical] = res.output
        kind = classify_failure(res) if not res.ok else "empty"
        attempts.append(LogAttempt(" ".join(argv), kind, (res.output.strip() or res.describe())[:300]))
    return _unreadable(attempts), raw
