//! What a cached lexeme automaton is built from: [`Lexeme`], one variant per kind, and
//! [`LexemeKey`], the kind with the compile options that change the automaton. Every lexeme a
//! compile keeps in [`crate::Caches`] (schema scalars and keys, dialect literals, regexes, text
//! and XML values) is found by one of these keys, so two kinds can never share an entry.
//!
//! The key's text ([`std::fmt::Display`]) names the entries of the standard-lexeme table
//! (`standard_lexemes.bin`), which is read by that text.

use crate::cache::CacheKey;
use crate::grammar::dfa::{CharSpelling, Dfa};
use crate::grammar::Whitespace;
use std::fmt;

/// The kind of a cached lexeme automaton and what defines it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Lexeme {
    /// The scalar part of a schema (`Compiler::scalar_key`): its scalar types, whether
    /// integers are draft 4's, and the canonical form of its scalar keywords.
    Scalar {
        types: u8,
        draft4: bool,
        keywords: String,
    },
    /// A lexeme written inside a JSON string, bounded by length only.
    InString(Box<Lexeme>),
    /// One character's spelling inside a string literal, copied per count by the strings of a
    /// length.
    Char(CharSpelling),
    /// The strings (raw bytes) and scalar spellings of an `enum` or `const`.
    Enum {
        strings: Vec<Vec<u8>>,
        scalars: Vec<Vec<u8>>,
    },
    /// Any object key but the listed ones (Python keywords or JSON keys).
    ExtraKeys { kwargs: bool, listed: Vec<String> },
    /// Every scalar value of the types given, one spelling each (negation's universe).
    NegUniverse(u8),
    /// Any object key.
    AnyKey,
    /// Any scalar value.
    AnyScalar,
    /// A literal.
    Literal(Vec<u8>),
    /// A dialect file's regex.
    Regex(String),
    /// Whitespace between a dialect's tokens, under a policy.
    Whitespace { policy: Whitespace, max: u16 },
    /// Free text holding none of the markers, at most `max` characters.
    Text {
        markers: Vec<String>,
        max: Option<u32>,
    },
    /// Free text matching a regex, at most `max` characters.
    TextMatching { regex: String, max: Option<u32> },
    /// Free text, not empty, holding none of the markers (sorted, no duplicates).
    NonEmptyText(Vec<String>),
    /// A call id matching a regex, as a JSON string.
    Ident(String),
    /// A raw XML value matching one of the string schemas `parts` (JSON text), holding
    /// none of `without` and not matching `exclude` (a regex) as a whole.
    XmlRaw {
        without: Vec<String>,
        exclude: Option<String>,
        parts: String,
        strings: &'static str,
    },
}

/// A [`Lexeme`] with the compile options that change its automaton: the key of a compiled
/// lexeme in [`crate::Caches`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LexemeKey {
    /// What the lexeme is.
    pub(crate) lexeme: Lexeme,
    /// The state limit it was built under.
    pub(crate) max_states: usize,
    /// How values are spelled: `json`, `py` or `py+jsonlit`.
    pub(crate) encoding: &'static str,
    /// Whether numbers are limited to what every JSON parser reads exactly (I-JSON).
    pub(crate) ijson: bool,
}

impl CacheKey for LexemeKey {
    type Value = Dfa;
}

impl fmt::Display for Lexeme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lexeme::Scalar {
                types,
                draft4,
                keywords,
            } => {
                write!(f, "scalar|{types}|")?;
                if *draft4 {
                    f.write_str("draft4|")?;
                }
                f.write_str(keywords)
            }
            Lexeme::InString(inner) => write!(f, "{inner}|in-string"),
            Lexeme::Char(spelling) => write!(f, "char|{spelling:?}"),
            Lexeme::Enum { strings, scalars } => write!(f, "enum|{strings:?}|{scalars:?}"),
            Lexeme::ExtraKeys { kwargs, listed } => write!(
                f,
                "extra-keys|{}|{}",
                if *kwargs { "kwargs" } else { "json" },
                serde_json::Value::from(listed.clone())
            ),
            Lexeme::NegUniverse(types) => write!(f, "neg-universe|{types}"),
            Lexeme::AnyKey => f.write_str("any-key"),
            Lexeme::AnyScalar => f.write_str("any-scalar"),
            Lexeme::Literal(bytes) => write!(f, "lit|{bytes:?}"),
            Lexeme::Regex(re) => write!(f, "re|{re}"),
            Lexeme::Whitespace { policy, max } => write!(f, "ws|{policy:?}|{max}"),
            Lexeme::Text { markers, max } => write!(f, "text|{markers:?}|{max:?}"),
            Lexeme::TextMatching { regex, max } => write!(f, "text~|{regex}|{max:?}"),
            Lexeme::NonEmptyText(markers) => write!(f, "text+|{markers:?}"),
            Lexeme::Ident(re) => write!(f, "id|{re}"),
            Lexeme::XmlRaw {
                without,
                exclude,
                parts,
                strings,
            } => write!(f, "xmlraw|{without:?}|{exclude:?}|{parts}|{strings}"),
        }
    }
}

impl fmt::Display for LexemeKey {
    /// The text the standard-lexeme table is keyed by.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let numbers = if self.ijson { "ijson" } else { "json-numbers" };
        write!(
            f,
            "{}|{}|{}|{numbers}",
            self.lexeme, self.max_states, self.encoding
        )
    }
}
