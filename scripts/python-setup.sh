#!/usr/bin/env bash
# Creates the Python test venv (git-ignored, under ${CALLMASK_CACHE:-.cache}/venv-python) with
# everything the Python package's build and tests need, all from PyPI with pinned versions:
# maturin (builds the callmask wheel), numpy, pytest, jsonschema (validates generated
# arguments), llguidance (a second implementation of the int32 bitmask layout, checked against
# ours) and llama-cpp-python (end-to-end test).
#
# llama-cpp-python ships on PyPI as an sdist that compiles llama.cpp with cmake (minutes on two
# cores): it is built once into a wheel kept in ${CALLMASK_CACHE}/wheels/llama-cpp-python-VERSION-portable/,
# so a second run (or a new venv) reuses that wheel. Idempotent: a marker file records the pins.
#
#   scripts/python-setup.sh                  # creates or updates the venv
#   scripts/python-setup.sh --print-python   # prints the venv's python
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${CALLMASK_CACHE:-$root/.cache}
venv=$cache/venv-python
py=$venv/bin/python

if [ "${1:-}" = "--print-python" ]; then
  echo "$py"
  exit 0
fi

llama_cpp_version=0.3.36
pins=(
  maturin==1.16.0
  numpy==2.4.6
  pytest==9.2.0
  jsonschema==4.26.0
  llguidance==1.9.1
  # llama-cpp-python's run-time dependencies (its wheel is installed with --no-deps below)
  typing-extensions==4.16.0
  diskcache==5.6.3
  jinja2==3.1.6
  markupsafe==3.0.4
)
marker=$venv/.callmask-pins
want="${pins[*]} llama-cpp-python==$llama_cpp_version portable"
if [ -x "$py" ] && [ -f "$marker" ] && [ "$(cat "$marker")" = "$want" ]; then
  exit 0
fi

command -v python3 >/dev/null || { echo "python-setup: python3 missing (scripts/setup.sh)" >&2; exit 1; }
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  echo "python-setup: the venv module is missing: apt-get install python3-venv" >&2
  exit 1
fi
[ -x "$py" ] || python3 -m venv "$venv"
"$py" -m pip install --quiet --upgrade pip
"$py" -m pip install --quiet "${pins[@]}"

# llama-cpp-python: build the wheel once, keyed by version.
# (-portable: built without GGML_NATIVE; an older native wheel in the cache is not reused.)
wheels=$cache/wheels/llama-cpp-python-$llama_cpp_version-portable
if ! ls "$wheels"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "python-setup: building llama-cpp-python $llama_cpp_version from its sdist (once; minutes)" >&2
  start=$(date +%s)
  mkdir -p "$wheels.tmp"
  # Only the shared libraries the bindings load: no llama.cpp tools, examples, tests or server,
  # no multimodal (mtmd) library. Not GGML_NATIVE: on an Intel machine whose CPU flags list AMX
  # and AVX-512 FP16, a -march=native build died with "Illegal instruction" in its first eval,
  # and a wheel cached in .cache/ must also run on the next machine's CPU.
  CMAKE_ARGS="${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF}" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    "$py" -m pip wheel --no-cache-dir --no-deps --no-binary llama-cpp-python -w "$wheels.tmp" \
    "llama-cpp-python==$llama_cpp_version"
  rm -rf "$wheels" && mv "$wheels.tmp" "$wheels"
  echo "python-setup: llama-cpp-python wheel built in $(( $(date +%s) - start )) s" >&2
fi
"$py" -m pip install --quiet --no-deps --force-reinstall "$wheels"/llama_cpp_python-*.whl
echo "$want" > "$marker"
