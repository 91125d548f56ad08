#!/usr/bin/env bash
# The C API in the build for programs that bring their own llama.cpp, tested as such a program
# uses it: libcallmask_c built without its bundled llama.cpp (`--no-default-features`; the test
# fails if it defines any llama_/ggml_ symbol), crates/callmask-c/llama/callmask_llama.cpp
# compiled against a separate llama.cpp's llama.h (here the one llama-cpp-sys-2 built for the
# workspace, standing in for the host's), and tests/c/llama_generate.c linked against that
# llama.cpp's own static libraries: it loads the default Gemma 3 270M GGUF with llama.cpp, reads
# the vocabulary through callmask_vocab_from_llama_vocab, samples constrained tool calls with
# callmask's sampler first in a llama.cpp chain, and parses them (3 generations).
#
#   scripts/host-llama-test.sh        (after `cargo test --release --workspace`, as CI runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CALLMASK_CACHE:-$PWD/.cache}
MODEL=$CACHE/gemma-1.0.0/gemma-3-270m-q4_k_m.gguf
[ -f "$MODEL" ] || { echo "host-llama-test: $MODEL missing: run scripts/fetch-data.sh gemma" >&2; exit 1; }

# The library without llama.cpp.
TARGET=target/host-llama
scripts/host-llama-lib.sh "$TARGET"
LIB=$TARGET/libcallmask_c.a
if nm -g --defined-only "$LIB" 2>/dev/null | grep -E ' [TDB] (llama_|ggml_|gguf_)' | head -5 | grep .; then
  echo "host-llama-test: $LIB defines llama.cpp symbols (above)" >&2
  exit 1
fi

# The "host" llama.cpp: llama-cpp-sys-2's build in the workspace target folder.
HOST=
for d in target/release/build/llama-cpp-sys-2-*/out; do
  if [ -f "$d/include/llama.h" ] && [ -f "$d/lib/libllama.a" ]; then HOST=$d; fi
done
[ -n "$HOST" ] || { echo "host-llama-test: no llama.cpp build under target/release (run cargo build --release first)" >&2; exit 1; }

OUT=$TARGET/c-tests
mkdir -p "$OUT"
CXX=${CXX:-c++}
CC=${CC:-cc}
$CXX -std=c++17 -O2 -Wall -Wextra -Werror -I crates/callmask-c/include -I "$HOST/include" \
  -c crates/callmask-c/llama/callmask_llama.cpp -o "$OUT/callmask_llama.o"
$CC -std=c11 -D_POSIX_C_SOURCE=200809L -O1 -Wall -Wextra -Werror -I crates/callmask-c/include -I "$HOST/include" \
  -c crates/callmask-c/tests/c/llama_generate.c -o "$OUT/llama_generate.o"
# The host's libraries; -fopenmp where its ggml-cpu was built with OpenMP.
OMP=
if nm "$HOST/lib/libggml-cpu.a" 2>/dev/null | grep -q ' U GOMP_'; then OMP=-fopenmp; fi
$CXX -o "$OUT/llama_generate" "$OUT/llama_generate.o" "$OUT/callmask_llama.o" "$LIB" \
  "$HOST/lib/libllama.a" "$HOST/lib/libggml.a" "$HOST/lib/libggml-cpu.a" "$HOST/lib/libggml-base.a" \
  $OMP -lpthread -ldl -lm
LOG=$OUT/llama_generate.log
"$OUT/llama_generate" "$MODEL" examples/tools/weather.json | tee "$LOG"
grep -q "all generations finished, parsed and called" "$LOG"
calls=$(grep -o '"tool_calls":\[{' "$LOG" | wc -l)
[ "$calls" -eq 3 ] || { echo "host-llama-test: expected 3 parsed tool_calls, found $calls" >&2; exit 1; }
echo "host-llama-test: ok (libcallmask_c without llama.cpp + callmask_llama.cpp on the host's llama.cpp)"
