//! Fuzz target `output_parser`: see `common::output_parser` (shared with `tests/core/fuzz_regressions.rs`).
#![no_main]

#[allow(dead_code)]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::output_parser(data));
