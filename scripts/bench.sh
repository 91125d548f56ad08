#!/usr/bin/env bash
# The comparison suite (callmask vs llguidance vs XGrammar, same run): sets up XGrammar's venv
# (scripts/setup-xgrammar.sh, idempotent), then runs `cargo bench --bench suite`, which writes
# target/bench/results.json, BENCHMARKS.md and docs/bench/*.svg.
#
#   scripts/bench.sh                                   # everything (~15 minutes on 2 cores)
#   CALLMASK_BENCH_VOCABS=llama CALLMASK_BENCH_WORKLOADS=tools_5 scripts/bench.sh
#
# Knobs (environment, see crates/callmask/benches/suite.rs): CALLMASK_BENCH_VOCABS, CALLMASK_BENCH_WORKLOADS,
# CALLMASK_BENCH_ENGINES, CALLMASK_BENCH_REPS, CALLMASK_BENCH_COMPILE, CALLMASK_BENCH_FUZZ_MS,
# CALLMASK_BENCH_WRITE_DOCS=0 (leave BENCHMARKS.md and the plots alone).
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
cargo bench --bench suite "$@"
