//! JSON Schema → grammar IR.
//!
//! Supported, with exact semantics: `type` (lists, and the aliases `dict`, `float`, `tuple`,
//! `any`), `nullable`, `enum`, `const`, `properties`, `required`, `additionalProperties`,
//! `patternProperties` (see `pattern_properties.rs`), `uniqueItems` (over a finite set of
//! values; see `objects.rs`),
//! `items`, `prefixItems` (and draft-07 array `items` with `additionalItems`), `minItems`,
//! `maxItems`, `minLength`, `maxLength`, `pattern`, `format` (date, time, date-time, email, uuid,
//! ipv4, uri, hostname, ipv6, duration, json-pointer, relative-json-pointer, uri-reference,
//! iri, iri-reference, idn-hostname; see `strings.rs`; or an annotation with [`CompileOptions::format_annotation`]), `minimum`,
//! `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf` (exact on decimal digits for
//! small steps; see `numbers.rs`), `dependentRequired` and `dependentSchemas` (see
//! `dependencies.rs`), static `unevaluatedProperties`/`unevaluatedItems` (see
//! `unevaluated.rs`), `propertyNames`, `minProperties`/`maxProperties`, `contains` with
//! `minContains`/`maxContains`, `anyOf`, `oneOf`
//! (a union when its alternatives are provably disjoint, else rewritten with complements),
//! `allOf` (where the parts merge), `not` and `if`/`then`/`else` (where the complement is exact;
//! see `negate.rs`), `$ref` (recursion included) by JSON pointer, by `$anchor` (and draft 7's
//! `$id: "#a"`), relative to the base URI `$id`s set, to embedded resources by absolute URI, and
//! to remote documents from [`CompileOptions::registry`]; `$dynamicRef`/`$dynamicAnchor`
//! (resolved statically from the root's dynamic scope; see `schema/resolve.rs`). Draft-7
//! documents (`$schema`) ignore a `$ref`'s siblings; 2020-12 ones apply them alongside.
//! Annotations are ignored. Any other assertion keyword is refused with
//! [`Error::UnsupportedKeyword`], unless [`CompileOptions::lenient`] is set, in which case it is
//! dropped and listed in [`crate::Grammar::dropped_keywords`].
//!
//! Where to add a keyword: every keyword callmask knows is one row of the table in
//! `schema/keywords.rs` (`Keyword`: spelling, value kind, the role that enforces
//! it, whether `not` goes through it, a refusal reason); which keywords are annotations, which
//! make up the scalar cache key, which hold subschemas and which are refused are all read off
//! that table. Add the row, then the code its role names, and a witness in `keywords.rs`'s
//! tests. The tests `every_keyword_read_is_in_the_table` (a keyword read anywhere in the
//! schema compiler or the dialects but missing from the table),
//! `every_enforced_keyword_is_exercised` (an enforcing keyword whose witness schema does not
//! change the language) and `scalar_cache_key_covers_every_scalar_read` fail otherwise.
//!
//! Value encoding policy (what the grammar writes; every output is valid):
//! - strings: see [`crate::grammar::dfa::Dfa::json_string`] for escapes;
//! - integers: `-?(0|[1-9][0-9]*)`, optionally followed by `.0` (`.0…`, up to 20 zeros, with
//!   `ijson_numbers` off); by default within
//!   ±(2^53 − 1), what every JSON parser reads exactly (I-JSON, RFC 7493), where the schema's
//!   bounds do not reach further; with [`CompileOptions::ijson_numbers`] off, at most 19 digits;
//! - numbers: by default at most 15 significant digits (a double's; trailing zeros count) and
//!   20 fraction digits, unless a bound lies at 10^15 or past it; otherwise (and with
//!   `ijson_numbers` off) at most 19 integer digits and 20 fraction digits; an exponent (at most
//!   2 digits, so values stay finite doubles) only when the number has no bounds;
//! - `-0` is not produced (nor `-0.0`, `-0e1`).

mod dependencies;
mod enums;
mod format_automata;
pub(crate) mod keywords;
mod lexeme_key;
mod merge;
mod negate;
mod numbers;
mod objects;
mod pattern_properties;
mod refs;
mod resolve;
mod scalars;
mod standard_lexemes;
mod strings;
mod typed;
mod unevaluated;
mod unions;

use crate::cache::{CacheKey, Caches};
pub(crate) use lexeme_key::Lexeme;
use lexeme_key::LexemeKey;

/// The cache key of a lexeme automaton escaped for a JSON string: the source automaton by
/// address (the entry holds it, so the address is not reused while it lives).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EscapedKey {
    source: usize,
}

impl CacheKey for EscapedKey {
    type Value = (Arc<Dfa>, Arc<Dfa>);
}
use crate::error::{Error, Result};
use crate::grammar::builder::{ptr, GrammarBuilder};
use crate::grammar::dfa::{CharSpelling, Dfa, DfaError, Op, WordQuotes};
pub use crate::grammar::CompileOptions;
use crate::grammar::{
    ArrayNode, ContainsNode, Grammar, KeyTrie, LexId, Node, NodeId, ObjectNode, Syntax,
    MAX_UNIQUE_VALUES,
};
use crate::python::{is_identifier, py_quote};
pub(crate) use keywords::is_annotation;
use keywords::Keyword;
use numbers::{ge_regex, le_regex, Dec, NumberSpelling};
pub(crate) use resolve::resolve_refs;
use serde_json::{Map, Number, Value};
use std::collections::HashMap;
use std::sync::Arc;
use strings::{ecma_unsupported, format_regex, pattern_syntax_error, translate_ecma};

impl Grammar {
    /// Compiles a JSON Schema (draft 2020-12 or draft 7) for one JSON value.
    pub fn from_json_schema(
        schema: &serde_json::Value,
        options: &CompileOptions,
    ) -> Result<Grammar> {
        compile(schema, options)
    }

    /// Compiles a JSON Schema given as JSON text.
    pub fn from_json_schema_str(schema: &str, options: &CompileOptions) -> Result<Grammar> {
        let v: serde_json::Value = serde_json::from_str(schema)?;
        Self::from_json_schema(&v, options)
    }
}

/// Compiles `schema` into a grammar.
pub(crate) fn compile(schema: &Value, options: &CompileOptions) -> Result<Grammar> {
    check_schema_shape([schema], options)?;
    let resolved = resolve::resolve_refs(schema, options)?;
    let schema = resolved.as_ref().unwrap_or(schema);
    let mut c = Compiler::new(schema, options);
    let root = c.compile(schema, "")?;
    c.b.finish(root, true, Vec::new(), Vec::new())
}

/// Bounds the JSON nesting of the schemas without recursion (merging and cloning subschemas
/// recurse, and must not overflow a small thread stack on a hostile document), and their total
/// number of JSON values ([`CompileOptions::max_schema_values`]).
pub(crate) fn check_schema_shape<'v>(
    schemas: impl IntoIterator<Item = &'v Value>,
    options: &CompileOptions,
) -> Result<()> {
    let json_limit = options.max_schema_depth.saturating_mul(4).saturating_add(8);
    let mut todo: Vec<(&Value, usize)> = schemas.into_iter().map(|s| (s, 1)).collect();
    let mut values = 0usize;
    while let Some((v, d)) = todo.pop() {
        values += 1;
        if values > options.max_schema_values {
            return Err(Error::LimitExceeded {
                what: "schema size (JSON values)",
                limit: options.max_schema_values,
                option: "max_schema_values",
                path: String::new(),
            });
        }
        if d > json_limit {
            return Err(Error::LimitExceeded {
                what: "schema nesting depth",
                limit: options.max_schema_depth,
                option: "max_schema_depth",
                path: String::new(),
            });
        }
        match v {
            Value::Array(a) => todo.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(o) => todo.extend(o.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    Ok(())
}

/// The JSON types, as a bit set.
const T_NULL: u8 = 1;
const T_BOOL: u8 = 2;
const T_INT: u8 = 4;
const T_NUM: u8 = 8;
const T_STR: u8 = 16;
const T_OBJ: u8 = 32;
const T_ARR: u8 = 64;
const T_ALL: u8 = 127;

pub(crate) use crate::grammar::ArgEncoding as Encoding;

/// Compiles JSON Schemas into grammar nodes, in one of three value encodings, through a
/// [`GrammarBuilder`] (which dialect lowering drives too).
pub(crate) struct Compiler<'a> {
    /// The grammar being built.
    pub(crate) b: GrammarBuilder<'a>,
    /// The schema document `$ref`s resolve in.
    pub(crate) root: &'a Value,
    pub(crate) opts: &'a CompileOptions,
    refs: HashMap<(Encoding, String), NodeId>,
    depth: usize,
    any: HashMap<Encoding, NodeId>,
    /// The encoding values are compiled for.
    pub(crate) enc: Encoding,
    /// The node of Gemma's string quote `<|"|>` (a special token where the vocabulary has
    /// one, else its text), set by the dialect lowering before it compiles arguments in
    /// [`Encoding::Gemma`].
    pub(crate) gemma_quote: Option<NodeId>,
    /// Steps taken merging `allOf` parts and resolving `$ref`s inside them (see
    /// [`Compiler::merge_step`]).
    merge_steps: std::cell::Cell<usize>,
    /// JSON nodes of the schemas merging produced so far (see [`Compiler::merge_charge`]).
    merge_nodes: std::cell::Cell<usize>,
    /// The document declares draft 4 (or 3) in `$schema`, where an integer is a number
    /// written without a fraction (`1.0` is not one); from draft 6 on it is any number whose
    /// fraction is zero.
    pub(crate) draft4_integers: bool,
    /// Python values may also spell `true`, `false` and `null` as JSON does (LFM2's calls);
    /// see [`Compiler::set_json_literals`].
    json_literals: bool,
    /// Objects and arrays keep to one line: their whitespace is spaces only (see
    /// [`Compiler::set_one_line`]).
    one_line: bool,
    /// Where lexemes are kept: [`CompileOptions::caches`], or this compile's own.
    caches: Caches,
    /// Lexemes of the standard schemas are read from their table (`standard_lexemes`); off
    /// only where the table is written.
    prebuilt_lexemes: bool,
    /// The lexemes this compile built, by cache key (for the table's writer).
    #[cfg(test)]
    built: Vec<(String, Arc<Dfa>)>,
}

/// Bytes of the cache a compile makes for itself when [`CompileOptions::caches`] is unset.
const COMPILE_OWN_CACHE_BYTES: usize = 64 << 20;

/// True when `doc`'s `$schema` names draft 3 or 4.
fn declares_draft4(doc: &Value) -> bool {
    doc.get("$schema")
        .and_then(Value::as_str)
        .is_some_and(|s| s.contains("draft-04") || s.contains("draft-03"))
}

/// A bare key of Gemma's notation (as its chat template writes keys): no whitespace, quote,
/// backslash or structural byte, so that the key ends at its `:`, reads back as written and
/// holds no `<|"|>`.
const GEMMA_KEY: &str = r#"[^\x00-\x20\x7f:,={}\[\]<>"'\\]+"#;

/// True when `k` is a bare key of Gemma's notation ([`GEMMA_KEY`]).
fn is_gemma_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b > b' ' && b != 0x7f && !b":,={}[]<>\"'\\".contains(&b))
}

/// The texts holding Gemma's string quote (which a string's content cannot).
const GEMMA_WITH_QUOTE: &str = r#"(?s:.)*<\|"\|>(?s:.)*"#;

/// [`Error::UnsupportedKeyword`] for what Gemma's notation cannot write exactly.
fn gemma_unsupported(path: &str, what: &str) -> Error {
    Error::UnsupportedKeyword {
        keyword: "type".into(),
        path: if path.is_empty() {
            "#".into()
        } else {
            format!("#{path}")
        },
        reason: format!("{what} has no exact spelling in Gemma's notation"),
    }
}

/// Most steps of `allOf` merging per compile, and most JSON nodes the merged schemas may hold
/// in all (summed over the steps): parts whose `$ref`s lead back into merged parts (`allOf` of
/// `if`/`then` whose properties refer to the schema itself) would otherwise expand without
/// bound, in time and memory, before any depth limit is reached.
const MAX_MERGE_STEPS: usize = 100_000;
const MAX_MERGE_NODES: usize = 1_000_000;

fn invalid(path: &str, message: impl Into<String>) -> Error {
    Error::InvalidSchema {
        path: if path.is_empty() {
            "#".into()
        } else {
            format!("#{path}")
        },
        message: message.into(),
    }
}

fn escape_ptr(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

impl<'a> Compiler<'a> {
    pub(crate) fn new(root: &'a Value, opts: &'a CompileOptions) -> Self {
        Compiler {
            b: GrammarBuilder::new(opts),
            root,
            opts,
            refs: HashMap::new(),
            depth: 0,
            any: HashMap::new(),
            enc: Encoding::Json,
            gemma_quote: None,
            merge_steps: std::cell::Cell::new(0),
            merge_nodes: std::cell::Cell::new(0),
            draft4_integers: declares_draft4(root),
            json_literals: false,
            one_line: false,
            caches: opts
                .caches
                .clone()
                .unwrap_or_else(|| Caches::new(COMPILE_OWN_CACHE_BYTES)),
            prebuilt_lexemes: true,
            #[cfg(test)]
            built: Vec::new(),
        }
    }

    /// Lets Python values spell `true`, `false` and `null` as JSON does, beside `True`,
    /// `False` and `None` (the nodes built under the other setting are not reused).
    pub(crate) fn set_json_literals(&mut self, on: bool) {
        if self.json_literals != on {
            self.json_literals = on;
            self.refs.clear();
            self.any.clear();
        }
    }

    /// Keeps the objects and arrays compiled from now on to one line (whitespace between
    /// their tokens spaces only), or lets them break lines again (the nodes built under the
    /// other setting are not reused).
    pub(crate) fn set_one_line(&mut self, on: bool) {
        if self.one_line != on {
            self.one_line = on;
            self.refs.clear();
            self.any.clear();
        }
    }

    /// Whether objects and arrays are kept to one line ([`Compiler::set_one_line`]).
    pub(crate) fn one_line(&self) -> bool {
        self.one_line
    }

    /// Counts one step of `allOf` merging: [`Error::LimitExceeded`] past [`MAX_MERGE_STEPS`]
    /// or the compile deadline.
    pub(crate) fn merge_step(&self) -> Result<()> {
        let n = self.merge_steps.get() + 1;
        self.merge_steps.set(n);
        if n > MAX_MERGE_STEPS {
            return Err(Error::LimitExceeded {
                what: "allOf merge steps",
                limit: MAX_MERGE_STEPS,
                option: "",
                path: String::new(),
            });
        }
        if n % 256 == 0 {
            self.b.check_budget()?;
        }
        Ok(())
    }

    /// Charges the JSON nodes of a schema that merging produced: [`Error::LimitExceeded`] once
    /// they exceed [`MAX_MERGE_NODES`] in all. Counting stops at the limit, so the count costs
    /// no more than the limit over a compile.
    pub(crate) fn merge_charge(&self, v: &Value) -> Result<()> {
        fn count(v: &Value, left: &mut usize) -> bool {
            if *left == 0 {
                return false;
            }
            *left -= 1;
            match v {
                Value::Array(a) => a.iter().all(|x| count(x, left)),
                Value::Object(o) => o.values().all(|x| count(x, left)),
                _ => true,
            }
        }
        let mut left = MAX_MERGE_NODES.saturating_sub(self.merge_nodes.get());
        let before = left;
        let fits = count(v, &mut left);
        self.merge_nodes
            .set(self.merge_nodes.get() + (before - left));
        if fits {
            Ok(())
        } else {
            Err(Error::LimitExceeded {
                what: "JSON nodes of merged allOf parts",
                limit: MAX_MERGE_NODES,
                option: "",
                path: String::new(),
            })
        }
    }

    /// Switches to another schema document (a function's parameters) and encoding.
    pub(crate) fn set_document(&mut self, root: &'a Value, enc: Encoding) {
        if !std::ptr::eq(root, self.root) {
            self.refs.clear();
        }
        self.root = root;
        self.enc = enc;
        self.draft4_integers = declares_draft4(root);
    }

    /// The object syntax of the current encoding (Gemma's: the key spelling holds its `:`).
    fn obj_syntax(&self) -> Syntax {
        Syntax {
            space_only: self.one_line
                || matches!(self.enc, Encoding::JsonInString | Encoding::Gemma),
            colon: match self.enc {
                Encoding::Gemma => None,
                _ => Syntax::OBJECT.colon,
            },
            ..Syntax::OBJECT
        }
    }

    /// The array syntax of the current encoding.
    fn arr_syntax(&self) -> Syntax {
        Syntax {
            space_only: self.one_line
                || matches!(self.enc, Encoding::JsonInString | Encoding::Gemma),
            ..Syntax::ARRAY
        }
    }

    /// A string literal of the current encoding over a content automaton. Gemma's strings are
    /// not one lexeme (their quotes may be special tokens): [`Compiler::gemma_string`].
    fn quote(&self, content: &Dfa, path: &str) -> Result<Dfa> {
        let max = self.opts.max_lexeme_states;
        let r = match self.enc {
            Encoding::Json | Encoding::JsonInString => content.json_string(max),
            Encoding::Python => content.python_string_either(max),
            Encoding::Gemma => return Err(gemma_unsupported(path, "this string")),
        };
        r.map_err(|e| self.b.dfa_err(e, path, ""))
    }

    /// An object key of the current encoding over an automaton of key names: a string literal,
    /// or Gemma's bare key with its `:` (names holding a byte a bare key cannot are left out).
    fn key_quote(&mut self, names: &Dfa, path: &str) -> Result<Dfa> {
        if self.enc != Encoding::Gemma {
            return self.quote(names, path);
        }
        let bare = self.b.regex(GEMMA_KEY, path)?;
        let bare = self.b.and(names, &bare, path)?;
        bare.then_byte(b':', self.opts.max_lexeme_states)
            .map_err(|e| self.b.dfa_err(e, path, ""))
    }

    /// A string of Gemma's notation whose content `content` accepts: the quote, the content
    /// (never holding a quote: the first one ends the string), the quote.
    pub(crate) fn gemma_string(&mut self, content: Arc<Dfa>, path: &str) -> Result<NodeId> {
        let q = self
            .gemma_quote
            .ok_or_else(|| gemma_unsupported(path, "a string outside a dialect's arguments"))?;
        let lex = self.b.lexeme(content)?;
        self.b.push(Node::Seq(vec![q, lex, q]))
    }

    /// The content automaton of Gemma strings whose decoded content `content` accepts: the
    /// strings holding no quote (`<|"|>`), cached by `key`.
    fn gemma_content(
        &mut self,
        key: Lexeme,
        content: impl FnOnce(&mut Self) -> Result<Dfa>,
        path: &str,
    ) -> Result<Arc<Dfa>> {
        self.cached(key, |this| {
            let d = content(this)?;
            let with_quote = this.b.regex(GEMMA_WITH_QUOTE, path)?;
            d.product(&with_quote, Op::AndNot, this.opts.max_lexeme_states)
                .map_err(|e| this.b.dfa_err(e, path, ""))
        })
    }

    /// A JSON literal (`null`, `true`, `false`) as the current encoding writes it, as a regex
    /// (an alternation where it has two spellings: [`Compiler::literal_bytes`]).
    fn literal(&self, json: &str) -> &'static str {
        match (self.enc, self.json_literals, json) {
            (Encoding::Python, false, "null") => "None",
            (Encoding::Python, false, "true") => "True",
            (Encoding::Python, false, "false") => "False",
            (Encoding::Python, true, "null") => "(?:None|null)",
            (Encoding::Python, true, "true") => "(?:True|true)",
            (Encoding::Python, true, "false") => "(?:False|false)",
            (_, _, "null") => "null",
            (_, _, "true") => "true",
            _ => "false",
        }
    }

    /// Every spelling of the JSON literal `v` (`null`, `true` or `false`; nothing for another
    /// value) in the current encoding.
    fn literal_bytes(&self, v: &Value) -> Vec<Vec<u8>> {
        let (python, plain) = match v {
            Value::Null => ("None", "null"),
            Value::Bool(true) => ("True", "true"),
            Value::Bool(false) => ("False", "false"),
            _ => return Vec::new(),
        };
        let spellings = match (self.enc, self.json_literals) {
            (Encoding::Python, false) => vec![python],
            (Encoding::Python, true) => vec![python, plain],
            _ => vec![plain],
        };
        spellings
            .into_iter()
            .map(|s| s.as_bytes().to_vec())
            .collect()
    }

    /// The spellings of an object key in the current encoding.
    ///
    /// JSON: as `serde_json` writes it, and, for a key with characters past ASCII, with each of
    /// them as `\uxxxx` (lowercase hex, as `json.dumps` writes it) or `\uXXXX` (uppercase).
    /// Inside a JSON string, those three escaped once more, and the raw one with its characters
    /// past ASCII escaped at the outer level. Python: single and double quotes.
    fn key_spellings(&self, k: &str) -> Result<Vec<Vec<u8>>> {
        if self.enc == Encoding::Gemma {
            return match is_gemma_key(k) {
                true => Ok(vec![format!("{k}:").into_bytes()]),
                false => Err(Error::UnsupportedKeyword {
                    keyword: "properties".into(),
                    path: format!("#/properties/{}", escape_ptr(k)),
                    reason: format!(
                        "Gemma's notation writes keys bare, and {k:?} is empty or holds a \
                         character a bare key cannot (whitespace, a quote, a backslash or one \
                         of : , = {{ }} [ ] < >)"
                    ),
                }),
            };
        }
        let raw = serde_json::to_string(k)?;
        let mut json = vec![raw.clone()];
        if !k.is_ascii() {
            json.push(crate::python::escape_past_ascii(&raw, false));
            json.push(crate::python::escape_past_ascii(&raw, true));
        }
        Ok(match self.enc {
            Encoding::Json => json.into_iter().map(String::into_bytes).collect(),
            Encoding::JsonInString => {
                let inner = escape_in_json_string(raw.as_bytes());
                let mut out: Vec<Vec<u8>> = json
                    .iter()
                    .map(|s| escape_in_json_string(s.as_bytes()))
                    .collect();
                if !k.is_ascii() {
                    let inner = String::from_utf8(inner).map_err(|e| invalid("", e.to_string()))?;
                    out.push(crate::python::escape_past_ascii(&inner, false).into_bytes());
                    out.push(crate::python::escape_past_ascii(&inner, true).into_bytes());
                }
                out
            }
            Encoding::Python => vec![
                py_quote(k, '\'').into_bytes(),
                py_quote(k, '"').into_bytes(),
            ],
            Encoding::Gemma => unreachable!("returned above"),
        })
    }

    /// `dfa` as the current encoding writes it: unchanged, or escaped inside a JSON string.
    fn encoded(&mut self, dfa: Arc<Dfa>, path: &str) -> Result<Arc<Dfa>> {
        if self.enc != Encoding::JsonInString {
            return Ok(dfa);
        }
        // Keyed by the source automaton's address; the entry holds the source, so the address
        // cannot be reused while the entry lives.
        let max = self.opts.max_lexeme_states;
        let pair = self.caches.get_or_build(
            EscapedKey {
                source: Arc::as_ptr(&dfa) as usize,
            },
            || -> Result<_> {
                let e = Arc::new(
                    dfa.json_escaped(max)
                        .map_err(|e| self.b.dfa_err(e, path, ""))?,
                );
                let bytes = e.memory();
                Ok(((dfa.clone(), e), bytes))
            },
        )?;
        Ok(pair.1.clone())
    }

    /// A lexeme node for `dfa` written in the current encoding.
    pub(crate) fn lexeme(&mut self, dfa: impl Into<Arc<Dfa>>) -> Result<NodeId> {
        let dfa = self.encoded(dfa.into(), "")?;
        self.b.lexeme(dfa)
    }

    /// The node for "any JSON value" (in the current encoding).
    pub(crate) fn any(&mut self) -> Result<NodeId> {
        if let Some(&a) = self.any.get(&self.enc) {
            return Ok(a);
        }
        let id = self.b.push(Node::Never)?;
        self.any.insert(self.enc, id);
        let scalar = self.scalar_any()?;
        let key = self.cached(Lexeme::AnyKey, |this| {
            let content = this.string_dfa(&Map::new(), "")?;
            this.key_quote(&content, "")
        })?;
        let key_lex = self.key_lexeme(key, "")?;
        let syntax = self.obj_syntax();
        let o = self.object_node(vec![], &[], Some((key_lex, id)), syntax, false, &[])?;
        let obj = self.b.push(Node::Object(Box::new(o)))?;
        let arr = self.b.push(Node::Array(ArrayNode {
            prefix: vec![],
            items: Some(id),
            min_items: 0,
            max_items: u32::MAX,
            syntax: self.arr_syntax(),
            contains: None,
            unique: Vec::new(),
            unique_strings: Vec::new(),
        }))?;
        self.b.nodes[id as usize] = Node::Union(vec![scalar, obj, arr]);
        Ok(id)
    }

    fn scalar_any(&mut self) -> Result<NodeId> {
        if self.enc == Encoding::Gemma {
            let key = self.scalar_key(&typed::Schema::read(&Map::new()), T_STR);
            let content = self.gemma_content(key, |this| this.string_dfa(&Map::new(), ""), "")?;
            let string = self.gemma_string(content, "")?;
            let rest = T_NULL | T_BOOL | T_NUM;
            let key = self.scalar_key(&typed::Schema::read(&Map::new()), rest);
            let d = self.cached(key, |this| {
                this.scalar_dfa(&typed::Schema::read(&Map::new()), rest, "")
            })?;
            let others = self.lexeme(d)?;
            return self.b.push(Node::Union(vec![string, others]));
        }
        let d = self.cached(Lexeme::AnyScalar, |this| {
            let s = this.string_dfa(&Map::new(), "")?;
            let s = this.quote(&s, "")?;
            let literals = this.b.regex(
                &format!(
                    "{}|{}|{}",
                    this.literal("null"),
                    this.literal("true"),
                    this.literal("false")
                ),
                "",
            )?;
            let spelling = if this.opts.ijson_numbers {
                NumberSpelling::IJSON
            } else {
                NumberSpelling::JSON
            };
            let number = this.number_spelling(spelling, "")?;
            let max = this.opts.max_lexeme_states;
            s.product(&literals, Op::Or, max)
                .and_then(|d| d.product(&number, Op::Or, max))
                .map_err(|e| this.b.dfa_err(e, "", ""))
        })?;
        self.lexeme(d)
    }

    pub(crate) fn compile(&mut self, schema: &Value, path: &str) -> Result<NodeId> {
        self.depth += 1;
        if self.depth > self.opts.max_schema_depth {
            self.depth -= 1;
            return Err(Error::LimitExceeded {
                what: "schema nesting depth",
                limit: self.opts.max_schema_depth,
                option: "max_schema_depth",
                path: String::new(),
            });
        }
        self.b.check_budget()?;
        let r = self.compile_inner(schema, path);
        self.depth -= 1;
        r
    }

    fn compile_inner(&mut self, schema: &Value, path: &str) -> Result<NodeId> {
        let obj = match schema {
            Value::Bool(true) => return self.any(),
            Value::Bool(false) => return self.b.push(Node::Never),
            Value::Object(o) => o,
            _ => return Err(invalid(path, "a schema must be an object or a boolean")),
        };
        let rewritten;
        let obj = match self.rewrite_unevaluated(obj, path)? {
            Some(o) => {
                rewritten = o;
                &rewritten
            }
            None => obj,
        };
        let rewritten_deps;
        let obj = match self.rewrite_dependent_schemas(obj, path)? {
            Some(o) => {
                rewritten_deps = o;
                &rewritten_deps
            }
            None => obj,
        };
        self.refuse_unsupported(obj, path)?;
        if let Some(rewritten) = self.conditional(obj, path)? {
            return self.compile_conditional(&rewritten, path);
        }
        if let Some(r) = obj.get("$ref") {
            let r = r
                .as_str()
                .ok_or_else(|| invalid(path, "$ref must be a string"))?;
            let has_siblings = obj.keys().any(|k| k != "$ref" && !is_annotation(k));
            if !has_siblings {
                return self.compile_ref(r, path);
            }
            let mut rest = obj.clone();
            rest.remove("$ref");
            let all = Value::Array(vec![serde_json::json!({ "$ref": r }), Value::Object(rest)]);
            let mut m = Map::new();
            m.insert("allOf".into(), all);
            return self.compile(&Value::Object(m), path);
        }
        if let Some(all) = obj.get("allOf") {
            let parts = all
                .as_array()
                .ok_or_else(|| invalid(path, "allOf must be an array"))?;
            let mut rest = obj.clone();
            rest.remove("allOf");
            let mut list: Vec<Value> = parts.clone();
            list.push(Value::Object(rest));
            let merged = self.merge_all(&list, path)?;
            return self.compile(&merged, &format!("{path}/allOf"));
        }
        for kw in ["anyOf", "oneOf"] {
            if let Some(alts) = obj.get(kw) {
                let alts = alts
                    .as_array()
                    .ok_or_else(|| invalid(path, format!("{kw} must be an array")))?;
                if alts.is_empty() {
                    return Err(invalid(path, format!("{kw} must not be empty")));
                }
                let mut rest = obj.clone();
                rest.remove(kw);
                let other = if kw == "anyOf" { "oneOf" } else { "anyOf" };
                if rest.contains_key(other) {
                    // allOf[{anyOf}, {oneOf}]: distribute the first over the second.
                    let mut ids = Vec::new();
                    for (i, alt) in alts.iter().enumerate() {
                        let merged =
                            self.merge_all(&[Value::Object(rest.clone()), alt.clone()], path)?;
                        ids.push(self.compile(&merged, &format!("{path}/{kw}/{i}"))?);
                    }
                    return self.union(ids, kw == "oneOf", path);
                }
                let constrains = rest.keys().any(|k| !is_annotation(k));
                let mut ids = Vec::new();
                let mut schemas = Vec::new();
                for (i, alt) in alts.iter().enumerate() {
                    let p = format!("{path}/{kw}/{i}");
                    let alt = if constrains {
                        self.merge_all(&[Value::Object(rest.clone()), alt.clone()], &p)?
                    } else {
                        alt.clone()
                    };
                    ids.push(self.compile(&alt, &p)?);
                    schemas.push(alt);
                }
                if kw == "oneOf" {
                    return self.compile_one_of(ids, &schemas, path);
                }
                return self.union(ids, false, path);
            }
        }
        if obj.contains_key("const") || obj.contains_key("enum") {
            return self.compile_enum(obj, path);
        }
        if obj.contains_key("not") {
            return self.compile_not(obj, path);
        }
        self.compile_typed(obj, path)
    }

    /// Refuses (or, lenient, drops and lists) the keywords that cannot be enforced.
    fn refuse_unsupported(&mut self, obj: &Map<String, Value>, path: &str) -> Result<()> {
        for (k, _) in obj.iter() {
            let Some(kw) = Keyword::from_name(k) else {
                continue;
            };
            if let Some(reason) = kw.refusal() {
                // Draft 7's `dependencies` with lists of names only: dependentRequired.
                if kw == Keyword::Dependencies
                    && obj[k]
                        .as_object()
                        .is_some_and(|m| m.values().all(Value::is_array))
                {
                    continue;
                }
                self.b.unsupported(k, path, reason)?;
            }
        }
        Ok(())
    }

    /// A lexeme from the caches, or built (and cached unless lenient).
    pub(crate) fn cached(
        &mut self,
        lexeme: Lexeme,
        build: impl FnOnce(&mut Self) -> Result<Dfa>,
    ) -> Result<Arc<Dfa>> {
        if self.opts.lenient {
            return Ok(Arc::new(build(self)?));
        }
        let encoding = match (self.enc, self.json_literals) {
            (Encoding::Python, false) => "py",
            (Encoding::Python, true) => "py+jsonlit",
            (Encoding::Gemma, _) => "gemma",
            _ => "json",
        };
        let key = LexemeKey {
            lexeme,
            max_states: self.opts.max_lexeme_states,
            encoding,
            ijson: self.opts.ijson_numbers,
        };
        let caches = self.caches.clone();
        let d = caches.get_or_build(key.clone(), || -> Result<_> {
            let table = self
                .prebuilt_lexemes
                .then(|| standard_lexemes::prebuilt(&key.to_string()))
                .flatten();
            let d = match table {
                Some(d) => d,
                None => build(self)?,
            };
            let bytes = d.memory();
            Ok((d, bytes))
        })?;
        #[cfg(test)]
        self.built.push((key.to_string(), d.clone()));
        Ok(d)
    }
}

/// `schema` with the type aliases of the tool-calling world (`dict`, `float`, `tuple`, `any`)
/// replaced by their JSON Schema meaning, for validators that do not know them.
pub fn normalize_type_aliases(schema: &Value) -> Value {
    fn fix(t: &Value) -> Option<Value> {
        match t {
            Value::String(s) => match s.as_str() {
                "dict" => Some("object".into()),
                "float" => Some("number".into()),
                "tuple" => Some("array".into()),
                "any" => None,
                _ => Some(t.clone()),
            },
            Value::Array(a) => {
                let v: Vec<Value> = a.iter().filter_map(fix).collect();
                (v.len() == a.len()).then_some(Value::Array(v))
            }
            other => Some(other.clone()),
        }
    }
    let mut out = schema.clone();
    let mut todo: Vec<&mut Value> = vec![&mut out];
    while let Some(v) = todo.pop() {
        match v {
            Value::Object(o) => {
                if let Some(t) = o.get("type") {
                    match fix(t) {
                        Some(t) => {
                            o.insert("type".into(), t);
                        }
                        None => {
                            o.remove("type");
                        }
                    }
                }
                todo.extend(o.values_mut());
            }
            Value::Array(a) => todo.extend(a.iter_mut()),
            _ => {}
        }
    }
    out
}

/// JSON text as it is written inside a JSON string (`"` and `\` escaped).
pub(crate) fn escape_in_json_string(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 8);
    for &b in json {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// The names listed in a schema's `properties`, sorted.
fn property_names(o: &Map<String, Value>) -> Vec<String> {
    let mut v: Vec<String> = o
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn type_set(t: &Value, path: &str) -> Result<u8> {
    let one = |s: &str| -> Result<u8> {
        Ok(match s {
            "null" => T_NULL,
            "boolean" | "bool" => T_BOOL,
            "integer" | "int" => T_INT,
            "number" | "float" => T_NUM | T_INT,
            "string" | "str" => T_STR,
            "object" | "dict" => T_OBJ,
            "array" | "tuple" | "list" => T_ARR,
            "any" => T_ALL,
            _ => return Err(invalid(path, format!("unknown type {s:?}"))),
        })
    };
    match t {
        Value::String(s) => one(s),
        Value::Array(list) => {
            let mut m = 0;
            for x in list {
                m |= one(x
                    .as_str()
                    .ok_or_else(|| invalid(path, "type must list strings"))?)?;
            }
            Ok(m)
        }
        _ => Err(invalid(path, "type must be a string or a list of strings")),
    }
}

fn type_value(t: u8) -> Value {
    let mut v = Vec::new();
    for (bit, name) in [
        (T_NULL, "null"),
        (T_BOOL, "boolean"),
        (T_STR, "string"),
        (T_OBJ, "object"),
        (T_ARR, "array"),
    ] {
        if t & bit != 0 {
            v.push(Value::String(name.into()));
        }
    }
    if t & T_NUM != 0 {
        v.push("number".into());
    } else if t & T_INT != 0 {
        v.push("integer".into());
    }
    Value::Array(v)
}

fn num_pick(a: &Value, b: &Value, max: bool, path: &str) -> Result<Value> {
    let (x, y) = match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x, y),
        _ => return Err(invalid(path, "bounds must be numbers")),
    };
    Ok(if (x >= y) == max {
        a.clone()
    } else {
        b.clone()
    })
}

fn enum_values(k: &str, v: &Value) -> Vec<Value> {
    if k == "const" {
        vec![v.clone()]
    } else {
        v.as_array().cloned().unwrap_or_default()
    }
}

/// JSON Schema equality (numbers compare by value).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn get_count(obj: &Map<String, Value>, k: &str, path: &str) -> Result<Option<u64>> {
    match obj.get(k) {
        None => Ok(None),
        Some(v) => match v.as_f64() {
            Some(f) if f >= 0.0 && f.fract() == 0.0 => Ok(Some(f.min(u64::MAX as f64) as u64)),
            _ => Err(invalid(path, format!("{k} must be a non-negative integer"))),
        },
    }
}
