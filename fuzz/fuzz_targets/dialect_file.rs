//! Fuzz target `dialect_file`: see `common::dialect_file` (shared with `tests/core/fuzz_regressions.rs`).
#![no_main]

#[allow(dead_code)]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::dialect_file(data));
