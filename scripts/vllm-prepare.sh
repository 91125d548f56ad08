#!/usr/bin/env bash
# What every vLLM script here starts with: the vLLM venv (scripts/vllm-setup.sh), this checkout's
# callmask wheel built and installed there, Qwen3's tokenizer, and the random-weight Qwen3 over it
# (${CALLMASK_CACHE:-.cache}/models/tiny-qwen3, scripts/engines/make_tiny_qwen3.py). Prints the
# venv's python on stdout (everything else goes to stderr).
#
#   py=$(scripts/vllm-prepare.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CALLMASK_CACHE=${CALLMASK_CACHE:-$root/.cache}
scripts/vllm-setup.sh >&2
py=$(scripts/vllm-setup.sh --print-python)
venv_bin=$(dirname "$py")
scripts/fetch-data.sh tokenizers >&2
rm -rf target/wheels-vllm
"$venv_bin/maturin" build --release --quiet -m crates/callmask-py/Cargo.toml -o target/wheels-vllm >&2
"$py" -m pip install --quiet --no-deps --force-reinstall target/wheels-vllm/callmask-*.whl >&2
model=$CALLMASK_CACHE/models/tiny-qwen3
[ -f "$model/model.safetensors" ] || "$py" scripts/engines/make_tiny_qwen3.py "$CALLMASK_CACHE/tokenizers/qwen3-3.7.2" "$model" >&2
echo "$py"
