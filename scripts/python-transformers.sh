#!/usr/bin/env bash
# The transformers end-to-end tests (crates/callmask-py/tests/test_transformers.py, and
# test_transformers_assisted.py: assisted generation, prompt lookup, beam search), too heavy for
# CI (torch): installs torch, transformers and tokenizers from PyPI into the Python test venv
# (scripts/python-setup.sh), then runs the tests with their output.
#
#   scripts/python-transformers.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CALLMASK_CACHE=${CALLMASK_CACHE:-$root/.cache}
scripts/python-test.sh -k 'not llama_cpp' >/dev/null  # venv + wheel
py=$(scripts/python-setup.sh --print-python)
"$py" -m pip install --quiet torch transformers tokenizers
cd crates/callmask-py
"$py" -m pytest -q -s -p no:cacheprovider tests/test_transformers.py tests/test_transformers_assisted.py
