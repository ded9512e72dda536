"""Pure parsers, one per source: raw text in, typed facts out, never an exception.

Each parser returns a small result object with a ``problems`` list; an empty result plus a problem
means the text was unreadable (recorded as ``unparsable`` in ``snapshot.errors``).
"""

import re

_PROMPT = re.compile(r"^(\(\S+\)\s*)?(\[[^\]]*\]|[\w.@:~/\-\[\]]*)\s*[#$%>](\s+\S.*)?\s*$")


def is_prompt_line(line: str) -> bool:
    """A shell prompt pasted with the output (`$ lsmod`, `[root@gpu3 ~]# nvidia-smi`, `bash-5.2#`)."""
    return bool(_PROMPT.match(line.strip()))
