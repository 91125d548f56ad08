#!/usr/bin/env bash
# The SGLang backend against the real SGLang package from PyPI, on the CPU (no GPU needed):
#
# 1. a venv under ${CALLMASK_CACHE:-.cache}/venv-sglang with SGLang installed --no-deps plus only
#    what importing its server arguments, grammar backends, grammar manager, batch result
#    processor and function-call parsers needs (torch from PyPI, which runs on the CPU), all
#    pinned; cached: a marker file records the pins, so a second run installs nothing;
# 2. the callmask wheel built with maturin and installed there (its `sglang.srt.plugins` entry
#    point is what SGLang loads);
# 3. a tiny random Llama model directory with the Llama 3.1 tokenizer (ServerArgs reads a model
#    directory), made once;
# 4. pytest: tests/test_sglang_real.py (SGLang's own argument parser, backend registry,
#    FunctionCallParser tags, scheduler exception handling, reasoning wrapper, token budget
#    hook), tests/test_sglang.py (the scheduler call sequence, now over SGLang's base classes)
#    and tests/test_transformers_assisted.py (torch and transformers are there anyway);
# 5. with --server: tries `python -m sglang.launch_server ... --grammar-backend callmask` on the
#    CPU (SGLANG_USE_CPU_ENGINE=1) and a tools request, or reports how far it got. SGLang 0.5.23's
#    CPU engine imports `sgl_kernel` built for the CPU from SGLang's sources (PyPI's
#    sglang-kernel wheel is CUDA-only), so on a machine without that build the scheduler stops
#    at `ModuleNotFoundError: No module named 'sgl_kernel'` while loading the model, before any
#    request (without SGLANG_USE_CPU_ENGINE it stops at `No module named 'vllm'`, the rotary
#    embedding's fallback kernel).
#
#   scripts/sglang-check.sh [--server] [pytest args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CALLMASK_CACHE=${CALLMASK_CACHE:-$root/.cache}
work=${CALLMASK_SGLANG_DIR:-$root/.cache}  # venv, wheel and model (CALLMASK_CACHE may be read-only)
venv=$work/venv-sglang
py=$venv/bin/python
server=0
if [ "${1:-}" = "--server" ]; then server=1; shift; fi

sglang_version=0.5.23
pins=(
  "sglang==$sglang_version"
  torch==2.14.1 torchvision==0.29.2 transformers==5.19.0 tokenizers==0.23.2 xgrammar==0.2.7
  numpy pydantic fastapi orjson msgspec pyzmq psutil requests partial_json_parser regex
  openai==2.8.0 uvloop aiohttp pybase64 packaging setproctitle tqdm interegular einops pillow
  ipython dill sentencepiece compressed-tensors gguf uvicorn python-multipart soundfile
  pytest jsonschema maturin==1.16.0
)
marker=$venv/.callmask-pins
if ! { [ -x "$py" ] && [ -f "$marker" ] && [ "$(cat "$marker")" = "${pins[*]}" ]; }; then
  echo "sglang-check: installing SGLang $sglang_version and its import dependencies into $venv" >&2
  [ -x "$py" ] || python3 -m venv "$venv"
  "$py" -m pip install --quiet --upgrade pip
  "$py" -m pip install --quiet --no-deps "sglang==$sglang_version"
  # Everything but sglang with dependencies. pip then warns about SGLang's other (CUDA)
  # requirements, which are left out on purpose: its messages go to a log.
  if ! "$py" -m pip install --quiet "${pins[@]:1}" >"$venv/pip.log" 2>&1; then
    cat "$venv/pip.log" >&2
    exit 1
  fi
  echo "${pins[*]}" > "$marker"
fi

# The callmask wheel (abi3), built by maturin into the workspace's target dir.
wheels=$work/sglang-wheels
rm -rf "$wheels"
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target} "$venv/bin/maturin" build --release --quiet \
  -m crates/callmask-py/Cargo.toml -o "$wheels"
"$py" -m pip install --quiet --no-deps --force-reinstall "$wheels"/callmask-*.whl

# A tiny random Llama with the real Llama 3.1 tokenizer: what ServerArgs and the tokenizer read.
model=$work/sglang-tiny-llama
if [ ! -f "$model/model.safetensors" ]; then
  mkdir -p "$model"
  cp "$CALLMASK_CACHE/tokenizers/llama3_1-3.7.2/"tokenizer*.json "$model/"
  "$py" - "$model" <<'EOF'
import sys, torch, transformers
torch.manual_seed(0)
config = transformers.LlamaConfig(
    vocab_size=128256, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
    num_attention_heads=2, num_key_value_heads=1, head_dim=32, bos_token_id=128000,
    eos_token_id=[128001, 128008, 128009], max_position_embeddings=2048,
)
transformers.LlamaForCausalLM(config).save_pretrained(sys.argv[1])
EOF
fi
export CALLMASK_SGLANG_MODEL=$model

"$py" -c 'import sglang, torch, transformers, callmask; print(f"sglang {sglang.__version__}, torch {torch.__version__}, transformers {transformers.__version__}, callmask wheel {callmask.__file__}")'
cd crates/callmask-py
"$py" -m pytest -q -p no:cacheprovider -W ignore::UserWarning \
  tests/test_sglang_real.py tests/test_sglang.py tests/test_transformers_assisted.py "$@"
cd "$root"

if [ "$server" = 1 ]; then
  log=$work/sglang-server.log
  port=${SGLANG_PORT:-30123}
  echo "sglang-check: launching the server on the CPU (log: $log)" >&2
  cmd=("$py" -m sglang.launch_server --model-path "$model" --device cpu --grammar-backend callmask
    --tool-call-parser llama3 --port "$port" --mem-fraction-static 0.2)
  echo "+ SGLANG_USE_CPU_ENGINE=1 ${cmd[*]}" >&2
  SGLANG_USE_CPU_ENGINE=1 "${cmd[@]}" >"$log" 2>&1 &
  pid=$!
  up=0
  for _ in $(seq 1 120); do
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    if "$py" -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null; then
      up=1; break
    fi
    sleep 2
  done
  if [ "$up" = 1 ]; then
    "$py" - "$port" <<'EOF'
import json, sys, urllib.request
tools = json.load(open("examples/tools/weather.json"))
body = {"model": "m", "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "tools": tools, "tool_choice": "required", "max_tokens": 80}
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions",
                             json.dumps(body).encode(), {"Content-Type": "application/json"})
reply = json.load(urllib.request.urlopen(req, timeout=300))
print(json.dumps(reply["choices"][0], indent=1))
assert reply["choices"][0]["message"]["tool_calls"], "no tool call"
EOF
    kill "$pid"
  else
    kill "$pid" 2>/dev/null || true
    echo "sglang-check: the server did not start on this machine; last lines of $log:" >&2
    tail -n 25 "$log" >&2
    exit 2
  fi
fi
