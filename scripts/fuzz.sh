#!/usr/bin/env bash
# Runs callmask's cargo-fuzz targets for a bounded time each (not run in CI by default).
#
# Usage: scripts/fuzz.sh [target] [seconds]
#   target   schema_compile | dialect_file | matcher_tokens | output_parser | all (default: all)
#   seconds  fuzzing time per target (default: 300)
#
# Installs cargo-fuzz if it is missing. Works on the stable toolchain: cargo-fuzz passes a few
# `-Z` flags to rustc, which RUSTC_BOOTSTRAP=1 allows, and the sanitizer is off (`-s none`:
# AddressSanitizer needs a nightly std; callmask has no unsafe code outside the llama feature,
# which the fuzz crate does not enable). Targets run one at a time, each in one process (no
# `-jobs`: with it libFuzzer forks workers that log to files).
# Crashes land in fuzz/artifacts/<target>/; the corpus grows in fuzz/corpus/<target>/ (seeded
# from fuzz/regressions/<target>/). Add each fixed crash to fuzz/regressions/<target>/:
# `cargo test --release -p callmask --test core fuzz_regressions::` replays them.
# A unit slower than 120 s counts as a hang (-timeout=120: instrumented builds are several
# times slower than release, and the compile-time limit is checked between lexemes).
# Extra environment: FUZZ_ARGS (more libFuzzer flags, e.g. "-max_len=8192").
set -euo pipefail

target="${1:-all}"
seconds="${2:-300}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install cargo-fuzz
fi

export RUSTC_BOOTSTRAP=1
targets=(schema_compile dialect_file matcher_tokens output_parser)
if [[ "$target" != all ]]; then
    targets=("$target")
fi

status=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    echo "== $t: ${seconds}s" >&2
    # shellcheck disable=SC2086
    cargo fuzz run -s none --codegen-units 16 "$t" "corpus/$t" "regressions/$t" -- \
        -max_total_time="$seconds" -timeout=120 -rss_limit_mb=3072 \
        -max_len=4096 -print_final_stats=1 ${FUZZ_ARGS:-} || status=1
done
exit $status
