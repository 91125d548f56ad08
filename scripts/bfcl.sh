#!/usr/bin/env bash
# Tool-call accuracy on BFCL v4 (not a CI test): the first N questions of each single-turn
# category (simple, multiple, parallel, parallel_multiple, their live_ versions, irrelevance,
# live_irrelevance) through `callmask generate` on the default model (SmolLM2-135M-Instruct Q4_1,
# its own tool prompt and the smollm2 dialect; `--model gemma --dialect hermes` for Gemma 3 270M),
# tool_choice auto, greedy, once with the constraint and once without it; scored with BFCL's AST
# rules (scripts/bfcl.py, which says how). The checker's self-test runs first. The questions come
# from the PyPI wheel of bfcl-eval (pinned version and sha256), fetched once into
# ${CALLMASK_CACHE:-.cache}/bfcl-eval-VERSION/. Each run is a line of OUT/results.jsonl; the table
# is printed and written to OUT/report.md (OUT: --out, default target/bfcl/);
# `scripts/bfcl.py --rescore` scores saved results again. The default, 20 questions x 10
# categories x 2 modes, is about 390 generations of 2-6 s each with SmolLM2 (10-40 s with Gemma)
# on 2 cores: --max-minutes bounds a run (questions go round robin over the categories), --resume
# continues one.
#
#   scripts/bfcl.sh [--limit 20] [--offset 0] [--categories simple,parallel,...] [--dialect smollm2]
#                   [--model smollm2|gemma|GGUF]
#                   [--max-tokens 256] [--threads N] [--timeout 300] [--out DIR] [--resume]
#                   [--max-minutes M] [--modes constrained,unconstrained]
#                   [--generate-args='--no-parallel-calls --max-text 100']
#
# The binary: $CALLMASK_BIN, else target/release/callmask (`cargo build --release -p
# callmask-cli`), else `callmask` on the PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
export CALLMASK_CACHE=${CALLMASK_CACHE:-$PWD/.cache}

bin=${CALLMASK_BIN:-}
if [ -z "$bin" ]; then
  if [ -x target/release/callmask ]; then
    bin=target/release/callmask
  elif command -v callmask >/dev/null; then
    bin=$(command -v callmask)
  else
    echo "bfcl.sh: no callmask binary: set CALLMASK_BIN or run cargo build --release -p callmask-cli" >&2
    exit 2
  fi
fi

python3 scripts/bfcl.py --self-test
exec python3 scripts/bfcl.py --callmask "$bin" --threads "$(nproc)" "$@"
