//! The one lowerer: a tool-call format's [`Expr`] tree, from a dialect file or a structural
//! tag, into one grammar through the schema compiler's
//! [`GrammarBuilder`](crate::grammar::builder::GrammarBuilder). A dialect's rules are lowered in
//! up to four call-count variants (no call, one, at least one, any number) with the calls
//! generated from the tools' schemas; a structural tag's forms (`tags.rs`, its XML styles in
//! `xml.rs`) in one, its calls being its object-schema regions. Literals, regexes, special
//! tokens, sequences, choices, repetitions and text are lowered alike for both.

mod tags;
mod xml;

pub(super) use tags::{lower_tag, TagVocab};
use xml::{raw_string_schema, xml_top_keyword};

use super::ir::{affix_text, Affix, Expr, XmlArgs, XmlTyping};
use super::*;
use crate::grammar::dfa::{Dfa, Op};
use crate::schema::keywords::{Keyword, Role};
use crate::schema::Lexeme;
use serde_json::Map;
use std::borrow::Cow;
use tags::TagScope;

/// Gemma's string quote ([`Encoding::Gemma`]): a special token of Gemma 4's vocabulary.
const GEMMA_QUOTE: &str = "<|\"|>";

/// Adds `"additionalProperties": false` to every object schema in `schema` that lists
/// `properties` and leaves extra keys to JSON Schema's default, where nothing else (pattern or
/// unevaluated properties, `allOf`/`anyOf`/`oneOf`/`$ref` beside it) could declare more keys.
/// Subschemas under `allOf`, `not`, `if`/`then`/`else` and `dependentSchemas` are left alone:
/// their keys combine with their siblings'.
pub(super) fn strict_objects(schema: &mut Value) {
    let Value::Object(o) = schema else { return };
    if stays_open(o) {
        o.insert("additionalProperties".into(), Value::Bool(false));
    }
    for (k, v) in o.iter_mut() {
        match (strict_reach(k), v) {
            (Some(Reach::Values), Value::Object(m)) => m.values_mut().for_each(strict_objects),
            (Some(Reach::Schemas | Reach::List), Value::Array(a)) => {
                a.iter_mut().for_each(strict_objects)
            }
            (Some(Reach::Schemas), v) => strict_objects(v),
            _ => {}
        }
    }
}

/// Whether [`strict_objects`] would leave `schema` as it is (so that it need not be copied).
pub(super) fn is_strict(schema: &Value) -> bool {
    let Value::Object(o) = schema else {
        return true;
    };
    !stays_open(o)
        && o.iter().all(|(k, v)| match (strict_reach(k), v) {
            (Some(Reach::Values), Value::Object(m)) => m.values().all(is_strict),
            (Some(Reach::Schemas | Reach::List), Value::Array(a)) => a.iter().all(is_strict),
            (Some(Reach::Schemas), v) => is_strict(v),
            _ => true,
        })
}

/// An object schema that lists `properties` and nothing that could declare more keys.
fn stays_open(o: &Map<String, Value>) -> bool {
    o.contains_key("properties")
        && ![
            "additionalProperties",
            "patternProperties",
            "unevaluatedProperties",
            "allOf",
            "anyOf",
            "oneOf",
            "$ref",
            "$dynamicRef",
            "dependentSchemas",
            "if",
        ]
        .iter()
        .any(|k| o.contains_key(*k))
}

/// Which subschemas under a keyword strictness reaches.
enum Reach {
    /// The values of a map of schemas.
    Values,
    /// A schema, or each of a list of schemas.
    Schemas,
    /// Each of a list of schemas.
    List,
}

fn strict_reach(keyword: &str) -> Option<Reach> {
    match keyword {
        "properties" | "$defs" | "definitions" => Some(Reach::Values),
        "items" | "additionalItems" | "additionalProperties" | "contains" => Some(Reach::Schemas),
        "prefixItems" | "anyOf" | "oneOf" => Some(Reach::List),
        _ => None,
    }
}

/// A tool's parameters as an object schema (`None`: no arguments at all), borrowed when they
/// are one already.
pub(super) fn object_schema(p: Option<&Value>) -> Cow<'_, Value> {
    match p {
        None => Cow::Owned(
            serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ),
        Some(Value::Bool(true)) => Cow::Owned(serde_json::json!({"type": "object"})),
        Some(Value::Object(o)) if !o.contains_key("type") => {
            let mut o = o.clone();
            o.insert("type".into(), "object".into());
            Cow::Owned(Value::Object(o))
        }
        Some(v) => Cow::Borrowed(v),
    }
}

/// Lowers `dialect` for `tools` into one grammar, the root variant picked from `options`
/// (`allowed`: the indices of the functions a call may name).
pub(super) fn lower(
    dialect: &Dialect,
    tools: &Tools,
    options: &DialectOptions,
    allowed: Vec<usize>,
) -> Result<Grammar> {
    let null = Value::Null;
    // Each tool's parameters, copied only where they change.
    let params: Vec<Cow<Value>> = tools
        .as_slice()
        .iter()
        .map(|t| {
            let mut p = object_schema(t.parameters.as_ref());
            if options.strict_arguments && t.strict != Some(false) && !is_strict(&p) {
                strict_objects(p.to_mut());
            }
            // `$id`s, anchors, remote and dynamic `$ref`s become local JSON pointers.
            match crate::schema::resolve_refs(&p, &options.compile) {
                Ok(r) => Ok(r.map_or(p, Cow::Owned)),
                Err(e) => Err(in_function(e, &t.name)),
            }
        })
        .collect::<Result<_>>()?;
    let max_text = match (&options.tool_choice, options.max_text_chars) {
        (_, Some(u32::MAX)) => None,
        (_, Some(n)) => Some(n),
        (ToolChoice::Required | ToolChoice::Function(_), None) => Some(DEFAULT_REQUIRED_TEXT_CHARS),
        _ => None,
    };
    let c = Compiler::new(&null, &options.compile);
    let mut l = Lowering::new(c, dialect, tools, &params, max_text);
    l.name_first = options.name_first;
    l.allowed = allowed;
    l.functions = tools.as_slice().iter().map(|t| t.name.clone()).collect();
    let root = dialect.rule("root").expect("checked at parse time");
    let body = match (&options.tool_choice, options.parallel_calls) {
        (ToolChoice::None, _) => l.lower(root, V::Zero, 0)?,
        (ToolChoice::Auto, true) => l.lower(root, V::Any, 0)?,
        (ToolChoice::Auto, false) => {
            let a = l.lower(root, V::Zero, 0)?;
            let b = l.lower(root, V::One, 0)?;
            l.c.b.push(Node::Union(vec![a, b]))?
        }
        (_, true) => l.lower(root, V::Plus, 0)?,
        (_, false) => l.lower(root, V::One, 0)?,
    };
    let root = match &options.reasoning {
        None => body,
        Some(r) => {
            let start = l.marker(&r.start)?;
            let end = l.marker(&r.end)?;
            let text = l.text(std::slice::from_ref(&r.end), Capture::Reasoning)?;
            let ws = l.ws()?;
            let block = l.c.b.push(Node::Seq(vec![start, text, end, ws]))?;
            let opt = l.c.b.push(Node::Repeat {
                item: block,
                min: 0,
                max: 1,
            })?;
            l.c.b.push(Node::Seq(vec![opt, body]))?
        }
    };
    l.c.b.distinct_calls = options.distinct_calls;
    l.finish(root, false)
}

/// Call-count variant of a rule: no call, exactly one, at least one, any number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum V {
    Zero,
    One,
    Plus,
    Any,
}

pub(super) struct Lowering<'a> {
    c: Compiler<'a>,
    dialect: &'a Dialect,
    tools: &'a Tools,
    allowed: Vec<usize>,
    memo: HashMap<(String, V, Option<usize>), NodeId>,
    /// The function whose call is being lowered (inside `@call(...)`).
    cur: Option<usize>,
    specials: Vec<String>,
    /// Call nodes by builtin (a builtin's union of calls is built once).
    calls: HashMap<String, NodeId>,
    params: &'a [Cow<'a, Value>],
    /// Arguments nodes by their schema's JSON text and encoding: tools with equal parameters
    /// share one node (compiled once; the matcher's per-frame caches then serve them all).
    shared_args: HashMap<(String, Encoding, bool), NodeId>,
    /// Bound on each stretch of free text, in characters.
    max_text: Option<u32>,
    /// Call labels, by index of [`Capture::Call`]: the tools' names, then a structural tag's
    /// regions.
    functions: Vec<String>,
    /// The vocabulary's special-token texts, longest first: a literal holding one matches
    /// there the special token or its spelling (structural tags; empty for dialect files).
    vocab_specials: Vec<String>,
    /// Where a structural tag's lowering stands.
    tag: TagScope<'a>,
    /// [`super::DialectOptions::name_first`].
    name_first: bool,
}

impl<'a> Lowering<'a> {
    fn new(
        c: Compiler<'a>,
        dialect: &'a Dialect,
        tools: &'a Tools,
        params: &'a [Cow<'a, Value>],
        max_text: Option<u32>,
    ) -> Lowering<'a> {
        Lowering {
            c,
            dialect,
            tools,
            allowed: Vec::new(),
            memo: HashMap::new(),
            cur: None,
            specials: Vec::new(),
            calls: HashMap::new(),
            params,
            shared_args: HashMap::new(),
            max_text,
            functions: Vec::new(),
            vocab_specials: Vec::new(),
            tag: TagScope::default(),
            name_first: true,
        }
    }

    /// The grammar with `root` as its start.
    fn finish(mut self, root: NodeId, json_root: bool) -> Result<Grammar> {
        let specials = std::mem::take(&mut self.specials);
        self.c.b.finish(root, json_root, specials, self.functions)
    }
}

/// Says which function's parameters an error is about: its path becomes `NAME: POINTER`.
pub(super) fn in_function(mut e: Error, name: &str) -> Error {
    match &mut e {
        Error::InvalidSchema { path, .. }
        | Error::UnsupportedKeyword { path, .. }
        | Error::UnresolvedRef { path, .. }
        | Error::InvalidPattern { path, .. } => *path = format!("{name}: {path}"),
        Error::LimitExceeded { path, .. } if path.is_empty() => *path = format!("{name}: #"),
        Error::LimitExceeded { path, .. } => *path = format!("{name}: {path}"),
        _ => {}
    }
    e
}

/// A literal lexeme (kept in the compile's caches).
pub(super) fn lit_node(c: &mut Compiler, bytes: &[u8]) -> Result<NodeId> {
    let d = c.cached(Lexeme::Literal(bytes.to_vec()), |c| {
        crate::grammar::dfa::Dfa::literals([bytes], c.opts.max_lexeme_states)
            .map_err(|e| c.b.dfa_err(e, "", ""))
    })?;
    c.lexeme(d)
}

/// A regex lexeme (kept in the compile's caches, so its token walks are shared too).
pub(super) fn regex_node(c: &mut Compiler, re: &str) -> Result<NodeId> {
    let d = c.cached(Lexeme::Regex(re.to_string()), |c| {
        c.b.regex(re, "")
            .map(crate::grammar::dfa::Dfa::with_text_states)
    })?;
    c.lexeme(d)
}

/// Whitespace between a dialect's tokens (`@ws`), as [`CompileOptions::whitespace`] allows it.
pub(super) fn ws_node(c: &mut Compiler) -> Result<NodeId> {
    let o = c.opts;
    let key = Lexeme::Whitespace {
        policy: o.whitespace,
        max: o.max_whitespace,
    };
    let d = c.cached(key, |c| {
        c.opts
            .whitespace_dfa(0, c.opts.max_lexeme_states)
            .map_err(|e| c.b.dfa_err(e, "", ""))
    })?;
    c.lexeme(d)
}

/// Free text (valid UTF-8) holding none of `markers`, at most `max` characters, captured as
/// `cap`.
pub(super) fn text_node(
    c: &mut Compiler,
    markers: &[String],
    max: Option<u32>,
    cap: Capture,
) -> Result<NodeId> {
    for m in markers {
        if !c.b.text_markers.contains(m) {
            c.b.text_markers.push(m.clone());
        }
    }
    let key = Lexeme::Text {
        markers: markers.to_vec(),
        max,
    };
    let d = c.cached(key, |c| {
        let ms: Vec<&str> = markers.iter().map(String::as_str).collect();
        crate::grammar::dfa::Dfa::text_without(&ms, max.map(u64::from), c.opts.max_lexeme_states)
            .map_err(|e| c.b.dfa_err(e, "", ""))
    })?;
    let l = c.lexeme(d)?;
    c.b.push(Node::Capture(cap, l))
}

impl<'a> Lowering<'a> {
    pub(super) fn never(&mut self) -> Result<NodeId> {
        self.c.b.push(Node::Never)
    }

    /// `bytes` as a literal, except that a vocabulary special token's text in it (see
    /// [`Self::vocab_specials`]) may also be that special token.
    pub(super) fn lit(&mut self, bytes: &[u8]) -> Result<NodeId> {
        let text = match std::str::from_utf8(bytes) {
            Ok(t) if !self.vocab_specials.is_empty() => t,
            _ => return lit_node(&mut self.c, bytes),
        };
        let mut parts = Vec::new();
        let mut plain = 0;
        let mut i = 0;
        while i < text.len() {
            let hit = self
                .vocab_specials
                .iter()
                .find(|s| text[i..].starts_with(s.as_str()))
                .cloned();
            match hit {
                Some(s) => {
                    if plain < i {
                        parts.push(lit_node(&mut self.c, &bytes[plain..i])?);
                    }
                    parts.push(self.marker(&s)?);
                    i += s.len();
                    plain = i;
                }
                None => i += text[i..].chars().next().map_or(1, char::len_utf8),
            }
        }
        if plain < text.len() {
            parts.push(lit_node(&mut self.c, &bytes[plain..])?);
        }
        match parts.as_slice() {
            [one] => Ok(*one),
            _ => self.c.b.push(Node::Seq(parts)),
        }
    }

    /// A regex lexeme (kept in the compile's caches, so its token walks are shared too).
    pub(super) fn regex(&mut self, re: &str) -> Result<NodeId> {
        regex_node(&mut self.c, re)
    }

    pub(super) fn special(&mut self, name: &str) -> Result<NodeId> {
        let i = match self.specials.iter().position(|s| s == name) {
            Some(i) => i,
            None => {
                self.specials.push(name.to_owned());
                self.specials.len() - 1
            }
        };
        self.c.b.push(Node::Special(i as u32))
    }

    /// A marker that is a special token where the vocabulary has one so spelled, else text.
    pub(super) fn marker(&mut self, text: &str) -> Result<NodeId> {
        let s = self.special(text)?;
        let t = lit_node(&mut self.c, text.as_bytes())?;
        self.c.b.push(Node::Union(vec![s, t]))
    }

    pub(super) fn ws(&mut self) -> Result<NodeId> {
        ws_node(&mut self.c)
    }

    /// Free text (valid UTF-8) holding none of `markers`, captured as `cap`.
    pub(super) fn text(&mut self, markers: &[String], cap: Capture) -> Result<NodeId> {
        let max = if cap == Capture::Text {
            self.max_text
        } else {
            None
        };
        text_node(&mut self.c, markers, max, cap)
    }

    pub(super) fn lower(&mut self, e: &'a Expr, v: V, depth: usize) -> Result<NodeId> {
        if depth > MAX_NESTING * 4 {
            return Err(Error::LimitExceeded {
                what: "dialect rule nesting",
                limit: MAX_NESTING * 4,
                option: "",
                path: String::new(),
            });
        }
        let leaf = |this: &mut Self, f: &mut dyn FnMut(&mut Self) -> Result<NodeId>| match v {
            V::Zero | V::Any => f(this),
            V::One | V::Plus => this.never(),
        };
        match e {
            Expr::Lit(b) => leaf(self, &mut |t| t.lit(b)),
            Expr::Regex(r) => leaf(self, &mut |t| {
                t.regex(r).map_err(|e| match (e, &t.tag.at) {
                    // In a structural tag: the pattern's error, at the form's pointer.
                    (
                        Error::InvalidPattern {
                            pattern, message, ..
                        },
                        Some(at),
                    ) => Error::InvalidPattern {
                        pattern,
                        path: super::ir::pointer(at),
                        message,
                    },
                    // A limit met while compiling stays a limit (the whole grammar's, not the
                    // file's fault).
                    (e @ Error::LimitExceeded { .. }, _) => e,
                    (e, Some(_)) => e,
                    (e, None) => Error::Dialect {
                        dialect: t.dialect.name.clone(),
                        message: format!("regex /{r}/: {e}"),
                    },
                })
            }),
            Expr::At(path, x) => {
                let saved = self.tag.at.replace(path.clone());
                let r = self.lower(x, v, depth + 1);
                self.tag.at = saved;
                r
            }
            Expr::Schema(_)
            | Expr::AnyText { .. }
            | Expr::Tag(_)
            | Expr::Triggered(_)
            | Expr::Separated { .. }
            | Expr::Dispatch(_)
            | Expr::Token(_)
            | Expr::AnyTokens(_)
            | Expr::ExcludeToken(_)
            | Expr::SomeTokens { .. }
            | Expr::TokenTriggered(_)
            | Expr::TokenDispatch(_) => leaf(self, &mut |t| t.tag_form(e, depth)),
            Expr::Special(s) => leaf(self, &mut |t| t.special(s)),
            Expr::Ws => leaf(self, &mut |t| t.ws()),
            Expr::Text(m) => leaf(self, &mut |t| t.text(m, Capture::Text)),
            Expr::Reasoning(m) => leaf(self, &mut |t| t.text(m, Capture::Reasoning)),
            Expr::Marker(m) => leaf(self, &mut |t| t.marker(m)),
            Expr::Name | Expr::NameJson | Expr::Args(_) | Expr::RawArgs(_) | Expr::XmlArgs(_) => {
                leaf(self, &mut |t| t.call_part(e))
            }
            Expr::Call(..) => match v {
                V::Zero => self.never(),
                _ => self.calls(e),
            },
            Expr::CallId(x) => {
                let inner = self.lower(x, v, depth + 1)?;
                self.c.b.push(Node::Capture(Capture::CallId(false), inner))
            }
            Expr::TextMatching(r) => leaf(self, &mut |t| {
                // The regex, and at most `max_text` characters.
                let max = t.max_text;
                let d =
                    t.c.cached(
                        Lexeme::TextMatching {
                            regex: r.clone(),
                            max,
                        },
                        |c| {
                            let d = c.b.regex(r, "")?;
                            let states = c.opts.max_lexeme_states;
                            match max {
                                // States that behave as free text walk the text index.
                                None => Ok(d.with_text_states()),
                                Some(m) => crate::grammar::dfa::Dfa::char_count(
                                    0,
                                    Some(u64::from(m)),
                                    states,
                                )
                                .and_then(|n| d.product(&n, crate::grammar::dfa::Op::And, states))
                                .map_err(|e| c.b.dfa_err(e, "", "")),
                            }
                        },
                    )
                    .map_err(|e| Error::Dialect {
                        dialect: t.dialect.name.clone(),
                        message: format!("@text_matching({r:?}): {e}"),
                    })?;
                let l = t.c.lexeme(d)?;
                t.c.b.push(Node::Capture(Capture::Text, l))
            }),
            Expr::JsonCall { .. } | Expr::PythonCall(_) | Expr::ParenCall => match v {
                V::Zero => self.never(),
                _ => self.calls(e),
            },
            Expr::Rule(name) => {
                if let Some(&id) = self.memo.get(&(name.clone(), v, self.cur)) {
                    return Ok(id);
                }
                let id = self.never()?;
                self.memo.insert((name.clone(), v, self.cur), id);
                let body = self.dialect.rule(name).expect("checked at parse time");
                let b = self.lower(body, v, depth + 1)?;
                self.c.b.nodes[id as usize] = Node::Union(vec![b]);
                Ok(id)
            }
            Expr::Alt(alts) => {
                let mut ids = Vec::new();
                for a in alts {
                    ids.push(self.lower(a, v, depth + 1)?);
                }
                self.c.b.push(Node::Union(ids))
            }
            Expr::Seq(items) => match v {
                V::Zero | V::Any => {
                    let mut ids = Vec::new();
                    for x in items {
                        ids.push(self.lower(x, v, depth + 1)?);
                    }
                    self.c.b.push(Node::Seq(ids))
                }
                V::One | V::Plus => {
                    // The call(s) in item i: items before it without calls, items after it
                    // without (One) or with any number (Plus).
                    let rest = if v == V::One { V::Zero } else { V::Any };
                    let mut alts = Vec::new();
                    for i in 0..items.len() {
                        let mut ids = Vec::new();
                        for (j, x) in items.iter().enumerate() {
                            let vj = match j.cmp(&i) {
                                std::cmp::Ordering::Less => V::Zero,
                                std::cmp::Ordering::Equal => v,
                                std::cmp::Ordering::Greater => rest,
                            };
                            ids.push(self.lower(x, vj, depth + 1)?);
                        }
                        alts.push(self.c.b.push(Node::Seq(ids))?);
                    }
                    self.c.b.push(Node::Union(alts))
                }
            },
            Expr::Repeat(x, min, max) => match v {
                V::Zero | V::Any => {
                    let item = self.lower(x, v, depth + 1)?;
                    self.c.b.push(Node::Repeat {
                        item,
                        min: *min,
                        max: *max,
                    })
                }
                V::One | V::Plus => {
                    // Exactly representable for `?`, `*` and `+`: calls in one repetition,
                    // call-free ones around it.
                    if *max == 1 {
                        return self.lower(x, v, depth + 1);
                    }
                    if *min > 1 || *max != u32::MAX {
                        return Err(Error::Dialect {
                            dialect: self.dialect.name.clone(),
                            message: "a bounded repetition {m,n} around calls is not supported \
                                      (use ?, * or +)"
                                .into(),
                        });
                    }
                    let zero = self.lower(x, V::Zero, depth + 1)?;
                    let before = self.c.b.push(Node::Repeat {
                        item: zero,
                        min: 0,
                        max: u32::MAX,
                    })?;
                    let mid = self.lower(x, v, depth + 1)?;
                    let after_item = if v == V::One {
                        zero
                    } else {
                        self.lower(x, V::Any, depth + 1)?
                    };
                    let after = self.c.b.push(Node::Repeat {
                        item: after_item,
                        min: 0,
                        max: u32::MAX,
                    })?;
                    self.c.b.push(Node::Seq(vec![before, mid, after]))
                }
            },
        }
    }

    /// The union of one call per allowed function, as the builtin `e` writes it.
    pub(super) fn calls(&mut self, e: &'a Expr) -> Result<NodeId> {
        let key = format!("{e:?}");
        if let Some(&id) = self.calls.get(&key) {
            return Ok(id);
        }
        let mut alts = Vec::new();
        let only = match e {
            Expr::Call(_, Some(re)) => Some(
                regex_automata::meta::Regex::new(&format!("^(?:{re})$")).map_err(|err| {
                    Error::Dialect {
                        dialect: self.dialect.name.clone(),
                        message: format!("@call names={re:?}: {err}"),
                    }
                })?,
            ),
            _ => None,
        };
        for i in self.allowed.clone() {
            if let Some(only) = &only {
                if !only.is_match(self.tools.as_slice()[i].name.as_str()) {
                    continue;
                }
            }
            let call = self.call(e, i)?;
            alts.push(
                self.c
                    .b
                    .push(Node::Capture(Capture::Call(i as u32), call))?,
            );
        }
        let id = self.c.b.push(Node::Union(alts))?;
        self.calls.insert(key, id);
        Ok(id)
    }

    /// The arguments node of function `i` in encoding `enc` (`kwargs`: Python keyword
    /// arguments).
    ///
    /// JSON arguments whose schema has the same text as an earlier function's (in the same
    /// encoding) are that function's node: a node is a function of its schema, and nothing in
    /// it names the function (its call capture, above it, does). Python keyword arguments are
    /// compiled per function (their errors name it).
    pub(super) fn args(&mut self, i: usize, enc: Encoding, kwargs: bool) -> Result<NodeId> {
        let schema: &'a Value = &self.params[i];
        let name = &self.tools.as_slice()[i].name;
        let key = (!kwargs).then(|| (schema.to_string(), enc, self.c.one_line()));
        if let Some(&id) = key.as_ref().and_then(|k| self.shared_args.get(k)) {
            return Ok(id);
        }
        if enc == Encoding::Gemma && self.c.gemma_quote.is_none() {
            self.c.gemma_quote = Some(self.marker(GEMMA_QUOTE)?);
        }
        self.c.set_document(schema, enc);
        let r = if kwargs {
            self.c.compile_kwargs(schema, &format!("/{name}"))
        } else {
            self.c.compile(schema, "")
        };
        self.c.enc = Encoding::Json;
        let id = r.map_err(|e| in_function(e, name))?;
        if let Some(k) = key {
            self.shared_args.insert(k, id);
        }
        Ok(id)
    }

    /// One call of function `i` as `@json_call` writes it (`e` is that builtin).
    fn json_call(&mut self, e: &'a Expr, i: usize, name: String) -> Result<NodeId> {
        let Expr::JsonCall {
            name_key,
            args_key,
            enc,
            either,
            id,
            any_order,
            ..
        } = e
        else {
            unreachable!("json_call takes @json_call")
        };
        let name_node = {
            self.c.enc = Encoding::Json;
            let d = crate::grammar::dfa::Dfa::json_string_of_word(
                name.as_bytes(),
                self.c.opts.max_lexeme_states,
            )
            .map_err(|e| self.c.b.dfa_err(e, "", ""))?;
            self.c.lexeme(d)?
        };
        let mut encs = vec![*enc];
        if *either {
            encs.push(Encoding::JsonInString);
        }
        let mut forms = Vec::with_capacity(encs.len());
        for enc in encs {
            let args = self.args(i, enc, false)?;
            let args = if enc == Encoding::JsonInString {
                let q1 = self.lit(b"\"")?;
                let q2 = self.lit(b"\"")?;
                self.c.b.push(Node::Seq(vec![q1, args, q2]))?
            } else {
                args
            };
            forms.push(self.c.b.push(Node::Capture(Capture::Args(enc), args))?);
        }
        let args = match forms[..] {
            [one] => one,
            _ => self.c.b.push(Node::Union(forms))?,
        };
        self.c.enc = Encoding::Json;
        let mut entries = vec![(name_key.clone(), name_node), (args_key.clone(), args)];
        let mut required = vec![name_key.clone(), args_key.clone()];
        if let Some((key, re)) = id {
            let d = self.c.cached(Lexeme::Ident(re.clone()), |c| {
                let d = c.b.regex(re, "")?;
                d.json_string(c.opts.max_lexeme_states)
                    .map_err(|e| c.b.dfa_err(e, "", ""))
            })?;
            self.c.enc = Encoding::Json;
            let id_node = self.c.lexeme(d)?;
            let id_node = self
                .c
                .b
                .push(Node::Capture(Capture::CallId(true), id_node))?;
            entries.push((key.clone(), id_node));
            required.push(key.clone());
        }
        let mut o = self.c.object_node(
            entries,
            &required,
            None,
            crate::grammar::Syntax {
                space_only: self.c.one_line(),
                ..crate::grammar::Syntax::OBJECT
            },
            false,
            &[],
        )?;
        if self.name_first && !any_order {
            // Every spelling of the name key (the only entry whose value is
            // `name_node`).
            o.first = (0..o.values.len() as u32)
                .filter(|&k| o.values[k as usize] == name_node)
                .collect();
        }
        self.c.b.push(Node::Object(Box::new(o)))
    }
    /// One call of function `i` as builtin `e` writes it.
    pub(super) fn call(&mut self, e: &'a Expr, i: usize) -> Result<NodeId> {
        let name = self.tools.as_slice()[i].name.clone();
        match e {
            Expr::Call(inner, _) => {
                let saved = self.cur.replace(i);
                let r = self.lower(inner, V::Zero, 1);
                self.cur = saved;
                r
            }
            Expr::JsonCall { one_line, .. } => {
                self.c.set_one_line(*one_line);
                let r = self.json_call(e, i, name);
                self.c.set_one_line(false);
                r
            }
            Expr::PythonCall(json_literals) => {
                if !name.split('.').all(is_identifier) {
                    return Err(Error::Unrepresentable {
                        what: "function name",
                        name,
                        dialect: self.dialect.name.clone(),
                        reason: "a Python call needs a (dotted) identifier".into(),
                    });
                }
                let n = self.lit(name.as_bytes())?;
                self.c.set_json_literals(*json_literals);
                let args = self.args(i, Encoding::Python, true);
                self.c.set_json_literals(false);
                let args = args?;
                let args = self
                    .c
                    .b
                    .push(Node::Capture(Capture::Args(Encoding::Python), args))?;
                self.c.b.push(Node::Seq(vec![n, args]))
            }
            Expr::ParenCall => {
                if name.is_empty()
                    || !name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
                {
                    return Err(Error::Unrepresentable {
                        what: "function name",
                        name,
                        dialect: self.dialect.name.clone(),
                        reason: "only ASCII letters, digits, `_`, `.` and `-` can precede `(`"
                            .into(),
                    });
                }
                let open = self.lit(format!("{name}(").as_bytes())?;
                let args = self.args(i, Encoding::Json, false)?;
                let args = self
                    .c
                    .b
                    .push(Node::Capture(Capture::Args(Encoding::Json), args))?;
                let required_empty = self.params[i]
                    .get("required")
                    .and_then(Value::as_array)
                    .is_none_or(|r| r.is_empty());
                let inner = if required_empty {
                    let empty = self.c.b.push(Node::Seq(vec![]))?;
                    self.c.b.push(Node::Union(vec![args, empty]))?
                } else {
                    args
                };
                let close = self.lit(b")")?;
                self.c.b.push(Node::Seq(vec![open, inner, close]))
            }
            _ => unreachable!("not a call builtin"),
        }
    }
}

impl Lowering<'_> {
    /// `@name`, `@name_json`, `@args(...)` or `@xml_args(...)` for the function of the
    /// enclosing `@call`.
    fn call_part(&mut self, e: &Expr) -> Result<NodeId> {
        let Some(i) = self.cur else {
            return Err(Error::Dialect {
                dialect: self.dialect.name.clone(),
                message: "@name, @name_json, @args and @xml_args belong inside @call(...)".into(),
            });
        };
        let name = self.tools.as_slice()[i].name.clone();
        match e {
            Expr::Name => {
                if name.is_empty()
                    || name
                        .bytes()
                        .any(|b| b.is_ascii_whitespace() || b"<>\"[]{}()".contains(&b))
                {
                    return Err(Error::Unrepresentable {
                        what: "function name",
                        name,
                        dialect: self.dialect.name.clone(),
                        reason: "a name written as is may not be empty nor hold whitespace or any of <>\"[]{}()".into(),
                    });
                }
                self.lit(name.as_bytes())
            }
            Expr::NameJson => {
                self.c.enc = Encoding::Json;
                let d = crate::grammar::dfa::Dfa::json_string_of_word(
                    name.as_bytes(),
                    self.c.opts.max_lexeme_states,
                )
                .map_err(|e| self.c.b.dfa_err(e, "", ""))?;
                self.c.lexeme(d)
            }
            Expr::Args(enc) => {
                let args = self.args(i, *enc, *enc == Encoding::Python)?;
                let args = if *enc == Encoding::JsonInString {
                    let q1 = self.lit(b"\"")?;
                    let q2 = self.lit(b"\"")?;
                    self.c.b.push(Node::Seq(vec![q1, args, q2]))?
                } else {
                    args
                };
                self.c.enc = Encoding::Json;
                self.c.b.push(Node::Capture(Capture::Args(*enc), args))
            }
            Expr::RawArgs(key) => self.raw_args(i, key),
            Expr::XmlArgs(x) => self.xml_args(i, x),
            _ => unreachable!("not a call part"),
        }
    }

    /// `@args(as=raw, key=K)` for function `i`: its arguments `{K: TEXT}` written as TEXT, raw.
    /// Only for a function whose parameters are a plain object schema with a property `K`
    /// that admits only strings (checked as a raw `@xml_args` value is) and no other required
    /// property; for any other function this spelling writes no call (its other spellings in
    /// the grammar still do), since its arguments are not one string. The text is never empty
    /// (`<|python_tag|>` alone is no call).
    fn raw_args(&mut self, i: usize, key: &str) -> Result<NodeId> {
        let normalized = crate::schema::normalize_type_aliases(&self.params[i]);
        let Some(obj) = normalized.as_object() else {
            return self.never();
        };
        let plain = obj
            .keys()
            .all(|k| xml_top_keyword(k) || crate::schema::is_annotation(k))
            && obj.get("type").is_none_or(|t| t == "object");
        let prop = obj
            .get("properties")
            .and_then(|p| p.as_object())
            .and_then(|p| p.get(key));
        let others_required = match obj.get("required") {
            None => false,
            Some(Value::Array(r)) => r.iter().any(|v| v.as_str() != Some(key)),
            Some(_) => true,
        };
        let Some(mut string) = prop
            .and_then(raw_string_schema)
            .filter(|_| plain && !others_required)
        else {
            return self.never();
        };
        // Not empty: an empty capture would read as no arguments at all.
        if string.get("minLength").and_then(Value::as_u64).unwrap_or(0) == 0 {
            string.insert("minLength".into(), 1.into());
        }
        let fname = self.tools.as_slice()[i].name.clone();
        let path = format!("/{fname}/properties/{key}");
        let value = self.raw_value(&[string], &[], None, &[], &path, true)?;
        let k = match self.c.b.raw_arg_keys.iter().position(|x| x == key) {
            Some(k) => k,
            None => {
                self.c.b.raw_arg_keys.push(key.to_owned());
                self.c.b.raw_arg_keys.len() - 1
            }
        };
        self.c
            .b
            .push(Node::Capture(Capture::RawArgs(k as u32), value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`is_strict`] says exactly when [`strict_objects`] changes nothing (the lowering copies
    /// a tool's parameters only then).
    #[test]
    fn is_strict_says_when_strict_objects_changes_nothing() {
        let schemas = [
            serde_json::json!(true),
            serde_json::json!({"type": "object"}),
            serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            serde_json::json!({"properties": {}, "additionalProperties": false}),
            serde_json::json!({"properties": {}, "patternProperties": {"^x": {}}}),
            serde_json::json!({"properties": {"a": {"properties": {}}}, "additionalProperties": false}),
            serde_json::json!({"properties": {}, "additionalProperties": {"properties": {}}}),
            serde_json::json!({"properties": {}, "anyOf": [{"properties": {}}]}),
            serde_json::json!({"properties": {}, "anyOf": [{"additionalProperties": true}]}),
            serde_json::json!({"properties": {}, "allOf": [{"properties": {}}]}),
            serde_json::json!({"$defs": {"d": {"properties": {}}}, "$ref": "#/$defs/d"}),
            serde_json::json!({"items": [{"properties": {}}], "additionalProperties": false}),
            serde_json::json!({"prefixItems": [{"properties": {}}]}),
            serde_json::json!({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}),
            serde_json::json!({"not": {"properties": {}}}),
        ];
        for s in schemas {
            let mut changed = s.clone();
            strict_objects(&mut changed);
            assert_eq!(is_strict(&s), changed == s, "{s}");
        }
    }
}
