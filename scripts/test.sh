#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, fetches the real data (cached in
# .cache/, so a second run fetches nothing), then format, lints and every test, all in the release
# profile (the tests' artefacts are the benchmarks' too). `cargo test` includes the C API's
# tests (crates/callmask-c: header freshness, tests/c/*.c compiled with cc and run, one under
# valgrind, one generating with llama.cpp; see docs/embedding.md). Then the Python package's tests
# (scripts/python-test.sh: its venv, llama-cpp-python wheel and callmask wheel cached in .cache/).
#
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.local/bin:$PATH"

scripts/setup.sh
scripts/fetch-data.sh
# The Python test venv, with llama-cpp-python built from its sdist on a machine whose cache lacks
# its wheel (about 4 minutes of two cores), is set up in the background at the lowest CPU
# priority: it takes the cycles the Rust builds and tests leave idle and is waited for before the
# Python tests. Its output goes to target/python-setup.log, shown if it fails.
mkdir -p target
nice -n 19 scripts/python-setup.sh > target/python-setup.log 2>&1 &
python_setup=$!
cargo fmt --check
# The core library stays free of CLI, download and llama.cpp dependencies.
if cargo tree -p callmask -e normal --prefix none | grep -E '^(clap|indicatif|ureq|zip|sha2|llama-cpp-2|llama-cpp-sys-2) '; then
  echo "test.sh: the core crate depends on a crate it must not (above)" >&2
  exit 1
fi
cargo clippy --release --workspace --all-targets -- -D warnings
# The token-budget fuzz property at CI scale: 5,040 random walks under random budgets across the
# dialects, with the distinct-calls rule on (crates/callmask/tests/core/budget.rs); scale 1 (100,800)
# with CALLMASK_BUDGET_FUZZ_SCALE=1, a million in scripts/fuzz-all.sh.
export CALLMASK_BUDGET_FUZZ_SCALE=${CALLMASK_BUDGET_FUZZ_SCALE:-0.05}
cargo test --release --workspace
# The C API for programs with their own llama.cpp: libcallmask_c without the bundled llama.cpp and
# llama/callmask_llama.cpp on a separate llama.cpp build (about 3 minutes).
scripts/host-llama-test.sh
# llama.cpp's server with callmask, light: the patch applies to the pinned sources and its files
# compile (scripts/llama-server-e2e.sh builds and runs the server; see docs/engines.md).
scripts/llama-server-check.sh
if ! wait "$python_setup"; then
  cat target/python-setup.log >&2
  echo "test.sh: scripts/python-setup.sh failed (above)" >&2
  exit 1
fi
cat target/python-setup.log
scripts/python-test.sh
