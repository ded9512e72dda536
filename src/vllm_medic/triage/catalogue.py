"""The signature catalogue: ordered YAML data, validated on load, compiled once.

Shipped files are `catalogue/*.yaml` in name order; users add files with `--catalogue FILE`.
Order matters: for one line, the first signature whose pattern matches claims it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from vllm_medic.errors import UsageError
from vllm_medic.model import CATEGORY_VALUES
from vllm_medic.triage.lazy_regex import LazyRegex, Regex

ROLES = ("root", "cascade", "noise")
STRONG_PRIORITY = 50  # roots below this are weak signals: they win only when no strong root exists
_SIG_KEYS = {
    "id",
    "patterns",
    "traceback_patterns",
    "category",
    "runtime_category",
    "role",
    "priority",
    "title",
    "fix",
    "docs",
    "examples",
    "screen",
    "stack_leans",
}


@dataclass(frozen=True)
class Signature:
    id: str
    patterns: tuple[Regex, ...]
    category: str
    role: str
    priority: int
    title: str
    fix: tuple[str, ...] = ()
    docs: tuple[str, ...] = ()
    traceback_patterns: tuple[Regex, ...] = ()
    runtime_category: str | None = None
    origin: str = ""
    # Real lines this signature must claim, each with the public URL (or test-data path) it came from.
    examples: tuple[tuple[str, str], ...] = ()
    # What the bulk screen looks for instead of `patterns`: a superset of their lines that is cheaper
    # to screen for (the exact patterns still decide). Empty: the patterns themselves.
    screen: tuple[str, ...] = ()
    # A crash announcement whose stack is printed below it (a segfault handler's backtrace): the category
    # leans to the family that stack favours (verdict.py `_stack_lean`), the line stays the crash's.
    stack_leans: bool = False

    @property
    def strong(self) -> bool:
        return self.role == "root" and self.priority >= STRONG_PRIORITY

    def matches(self, message: str, frames: list[str]) -> bool:
        if any(p.search(message) for p in self.patterns):
            return True
        if frames and self.traceback_patterns:
            joined = "\n".join(frames)
            return any(p.search(joined) for p in self.traceback_patterns)
        return False


@dataclass
class Catalogue:
    signatures: list[Signature] = field(default_factory=list)
    category_fix: dict[str, list[str]] = field(default_factory=dict)
    category_docs: dict[str, list[str]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def classify(self, message: str, frames: list[str] | None = None) -> Signature | None:
        frames = frames or []
        for sig in self.signatures:
            if sig.matches(message, frames):
                return sig
        return None

    def by_id(self, sig_id: str) -> Signature | None:
        return next((s for s in self.signatures if s.id == sig_id), None)

    def raw_patterns(self) -> list[str]:
        """Every line-level pattern (not traceback-frame ones): the grep baseline's patterns."""
        return [p.pattern for s in self.signatures for p in s.patterns]

    def screen_patterns(self) -> list[str]:
        """What the bulk screen must let through: each signature's `screen` patterns, else its own.

        Noise signatures are left out: they only take back a line another pattern made a candidate
        (a line only they match is not an anomaly either way), and they are tested on every candidate."""
        return [
            p
            for s in self.signatures
            if s.role != "noise"
            for p in (s.screen or tuple(q.pattern for q in s.patterns))
        ]


def _fail(origin: str, where: str, why: str) -> UsageError:
    return UsageError(f"catalogue {origin}: {where}: {why}")


def _compile(origin: str, where: str, items: Any, *, lazy: bool = False) -> tuple[Regex, ...]:
    """Validated patterns; `lazy` (the shipped files, compiled by the tests): compiled on first use."""
    if items is None:
        return ()
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, list) or not all(isinstance(p, str) and p for p in items):
        raise _fail(origin, where, "patterns must be a list of non-empty regular expressions")
    if lazy:
        return tuple(LazyRegex(p) for p in items)
    out: list[Regex] = []
    for p in items:
        try:
            out.append(re.compile(p))
        except re.error as exc:
            raise _fail(origin, where, f"bad regular expression {p!r}: {exc}") from None
    return tuple(out)


# A group holding a quantifier, itself quantified: `(a+)+`, `(a*b?)*`, `(x{1,9})+` (what backtracks
# exponentially under Python's `re`). Used only where google-re2 is not installed.
_NESTED_QUANTIFIER = re.compile(
    r"\((?:[^()\\]|\\.)*(?:[+*]|\{\d*,\d*\})(?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,\d*\})"
)


def _linear_time(sig: Signature) -> Signature:
    """A user signature's patterns compiled with RE2 where RE2 can run them (linear time: `(a+)+$` on a
    40-char line hung `triage --catalogue` under `re`). A pattern RE2 cannot run (a lookahead, a
    backreference) stays under Python `re` only without nested quantifiers; with them it is refused,
    naming it. Without google-re2 every pattern with nested quantifiers is refused."""
    import dataclasses

    try:
        import re2
    except ImportError:
        re2 = None

    def one(p: Regex, field: str) -> Any:
        if re2 is not None:
            try:
                return re2.compile(p.pattern)
            except re2.error:
                pass
        if _NESTED_QUANTIFIER.search(p.pattern):
            raise _fail(
                sig.origin,
                f"signature {sig.id!r} {field}",
                f"pattern {p.pattern!r} nests quantifiers and RE2 cannot run it (catastrophic backtracking "
                "under Python re): rewrite it without a quantified group"
                + ("" if re2 is not None else ", or install google-re2"),
            )
        return p

    return dataclasses.replace(
        sig,
        patterns=tuple(one(p, "pattern") for p in sig.patterns),
        traceback_patterns=tuple(one(p, "traceback pattern") for p in sig.traceback_patterns),
    )


def _str_list(origin: str, where: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(origin, where, "must be a list of strings")
    return tuple(value)


def _examples(origin: str, where: str, value: Any) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    out = []
    for i, ex in enumerate(value if isinstance(value, list) else [None], 1):
        if (
            not isinstance(ex, dict)
            or set(ex) - {"line", "source"}
            or not isinstance(ex.get("line"), str)
            or not isinstance(ex.get("source"), str)
            or not ex["source"].startswith(("https://", "http://", "tests/"))
        ):
            raise _fail(origin, f"{where} example {i}", "needs `line` and a `source` URL")
        out.append((ex["line"], ex["source"]))
    return tuple(out)


def parse_signature(entry: Any, origin: str, index: int, *, lazy: bool = False) -> Signature:
    where = f"entry {index + 1}"
    if not isinstance(entry, dict):
        raise _fail(origin, where, "each signature must be a mapping")
    sid = entry.get("id")
    if not isinstance(sid, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_.\-]*", sid):
        raise _fail(origin, where, "needs an `id` of lowercase letters, digits, '-', '_' or '.'")
    where = f"entry {index + 1} ({sid})"
    unknown = set(entry) - _SIG_KEYS
    if unknown:
        raise _fail(origin, where, f"unknown field(s) {sorted(unknown)}; allowed: {sorted(_SIG_KEYS)}")
    category = entry.get("category")
    if category not in CATEGORY_VALUES:
        raise _fail(origin, where, f"category {category!r} is not one of {list(CATEGORY_VALUES)}")
    runtime_category = entry.get("runtime_category")
    if runtime_category is not None and runtime_category not in CATEGORY_VALUES:
        raise _fail(
            origin, where, f"runtime_category {runtime_category!r} is not one of {list(CATEGORY_VALUES)}"
        )
    role = entry.get("role", "root")
    if role not in ROLES:
        raise _fail(origin, where, f"role {role!r} is not one of {list(ROLES)}")
    priority = entry.get("priority", 60 if role == "root" else 0)
    if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 100:
        raise _fail(origin, where, "priority must be an integer 0-100")
    patterns = _compile(origin, where, entry.get("patterns"), lazy=lazy)
    tb_patterns = _compile(origin, where, entry.get("traceback_patterns"), lazy=lazy)
    if not patterns and not tb_patterns:
        raise _fail(origin, where, "needs at least one of `patterns` or `traceback_patterns`")
    title = entry.get("title")
    if not isinstance(title, str) or not title.strip():
        raise _fail(origin, where, "needs a `title`")
    screen = tuple(p.pattern for p in _compile(origin, f"{where} screen", entry.get("screen"), lazy=lazy))
    if screen and not patterns:
        raise _fail(origin, where, "`screen` stands in for `patterns`: give the patterns too")
    stack_leans = entry.get("stack_leans", False)
    if not isinstance(stack_leans, bool):
        raise _fail(origin, where, "`stack_leans` must be true or false")
    return Signature(
        id=sid,
        patterns=patterns,
        category=category,
        role=role,
        priority=priority,
        title=title.strip(),
        fix=_str_list(origin, f"{where} fix", entry.get("fix")),
        docs=_str_list(origin, f"{where} docs", entry.get("docs")),
        traceback_patterns=tb_patterns,
        runtime_category=runtime_category,
        origin=origin,
        examples=_examples(origin, where, entry.get("examples")),
        screen=screen,
        stack_leans=stack_leans,
    )


def _parse_document(doc: Any, origin: str, cat: Catalogue, *, lazy: bool = False) -> None:
    if doc is None:
        return
    if isinstance(doc, list):
        doc = {"signatures": doc}
    if not isinstance(doc, dict):
        raise _fail(origin, "top level", "must be a mapping with `signatures:` (or a list of signatures)")
    unknown = set(doc) - {"version", "signatures", "categories"}
    if unknown:
        raise _fail(origin, "top level", f"unknown key(s) {sorted(unknown)}")
    for name, spec in (doc.get("categories") or {}).items():
        if name not in CATEGORY_VALUES:
            raise _fail(origin, f"categories.{name}", f"not one of {list(CATEGORY_VALUES)}")
        if not isinstance(spec, dict):
            raise _fail(origin, f"categories.{name}", "must be a mapping with `fix:` and optional `docs:`")
        cat.category_fix[name] = list(_str_list(origin, f"categories.{name}.fix", spec.get("fix")))
        if spec.get("docs"):
            cat.category_docs[name] = list(_str_list(origin, f"categories.{name}.docs", spec.get("docs")))
    entries = doc.get("signatures") or []
    if not isinstance(entries, list):
        raise _fail(origin, "signatures", "must be a list")
    seen = {s.id for s in cat.signatures}
    for i, entry in enumerate(entries):
        sig = parse_signature(entry, origin, i, lazy=lazy)
        if sig.id in seen:
            # A later file may override a shipped signature by reusing its id.
            cat.signatures = [s for s in cat.signatures if s.id != sig.id]
        seen.add(sig.id)
        cat.signatures.append(sig)


def safe_yaml(text: str) -> Any:
    """A shipped file's YAML (yaml_cache.shipped_yaml: the C loader, kept parsed in the user's cache)."""
    from vllm_medic.yaml_cache import shipped_yaml

    return shipped_yaml(text)


def is_yaml_error(exc: BaseException) -> bool:
    """Whether `exc` is PyYAML's parse error (asked only after a parse failed, so PyYAML is loaded)."""
    yaml = sys.modules.get("yaml")
    return yaml is not None and isinstance(exc, yaml.YAMLError)


def _load_yaml(text: str, origin: str, *, shipped: bool = False) -> Any:
    """Shipped files through the fast C loader; a user's file through the guarded one (aliases refused
    - billion laughs -, depth and size capped)."""
    try:
        if shipped:
            return safe_yaml(text)
        from vllm_medic.safeyaml import safe_load

        return safe_load(text)
    except Exception as exc:
        if not is_yaml_error(exc):
            raise
        raise _fail(origin, "YAML", str(exc).splitlines()[0] if str(exc) else "cannot parse") from None


def load_catalogue(extra: list[Path] | tuple[Path, ...] = ()) -> Catalogue:
    """Shipped `catalogue/*.yaml` in name order, then the user's files in the order given.

    User signatures go first so they can claim a line before the shipped ones do."""
    cat = Catalogue()
    shipped = resources.files("vllm_medic.triage") / "catalogue"
    for entry in sorted(
        (p for p in shipped.iterdir() if p.name.endswith((".yaml", ".yml"))), key=lambda p: p.name
    ):
        origin = f"catalogue/{entry.name}"
        _parse_document(
            _load_yaml(entry.read_text(encoding="utf-8"), origin, shipped=True), origin, cat, lazy=True
        )
        cat.files.append(origin)
    if extra:
        user = Catalogue()
        for path in extra:
            from vllm_medic.safeio import read_arg_text

            path = Path(path)
            text = read_arg_text(path, "catalogue")
            _parse_document(_load_yaml(text, str(path)), str(path), user)
            cat.files.append(str(path))
        user.signatures = [_linear_time(sig) for sig in user.signatures]
        user_ids = {s.id for s in user.signatures}
        cat.signatures = user.signatures + [s for s in cat.signatures if s.id not in user_ids]
        cat.category_fix.update(user.category_fix)
        cat.category_docs.update(user.category_docs)
    return cat
