"""Rendering findings and runs: terminal, JSON, JUnit XML, single-file HTML."""
