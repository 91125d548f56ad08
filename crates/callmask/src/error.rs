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
    #[error("limit exceeded: {what}{} (limit {limit}{})", at_path(.path), raise_with(.option))]
    LimitExceeded {
        /// Which limit.
        what: &'static str,
        /// The limit in force.
        limit: usize,
        /// The [`CompileOptions`](crate::CompileOptions) field that sets it; empty for a fixed
        /// limit.
        option: &'static str,
        /// Where it was exceeded (function and JSON pointer of the subschema); empty when the
        /// limit is about the whole input.
        path: String,
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
    /// Logits and a bitmask that do not fit together (layout, rows or indices out of range).
    #[error("logits: {message}")]
    LogitsShape {
        /// What does not fit.
        message: String,
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
    /// An options object (JSON, from a binding) with an unknown field or a value of the wrong
    /// type; the message names the field.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
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
    /// A structural tag (XGrammar's `{"type": "structural_tag", ...}`) that is malformed: a
    /// missing or mistyped field, a tag that matches no trigger, ...
    #[error("structural tag at {path}: {message}")]
    StructuralTag {
        /// JSON pointer of the offending format object.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A structural-tag format (or a field of one) that callmask does not compile, refused by
    /// name: e.g. `grammar` (XGrammar's EBNF engine) or the token-id formats.
    #[error("structural tag at {path}: `{format}` is not supported: {reason}")]
    UnsupportedFormat {
        /// The format type or field, e.g. `token_triggered_tags` or `style: qwen_xml`.
        format: String,
        /// JSON pointer of the format object.
        path: String,
        /// Why.
        reason: String,
    },
    /// The grammar needs a special token that the vocabulary does not have.
    #[error("the vocabulary has no special token {0:?}, which the grammar requires")]
    MissingSpecialToken(String),
    /// A token budget that cannot be guaranteed: the grammar has complete outputs from here,
    /// but the budget's count finds none that the vocabulary's tokens spell (a byte they need
    /// has no single-byte token, and no longer token spells it where it is needed).
    #[error("a token budget cannot be guaranteed with this vocabulary: the budget's count finds no complete output from here that its tokens spell; the shortest one needs byte {byte:#04x}, which no token spells alone, after {after:?}")]
    BudgetUnsupported {
        /// A byte without a single-byte token that the shortest complete output needs.
        byte: u8,
        /// The text of that output before the byte (special tokens by name).
        after: String,
    },
    /// The token budget is too small for the shortest complete output from here.
    #[error("a budget of {budget} tokens is too small: the shortest complete output from here needs {needed} (end-of-generation token included)")]
    BudgetTooSmall {
        /// Tokens left in the budget.
        budget: usize,
        /// Tokens the shortest completion needs, end-of-generation token included.
        needed: usize,
    },
    /// A token that the grammar allows but after which no complete output fits in the tokens left.
    #[error("token {token} ({text:?}) leaves no complete output within the {left} tokens left")]
    OverBudget {
        /// The token id.
        token: u32,
        /// Its text (lossy UTF-8).
        text: String,
        /// Tokens left in the budget, this one and the end-of-generation token included.
        left: usize,
    },
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

fn at_path(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at {path}")
    }
}

fn raise_with(option: &str) -> String {
    if option.is_empty() {
        "; a fixed limit".into()
    } else {
        format!("; raise it with the `{option}` compile option")
    }
}

/// Who an error is the fault of, as a server answers it: [`Fault::Request`] is the request's
/// own (a malformed schema, a limit its tools exceed, a budget too small for the call it
/// demands: HTTP 400, the same request fails the same way again); [`Fault::Internal`] is the
/// server's (a vocabulary or file it could not load, a caller that broke the API's contract:
/// HTTP 500).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The request's own fault (HTTP 400).
    Request,
    /// The server's or the embedding program's fault (HTTP 500).
    Internal,
}

impl Error {
    /// Whose fault this error is ([`Fault`]), for servers that answer it.
    pub fn fault(&self) -> Fault {
        match self {
            Error::Json(_)
            | Error::InvalidSchema { .. }
            | Error::UnsupportedKeyword { .. }
            | Error::UnresolvedRef { .. }
            | Error::InvalidPattern { .. }
            | Error::LimitExceeded { .. }
            | Error::InvalidOptions(_)
            | Error::InvalidTools(_)
            | Error::Dialect { .. }
            | Error::Unrepresentable { .. }
            | Error::StructuralTag { .. }
            | Error::UnsupportedFormat { .. }
            | Error::BudgetTooSmall { .. } => Fault::Request,
            _ => Fault::Internal,
        }
    }

    /// The part of the request an error is about, where it names one: `tools[NAME].parameters`
    /// and the JSON pointer of the subschema (`tools[f].parameters#/properties/a`), `tools`, or
    /// `max_tokens`.
    pub fn param(&self) -> Option<String> {
        let in_tools = |path: &str| match path.split_once(": ") {
            Some((function, pointer)) => format!("tools[{function}].parameters{pointer}"),
            None if path.is_empty() => "tools".to_string(),
            None => format!("tools{path}"),
        };
        match self {
            Error::InvalidSchema { path, .. }
            | Error::UnsupportedKeyword { path, .. }
            | Error::UnresolvedRef { path, .. }
            | Error::InvalidPattern { path, .. }
            | Error::LimitExceeded { path, .. } => Some(in_tools(path)),
            Error::Json(_) | Error::InvalidTools(_) | Error::Unrepresentable { .. } => {
                Some("tools".into())
            }
            Error::BudgetTooSmall { .. } => Some("max_tokens".into()),
            _ => None,
        }
    }
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
