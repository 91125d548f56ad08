#!/usr/bin/env bash
# Regenerates llama-server.patch from an edited copy of the pinned llama.cpp: the difference
# between the pristine sources scripts/llama-server.sh unpacks (.cache/llama-server/plain/llama.cpp)
# and EDITED (default: the patched copy it builds, .cache/llama-server/callmask/llama.cpp), leaving
# out the files that files/ adds whole. Edit the copy, run this, then scripts/llama-server.sh.
#
#   integrations/llama.cpp/make-patch.sh [EDITED]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=${CALLMASK_CACHE:-$here/../../.cache}/llama-server
edited=${1:-$base/callmask/llama.cpp}
excludes=()
while IFS= read -r f; do excludes+=(-x "$(basename "$f")"); done < <(cd "$here/files" && find . -type f)
cd "$base/plain"
# diff exits 1 when the trees differ (what we want); paths as a/ and b/, no timestamps.
{ diff -ruN "${excludes[@]}" llama.cpp "$edited" || [ $? -eq 1 ]; } \
  | sed -E -e "s#^diff -ruN .* llama\.cpp/([^ ]+) .*#diff -ruN a/\1 b/\1#" \
           -e "s#^--- llama\.cpp/([^\t]+)\t.*#--- a/\1#" \
           -e "s#^\+\+\+ $edited/([^\t]+)\t.*#+++ b/\1#" \
  > "$here/llama-server.patch"
echo "make-patch: $(grep -c '^diff ' "$here/llama-server.patch") files, $(grep -c '^[+-][^+-]' "$here/llama-server.patch") changed lines -> $here/llama-server.patch"
