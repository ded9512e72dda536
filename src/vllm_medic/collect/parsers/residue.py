"""What a terminal or a web page leaves in a pasted output, removed before any reader parses it.

Every reader gets the same cleaned text: terminal escapes (whole, or with the ESC byte lost in the
paste: ``[0m``, ``[?2004h``, ``^[[4m``), NBSP and the other Unicode spaces, carriage returns
(``\\r\\n`` and progress lines redrawn with ``\\r``), other control bytes, GitHub quote markers
(``> `` on every line), Markdown code fences and ``<details>`` wrappers, and shell prompt lines.
A prompt line's command is kept apart (``Cleaned.commands``): it tells a reader what it is looking
at (`lsmod | grep nvidia` is a filtered list, `--query-gpu=a,b,c` names the CSV columns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# ESC [ ... final byte (CSI), ESC ] ... BEL / ESC \ (OSC), and two-byte ESC sequences
_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
# the same with the ESC byte lost or shown in caret notation: "[0m", "[01;32m", "[?2004h", "^[[4m".
# Only the shapes terminals emit (SGR with a number, private modes, erase-line with a digit) so text
# like "[MiB]", "[KiB]" or "[N/A]" is never touched.
_BARE_ESCAPE = re.compile(
    r"(?:\^\[)\[[0-?]*[ -/]*[@-~]"  # caret notation, any CSI
    r"|\[\?[0-9]{1,4}[hl]"  # bracketed paste and other private modes
    r"|\[[0-9]{1,3}(?:;[0-9]{1,3})*m"  # SGR colours / underline / reset
    r"|\[[0-2]?K(?![A-Za-z])"  # erase line
)
_UNICODE_SPACES = dict.fromkeys(
    map(
        ord,
        "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000",
    ),
    " ",
)
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"), None)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_FENCE = re.compile(r"^\s*(```|~~~)[\w+-]*\s*$")
_HTML_WRAPPER = re.compile(r"^\s*</?(details|summary)\b[^>]*>.*$", re.IGNORECASE)

# A prompt: optional (venv), then user@host:path / [user@host dir] / bash-5.2 / a bare sigil, then
# the sigil and the command. `# text` alone is a comment as often as a root prompt: it counts as a
# prompt only before a command word a user runs to capture an output.
_PROMPT = re.compile(
    r"^\s*(?P<prefix>(?:\([^)\s]+\)\s*)?(?:\[[^\]]*\]|[\w.\-]+@[\w.\-]+(?::[^\s$#%>]*)?|[\w.\-]*sh-\d[\d.]*|[~/][^\s$#%>]*)?)"
    r"\s*(?P<sigil>[$#%>])(?:\s+(?P<cmd>\S.*?))?\s*$"
)
_COMMAND_WORDS = frozenset(
    [
        "nvidia-smi",
        "lsmod",
        "ibstat",
        "ibstatus",
        "ibv_devinfo",
        "ibdev2netdev",
        "rdma",
        "ip",
        "cat",
        "docker",
        "podman",
        "sudo",
        "vllm",
        "python",
        "python3",
        "pip",
        "pip3",
        "env",
        "printenv",
        "export",
        "uname",
        "nvcc",
        "rocm-smi",
        "amd-smi",
        "dmesg",
        "journalctl",
        "systemctl",
        "lspci",
        "modinfo",
        "kubectl",
        "ls",
        "grep",
        "head",
        "tail",
        "jq",
        "echo",
        "hostname",
        "df",
        "free",
        "numactl",
    ]
)


@dataclass
class Cleaned:
    text: str
    commands: list[str] = field(default_factory=list)  # the pasted command lines, prompt removed, in order
    removed: list[str] = field(default_factory=list)  # what kinds of residue were taken out


def strip_escapes(text: str) -> str:
    """Terminal escapes, Unicode spaces, carriage returns and control bytes (keeps every line)."""
    text = _ESCAPE.sub("", text)
    text = _BARE_ESCAPE.sub("", text)
    text = text.translate(_UNICODE_SPACES).translate(_ZERO_WIDTH)
    lines = []
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if "\r" in line:  # a line redrawn in place: what the terminal finally showed
            line = next((part for part in reversed(line.split("\r")) if part.strip()), "")
        lines.append(_CONTROL.sub("", line))
    return "\n".join(lines)


def prompt_command(line: str) -> tuple[bool, str | None]:
    """(is this a shell prompt line?, the command on it). Output lines give (False, None)."""
    m = _PROMPT.match(line)
    if not m:
        return False, None
    cmd = m.group("cmd")
    prefix = m.group("prefix") or ""
    if cmd is None:
        return (bool(prefix.strip()) or m.group("sigil") in "$#"), None
    first = cmd.split()[0]
    word = first.rsplit("/", 1)[-1]
    known = word in _COMMAND_WORDS or bool(re.match(r"^[A-Z_][A-Z0-9_]*=", first))
    if prefix.strip():
        return True, cmd
    if m.group("sigil") == "$":
        return True, cmd
    # "# nvidia-smi" / "> lsmod": a prompt only before a command; "# comment text" stays output
    return (True, cmd) if known else (False, None)


def clean(text: str, prompts: bool = True) -> Cleaned:
    """The text a reader should parse, and the command lines pasted with it."""
    removed: list[str] = []
    stripped = strip_escapes(text)
    if stripped != text:
        removed.append("terminal escapes / unusual spaces / carriage returns")
    lines = stripped.split("\n")
    content = [ln for ln in lines if ln.strip()]
    if content and all(ln.lstrip().startswith(">") for ln in content) and prompts:
        lines = [re.sub(r"^\s*>+ ?", "", ln) for ln in lines]
        removed.append("quote markers")
    kept: list[str] = []
    commands: list[str] = []
    for line in lines:
        if _FENCE.match(line) or _HTML_WRAPPER.match(line):
            removed.append("code fences")
            continue
        if prompts:
            is_prompt, cmd = prompt_command(line)
            if is_prompt:
                if cmd:
                    commands.append(cmd)
                removed.append("prompt lines")
                continue
        kept.append(line)
    if prompts and kept:
        # a command echoed without a prompt on the first line ("nvidia-smi topo -m" then its output)
        first = next((i for i, ln in enumerate(kept) if ln.strip()), None)
        if first is not None and _is_bare_command(kept[first]):
            commands.insert(0, kept[first].strip())
            del kept[first]
            removed.append("prompt lines")
    return Cleaned(text="\n".join(kept), commands=commands, removed=sorted(set(removed)))


_BARE_COMMAND = re.compile(
    r"^\s*(sudo\s+)?(nvidia-smi|lsmod|ibstat|ibstatus|ibv_devinfo|ibdev2netdev|rdma\s+link|rocm-smi|amd-smi)"
    r"(\s+[-\w=.,:/|\"' ]*)?\s*$"
)


def _is_bare_command(line: str) -> bool:
    """`nvidia-smi topo -m` alone on the first line: the command, echoed without a prompt (none of
    these tools prints a line that starts with its own name)."""
    return bool(_BARE_COMMAND.match(line))


# tools that drop lines (`column -t`, `sort`, `less` only rearrange or page: the output stays whole)
_FILTERS = frozenset(["grep", "egrep", "fgrep", "rg", "head", "tail", "awk", "sed", "cut", "uniq", "jq"])


def _stages(command: str) -> list[list[str]]:
    """The command line split into pipeline stages, quotes honoured (`grep -E 'a|b'` is one stage)."""
    import shlex

    lexer = shlex.shlex(command, posix=True, punctuation_chars="|&;")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote in a pasted line
        tokens = command.split()
    stages: list[list[str]] = [[]]
    for tok in tokens:
        if tok == "|":
            stages.append([])
        elif tok in ("||", "&&", ";", "&"):
            break
        else:
            stages[-1].append(tok)
    return [s for s in stages if s]


def pipes(command: str) -> list[tuple[str, list[str]]]:
    """The filters a command line pipes its output through: [("grep", ["-i", "nvidia"]), ...]."""
    out = []
    for stage in _stages(command)[1:]:
        tool = stage[0].rsplit("/", 1)[-1]
        if tool in _FILTERS:
            out.append((tool, stage[1:]))
    return out


def grep_patterns(command: str) -> list[str]:
    """The patterns of `| grep PATTERN` (options dropped; `a|b` / `a\\|b` alternatives split)."""
    out: list[str] = []
    for tool, args in pipes(command):
        if tool not in ("grep", "egrep", "fgrep", "rg"):
            continue
        words = [w for w in args if not w.startswith("-")]
        explicit = [args[i + 1] for i, w in enumerate(args[:-1]) if w == "-e"]
        for word in explicit or words[:1]:
            out.extend(p for p in re.split(r"\\\||\|", word) if p)
    return out


# grep options that keep "a line matching PATTERN is shown" true; anything else (-v, -w, -x, -c, -m, -l, -o)
# changes which lines come through, so nothing about an absent line can be concluded.
_SHOWING_GREP_OPTIONS = frozenset(
    {"-i", "-E", "-F", "-e", "--color", "--colour", "--color=auto", "--color=never"}
)


def grep_shows(command: str, name: str) -> bool:
    """Would ``command``'s filters let a line containing ``name`` through? True only for one plain grep
    stage whose pattern (or one of its alternatives) matches ``name``: then its absence from the output
    is proof. Any other filter (head, -v, -w, a second stage...) answers False."""
    filters = pipes(command)
    if len(filters) != 1 or filters[0][0] not in ("grep", "egrep", "fgrep"):
        return False
    tool, args = filters[0]
    opts = [a for a in args if a.startswith("-")]
    if any(o not in _SHOWING_GREP_OPTIONS for o in opts):
        return False
    fold = "-i" in opts
    hay = name.lower() if fold else name
    for pattern in grep_patterns(command):
        needle = pattern.lower() if fold else pattern
        literal = tool == "fgrep" or "-F" in opts or re.fullmatch(r"[\w.-]+", needle)
        if literal and needle in hay:
            return True
    return False
