#!/usr/bin/env bash
# The patched llama-server under concurrent mixed load through the `openai` client
# (scripts/engines/openai_load.py, as scripts/vllm-load.sh runs it against vLLM): valid requests
# of every tool_choice, streamed and not, clients that disconnect mid-stream, the hostile set
# (each must be a 4xx naming its cause), requests with distinct tool sets, a final round. Builds
# and starts scripts/llama-server.sh (Gemma 3 270M, dialect hermes) on 127.0.0.1:PORT; the client
# runs in the vLLM venv (scripts/vllm-setup.sh), which has `openai`. Results: docs/engines.md.
#
#   scripts/llama-server-load.sh [--port PORT] [--valid N] [--distinct N] [--out FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CALLMASK_CACHE=${CALLMASK_CACHE:-$PWD/.cache}
port=8090
valid=16
distinct=40
out=target/llama-server-load.json
while [ $# -gt 0 ]; do
  case "$1" in
  --port) port=$2; shift 2 ;;
  --valid) valid=$2; shift 2 ;;
  --distinct) distinct=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  *) echo "usage: scripts/llama-server-load.sh [--port PORT] [--valid N] [--distinct N] [--out FILE]" >&2; exit 2 ;;
  esac
done
start=$(date +%s)
scripts/vllm-setup.sh
py=$(scripts/vllm-setup.sh --print-python)
scripts/fetch-data.sh gemma >&2
scripts/llama-server.sh --build-only >/dev/null
log=$CALLMASK_CACHE/llama-server/load-serve.log
scripts/llama-server.sh --port "$port" -np 4 >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  if curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
  if ! kill -0 $server 2>/dev/null; then echo "the server exited; its log:" >&2; tail -30 "$log" >&2; exit 1; fi
  sleep 1
done
mkdir -p "$(dirname "$out")"
status=0
(cd scripts/engines && "$py" openai_load.py "http://127.0.0.1:$port" --valid "$valid" \
  --pathological 0 --disconnects 4 --distinct "$distinct" --concurrency 4 \
  --server-pid "$server" --out "$root/$out") || status=$?
echo "llama-server-load: $(( $(date +%s) - start )) s, summary in $out" >&2
exit $status
