#!/usr/bin/env bash
# The first GPU run, prepared (scripts/engines/gpu_check.py: the CUDA apply against a CPU
# reference, the apply alone at batches 1-4,096, transformers generate with callmask's processor
# on a random-weight Qwen3-shaped model over the real Qwen3 vocabulary). Three ways:
#
#   scripts/gpu-check.sh             # here: builds what travels into target/gpu-carry/ (the abi3
#                                    # wheel, Qwen3's tokenizer.json) and prints the device command
#   scripts/gpu-check.sh --device    # on the GPU machine (one command, under 8 minutes): installs
#                                    # the carried wheel without network, runs the check, writes
#                                    # $OUT/gpu-check.json (and its log beside it)
#   scripts/gpu-check.sh --dry-run   # here: the same steps on the CPU at small sizes, with a
#                                    # Python that has torch and transformers (CALLMASK_GPU_PY,
#                                    # else the vLLM venv's: scripts/vllm-prepare.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CALLMASK_CACHE=${CALLMASK_CACHE:-$root/.cache}
carry=target/gpu-carry
mode=${1:-prepare}

case "$mode" in
prepare)
  scripts/fetch-data.sh tokenizers
  rm -rf "$carry" && mkdir -p "$carry"
  py=$(scripts/python-setup.sh --print-python 2>/dev/null || true)
  maturin=$(dirname "${py:-/nonexistent}")/maturin
  [ -x "$maturin" ] || maturin=maturin
  "$maturin" build --release --quiet -m crates/callmask-py/Cargo.toml -o "$carry"
  cp "$CALLMASK_CACHE/tokenizers/qwen3-3.7.2/tokenizer.json" "$carry/qwen3-tokenizer.json"
  # XGrammar (its fused apply kernel and its transformers processor, the peer in the generate
  # step) and the one dependency of it that a bare torch + transformers machine lacks, as
  # wheels; missing on the device, the check runs without the peer and says so.
  # The device's Python version is not known here: one wheel set per likely version (~4 MB each).
  mkdir -p "$carry/peer"
  for pyv in 3.10 3.11 3.12 3.13; do
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$pyv" \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d "$carry/peer" xgrammar==0.2.8 pydantic==2.14.4 pydantic-core==2.50.5 \
      typing-inspection==0.4.5 annotated-types==0.8.0 \
      || echo "gpu-check: XGrammar's wheels for Python $pyv not fetched; there the device run skips the peer" >&2
  done
  du -sh "$carry" >&2
  echo "device command (the run tool, carry [\"$carry\"], timeout_s 540):" >&2
  echo "  bash scripts/gpu-check.sh --device"
  ;;
--device)
  out=${OUT:-target/gpu-out}
  mkdir -p "$out"
  site=$(mktemp -d)
  python -m pip install --quiet --no-deps --no-index --target "$site" "$carry"/callmask-*.whl
  # The peer where its wheels came along and the device has no copy of its own.
  if ! python -c "import xgrammar" 2>/dev/null && ls "$carry"/peer/xgrammar-*.whl >/dev/null 2>&1; then
    python -m pip install --quiet --no-deps --no-index --find-links "$carry/peer" --target "$site" \
      xgrammar pydantic pydantic-core typing-inspection annotated-types || true
  fi
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
  timeout 470 python scripts/engines/gpu_check.py --tokenizer "$carry/qwen3-tokenizer.json" \
    --out "$out/gpu-check.json" 2>&1 | tee "$out/gpu-check.log"
  ;;
--dry-run)
  scripts/fetch-data.sh tokenizers
  py=${CALLMASK_GPU_PY:-}
  if [ -z "$py" ]; then
    py=$(scripts/vllm-prepare.sh)
  fi
  mkdir -p target
  "$py" scripts/engines/gpu_check.py --dry-run \
    --tokenizer "$CALLMASK_CACHE/tokenizers/qwen3-3.7.2/tokenizer.json" --out target/gpu-check-dry.json
  ;;
*)
  echo "usage: scripts/gpu-check.sh [--device | --dry-run]" >&2
  exit 2
  ;;
esac
