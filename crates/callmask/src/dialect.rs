//! Tool-call dialects: grammar files (GBNF-like) that say how a model writes its calls, compiled
//! together with a tool set into one [`Grammar`].
//!
//! A dialect file is a list of rules `name ::= expression`; `root` is where output starts. The
//! expression syntax (see `grammars/README.md`): `"literal"`, `[character class]`, `/regex/`,
//! rule names, `( ... )`, `|`, and the postfix operators `?`, `*`, `+`, `{m}`, `{m,}`, `{m,n}`;
//! `<|name|>` (or `@special("text")`) is the vocabulary's special token; built-in rules begin
//! with `@`: `@text`, `@text_without("marker", ...)`, `@ws`, and the calls `@json_call(...)`,
//! `@python_call` and `@paren_call`, generated from the tools' JSON Schemas.
//!
//! `tool_choice` and `parallel_calls` are applied to the file, not written in it: every rule is
//! compiled in up to four variants (no call, exactly one call, at least one, any number), and
//! the root variant is picked from the options. So `auto` allows text or calls, `none` only the
//! call-free paths, `required` only paths with a call, and `parallel_calls: false` exactly one.

use crate::error::{Error, Result};
use crate::grammar::{Capture, Grammar, Node, NodeId};
use crate::schema::{is_identifier, CompileOptions, Compiler, Encoding};
use crate::tools::Tools;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// The dialects shipped in `grammars/`, by name.
const BUILTIN: &[(&str, &str)] = &[
    ("empower", include_str!("../grammars/empower.gbnf")),
    ("functools", include_str!("../grammars/functools.gbnf")),
    ("pythonic", include_str!("../grammars/pythonic.gbnf")),
    ("inline", include_str!("../grammars/inline.gbnf")),
    ("hermes", include_str!("../grammars/hermes.gbnf")),
    (
        "llama31_json",
        include_str!("../grammars/llama31_json.gbnf"),
    ),
];

/// Most rules, tokens and nesting in a dialect file (they are small).
const MAX_FILE_BYTES: usize = 1 << 20;
const MAX_NESTING: usize = 64;

/// Which calls the output may (or must) make, as OpenAI's `tool_choice`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// Text or calls, as the model decides.
    #[default]
    Auto,
    /// At least one call.
    Required,
    /// No calls: only the dialect's text form.
    None,
    /// At least one call, all of this function.
    Function(String),
}

impl std::str::FromStr for ToolChoice {
    type Err = Error;
    /// `auto`, `required`, `none`, or a function name.
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            "" => return Err(Error::InvalidTools("empty tool_choice".into())),
            name => ToolChoice::Function(name.to_owned()),
        })
    }
}

/// Markers of a reasoning block the model may write before its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reasoning {
    /// Opening marker, e.g. `<think>` (a special token if the vocabulary has one so named, else
    /// text).
    pub start: String,
    /// Closing marker, e.g. `</think>`.
    pub end: String,
}

impl Default for Reasoning {
    fn default() -> Self {
        Reasoning {
            start: "<think>".into(),
            end: "</think>".into(),
        }
    }
}

/// How to compile a dialect for a tool set.
#[derive(Debug, Clone)]
pub struct DialectOptions {
    /// Which calls are allowed or required.
    pub tool_choice: ToolChoice,
    /// `true`: one or more calls; `false`: exactly one call when calling.
    pub parallel_calls: bool,
    /// An optional reasoning block before the answer (unconstrained text between the markers).
    pub reasoning: Option<Reasoning>,
    /// At most this many characters in each stretch of free text (`@text...` builtins): keeps a
    /// model from rambling before (or instead of) its calls. `None` (the default): unbounded
    /// with `tool_choice` `auto` or `none`, and [`DEFAULT_REQUIRED_TEXT_CHARS`] with
    /// `required` or a named function, where a call must come; `Some(u32::MAX)` lifts that
    /// bound too.
    pub max_text_chars: Option<u32>,
    /// Schema compile options and limits (whitespace, depth, states, time, lenient mode).
    pub compile: CompileOptions,
    /// Strict tool arguments (default `true`), as OpenAI's `strict: true` and XGrammar's strict
    /// mode: in a tool's parameters, an object schema that lists `properties` and says nothing
    /// of `additionalProperties` (nor `patternProperties`, `unevaluatedProperties`, or a
    /// combinator that could add keys) allows only its declared keys, so a model cannot invent
    /// arguments. A tool opts out with `"strict": false` ([`crate::Tool::strict`]); `false`
    /// here keeps JSON Schema's default (extra keys allowed) for every tool.
    /// [`crate::Grammar::from_json_schema`] always keeps JSON Schema's default.
    pub strict_arguments: bool,
}

impl Default for DialectOptions {
    fn default() -> Self {
        DialectOptions {
            tool_choice: ToolChoice::Auto,
            parallel_calls: true,
            reasoning: None,
            max_text_chars: None,
            compile: CompileOptions::default(),
            strict_arguments: true,
        }
    }
}

/// The bound on each stretch of free text (e.g. before the first call) when `tool_choice` is
/// `required` or a named function and [`DialectOptions::max_text_chars`] is `None`: enough for a
/// sentence of preamble, short enough that the call comes.
pub const DEFAULT_REQUIRED_TEXT_CHARS: u32 = 100;

/// A parsed dialect file, ready to compile with tool sets.
#[derive(Debug, Clone)]
pub struct Dialect {
    name: String,
    rules: Arc<Vec<(String, Expr)>>,
}

/// A dialect expression.
#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Lit(Vec<u8>),
    Regex(String),
    Special(String),
    Rule(String),
    Seq(Vec<Expr>),
    Alt(Vec<Expr>),
    Repeat(Box<Expr>, u32, u32),
    Text(Vec<String>),
    TextMatching(String),
    Ws,
    JsonCall {
        name_key: String,
        args_key: String,
        enc: Encoding,
    },
    PythonCall,
    ParenCall,
}

impl Dialect {
    /// A dialect shipped with callmask: `empower`, `functools`, `pythonic`, `inline`, `hermes`,
    /// `llama31_json`.
    pub fn by_name(name: &str) -> Result<Dialect> {
        match BUILTIN.iter().find(|(n, _)| *n == name) {
            Some((n, src)) => Dialect::parse(n, src),
            None => Err(Error::Dialect {
                dialect: name.into(),
                message: format!(
                    "unknown dialect (built in: {}; or give a path to a grammar file)",
                    Self::builtin_names().join(", ")
                ),
            }),
        }
    }

    /// The names of the built-in dialects.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN.iter().map(|(n, _)| *n).collect()
    }

    /// A built-in dialect by name, or else a grammar file at that path.
    pub fn load(name_or_path: &str) -> Result<Dialect> {
        if BUILTIN.iter().any(|(n, _)| *n == name_or_path) {
            return Self::by_name(name_or_path);
        }
        let p = Path::new(name_or_path);
        if p.exists() {
            return Self::from_file(p);
        }
        Self::by_name(name_or_path)
    }

    /// Reads a dialect grammar file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Dialect> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses dialect grammar text; `name` is used in error messages.
    pub fn parse(name: &str, text: &str) -> Result<Dialect> {
        let err = |line: usize, m: String| Error::Dialect {
            dialect: name.into(),
            message: format!("line {line}: {m}"),
        };
        if text.len() > MAX_FILE_BYTES {
            return Err(err(0, "the file is larger than 1 MiB".into()));
        }
        let toks = lex(text).map_err(|(l, m)| err(l, m))?;
        let mut p = Parser { toks, pos: 0 };
        let mut rules: Vec<(String, Expr)> = Vec::new();
        while p.pos < p.toks.len() {
            let line = p.toks[p.pos].1;
            let name = match &p.toks[p.pos].0 {
                Tok::Ident(n) => n.clone(),
                t => return Err(err(line, format!("expected a rule name, found {t:?}"))),
            };
            p.pos += 1;
            if p.peek() != Some(&Tok::Define) {
                return Err(err(line, format!("expected `::=` after {name}")));
            }
            p.pos += 1;
            let e = p.alt(0).map_err(|(l, m)| err(l, m))?;
            if rules.iter().any(|(n, _)| *n == name) {
                return Err(err(line, format!("rule {name} is defined twice")));
            }
            rules.push((name, e));
        }
        if !rules.iter().any(|(n, _)| n == "root") {
            return Err(err(0, "no `root` rule".into()));
        }
        for (_, e) in &rules {
            check_refs(e, &rules).map_err(|m| err(0, m))?;
        }
        Ok(Dialect {
            name: name.into(),
            rules: Arc::new(rules),
        })
    }

    /// The dialect's name (or file path).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Compiles the dialect for `tools` into a grammar (shareable across threads).
    pub fn compile(&self, tools: &Tools, options: &DialectOptions) -> Result<Grammar> {
        crate::schema::check_schema_shape(
            tools
                .as_slice()
                .iter()
                .filter_map(|t| t.parameters.as_ref()),
            &options.compile,
        )?;
        let allowed: Vec<usize> = match &options.tool_choice {
            ToolChoice::Function(f) => {
                let i = tools
                    .as_slice()
                    .iter()
                    .position(|t| &t.name == f)
                    .ok_or_else(|| {
                        Error::InvalidTools(format!("tool_choice names {f:?}, which is not a tool"))
                    })?;
                vec![i]
            }
            _ => (0..tools.len()).collect(),
        };
        let null = Value::Null;
        let params: Vec<Value> = tools
            .as_slice()
            .iter()
            .map(|t| {
                let mut p = object_schema(t.parameters.as_ref());
                if options.strict_arguments && t.strict != Some(false) {
                    strict_objects(&mut p);
                }
                p
            })
            .collect();
        let mut l = Lowering {
            c: Compiler::new(&null, &options.compile),
            dialect: self,
            tools,
            allowed,
            memo: HashMap::new(),
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
        let root = self.rule("root").expect("checked at parse time");
        let body = match (&options.tool_choice, options.parallel_calls) {
            (ToolChoice::None, _) => l.lower(root, V::Zero, 0)?,
            (ToolChoice::Auto, true) => l.lower(root, V::Any, 0)?,
            (ToolChoice::Auto, false) => {
                let a = l.lower(root, V::Zero, 0)?;
                let b = l.lower(root, V::One, 0)?;
                l.c.push(Node::Union(vec![a, b]))?
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
                let block = l.c.push(Node::Seq(vec![start, text, end, ws]))?;
                let opt = l.c.push(Node::Repeat {
                    item: block,
                    min: 0,
                    max: 1,
                })?;
                l.c.push(Node::Seq(vec![opt, body]))?
            }
        };
        let functions = tools.as_slice().iter().map(|t| t.name.clone()).collect();
        let specials = std::mem::take(&mut l.specials);
        let g = l.c.finish(root, false, specials, functions)?;
        if g.is_empty() {
            return Err(Error::Dialect {
                dialect: self.name.clone(),
                message: format!(
                    "no output satisfies tool_choice {:?} with {} tool(s)",
                    options.tool_choice,
                    tools.len()
                ),
            });
        }
        Ok(g)
    }

    fn rule(&self, name: &str) -> Option<&Expr> {
        self.rules.iter().find(|(n, _)| n == name).map(|(_, e)| e)
    }
}

/// Adds `"additionalProperties": false` to every object schema in `schema` that lists
/// `properties` and leaves extra keys to JSON Schema's default, where nothing else (pattern or
/// unevaluated properties, `allOf`/`anyOf`/`oneOf`/`$ref` beside it) could declare more keys.
/// Subschemas under `allOf`, `not`, `if`/`then`/`else` and `dependentSchemas` are left alone:
/// their keys combine with their siblings'.
fn strict_objects(schema: &mut Value) {
    let Value::Object(o) = schema else { return };
    let open = o.contains_key("properties")
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
        .any(|k| o.contains_key(*k));
    if open {
        o.insert("additionalProperties".into(), Value::Bool(false));
    }
    for (k, v) in o.iter_mut() {
        match k.as_str() {
            "properties" | "$defs" | "definitions" => {
                if let Value::Object(m) = v {
                    m.values_mut().for_each(strict_objects);
                }
            }
            "items" | "additionalItems" | "additionalProperties" | "contains" => match v {
                Value::Array(a) => a.iter_mut().for_each(strict_objects),
                _ => strict_objects(v),
            },
            "prefixItems" | "anyOf" | "oneOf" => {
                if let Value::Array(a) = v {
                    a.iter_mut().for_each(strict_objects);
                }
            }
            _ => {}
        }
    }
}

/// A tool's parameters as an object schema (`None`: no arguments at all).
fn object_schema(p: Option<&Value>) -> Value {
    match p {
        None => {
            serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false})
        }
        Some(Value::Bool(true)) => serde_json::json!({"type": "object"}),
        Some(Value::Object(o)) if !o.contains_key("type") => {
            let mut o = o.clone();
            o.insert("type".into(), "object".into());
            Value::Object(o)
        }
        Some(v) => v.clone(),
    }
}

/// Call-count variant of a rule: no call, exactly one, at least one, any number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum V {
    Zero,
    One,
    Plus,
    Any,
}

struct Lowering<'a> {
    c: Compiler<'a>,
    dialect: &'a Dialect,
    tools: &'a Tools,
    allowed: Vec<usize>,
    memo: HashMap<(String, V), NodeId>,
    specials: Vec<String>,
    /// Call nodes by builtin (a builtin's union of calls is built once).
    calls: HashMap<String, NodeId>,
    params: &'a [Value],
    /// Bound on each stretch of free text, in characters.
    max_text: Option<u32>,
}

/// Says which function's parameters an error is about.
fn in_function(e: Error, name: &str) -> Error {
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

impl<'a> Lowering<'a> {
    fn never(&mut self) -> Result<NodeId> {
        self.c.push(Node::Never)
    }

    fn lit(&mut self, bytes: &[u8]) -> Result<NodeId> {
        let d = self.c.cached(format!("lit|{bytes:?}"), |c| {
            crate::automaton::dfa::Dfa::literals([bytes], c.opts.max_lexeme_states)
                .map_err(|e| c.dfa_err(e, "", ""))
        })?;
        self.c.lexeme(d)
    }

    /// A regex lexeme (shared process-wide, so its token walks are too).
    fn regex(&mut self, re: &str) -> Result<NodeId> {
        let d = self.c.cached(format!("re|{re}"), |c| c.regex(re, ""))?;
        self.c.lexeme(d)
    }

    fn special(&mut self, name: &str) -> Result<NodeId> {
        let i = match self.specials.iter().position(|s| s == name) {
            Some(i) => i,
            None => {
                self.specials.push(name.to_owned());
                self.specials.len() - 1
            }
        };
        self.c.push(Node::Special(i as u32))
    }

    /// A marker that is a special token where the vocabulary has one so spelled, else text.
    fn marker(&mut self, text: &str) -> Result<NodeId> {
        let s = self.special(text)?;
        let t = self.lit(text.as_bytes())?;
        self.c.push(Node::Union(vec![s, t]))
    }

    fn ws(&mut self) -> Result<NodeId> {
        let re = format!("[ \\t\\n\\r]{{0,{}}}", self.c.opts.max_whitespace);
        self.regex(&re)
    }

    /// Free text (valid UTF-8) holding none of `markers`, captured as `cap`.
    fn text(&mut self, markers: &[String], cap: Capture) -> Result<NodeId> {
        let max = if cap == Capture::Text {
            self.max_text
        } else {
            None
        };
        let d = self.c.cached(format!("text|{markers:?}|{max:?}"), |c| {
            let mut any = c.regex("(?s:.)*", "")?;
            let states = c.opts.max_lexeme_states;
            if let Some(m) = max {
                any = crate::automaton::dfa::Dfa::char_count(0, Some(u64::from(m)), states)
                    .map_err(|e| c.dfa_err(e, "", ""))?;
            }
            if markers.is_empty() {
                return Ok(any);
            }
            let alts: Vec<String> = markers.iter().map(|m| regex_syntax::escape(m)).collect();
            let bad = c.regex(&format!("(?s:.)*(?:{})(?s:.)*", alts.join("|")), "")?;
            any.product(&bad, crate::automaton::dfa::Op::AndNot, states)
                .map_err(|e| c.dfa_err(e, "", ""))
        })?;
        let l = self.c.lexeme(d)?;
        self.c.push(Node::Capture(cap, l))
    }

    fn lower(&mut self, e: &'a Expr, v: V, depth: usize) -> Result<NodeId> {
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
                t.regex(r).map_err(|e| Error::Dialect {
                    dialect: t.dialect.name.clone(),
                    message: format!("regex /{r}/: {e}"),
                })
            }),
            Expr::Special(s) => leaf(self, &mut |t| t.special(s)),
            Expr::Ws => leaf(self, &mut |t| t.ws()),
            Expr::Text(m) => leaf(self, &mut |t| t.text(m, Capture::Text)),
            Expr::TextMatching(r) => leaf(self, &mut |t| {
                // The regex, and at most `max_text` characters.
                let max = t.max_text;
                let d =
                    t.c.cached(format!("text~|{r}|{max:?}"), |c| {
                        let d = c.regex(r, "")?;
                        let states = c.opts.max_lexeme_states;
                        match max {
                            None => Ok(d),
                            Some(m) => crate::automaton::dfa::Dfa::char_count(
                                0,
                                Some(u64::from(m)),
                                states,
                            )
                            .and_then(|n| d.product(&n, crate::automaton::dfa::Op::And, states))
                            .map_err(|e| c.dfa_err(e, "", "")),
                        }
                    })
                    .map_err(|e| Error::Dialect {
                        dialect: t.dialect.name.clone(),
                        message: format!("@text_matching({r:?}): {e}"),
                    })?;
                let l = t.c.lexeme(d)?;
                t.c.push(Node::Capture(Capture::Text, l))
            }),
            Expr::JsonCall { .. } | Expr::PythonCall | Expr::ParenCall => match v {
                V::Zero => self.never(),
                _ => self.calls(e),
            },
            Expr::Rule(name) => {
                if let Some(&id) = self.memo.get(&(name.clone(), v)) {
                    return Ok(id);
                }
                let id = self.never()?;
                self.memo.insert((name.clone(), v), id);
                let body = self.dialect.rule(name).expect("checked at parse time");
                let b = self.lower(body, v, depth + 1)?;
                self.c.nodes[id as usize] = Node::Union(vec![b]);
                Ok(id)
            }
            Expr::Alt(alts) => {
                let mut ids = Vec::new();
                for a in alts {
                    ids.push(self.lower(a, v, depth + 1)?);
                }
                self.c.push(Node::Union(ids))
            }
            Expr::Seq(items) => match v {
                V::Zero | V::Any => {
                    let mut ids = Vec::new();
                    for x in items {
                        ids.push(self.lower(x, v, depth + 1)?);
                    }
                    self.c.push(Node::Seq(ids))
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
                        alts.push(self.c.push(Node::Seq(ids))?);
                    }
                    self.c.push(Node::Union(alts))
                }
            },
            Expr::Repeat(x, min, max) => match v {
                V::Zero | V::Any => {
                    let item = self.lower(x, v, depth + 1)?;
                    self.c.push(Node::Repeat {
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
                    let before = self.c.push(Node::Repeat {
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
                    let after = self.c.push(Node::Repeat {
                        item: after_item,
                        min: 0,
                        max: u32::MAX,
                    })?;
                    self.c.push(Node::Seq(vec![before, mid, after]))
                }
            },
        }
    }

    /// The union of one call per allowed function, as the builtin `e` writes it.
    fn calls(&mut self, e: &Expr) -> Result<NodeId> {
        let key = format!("{e:?}");
        if let Some(&id) = self.calls.get(&key) {
            return Ok(id);
        }
        let mut alts = Vec::new();
        for i in self.allowed.clone() {
            let call = self.call(e, i)?;
            alts.push(self.c.push(Node::Capture(Capture::Call(i as u32), call))?);
        }
        let id = self.c.push(Node::Union(alts))?;
        self.calls.insert(key, id);
        Ok(id)
    }

    /// The arguments node of function `i` in encoding `enc` (`kwargs`: Python keyword
    /// arguments).
    fn args(&mut self, i: usize, enc: Encoding, kwargs: bool) -> Result<NodeId> {
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
    fn call(&mut self, e: &Expr, i: usize) -> Result<NodeId> {
        let name = self.tools.as_slice()[i].name.clone();
        match e {
            Expr::JsonCall {
                name_key,
                args_key,
                enc,
            } => {
                let name_node = {
                    self.c.enc = Encoding::Json;
                    let d = crate::automaton::dfa::Dfa::literals(
                        [name.as_bytes()],
                        self.c.opts.max_lexeme_states,
                    )
                    .and_then(|d| d.json_string(self.c.opts.max_lexeme_states))
                    .map_err(|e| self.c.dfa_err(e, "", ""))?;
                    self.c.lexeme(d)?
                };
                let args = self.args(i, *enc, false)?;
                let args = if *enc == Encoding::JsonInString {
                    let q1 = self.lit(b"\"")?;
                    let q2 = self.lit(b"\"")?;
                    self.c.push(Node::Seq(vec![q1, args, q2]))?
                } else {
                    args
                };
                let args = self.c.push(Node::Capture(Capture::Args(*enc), args))?;
                self.c.enc = Encoding::Json;
                let entries = vec![(name_key.clone(), name_node), (args_key.clone(), args)];
                let required = vec![name_key.clone(), args_key.clone()];
                let o = self.c.object_node(
                    entries,
                    &required,
                    None,
                    crate::grammar::Syntax::OBJECT,
                    false,
                )?;
                self.c.push(Node::Object(Box::new(o)))
            }
            Expr::PythonCall => {
                if !name.split('.').all(is_identifier) {
                    return Err(Error::Unrepresentable {
                        what: "function name",
                        name,
                        dialect: self.dialect.name.clone(),
                        reason: "a Python call needs a (dotted) identifier".into(),
                    });
                }
                let n = self.lit(name.as_bytes())?;
                let args = self.args(i, Encoding::Python, true)?;
                let args = self
                    .c
                    .push(Node::Capture(Capture::Args(Encoding::Python), args))?;
                self.c.push(Node::Seq(vec![n, args]))
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
                    .push(Node::Capture(Capture::Args(Encoding::Json), args))?;
                let required_empty = self.params[i]
                    .get("required")
                    .and_then(Value::as_array)
                    .is_none_or(|r| r.is_empty());
                let inner = if required_empty {
                    let empty = self.c.push(Node::Seq(vec![]))?;
                    self.c.push(Node::Union(vec![args, empty]))?
                } else {
                    args
                };
                let close = self.lit(b")")?;
                self.c.push(Node::Seq(vec![open, inner, close]))
            }
            _ => unreachable!("not a call builtin"),
        }
    }
}

fn check_refs(e: &Expr, rules: &[(String, Expr)]) -> std::result::Result<(), String> {
    match e {
        Expr::Rule(n) if !rules.iter().any(|(r, _)| r == n) => Err(format!("unknown rule {n}")),
        Expr::Seq(v) | Expr::Alt(v) => v.iter().try_for_each(|x| check_refs(x, rules)),
        Expr::Repeat(x, _, _) => check_refs(x, rules),
        _ => Ok(()),
    }
}

/// A token of a dialect file.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Builtin(String),
    Str(Vec<u8>),
    Class(String),
    Regex(String),
    Special(String),
    Define,
    Punct(char),
    Count(u32, u32),
}

type LexResult<T> = std::result::Result<T, (usize, String)>;

fn lex(text: &str) -> LexResult<Vec<(Tok, usize)>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b':' if text[i..].starts_with("::=") => {
                out.push((Tok::Define, line));
                i += 3;
            }
            b'"' => {
                let (s, n) = string_lit(&b[i..]).map_err(|m| (line, m))?;
                out.push((Tok::Str(s), line));
                i += n;
            }
            b'[' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b']' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if i >= b.len() {
                    return Err((line, "unterminated character class".into()));
                }
                i += 1;
                out.push((Tok::Class(text[start..i].to_owned()), line));
            }
            b'/' => {
                let start = i + 1;
                i += 1;
                let mut re = String::new();
                while i < b.len() && b[i] != b'/' {
                    if b[i] == b'\n' {
                        return Err((line, "unterminated /regex/".into()));
                    }
                    if b[i] == b'\\' && b.get(i + 1) == Some(&b'/') {
                        re.push('/');
                        i += 2;
                        continue;
                    }
                    i += 1;
                }
                if i >= b.len() {
                    return Err((line, "unterminated /regex/".into()));
                }
                re.push_str(&text[start..i]);
                // keep escapes other than \/ as written
                let raw = text[start..i].replace("\\/", "/");
                out.push((Tok::Regex(raw), line));
                i += 1;
            }
            b'<' if text[i..].starts_with("<|") => match text[i..].find("|>") {
                Some(end) => {
                    out.push((Tok::Special(text[i..i + end + 2].to_owned()), line));
                    i += end + 2;
                }
                None => return Err((line, "unterminated <|special|> token".into())),
            },
            b'{' => {
                let end = text[i..]
                    .find('}')
                    .ok_or((line, "unterminated {m,n}".to_string()))?;
                let inner = &text[i + 1..i + end];
                let num = |s: &str| -> LexResult<u32> {
                    s.trim()
                        .parse::<u32>()
                        .map_err(|_| (line, format!("bad repetition count {inner:?}")))
                };
                let (lo, hi) = match inner.split_once(',') {
                    None => {
                        let n = num(inner)?;
                        (n, n)
                    }
                    Some((a, "")) => (num(a)?, u32::MAX),
                    Some((a, z)) => (num(a)?, num(z)?),
                };
                if lo > hi || (hi != u32::MAX && hi > 10_000) {
                    return Err((line, format!("bad repetition bounds {{{inner}}}")));
                }
                out.push((Tok::Count(lo, hi), line));
                i += end + 1;
            }
            b'@' | b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = i;
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'-')
                {
                    i += 1;
                }
                let w = text[start..i].to_owned();
                if let Some(w) = w.strip_prefix('@') {
                    out.push((Tok::Builtin(w.to_owned()), line));
                } else {
                    out.push((Tok::Ident(w), line));
                }
            }
            b'(' | b')' | b'|' | b'?' | b'*' | b'+' | b',' | b'=' => {
                out.push((Tok::Punct(c as char), line));
                i += 1;
            }
            _ => {
                let ch = text[i..].chars().next().unwrap_or('?');
                return Err((line, format!("unexpected character {ch:?}")));
            }
        }
    }
    Ok(out)
}

/// A `"..."` literal at the start of `b`: its bytes and length.
fn string_lit(b: &[u8]) -> std::result::Result<(Vec<u8>, usize), String> {
    let mut out = Vec::new();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Ok((out, i + 1)),
            b'\n' => break,
            b'\\' => {
                let e = *b.get(i + 1).ok_or("unterminated string")?;
                i += 2;
                match e {
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'\\' | b'"' | b'\'' => out.push(e),
                    b'x' => {
                        let h = b.get(i..i + 2).ok_or("bad \\x escape")?;
                        let v = u8::from_str_radix(std::str::from_utf8(h).unwrap_or("zz"), 16)
                            .map_err(|_| "bad \\x escape")?;
                        out.push(v);
                        i += 2;
                    }
                    _ => return Err(format!("unknown escape \\{}", e as char)),
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Err("unterminated string".into())
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(0, |t| t.1)
    }

    /// True at the start of the next rule (`name ::=`).
    fn at_rule_start(&self) -> bool {
        matches!(self.peek(), Some(Tok::Ident(_)))
            && self.toks.get(self.pos + 1).map(|t| &t.0) == Some(&Tok::Define)
    }

    fn alt(&mut self, depth: usize) -> LexResult<Expr> {
        if depth > MAX_NESTING {
            return Err((self.line(), "expression nested too deeply".into()));
        }
        let mut alts = vec![self.seq(depth)?];
        while self.peek() == Some(&Tok::Punct('|')) {
            self.pos += 1;
            alts.push(self.seq(depth)?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().expect("one")
        } else {
            Expr::Alt(alts)
        })
    }

    fn seq(&mut self, depth: usize) -> LexResult<Expr> {
        let mut items = Vec::new();
        loop {
            if self.at_rule_start() {
                break;
            }
            match self.peek() {
                None | Some(Tok::Punct('|')) | Some(Tok::Punct(')')) => break,
                _ => {}
            }
            let mut e = self.atom(depth)?;
            loop {
                let (lo, hi) = match self.peek() {
                    Some(Tok::Punct('?')) => (0, 1),
                    Some(Tok::Punct('*')) => (0, u32::MAX),
                    Some(Tok::Punct('+')) => (1, u32::MAX),
                    Some(Tok::Count(a, b)) => (*a, *b),
                    _ => break,
                };
                self.pos += 1;
                e = Expr::Repeat(Box::new(e), lo, hi);
            }
            items.push(e);
        }
        Ok(if items.len() == 1 {
            items.pop().expect("one")
        } else {
            Expr::Seq(items)
        })
    }

    fn atom(&mut self, depth: usize) -> LexResult<Expr> {
        let line = self.line();
        let t = self.toks.get(self.pos).cloned().map(|t| t.0);
        self.pos += 1;
        Ok(match t {
            Some(Tok::Str(s)) => Expr::Lit(s),
            Some(Tok::Class(c)) => Expr::Regex(c),
            Some(Tok::Regex(r)) => Expr::Regex(r),
            Some(Tok::Special(s)) => Expr::Special(s),
            Some(Tok::Ident(n)) => Expr::Rule(n),
            Some(Tok::Punct('(')) => {
                let e = self.alt(depth + 1)?;
                if self.peek() != Some(&Tok::Punct(')')) {
                    return Err((line, "expected `)`".into()));
                }
                self.pos += 1;
                e
            }
            Some(Tok::Builtin(b)) => self.builtin(&b, line)?,
            other => return Err((line, format!("unexpected {other:?}"))),
        })
    }

    /// `@name` or `@name(args)`; args are strings or `key="value"` pairs.
    fn builtin(&mut self, name: &str, line: usize) -> LexResult<Expr> {
        let mut pos: Vec<String> = Vec::new();
        let mut kw: Vec<(String, String)> = Vec::new();
        if self.peek() == Some(&Tok::Punct('(')) {
            self.pos += 1;
            loop {
                match self.toks.get(self.pos).map(|t| t.0.clone()) {
                    Some(Tok::Punct(')')) => {
                        self.pos += 1;
                        break;
                    }
                    Some(Tok::Str(s)) => {
                        pos.push(String::from_utf8(s).map_err(|_| (line, "non-UTF-8".into()))?);
                        self.pos += 1;
                    }
                    Some(Tok::Ident(k)) => {
                        self.pos += 1;
                        if self.peek() != Some(&Tok::Punct('=')) {
                            return Err((line, format!("expected `=` after {k} in @{name}")));
                        }
                        self.pos += 1;
                        let v = match self.toks.get(self.pos).map(|t| t.0.clone()) {
                            Some(Tok::Str(s)) => String::from_utf8(s).unwrap_or_default(),
                            Some(Tok::Ident(s)) => s,
                            _ => return Err((line, format!("expected a value for {k}"))),
                        };
                        self.pos += 1;
                        kw.push((k, v));
                    }
                    _ => return Err((line, format!("bad arguments to @{name}"))),
                }
                if self.peek() == Some(&Tok::Punct(',')) {
                    self.pos += 1;
                }
            }
        }
        let get = |k: &str, d: &str| {
            kw.iter()
                .find(|(a, _)| a == k)
                .map_or(d.to_owned(), |(_, v)| v.clone())
        };
        let known = |allowed: &[&str]| -> LexResult<()> {
            match kw.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
                Some((k, _)) => Err((line, format!("@{name} has no argument {k}"))),
                None => Ok(()),
            }
        };
        Ok(match name {
            "text" => {
                known(&[])?;
                Expr::Text(vec![])
            }
            "text_without" => {
                known(&[])?;
                if pos.is_empty() {
                    return Err((line, "@text_without needs at least one marker".into()));
                }
                Expr::Text(pos)
            }
            "text_matching" => match pos.as_slice() {
                [r] => Expr::TextMatching(r.clone()),
                _ => return Err((line, "@text_matching takes one regex".into())),
            },
            "ws" => Expr::Ws,
            "special" => match pos.as_slice() {
                [s] => Expr::Special(s.clone()),
                _ => return Err((line, "@special takes one token text".into())),
            },
            "json_call" => {
                known(&["name_key", "args_key", "args"])?;
                let enc = match get("args", "object").as_str() {
                    "object" => Encoding::Json,
                    "string" => Encoding::JsonInString,
                    o => return Err((line, format!("args={o:?}: expected object or string"))),
                };
                Expr::JsonCall {
                    name_key: get("name_key", "name"),
                    args_key: get("args_key", "arguments"),
                    enc,
                }
            }
            "python_call" => Expr::PythonCall,
            "paren_call" => Expr::ParenCall,
            _ => return Err((line, format!("unknown builtin @{name}"))),
        })
    }
}
