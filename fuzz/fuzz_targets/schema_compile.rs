//! Fuzz target `schema_compile`: see `common::schema_compile` (shared with `tests/core/fuzz_regressions.rs`).
#![no_main]

#[allow(dead_code)]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::schema_compile(data));
