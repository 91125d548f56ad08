//! Lowering a parsed dialect into one grammar: each rule in up to four call-count variants
//! (no call, one, at least one, any number), built-ins (`@text`, `@text_without`, `@ws`, the
//! calls generated from the tools' schemas) compiled through the schema compiler's
//! [`GrammarBuilder`](crate::grammar::builder::GrammarBuilder).

use super::syntax::{affix_text, Affix, Expr, XmlArgs, XmlTyping};
use super::*;
use crate::grammar::dfa::{Dfa, Op};
use crate::schema::keywords::{Keyword, Role};
use crate::schema::Lexeme;
use serde_json::Map;
use std::borrow::Cow;

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
    let mut l = Lowering {
        c: Compiler::new(&null, &options.compile),
        dialect,
        tools,
        allowed,
        memo: HashMap::new(),
        cur: None,
        specials: Vec::new(),
        calls: HashMap::new(),
        params: &params,
        max_text: match (&options.tool_choice, options.max_text_chars) {
            (_, Some(u32::MAX)) => None,
            (_, Some(n)) => Some(n),
            (ToolChoice::Required | ToolChoice::Function(_), None) => {
                Some(DEFAULT_REQUIRED_TEXT_CHARS)
            }
            _ => None,
        },
    };
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
    let functions = tools.as_slice().iter().map(|t| t.name.clone()).collect();
    let specials = std::mem::take(&mut l.specials);
    l.c.b.distinct_calls = options.distinct_calls;
    let g = l.c.b.finish(root, false, specials, functions)?;
    Ok(g)
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
    /// Bound on each stretch of free text, in characters.
    max_text: Option<u32>,
}

/// Says which function's parameters an error is about.
pub(super) fn in_function(e: Error, name: &str) -> Error {
    match e {
        Error::InvalidSchema { path, message } => Error::InvalidSchema {
            path: format!("{name}: {path}"),
            message,
        },
        Error::UnsupportedKeyword {
            keyword,
            path,
            reason,
        } => Error::UnsupportedKeyword {
            keyword,
            path: format!("{name}: {path}"),
            reason,
        },
        other => other,
    }
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

    pub(super) fn lit(&mut self, bytes: &[u8]) -> Result<NodeId> {
        lit_node(&mut self.c, bytes)
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
        let t = self.lit(text.as_bytes())?;
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
            });
        }
        let leaf = |this: &mut Self, f: &mut dyn FnMut(&mut Self) -> Result<NodeId>| match v {
            V::Zero | V::Any => f(this),
            V::One | V::Plus => this.never(),
        };
        match e {
            Expr::Lit(b) => leaf(self, &mut |t| t.lit(b)),
            Expr::Regex(r) => leaf(self, &mut |t| {
                t.regex(r).map_err(|e| match e {
                    // A limit met while compiling stays a limit (the whole grammar's, not the
                    // file's fault).
                    e @ Error::LimitExceeded { .. } => e,
                    e => Error::Dialect {
                        dialect: t.dialect.name.clone(),
                        message: format!("regex /{r}/: {e}"),
                    },
                })
            }),
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
    pub(super) fn args(&mut self, i: usize, enc: Encoding, kwargs: bool) -> Result<NodeId> {
        let schema: &'a Value = &self.params[i];
        let name = &self.tools.as_slice()[i].name;
        self.c.set_document(schema, enc);
        let r = if kwargs {
            self.c.compile_kwargs(schema, &format!("/{name}"))
        } else {
            self.c.compile(schema, "")
        };
        self.c.enc = Encoding::Json;
        r.map_err(|e| in_function(e, name))
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
            Expr::JsonCall {
                name_key,
                args_key,
                enc,
                id,
            } => {
                let name_node = {
                    self.c.enc = Encoding::Json;
                    let d = crate::grammar::dfa::Dfa::json_string_of_word(
                        name.as_bytes(),
                        self.c.opts.max_lexeme_states,
                    )
                    .map_err(|e| self.c.b.dfa_err(e, "", ""))?;
                    self.c.lexeme(d)?
                };
                let args = self.args(i, *enc, false)?;
                let args = if *enc == Encoding::JsonInString {
                    let q1 = self.lit(b"\"")?;
                    let q2 = self.lit(b"\"")?;
                    self.c.b.push(Node::Seq(vec![q1, args, q2]))?
                } else {
                    args
                };
                let args = self.c.b.push(Node::Capture(Capture::Args(*enc), args))?;
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
                let o = self.c.object_node(
                    entries,
                    &required,
                    None,
                    crate::grammar::Syntax::OBJECT,
                    false,
                    &[],
                )?;
                self.c.b.push(Node::Object(Box::new(o)))
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

/// Most listed arguments for which `@xml_args` allows any order (it tracks which were written,
/// one grammar node per subset); with more, they come in the schema's order.
pub(super) const XML_ANY_ORDER_MAX: usize = 8;

/// Top-level keywords of a parameters schema that `@xml_args` can honour (besides annotations).
pub(super) const XML_TOP_KEYWORDS: &[Keyword] = &[
    Keyword::Type,
    Keyword::Properties,
    Keyword::Required,
    Keyword::AdditionalProperties,
];

/// True when `k` is one of [`XML_TOP_KEYWORDS`].
fn xml_top_keyword(k: &str) -> bool {
    Keyword::from_name(k).is_some_and(|k| XML_TOP_KEYWORDS.contains(&k))
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
        let value = self.raw_value(&[string], &[], &[], &path)?;
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

    /// An `@xml_args` affix: its literals, special tokens and markers in sequence.
    fn affix(&mut self, a: &[Affix]) -> Result<NodeId> {
        let mut ids = Vec::new();
        for x in a {
            ids.push(match x {
                Affix::Lit(b) => self.lit(b)?,
                Affix::Special(s) => self.special(s)?,
                Affix::Marker(m) => self.marker(m)?,
            });
        }
        match ids.as_slice() {
            [one] => Ok(*one),
            _ => self.c.b.push(Node::Seq(ids)),
        }
    }

    /// A raw value: text matching one of the string schemas `parts` (see
    /// [`string_part`]) and holding none of `without`.
    fn raw_value(
        &mut self,
        parts: &[Map<String, Value>],
        without: &[String],
        pad: &[u8],
        path: &str,
    ) -> Result<NodeId> {
        let key = Lexeme::XmlRaw {
            without: without.to_vec(),
            parts: Value::Array(parts.iter().cloned().map(Value::Object).collect()).to_string(),
            strings: self.c.string_options_key(),
        };
        let d = self.c.cached(key, |c| {
            let states = c.opts.max_lexeme_states;
            let mut acc: Option<crate::grammar::dfa::Dfa> = None;
            for obj in parts {
                let d = raw_string_content(c, obj, path)?;
                acc = Some(match acc {
                    None => d,
                    Some(a) => a
                        .product(&d, crate::grammar::dfa::Op::Or, states)
                        .map_err(|e| c.b.dfa_err(e, path, ""))?,
                });
            }
            let d = match acc {
                Some(d) => d,
                None => crate::grammar::dfa::Dfa::literals(std::iter::empty::<&[u8]>(), states)
                    .map_err(|e| c.b.dfa_err(e, path, ""))?,
            };
            if without.is_empty() {
                return Ok(d);
            }
            let alts: Vec<String> = without.iter().map(|w| regex_syntax::escape(w)).collect();
            let bad =
                c.b.regex(&format!("(?s:.)*(?:{})(?s:.)*", alts.join("|")), "")?;
            d.product(&bad, crate::grammar::dfa::Op::AndNot, states)
                .map_err(|e| c.b.dfa_err(e, path, ""))
        })?;
        self.c.enc = Encoding::Json;
        if !pad.is_empty() {
            return self.padded_raw(&d, pad, path);
        }
        let l = self.c.b.lexeme(d)?;
        self.c.b.push(Node::Capture(Capture::Value(true), l))
    }

    /// A JSON value of `schema` (a property of function `i`), with an optional `pad` on either
    /// side (a JSON value never starts nor ends with the pad's text: line breaks).
    fn json_value(&mut self, i: usize, schema: &Value, pad: &[u8], path: &str) -> Result<NodeId> {
        let v = self.json_value_bare(i, schema, path)?;
        if pad.is_empty() {
            return Ok(v);
        }
        let mut seq = Vec::new();
        for _ in 0..2 {
            let p = self.lit(pad)?;
            seq.push(self.c.b.push(Node::Repeat {
                item: p,
                min: 0,
                max: 1,
            })?);
        }
        self.c.b.push(Node::Seq(vec![seq[0], v, seq[1]]))
    }

    fn json_value_bare(&mut self, i: usize, schema: &Value, path: &str) -> Result<NodeId> {
        let fname = self.tools.as_slice()[i].name.clone();
        let doc: &Value = &self.params[i];
        self.c.set_document(doc, Encoding::Json);
        let n = self
            .c
            .compile(schema, path)
            .map_err(|e| in_function(e, &fname))?;
        self.c.b.push(Node::Capture(Capture::Value(false), n))
    }

    /// The arguments of function `i` as tagged fields (see [`XmlArgs`]).
    fn xml_args(&mut self, i: usize, x: &XmlArgs) -> Result<NodeId> {
        let normalized = crate::schema::normalize_type_aliases(&self.params[i]);
        let schema: &Value = &normalized;
        let fname = self.tools.as_slice()[i].name.clone();
        let refuse = |reason: String| Error::Unrepresentable {
            what: "arguments of",
            name: fname.clone(),
            dialect: self.dialect.name.clone(),
            reason,
        };
        let obj = schema
            .as_object()
            .ok_or_else(|| refuse("the parameters must be an object schema".into()))?;
        if let Some(k) = obj
            .keys()
            .find(|k| !xml_top_keyword(k) && !crate::schema::is_annotation(k))
        {
            return Err(refuse(format!(
                "tagged arguments take a plain object schema (properties, required), not `{k}`"
            )));
        }
        if obj.get("type").is_some_and(|t| t != "object") {
            return Err(refuse("the parameters must be of type object".into()));
        }
        let props: Vec<(String, Value)> = match obj.get("properties") {
            None => Vec::new(),
            Some(Value::Object(p)) => p.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(_) => return Err(refuse("`properties` must be an object".into())),
        };
        let required: Vec<String> = match obj.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            Some(_) => return Err(refuse("`required` must be an array".into())),
        };
        if let Some(r) = required
            .iter()
            .find(|r| !props.iter().any(|(k, _)| k == *r))
        {
            return Err(refuse(format!(
                "required argument {r:?} is not among the properties"
            )));
        }
        // Keys are written as is: no markup or line breaks in them.
        if let Some((k, _)) = props.iter().find(|(k, _)| {
            k.is_empty() || k.bytes().any(|b| b"<>\"&\n\r".contains(&b)) || k.trim() != k
        }) {
            return Err(Error::Unrepresentable {
                what: "argument name",
                name: k.clone(),
                dialect: self.dialect.name.clone(),
                reason: "a tagged argument name may not be empty, hold <>\"& or line breaks, nor start or end with a space".into(),
            });
        }
        let without = raw_exclusions(x);
        let mut fields = Vec::new();
        for (k, p) in &props {
            self.c.b.check_budget()?;
            let path = format!("/{fname}/properties/{k}");
            let open = self.affix(&x.key_prefix)?;
            let key = self.lit(k.as_bytes())?;
            let key = self.c.b.push(Node::Capture(Capture::Key, key))?;
            let close = self.affix(&x.value_suffix)?;
            let value = match &x.typing {
                XmlTyping::BySchema => {
                    let mid = self.affix(&x.key_suffix)?;
                    let v = match raw_string_schema(p) {
                        Some(obj) => self.raw_value(&[obj], &without, &x.pad, &path)?,
                        None => self.json_value(i, p, &x.pad, &path)?,
                    };
                    self.c.b.push(Node::Seq(vec![mid, v]))?
                }
                XmlTyping::Tagged(groups) => {
                    let mut alts = Vec::new();
                    for g in groups {
                        let v = if g.raw() {
                            match string_part(p, schema, 0) {
                                Ok(None) => continue,
                                Ok(Some(parts)) => {
                                    self.raw_value(&parts, &without, &x.pad, &path)?
                                }
                                Err(reason) => {
                                    return Err(Error::Unrepresentable {
                                        what: "argument",
                                        name: format!("{fname}.{k}"),
                                        dialect: self.dialect.name.clone(),
                                        reason: format!(
                                            "its string values are written raw, and {reason}"
                                        ),
                                    })
                                }
                            }
                        } else {
                            match restrict_types(p, &g.types) {
                                None => continue,
                                Some(s) => self.json_value(i, &s, &x.pad, &path)?,
                            }
                        };
                        let mid = self.affix(&g.suffix)?;
                        alts.push(self.c.b.push(Node::Seq(vec![mid, v]))?);
                    }
                    self.c.b.push(Node::Union(alts))?
                }
            };
            let mut parts = vec![open, key, value, close];
            if !x.sep.is_empty() {
                let s = self.lit(&x.sep)?;
                let s = self.c.b.push(Node::Repeat {
                    item: s,
                    min: 0,
                    max: 1,
                })?;
                parts.insert(0, s);
            }
            fields.push(self.c.b.push(Node::Seq(parts))?);
        }
        let req: Vec<bool> = props.iter().map(|(k, _)| required.contains(k)).collect();
        let body = if fields.len() <= XML_ANY_ORDER_MAX {
            // One node per set of written fields: any order, each at most once.
            let n = fields.len();
            let mut memo: HashMap<u32, NodeId> = HashMap::new();
            self.field_sets(0, n, &fields, &req, &mut memo)?
        } else {
            let mut items = Vec::new();
            for (f, r) in fields.iter().zip(&req) {
                items.push(if *r {
                    *f
                } else {
                    self.c.b.push(Node::Repeat {
                        item: *f,
                        min: 0,
                        max: 1,
                    })?
                });
            }
            self.c.b.push(Node::Seq(items))?
        };
        self.c.b.push(Node::Capture(Capture::Fields, body))
    }

    /// A raw value with an optional `pad` on each side that is not part of it: the value may
    /// not start nor end with the pad, and an empty value is written with at most one pad before
    /// and one after, each output with one reading: `pad V pad?`, `V pad?` with V non-empty, or
    /// V empty.
    fn padded_raw(&mut self, d: &Arc<Dfa>, pad: &[u8], path: &str) -> Result<NodeId> {
        let states = self.c.opts.max_lexeme_states;
        let p = regex_syntax::escape(&String::from_utf8_lossy(pad));
        let ends = self.c.b.regex(&format!("{p}(?s:.)*|(?s:.)*{p}"), "")?;
        let inner = d
            .product(&ends, Op::AndNot, states)
            .map_err(|e| self.c.b.dfa_err(e, path, ""))?;
        let empty = self.c.b.regex("", "")?;
        let nonempty = inner
            .product(&empty, Op::AndNot, states)
            .map_err(|e| self.c.b.dfa_err(e, path, ""))?;
        let empty_ok = inner.matches(b"");
        let inner = Arc::new(inner);
        let mut alts = Vec::new();
        // pad V pad?
        let v = self.c.b.lexeme(inner.clone())?;
        let v = self.c.b.push(Node::Capture(Capture::Value(true), v))?;
        let p1 = self.lit(pad)?;
        let p2 = self.lit(pad)?;
        let p2 = self.c.b.push(Node::Repeat {
            item: p2,
            min: 0,
            max: 1,
        })?;
        alts.push(self.c.b.push(Node::Seq(vec![p1, v, p2]))?);
        // V pad?, V non-empty
        let v = self.c.b.lexeme(Arc::new(nonempty))?;
        let v = self.c.b.push(Node::Capture(Capture::Value(true), v))?;
        alts.push(self.c.b.push(Node::Seq(vec![v, p2]))?);
        // V empty
        if empty_ok {
            let e = self.c.b.regex("", "")?;
            let v = self.c.b.lexeme(Arc::new(
                e.product(&inner, Op::And, states)
                    .map_err(|e| self.c.b.dfa_err(e, path, ""))?,
            ))?;
            alts.push(self.c.b.push(Node::Capture(Capture::Value(true), v))?);
        }
        self.c.b.push(Node::Union(alts))
    }

    /// The fields that may follow once the fields in `seen` (a bit set) are written.
    fn field_sets(
        &mut self,
        seen: u32,
        n: usize,
        fields: &[NodeId],
        req: &[bool],
        memo: &mut HashMap<u32, NodeId>,
    ) -> Result<NodeId> {
        if let Some(&id) = memo.get(&seen) {
            return Ok(id);
        }
        let mut alts = Vec::new();
        if (0..n).all(|k| !req[k] || seen & (1 << k) != 0) {
            alts.push(self.c.b.push(Node::Seq(vec![]))?);
        }
        for k in 0..n {
            if seen & (1 << k) == 0 {
                let rest = self.field_sets(seen | (1 << k), n, fields, req, memo)?;
                alts.push(self.c.b.push(Node::Seq(vec![fields[k], rest]))?);
            }
        }
        let id = self.c.b.push(Node::Union(alts))?;
        memo.insert(seen, id);
        Ok(id)
    }
}

/// A raw (unquoted) string value of a tagged argument, as `obj` (a string schema, see
/// [`raw_string_schema`]) allows it, holding no `stop` (the value's closing tag).
pub(super) fn raw_string_lexeme(
    c: &mut Compiler,
    obj: &serde_json::Map<String, Value>,
    stop: &str,
    path: &str,
) -> Result<NodeId> {
    let d = c.cached(
        Lexeme::RawString {
            stop: stop.to_string(),
            schema: Value::Object(obj.clone()).to_string(),
            strings: c.string_options_key(),
        },
        |c| {
            let states = c.opts.max_lexeme_states;
            let d = raw_string_content(c, obj, path)?;
            let bad =
                c.b.regex(&format!("(?s:.)*{}(?s:.)*", regex_syntax::escape(stop)), "")?;
            d.product(&bad, crate::grammar::dfa::Op::AndNot, states)
                .map_err(|e| c.b.dfa_err(e, path, ""))
        },
    )?;
    c.enc = Encoding::Json;
    c.b.lexeme(d)
}

/// The keywords of a property schema that admits only strings, which `@xml_args` writes raw:
/// `{"type": "string", ...}` (lengths, pattern, format, enum, const) or an enum/const of strings.
pub(super) fn raw_string_schema(p: &Value) -> Option<serde_json::Map<String, Value>> {
    let o = p.as_object()?;
    let typed = match o.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(a)) => a.len() == 1 && a[0] == "string",
        Some(_) => false,
        None => false,
    };
    let all_str = |v: &Value| match v {
        Value::Array(a) => a.iter().all(Value::is_string),
        v => v.is_string(),
    };
    let enum_strings = ["enum", "const"]
        .iter()
        .filter_map(|k| o.get(*k))
        .all(all_str)
        && (o.contains_key("enum") || o.contains_key("const"));
    if !typed && !enum_strings {
        return None;
    }
    let ok = o.keys().all(|k| {
        Keyword::from_name(k).is_some_and(Keyword::fits_string_schema)
            || crate::schema::is_annotation(k)
    });
    if !ok
        || !["enum", "const"]
            .iter()
            .filter_map(|k| o.get(*k))
            .all(all_str)
    {
        return None;
    }
    Some(o.clone())
}

/// Whether raw values may not hold the key prefix's text (the peers' parsers end a value at
/// the next field).
const RAW_WITHOUT_KEY_PREFIX: bool = true;

/// The texts a raw `@xml_args` value may not hold: the value suffix's (without the whitespace
/// around it), the key prefix's, the text of every special token and marker in either (a marker
/// falls back to its text where the vocabulary lacks the token; a special token's spelling would
/// be read as the token by the text parser), and `value_without`'s.
fn raw_exclusions(x: &XmlArgs) -> Vec<String> {
    let trimmed = |a: &[Affix]| {
        let t = String::from_utf8_lossy(&affix_text(a)).into_owned();
        match t.trim() {
            "" => t.clone(),
            s => s.to_owned(),
        }
    };
    let mut v = vec![trimmed(&x.value_suffix)];
    if RAW_WITHOUT_KEY_PREFIX {
        v.push(trimmed(&x.key_prefix));
    }
    for a in x.value_suffix.iter().chain(&x.key_prefix) {
        if let Affix::Special(s) | Affix::Marker(s) = a {
            v.push(s.clone());
        }
    }
    v.extend(x.value_without.iter().cloned());
    v.sort();
    v.dedup();
    v
}

/// The decoded content a raw-string schema `obj` allows: its string keywords' automaton, within
/// its `enum`/`const` strings where it has them.
pub(super) fn raw_string_content(
    c: &mut Compiler,
    obj: &Map<String, Value>,
    path: &str,
) -> Result<Dfa> {
    let states = c.opts.max_lexeme_states;
    let d = c.string_dfa(obj, path)?;
    let Some(lits) = raw_literals(obj) else {
        return Ok(d);
    };
    let l = Dfa::literals(lits.iter().map(|s| s.as_bytes()), states)
        .map_err(|e| c.b.dfa_err(e, path, ""))?;
    d.product(&l, Op::And, states)
        .map_err(|e| c.b.dfa_err(e, path, ""))
}

/// The strings an `enum`/`const` of a raw-string schema `m` allows (the intersection of its
/// lists; members that are not strings never match a raw string), if it has either.
fn raw_literals(m: &Map<String, Value>) -> Option<Vec<String>> {
    let mut acc: Option<Vec<String>> = None;
    for kw in ["enum", "const"] {
        let Some(v) = m.get(kw) else { continue };
        let vals: Vec<String> = match v {
            Value::Array(a) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect(),
            Value::String(s) => vec![s.clone()],
            _ => Vec::new(),
        };
        acc = Some(match acc {
            None => vals,
            Some(a) => a.into_iter().filter(|x| vals.contains(x)).collect(),
        });
    }
    acc
}

/// The strings a property schema admits, as string schemas (`type: string` with `minLength`,
/// `maxLength`, `pattern`, `format`, `enum`/`const` of strings) whose union they are: `None`
/// where it admits no string; an error (why) where its strings depend on something a raw value
/// cannot be checked against (`allOf`, `not`, `if`, a `oneOf` with several string branches,
/// a remote `$ref`, ...). `root`: the parameters schema, for local `$ref`s.
fn string_part(
    p: &Value,
    root: &Value,
    depth: usize,
) -> std::result::Result<Option<Vec<Map<String, Value>>>, String> {
    if depth > 16 {
        return Err("its `$ref`s nest too deeply".into());
    }
    let o = match p {
        Value::Bool(true) => return Ok(Some(vec![Map::new()])),
        Value::Bool(false) => return Ok(None),
        Value::Object(o) => o,
        _ => return Err("it is not a schema".into()),
    };
    if let Some(t) = o.get("type") {
        let strings = match t {
            Value::String(s) => s == "string",
            Value::Array(a) => a.iter().any(|x| x == "string"),
            _ => false,
        };
        if !strings {
            return Ok(None);
        }
    }
    let mut base = Map::new();
    let mut subs: Vec<Vec<Map<String, Value>>> = Vec::new();
    for (k, v) in o {
        match Keyword::from_name(k) {
            Some(Keyword::Type | Keyword::Nullable) => {}
            Some(kw) if kw.role() == Role::String => {
                base.insert(k.clone(), v.clone());
            }
            Some(Keyword::Enum) => {
                let s: Vec<Value> = v
                    .as_array()
                    .map(|a| a.iter().filter(|x| x.is_string()).cloned().collect())
                    .unwrap_or_default();
                if s.is_empty() {
                    return Ok(None);
                }
                base.insert(k.clone(), Value::Array(s));
            }
            Some(Keyword::Const) => {
                if !v.is_string() {
                    return Ok(None);
                }
                base.insert(k.clone(), v.clone());
            }
            Some(Keyword::Ref) => {
                let target = v
                    .as_str()
                    .and_then(|r| r.strip_prefix('#'))
                    .and_then(|ptr| root.pointer(ptr))
                    .ok_or_else(|| format!("its `$ref` {v} is not a local reference"))?;
                match string_part(target, root, depth + 1)? {
                    None => return Ok(None),
                    Some(parts) => subs.push(parts),
                }
            }
            Some(Keyword::AnyOf | Keyword::OneOf) => {
                let mut parts = Vec::new();
                let mut branches = 0;
                for b in v.as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    if let Some(ps) = string_part(b, root, depth + 1)? {
                        branches += 1;
                        parts.extend(ps);
                    }
                }
                if k == "oneOf" && branches > 1 {
                    return Err("several of its `oneOf` branches admit strings".into());
                }
                if branches == 0 {
                    return Ok(None);
                }
                subs.push(parts);
            }
            Some(kw) if kw.never_constrains_strings() => {}
            _ if crate::schema::is_annotation(k) => {}
            _ => {
                return Err(format!(
                    "its strings are constrained through `{k}`, which a raw value cannot be \
                     checked against"
                ))
            }
        }
    }
    let mut out = vec![base];
    if subs.len() > 1 {
        return Err("it combines `$ref`, `anyOf` and `oneOf`".into());
    }
    if let Some(parts) = subs.pop() {
        let base = out.pop().expect("one");
        for mut part in parts {
            for (k, v) in &base {
                match part.get(k) {
                    Some(w) if w != v => {
                        return Err(format!(
                            "its `{k}` stands both beside and inside a subschema"
                        ))
                    }
                    _ => {
                        part.insert(k.clone(), v.clone());
                    }
                }
            }
            out.push(part);
        }
    }
    for m in &mut out {
        m.insert("type".into(), "string".into());
    }
    Ok(Some(out))
}

/// True when `v` is of one of the JSON `types` (an integral number is an `integer`).
fn of_type(v: &Value, types: &[&str]) -> bool {
    match v {
        Value::Null => types.contains(&"null"),
        Value::Bool(_) => types.contains(&"boolean"),
        Value::Number(n) => {
            types.contains(&"number")
                || (types.contains(&"integer")
                    && (n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)))
        }
        Value::String(_) => types.contains(&"string"),
        Value::Array(_) => types.contains(&"array"),
        Value::Object(_) => types.contains(&"object"),
    }
}

/// `p` restricted to values of the JSON `types` (its `type` intersected, its `enum`/`const`
/// filtered), or `None` where it admits none of them.
fn restrict_types(p: &Value, types: &[&str]) -> Option<Value> {
    let mut o = match p {
        Value::Bool(false) => return None,
        Value::Bool(true) => Map::new(),
        Value::Object(o) => o.clone(),
        // Not a schema: the compiler says so.
        _ => return Some(p.clone()),
    };
    let mut have: Vec<&str> = match o.get("type") {
        None => types.to_vec(),
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        Some(_) => return Some(p.clone()),
    };
    if o.contains_key("type") && o.get("nullable") == Some(&Value::Bool(true)) {
        have.push("null");
    }
    let mut out: Vec<&str> = Vec::new();
    for t in super::syntax::JSON_TYPES {
        let admitted = have.contains(&t) || (t == "integer" && have.contains(&"number"));
        let wanted = types.contains(&t) || (t == "integer" && types.contains(&"number"));
        if admitted && wanted {
            out.push(t);
        }
    }
    // `number` admits integers: where both are in, `number` says it.
    if out.contains(&"number") {
        out.retain(|t| *t != "integer");
    }
    if out.is_empty() {
        return None;
    }
    o.remove("nullable");
    o.insert(
        "type".into(),
        match out.as_slice() {
            [one] => Value::from(*one),
            _ => Value::from(out.clone()),
        },
    );
    if let Some(Value::Array(e)) = o.get("enum") {
        let kept: Vec<Value> = e.iter().filter(|v| of_type(v, &out)).cloned().collect();
        if kept.is_empty() {
            return None;
        }
        o.insert("enum".into(), Value::Array(kept));
    }
    if o.get("const").is_some_and(|c| !of_type(c, &out)) {
        return None;
    }
    Some(Value::Object(o))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{CompileOptions, Node};

    /// A raw value's automaton depends on [`CompileOptions::format_annotation`]: compiled with
    /// it and then without it in one process, the second compile must not reuse the first's
    /// automaton (which ignores `format`). Both shared one cache entry before the key held the
    /// option.
    #[test]
    fn raw_value_cache_keeps_format_annotation_apart() {
        let obj = serde_json::json!({"type": "string", "format": "date"});
        let obj = obj.as_object().expect("an object").clone();
        let root = Value::Bool(true);
        let accepts_non_date = |annotation: bool| {
            let opts = CompileOptions::default().format_annotation(annotation);
            let mut c = Compiler::new(&root, &opts);
            let id = raw_string_lexeme(&mut c, &obj, "</callmask-format-test>", "")
                .expect("a raw string lexeme");
            match c.b.nodes[id as usize] {
                Node::Lex(l) => c.b.lexemes[l as usize].matches(b"x"),
                _ => false,
            }
        };
        for _ in 0..2 {
            assert!(accepts_non_date(true), "format as an annotation: any text");
            assert!(!accepts_non_date(false), "format asserted: `x` is no date");
        }
    }

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
