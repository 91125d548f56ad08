//! XGrammar's structural tags as input: `{"type": "structural_tag", "format": {...}}` (and the
//! older `{"type": "structural_tag", "structures": [...], "triggers": [...]}` that vLLM and
//! SGLang send for tool calling) compiled into one [`Grammar`], so that the strict tool-calling
//! specs those engines emit compile unchanged. This is a front end: it reads the JSON into the
//! intermediate form dialect files are read into (`ir.rs`), and the one lowerer (`lower.rs`)
//! compiles it.
//!
//! Supported formats, with XGrammar's semantics (`docs/structural_tag/` in mlc-ai/xgrammar):
//! `const_string`, `json_schema` (style `json`, and the XML styles `qwen_xml` (also as the
//! deprecated `qwen_xml_parameter`), `minimax_xml`, `glm_xml`, `deepseek_xml`,
//! `deepseek_v4_1_xml`), `any_text` (`excludes`, `max_chars`), `regex`, `sequence`, `or`,
//! `optional`, `plus`, `star`, `repeat`, `tag` (string or `token` begin and end; a list of end
//! strings), `triggered_tags`, `tags_with_separator`, `dispatch`, and the token-level formats
//! `token`, `any_tokens`, `token_triggered_tags`, `token_dispatch`, and `exclude_token` right
//! before `any_tokens` in a `sequence` (one token or more: SGLang's Kimi K3 argument values).
//! An XML style on a schema that is not an object's (SGLang's Kimi K3 gives one argument's
//! schema) writes one value as the style writes an argument's. As in XGrammar, free text
//! (`any_text`, `triggered_tags`, `dispatch`) inside a `tag` may not contain the tag's end
//! string, and `json_schema` is strict: an object schema that lists `properties` and says nothing
//! of extra keys allows only those keys.
//!
//! XML styles write each argument as tags: a string value raw up to the closing tag (with
//! whitespace around it when the schema constrains it, outside DeepSeek's styles), any other
//! value as JSON with whitespace around it; DeepSeek's `string="true|false"` attribute tells raw
//! from JSON. A value schema that admits both (`["string", "null"]`, no `type`, `anyOf`) allows
//! both. An open object (`true`, no `properties`) takes any argument names
//! (`[a-zA-Z_][a-zA-Z0-9_]*`) with any values.
//!
//! Token-level formats name tokens by id or by text; they resolve to the vocabulary's special
//! tokens ([`StructuralTagOptions::token_ids`], filled by [`StructuralTagOptions::for_vocab`]),
//! which callmask matches only as tokens, never as their spelling: exact at the token level. A
//! free token region (`any_tokens`, the text of `token_triggered_tags` and `token_dispatch`)
//! allows any ordinary token and every special token but the excluded ones, the triggers (or
//! rule tokens), the enclosing tags' end tokens and end-of-generation. A token that is not a
//! special token of the vocabulary is an [`Error::StructuralTag`] naming it (ordinary tokens are
//! matched by their bytes, so excluding or requiring one exactly is not possible); a token id
//! without a vocabulary is one too.
//!
//! Refused by name ([`Error::UnsupportedFormat`]): `grammar` (XGrammar's EBNF dialect), the
//! recursive XML styles `minimax_m3_xml`, `cohere_xml`, `kimi_k3_xml`, `json_schema`'s
//! `excludes`, a bound in tokens (`any_text.max_tokens`, `any_tokens.max_tokens`) and
//! `exclude_token` anywhere but right before `any_tokens` (exactly one token of any kind): both
//! need the matcher to count tokens inside a region, i.e. to see token boundaries, which it
//! does not (the whole output's token budget, [`crate::Matcher::set_token_budget`], is exact).
//! Neither vLLM 0.32 nor SGLang 0.5.23 builds them for tool calling.
//!
//! Differences from XGrammar: object properties may come in any order (XGrammar keeps the
//! declared order unless `any_order`), never twice, required ones present (with `any_order`
//! XGrammar lets keys repeat and required ones go missing), so every output callmask allows is
//! one of those XGrammar allows with `any_order`; the whitespace inside JSON follows
//! [`crate::CompileOptions::whitespace`] (one `max_whitespace_cnt` for the whole tag, which must
//! then be the same everywhere).
//!
//! A literal (`const_string`, `begin`, `end`, a trigger or a separator) that contains the text of
//! one of [`StructuralTagOptions::special_tokens`] matches there either that special token or
//! its spelling in plain bytes, as XGrammar (which matches tokens by their text) does.
//!
//! For the parser, every `json_schema` region whose schema is an object schema, and every
//! XML-style one, is reported as a call: its arguments are the JSON (or the tagged arguments as
//! JSON), its name is read from the `begin` of the nearest enclosing tag (`"name": "f"`,
//! `<function=f>`, `name="f"`, `functions.f`, `<tool_call>f`), else that `begin` itself; [`StructuralTag::calls`] lists them with their schemas.

use super::ir::{
    bad, call_label, unsupported, Delim, Dispatch, Expr, SchemaRegion, Tag, TokenRef, Triggered,
    XmlStyle,
};
use super::lower::{lower_tag, strict_objects, TagVocab};
use crate::error::{Error, Result};
use crate::grammar::Grammar;
use crate::schema::CompileOptions;
use crate::vocab::{TokenId, Vocab};
use serde_json::{Map, Value};

/// Deepest nesting of format objects: the dialect files' own limit.
use super::MAX_NESTING;
/// Most repetitions a `repeat` may ask for (other than unbounded).
const MAX_REPEAT: u32 = 1 << 16;

/// How to compile a structural tag.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct StructuralTagOptions {
    /// Schema compile options and limits (whitespace, depth, states, time, lenient mode).
    pub compile: CompileOptions,
    /// The texts of the vocabulary's special tokens (see [`Self::for_vocab`]): a literal that
    /// contains one matches there the special token or its plain spelling. Empty: literals are
    /// plain bytes only.
    pub special_tokens: Vec<String>,
    /// The vocabulary's special tokens by id (end-of-generation tokens included) and its size,
    /// for the token-level formats (`token`, `any_tokens`, `token_triggered_tags`,
    /// `token_dispatch`, a tag's token `begin`/`end`): a token named by id or text resolves
    /// here, and one that is not a special token of the vocabulary is an error naming it.
    /// Empty: tokens named by text compile (and bind to the vocabulary later), ids do not.
    pub token_ids: Vec<(TokenId, String)>,
    /// The vocabulary's end-of-generation tokens (never part of an `any_tokens` region).
    pub eos_tokens: Vec<TokenId>,
    /// The vocabulary's size (0: unknown), to tell an id out of range from an ordinary token.
    pub vocab_len: usize,
}

crate::setters::option_setters!(StructuralTagOptions {
    compile: CompileOptions,
    special_tokens: Vec<String>,
    token_ids: Vec<(TokenId, String)>,
    eos_tokens: Vec<TokenId>,
    vocab_len: usize,
});

impl StructuralTagOptions {
    /// Options whose [`Self::special_tokens`] are `vocab`'s special tokens (end-of-generation
    /// tokens excluded).
    pub fn for_vocab(vocab: &Vocab) -> StructuralTagOptions {
        let special_tokens = vocab
            .special_tokens()
            .filter(|(id, _)| !vocab.is_eos(*id))
            .filter_map(|(_, b)| std::str::from_utf8(b).ok())
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let token_ids = vocab
            .special_tokens()
            .filter_map(|(id, b)| Some((id, std::str::from_utf8(b).ok()?.to_owned())))
            .filter(|(_, s)| !s.is_empty())
            .collect();
        StructuralTagOptions {
            special_tokens,
            token_ids,
            eos_tokens: vocab.eos_tokens().to_vec(),
            vocab_len: vocab.len(),
            ..Default::default()
        }
    }
}

/// A parsed structural tag, ready to compile (see the [module docs](self)).
///
/// ```
/// use callmask::{Grammar, StructuralTagOptions};
/// // What vLLM sends for a Hermes model with tool_choice "required" (one tool).
/// let tag = serde_json::json!({"type": "structural_tag", "format": {
///     "type": "tags_with_separator", "separator": "", "at_least_one": true,
///     "tags": [{"type": "tag", "begin": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
///               "content": {"type": "json_schema", "json_schema": {"type": "object",
///                   "properties": {"city": {"type": "string"}}, "required": ["city"]}},
///               "end": "}\n</tool_call>"}]}});
/// let grammar = Grammar::from_structural_tag(&tag, &StructuralTagOptions::default())?;
/// let out = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
/// let parsed = grammar.parse(out)?;
/// assert_eq!(parsed.tool_calls[0].function.name, "get_weather");
/// assert_eq!(parsed.tool_calls[0].function.arguments, r#"{"city":"Oslo"}"#);
/// assert!(grammar.parse("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>").is_err());
/// # Ok::<(), callmask::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct StructuralTag {
    format: Expr,
}

/// Joins each `exclude_token` directly followed by `any_tokens` in a sequence into one
/// [`Expr::SomeTokens`] (SGLang's Kimi K3 tags write a non-empty value so).
fn some_tokens(elements: Vec<Expr>) -> Vec<Expr> {
    let mut out: Vec<Expr> = Vec::with_capacity(elements.len());
    for f in elements {
        match (out.last(), f) {
            (Some(Expr::At(_, x)), Expr::AnyTokens(rest))
                if matches!(**x, Expr::ExcludeToken(_)) =>
            {
                let Some(Expr::At(_, x)) = out.pop() else {
                    unreachable!("matched above")
                };
                let Expr::ExcludeToken(first) = *x else {
                    unreachable!("matched above")
                };
                out.push(Expr::SomeTokens { first, rest });
            }
            (_, f) => out.push(f),
        }
    }
    out
}

/// Reads format objects, with the JSON pointer of each for errors.
struct Reader;

impl Reader {
    fn obj<'v>(v: &'v Value, path: &str) -> Result<&'v Map<String, Value>> {
        v.as_object()
            .ok_or_else(|| bad(path, "a format must be a JSON object"))
    }

    fn str_field(o: &Map<String, Value>, k: &str, path: &str) -> Result<String> {
        match o.get(k) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(bad(path, format!("`{k}` must be a string"))),
            None => Err(bad(path, format!("missing `{k}`"))),
        }
    }

    fn bool_field(o: &Map<String, Value>, k: &str, path: &str) -> Result<bool> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(bad(path, format!("`{k}` must be a boolean"))),
        }
    }

    fn strings(o: &Map<String, Value>, k: &str, path: &str, required: bool) -> Result<Vec<String>> {
        match o.get(k) {
            None | Some(Value::Null) if !required => Ok(Vec::new()),
            None => Err(bad(path, format!("missing `{k}`"))),
            Some(Value::Array(a)) => a
                .iter()
                .map(|s| {
                    s.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| bad(path, format!("`{k}` must be a list of strings")))
                })
                .collect(),
            Some(_) => Err(bad(path, format!("`{k}` must be a list of strings"))),
        }
    }

    /// A non-negative integer field that fits `u32` (`None` when absent or null).
    fn count(o: &Map<String, Value>, k: &str, path: &str) -> Result<Option<u64>> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| bad(path, format!("`{k}` must be a non-negative integer"))),
        }
    }

    fn content(o: &Map<String, Value>, path: &str, depth: usize) -> Result<Expr> {
        let c = o
            .get("content")
            .ok_or_else(|| bad(path, "missing `content`"))?;
        Self::form(c, &format!("{path}/content"), depth + 1)
    }

    fn elements(o: &Map<String, Value>, path: &str, depth: usize) -> Result<Vec<Expr>> {
        let a = o
            .get("elements")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(path, "`elements` must be a list of formats"))?;
        if a.is_empty() {
            return Err(bad(path, "`elements` must not be empty"));
        }
        a.iter()
            .enumerate()
            .map(|(i, e)| Self::form(e, &format!("{path}/elements/{i}"), depth + 1))
            .collect()
    }

    fn token(v: &Value, path: &str) -> Result<TokenRef> {
        let id = match v {
            Value::String(s) if !s.is_empty() => Err(s.clone()),
            Value::Number(n) => Ok(n
                .as_u64()
                .filter(|&n| n <= u64::from(u32::MAX))
                .ok_or_else(|| bad(path, format!("token id {n} is not a token id")))?),
            _ => return Err(bad(path, "a token must be its id or its (non-empty) text")),
        };
        Ok(TokenRef {
            id,
            path: path.to_owned(),
        })
    }

    /// A list of tokens (ids or texts).
    fn token_list(o: &Map<String, Value>, k: &str, path: &str) -> Result<Vec<TokenRef>> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, t)| Self::token(t, &format!("{path}/{k}/{i}")))
                .collect(),
            Some(_) => Err(bad(path, format!("`{k}` must be a list of tokens"))),
        }
    }

    fn delim(v: &Value, path: &str, what: &str) -> Result<Delim> {
        match v {
            Value::String(s) => Ok(Delim::Text(s.clone())),
            Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("token") => {
                let t = o.get("token").ok_or_else(|| bad(path, "missing `token`"))?;
                Ok(Delim::Token(Self::token(t, path)?))
            }
            _ => Err(bad(
                path,
                format!("`{what}` must be a string or a token format"),
            )),
        }
    }

    fn tag(v: &Value, path: &str, depth: usize) -> Result<Tag> {
        let o = Self::obj(v, path)?;
        if let Some(t) = o.get("type") {
            if t.as_str() != Some("tag") {
                return Err(bad(path, "expected a format of type `tag`"));
            }
        }
        let begin = Self::delim(
            o.get("begin").ok_or_else(|| bad(path, "missing `begin`"))?,
            path,
            "begin",
        )?;
        let end = match o.get("end").ok_or_else(|| bad(path, "missing `end`"))? {
            Value::String(s) => Ok(vec![s.clone()]),
            Value::Array(_) => {
                let ends = Self::strings(o, "end", path, true)?;
                if ends.is_empty() {
                    return Err(bad(path, "`end` must not be an empty list"));
                }
                Ok(ends)
            }
            e => match Self::delim(e, path, "end")? {
                Delim::Token(t) => Err(t),
                Delim::Text(s) => Ok(vec![s]),
            },
        };
        Ok(Tag {
            begin,
            content: Self::content(o, path, depth)?,
            end,
            path: path.to_owned(),
        })
    }

    fn tags(o: &Map<String, Value>, path: &str, depth: usize) -> Result<Vec<Tag>> {
        let a = o
            .get("tags")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(path, "`tags` must be a list of tags"))?;
        if a.is_empty() {
            return Err(bad(path, "`tags` must not be empty"));
        }
        a.iter()
            .enumerate()
            .map(|(i, t)| Self::tag(t, &format!("{path}/tags/{i}"), depth + 1))
            .collect()
    }

    /// Reads one format object (at JSON pointer `path`) into the intermediate form.
    fn form(v: &Value, path: &str, depth: usize) -> Result<Expr> {
        if depth > MAX_NESTING {
            return Err(Error::LimitExceeded {
                what: "structural tag nesting",
                limit: MAX_NESTING,
                option: "",
                path: String::new(),
            });
        }
        let o = Self::obj(v, path)?;
        let ty = match o.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(_) => return Err(bad(path, "`type` must be a string")),
            // As XGrammar: without a type, the fields tell (a tag first).
            None if o.contains_key("begin") && o.contains_key("end") => "tag",
            None if o.contains_key("value") => "const_string",
            None if o.contains_key("json_schema") => "json_schema",
            None => return Err(bad(path, "missing `type`")),
        };
        Ok(match ty {
            "const_string" => Expr::Lit(Self::str_field(o, "value", path)?.into_bytes()),
            "json_schema" | "qwen_xml_parameter" => Self::json_schema(o, ty, path)?,
            "any_text" => {
                if Self::count(o, "max_tokens", path)?.is_some() {
                    return Err(unsupported(
                        "max_tokens",
                        path,
                        "a bound in tokens needs the matcher to count tokens per region; use \
                         `max_chars`, or the matcher's token budget for the whole output",
                    ));
                }
                let max_chars = Self::count(o, "max_chars", path)?
                    .map(|n| u32::try_from(n).unwrap_or(u32::MAX).min(i32::MAX as u32));
                Expr::AnyText {
                    excludes: Self::strings(o, "excludes", path, false)?,
                    max_chars,
                }
            }
            "regex" => Expr::At(
                path.to_owned(),
                Box::new(Expr::Regex(Self::str_field(o, "pattern", path)?)),
            ),
            "sequence" => Expr::Seq(some_tokens(Self::elements(o, path, depth)?)),
            "or" => Expr::Alt(Self::elements(o, path, depth)?),
            "optional" => Expr::Repeat(Box::new(Self::content(o, path, depth)?), 0, 1),
            "star" => Expr::Repeat(Box::new(Self::content(o, path, depth)?), 0, u32::MAX),
            "plus" => Expr::Repeat(Box::new(Self::content(o, path, depth)?), 1, u32::MAX),
            "repeat" => Self::repeat(o, path, depth)?,
            "tag" => Expr::Tag(Box::new(Self::tag(v, path, depth)?)),
            "triggered_tags" => Self::triggered_tags(o, path, depth)?,
            "tags_with_separator" => Expr::Separated {
                tags: Self::tags(o, path, depth)?,
                separator: Self::str_field(o, "separator", path)?,
                at_least_one: Self::bool_field(o, "at_least_one", path)?,
                stop_after_first: Self::bool_field(o, "stop_after_first", path)?,
            },
            "dispatch" => Self::dispatch(o, path, depth)?,
            "token" => Expr::Token(Self::token(
                o.get("token").ok_or_else(|| bad(path, "missing `token`"))?,
                path,
            )?),
            "grammar" => {
                return Err(unsupported(
                    "grammar",
                    path,
                    "XGrammar's EBNF needs XGrammar's grammar engine; write a callmask dialect \
                     file instead",
                ))
            }
            "exclude_token" => Expr::At(
                path.to_owned(),
                Box::new(Expr::ExcludeToken(Self::token_list(
                    o,
                    "exclude_tokens",
                    path,
                )?)),
            ),
            "any_tokens" => {
                if Self::count(o, "max_tokens", path)?.is_some() {
                    return Err(unsupported(
                        "max_tokens",
                        path,
                        "a bound in tokens needs the matcher to count tokens per region",
                    ));
                }
                Expr::AnyTokens(Self::token_list(o, "exclude_tokens", path)?)
            }
            "token_triggered_tags" => Self::token_triggered_tags(o, path, depth)?,
            "token_dispatch" => Self::token_dispatch(o, path, depth)?,
            t => return Err(bad(path, format!("unknown format type {t:?}"))),
        })
    }

    /// `json_schema` (and the deprecated `qwen_xml_parameter`, `type` `ty`): an inline schema,
    /// made strict as XGrammar makes it, in JSON or an XML style.
    fn json_schema(o: &Map<String, Value>, ty: &str, path: &str) -> Result<Expr> {
        let style = match o.get("style") {
            None | Some(Value::Null) if ty == "json_schema" => "json".to_owned(),
            None | Some(Value::Null) => "qwen_xml".to_owned(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(bad(path, "`style` must be a string")),
        };
        let xml = match style.as_str() {
            "json" => None,
            s => Some(XmlStyle::from_name(s).ok_or_else(|| match s {
                "minimax_m3_xml" | "cohere_xml" | "kimi_k3_xml" => unsupported(
                    format!("style: {s}"),
                    path,
                    "this style nests arguments recursively (or types them in an \
                     attribute); callmask compiles the json, qwen_xml, minimax_xml, \
                     glm_xml, deepseek_xml and deepseek_v4_1_xml styles",
                ),
                _ => bad(path, format!("unknown `style` {s:?}")),
            })?),
        };
        match o.get("any_order") {
            None | Some(Value::Null | Value::Bool(_)) => {}
            Some(_) => return Err(bad(path, "`any_order` must be a boolean")),
        }
        if !Self::strings(o, "excludes", path, false)?.is_empty() {
            return Err(unsupported(
                "json_schema excludes",
                path,
                "substrings forbidden inside JSON strings are not compiled; leave \
                 `excludes` empty",
            ));
        }
        let mut schema = o
            .get("json_schema")
            .cloned()
            .ok_or_else(|| bad(path, "missing `json_schema`"))?;
        if !schema.is_object() && !schema.is_boolean() {
            return Err(bad(path, "`json_schema` must be an object or a boolean"));
        }
        // XGrammar's strict mode.
        strict_objects(&mut schema);
        // `$id`s, anchors and dynamic `$ref`s become local JSON pointers (no registry
        // here: a remote `$ref` stays unresolved).
        if let Some(r) = crate::schema::resolve_refs(&schema, &CompileOptions::default())? {
            schema = r;
        }
        let max_ws = Self::count(o, "max_whitespace_cnt", path)?
            .map(|n| u16::try_from(n).unwrap_or(u16::MAX));
        Ok(Expr::Schema(Box::new(SchemaRegion {
            schema,
            max_ws,
            xml,
            path: path.to_owned(),
        })))
    }

    /// `repeat`: `content` between `min` and `max` times (`max` -1: unbounded).
    fn repeat(o: &Map<String, Value>, path: &str, depth: usize) -> Result<Expr> {
        let min = match o.get("min").and_then(Value::as_i64) {
            Some(m) if m >= 0 => u32::try_from(m).unwrap_or(u32::MAX),
            _ => return Err(bad(path, "`min` must be a non-negative integer")),
        };
        let max = match o.get("max").and_then(Value::as_i64) {
            Some(-1) => u32::MAX,
            Some(m) if m >= 0 => u32::try_from(m).unwrap_or(u32::MAX),
            _ => return Err(bad(path, "`max` must be -1 (unbounded) or >= 0")),
        };
        if min > max {
            return Err(bad(path, "`min` must be at most `max`"));
        }
        // A huge count would make the shortest output (and any completion) huge.
        if min > MAX_REPEAT || (max != u32::MAX && max > MAX_REPEAT) {
            return Err(Error::LimitExceeded {
                what: "structural tag repeat count",
                limit: MAX_REPEAT as usize,
                option: "",
                path: String::new(),
            });
        }
        Ok(Expr::Repeat(
            Box::new(Self::content(o, path, depth)?),
            min,
            max,
        ))
    }

    /// `triggered_tags`: each tag's begin starts with exactly one trigger.
    fn triggered_tags(o: &Map<String, Value>, path: &str, depth: usize) -> Result<Expr> {
        let triggers = Self::strings(o, "triggers", path, true)?;
        if triggers.is_empty() || triggers.iter().any(String::is_empty) {
            return Err(bad(path, "`triggers` must be non-empty strings"));
        }
        let tags = Self::tags(o, path, depth)?;
        for t in &tags {
            let Delim::Text(begin) = &t.begin else {
                // XGrammar: token begins belong to token_triggered_tags.
                return Err(bad(
                    &t.path,
                    "a tag of triggered_tags must have a string begin",
                ));
            };
            let n = triggers.iter().filter(|g| begin.starts_with(*g)).count();
            if n != 1 {
                return Err(bad(
                    &t.path,
                    format!("the tag's begin {begin:?} matches {n} triggers (must be 1)"),
                ));
            }
        }
        Ok(Expr::Triggered(Box::new(Triggered {
            triggers,
            tags,
            at_least_one: Self::bool_field(o, "at_least_one", path)?,
            stop_after_first: Self::bool_field(o, "stop_after_first", path)?,
            excludes: Self::strings(o, "excludes", path, false)?,
        })))
    }

    /// A dispatch's `loop` (default true).
    fn looping(o: &Map<String, Value>, path: &str) -> Result<bool> {
        match o.get("loop") {
            None | Some(Value::Null) => Ok(true),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(bad(path, "`loop` must be a boolean")),
        }
    }

    /// `dispatch`: `[pattern, format]` rules, looping unless `loop` is false.
    fn dispatch(o: &Map<String, Value>, path: &str, depth: usize) -> Result<Expr> {
        let rules = o
            .get("rules")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(path, "`rules` must be a list of [pattern, format]"))?;
        let mut rs = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let p = format!("{path}/rules/{i}");
            match r.as_array().map(Vec::as_slice) {
                Some([Value::String(pat), f]) if !pat.is_empty() => {
                    rs.push((pat.clone(), Self::form(f, &format!("{p}/1"), depth + 1)?))
                }
                _ => return Err(bad(&p, "a rule must be [non-empty pattern, format]")),
            }
        }
        let looping = Self::looping(o, path)?;
        Ok(Expr::Dispatch(Box::new(Dispatch {
            rules: rs,
            looping,
            excludes: Self::strings(o, "excludes", path, false)?,
        })))
    }

    /// `token_triggered_tags`: tags with token begins, opened by trigger tokens.
    fn token_triggered_tags(o: &Map<String, Value>, path: &str, depth: usize) -> Result<Expr> {
        let triggers = Self::token_list(o, "trigger_tokens", path)?;
        if triggers.is_empty() {
            return Err(bad(path, "`trigger_tokens` must not be empty"));
        }
        let tags = Self::tags(o, path, depth)?;
        for t in &tags {
            if !matches!(t.begin, Delim::Token(_)) {
                return Err(bad(
                    &t.path,
                    "a tag of token_triggered_tags must have a token begin",
                ));
            }
        }
        Ok(Expr::TokenTriggered(Box::new(Triggered {
            triggers,
            tags,
            at_least_one: Self::bool_field(o, "at_least_one", path)?,
            stop_after_first: Self::bool_field(o, "stop_after_first", path)?,
            excludes: Self::token_list(o, "exclude_tokens", path)?,
        })))
    }

    /// `token_dispatch`: `[token, format]` rules, looping unless `loop` is false.
    fn token_dispatch(o: &Map<String, Value>, path: &str, depth: usize) -> Result<Expr> {
        let rules = o
            .get("rules")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(path, "`rules` must be a list of [token, format]"))?;
        let mut rs = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let p = format!("{path}/rules/{i}");
            match r.as_array().map(Vec::as_slice) {
                Some([t, f]) => rs.push((
                    Self::token(t, &format!("{p}/0"))?,
                    Self::form(f, &format!("{p}/1"), depth + 1)?,
                )),
                _ => return Err(bad(&p, "a rule must be [token, format]")),
            }
        }
        if rs.is_empty() {
            return Err(bad(path, "`rules` must not be empty"));
        }
        let looping = Self::looping(o, path)?;
        Ok(Expr::TokenDispatch(Box::new(Dispatch {
            rules: rs,
            looping,
            excludes: Self::token_list(o, "exclude_tokens", path)?,
        })))
    }
}

impl StructuralTag {
    /// Reads a structural tag: `{"type": "structural_tag", "format": {...}}`, the older
    /// `{"type": "structural_tag", "structures": [{"begin", "schema", "end"}], "triggers": [...]}`
    /// (with SGLang's optional `at_least_one`), or a bare format object. Malformed input is
    /// [`Error::StructuralTag`], a format callmask does not compile [`Error::UnsupportedFormat`].
    pub fn from_json(value: &Value) -> Result<StructuralTag> {
        crate::schema::check_schema_shape([value], &CompileOptions::default())?;
        let o = Reader::obj(value, "")?;
        let format = if let Some(f) = o.get("format") {
            Reader::form(f, "/format", 1)?
        } else if o.contains_key("structures") {
            let structures = o
                .get("structures")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("", "`structures` must be a list"))?;
            if structures.is_empty() {
                return Err(bad("", "`structures` must not be empty"));
            }
            let mut tags = Vec::new();
            for (i, s) in structures.iter().enumerate() {
                let p = format!("/structures/{i}");
                let so = Reader::obj(s, &p)?;
                let schema = match so.get("schema") {
                    Some(Value::String(text)) => serde_json::from_str(text)?,
                    Some(v @ (Value::Object(_) | Value::Bool(_))) => v.clone(),
                    _ => return Err(bad(&p, "`schema` must be a JSON Schema")),
                };
                tags.push(serde_json::json!({
                    "type": "tag",
                    "begin": Reader::str_field(so, "begin", &p)?,
                    "content": {"type": "json_schema", "json_schema": schema},
                    "end": Reader::str_field(so, "end", &p)?,
                }));
            }
            let legacy = serde_json::json!({
                "type": "triggered_tags",
                "triggers": o.get("triggers").cloned().unwrap_or(Value::Null),
                "tags": tags,
                "at_least_one": o.get("at_least_one").cloned().unwrap_or(Value::Bool(false)),
            });
            Reader::form(&legacy, "", 1)?
        } else if o.get("type").and_then(Value::as_str) == Some("structural_tag") {
            return Err(bad("", "missing `format` (or `structures` and `triggers`)"));
        } else {
            Reader::form(value, "", 1)?
        };
        Ok(StructuralTag { format })
    }

    /// The regions the parser reports as calls, as (name, arguments schema) pairs without
    /// repeats, in order of appearance, for validating outputs (see the [module docs](self)).
    /// Two regions may share a name with different schemas.
    pub fn calls(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        self.format.for_each_region(None, &mut |r, begin| {
            let call = (call_label(begin), r.schema.clone());
            if r.is_call() && !out.contains(&call) {
                out.push(call);
            }
        });
        out
    }

    /// Compiles the structural tag into a grammar (shareable across threads).
    pub fn compile(&self, options: &StructuralTagOptions) -> Result<Grammar> {
        let mut compile = options.compile.clone();
        let mut ws = Vec::new();
        self.format
            .for_each_region(None, &mut |r, _| ws.extend(r.max_ws));
        ws.sort_unstable();
        ws.dedup();
        match ws.as_slice() {
            [] => {}
            [w] => compile.max_whitespace = *w,
            _ => {
                return Err(unsupported(
                    "max_whitespace_cnt",
                    "",
                    "callmask has one whitespace limit per grammar; give the same value \
                     everywhere",
                ))
            }
        }
        let vocab = TagVocab {
            special_tokens: &options.special_tokens,
            token_ids: &options.token_ids,
            eos_tokens: &options.eos_tokens,
            vocab_len: options.vocab_len,
        };
        let g = lower_tag(&self.format, vocab, &compile)?;
        if g.is_empty() {
            return Err(bad("", "no output satisfies the structural tag"));
        }
        Ok(g)
    }
}

impl Grammar {
    /// Compiles XGrammar's structural tag (`{"type": "structural_tag", "format": {...}}`, or
    /// the older `structures`/`triggers` form) into a grammar: see [`StructuralTag`].
    pub fn from_structural_tag(tag: &Value, options: &StructuralTagOptions) -> Result<Grammar> {
        StructuralTag::from_json(tag)?.compile(options)
    }
}
