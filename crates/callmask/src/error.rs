//! The one error type of the crate: every failure is typed, none panics.

use std::path::PathBuf;

/// Everything that can go wrong in callmask, from reading a schema to accepting a token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Input that should be JSON is not.
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The schema is not a valid JSON Schema (wrong keyword value, unknown type, ...).
    #[error("invalid schema at {path}: {message}")]
    InvalidSchema {
        /// JSON pointer of the offending subschema.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A keyword callmask cannot enforce exactly; refused rather than silently dropped.
    #[error(
        "unsupported JSON Schema keyword `{keyword}` at {path}: {reason} (lenient mode drops it)"
    )]
    UnsupportedKeyword {
        /// The keyword, e.g. `uniqueItems`.
        keyword: String,
        /// JSON pointer of the subschema holding it.
        path: String,
        /// Why it cannot be enforced.
        reason: String,
    },
    /// A `$ref` that does not resolve inside the schema.
    #[error("unresolvable $ref {reference:?} at {path}")]
    UnresolvedRef {
        /// The reference as written.
        reference: String,
        /// JSON pointer of the subschema holding it.
        path: String,
    },
    /// A `pattern` (or `format`) regular expression that does not compile.
    #[error("invalid pattern {pattern:?} at {path}: {message}")]
    InvalidPattern {
        /// The pattern as written.
        pattern: String,
        /// JSON pointer of the subschema holding it.
        path: String,
        /// The regex compiler's message.
        message: String,
    },
    /// A configured limit (size, depth, states, time) was exceeded.
    #[error("limit exceeded: {what} (limit {limit})")]
    LimitExceeded {
        /// Which limit.
        what: &'static str,
        /// The limit in force.
        limit: usize,
    },
    /// A token id that is not in the vocabulary.
    #[error("token {token} is outside the vocabulary of {vocab_size} tokens")]
    TokenOutOfVocabulary {
        /// The token id.
        token: u32,
        /// Number of tokens in the vocabulary.
        vocab_size: usize,
    },
    /// A bitmask buffer is too small for the vocabulary.
    #[error("bitmask has {words} 32-bit words, the vocabulary needs {needed}")]
    BitmaskSize {
        /// Words given.
        words: usize,
        /// Words needed.
        needed: usize,
    },
    /// A token the mask forbids at this point.
    #[error("token {token} ({text:?}) is not allowed here")]
    TokenForbidden {
        /// The token id.
        token: u32,
        /// The token's text (lossy UTF-8).
        text: String,
    },
    /// Rolling back more tokens than were accepted (or than the matcher's rollback window keeps).
    #[error("cannot roll back {requested} tokens: only {available} can be undone")]
    Rollback {
        /// Tokens asked for.
        requested: usize,
        /// Tokens that can be undone (accepted, within the rollback window).
        available: usize,
    },
    /// A tools list (or messages list) that is malformed.
    #[error("invalid tools: {0}")]
    InvalidTools(String),
    /// A dialect file that does not parse, or names something unknown.
    #[error("dialect {dialect}: {message}")]
    Dialect {
        /// The dialect's name or file.
        dialect: String,
        /// What is wrong (with a line number where there is one).
        message: String,
    },
    /// A function or property name that the dialect cannot write (e.g. not a Python identifier).
    #[error("{what} {name:?} cannot be written in the {dialect} dialect: {reason}")]
    Unrepresentable {
        /// What it is ("function name", "argument name").
        what: &'static str,
        /// The name.
        name: String,
        /// The dialect.
        dialect: String,
        /// Why.
        reason: String,
    },
    /// The grammar needs a special token that the vocabulary does not have.
    #[error("the vocabulary has no special token {0:?}, which the grammar requires")]
    MissingSpecialToken(String),
    /// A prompt template failed to render.
    #[error("prompt: {0}")]
    Prompt(String),
    /// Output text that does not parse in the dialect.
    #[error("{0}")]
    Parse(Rejection),
    /// Fetching the default model failed (network, checksum, archive).
    #[error("fetching the default model: {0}")]
    Fetch(String),
    /// A vocabulary that cannot be loaded or used.
    #[error("vocabulary: {0}")]
    Vocab(String),
    /// A file that cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// `Result` with callmask's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where and why a byte-level check failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Byte offset of the first byte that cannot be accepted (the text length if it ended early).
    pub offset: usize,
    /// Why.
    pub reason: String,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rejected at byte {}: {}", self.offset, self.reason)
    }
}
