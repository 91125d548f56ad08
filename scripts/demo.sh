#!/usr/bin/env bash
# The main job on the bundled example: builds callmask, fetches the Llama 3.1 tokenizer, checks a
# valid and an invalid tool-call argument object against examples/weather.schema.json, then draws
# 20 random outputs from the token masks and validates each with the jsonschema crate.
#
#   scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.local/bin:$PATH"

scripts/setup.sh
scripts/fetch-data.sh tokenizers
cache=${CALLMASK_CACHE:-.cache}
tok=$cache/tokenizers/llama3_1-3.7.2/tokenizer.json
cargo build --release

# Echoes the command (with the input redirection given as $1), then runs it.
run() {
  local input=$1; shift
  echo "\$ cargo run --release -- $*${input:+ < $input}" >&2
  if [ -n "$input" ]; then cargo run --release -q -- "$@" < "$input"; else cargo run --release -q -- "$@"; fi
}

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
