//! callmask compiles a model's tool-call dialect together with the functions' JSON Schemas (or a
//! single JSON Schema) into a token-level automaton that masks an LLM's logits, so that every
//! output is well-formed and schema-valid by construction, and parses the output back into
//! OpenAI-style `tool_calls`.
//!
//! The modules mirror the pipeline:
//! [`schema`] (JSON Schema → grammar IR, in a JSON, JSON-in-a-string or Python encoding) and
//! [`dialect`] (dialect files + tools → one grammar) → [`grammar`] (the compiled, shareable
//! grammar) → [`automaton`] (byte-level matching over the grammar) → [`vocab`] (token bytes,
//! special tokens) → [`mask`] (allowed-token bitsets, per-sequence matchers) → `llama` (a
//! llama.cpp sampler and generation, feature `llama`) and [`parse`] (text → calls, streaming).
//! [`tools`] holds the OpenAI shapes, [`prompt`] renders the prompts the dialects' models expect.
//!
//! ```no_run
//! use std::sync::Arc;
//! use callmask::{Dialect, DialectOptions, TokenAutomaton, TokenMask, Tools, Vocab};
//! # fn main() -> Result<(), callmask::Error> {
//! let vocab = Arc::new(Vocab::from_tokenizer_json("tokenizer.json")?);
//! let tools = Tools::from_json_str(r#"[{"name": "get_time_utc"}]"#)?;
//! let grammar = Dialect::by_name("pythonic")?.compile(&tools, &DialectOptions::default())?;
//! let automaton = TokenAutomaton::new(&grammar, vocab.clone())?;
//! let mut matcher = automaton.matcher();
//! let mut mask = TokenMask::new(vocab.len());
//! matcher.fill_mask(&mut mask);
//! let parsed = grammar.parse("[get_time_utc()]")?;
//! assert_eq!(parsed.tool_calls[0].function.name, "get_time_utc");
//! # Ok(()) }
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod automaton;
pub mod dialect;
pub mod error;
#[cfg(feature = "fuzz")]
pub mod fuzz;
pub mod grammar;
pub mod mask;
pub mod parse;
pub mod prompt;
pub mod schema;
pub mod tools;
pub mod vocab;

pub use automaton::Rejection;
pub use dialect::{Dialect, DialectOptions, Reasoning, ToolChoice, DEFAULT_REQUIRED_TEXT_CHARS};
pub use error::{Error, Result};
pub use grammar::Grammar;
pub use mask::{Matcher, TokenAutomaton, TokenMask};
pub use prompt::{render, PromptOptions};
pub use schema::CompileOptions;
pub use tools::{FunctionCall, Message, Tool, ToolCall, Tools};
pub use vocab::{TokenId, Vocab};

/// Empties the process-wide caches: compiled lexemes (shared by every schema) and lexeme mask
/// walks (shared by every grammar over a vocabulary). They only make later compiles and first
/// masks faster; clearing them is for measuring cold starts, or for freeing memory.
pub fn clear_shared_caches() {
    schema::clear_lexeme_cache();
    mask::clear_lexeme_walks();
}
