"""Secret redaction for every bundle, report and log excerpt.

Two layers: environment-style ``NAME=value`` pairs whose *name* says secret, and free text scanned
for well-known token shapes, ``--api-key VALUE`` style arguments and credentials inside URLs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "<redacted>"

_SECRET_NAME = re.compile(
    r"(SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|API[_-]?KEY|ACCESS[_-]?KEY|PRIVATE[_-]?KEY|AUTH|SESSION[_-]?KEY|COOKIE|SIGNATURE|(^|_)KEY$)",
    re.IGNORECASE,
)

# Names matching _SECRET_NAME that are plainly not secrets (they hold paths, counts or switches).
_NOT_SECRET_NAME = re.compile(
    r"(_PATH$|_FILE$|_DIR$|TOKENIZERS?_|TOKENS$|TOKENS_|(^|_)(MAX|NUM|MIN)_\w*TOKEN|_PER_TOKEN|KEYRING)",
    re.IGNORECASE,
)

_TOKEN_SHAPES = [
    re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"),  # Hugging Face
    re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}\b"),  # OpenAI / Anthropic style
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),  # GitHub
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"),  # Slack
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}\b"),  # GitLab
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\b"),  # JWT
]

_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s/@:]+):([^\s/@]+)@")
_URL_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:access_token|token|api_key|apikey|key|secret|password|sig|signature|auth)=)([^&\s\"']+)"
)
# --api-key VALUE / --api-key=VALUE / --hf-token VALUE / --password VALUE
_ARG_SECRET = re.compile(
    r"(?i)(--[a-z0-9\-]*(?:api-key|apikey|token|password|passwd|secret|credential)[a-z0-9\-]*)(=|\s+)(?!<redacted>)(\"[^\"]*\"|'[^']*'|\S+)"
)
# KEY=value / "key": "value" / key: value where the key names a secret
_ASSIGN_SECRET = re.compile(
    r"(?i)(\b[A-Za-z0-9_.\-]*(?:secret|token|password|passwd|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential)[A-Za-z0-9_.\-]*\b)"
    r"(\"?\s*[:=]\s*\"?)(?!<redacted>)([^\s\"',}]+)"
)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET_NAME.search(name)


def redact_value(name: str, value: str) -> str:
    """Redact ``value`` entirely when ``name`` says secret, else scan it as text."""
    if is_secret_name(name) and value != "":
        return MASK
    return redact_text(value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: redact_value(k, v) for k, v in env.items()}


def _assign_sub(m: re.Match[str]) -> str:
    name = m.group(1)
    if not is_secret_name(name.replace("-", "_").replace(".", "_")):
        return m.group(0)
    return f"{name}{m.group(2)}{MASK}"


def redact_text(text: str) -> str:
    if not text:
        return text
    out = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{MASK}@", text)
    out = _URL_QUERY_SECRET.sub(lambda m: f"{m.group(1)}{MASK}", out)
    out = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", out)
    # Mask a flag's value only when the flag names a secret (not --max-num-batched-tokens 8192), and never
    # take a following --flag for the value (else `--enable-prompt-tokens-details --api-key KEY` leaks KEY).
    out = re.sub(
        r"(--[A-Za-z0-9\-]+)(=|\s+)(?!<redacted>)(\"[^\"]*\"|'[^']*'|(?!--)\S+)",
        lambda m: (
            f"{m.group(1)}{m.group(2)}{MASK}"
            if _ARG_SECRET.match(m.group(0)) and is_secret_name(m.group(1)[2:].replace("-", "_"))
            else m.group(0)
        ),
        out,
    )
    out = _ASSIGN_SECRET.sub(_assign_sub, out)
    for shape in _TOKEN_SHAPES:
        out = shape.sub(MASK, out)
    return out


def redact_obj(obj: Any) -> Any:
    """Redact a JSON-like structure: secret-named keys lose their values, strings are scanned."""
    if isinstance(obj, dict):
        result = {}
        for k, v in obj.items():
            if isinstance(k, str) and is_secret_name(k) and isinstance(v, str | int | float) and v != "":
                result[k] = MASK
            else:
                result[k] = redact_obj(v)
        return result
    if isinstance(obj, list | tuple):
        if obj and all(isinstance(v, str) for v in obj):
            return redact_argv(list(obj))  # an argv-like list: mask the value after a secret flag
        return [redact_obj(v) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def redact_argv(argv: list[str]) -> list[str]:
    """Redact the value following a secret-named flag, and secrets inside any argument."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        if arg.startswith("--") and "=" not in arg and is_secret_name(arg[2:].replace("-", "_")):
            out.append(arg)
            mask_next = True
            continue
        if arg.startswith("--") and "=" in arg:
            name, _, _value = arg.partition("=")
            if is_secret_name(name[2:].replace("-", "_")):
                out.append(f"{name}={MASK}")
                continue
        out.append(redact_text(arg))
    return out
