//! Fuzz target `matcher_tokens`: see `common::matcher_tokens` (shared with `tests/core/fuzz_regressions.rs`).
#![no_main]

#[allow(dead_code)]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::matcher_tokens(data));
