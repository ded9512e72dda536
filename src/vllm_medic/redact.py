"""Secret redaction for every bundle, report, log excerpt and error message: the one place it lives.

Three layers, applied in this order by :func:`redact_text`:

1. Structure: credentials inside URLs (``scheme://user:PASS@``, ``?token=``), auth headers
   (``Authorization: KEY``, ``Bearer``/``Basic``), a value following a secret-named flag in any argv form
   (shell ``--api-key KEY``/``--api-key=KEY``, a JSON/Python array ``"--api-key", "KEY"``, a YAML list whose
   next item is the value, ``docker login -p KEY``, ``curl -u user:PASS``), and assignments whose name says
   secret in every quoting (``HF_TOKEN=KEY``, ``"api_key": "KEY"``, Python repr ``api_key='KEY'``, and lists:
   vLLM's own ``non-default args: {'api_key': ['KEY']}``).
2. Known token shapes (``data/secret_shapes.yaml``: Hugging Face, OpenAI, NGC, GitHub, AWS, Slack, GitLab,
   Google, JWT), masked wherever they appear.

:func:`redact_obj` walks JSON-like structures: a secret-named key loses every scalar under it (lists and
nested maps included), string lists are treated as argv, other strings go through :func:`redact_text`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

MASK = "<redacted>"

_SECRET_NAME = re.compile(
    r"(SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|API[_-]?KEY|ACCESS[_-]?KEY|PRIVATE[_-]?KEY|AUTH|SESSION[_-]?KEY|COOKIE|SIGNATURE|(^|_)KEY$)",
    re.IGNORECASE,
)

# Names matching _SECRET_NAME that are plainly not secrets (they hold paths, counts or switches).
_NOT_SECRET_NAME = re.compile(
    r"(_PATH$|_FILE$|_DIR$|TOKENIZERS?_|TOKENS$|TOKENS_|(^|_)(MAX|NUM|MIN)_\w*TOKEN|_PER_TOKEN|KEYRING|_ENV$|_STDIN$)",
    re.IGNORECASE,
)

# Names that say secret even over a list or a map (`api_key: [KEY]`); a bare TOKEN/KEY/SIGNATURE name over
# a container is an LLM token or a record (`first_differing_token: {index, text}`): walked, not masked.
_STRONG_SECRET_NAME = re.compile(
    r"(SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|API[_-]?KEY|ACCESS[_-]?KEY|PRIVATE[_-]?KEY|AUTH|SESSION[_-]?KEY|COOKIE|HF_TOKEN|AUTH_TOKEN|ACCESS_TOKEN)",
    re.IGNORECASE,
)

# Values a secret-named assignment may hold that say "nothing set": kept, they are diagnostic.
_UNSET = {"none", "null", "true", "false", "", "''", '""', MASK, "bearer", "basic", "token", "digest"}


@lru_cache(maxsize=1)
def shapes() -> list[tuple[str, re.Pattern[str], tuple[str, ...]]]:
    """(name, compiled pattern, trigger literals) per known token shape, from data/secret_shapes.yaml."""
    from vllm_medic.yaml_cache import shipped_yaml

    text = resources.files("vllm_medic").joinpath("data/secret_shapes.yaml").read_text(encoding="utf-8")
    data = shipped_yaml(text)
    return [(s["name"], re.compile(s["pattern"]), tuple(s["triggers"])) for s in data["shapes"]]


def shape_triggers() -> tuple[str, ...]:
    """Literals one of which every known token shape contains (case-sensitive)."""
    return tuple(t for _, _, triggers in shapes() for t in triggers)


_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s/@:'\"]+):([^\s/@'\"]+)@")
_URL_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:access_token|token|api_key|apikey|key|secret|password|sig|signature|auth)=)([^&\s\"']+)"
)
# An auth header's value, with or without a scheme word: `Authorization: KEY`, `X-Api-Key: KEY`.
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key|x-auth-token|x-access-token|cookie|set-cookie)"
    r"([\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic|token|digest|negotiate)\s+)?"
    r"(?!<redacted>|(?:bearer|basic|token|digest|negotiate)\s+<redacted>)([^\s\"',;}\]]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+(?!<redacted>)[A-Za-z0-9._~+/=\-]{8,}")
# A (possibly quoted) flag, a separator of any argv form, then the value (possibly quoted). The separator
# forms: `=`, blanks (shell), `", "` (JSON/Python array, one item a line too), a shell line continuation, and a YAML list's
# next item (`\n  - VALUE`). A following flag is never taken for the value.
_FLAG_VALUE = re.compile(
    r"(?P<flag>(?<![\w\-])--?[A-Za-z][A-Za-z0-9_\-]*)"
    r"(?P<sep>=|[\"']?[ \t]*,\s*(?=[\"'])|[\"']?[ \t]*\\?\r?\n[ \t]*-[ \t]+|[ \t]*\\\r?\n[ \t]*|[ \t]+)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|(?!-)[^\s\"',\]}]+)"
)
# `docker login -p KEY` / `helm registry login --password KEY` (a short `-p` is a port elsewhere).
_LOGIN_P = re.compile(r"(?i)(\blogin\b[^\n]*?(?<!\S)-p)(=|[ \t]+)(?!<redacted>)(\S+)")
# `curl -u user:PASS` / `--user user:PASS`.
_USER_PASS = re.compile(
    r"((?<!\S)(?:-u|--user|--proxy-user)(?:=|[ \t]+)[\"']?[^\s:\"']+:)(?!<redacted>)([^\s\"']+)"
)
# NAME=value, "name": "value", name: value, Python repr name='value', and a list value `[...]`.
_ASSIGN_SECRET = re.compile(
    r"(?i)(?P<name>(?<![\w\-.])[A-Za-z0-9_.\-]*(?:secret|token|password|passwd|passphrase|api[_\-]?key|access[_\-]?key"
    r"|private[_\-]?key|credential|auth)[A-Za-z0-9_.\-]*)"
    r"(?P<sep>[\"']?\s*[:=]\s*)"
    r"(?P<value>\[[^\]\n]*\]|\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;&}\]]+)"
)
_LIST_ITEM = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'|[^\s,\[\]\"']+")


def _flag_name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET_NAME.search(name)


def redact_value(name: str, value: str) -> str:
    """Redact ``value`` entirely when ``name`` says secret, else scan it as text."""
    if is_secret_name(name) and value != "":
        return MASK
    return redact_text(value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: redact_value(k, v) for k, v in env.items()}


def _masked(value: str) -> str:
    """MASK in the value's own quoting; a list keeps its brackets, each item masked."""
    if value.lower() in _UNSET:
        return value
    if value.startswith("["):
        return _LIST_ITEM.sub(lambda m: m.group(0) if m.group(0).lower() in _UNSET else MASK, value)
    if value[:1] in "\"'" and len(value) >= 2:
        return value[0] + MASK + value[-1] if value[1:-1] not in ("", MASK) else value
    return MASK


def _flag_sub(m: re.Match[str]) -> str:
    flag = m.group("flag")
    if (
        not flag.startswith("--")
        or not is_secret_name(_flag_name(flag))
        or m.group("value").lstrip("\"'")[:2] == "--"
    ):
        return m.group(0)
    return f"{flag}{m.group('sep')}{_masked(m.group('value'))}"


def _assign_sub(m: re.Match[str]) -> str:
    name = m.group("name")
    if not is_secret_name(name.replace("-", "_").replace(".", "_")):
        return m.group(0)
    return f"{name}{m.group('sep')}{_masked(m.group('value'))}"


def _header_sub(m: re.Match[str]) -> str:
    scheme = f"{m.group(3)} " if m.group(3) else ""
    return f"{m.group(1)}{m.group(2)}{scheme}{MASK}"


def redact_text(text: str) -> str:
    if not text:
        return text
    out = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{MASK}@", text)
    out = _URL_QUERY_SECRET.sub(lambda m: f"{m.group(1)}{MASK}", out)
    out = _AUTH_HEADER.sub(_header_sub, out)
    out = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", out)
    out = _FLAG_VALUE.sub(_flag_sub, out)
    out = _LOGIN_P.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", out)
    out = _USER_PASS.sub(lambda m: f"{m.group(1)}{MASK}", out)
    out = _ASSIGN_SECRET.sub(_assign_sub, out)
    for _, shape, _ in shapes():
        out = shape.sub(MASK, out)
    return out


def _mask_all(obj: Any) -> Any:
    """Everything under a secret-named key: every non-empty scalar is masked, the shape is kept."""
    if isinstance(obj, dict):
        return {k: _mask_all(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_mask_all(v) for v in obj]
    if isinstance(obj, str | int | float) and not isinstance(obj, bool) and obj != "":
        return MASK
    return obj


def _masks_container(name: str, value: Any) -> bool:
    if isinstance(value, dict | list | tuple):
        return bool(_STRONG_SECRET_NAME.search(name))
    return isinstance(value, str | int | float) and value != ""


def redact_obj(obj: Any, *, by_name: bool = True) -> Any:
    """Redact a JSON-like structure: secret-named keys lose every value under them (``by_name``), string
    lists are read as argv, every other string is scanned as text. ``by_name=False`` keeps key-name
    masking off (for payloads whose own fields are named ``signature`` or ``token_count``)."""
    if isinstance(obj, dict):
        result = {}
        for k, v in obj.items():
            if by_name and isinstance(k, str) and is_secret_name(k) and _masks_container(k, v):
                result[k] = _mask_all(v)
            else:
                result[k] = redact_obj(v, by_name=by_name)
        return result
    if isinstance(obj, list | tuple):
        if obj and all(isinstance(v, str) for v in obj):
            return redact_argv(list(obj))  # an argv-like list: mask the value after a secret flag
        return [redact_obj(v, by_name=by_name) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def redact_argv(argv: list[str]) -> list[str]:
    """Redact the value following a secret-named flag (and `-p` after `login`), and secrets inside any
    argument."""
    out: list[str] = []
    mask_next = False
    login = False
    for arg in argv:
        if mask_next:
            mask_next = False
            if not arg.startswith("--"):
                out.append(MASK)
                continue
        if arg == "login":
            login = True
        if arg.startswith("--") and "=" not in arg and is_secret_name(_flag_name(arg)):
            out.append(arg)
            mask_next = True
            continue
        if login and arg == "-p":
            out.append(arg)
            mask_next = True
            continue
        if arg.startswith("--") and "=" in arg:
            name, _, _value = arg.partition("=")
            if is_secret_name(_flag_name(name)):
                out.append(f"{name}={MASK}")
                continue
        out.append(redact_text(arg))
    return out
