"""Fixtures of the robustness sweep; the machinery lives in robustkit.py."""

from robustkit import bad, medic_home  # noqa: F401 - pytest finds fixtures by name here
