#!/usr/bin/env bash
# Installs XGrammar (PyPI `xgrammar`, CPU) into a git-ignored venv so that scripts/bench_xgrammar.py
# can run it as a benchmark peer of callmask. Idempotent: a marker file records the pinned set,
# and a second run with the same pins does nothing.
#
#   scripts/setup-xgrammar.sh            # venv at ${CALLMASK_CACHE:-.cache}/venv-xgrammar
#   "$(scripts/setup-xgrammar.sh --print-python)" scripts/bench_xgrammar.py input.json
#
# Why --no-deps: xgrammar's metadata requires torch, transformers and triton, and PyPI's Linux
# x86_64 torch wheel is the CUDA build (~540 MB, plus several GB of nvidia-* wheels); PyPI has no
# CPU-only torch wheel. XGrammar's compiler and matcher are C++ behind apache-tvm-ffi and take any
# DLPack array (numpy) as the bitmask: torch and transformers are only *imported* by its Python
# wrappers (for module-level dtype constants, type annotations and the HF helpers). The benchmark
# script installs tiny stand-ins for those two modules when they are absent (see its docstring),
# so the venv holds only what the measured code path really uses. Every package is pinned and
# installed with --no-deps, so no resolver can pull torch in.
#
# Needs python3 (>= 3.9) with the venv module, and PyPI. Python 3.11 on x86_64 gets binary wheels.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${CALLMASK_CACHE:-$root/.cache}
venv=$cache/venv-xgrammar
py=$venv/bin/python

if [ "${1:-}" = "--print-python" ]; then
  echo "$py"
  exit 0
fi

# The measured engine and what its import really needs at run time; tokenizers only for
# scripts/xgrammar_input_from_hf.py (reads a tokenizer.json, no hub access).
pins=(
  xgrammar==0.2.8
  apache-tvm-ffi==0.1.15.post2
  numpy==2.4.6
  pydantic==2.14.3
  pydantic-core==2.50.4
  annotated-types==0.8.0
  typing-inspection==0.4.5
  typing-extensions==4.16.0
  tokenizers==0.23.3
)
marker=$venv/.callmask-xgrammar-installed
want=$(printf '%s\n' "${pins[@]}")

if [ -x "$py" ] && [ -f "$marker" ] && [ "$(cat "$marker")" = "$want" ]; then
  exit 0
fi

start=$(date +%s)
if [ ! -x "$py" ]; then
  mkdir -p "$cache"
  python3 -m venv "$venv"
fi
rm -f "$marker"
"$py" -m pip install --quiet --disable-pip-version-check --no-deps "${pins[@]}"
# Smoke test: the engine imports and compiles a schema against a two-token raw vocabulary.
"$py" "$root/scripts/bench_xgrammar.py" --self-check
printf '%s\n' "$want" >"$marker"
echo "setup-xgrammar: installed into $venv in $(($(date +%s) - start)) s ($(du -sh "$venv" | cut -f1))" >&2
