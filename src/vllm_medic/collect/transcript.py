"""One pasted terminal transcript -> canonical files.

Users often paste everything into one block (`$ nvidia-smi`, its output, `$ cat /proc/driver/nvidia/version`,
...). Each prompt line names the command; what follows until the next prompt is its output.
"""

from __future__ import annotations

import re

from vllm_medic.collect.parsers.residue import strip_escapes

_PROMPT_CMD = re.compile(
    r"^\s*(?P<prefix>(?:\(\S+\)\s*)?(?:\[[^\]]*\]|[\w.@:~/\-\[\]]*))\s*(?P<sigil>[#$%>])\s+(?P<cmd>\S.*?)\s*$"
)

_BARE_PROMPT = re.compile(r"^\s*(?:\(\S+\)\s*)?(?:\[[^\]]*\]|[\w.@:~/\-\[\]]+)?\s*[#$%>]\s*$")

# (pattern on the command line, canonical file). First match wins.
_COMMANDS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), f)
    for p, f in (
        (r"^(sudo\s+)?nvidia-smi\s+topo\s+(-m|--matrix)\b", "nvidia-smi-topo-m.txt"),
        (r"^(sudo\s+)?nvidia-smi\b.*\s(-q\s+-x|-x\s+-q|-qx|-xq|--xml-format)\b", "nvidia-smi-q.xml"),
        (r"^(sudo\s+)?nvidia-smi\b.*--query-compute-apps", "nvidia-smi-query-compute-apps.csv"),
        (r"^(sudo\s+)?nvidia-smi\b.*--query-gpu", "nvidia-smi-query-gpu.csv"),
        (r"^(sudo\s+)?nvidia-smi\b.*\s(-q|-a|--query)(\s|$)", "nvidia-smi-q.txt"),
        (r"^(sudo\s+)?nvidia-smi\s*(\|.*)?$", "nvidia-smi.txt"),
        (r"^(sudo\s+)?ibdev2netdev\b", "ibdev2netdev.txt"),
        (r"^(sudo\s+)?ibstatus\b", "ibstatus.txt"),
        (r"^(sudo\s+)?ibstat\b", "ibstat.txt"),
        (r"^(sudo\s+)?ibv_devinfo\b", "ibv-devinfo.txt"),
        (r"^(sudo\s+)?rdma\s+(-\S+\s+)*(link|l)\b", "rdma-link.txt"),
        (r"^(sudo\s+)?rocm-smi\b", "rocm-smi.txt"),
        (r"^(sudo\s+)?amd-smi\s+version\b", "amd-smi-version.txt"),
        (r"^(sudo\s+)?amd-smi\b", "amd-smi.txt"),
        (r"^(sudo\s+)?ip\s+(-br\s+)?(link|l|addr|a)\b", "ip-link.txt"),
        (r"^(sudo\s+)?lsmod\b", "lsmod.txt"),
        (r"^(sudo\s+)?cat\s+/proc/driver/nvidia/version\b", "proc-driver-nvidia-version.txt"),
        (r"^(sudo\s+)?docker\s+(image\s+)?inspect\b", "docker-image-inspect.json"),
        (r"^(sudo\s+)?docker\s+images\b.*--digests", "docker-images-digests.txt"),
        (r"^(python3?\s+-m\s+)?vllm\s+(--version|-v)\b", "vllm-version.txt"),
        (r"^(vllm\s+collect-env|python3?\s+(\S*/)?collect_env\.py)", "vllm-collect-env.txt"),
        (r"^(python3?\s+-m\s+)?pip3?\s+(freeze|list\s+--format[= ]freeze)", "pip-freeze.txt"),
        (r"^(env|printenv|export\s+-p)\s*(\|.*)?$", "env.txt"),
        (r"^(\S*/)?nvcc\s+(--version|-V)\b", "nvcc-version.txt"),
        (r"^uname\s+-a\b", "uname.txt"),
        (r"^cat\s+/etc/os-release\b", "os-release.txt"),
    )
)


def canonical_for_command(command: str) -> str | None:
    for pattern, name in _COMMANDS:
        if pattern.search(command):
            return name
    return None


def split_transcript(text: str) -> tuple[dict[str, bytes], list[str]]:
    """Files found in the transcript, and the commands that were not recognised (in order).

    Each file starts with its command line (`$ lsmod | grep nvidia`): the reader needs it to know
    what it is looking at (a grep is a filtered list, `--query-gpu=a,b` names the CSV columns).
    """
    files: dict[str, list[str]] = {}
    unknown: list[str] = []
    current: str | None = None
    for line in strip_escapes(text).splitlines():
        m = _PROMPT_CMD.match(line)
        if m:
            name = canonical_for_command(m.group("cmd"))
            # "# text" alone is as likely output (pip freeze comments) as a root prompt: it only
            # counts as a prompt when it runs a command we know
            if name is not None or m.group("prefix").strip() or m.group("sigil") == "$":
                current = name
                if name is None:
                    unknown.append(m.group("cmd"))
                else:
                    # an empty output (lsmod | grep nothing) is still an answer
                    files.setdefault(name, []).append(f"$ {m.group('cmd')}")
                continue
        if _BARE_PROMPT.match(line):  # a prompt with no command ends the previous output
            current = None
            continue
        if current is not None:
            files[current].append(line)
    return {name: ("\n".join(lines) + "\n").encode() for name, lines in files.items()}, unknown
