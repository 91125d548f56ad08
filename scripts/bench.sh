#!/usr/bin/env bash
# The comparison suite (callmask vs llguidance vs XGrammar, same run): sets up XGrammar's venv
# (scripts/setup-xgrammar.sh, idempotent), then runs `cargo bench --bench suite`, which writes
# target/bench/results.json, BENCHMARKS.md and docs/bench/*.svg.
#
#   scripts/bench.sh                                   # everything (~35 minutes on 2 cores)
#   scripts/bench.sh --quick                           # a few minutes: the summary ratios only
#   CALLMASK_BENCH_VOCABS=llama CALLMASK_BENCH_WORKLOADS=tools_5 scripts/bench.sh
#
# Knobs (environment, see crates/callmask/benches/suite.rs): CALLMASK_BENCH_VOCABS, CALLMASK_BENCH_WORKLOADS,
# CALLMASK_BENCH_ENGINES, CALLMASK_BENCH_REPS, CALLMASK_BENCH_COMPILE, CALLMASK_BENCH_FUZZ_MS,
# CALLMASK_BENCH_WRITE_DOCS=0 (leave BENCHMARKS.md and the plots alone).
# --quick: Llama 3.1 only, a subset of the workloads (tools_1 in every form, tools_5 in the peer
# tool-calling formats, tools_100, 400 and 1000 in hermes/auto, tools_1000/functools, schema/weather), 3 passes and 3 compile trials,
# no fuzzing, XGrammar compiles cut at 2 s; prints the summary (geometric means of the ratios,
# the targets with their misses, each miss with its profile and the change it needs, the
# new-request table, the batch fill) and leaves BENCHMARKS.md alone. Each knob can still
# be set in the environment.
# SKIP_XGRAMMAR_SETUP=1 skips the venv step (the suite then reports XGrammar as not run if the
# venv is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
export CALLMASK_CACHE=${CALLMASK_CACHE:-$PWD/.cache}

if [ "${SKIP_XGRAMMAR_SETUP:-0}" != 1 ]; then
  if [ -x scripts/setup-xgrammar.sh ]; then
    scripts/setup-xgrammar.sh || echo "warning: XGrammar setup failed; the suite runs without it" >&2
  else
    echo "warning: scripts/setup-xgrammar.sh is missing; the suite runs without XGrammar" >&2
  fi
fi
if [ "${1:-}" = "--quick" ]; then
  shift
  export CALLMASK_BENCH_VOCABS=${CALLMASK_BENCH_VOCABS:-llama}
  export CALLMASK_BENCH_WORKLOADS=${CALLMASK_BENCH_WORKLOADS:-tools_1\$,tools_1/,tools_5/hermes,tools_5/llama31_json,tools_100/hermes/auto,tools_400/hermes/auto,tools_1000/hermes/auto,tools_1000/functools,schema/weather}
  export CALLMASK_BENCH_REPS=${CALLMASK_BENCH_REPS:-3}
  export CALLMASK_BENCH_COMPILE=${CALLMASK_BENCH_COMPILE:-3}
  export CALLMASK_BENCH_FUZZ_MS=${CALLMASK_BENCH_FUZZ_MS:-0}
  export CALLMASK_BENCH_BATCH_WORKLOADS=${CALLMASK_BENCH_BATCH_WORKLOADS:-tools_5/hermes/auto}
  export CALLMASK_XGRAMMAR_COMPILE_BUDGET_S=${CALLMASK_XGRAMMAR_COMPILE_BUDGET_S:-2}
  export CALLMASK_BENCH_SUMMARY_ONLY=1
  # Build first (errors shown), then run with the progress lines (stderr) in a log.
  cargo bench --bench suite --no-run -q
  mkdir -p target/bench
  log=target/bench/quick.log
  echo "bench.sh --quick: running (progress: $log) ..." >&2
  cargo bench -q --bench suite "$@" 2>"$log" || { tail -20 "$log" >&2; exit 1; }
  exit 0
fi
cargo bench --bench suite "$@"
