#!/usr/bin/env bash
# The transformers end-to-end test (crates/callmask-py/tests/test_transformers.py), too heavy for
# CI (torch): installs torch, transformers and tokenizers from PyPI into the Python test venv
# (scripts/python-setup.sh), then runs the test with its output.
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
"$py" -m pytest -q -s -p no:cacheprovider tests/test_transformers.py
