#!/usr/bin/env bash
# The Python package's tests, as CI runs them (scripts/test.sh calls this): creates the venv
# (scripts/python-setup.sh: maturin, numpy, pytest, jsonschema, llguidance, llama-cpp-python
# built once from its sdist), builds the callmask wheel with maturin (abi3, the workspace's
# release target dir), installs it, builds the Rust reference-mask example, and runs pytest on
# crates/callmask-py/tests: masks vs the Rust matcher and llguidance's numpy helper (Llama 3.1,
# Qwen3), the API, the vLLM/SGLang call sequences, and llama-cpp-python end to end on Gemma 3
# 270M. The transformers test needs torch and runs from scripts/python-transformers.sh instead.
#
#   scripts/python-test.sh [pytest args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CALLMASK_CACHE=${CALLMASK_CACHE:-$root/.cache}
start=$(date +%s)

scripts/python-setup.sh
py=$(scripts/python-setup.sh --print-python)
venv_bin=$(dirname "$py")

rm -rf target/wheels/callmask-*.whl
"$venv_bin/maturin" build --release --quiet -m crates/callmask-py/Cargo.toml -o target/wheels
"$py" -m pip install --quiet --no-deps --force-reinstall target/wheels/callmask-*.whl
# With the whole workspace selected, so that features resolve as in `cargo test --workspace`
# and nothing but the example is compiled after it (`-p callmask-py` would build the core
# library again with other dependency features).
cargo build --release --quiet --workspace --example dump_masks

cd crates/callmask-py
"$py" -m pytest -q -p no:cacheprovider tests "$@"
# The package docstring's example, run against the installed wheel.
"$py" -c 'import callmask, doctest, sys; r = doctest.testmod(callmask); print(f"doctest: {r.attempted} examples, {r.failed} failed"); sys.exit(r.failed > 0 or r.attempted == 0)'
echo "python-test: $(( $(date +%s) - start )) s" >&2
