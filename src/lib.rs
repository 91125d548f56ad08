//! callmask compiles JSON Schemas (and, later, tool-call dialects) into token-level automata that
//! mask an LLM's logits, so that every output is well-formed and schema-valid by construction.
//!
//! The modules mirror the pipeline:
//! [`schema`] (JSON Schema → grammar IR) → [`grammar`] (the compiled, shareable grammar) →
//! [`automaton`] (byte-level matching over the grammar) → [`vocab`] (token bytes and the token
//! trie) → [`mask`] (allowed-token bitsets, per-sequence matchers).
//!
//! ```no_run
//! use std::sync::Arc;
//! use callmask::{CompileOptions, Grammar, TokenAutomaton, TokenMask, Vocab};
//! # fn main() -> Result<(), callmask::Error> {
//! let vocab = Arc::new(Vocab::from_tokenizer_json("tokenizer.json")?);
//! let schema = serde_json::json!({"type": "object", "properties": {"a": {"type": "integer"}}});
//! let grammar = Grammar::from_json_schema(&schema, &CompileOptions::default())?;
//! let automaton = TokenAutomaton::new(&grammar, vocab.clone())?;
//! let mut matcher = automaton.matcher();
//! let mut mask = TokenMask::new(vocab.len());
//! matcher.fill_mask(&mut mask);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod automaton;
pub mod dialect;
pub mod error;
#[cfg(feature = "llama")]
pub mod fetch;
pub mod grammar;
#[cfg(feature = "llama")]
pub mod llama;
pub mod mask;
pub mod parse;
pub mod prompt;
pub mod schema;
pub mod tools;
pub mod vocab;

pub use automaton::Rejection;
pub use dialect::{Dialect, DialectOptions, Reasoning, ToolChoice};
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
