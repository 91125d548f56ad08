//! JSON Schema → grammar IR.
//!
//! Supported, with exact semantics: `type` (lists, and the aliases `dict`, `float`, `tuple`,
//! `any`), `nullable`, `enum`, `const`, `properties`, `required`, `additionalProperties`,
//! `items`, `prefixItems` (and draft-07 array `items` with `additionalItems`), `minItems`,
//! `maxItems`, `minLength`, `maxLength`, `pattern`, `format` (date, time, date-time, email, uuid,
//! ipv4, uri), `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `anyOf`, `oneOf`
//! (when its alternatives are provably disjoint), `allOf` (where the parts merge), `$ref` into
//! the same document (`$defs`, `definitions`, any JSON pointer; recursion included).
//! Annotations are ignored. Any other assertion keyword is refused with
//! [`Error::UnsupportedKeyword`], unless [`CompileOptions::lenient`] is set, in which case it is
//! dropped and listed in [`crate::Grammar::dropped_keywords`].
//!
//! Value encoding policy (what the grammar writes; every output is valid):
//! - strings: see [`crate::automaton::dfa::Dfa::json_string`] for escapes;
//! - integers: `-?(0|[1-9][0-9]*)` with at most 19 digits, optionally followed by `.0…`;
//! - numbers: at most 19 integer digits and 20 fraction digits; an exponent (at most 2 digits, so values stay finite doubles)
//!   only when the number has no bounds;
//! - `-0` is not produced.

mod numbers;
mod strings;

use crate::automaton::dfa::{Dfa, DfaError, Op};
use crate::error::{Error, Result};
use crate::grammar::{
    ArrayNode, Grammar, GrammarInner, KeyTrie, LexId, Node, NodeId, ObjectNode, Syntax,
};
use numbers::{ge_regex, int_range_regex, le_regex, Dec, BOUNDED_NUMBER, NUMBER};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strings::{format_regex, translate_ecma};

/// How to compile a schema, and the limits that keep hostile schemas bounded.
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// Drop keywords that cannot be enforced (listing them) instead of refusing the schema.
    pub lenient: bool,
    /// Most whitespace bytes in one gap between JSON tokens (0 = compact JSON only).
    pub max_whitespace: u16,
    /// Most nested objects/arrays in an output.
    pub max_depth: u32,
    /// Most nested subschemas while compiling.
    pub max_schema_depth: usize,
    /// Most states in one lexeme automaton.
    pub max_lexeme_states: usize,
    /// Most states over all of a grammar's distinct lexeme automata (one shared by many values
    /// counts once).
    pub max_total_states: usize,
    /// Most grammar nodes.
    pub max_nodes: usize,
    /// Longest compile time.
    pub max_compile_time: Duration,
    /// Most JSON values in the schema document(s) (every object, array, string, number,
    /// boolean and null counts one; a dialect counts all its tools' parameters together). This is
    /// the schema-size limit: it is checked before anything else, so an oversized document is
    /// refused in one linear pass. Typical schemas weigh 10–40 bytes of JSON per value.
    pub max_schema_values: usize,
    /// Most heap bytes of one compiled grammar, estimated as it is built: lexeme automata
    /// (transition tables), grammar nodes, object key lists and key tries.
    pub max_memory: usize,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            lenient: false,
            max_whitespace: 20,
            max_depth: 64,
            max_schema_depth: 200,
            max_lexeme_states: 50_000,
            max_total_states: 200_000,
            max_nodes: 200_000,
            max_compile_time: Duration::from_secs(10),
            max_schema_values: 1_000_000,
            max_memory: 256 << 20,
        }
    }
}

/// Compiles `schema` into a grammar.
pub(crate) fn compile(schema: &Value, options: &CompileOptions) -> Result<Grammar> {
    check_schema_shape([schema], options)?;
    let mut c = Compiler::new(schema, options);
    let root = c.compile(schema, "")?;
    c.finish(root, true, Vec::new(), Vec::new())
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
            });
        }
        if d > json_limit {
            return Err(Error::LimitExceeded {
                what: "schema nesting depth",
                limit: options.max_schema_depth,
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

/// Keywords that never constrain: ignored.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "$vocabulary",
    "$anchor",
    "$dynamicAnchor",
];

/// Assertion keywords callmask cannot enforce exactly, with the reason.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("not", "negation is not supported"),
    ("if", "conditionals are not supported"),
    ("then", "conditionals are not supported"),
    ("else", "conditionals are not supported"),
    (
        "uniqueItems",
        "item uniqueness cannot be enforced by an automaton",
    ),
    ("contains", "`contains` is not supported"),
    ("minContains", "`contains` is not supported"),
    ("maxContains", "`contains` is not supported"),
    ("multipleOf", "`multipleOf` is not supported"),
    ("minProperties", "property counts are not supported"),
    ("maxProperties", "property counts are not supported"),
    ("patternProperties", "pattern properties are not supported"),
    ("propertyNames", "`propertyNames` is not supported"),
    ("dependentRequired", "dependencies are not supported"),
    ("dependentSchemas", "dependencies are not supported"),
    ("dependencies", "dependencies are not supported"),
    (
        "unevaluatedProperties",
        "`unevaluatedProperties` is not supported",
    ),
    ("unevaluatedItems", "`unevaluatedItems` is not supported"),
    ("$dynamicRef", "dynamic references are not supported"),
    ("$recursiveRef", "recursive references are not supported"),
];

/// The JSON types, as a bit set.
const T_NULL: u8 = 1;
const T_BOOL: u8 = 2;
const T_INT: u8 = 4;
const T_NUM: u8 = 8;
const T_STR: u8 = 16;
const T_OBJ: u8 = 32;
const T_ARR: u8 = 64;
const T_ALL: u8 = 127;

pub(crate) use crate::parse::ArgEncoding as Encoding;

pub(crate) struct Compiler<'a> {
    pub(crate) root: &'a Value,
    pub(crate) opts: &'a CompileOptions,
    pub(crate) nodes: Vec<Node>,
    pub(crate) lexemes: Vec<Arc<Dfa>>,
    refs: HashMap<(Encoding, String), NodeId>,
    pub(crate) dropped: Vec<String>,
    depth: usize,
    any: HashMap<Encoding, NodeId>,
    total_states: usize,
    /// Estimated heap bytes of the grammar so far.
    memory: usize,
    deadline: Instant,
    /// The encoding values are compiled for.
    pub(crate) enc: Encoding,
}

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

fn ptr(path: &str) -> String {
    if path.is_empty() {
        "#".into()
    } else {
        format!("#{path}")
    }
}

fn escape_ptr(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

impl<'a> Compiler<'a> {
    pub(crate) fn new(root: &'a Value, opts: &'a CompileOptions) -> Self {
        Compiler {
            root,
            opts,
            nodes: Vec::new(),
            lexemes: Vec::new(),
            refs: HashMap::new(),
            dropped: Vec::new(),
            depth: 0,
            any: HashMap::new(),
            total_states: 0,
            memory: 0,
            deadline: Instant::now() + opts.max_compile_time,
            enc: Encoding::Json,
        }
    }

    /// Switches to another schema document (a function's parameters) and encoding.
    pub(crate) fn set_document(&mut self, root: &'a Value, enc: Encoding) {
        if !std::ptr::eq(root, self.root) {
            self.refs.clear();
        }
        self.root = root;
        self.enc = enc;
    }

    /// Finalizes the grammar with `root` as its start node.
    pub(crate) fn finish(
        self,
        root: NodeId,
        json_root: bool,
        specials: Vec<String>,
        functions: Vec<String>,
    ) -> Result<Grammar> {
        let mut inner = GrammarInner {
            nullable: Vec::new(),
            nodes: self.nodes,
            lexemes: self.lexemes,
            root,
            max_whitespace: self.opts.max_whitespace,
            max_depth: self.opts.max_depth,
            dropped: self.dropped,
            root_ws: json_root,
            pop_any: !json_root,
            specials,
            functions,
        };
        finalize(&mut inner, self.opts)?;
        Ok(Grammar {
            inner: Arc::new(inner),
        })
    }

    /// The object syntax of the current encoding.
    fn obj_syntax(&self) -> Syntax {
        Syntax {
            space_only: self.enc == Encoding::JsonInString,
            ..Syntax::OBJECT
        }
    }

    /// The array syntax of the current encoding.
    fn arr_syntax(&self) -> Syntax {
        Syntax {
            space_only: self.enc == Encoding::JsonInString,
            ..Syntax::ARRAY
        }
    }

    /// A string literal of the current encoding over a content automaton.
    fn quote(&self, content: &Dfa, path: &str) -> Result<Dfa> {
        let max = self.opts.max_lexeme_states;
        let r = match self.enc {
            Encoding::Json | Encoding::JsonInString => content.json_string(max),
            Encoding::Python => content
                .python_string(b'\'', max)
                .and_then(|a| a.product(&content.python_string(b'"', max)?, Op::Or, max)),
        };
        r.map_err(|e| self.dfa_err(e, path, ""))
    }

    /// A JSON literal (`null`, `true`, `false`) as the current encoding writes it.
    fn literal(&self, json: &str) -> &'static str {
        match (self.enc, json) {
            (Encoding::Python, "null") => "None",
            (Encoding::Python, "true") => "True",
            (Encoding::Python, "false") => "False",
            (_, "null") => "null",
            (_, "true") => "true",
            _ => "false",
        }
    }

    /// The spellings of an object key in the current encoding (Python has two).
    fn key_spellings(&self, k: &str) -> Result<Vec<Vec<u8>>> {
        Ok(match self.enc {
            Encoding::Json => vec![serde_json::to_vec(k)?],
            Encoding::JsonInString => vec![escape_in_json_string(&serde_json::to_vec(k)?)],
            Encoding::Python => vec![
                py_quote(k, '\'').into_bytes(),
                py_quote(k, '"').into_bytes(),
            ],
        })
    }

    /// Builds an object node from `(key, value)` entries (keys unencoded) in the current encoding.
    pub(crate) fn object_node(
        &mut self,
        entries: Vec<(String, NodeId)>,
        required: &[String],
        additional: Option<(LexId, NodeId)>,
        syntax: Syntax,
        kwargs: bool,
    ) -> Result<ObjectNode> {
        let mut spelled: Vec<(Vec<u8>, usize)> = Vec::new();
        for (i, (k, _)) in entries.iter().enumerate() {
            let sp = if kwargs {
                vec![format!("{k}=").into_bytes()]
            } else {
                self.key_spellings(k)?
            };
            spelled.extend(sp.into_iter().map(|s| (s, i)));
        }
        spelled.sort();
        spelled.dedup_by(|a, b| a.0 == b.0);
        let keys: Vec<Vec<u8>> = spelled.iter().map(|e| e.0.clone()).collect();
        let values = spelled.iter().map(|e| entries[e.1].1).collect();
        let req = spelled
            .iter()
            .enumerate()
            .filter(|(_, e)| required.contains(&entries[e.1].0))
            .map(|(i, _)| i as u32)
            .collect();
        let alias = if spelled.len() > entries.len() {
            (0..spelled.len())
                .map(|i| {
                    (0..spelled.len())
                        .find(|&j| j != i && spelled[j].1 == spelled[i].1)
                        .unwrap_or(i) as u32
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(ObjectNode {
            trie: KeyTrie::new(&keys),
            keys,
            values,
            required: req,
            unavailable: vec![],
            additional,
            syntax,
            alias,
        })
    }

    /// Registers a lexeme built outside `lexeme()` (object keys): escaped inside JSON strings.
    fn key_lexeme(&mut self, dfa: Arc<Dfa>, path: &str) -> Result<LexId> {
        let dfa = self.encoded(dfa, path)?;
        self.lexeme_id(dfa)
    }

    /// `dfa` as the current encoding writes it: unchanged, or escaped inside a JSON string.
    fn encoded(&mut self, dfa: Arc<Dfa>, path: &str) -> Result<Arc<Dfa>> {
        if self.enc != Encoding::JsonInString {
            return Ok(dfa);
        }
        // Shared process-wide, keyed by the source automaton's address; the entry holds the
        // source, so the address cannot be reused while the entry lives.
        let key = Arc::as_ptr(&dfa) as usize;
        if let Some((_, e)) = escaped_cache().get(&key) {
            return Ok(e.clone());
        }
        let e = Arc::new(
            dfa.json_escaped(self.opts.max_lexeme_states)
                .map_err(|e| self.dfa_err(e, path, ""))?,
        );
        let mut c = escaped_cache();
        if c.len() >= LEXEME_CACHE_ENTRIES {
            c.clear();
        }
        c.insert(key, (dfa, e.clone()));
        Ok(e)
    }

    /// Adds `bytes` to the grammar's estimated memory ([`CompileOptions::max_memory`]).
    fn charge(&mut self, bytes: usize) -> Result<()> {
        self.memory = self.memory.saturating_add(bytes);
        if self.memory > self.opts.max_memory {
            return Err(Error::LimitExceeded {
                what: "grammar memory (bytes)",
                limit: self.opts.max_memory,
            });
        }
        Ok(())
    }

    /// Adds a lexeme's states to the total ([`CompileOptions::max_total_states`]).
    fn count_states(&mut self, dfa: &Dfa) -> Result<()> {
        self.total_states += dfa.state_count();
        if self.total_states > self.opts.max_total_states {
            return Err(Error::LimitExceeded {
                what: "automaton states",
                limit: self.opts.max_total_states,
            });
        }
        Ok(())
    }

    pub(crate) fn push(&mut self, node: Node) -> Result<NodeId> {
        if self.nodes.len() >= self.opts.max_nodes {
            return Err(Error::LimitExceeded {
                what: "grammar nodes",
                limit: self.opts.max_nodes,
            });
        }
        // The node, its nullable flag, and what it owns on the heap.
        self.charge(std::mem::size_of::<Node>() + 1 + node.heap_bytes())?;
        self.nodes.push(node);
        Ok(self.nodes.len() as NodeId - 1)
    }

    pub(crate) fn lexeme(&mut self, dfa: impl Into<Arc<Dfa>>) -> Result<NodeId> {
        let dfa: Arc<Dfa> = dfa.into();
        let dfa = self.encoded(dfa, "")?;
        if dfa.is_empty() {
            return self.push(Node::Never);
        }
        let id = self.lexeme_id(dfa)?;
        self.push(Node::Lex(id))
    }

    /// The id of `dfa` in this grammar (one id per shared automaton, whose states and memory
    /// count once).
    fn lexeme_id(&mut self, dfa: Arc<Dfa>) -> Result<LexId> {
        if let Some(i) = self.lexemes.iter().position(|d| Arc::ptr_eq(d, &dfa)) {
            return Ok(i as LexId);
        }
        self.count_states(&dfa)?;
        self.charge(dfa.memory() + std::mem::size_of::<Arc<Dfa>>())?;
        self.lexemes.push(dfa);
        Ok(self.lexemes.len() as LexId - 1)
    }

    pub(crate) fn dfa_err(&self, e: DfaError, path: &str, pattern: &str) -> Error {
        match e {
            DfaError::TooLarge => Error::LimitExceeded {
                what: "states in one lexeme automaton",
                limit: self.opts.max_lexeme_states,
            },
            DfaError::Regex(message) => Error::InvalidPattern {
                pattern: pattern.into(),
                path: ptr(path),
                message,
            },
        }
    }

    pub(crate) fn regex(&self, re: &str, path: &str) -> Result<Dfa> {
        Dfa::from_regex(re, self.opts.max_lexeme_states).map_err(|e| self.dfa_err(e, path, re))
    }

    fn and(&self, a: &Dfa, b: &Dfa, path: &str) -> Result<Dfa> {
        a.product(b, Op::And, self.opts.max_lexeme_states)
            .map_err(|e| self.dfa_err(e, path, ""))
    }

    fn unsupported(&mut self, keyword: &str, path: &str, reason: &str) -> Result<()> {
        if self.opts.lenient {
            self.dropped.push(format!("{keyword} at {}", ptr(path)));
            Ok(())
        } else {
            Err(Error::UnsupportedKeyword {
                keyword: keyword.into(),
                path: ptr(path),
                reason: reason.into(),
            })
        }
    }

    fn check_budget(&self) -> Result<()> {
        if Instant::now() > self.deadline {
            return Err(Error::LimitExceeded {
                what: "compile time (ms)",
                limit: self.opts.max_compile_time.as_millis() as usize,
            });
        }
        Ok(())
    }

    /// The node for "any JSON value" (in the current encoding).
    pub(crate) fn any(&mut self) -> Result<NodeId> {
        if let Some(&a) = self.any.get(&self.enc) {
            return Ok(a);
        }
        let id = self.push(Node::Never)?;
        self.any.insert(self.enc, id);
        let scalar = self.scalar_any()?;
        let key = self.cached("any-key".into(), |this| {
            let content = this.string_dfa(&Map::new(), "")?;
            this.quote(&content, "")
        })?;
        let key_lex = self.key_lexeme(key, "")?;
        let syntax = self.obj_syntax();
        let o = self.object_node(vec![], &[], Some((key_lex, id)), syntax, false)?;
        let obj = self.push(Node::Object(Box::new(o)))?;
        let arr = self.push(Node::Array(ArrayNode {
            prefix: vec![],
            items: Some(id),
            min_items: 0,
            max_items: u32::MAX,
            syntax: self.arr_syntax(),
        }))?;
        self.nodes[id as usize] = Node::Union(vec![scalar, obj, arr]);
        Ok(id)
    }

    fn scalar_any(&mut self) -> Result<NodeId> {
        let d = self.cached("any-scalar".into(), |this| {
            let s = this.string_dfa(&Map::new(), "")?;
            let s = this.quote(&s, "")?;
            let rest = this.regex(
                &format!(
                    "{}|{}|{}|{NUMBER}",
                    this.literal("null"),
                    this.literal("true"),
                    this.literal("false")
                ),
                "",
            )?;
            s.product(&rest, Op::Or, this.opts.max_lexeme_states)
                .map_err(|e| this.dfa_err(e, "", ""))
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
            });
        }
        self.check_budget()?;
        let r = self.compile_inner(schema, path);
        self.depth -= 1;
        r
    }

    fn compile_inner(&mut self, schema: &Value, path: &str) -> Result<NodeId> {
        let obj = match schema {
            Value::Bool(true) => return self.any(),
            Value::Bool(false) => return self.push(Node::Never),
            Value::Object(o) => o,
            _ => return Err(invalid(path, "a schema must be an object or a boolean")),
        };
        self.refuse_unsupported(obj, path)?;
        if let Some(r) = obj.get("$ref") {
            let r = r
                .as_str()
                .ok_or_else(|| invalid(path, "$ref must be a string"))?;
            let has_siblings = obj
                .keys()
                .any(|k| k != "$ref" && !ANNOTATIONS.contains(&k.as_str()));
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
                let constrains = rest.keys().any(|k| !ANNOTATIONS.contains(&k.as_str()));
                let mut ids = Vec::new();
                for (i, alt) in alts.iter().enumerate() {
                    let p = format!("{path}/{kw}/{i}");
                    let id = if constrains {
                        let merged =
                            self.merge_all(&[Value::Object(rest.clone()), alt.clone()], &p)?;
                        self.compile(&merged, &p)?
                    } else {
                        self.compile(alt, &p)?
                    };
                    ids.push(id);
                }
                return self.union(ids, kw == "oneOf", path);
            }
        }
        if obj.contains_key("const") || obj.contains_key("enum") {
            return self.compile_enum(obj, path);
        }
        self.compile_typed(obj, path)
    }

    /// Refuses (or, lenient, drops and lists) the keywords that cannot be enforced.
    fn refuse_unsupported(&mut self, obj: &Map<String, Value>, path: &str) -> Result<()> {
        for (k, _) in obj.iter() {
            if let Some((_, reason)) = UNSUPPORTED.iter().find(|(u, _)| u == k) {
                if k == "uniqueItems" && obj[k] == Value::Bool(false) {
                    continue;
                }
                self.unsupported(k, path, reason)?;
            }
        }
        Ok(())
    }

    fn compile_ref(&mut self, r: &str, path: &str) -> Result<NodeId> {
        let pointer = self.ref_pointer(r, path)?;
        if let Some(&id) = self.refs.get(&(self.enc, pointer.clone())) {
            return Ok(id);
        }
        let target = self
            .root
            .pointer(&pointer)
            .ok_or_else(|| Error::UnresolvedRef {
                reference: r.into(),
                path: ptr(path),
            })?;
        let id = self.push(Node::Never)?;
        self.refs.insert((self.enc, pointer.clone()), id);
        let t = self.compile(target, &pointer)?;
        self.nodes[id as usize] = Node::Union(vec![t]);
        Ok(id)
    }

    /// The JSON pointer a `$ref` names, in the document being compiled.
    fn ref_pointer(&self, r: &str, path: &str) -> Result<String> {
        let unresolved = || Error::UnresolvedRef {
            reference: r.into(),
            path: ptr(path),
        };
        let frag = r.strip_prefix('#').ok_or_else(unresolved)?;
        if !(frag.is_empty() || frag.starts_with('/')) {
            return Err(unresolved());
        }
        // Percent-decoding of the fragment.
        let mut out = Vec::new();
        let b = frag.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' && i + 2 < b.len() {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                if let Some(v) = h.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    out.push(v);
                    i += 3;
                    continue;
                }
            }
            out.push(b[i]);
            i += 1;
        }
        String::from_utf8(out).map_err(|_| unresolved())
    }

    /// Resolves a top-level `$ref` of a part for merging (one level, no recursion needed).
    fn deref_part(&self, part: &Value, path: &str, depth: usize) -> Result<Value> {
        if depth > 32 {
            return Err(Error::LimitExceeded {
                what: "$ref chain length",
                limit: 32,
            });
        }
        if let Value::Object(o) = part {
            if let Some(r) = o.get("$ref").and_then(Value::as_str) {
                let p = self.ref_pointer(r, path)?;
                let t = self.root.pointer(&p).ok_or_else(|| Error::UnresolvedRef {
                    reference: r.into(),
                    path: ptr(path),
                })?;
                let t = self.deref_part(t, path, depth + 1)?;
                let mut rest = o.clone();
                rest.remove("$ref");
                if rest.keys().all(|k| ANNOTATIONS.contains(&k.as_str())) {
                    return Ok(t);
                }
                return self.merge_two(&t, &Value::Object(rest), path, depth + 1);
            }
            if let Some(Value::Array(all)) = o.get("allOf") {
                let mut rest = o.clone();
                rest.remove("allOf");
                let mut acc = Value::Object(rest);
                for p in all {
                    let p = self.deref_part(p, path, depth + 1)?;
                    acc = self.merge_two(&acc, &p, path, depth + 1)?;
                }
                return Ok(acc);
            }
        }
        Ok(part.clone())
    }

    fn merge_all(&self, parts: &[Value], path: &str) -> Result<Value> {
        let mut acc = Value::Object(Map::new());
        for p in parts {
            let p = self.deref_part(p, path, 0)?;
            acc = self.merge_two(&acc, &p, path, 0)?;
        }
        Ok(acc)
    }

    /// The conjunction of two schemas as one schema, where keywords combine exactly.
    fn merge_two(&self, a: &Value, b: &Value, path: &str, depth: usize) -> Result<Value> {
        let (a, b) = match (a, b) {
            (Value::Bool(false), _) | (_, Value::Bool(false)) => return Ok(Value::Bool(false)),
            (Value::Bool(true), x) | (x, Value::Bool(true)) => {
                return self.deref_part(x, path, depth)
            }
            (Value::Object(a), Value::Object(b)) => (a, b),
            _ => return Err(invalid(path, "allOf parts must be schemas")),
        };
        let b = match self.deref_part(&Value::Object(b.clone()), path, depth)? {
            Value::Object(b) => b,
            other => return self.merge_two(&Value::Object(a.clone()), &other, path, depth),
        };
        // Keywords that depend on their siblings (additionalProperties on properties, items on
        // prefixItems, additionalItems on array items) stay exact only if the other side adds
        // no sibling they would have to look past.
        for (x, y) in [(a, &b), (&b, a)] {
            let keys = property_names;
            let len = |o: &Map<String, Value>, k: &str| {
                o.get(k).and_then(Value::as_array).map_or(0, Vec::len)
            };
            let restricts = |v: Option<&Value>| v.is_some_and(|v| v != &Value::Bool(true));
            let conflict = (restricts(x.get("additionalProperties"))
                && y.contains_key("properties")
                && keys(x)
                    != keys(y)
                        .into_iter()
                        .chain(keys(x))
                        .collect::<std::collections::BTreeSet<_>>()
                        .into_iter()
                        .collect::<Vec<_>>())
                || (restricts(x.get("items"))
                    && x.get("items").is_some_and(|i| !i.is_array())
                    && len(y, "prefixItems") > len(x, "prefixItems"))
                || (restricts(x.get("additionalItems")) && len(y, "items") > len(x, "items"))
                || (restricts(x.get("items"))
                    && x.get("items").is_some_and(|i| !i.is_array())
                    && y.get("items").is_some_and(Value::is_array));
            if conflict {
                return Err(Error::UnsupportedKeyword {
                    keyword: "allOf".into(),
                    path: ptr(path),
                    reason: "parts whose additionalProperties/items would have to look past properties/prefixItems of another part cannot be merged".into(),
                });
            }
        }
        let mut out = a.clone();
        // Unions: at most one side may carry them; the other side is distributed into them.
        for kw in ["anyOf", "oneOf"] {
            if out.contains_key(kw) && b.contains_key(kw) {
                let x = out.remove(kw).unwrap();
                let y = b[kw].clone();
                let mut m = Map::new();
                m.insert(kw.into(), x);
                let mut n = Map::new();
                n.insert(kw.into(), y);
                // allOf of two unions: expand the product for anyOf; refuse for oneOf.
                if kw == "oneOf" {
                    return Err(Error::UnsupportedKeyword {
                        keyword: "oneOf".into(),
                        path: ptr(path),
                        reason: "allOf of two oneOf cannot be merged".into(),
                    });
                }
                let (xs, ys) = (
                    m[kw].as_array().cloned().unwrap_or_default(),
                    n[kw].as_array().cloned().unwrap_or_default(),
                );
                let mut prod = Vec::new();
                for x in &xs {
                    for y in &ys {
                        prod.push(serde_json::json!({ "allOf": [x, y] }));
                    }
                }
                out.insert(kw.into(), Value::Array(prod));
                let mut b2 = b.clone();
                b2.remove(kw);
                return self.merge_two(&Value::Object(out), &Value::Object(b2), path, depth);
            }
        }
        for (k, bv) in b.iter() {
            let Some(av) = out.get(k).cloned() else {
                out.insert(k.clone(), bv.clone());
                continue;
            };
            if &av == bv {
                continue;
            }
            let merged = match k.as_str() {
                "type" => {
                    let ta = type_set(&av, path)?;
                    let tb = type_set(bv, path)?;
                    // "number" includes "integer" in these sets, so the intersection is exact.
                    let t = ta & tb;
                    if t == 0 {
                        // No type left: nothing matches.
                        return Ok(Value::Bool(false));
                    }
                    type_value(t)
                }
                "required" => {
                    let mut r: Vec<Value> = av.as_array().cloned().unwrap_or_default();
                    for x in bv.as_array().cloned().unwrap_or_default() {
                        if !r.contains(&x) {
                            r.push(x);
                        }
                    }
                    Value::Array(r)
                }
                "properties" => {
                    let (pa, pb) = match (av.as_object(), bv.as_object()) {
                        (Some(x), Some(y)) => (x, y),
                        _ => return Err(invalid(path, "properties must be an object")),
                    };
                    let mut m = pa.clone();
                    for (pk, ps) in pb {
                        match m.get(pk) {
                            Some(x) => {
                                let both = serde_json::json!({ "allOf": [x, ps] });
                                m.insert(pk.clone(), both);
                            }
                            None => {
                                m.insert(pk.clone(), ps.clone());
                            }
                        }
                    }
                    Value::Object(m)
                }
                "items" | "additionalProperties" if av.is_object() || av.is_boolean() => {
                    if k == "additionalProperties" {
                        // Exact only when both sides list the same properties.
                        if property_names(a) != property_names(&b) {
                            return Err(Error::UnsupportedKeyword {
                                keyword: "additionalProperties".into(),
                                path: ptr(path),
                                reason: "allOf parts with different properties and additionalProperties cannot be merged".into(),
                            });
                        }
                    }
                    serde_json::json!({ "allOf": [av, bv] })
                }
                "minimum" | "exclusiveMinimum" | "minLength" | "minItems" => {
                    num_pick(&av, bv, true, path)?
                }
                "maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" => {
                    num_pick(&av, bv, false, path)?
                }
                "enum" | "const" => {
                    // keep both: compile_enum filters values by the rest of the schema
                    let va = enum_values(k, &av);
                    let vb = enum_values(k, bv);
                    let both: Vec<Value> = va
                        .into_iter()
                        .filter(|x| vb.iter().any(|y| json_eq(x, y)))
                        .collect();
                    out.remove("const");
                    out.insert("enum".into(), Value::Array(both));
                    continue;
                }
                "pattern" | "format" => {
                    // Two patterns (or formats) that must both hold: the keyword becomes the list
                    // of them, which `string_dfa` intersects. The list lives in the keyword's own
                    // value, never in a key of ours that a user's schema could also contain.
                    let mut all = Vec::new();
                    for v in [&av, bv] {
                        match v {
                            Value::String(_) => all.push(v.clone()),
                            Value::Array(list) if list.iter().all(Value::is_string) => {
                                all.extend(list.iter().cloned())
                            }
                            _ => return Err(invalid(path, format!("{k} must be a string"))),
                        }
                    }
                    Value::Array(all)
                }
                _ if ANNOTATIONS.contains(&k.as_str()) => continue,
                _ => {
                    return Err(Error::UnsupportedKeyword {
                        keyword: k.clone(),
                        path: ptr(path),
                        reason:
                            "allOf parts with different values for this keyword cannot be merged"
                                .into(),
                    })
                }
            };
            out.insert(k.clone(), merged);
        }
        Ok(Value::Object(out))
    }

    fn union(&mut self, ids: Vec<NodeId>, one_of: bool, path: &str) -> Result<NodeId> {
        if one_of {
            self.check_disjoint(&ids, path)?;
        }
        if ids.len() == 1 {
            return Ok(ids[0]);
        }
        self.push(Node::Union(ids))
    }

    /// Refuses a `oneOf` whose alternatives might both match one value.
    fn check_disjoint(&mut self, ids: &[NodeId], path: &str) -> Result<()> {
        // Alternatives reached through unfinished $refs cannot be inspected yet: refuse.
        let mut firsts = Vec::new();
        for &id in ids {
            match self.first_bytes(id, 0) {
                Some(f) => firsts.push(f),
                None => {
                    return self.unsupported(
                        "oneOf",
                        path,
                        "alternatives that cannot be proven disjoint",
                    );
                }
            }
        }
        for i in 0..ids.len() {
            for j in i + 1..ids.len() {
                let overlap = (0..4).any(|w| firsts[i][w] & firsts[j][w] != 0);
                if overlap && !self.disjoint(ids[i], ids[j], 0) {
                    return self.unsupported(
                        "oneOf",
                        path,
                        "alternatives that may overlap (only provably disjoint ones are supported)",
                    );
                }
            }
        }
        Ok(())
    }

    /// The first bytes a node's values can start with, or None if not yet known.
    fn first_bytes(&self, id: NodeId, depth: usize) -> Option<[u64; 4]> {
        if depth > 50 {
            return None;
        }
        let mut set = [0u64; 4];
        let mut add = |b: u8| set[b as usize / 64] |= 1 << (b % 64);
        match &self.nodes[id as usize] {
            Node::Lex(l) => {
                let d = &self.lexemes[*l as usize];
                for b in 0..=255u8 {
                    if d.next(d.start(), b) != Dfa::DEAD {
                        add(b);
                    }
                }
            }
            Node::Object(o) => add(o.syntax.open),
            Node::Array(a) => add(a.syntax.open),
            Node::Never => {}
            Node::Union(alts) => {
                if alts.is_empty() {
                    return None; // a $ref placeholder still being compiled
                }
                for &a in alts {
                    let f = self.first_bytes(a, depth + 1)?;
                    for w in 0..4 {
                        set[w] |= f[w];
                    }
                }
            }
            _ => return None,
        }
        Some(set)
    }

    /// True when no value matches both nodes (conservative: false when unsure).
    fn disjoint(&self, a: NodeId, b: NodeId, depth: usize) -> bool {
        if depth > 20 {
            return false;
        }
        match (&self.nodes[a as usize], &self.nodes[b as usize]) {
            (Node::Never, _) | (_, Node::Never) => true,
            (Node::Union(xs), _) => {
                !xs.is_empty() && xs.iter().all(|&x| self.disjoint(x, b, depth + 1))
            }
            (_, Node::Union(ys)) => {
                !ys.is_empty() && ys.iter().all(|&y| self.disjoint(a, y, depth + 1))
            }
            (Node::Lex(x), Node::Lex(y)) => {
                let (x, y) = (&self.lexemes[*x as usize], &self.lexemes[*y as usize]);
                x.product(y, Op::And, self.opts.max_lexeme_states)
                    .map(|d| d.is_empty())
                    .unwrap_or(false)
            }
            (Node::Object(x), Node::Object(y)) => {
                // A key required by both whose values are disjoint (a discriminator).
                x.required.iter().any(|&kx| {
                    let key = &x.keys[kx as usize];
                    y.keys.iter().position(|k| k == key).is_some_and(|ky| {
                        y.required.contains(&(ky as u32))
                            && self.disjoint(x.values[kx as usize], y.values[ky], depth + 1)
                    })
                }) || {
                    // A key required by one that the other forbids.
                    let forbids = |p: &ObjectNode, q: &ObjectNode| {
                        p.required.iter().any(|&k| {
                            q.additional.is_none() && !q.keys.contains(&p.keys[k as usize])
                        })
                    };
                    forbids(x, y) || forbids(y, x)
                }
            }
            (Node::Array(x), Node::Array(y)) => {
                x.max_items < y.min_items || y.max_items < x.min_items
            }
            (Node::Lex(_), _) | (_, Node::Lex(_)) => true,
            (Node::Object(_), Node::Array(_)) | (Node::Array(_), Node::Object(_)) => true,
            _ => false,
        }
    }

    fn compile_enum(&mut self, obj: &Map<String, Value>, path: &str) -> Result<NodeId> {
        let mut values: Vec<Value> = Vec::new();
        if let Some(c) = obj.get("const") {
            values.push(c.clone());
        }
        if let Some(e) = obj.get("enum") {
            let e = e
                .as_array()
                .ok_or_else(|| invalid(path, "enum must be an array"))?;
            if obj.contains_key("const") {
                values.retain(|v| e.iter().any(|x| json_eq(v, x)));
            } else {
                values.extend(e.iter().cloned());
            }
        }
        // Other keywords filter the values.
        let mut rest = obj.clone();
        rest.remove("const");
        rest.remove("enum");
        let only_type = rest
            .keys()
            .all(|k| k == "type" || k == "nullable" || ANNOTATIONS.contains(&k.as_str()));
        if only_type && rest.contains_key("type") {
            // The common case, `{"type": T, "enum": [...]}`: filter by type directly.
            let mut types = type_set(&rest["type"], path)?;
            if rest.get("nullable") == Some(&Value::Bool(true)) {
                types |= T_NULL;
            }
            values.retain(|v| {
                types
                    & match v {
                        Value::Null => T_NULL,
                        Value::Bool(_) => T_BOOL,
                        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => T_INT,
                        Value::Number(_) => T_NUM,
                        Value::String(_) => T_STR,
                        Value::Array(_) => T_ARR,
                        Value::Object(_) => T_OBJ,
                    }
                    != 0
            });
        } else if rest.keys().any(|k| !ANNOTATIONS.contains(&k.as_str())) {
            let mut check = rest.clone();
            for d in ["$defs", "definitions"] {
                if let Some(v) = self.root.get(d) {
                    check.insert(d.into(), v.clone());
                }
            }
            let v = jsonschema::options()
                .should_validate_formats(true)
                .build(&Value::Object(check))
                .map_err(|e| {
                    invalid(
                        path,
                        format!("cannot check enum values against the schema: {e}"),
                    )
                })?;
            values.retain(|x| v.is_valid(x));
        }
        let mut scalars_text: Vec<Vec<u8>> = Vec::new();
        let mut strings: Vec<Vec<u8>> = Vec::new();
        let mut others: Vec<NodeId> = Vec::new();
        for v in &values {
            self.check_budget()?;
            match v {
                Value::String(s) => strings.push(s.as_bytes().to_vec()),
                Value::Number(n) => {
                    scalars_text.push(n.to_string().into_bytes());
                    if let Some(f) = n.as_f64() {
                        if f.fract() == 0.0 && f.abs() < 1e19 {
                            let i = f as i128;
                            scalars_text.push(i.to_string().into_bytes());
                            scalars_text.push(format!("{i}.0").into_bytes());
                        }
                    }
                }
                Value::Bool(b) => scalars_text.push(
                    self.literal(if *b { "true" } else { "false" })
                        .as_bytes()
                        .to_vec(),
                ),
                Value::Null => scalars_text.push(self.literal("null").as_bytes().to_vec()),
                Value::Array(items) => {
                    let mut prefix = Vec::new();
                    for (i, it) in items.iter().enumerate() {
                        prefix.push(self.const_node(it, &format!("{path}/enum/{i}"))?);
                    }
                    let n = items.len() as u32;
                    others.push(self.push(Node::Array(ArrayNode {
                        prefix,
                        items: None,
                        min_items: n,
                        max_items: n,
                        syntax: self.arr_syntax(),
                    }))?);
                }
                Value::Object(_) => others.push(self.const_node(v, path)?),
            }
        }
        if !strings.is_empty() || !scalars_text.is_empty() {
            let key = format!("enum|{strings:?}|{scalars_text:?}");
            let d = self.cached(key, |this| {
                let max = this.opts.max_lexeme_states;
                let mut lex: Option<Dfa> = None;
                if !strings.is_empty() {
                    let d = Dfa::literals(strings.iter().map(|s| s.as_slice()), max)
                        .map_err(|e| this.dfa_err(e, path, ""))?;
                    let d = this.quote(&d, path)?;
                    lex = Some(d);
                }
                if !scalars_text.is_empty() {
                    let d = Dfa::literals(scalars_text.iter().map(|s| s.as_slice()), max)
                        .map_err(|e| this.dfa_err(e, path, ""))?;
                    lex = Some(match lex {
                        Some(l) => l
                            .product(&d, Op::Or, max)
                            .map_err(|e| this.dfa_err(e, path, ""))?,
                        None => d,
                    });
                }
                Ok(lex.expect("some values"))
            })?;
            others.push(self.lexeme(d)?);
        }
        match others.len() {
            0 => self.push(Node::Never),
            1 => Ok(others[0]),
            _ => self.push(Node::Union(others)),
        }
    }

    /// A node matching exactly one JSON value.
    fn const_node(&mut self, v: &Value, path: &str) -> Result<NodeId> {
        match v {
            Value::Object(m) => {
                let mut entries: Vec<(String, NodeId)> = Vec::new();
                for (k, x) in m {
                    let id = self.const_node(x, &format!("{path}/{}", escape_ptr(k)))?;
                    entries.push((k.clone(), id));
                }
                let required: Vec<String> = m.keys().cloned().collect();
                let syntax = self.obj_syntax();
                let o = self.object_node(entries, &required, None, syntax, false)?;
                self.push(Node::Object(Box::new(o)))
            }
            _ => {
                let mut m = Map::new();
                m.insert("const".into(), v.clone());
                self.compile_enum(&m, path)
            }
        }
    }

    fn compile_typed(&mut self, obj: &Map<String, Value>, path: &str) -> Result<NodeId> {
        let mut types = match obj.get("type") {
            Some(t) => type_set(t, path)?,
            None => T_ALL,
        };
        if obj.get("nullable") == Some(&Value::Bool(true)) {
            types |= T_NULL;
        }
        if types & T_NUM != 0 {
            types &= !T_INT;
        }
        let mut alts = Vec::new();
        let scalar_types = types & (T_NULL | T_BOOL | T_INT | T_NUM | T_STR);
        if scalar_types != 0 {
            // The scalar part depends only on these keywords: compiled lexemes are shared
            // process-wide (formats, bounded strings and numbers recur across tool sets).
            let mut key = format!("scalar|{scalar_types}|");
            for kw in [
                "minLength",
                "maxLength",
                "pattern",
                "format",
                "minimum",
                "maximum",
                "exclusiveMinimum",
                "exclusiveMaximum",
            ] {
                if let Some(v) = obj.get(kw) {
                    key.push_str(kw);
                    key.push_str(&v.to_string());
                }
            }
            let d = self.cached(key, |this| this.scalar_dfa(obj, scalar_types, path))?;
            alts.push(self.lexeme(d)?);
        }
        if types & T_OBJ != 0 {
            alts.push(self.compile_object(obj, path)?);
        }
        if types & T_ARR != 0 {
            alts.push(self.compile_array(obj, path)?);
        }
        match alts.len() {
            0 => self.push(Node::Never),
            1 => Ok(alts[0]),
            _ => self.push(Node::Union(alts)),
        }
    }

    /// A lexeme from the process-wide cache, or built (and cached unless lenient).
    pub(crate) fn cached(
        &mut self,
        key: String,
        build: impl FnOnce(&mut Self) -> Result<Dfa>,
    ) -> Result<Arc<Dfa>> {
        if self.opts.lenient {
            return Ok(Arc::new(build(self)?));
        }
        let enc = if self.enc == Encoding::Python {
            "py"
        } else {
            "json"
        };
        let key = format!("{key}|{}|{enc}", self.opts.max_lexeme_states);
        if let Some(d) = lexeme_cache().get(&key) {
            return Ok(d.clone());
        }
        let d = Arc::new(build(self)?);
        let mut c = lexeme_cache();
        if c.len() >= LEXEME_CACHE_ENTRIES {
            c.clear();
        }
        c.insert(key, d.clone());
        Ok(d)
    }

    /// One automaton for the scalar types in `types` (a union of their lexemes).
    fn scalar_dfa(&mut self, obj: &Map<String, Value>, types: u8, path: &str) -> Result<Dfa> {
        let max = self.opts.max_lexeme_states;
        let mut parts: Vec<Dfa> = Vec::new();
        if types & T_NULL != 0 {
            parts.push(self.regex(self.literal("null"), path)?);
        }
        if types & T_BOOL != 0 {
            let re = format!("{}|{}", self.literal("true"), self.literal("false"));
            parts.push(self.regex(&re, path)?);
        }
        if types & (T_INT | T_NUM) != 0 {
            parts.push(self.number_dfa(obj, types & T_NUM == 0, path)?);
        }
        if types & T_STR != 0 {
            let d = self.string_dfa(obj, path)?;
            parts.push(self.quote(&d, path)?);
        }
        let mut acc = parts.pop().expect("at least one scalar type");
        for p in parts {
            acc = acc
                .product(&p, Op::Or, max)
                .map_err(|e| self.dfa_err(e, path, ""))?;
        }
        Ok(acc)
    }

    /// The automaton over a string's decoded content.
    fn string_dfa(&mut self, obj: &Map<String, Value>, path: &str) -> Result<Dfa> {
        let mut parts: Vec<Dfa> = Vec::new();
        let min = get_count(obj, "minLength", path)?;
        let max = get_count(obj, "maxLength", path)?;
        if min.is_some() || max.is_some() {
            let min = min.unwrap_or(0);
            if max.is_some_and(|m| m < min) {
                return Ok(Dfa::literals(std::iter::empty(), 10).unwrap());
            }
            let d = Dfa::char_count(min, max, self.opts.max_lexeme_states)
                .map_err(|e| self.dfa_err(e, path, ""))?;
            parts.push(d);
        }
        for p in string_list(obj, "pattern", path)? {
            let re = format!("(?s:.)*(?:{})(?s:.)*", translate_ecma(p));
            parts.push(
                Dfa::from_regex(&re, self.opts.max_lexeme_states).map_err(|e| match e {
                    DfaError::Regex(m) => Error::InvalidPattern {
                        pattern: p.into(),
                        path: ptr(path),
                        message: m,
                    },
                    DfaError::TooLarge => Error::LimitExceeded {
                        what: "states in one lexeme automaton",
                        limit: self.opts.max_lexeme_states,
                    },
                })?,
            );
        }
        for f in string_list(obj, "format", path)? {
            match format_regex(f) {
                Some(re) => parts.push(self.regex(&re, path)?),
                None => {
                    self.unsupported("format", path, &format!("format {f:?} is not supported"))?
                }
            }
        }
        let mut acc = match parts.pop() {
            Some(d) => d,
            None => self.regex("(?s:.)*", path)?,
        };
        for p in parts {
            acc = self.and(&acc, &p, path)?;
        }
        Ok(acc)
    }

    fn number_dfa(&mut self, obj: &Map<String, Value>, integer: bool, path: &str) -> Result<Dfa> {
        let bound = |k: &str| -> Result<Option<f64>> {
            match obj.get(k) {
                None => Ok(None),
                Some(Value::Number(n)) => Ok(n.as_f64()),
                Some(Value::Bool(_)) if k.starts_with("exclusive") => Ok(None),
                Some(_) => Err(invalid(path, format!("{k} must be a number"))),
            }
        };
        let mut lowers: Vec<(f64, bool)> = Vec::new();
        let mut uppers: Vec<(f64, bool)> = Vec::new();
        // draft-04 style boolean exclusives
        let excl_min_bool = obj.get("exclusiveMinimum") == Some(&Value::Bool(true));
        let excl_max_bool = obj.get("exclusiveMaximum") == Some(&Value::Bool(true));
        if let Some(m) = bound("minimum")? {
            lowers.push((m, excl_min_bool));
        }
        if let Some(m) = bound("exclusiveMinimum")? {
            lowers.push((m, true));
        }
        if let Some(m) = bound("maximum")? {
            uppers.push((m, excl_max_bool));
        }
        if let Some(m) = bound("exclusiveMaximum")? {
            uppers.push((m, true));
        }
        if integer {
            let lo = lowers
                .iter()
                .map(|&(b, ex)| if ex { b.floor() + 1.0 } else { b.ceil() })
                .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
            let hi = uppers
                .iter()
                .map(|&(b, ex)| if ex { b.ceil() - 1.0 } else { b.floor() })
                .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.min(b))));
            let re = match int_range_regex(lo, hi) {
                Some(r) => format!("(?:{r})(?:\\.0{{1,20}})?"),
                None => return Ok(Dfa::literals(std::iter::empty(), 10).unwrap()),
            };
            return self.regex(&re, path);
        }
        if lowers.is_empty() && uppers.is_empty() {
            return self.regex(NUMBER, path);
        }
        let mut acc = self.regex(BOUNDED_NUMBER, path)?;
        for (b, ex) in lowers {
            let re = ge_regex(&Dec::from_f64(b), ex);
            let d = self.regex(&re, path)?;
            acc = self.and(&acc, &d, path)?;
        }
        for (b, ex) in uppers {
            let re = le_regex(&Dec::from_f64(b), ex);
            let d = self.regex(&re, path)?;
            acc = self.and(&acc, &d, path)?;
        }
        Ok(acc)
    }

    fn compile_object(&mut self, obj: &Map<String, Value>, path: &str) -> Result<NodeId> {
        self.compile_object_as(obj, path, false)
    }

    /// A function's parameters as Python keyword arguments `(k=v, ...)`: the schema (after its
    /// top-level `$ref`s and `allOf`s are resolved) must be one object schema.
    pub(crate) fn compile_kwargs(&mut self, schema: &Value, path: &str) -> Result<NodeId> {
        let mut s = schema.clone();
        for _ in 0..32 {
            let Some(o) = s.as_object() else { break };
            if let Some(r) = o.get("$ref") {
                let r = r
                    .as_str()
                    .ok_or_else(|| invalid(path, "$ref must be a string"))?;
                let pointer = self.ref_pointer(r, path)?;
                let target = self
                    .root
                    .pointer(&pointer)
                    .ok_or_else(|| Error::UnresolvedRef {
                        reference: r.into(),
                        path: ptr(path),
                    })?
                    .clone();
                let mut rest = o.clone();
                rest.remove("$ref");
                s = self.merge_all(&[target, Value::Object(rest)], path)?;
                continue;
            }
            if let Some(all) = o.get("allOf") {
                let mut parts = all
                    .as_array()
                    .ok_or_else(|| invalid(path, "allOf must be an array"))?
                    .clone();
                let mut rest = o.clone();
                rest.remove("allOf");
                parts.push(Value::Object(rest));
                s = self.merge_all(&parts, path)?;
                continue;
            }
            break;
        }
        let o = match &s {
            Value::Object(o) => o.clone(),
            Value::Bool(true) => Map::new(),
            _ => return Err(invalid(path, "parameters must be an object schema")),
        };
        for k in ["anyOf", "oneOf", "enum", "const"] {
            if o.contains_key(k) {
                return Err(Error::Unrepresentable {
                    what: "parameters schema",
                    name: path.trim_start_matches('/').into(),
                    dialect: "Python keyword-argument".into(),
                    reason: format!(
                        "`{k}` at the top of the parameters cannot be keyword arguments"
                    ),
                });
            }
        }
        if let Some(t) = o.get("type") {
            if type_set(t, path)? & T_OBJ == 0 {
                return Err(invalid(path, "parameters must be an object schema"));
            }
        }
        self.refuse_unsupported(&o, path)?;
        self.compile_object_as(&o, path, true)
    }

    /// An object; with `kwargs`, spelled as Python keyword arguments `(k=v, ...)`.
    pub(crate) fn compile_object_as(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        kwargs: bool,
    ) -> Result<NodeId> {
        let empty = Map::new();
        let props = match obj.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => return Err(invalid(path, "properties must be an object")),
        };
        let required: Vec<String> = match obj.get("required") {
            None => vec![],
            Some(Value::Array(r)) => r
                .iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| invalid(path, "required must list strings"))
                })
                .collect::<Result<_>>()?,
            Some(_) => return Err(invalid(path, "required must be an array")),
        };
        if kwargs {
            for k in props.keys().chain(required.iter()) {
                if !is_identifier(k) {
                    return Err(Error::Unrepresentable {
                        what: "argument name",
                        name: k.clone(),
                        dialect: "Python keyword-argument".into(),
                        reason: "it is not a Python identifier".into(),
                    });
                }
            }
        }
        let id = self.push(Node::Never)?;
        let additional_node = match obj.get("additionalProperties") {
            None | Some(Value::Bool(true)) => Some(self.any()?),
            Some(Value::Bool(false)) => None,
            Some(s @ Value::Object(_)) => {
                Some(self.compile(s, &format!("{path}/additionalProperties"))?)
            }
            Some(_) => return Err(invalid(path, "additionalProperties must be a schema")),
        };
        let never = self.push(Node::Never)?;
        let mut entries: Vec<(String, NodeId)> = Vec::new();
        for (k, s) in props {
            let p = format!("{path}/properties/{}", escape_ptr(k));
            let v = self.compile(s, &p)?;
            entries.push((k.clone(), v));
        }
        for r in &required {
            if !props.contains_key(r) && !entries.iter().any(|e| &e.0 == r) {
                // A required key that only additionalProperties can match.
                entries.push((r.clone(), additional_node.unwrap_or(never)));
            }
        }
        let additional = match additional_node {
            None => None,
            Some(v) => {
                let max = self.opts.max_lexeme_states;
                let d = if kwargs {
                    // an identifier and `=`, other than the listed names
                    let names: Vec<String> = entries.iter().map(|e| format!("{}=", e.0)).collect();
                    let listed = Dfa::literals(names.iter().map(|n| n.as_bytes()), max)
                        .map_err(|e| self.dfa_err(e, path, ""))?;
                    self.regex("[A-Za-z_][A-Za-z0-9_]*=", path)?
                        .product(&listed, Op::AndNot, max)
                        .map_err(|e| self.dfa_err(e, path, ""))?
                } else {
                    let listed: Vec<&[u8]> = entries.iter().map(|e| e.0.as_bytes()).collect();
                    let lit = Dfa::literals(listed, max).map_err(|e| self.dfa_err(e, path, ""))?;
                    let d = self
                        .regex("(?s:.)*", path)?
                        .product(&lit, Op::AndNot, max)
                        .map_err(|e| self.dfa_err(e, path, ""))?;
                    self.quote(&d, path)?
                };
                Some((self.key_lexeme(Arc::new(d), path)?, v))
            }
        };
        let syntax = if kwargs {
            Syntax {
                open: b'(',
                close: b')',
                colon: None,
                space_only: false,
            }
        } else {
            self.obj_syntax()
        };
        let o = self.object_node(entries, &required, additional, syntax, kwargs)?;
        self.nodes[id as usize] = Node::Object(Box::new(o));
        Ok(id)
    }

    fn compile_array(&mut self, obj: &Map<String, Value>, path: &str) -> Result<NodeId> {
        let id = self.push(Node::Never)?;
        let mut prefix = Vec::new();
        let mut items = None;
        let mut items_set = false;
        if let Some(Value::Array(p)) = obj.get("prefixItems") {
            for (i, s) in p.iter().enumerate() {
                prefix.push(self.compile(s, &format!("{path}/prefixItems/{i}"))?);
            }
        }
        match obj.get("items") {
            Some(Value::Array(p)) => {
                // draft-07 tuple form
                for (i, s) in p.iter().enumerate() {
                    prefix.push(self.compile(s, &format!("{path}/items/{i}"))?);
                }
                match obj.get("additionalItems") {
                    None => {}
                    Some(s) => {
                        items = Some(self.compile(s, &format!("{path}/additionalItems"))?);
                        items_set = true;
                    }
                }
            }
            Some(s) => {
                items = Some(self.compile(s, &format!("{path}/items"))?);
                items_set = true;
            }
            None => {}
        }
        if !items_set {
            items = Some(self.any()?);
        }
        let min_items = get_count(obj, "minItems", path)?.unwrap_or(0) as u32;
        let max_items = get_count(obj, "maxItems", path)?
            .map_or(u32::MAX, |m| m.min(u32::MAX as u64 - 1) as u32);
        if min_items > max_items {
            self.nodes[id as usize] = Node::Never;
            return Ok(id);
        }
        self.nodes[id as usize] = Node::Array(ArrayNode {
            prefix,
            items,
            min_items,
            max_items,
            syntax: self.arr_syntax(),
        });
        Ok(id)
    }
}

/// Flattens unions, drops values that admit nothing, and checks the root.
fn finalize(g: &mut GrammarInner, _opts: &CompileOptions) -> Result<()> {
    let n = g.nodes.len();
    // 1. Flatten unions into their non-union leaves (union cycles contribute nothing).
    let mut flat: Vec<Option<Vec<NodeId>>> = vec![None; n];
    fn leaves(g: &GrammarInner, id: NodeId, seen: &mut Vec<bool>, out: &mut Vec<NodeId>) {
        if seen[id as usize] {
            return;
        }
        seen[id as usize] = true;
        match &g.nodes[id as usize] {
            Node::Union(alts) => {
                for &a in alts {
                    leaves(g, a, seen, out);
                }
            }
            Node::Never => {}
            _ => {
                if !out.contains(&id) {
                    out.push(id)
                }
            }
        }
    }
    for (id, slot) in flat.iter_mut().enumerate() {
        if matches!(g.nodes[id], Node::Union(_)) {
            let mut seen = vec![false; n];
            let mut out = Vec::new();
            leaves(g, id as NodeId, &mut seen, &mut out);
            *slot = Some(out);
        }
    }
    for (id, f) in flat.into_iter().enumerate() {
        if let Some(f) = f {
            g.nodes[id] = if f.is_empty() {
                Node::Never
            } else {
                Node::Union(f)
            };
        }
    }
    // 2. Productivity: which nodes admit at least one finite value.
    let prod = g.productive(&[]);
    // 3. Prune what admits nothing.
    for id in 0..n {
        if !prod[id] {
            g.nodes[id] = Node::Never;
            continue;
        }
        match &mut g.nodes[id] {
            Node::Union(alts) => alts.retain(|&a| prod[a as usize]),
            Node::Object(o) => {
                o.unavailable = (0..o.keys.len() as u32)
                    .filter(|&k| !prod[o.values[k as usize] as usize])
                    .collect();
                if let Some((_, v)) = o.additional {
                    if !prod[v as usize] {
                        o.additional = None;
                    }
                }
            }
            Node::Array(a) => {
                let first_bad = a.prefix.iter().position(|&p| !prod[p as usize]);
                if let Some(i) = first_bad {
                    a.max_items = a.max_items.min(i as u32);
                    a.prefix.truncate(i);
                } else if a.items.is_some_and(|it| !prod[it as usize]) {
                    a.max_items = a.max_items.min(a.prefix.len() as u32);
                }
                if a.items.is_none() {
                    a.max_items = a.max_items.min(a.prefix.len() as u32);
                }
            }
            Node::Repeat { item, max, .. } if !prod[*item as usize] => *max = 0,
            _ => {}
        }
    }
    // 4. Which nodes match the empty output.
    let mut nullable = vec![false; n];
    loop {
        let mut changed = false;
        for id in 0..n {
            if nullable[id] {
                continue;
            }
            let e = match &g.nodes[id] {
                Node::Lex(l) => {
                    let d = &g.lexemes[*l as usize];
                    !d.is_empty() && d.is_accepting(d.start())
                }
                Node::Union(alts) => alts.iter().any(|&a| nullable[a as usize]),
                Node::Seq(e) => e.iter().all(|&x| nullable[x as usize]),
                Node::Repeat { item, min, .. } => *min == 0 || nullable[*item as usize],
                Node::Capture(_, x) => nullable[*x as usize],
                _ => false,
            };
            if e {
                nullable[id] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    g.nullable = nullable;
    Ok(())
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

/// True for a Python identifier (ASCII letters, digits and `_`, not starting with a digit).
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c == b'_' || c.is_ascii_alphabetic())
        && b.all(|c| c == b'_' || c.is_ascii_alphanumeric())
}

/// `s` as a Python string literal in quote `q`, escaped the way the grammar accepts.
pub(crate) fn py_quote(s: &str, q: char) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(q);
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
/// The strings of a `pattern` or `format` keyword: one string, or the list that merging `allOf`
/// parts made of several (all must hold).
fn string_list<'v>(obj: &'v Map<String, Value>, k: &str, path: &str) -> Result<Vec<&'v str>> {
    match obj.get(k) {
        None => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.as_str()]),
        Some(Value::Array(list)) if !list.is_empty() => list
            .iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| invalid(path, format!("{k} must be a string")))
            })
            .collect(),
        Some(_) => Err(invalid(path, format!("{k} must be a string"))),
    }
}

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

/// Most entries of the process-wide lexeme cache (cleared when full).
const LEXEME_CACHE_ENTRIES: usize = 1024;

/// Empties the process-wide lexeme cache.
/// Automata escaped for JSON strings, by source address (the source is held by the entry).
type EscapedCache = HashMap<usize, (Arc<Dfa>, Arc<Dfa>)>;

fn escaped_cache() -> std::sync::MutexGuard<'static, EscapedCache> {
    static CACHE: std::sync::OnceLock<Mutex<EscapedCache>> = std::sync::OnceLock::new();
    CACHE
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn clear_lexeme_cache() {
    escaped_cache().clear();
    lexeme_cache().clear();
}

fn lexeme_cache() -> std::sync::MutexGuard<'static, HashMap<String, Arc<Dfa>>> {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<HashMap<String, Arc<Dfa>>>> =
        std::sync::OnceLock::new();
    CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}
