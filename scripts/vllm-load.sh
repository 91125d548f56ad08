#!/usr/bin/env bash
# vLLM's OpenAI server with callmask under concurrent mixed load, through the `openai` client
# (scripts/engines/openai_load.py): valid requests of every tool_choice, streamed and not, with
# and without costly tool sets compiling in flight (the valid requests' p95 latency ratio),
# clients that disconnect mid-stream, the hostile set (each must be a 4xx naming its cause),
# requests with distinct tool sets (the server's memory before and after), a final round.
# Too heavy for CI (the vLLM venv, ~10 minutes); CI runs the hostile set through the same tool
# parser in process (crates/callmask-py/tests/test_vllm.py). Results: docs/engines.md.
#
#   scripts/vllm-load.sh [--port PORT] [--valid N] [--distinct N] [--max-num-seqs N] [--out FILE]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CALLMASK_CACHE=${CALLMASK_CACHE:-$root/.cache}
port=8472
valid=96
distinct=200
seqs=32
out=target/vllm-load.json
while [ $# -gt 0 ]; do
  case "$1" in
  --port) port=$2; shift 2 ;;
  --valid) valid=$2; shift 2 ;;
  --distinct) distinct=$2; shift 2 ;;
  --max-num-seqs) seqs=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  *) echo "usage: scripts/vllm-load.sh [--port PORT] [--valid N] [--distinct N] [--max-num-seqs N] [--out FILE]" >&2; exit 2 ;;
  esac
done
start=$(date +%s)
py=$(scripts/vllm-prepare.sh)
model=$CALLMASK_CACHE/models/tiny-qwen3

export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-4}
# The costly tool sets' prompts run to ~40k tokens: a context past the random model's 4,096
# positions (its outputs are random either way).
export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
export PYTHONUNBUFFERED=1
log=$CALLMASK_CACHE/vllm-load-serve.log
plugin=$("$py" -m callmask.vllm --plugin-path)
# The server's own module (vllm-cpu's `vllm serve` CLI exits looking for a `vllm` distribution;
# see scripts/vllm-e2e.sh).
"$py" -m vllm.entrypoints.launchers.api_server.entry --model "$model" --host 127.0.0.1 \
  --port "$port" --enable-auto-tool-choice --max-model-len 65536 --max-num-seqs "$seqs" \
  --enforce-eager --dtype float32 --gpu-memory-utilization 0.3 \
  --logits-processors callmask.vllm:CallmaskLogitsProcessor \
  --tool-parser-plugin "$plugin" --tool-call-parser callmask >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  if curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
  if ! kill -0 $server 2>/dev/null; then echo "the server exited; its log:" >&2; tail -50 "$log" >&2; exit 1; fi
  sleep 2
done
mkdir -p "$(dirname "$out")"
status=0
(cd scripts/engines && "$py" openai_load.py "http://127.0.0.1:$port" --valid "$valid" \
  --distinct "$distinct" --concurrency "$seqs" --server-pid "$server" --out "$root/$out") || status=$?
if grep -q "Traceback\|ERROR" "$log"; then
  echo "== the server's log has errors (first 40 lines of them) ==" >&2
  grep -n "Traceback\|ERROR" "$log" | head -40 >&2
fi
echo "vllm-load: $(( $(date +%s) - start )) s, summary in $out" >&2
exit $status
