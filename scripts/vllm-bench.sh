#!/usr/bin/env bash
# callmask's price inside a real vLLM engine (not a CI test; results go in BENCHMARKS.md):
# one engine (vllm-cpu, one process: VLLM_ENABLE_V1_MULTIPROCESSING=0) over the small random
# Qwen3 of scripts/vllm-e2e.sh (the real Qwen3 vocabulary, 151,936 logits) serves the same
# batches unconstrained, with vLLM's own structured outputs (XGrammar) and with callmask's
# logits processor, interleaved in one run (scripts/engines/vllm_bench.py); then the apply
# kernels alone on the same logits shapes (scripts/engines/apply_bench.py: callmask's native
# apply, the torch ops it replaced, XGrammar's CPU kernel, the SGLang backend's
# apply_vocab_mask and the transformers processor).
#
#   scripts/vllm-bench.sh [vllm_bench.py args...]     e.g. --batches 16,64 --tools 5 --reps 1
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CALLMASK_CACHE=${CALLMASK_CACHE:-$root/.cache}
scripts/vllm-setup.sh
py=$(scripts/vllm-setup.sh --print-python)
venv_bin=$(dirname "$py")
scripts/fetch-data.sh tokenizers
rm -rf target/wheels-vllm
"$venv_bin/maturin" build --release --quiet -m crates/callmask-py/Cargo.toml -o target/wheels-vllm
"$py" -m pip install --quiet --no-deps --force-reinstall target/wheels-vllm/callmask-*.whl
model=$CALLMASK_CACHE/models/tiny-qwen3
[ -f "$model/model.safetensors" ] || "$py" scripts/engines/make_tiny_qwen3.py "$CALLMASK_CACHE/tokenizers/qwen3-3.7.2" "$model"
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-4} VLLM_ENABLE_V1_MULTIPROCESSING=0 PYTHONUNBUFFERED=1
echo "== vllm-bench: apply kernels on the engine's logits shapes ==" >&2
"$py" scripts/engines/apply_bench.py "$CALLMASK_CACHE/tokenizers/qwen3-3.7.2/tokenizer.json"
echo "== vllm-bench: vLLM, three ways in one engine ==" >&2
"$py" scripts/engines/vllm_bench.py "$model" --json "$CALLMASK_CACHE/vllm-bench.json" "$@"
