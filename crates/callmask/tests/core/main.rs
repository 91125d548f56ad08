//! The core crate's integration tests, one binary (linking one test binary per file dominated
//! the build on CI's 2 cores). Each module is the former `tests/NAME.rs`, so test names read
//! `NAME::test`: `cargo test --release -p callmask --test core budget::` runs one file's tests.
//! Shared helpers (data paths, vocabularies, call writers) are in the `callmask-testkit` crate.

mod budget;
mod concurrency;
mod conformance;
mod derive;
mod dialect_cases;
mod dialects;
mod distinct_calls;
mod duplicate_keys;
mod fuzz;
mod fuzz_regressions;
mod gemma_args;
mod hostile;
mod layers;
mod layout_doc;
mod logic;
mod matcher;
mod model_dialects;
mod numbers;
mod peer_cases;
mod raw_args;
mod refs;
mod repeated_calls;
mod request_errors;
mod robustness;
mod structural_tags;
mod structural_tags_peers;
mod template_round_trip;
mod token_masks;
mod user_keywords;
mod vocab;
mod whitespace;
mod xml_args_typed;
