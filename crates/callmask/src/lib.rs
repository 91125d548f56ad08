//! callmask compiles a model's tool-call dialect together with the functions' JSON Schemas (or a
//! single JSON Schema) into a token-level automaton that masks an LLM's logits, so that every
//! output is well-formed and schema-valid by construction, and parses the output back into
//! OpenAI-style `tool_calls`.
//!
//! ```
//! use std::sync::Arc;
//! use callmask::{Dialect, DialectOptions, TokenAutomaton, TokenMask, ToolChoice, Tools, Vocab};
//! # fn main() -> Result<(), callmask::Error> {
//! // Once per model: the vocabulary (here a toy one: every byte a token, then an end token;
//! // real ones come from `Vocab::from_tokenizer_json`, or GGUF files with `callmask-llama`).
//! let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
//! tokens.push(b"<eos>".to_vec());
//! let mut special = vec![false; 256];
//! special.push(true);
//! let vocab = Arc::new(Vocab::from_parts(tokens, special, vec![256])?);
//!
//! // Once per request: the tools and the dialect compile into a grammar (Send + Sync).
//! let tools = Tools::from_json_str(
//!     r#"[{"name": "get_weather", "parameters": {"type": "object",
//!          "properties": {"city": {"type": "string"}}, "required": ["city"]}}]"#,
//! )?;
//! let options = DialectOptions::default().tool_choice(ToolChoice::Required);
//! let grammar = Dialect::by_name("pythonic")?.compile(&tools, &options)?;
//!
//! // Per sequence: a matcher; per token: a mask, then the sampled token.
//! let automaton = TokenAutomaton::new(&grammar, vocab.clone())?;
//! let mut matcher = automaton.matcher();
//! let mut mask = TokenMask::new(vocab.len());
//! for &b in b"[get_weather(city='Paris')]" {
//!     matcher.fill_mask(&mut mask);
//!     assert!(mask.is_allowed(b as u32));
//!     matcher.accept(b as u32)?;
//! }
//! matcher.fill_mask(&mut mask);
//! assert!(mask.is_allowed(256)); // the end token, now that the call list is complete
//!
//! // After generation: the calls, OpenAI-shaped.
//! let parsed = grammar.parse("[get_weather(city='Paris')]")?;
//! assert_eq!(parsed.tool_calls[0].function.name, "get_weather");
//! assert_eq!(parsed.tool_calls[0].function.arguments, r#"{"city":"Paris"}"#);
//! # Ok(()) }
//! ```
//!
//! # Layers
//!
//! The modules mirror the pipeline, and each uses only the layers below it (the test
//! `tests/core/layers.rs` reads the sources and fails on an import that reaches up):
//!
//! | layer | modules | what they hold |
//! |---|---|---|
//! | 0 | `error`, [`python`], `cache`, `setters` | the typed [`Error`]; Python literal spelling; [`Caches`]; options' builder setters |
//! | 1 | `json_text` | JSON text read with a nesting limit of its own ([`parse_json`]) |
//! | 2 | `tools`, [`vocab`] | OpenAI tool shapes; token bytes, special and end tokens |
//! | 3 | `grammar` | the grammar IR, its lexeme DFAs and the one `GrammarBuilder` |
//! | 4 | `schema`, `automaton` | JSON Schema → grammar; byte-level matching over a grammar |
//! | 5 | `dialect`, [`parse`], [`prompt`] | dialect files → grammar; text → calls; prompts |
//! | 6 | [`mask`], `derive` | token masks and matchers (the distinct-calls rule reads calls with the parser); dialects derived from chat templates |
//! | 7 | [`fuzz`] (feature `fuzz`) | random complete outputs, validated independently |
//!
//! # Where things go
//!
//! Each concern has one owner, and a test that fails when something bypasses it:
//!
//! - **A JSON Schema keyword**: one row in the keyword table (`schema/keywords.rs`: its value
//!   kind and its role — which part enforces it — or the reason it is refused), then the code of
//!   that role reads it through the typed schema (`schema/typed.rs`) or by its `Keyword`. The
//!   scalar cache key is derived from the table. Tests: `every_keyword_read_is_in_the_table`
//!   (a keyword read anywhere in the schema or dialect code without a row fails),
//!   `every_enforced_keyword_is_exercised`, `every_refused_keyword_is_refused_by_name`,
//!   `scalar_cache_key_covers_every_scalar_read`.
//! - **A cache**: a key type of its own implementing `CacheKey` (`cache.rs`), whose `Value` is
//!   the one type kept under it, in [`Caches`], the bounded, least-recently-used
//!   store the user creates and sizes ([`CompileOptions::caches`], [`Vocab::caches`],
//!   [`TokenAutomaton::with_caches`]). Per-automaton caches live in the automaton. Test:
//!   `no_static_cache_in_the_core` (any `static` item in the core but a fixed table and an id
//!   counter fails).
//! - **A tool-call format (dialect)**: a grammar file, a prompt template and a call writer under
//!   `grammars/`, and one row in the dialect table (`formats.rs`, from which
//!   [`Dialect::builtin_names`], detection, the CLI's help and docs/dialects.md's table derive). Tests:
//!   `grammars_are_in_the_table`, `readme_lists_the_dialect_table`, and the case files in
//!   `tests/dialect_cases/`. A string `format` (JSON Schema's): its name and regex in
//!   `schema/strings.rs` (`FORMAT_NAMES`, `format_regex`); its automaton is read from
//!   `schema/format_automata.bin`, which `the_table_is_built_from_the_format_regexes` rebuilds
//!   from the regexes (stale: it fails; `CALLMASK_BLESS=1` regenerates it). The lexemes of the
//!   common schemas (plain strings, numbers, `{}`) are read the same way from
//!   `schema/standard_lexemes.bin` (`the_table_is_built_from_the_standard_schemas`).
//! - **A token-level walk**: `mask/walks.rs`, over the vocabulary's trie (`vocab/trie.rs`), which
//!   knows no grammar: it runs automata through the narrow `ByteRecognizer` trait. Test:
//!   `tests/layers.rs` (the trie is layer 1 and may not import the grammar).
//!
//! Beyond this crate: `callmask-llama` (GGUF vocabularies, a llama.cpp sampler, generation) and
//! `callmask-cli` (the `callmask` command).

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod automaton;
mod cache;
mod derive;
mod dialect;
mod error;
mod formats;
#[cfg(feature = "fuzz")]
pub mod fuzz;
mod grammar;
mod json_text;
pub mod mask;
pub mod parse;
pub mod prompt;
pub mod python;
mod schema;
mod setters;
mod tools;
pub mod vocab;

pub use cache::{CacheStats, Caches, DEFAULT_CACHE_BYTES};
pub use derive::{derive_dialect, DerivedDialect};
pub use dialect::{
    Dialect, DialectOptions, DialectSpec, Reasoning, RefusedSpec, StructuralTag,
    StructuralTagOptions, ToolChoice, DEFAULT_REQUIRED_TEXT_CHARS,
};
pub use error::{Error, Fault, Rejection, Result};
pub use grammar::{
    ArgEncoding, CompileOptions, DistinctCalls, Grammar, SchemaRegistry, Whitespace,
};
pub use json_text::{parse_json, MAX_JSON_DEPTH};
pub use mask::{Matcher, TokenAutomaton, TokenMask};
pub use parse::{Event, Parsed, StreamParser};
pub use prompt::{render, PromptOptions};
pub use schema::normalize_type_aliases;
pub use tools::{FunctionCall, Message, Tool, ToolCall, Tools};
pub use vocab::{TokenId, Vocab};
