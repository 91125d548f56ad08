#!/usr/bin/env bash
# The token budget end to end on Gemma 3 270M, all prompts of
# crates/callmask-llama/tests/budget.rs (CI runs 1 of them, without the comparison): 4 prompts x
# 4 dialects x (required, named) x max_tokens (64, 200) = 64 generations, and each max_tokens 200
# one again with the budget off for comparison (32 more); a few minutes on 2 cores.
#
#   scripts/budget-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CALLMASK_E2E_MODEL=${CALLMASK_E2E_MODEL:-gemma} CALLMASK_BUDGET_E2E_PROMPTS=4 CALLMASK_BUDGET_E2E_COMPARE=1 \
  cargo test --release --workspace --test budget -- --nocapture
