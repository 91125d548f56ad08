#!/usr/bin/env bash
# Builds libcallmask_c without its bundled llama.cpp (callmask-c without the `bundled-llama`
# feature: for programs that bring their own llama.cpp, such as llama-server) and copies it to
# DIR/libcallmask_c.a. Used by scripts/host-llama-test.sh, scripts/llama-server-check.sh and
# scripts/llama-server.sh.
#
# Built in the workspace's target folder with the feature set `cargo test --workspace` resolves
# (every member and its dev-dependencies, every other member's default features), so that only
# callmask-c itself is compiled again: a `cargo build -p callmask-c` would resolve the shared
# dependencies' features differently (no dev-dependencies) and compile the core library and its
# dependencies a second time (minutes on two cores). The feature list below must name the default
# features of every workspace member but callmask-c. It leaves this variant as
# target/release/libcallmask_c.a (the next workspace build compiles callmask-c back, seconds). With --alone, builds only callmask-c and
# what it needs, in DIR (faster when the workspace has not been built, as for a first
# scripts/llama-server.sh).
#
#   scripts/host-llama-lib.sh [--alone] DIR
set -euo pipefail
cd "$(dirname "$0")/.."
alone=0
if [ "${1:-}" = "--alone" ]; then alone=1; shift; fi
dir=${1:?usage: scripts/host-llama-lib.sh [--alone] DIR}
mkdir -p "$dir"
if [ "$alone" = 1 ]; then
  cargo build --release --quiet -p callmask-c --no-default-features --target-dir "$dir"
  cp "$dir/release/libcallmask_c.a" "$dir/libcallmask_c.a"
else
  cargo build --release --quiet --workspace --lib --examples --no-default-features \
    --features callmask/fuzz,callmask-cli/llama
  cp target/release/libcallmask_c.a "$dir/libcallmask_c.a"
fi
