#!/usr/bin/env bash
# CI's light check of the llama-server integration (building the whole server takes about 10
# minutes on two cores; scripts/llama-server-e2e.sh does that and runs it): the patch applies to
# the pinned llama.cpp sources, the patched tree configures with CMake against callmask, and
# every file the patch touches or adds compiles (-fsyntax-only, with the flags CMake gives it),
# together with crates/callmask-c/llama/callmask_llama.cpp against that llama.cpp's llama.h.
#
#   scripts/llama-server-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
src=$(scripts/llama-server.sh --prepare-only)
build=$ROOT/target/llama-server-check
rm -rf "$build"
mkdir -p "$build"
scripts/host-llama-lib.sh "$ROOT/target/host-llama"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DCMAKE_UNITY_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_CALLMASK_DIR="$ROOT" -DLLAMA_CALLMASK_LIB="$ROOT/target/host-llama/libcallmask_c.a" \
  > "$build/cmake.log" 2>&1 || { tail -30 "$build/cmake.log" >&2; exit 1; }
files=$(grep '^+++ b/' integrations/llama.cpp/llama-server.patch | sed 's#^+++ b/##' | grep '\.cpp$')
files="$files $(cd integrations/llama.cpp/files && find . -name '*.cpp' | sed 's#^\./##')"
python3 - "$build/compile_commands.json" "$src" "$ROOT/crates/callmask-c/llama/callmask_llama.cpp" $files <<'PY'
import json, shlex, subprocess, sys
db, src, glue, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
entries = {e["file"]: e for e in json.load(open(db))}
wanted = [f"{src}/{f}" for f in files] + [glue]
failed = 0
for path in wanted:
    e = entries.get(path)
    if e is None:
        print(f"llama-server-check: {path} is in no CMake target", file=sys.stderr)
        failed += 1
        continue
    args = shlex.split(e["command"]) if "command" in e else e["arguments"]
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c":
            continue
        out.append(a)
    r = subprocess.run(out + ["-fsyntax-only"], cwd=e["directory"], capture_output=True, text=True)
    status = "ok" if r.returncode == 0 else "FAILED"
    print(f"llama-server-check: {status} {path.replace(src + '/', '')}")
    if r.returncode != 0:
        print(r.stderr[-3000:], file=sys.stderr)
        failed += 1
sys.exit(1 if failed else 0)
PY
echo "llama-server-check: the patch applies and its files compile"
