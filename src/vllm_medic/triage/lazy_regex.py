"""Regular expressions compiled on first use, for the shipped catalogue and families.

They hold ~600 patterns; compiling all of them took ~0.08 s of every run's start (Python's `re` parses in
Python), while a scan tests few: a healthy or signature-claimed log may never reach a family's words. A
user's `--catalogue` file is still compiled when it is loaded, so its errors name the file; the shipped
patterns are compiled by the tests (tests/triage/test_scan_speed_paths.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Match = Callable[..., "re.Match[str] | None"]


class LazyRegex:
    """Stands in for `re.compile(pattern)` where `.pattern`, `.search` and `.match` are what is used.
    The first call compiles and puts the compiled pattern's own methods in place."""

    __slots__ = ("pattern", "search", "match")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.search: Match = self._first_search
        self.match: Match = self._first_match

    def compiled(self) -> re.Pattern[str]:
        rx = re.compile(self.pattern)
        self.search, self.match = rx.search, rx.match
        return rx

    def _first_search(self, *args: Any) -> re.Match[str] | None:
        return self.compiled().search(*args)

    def _first_match(self, *args: Any) -> re.Match[str] | None:
        return self.compiled().match(*args)

    def __repr__(self) -> str:
        return f"LazyRegex({self.pattern!r})"


Regex = re.Pattern[str] | LazyRegex
