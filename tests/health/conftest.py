"""Fixtures for the health tests (helpers live in healthkit.py: a unique module name, safe next to other areas)."""

from healthkit import fake_host  # noqa: F401 - re-exported as a pytest fixture
