//! Helpers shared by the workspace's tests and benchmarks (a dev-dependency, never published):
//! where the fetched data lives ([`data`]), the real vocabularies, loaded once per process
//! ([`vocabs`]), calls written the way each dialect's model writes them ([`writer`]), checks
//! shared by the dialect tests ([`checks`]), the end-to-end generation scenarios ([`e2e`]), and
//! the benchmarks' knobs, statistics and tool sets ([`bench`]).
//!
//! The data is fetched by `scripts/fetch-data.sh` into `$CALLMASK_CACHE` (default `.cache` at
//! the workspace root). A test that needs missing data fails with a message saying so, rather
//! than passing vacuously.

#![warn(missing_docs)]

pub mod bench;
pub mod checks;
pub mod data;
pub mod e2e;
pub mod vocabs;
pub mod writer;

pub use data::{
    cache_dir, core_dir, e2e_gguf, example_tools, gemma_gguf, llama_tokenizer, mixed_tools,
    require, smollm2_gguf, suite_dir, workspace_root, LLAMA_VERSION, SUITE_VERSION,
};
pub use vocabs::{
    case_vocab, dialect_case, family_vocab, gemma_vocab, llama_vocab, npm_vocab, with_specials,
    DIALECTS_BEFORE_THE_TABLE, ORIGINAL_DIALECTS,
};
