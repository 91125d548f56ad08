#!/usr/bin/env bash
# llama.cpp's llama-server with callmask: requests with tools are sampled with callmask's grammar
# for the model's dialect (calls well-formed, schema-valid, finished within max_tokens) and their
# tool_calls parsed by callmask; everything else is llama.cpp's own.
#
#   scripts/llama-server.sh [--port PORT] [--plain] [--build-only] [llama-server arguments...]
#
# Fetches the pinned llama.cpp sources (the llama.cpp vendored in PyPI's llama-cpp-python 0.3.36
# sdist, llama.cpp commit 0c1e570; cached in .cache/llama-server/), applies
# integrations/llama.cpp/llama-server.patch and copies integrations/llama.cpp/files/ into them,
# builds libcallmask_c without its bundled llama.cpp (target/host-llama) and llama-server against
# it if not built yet (about 10 minutes the first time on two cores; ccache, where installed, makes
# rebuilds minutes), then runs it in the foreground on 127.0.0.1:PORT (default 8080). Without -m
# it serves the default Gemma 3 270M GGUF (scripts/fetch-data.sh gemma), whose chat template
# names no tool-call format, with --callmask-dialect hermes; give -m MODEL.gguf and the dialect is
# told from the model's chat template (or pass --callmask-dialect NAME). /health answers once the
# model is loaded.
#
#   --plain          build and run the same llama.cpp unpatched (for comparisons)
#   --build-only     build, print the binary's path, and exit
#   --prepare-only   fetch and patch the sources, print the patched tree's path, and exit
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${CALLMASK_CACHE:-$ROOT/.cache}
LCP_VERSION=0.3.36
LCP_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
BASE=$CACHE/llama-server
PATCH=$ROOT/integrations/llama.cpp/llama-server.patch
FILES=$ROOT/integrations/llama.cpp/files

port=8080
plain=0
build_only=0
prepare_only=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port=$2; shift 2 ;;
    --port=*) port=${1#--port=}; shift ;;
    --plain) plain=1; shift ;;
    --build-only) build_only=1; shift ;;
    --prepare-only) prepare_only=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

log() { echo "llama-server.sh: $*" >&2; }

# 1. The pinned sources, pristine, once.
mkdir -p "$BASE"
tarball=$BASE/llama_cpp_python-$LCP_VERSION.tar.gz
if [ ! -f "$tarball" ]; then
  log "fetching llama-cpp-python $LCP_VERSION's sdist from PyPI (llama.cpp sources)"
  python3 scripts/fetch-sdist.py llama-cpp-python "llama_cpp_python-$LCP_VERSION.tar.gz" "$tarball"
fi
echo "$LCP_SHA256  $tarball" | sha256sum -c --quiet - || { log "$tarball: checksum mismatch"; exit 1; }
if [ ! -f "$BASE/plain/llama.cpp/CMakeLists.txt" ]; then
  log "unpacking llama.cpp"
  rm -rf "$BASE/plain" "$BASE/unpack.tmp"
  mkdir -p "$BASE/unpack.tmp" "$BASE/plain"
  tar -xzf "$tarball" -C "$BASE/unpack.tmp" "llama_cpp_python-$LCP_VERSION/vendor/llama.cpp"
  mv "$BASE/unpack.tmp/llama_cpp_python-$LCP_VERSION/vendor/llama.cpp" "$BASE/plain/llama.cpp"
  rm -rf "$BASE/unpack.tmp" "$BASE/plain/llama.cpp/.git"  # a submodule link to nowhere
fi

# 2. The patched copy, remade whenever the patch or its files change.
stamp=$( (cat "$PATCH"; find "$FILES" -type f | sort | xargs cat) | sha256sum | cut -c1-16)
if [ "$plain" = 0 ] && [ "$(cat "$BASE/callmask/stamp" 2>/dev/null)" != "$stamp" ]; then
  log "applying integrations/llama.cpp/llama-server.patch"
  rm -rf "$BASE/callmask/llama.cpp"
  mkdir -p "$BASE/callmask"
  cp -a "$BASE/plain/llama.cpp" "$BASE/callmask/llama.cpp"
  patch --quiet -p1 -d "$BASE/callmask/llama.cpp" < "$PATCH"
  cp -r "$FILES"/. "$BASE/callmask/llama.cpp/"
  echo "$stamp" > "$BASE/callmask/stamp"
fi

if [ "$prepare_only" = 1 ]; then
  echo "$BASE/$([ "$plain" = 1 ] && echo plain || echo callmask)/llama.cpp"
  exit 0
fi

# 3. Build (incremental: a no-op when up to date).
flavour=$([ "$plain" = 1 ] && echo plain || echo callmask)
src=$BASE/$flavour/llama.cpp
build=$BASE/$flavour/build
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
  -DLLAMA_OPENSSL=OFF)
if [ "$plain" = 0 ]; then
  log "building libcallmask_c without its bundled llama.cpp (target/host-llama)"
  scripts/host-llama-lib.sh --alone "$ROOT/target/host-llama"
  cmake_args+=(-DLLAMA_CALLMASK_DIR="$ROOT" -DLLAMA_CALLMASK_LIB="$ROOT/target/host-llama/libcallmask_c.a")
fi
if command -v ccache >/dev/null; then
  # Both flavours share compiled objects: paths are made relative to $BASE.
  export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache} CCACHE_BASEDIR=$BASE CCACHE_NOHASHDIR=1
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  log "configuring $flavour llama.cpp"
  cmake -S "$src" -B "$build" "${cmake_args[@]}" > "$BASE/$flavour/cmake.log" 2>&1 \
    || { tail -30 "$BASE/$flavour/cmake.log" >&2; exit 1; }
fi
log "building $flavour llama-server (log: $BASE/$flavour/build.log)"
cmake --build "$build" --target llama-server -j "$(nproc)" > "$BASE/$flavour/build.log" 2>&1 \
  || { grep -E 'error|Error' "$BASE/$flavour/build.log" | head -30 >&2; exit 1; }
bin=$build/bin/llama-server
if [ "$build_only" = 1 ]; then
  echo "$bin"
  exit 0
fi

# 4. Run: the default model unless one is given.
has_model=0
has_dialect=0
for a in "${args[@]+"${args[@]}"}"; do
  case "$a" in
    -m|--model|--model=*|-hf|-hfr|--hf-repo|--hf-repo=*|--models-dir) has_model=1 ;;
    --callmask-dialect|--callmask-dialect=*) has_dialect=1 ;;
  esac
done
extra=()
if [ "$has_model" = 0 ]; then
  model=$(ls "$CACHE"/gemma-*/gemma-3-270m-q4_k_m.gguf 2>/dev/null | head -1 || true)
  if [ -z "$model" ]; then
    scripts/fetch-data.sh gemma >&2
    model=$(ls "$CACHE"/gemma-*/gemma-3-270m-q4_k_m.gguf | head -1)
  fi
  extra+=(-m "$model" -c 4096)
  if [ "$plain" = 0 ] && [ "$has_dialect" = 0 ]; then
    extra+=(--callmask-dialect hermes)  # Gemma 3's template names no tool-call format
  fi
fi
log "serving on http://127.0.0.1:$port ($flavour)"
exec "$bin" --host 127.0.0.1 --port "$port" "${extra[@]}" "${args[@]+"${args[@]}"}"
