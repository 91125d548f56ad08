#!/usr/bin/env bash
# llama.cpp's server with callmask, end to end over HTTP: builds and starts
# scripts/llama-server.sh (default model Gemma 3 270M, dialect hermes) on 127.0.0.1:PORT, sends
# OpenAI chat requests with tools (scripts/engines/llama_server_e2e.py: tool_choice required,
# named in the object form, auto and none; parallel calls on and off; streamed and not; max_tokens
# 48 to 200), checks each response, and stops the server; fails unless every request is answered
# with valid calls within max_tokens (or refused with a 400 where max_tokens is below the shortest
# call). With --compare, the same requests go to the same llama.cpp unpatched (built once,
# --plain), whose figures are printed for comparison and never fail the run.
#
#   scripts/llama-server-e2e.sh [--port PORT] [--requests N] [--compare]
set -euo pipefail
cd "$(dirname "$0")/.."
export CALLMASK_CACHE=${CALLMASK_CACHE:-$PWD/.cache}
port=8089
requests=24
compare=0
while [ $# -gt 0 ]; do
  case "$1" in
  --port) port=$2; shift 2 ;;
  --requests) requests=$2; shift 2 ;;
  --compare) compare=1; shift ;;
  *) echo "usage: scripts/llama-server-e2e.sh [--port PORT] [--requests N] [--compare]" >&2; exit 2 ;;
  esac
done
start=$(date +%s)
scripts/python-setup.sh >&2
py=$(scripts/python-setup.sh --print-python)
scripts/fetch-data.sh gemma >&2

server=""
serve() { # flavour-label [--plain]: builds, starts the server, waits for /health
  local label=$1; shift
  local log=$CALLMASK_CACHE/llama-server/$label-serve.log
  scripts/llama-server.sh --build-only "$@" >/dev/null
  scripts/llama-server.sh --port "$port" "$@" >"$log" 2>&1 &
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
"$py" scripts/engines/llama_server_e2e.py "http://127.0.0.1:$port" --requests "$requests" --label callmask --strict
stop_server
if [ "$compare" = 1 ]; then
  echo "== llama-server-e2e: the same requests to the unpatched llama-server ==" >&2
  serve unpatched --plain
  "$py" scripts/engines/llama_server_e2e.py "http://127.0.0.1:$port" --requests "$requests" --label unpatched || true
  stop_server
fi
echo "llama-server-e2e: $(( $(date +%s) - start )) s" >&2
