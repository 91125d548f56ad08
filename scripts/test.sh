#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, fetches the real data (cached in
# .cache/, so a second run fetches nothing), then format, lints and every test, all in the release
# profile (the tests' artefacts are the benchmarks' too), then the Python package's tests
# (scripts/python-test.sh: its venv, llama-cpp-python wheel and callmask wheel cached in .cache/).
#
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.local/bin:$PATH"

scripts/setup.sh
scripts/fetch-data.sh
cargo fmt --check
cargo clippy --release --all-targets -- -D warnings
cargo test --release
scripts/python-test.sh
