#!/usr/bin/env bash
# The one test command (README "Tests"; .ci/run calls exactly this).
# Installs what the tests need, then runs every test. Tiers that cannot be installed here are
# skipped by name with the reason (pytest -rs prints them); nothing is silently dropped.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[test]'

# System packages for the browser, PostgreSQL and SSH test tiers (Debian), when we may install them.
bash scripts/setup-system-deps.sh || echo "note: system test dependencies could not all be installed; their tests will skip by name"

# The real vLLM CPU server tier (cached venv, reused between runs).
bash scripts/setup-real-vllm.sh || echo "note: the real vLLM tier could not be installed; its tests will skip by name"

# Type check src/ ([tool.mypy] in pyproject.toml) before the tests, so a type error fails CI.
.venv/bin/python -m mypy

exec .venv/bin/python -m pytest -rs "$@"
