#!/usr/bin/env bash
# Fuzzes every built-in dialect (two tool sets, tool_choice auto and required, Llama 3.1 and
# Gemma 3 vocabularies) and every benchmark JSON schema with `callmask fuzz`: each output parsed
# and its arguments validated with the jsonschema crate. Stops at the first violation (the
# reproducer is written to target/fuzz-all/repro-*.json) and exits non-zero.
#
#   scripts/fuzz-all.sh [SCALE]     SCALE=1 (default): 1,440,000 outputs; 0.01: a quick pass
#   CALLMASK_BIN=path/to/callmask scripts/fuzz-all.sh    (use a binary already built)
#
# Needs the data of scripts/fetch-data.sh; prints one summary block per run and a total.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scale=${1:-1}
cache=${CALLMASK_CACHE:-$root/.cache}
llama="$cache/tokenizers/llama3_1-3.7.2/tokenizer.json"
gemma="$cache/gemma-1.0.0/gemma-3-270m-q4_k_m.gguf"
out=target/fuzz-all
mkdir -p "$out"
bin=${CALLMASK_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet
  bin=target/release/callmask
fi
n() { python3 -c "import sys; print(max(1, int(float(sys.argv[1]) * float(sys.argv[2]))))" "$1" "$scale"; }

total=0
run() { # name count args...
  local name=$1 count=$2; shift 2
  echo "== $name ($count outputs)"
  "$bin" fuzz "$@" -n "$count" --seed 1 --repro "$out/repro-$name.json" 2>&1 | sed 's/^/   /'
  total=$((total + count))
}

for d in empower functools pythonic inline hermes llama31_json; do
  run "$d-mixed-auto" "$(n 60000)" --dialect "$d" --tools examples/tools/mixed.json --tokenizer "$llama"
  run "$d-mixed-required" "$(n 40000)" --dialect "$d" --tools examples/tools/mixed.json --tokenizer "$llama" --tool-choice required
  run "$d-weather-auto" "$(n 30000)" --dialect "$d" --tools examples/tools/weather.json --tokenizer "$llama"
  run "$d-mixed-gemma" "$(n 20000)" --dialect "$d" --tools examples/tools/mixed.json --model "$gemma"
done
# The model-family dialects, each on its family's tokenizer where npm has one.
for d in qwen3 qwen3_coder qwen35 llama31 llama4 mistral deepseek_r1 deepseek_v31 kimi_k2 glm45 \
         minimax_m2 gpt_oss command_r7b functionary_v32 granite; do
  case "$d" in
    qwen3|qwen3_coder|qwen35|glm45|minimax_m2) tok="$cache/tokenizers/qwen3-3.7.2/tokenizer.json" ;;
    deepseek_r1|deepseek_v31) tok="$cache/tokenizers/deepseek_v3-3.7.2/tokenizer.json" ;;
    gpt_oss) tok="$cache/tokenizers/gptoss-3.7.2/tokenizer.json" ;;
    *) tok="$llama" ;;
  esac
  run "$d-mixed-auto" "$(n 20000)" --dialect "$d" --tools examples/tools/mixed.json --tokenizer "$tok"
  run "$d-mixed-required" "$(n 10000)" --dialect "$d" --tools examples/tools/mixed.json --tokenizer "$tok" --tool-choice required
done
for s in crates/callmask/benches/schemas/*.schema.json; do
  name=$(basename "$s" .schema.json)
  run "schema-$name" "$(n 10000)" --schema "$s" --tokenizer "$llama"
done
echo "fuzz-all: $total outputs, 0 violations"

# Token budgets: random walks under random budgets (crates/callmask/tests/core/budget.rs), every output
# must end valid within its budget. BUDGET_SCALE=10 (default) draws 1,008,000 outputs (CI runs
# scale 1: 100,800).
echo "== budget fuzz"
CALLMASK_BUDGET_FUZZ_SCALE=${BUDGET_SCALE:-10} cargo test --release -p callmask --test core \
  budget::random_walks -- --nocapture 2>&1 | grep -E "budget fuzz|test result|panicked" | sed 's/^/   /'
