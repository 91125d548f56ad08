#!/usr/bin/env bash
# llama.cpp's server with callmask, end to end over HTTP: builds and starts
# scripts/llama-server.sh (default model Gemma 3 270M, dialect hermes) on 127.0.0.1:PORT, sends
# OpenAI chat requests with tools (scripts/engines/llama_server_e2e.py: tool_choice required,
# named in the object form, auto and none; parallel calls on and off; streamed and not; max_tokens
# 48 to 200), checks each response, and stops the server; fails unless every request is answered
# with valid calls within max_tokens (or refused with a 400 where max_tokens is below the shortest
# call). With --compare, the same requests go to the same llama.cpp unpatched (built once,
# --plain), whose figures are printed for comparison and never fail the run. With --template, both
# servers render prompts with that chat template instead of Gemma 3's (which names no tool-call
# format, so the unpatched server constrains nothing): a file of the pinned llama.cpp's
# models/templates/ (e.g. Qwen-Qwen2.5-7B-Instruct.jinja, Hermes format) or a path; the callmask
# server then tells the dialect from it.
#
# With --standard-types, the tools' schemas go out with standard JSON Schema types instead of the
# held-out sets' BFCL aliases (`dict`, `float`), which llama.cpp's own grammar builder refuses.
# With --model GGUF, both servers serve that model with its own chat template, and the callmask
# server tells the dialect from it (e.g. .cache/models/tiny-qwen3.gguf, Qwen3's tokenizer and
# template over random weights: scripts/engines/make_tiny_qwen3.py, then llama.cpp's
# convert_hf_to_gguf.py, as scripts/llama-server-tiny-qwen3.sh does).
#
#   scripts/llama-server-e2e.sh [--port PORT] [--requests N] [--compare] [--template FILE]
#                               [--standard-types] [--model GGUF]
set -euo pipefail
cd "$(dirname "$0")/.."
export CALLMASK_CACHE=${CALLMASK_CACHE:-$PWD/.cache}
port=8089
requests=24
compare=0
template=""
model=""
client_args=()
while [ $# -gt 0 ]; do
  case "$1" in
  --port) port=$2; shift 2 ;;
  --requests) requests=$2; shift 2 ;;
  --compare) compare=1; shift ;;
  --template) template=$2; shift 2 ;;
  --standard-types) client_args+=(--standard-types); shift ;;
  --model) model=$2; shift 2 ;;
  *) echo "usage: scripts/llama-server-e2e.sh [--port PORT] [--requests N] [--compare] [--template FILE] [--standard-types] [--model GGUF]" >&2; exit 2 ;;
  esac
done
start=$(date +%s)
scripts/python-setup.sh >&2
py=$(scripts/python-setup.sh --print-python)
scripts/fetch-data.sh gemma >&2

server_args=()
if [ -n "$template" ] || [ -n "$model" ]; then
  [ -n "$model" ] || model=$(ls "$CALLMASK_CACHE"/gemma-*/gemma-3-270m-q4_k_m.gguf | head -1)
  [ -f "$model" ] || { echo "no model $model" >&2; exit 2; }
  server_args=(-m "$model" -c 4096)
fi
if [ -n "$template" ]; then
  scripts/llama-server.sh --prepare-only --plain >/dev/null  # unpacks the pinned sources
  [ -f "$template" ] || template=$CALLMASK_CACHE/llama-server/plain/llama.cpp/models/templates/$template
  [ -f "$template" ] || { echo "no chat template $template" >&2; exit 2; }
  server_args+=(--chat-template-file "$template")
fi

server=""
serve() { # flavour-label [--plain]: builds, starts the server, waits for /health
  local label=$1; shift
  local log=$CALLMASK_CACHE/llama-server/$label-serve.log
  scripts/llama-server.sh --build-only "$@" >/dev/null
  scripts/llama-server.sh --port "$port" "$@" "${server_args[@]+"${server_args[@]}"}" >"$log" 2>&1 &
  server=$!
  for _ in $(seq 1 120); do
    if curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 $server 2>/dev/null; then echo "the server exited; its log:" >&2; tail -30 "$log" >&2; exit 1; fi
    sleep 1
  done
  echo "the server is not healthy after 120 s; log: $log" >&2
  exit 1
}
stop_server() { [ -z "$server" ] || { kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; server=""; }; }
trap stop_server EXIT

echo "== llama-server-e2e: llama-server with callmask on 127.0.0.1:$port ==" >&2
serve callmask
grep -o 'callmask: requests with tools use.*' "$CALLMASK_CACHE/llama-server/callmask-serve.log" | cut -c1-120 >&2 || true
"$py" scripts/engines/llama_server_e2e.py "http://127.0.0.1:$port" --requests "$requests" --label callmask --strict --callmask-checks "${client_args[@]+"${client_args[@]}"}"
stop_server
if [ "$compare" = 1 ]; then
  echo "== llama-server-e2e: the same requests to the unpatched llama-server ==" >&2
  serve unpatched --plain
  "$py" scripts/engines/llama_server_e2e.py "http://127.0.0.1:$port" --requests "$requests" --label unpatched "${client_args[@]+"${client_args[@]}"}" || true
  stop_server
fi
echo "llama-server-e2e: $(( $(date +%s) - start )) s" >&2
