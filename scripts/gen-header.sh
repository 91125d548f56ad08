#!/usr/bin/env bash
# Regenerates crates/callmask-c/include/callmask.h from crates/callmask-c/src/lib.rs with
# cbindgen (the library, through the header test). CI runs the same test without
# CALLMASK_BLESS and fails when the checked-in header is stale.
#
#   scripts/gen-header.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CALLMASK_BLESS=1 cargo test --release -p callmask-c --test header
git diff --stat -- crates/callmask-c/include/callmask.h
