#!/usr/bin/env bash
# The end-to-end tests on Gemma 3 270M at full size (CI runs a light version of each on SmolLM2;
# CALLMASK_E2E_MODEL=smollm2 runs this on it): all 20 prompts of
# crates/callmask-llama/tests/generate.rs in every seed dialect (CI: 8), then
# scripts/budget-e2e.sh (all 4 prompts of tests/budget.rs with the budget-off comparison; CI: 1
# prompt, no comparison). About 15 minutes on 2 cores.
#
#   scripts/llama-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CALLMASK_E2E_MODEL=${CALLMASK_E2E_MODEL:-gemma} CALLMASK_E2E_PROMPTS_PER_SET=10 cargo test --release --workspace --test generate -- --nocapture
scripts/budget-e2e.sh
