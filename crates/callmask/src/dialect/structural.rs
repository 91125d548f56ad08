//! XGrammar's structural tags as input: `{"type": "structural_tag", "format": {...}}` (and the
//! older `{"type": "structural_tag", "structures": [...], "triggers": [...]}` that vLLM and
//! SGLang send for tool calling) compiled into one [`Grammar`], so that the strict tool-calling
//! specs those engines emit compile unchanged.
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

use super::lower::{
    lit_node, raw_string_content, raw_string_lexeme, raw_string_schema, regex_node, strict_objects,
    text_node, ws_node, XML_ANY_ORDER_MAX, XML_TOP_KEYWORDS,
};
use crate::error::{Error, Result};
use crate::grammar::{ArgEncoding, Capture, Grammar, Node, NodeId};
use crate::schema::keywords::{Keyword, Role};
use crate::schema::{CompileOptions, Compiler, Encoding, Lexeme};
use crate::vocab::{TokenId, Vocab};
use serde_json::{Map, Value};

/// Deepest nesting of format objects.
const MAX_NESTING: usize = 64;
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

/// A token named by a token-level format: by id or by text, with where it was named.
#[derive(Debug, Clone)]
struct TokenRef {
    id: Result<u64, String>,
    path: String,
}

impl TokenRef {
    fn describe(&self) -> String {
        match &self.id {
            Ok(n) => format!("token id {n}"),
            Err(t) => format!("token {t:?}"),
        }
    }
}

/// Where a tag's begin or end is: text, or one special token.
#[derive(Debug, Clone)]
enum Delim {
    Text(String),
    Token(TokenRef),
}

/// XGrammar's XML styles of `json_schema`: how one argument is written. A string value is
/// written raw (up to the closing tag), any other value as JSON with whitespace around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum XmlStyle {
    /// `<parameter=KEY>VALUE</parameter>` (Qwen3-Coder, Qwen3.5, MiMo, Step-3.5).
    Qwen,
    /// `<parameter name="KEY">VALUE</parameter>` (MiniMax-M2).
    Minimax,
    /// `<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>` (GLM-4.5/4.7, Ling 3).
    Glm,
    /// `<｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>`
    /// (DeepSeek-V3.2, V4).
    Deepseek,
    /// `<｜DSML｜ parameter name="KEY" string="true|false">VALUE</｜DSML｜ parameter>`
    /// (DeepSeek-V4.1).
    DeepseekV41,
}

impl XmlStyle {
    fn from_name(s: &str) -> Option<XmlStyle> {
        Some(match s {
            "qwen_xml" => XmlStyle::Qwen,
            "minimax_xml" => XmlStyle::Minimax,
            "glm_xml" => XmlStyle::Glm,
            "deepseek_xml" => XmlStyle::Deepseek,
            "deepseek_v4_1_xml" => XmlStyle::DeepseekV41,
            _ => return None,
        })
    }

    /// Before the key.
    fn open(self) -> &'static str {
        match self {
            XmlStyle::Qwen => "<parameter=",
            XmlStyle::Minimax => "<parameter name=\"",
            XmlStyle::Glm => "<arg_key>",
            XmlStyle::Deepseek => "<\u{ff5c}DSML\u{ff5c}parameter name=\"",
            XmlStyle::DeepseekV41 => "<\u{ff5c}DSML\u{ff5c} parameter name=\"",
        }
    }

    /// After the key: for a raw string value, and for a JSON value (the same but in
    /// DeepSeek's styles, whose `string` attribute tells them apart).
    fn after_key(self, raw: bool) -> &'static str {
        match (self, raw) {
            (XmlStyle::Qwen, _) => ">",
            (XmlStyle::Minimax, _) => "\">",
            (XmlStyle::Glm, _) => "</arg_key>",
            (XmlStyle::Deepseek | XmlStyle::DeepseekV41, true) => "\" string=\"true\">",
            (XmlStyle::Deepseek | XmlStyle::DeepseekV41, false) => "\" string=\"false\">",
        }
    }

    /// GLM's second tag, after whitespace, before the value.
    fn value_open(self) -> Option<&'static str> {
        (self == XmlStyle::Glm).then_some("<arg_value>")
    }

    /// The value's closing tag.
    fn close(self) -> &'static str {
        match self {
            XmlStyle::Qwen | XmlStyle::Minimax => "</parameter>",
            XmlStyle::Glm => "</arg_value>",
            XmlStyle::Deepseek => "</\u{ff5c}DSML\u{ff5c}parameter>",
            XmlStyle::DeepseekV41 => "</\u{ff5c}DSML\u{ff5c} parameter>",
        }
    }

    fn split_by_string_attr(self) -> bool {
        matches!(self, XmlStyle::Deepseek | XmlStyle::DeepseekV41)
    }
}

#[derive(Debug, Clone)]
struct Tag {
    begin: Delim,
    content: Box<Format>,
    /// End strings (any of them), or one token.
    end: Result<Vec<String>, TokenRef>,
    path: String,
}

#[derive(Debug, Clone)]
enum Format {
    Const(String),
    Json {
        schema: Value,
        max_ws: Option<u16>,
        /// `None`: JSON.
        xml: Option<XmlStyle>,
        path: String,
    },
    AnyText {
        excludes: Vec<String>,
        max_chars: Option<u32>,
    },
    Regex(String, String),
    Seq(Vec<Format>),
    Or(Vec<Format>),
    Repeat(Box<Format>, u32, u32),
    Tag(Tag),
    Triggered {
        triggers: Vec<String>,
        tags: Vec<Tag>,
        at_least_one: bool,
        stop_after_first: bool,
        excludes: Vec<String>,
    },
    Separated {
        tags: Vec<Tag>,
        separator: String,
        at_least_one: bool,
        stop_after_first: bool,
    },
    Dispatch {
        rules: Vec<(String, Format)>,
        looping: bool,
        excludes: Vec<String>,
    },
    Token(TokenRef),
    /// Any tokens but these (special tokens; text is any).
    AnyTokens(Vec<TokenRef>),
    /// `exclude_token`: exactly one token but these; compiled only directly before
    /// `any_tokens` (see [`Format::SomeTokens`]), refused elsewhere (the path says where).
    ExcludeToken(Vec<TokenRef>, String),
    /// `exclude_token` then `any_tokens` in a sequence: one token or more, the first not in
    /// `first`, the others not in `rest`. Exact at the token level: the first token is a special
    /// token not excluded, or an ordinary one, which starts a non-empty run of text.
    SomeTokens {
        first: Vec<TokenRef>,
        rest: Vec<TokenRef>,
    },
    TokenTriggered {
        triggers: Vec<TokenRef>,
        tags: Vec<Tag>,
        at_least_one: bool,
        stop_after_first: bool,
        excludes: Vec<TokenRef>,
    },
    TokenDispatch {
        rules: Vec<(TokenRef, Format)>,
        looping: bool,
        excludes: Vec<TokenRef>,
    },
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
    format: Format,
}

fn bad(path: &str, message: impl Into<String>) -> Error {
    Error::StructuralTag {
        path: if path.is_empty() {
            "#".into()
        } else {
            format!("#{path}")
        },
        message: message.into(),
    }
}

/// Joins each `exclude_token` directly followed by `any_tokens` in a sequence into one
/// [`Format::SomeTokens`] (SGLang's Kimi K3 tags write a non-empty value so).
fn some_tokens(elements: Vec<Format>) -> Vec<Format> {
    let mut out: Vec<Format> = Vec::with_capacity(elements.len());
    for f in elements {
        match (out.last(), f) {
            (Some(Format::ExcludeToken(first, _)), Format::AnyTokens(rest)) => {
                let first = first.clone();
                out.pop();
                out.push(Format::SomeTokens { first, rest });
            }
            (_, f) => out.push(f),
        }
    }
    out
}

fn unsupported(format: impl Into<String>, path: &str, reason: &str) -> Error {
    Error::UnsupportedFormat {
        format: format.into(),
        path: if path.is_empty() {
            "#".into()
        } else {
            format!("#{path}")
        },
        reason: reason.into(),
    }
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

    fn content(o: &Map<String, Value>, path: &str, depth: usize) -> Result<Format> {
        let c = o
            .get("content")
            .ok_or_else(|| bad(path, "missing `content`"))?;
        Self::format(c, &format!("{path}/content"), depth + 1)
    }

    fn elements(o: &Map<String, Value>, path: &str, depth: usize) -> Result<Vec<Format>> {
        let a = o
            .get("elements")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(path, "`elements` must be a list of formats"))?;
        if a.is_empty() {
            return Err(bad(path, "`elements` must not be empty"));
        }
        a.iter()
            .enumerate()
            .map(|(i, e)| Self::format(e, &format!("{path}/elements/{i}"), depth + 1))
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
            content: Box::new(Self::content(o, path, depth)?),
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

    fn format(v: &Value, path: &str, depth: usize) -> Result<Format> {
        if depth > MAX_NESTING {
            return Err(Error::LimitExceeded {
                what: "structural tag nesting",
                limit: MAX_NESTING,
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
            "const_string" => Format::Const(Self::str_field(o, "value", path)?),
            "json_schema" | "qwen_xml_parameter" => {
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
                Format::Json {
                    schema,
                    max_ws,
                    xml,
                    path: path.to_owned(),
                }
            }
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
                Format::AnyText {
                    excludes: Self::strings(o, "excludes", path, false)?,
                    max_chars,
                }
            }
            "regex" => Format::Regex(Self::str_field(o, "pattern", path)?, path.to_owned()),
            "sequence" => Format::Seq(some_tokens(Self::elements(o, path, depth)?)),
            "or" => Format::Or(Self::elements(o, path, depth)?),
            "optional" => Format::Repeat(Box::new(Self::content(o, path, depth)?), 0, 1),
            "star" => Format::Repeat(Box::new(Self::content(o, path, depth)?), 0, u32::MAX),
            "plus" => Format::Repeat(Box::new(Self::content(o, path, depth)?), 1, u32::MAX),
            "repeat" => {
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
                    });
                }
                Format::Repeat(Box::new(Self::content(o, path, depth)?), min, max)
            }
            "tag" => Format::Tag(Self::tag(v, path, depth)?),
            "triggered_tags" => {
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
                Format::Triggered {
                    triggers,
                    tags,
                    at_least_one: Self::bool_field(o, "at_least_one", path)?,
                    stop_after_first: Self::bool_field(o, "stop_after_first", path)?,
                    excludes: Self::strings(o, "excludes", path, false)?,
                }
            }
            "tags_with_separator" => Format::Separated {
                tags: Self::tags(o, path, depth)?,
                separator: Self::str_field(o, "separator", path)?,
                at_least_one: Self::bool_field(o, "at_least_one", path)?,
                stop_after_first: Self::bool_field(o, "stop_after_first", path)?,
            },
            "dispatch" => {
                let rules = o
                    .get("rules")
                    .and_then(Value::as_array)
                    .ok_or_else(|| bad(path, "`rules` must be a list of [pattern, format]"))?;
                let mut rs = Vec::new();
                for (i, r) in rules.iter().enumerate() {
                    let p = format!("{path}/rules/{i}");
                    match r.as_array().map(Vec::as_slice) {
                        Some([Value::String(pat), f]) if !pat.is_empty() => {
                            rs.push((pat.clone(), Self::format(f, &format!("{p}/1"), depth + 1)?))
                        }
                        _ => return Err(bad(&p, "a rule must be [non-empty pattern, format]")),
                    }
                }
                let looping = match o.get("loop") {
                    None | Some(Value::Null) => true,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => return Err(bad(path, "`loop` must be a boolean")),
                };
                Format::Dispatch {
                    rules: rs,
                    looping,
                    excludes: Self::strings(o, "excludes", path, false)?,
                }
            }
            "token" => Format::Token(Self::token(
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
            "exclude_token" => Format::ExcludeToken(
                Self::token_list(o, "exclude_tokens", path)?,
                path.to_owned(),
            ),
            "any_tokens" => {
                if Self::count(o, "max_tokens", path)?.is_some() {
                    return Err(unsupported(
                        "max_tokens",
                        path,
                        "a bound in tokens needs the matcher to count tokens per region",
                    ));
                }
                Format::AnyTokens(Self::token_list(o, "exclude_tokens", path)?)
            }
            "token_triggered_tags" => {
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
                Format::TokenTriggered {
                    triggers,
                    tags,
                    at_least_one: Self::bool_field(o, "at_least_one", path)?,
                    stop_after_first: Self::bool_field(o, "stop_after_first", path)?,
                    excludes: Self::token_list(o, "exclude_tokens", path)?,
                }
            }
            "token_dispatch" => {
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
                            Self::format(f, &format!("{p}/1"), depth + 1)?,
                        )),
                        _ => return Err(bad(&p, "a rule must be [token, format]")),
                    }
                }
                if rs.is_empty() {
                    return Err(bad(path, "`rules` must not be empty"));
                }
                let looping = match o.get("loop") {
                    None | Some(Value::Null) => true,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => return Err(bad(path, "`loop` must be a boolean")),
                };
                Format::TokenDispatch {
                    rules: rs,
                    looping,
                    excludes: Self::token_list(o, "exclude_tokens", path)?,
                }
            }
            t => return Err(bad(path, format!("unknown format type {t:?}"))),
        })
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
            Reader::format(f, "/format", 1)?
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
            Reader::format(&legacy, "", 1)?
        } else if o.get("type").and_then(Value::as_str) == Some("structural_tag") {
            return Err(bad("", "missing `format` (or `structures` and `triggers`)"));
        } else {
            Reader::format(value, "", 1)?
        };
        Ok(StructuralTag { format })
    }

    /// The regions the parser reports as calls, as (name, arguments schema) pairs without
    /// repeats, in order of appearance, for validating outputs (see the [module docs](self)).
    /// Two regions may share a name with different schemas.
    pub fn calls(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        collect_calls(&self.format, None, &mut out);
        out
    }

    /// Compiles the structural tag into a grammar (shareable across threads).
    pub fn compile(&self, options: &StructuralTagOptions) -> Result<Grammar> {
        let mut compile = options.compile.clone();
        let mut ws = Vec::new();
        max_ws_counts(&self.format, &mut ws);
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
        let null = Value::Null;
        let mut specials: Vec<String> = options
            .special_tokens
            .iter()
            .filter(|s| !s.is_empty())
            .cloned()
            .collect();
        // Longest first, so that a literal is split at the longest special it holds.
        specials.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        specials.dedup();
        let mut l = StLower {
            c: Compiler::new(&null, &compile),
            vocab_specials: specials,
            specials: Vec::new(),
            functions: Vec::new(),
            token_ids: &options.token_ids,
            eos_tokens: &options.eos_tokens,
            vocab_len: options.vocab_len,
            end_tokens: Vec::new(),
        };
        let root = l.format(&self.format, &[], None)?;
        let functions = std::mem::take(&mut l.functions);
        let specials = std::mem::take(&mut l.specials);
        let g = l.c.b.finish(root, false, specials, functions)?;
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

fn max_ws_counts(f: &Format, out: &mut Vec<u16>) {
    match f {
        Format::Json {
            max_ws: Some(w), ..
        } => out.push(*w),
        Format::TokenTriggered { tags, .. } => {
            tags.iter().for_each(|t| max_ws_counts(&t.content, out))
        }
        Format::TokenDispatch { rules, .. } => {
            rules.iter().for_each(|(_, x)| max_ws_counts(x, out))
        }
        Format::Seq(v) | Format::Or(v) => v.iter().for_each(|x| max_ws_counts(x, out)),
        Format::Repeat(x, ..) => max_ws_counts(x, out),
        Format::Tag(t) => max_ws_counts(&t.content, out),
        Format::Triggered { tags, .. } | Format::Separated { tags, .. } => {
            tags.iter().for_each(|t| max_ws_counts(&t.content, out))
        }
        Format::Dispatch { rules, .. } => rules.iter().for_each(|(_, x)| max_ws_counts(x, out)),
        _ => {}
    }
}

/// Whether the parser reports `schema`'s region as a call: the schema says its value is an
/// object.
fn is_object_schema(schema: &Value) -> bool {
    matches!(
        schema.get("type").and_then(Value::as_str),
        Some("object" | "dict")
    )
}

/// The function name a tag's begin text names, if it follows one of the common shapes.
fn name_in(begin: &str) -> Option<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || "_-.".contains(*c))
            .collect()
    };
    // `"name": "f"` (Hermes, Qwen, Llama): the last one.
    if let Some(i) = begin.rfind("\"name\"") {
        let rest = begin[i + 6..].trim_start();
        if let Some(rest) = rest.strip_prefix(':') {
            if let Some(rest) = rest.trim_start().strip_prefix('"') {
                if let Some(j) = rest.find('"') {
                    if j > 0 {
                        return Some(rest[..j].to_owned());
                    }
                }
            }
        }
    }
    // `<tool_call>f` (GLM-4.7, Hunyuan): the name right after the marker.
    for marker in ["<function=", "name=\"", "functions.", "<tool_call>"] {
        if let Some(i) = begin.rfind(marker) {
            let n = ident(&begin[i + marker.len()..]);
            if !n.is_empty() {
                return Some(n);
            }
        }
    }
    None
}

fn label(tag_begin: Option<&str>) -> String {
    match tag_begin {
        Some(b) => name_in(b).unwrap_or_else(|| b.trim().to_owned()),
        None => "json_schema".to_owned(),
    }
}

fn begin_text(t: &Tag) -> String {
    match &t.begin {
        Delim::Text(s) => s.clone(),
        Delim::Token(r) => match &r.id {
            Err(s) => s.clone(),
            Ok(_) => r.describe(),
        },
    }
}

/// Whether a `json_schema` region is reported as a call: an object schema, or any XML style
/// (whose content is always an argument list).
fn is_call(schema: &Value, xml: Option<XmlStyle>) -> bool {
    (xml.is_some() && is_object_typed(schema)) || is_object_schema(schema)
}

/// An XML style's schema that is an object's (`true`, no `type`, or `type` object): its
/// region holds the arguments as tags; any other (SGLang's Kimi K3 tags give one argument's
/// schema) holds one value as the style writes an argument's.
fn is_object_typed(schema: &Value) -> bool {
    match schema.get("type") {
        None => true,
        Some(Value::String(t)) => t == "object" || t == "dict",
        Some(_) => false,
    }
}

fn collect_calls(f: &Format, begin: Option<&str>, out: &mut Vec<(String, Value)>) {
    match f {
        Format::Json { schema, xml, .. } if is_call(schema, *xml) => {
            let call = (label(begin), schema.clone());
            if !out.contains(&call) {
                out.push(call);
            }
        }
        Format::Seq(v) | Format::Or(v) => v.iter().for_each(|x| collect_calls(x, begin, out)),
        Format::Repeat(x, ..) => collect_calls(x, begin, out),
        Format::Tag(t) => collect_calls(&t.content, Some(&begin_text(t)), out),
        Format::Triggered { tags, .. } | Format::Separated { tags, .. } => tags
            .iter()
            .for_each(|t| collect_calls(&t.content, Some(&begin_text(t)), out)),
        Format::Dispatch { rules, .. } => rules
            .iter()
            .for_each(|(p, x)| collect_calls(x, Some(p), out)),
        Format::TokenTriggered { tags, .. } => tags
            .iter()
            .for_each(|t| collect_calls(&t.content, Some(&begin_text(t)), out)),
        Format::TokenDispatch { rules, .. } => rules.iter().for_each(|(t, x)| {
            let b = match &t.id {
                Err(s) => s.clone(),
                Ok(_) => t.describe(),
            };
            collect_calls(x, Some(&b), out)
        }),
        _ => {}
    }
}

/// Lowers a parsed structural tag into grammar nodes.
struct StLower<'a> {
    c: Compiler<'a>,
    /// The vocabulary's special-token texts, longest first.
    vocab_specials: Vec<String>,
    /// The grammar's special tokens, by index of [`Node::Special`].
    specials: Vec<String>,
    /// Call labels, by index of [`Capture::Call`].
    functions: Vec<String>,
    /// The vocabulary's special tokens by id (see [`StructuralTagOptions::token_ids`]).
    token_ids: &'a [(TokenId, String)],
    eos_tokens: &'a [TokenId],
    vocab_len: usize,
    /// The end tokens of the enclosing tags (an `any_tokens` region stops at them).
    end_tokens: Vec<String>,
}

impl<'a> StLower<'a> {
    fn special(&mut self, text: &str) -> Result<NodeId> {
        let i = match self.specials.iter().position(|s| s == text) {
            Some(i) => i,
            None => {
                self.specials.push(text.to_owned());
                self.specials.len() - 1
            }
        };
        self.c.b.push(Node::Special(i as u32))
    }

    /// `text` as bytes, except that a vocabulary special token's text in it may also be that
    /// special token.
    fn lit(&mut self, text: &str) -> Result<NodeId> {
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
                        parts.push(lit_node(&mut self.c, &text.as_bytes()[plain..i])?);
                    }
                    let sp = self.special(&s)?;
                    let tx = lit_node(&mut self.c, s.as_bytes())?;
                    parts.push(self.c.b.push(Node::Union(vec![sp, tx]))?);
                    i += s.len();
                    plain = i;
                }
                None => i += text[i..].chars().next().map_or(1, char::len_utf8),
            }
        }
        if plain < text.len() {
            parts.push(lit_node(&mut self.c, &text.as_bytes()[plain..])?);
        }
        match parts.len() {
            1 => Ok(parts[0]),
            _ => self.c.b.push(Node::Seq(parts)),
        }
    }

    fn delim(&mut self, d: &Delim) -> Result<NodeId> {
        match d {
            Delim::Text(s) => self.lit(s),
            Delim::Token(t) => {
                let s = self.token_text(t)?;
                self.special(&s)
            }
        }
    }

    /// The text of the special token `t` names: an error naming it when the vocabulary has no
    /// such special token (or, with no vocabulary given, when it is named by id).
    fn token_text(&self, t: &TokenRef) -> Result<String> {
        let known = !self.token_ids.is_empty();
        match &t.id {
            Err(text) => {
                if !known || self.token_ids.iter().any(|(_, s)| s == text) {
                    Ok(text.clone())
                } else {
                    Err(bad(
                        &t.path,
                        format!(
                            "token {text:?} is not a special token of the vocabulary (callmask \
                             matches ordinary tokens by their bytes: write it as a string)"
                        ),
                    ))
                }
            }
            Ok(n) => match self.token_ids.iter().find(|(id, _)| u64::from(*id) == *n) {
                Some((_, s)) => Ok(s.clone()),
                None if !known => Err(bad(
                    &t.path,
                    format!(
                        "token id {n} needs the vocabulary: compile with \
                         StructuralTagOptions::for_vocab"
                    ),
                )),
                None if self.vocab_len > 0 && *n >= self.vocab_len as u64 => Err(bad(
                    &t.path,
                    format!(
                        "token id {n} is not in the vocabulary ({} tokens)",
                        self.vocab_len
                    ),
                )),
                None => Err(bad(
                    &t.path,
                    format!(
                        "token id {n} is not a special token of the vocabulary (callmask \
                         matches ordinary tokens by their bytes: write it as a string)"
                    ),
                )),
            },
        }
    }

    fn token_texts(&self, ts: &[TokenRef]) -> Result<Vec<String>> {
        ts.iter().map(|t| self.token_text(t)).collect()
    }

    /// Any tokens but the special tokens `excluded` (and the enclosing tags' end tokens, and
    /// end-of-generation): text holding none of `markers`, with the vocabulary's other special
    /// tokens anywhere in it. Exact at the token level: any ordinary token may come, and the
    /// special tokens are told apart from their spellings.
    fn any_tokens(&mut self, excluded: &[String], markers: &[String]) -> Result<NodeId> {
        let t = self.text(markers, None)?;
        match self.token_runs(excluded, markers)? {
            None => Ok(t),
            Some(more) => self.seq(vec![t, more]),
        }
    }

    /// The special tokens a free token region allows: the vocabulary's, but end-of-generation,
    /// `excluded` and the enclosing tags' end tokens.
    fn allowed_specials(&self, excluded: &[String]) -> Vec<String> {
        self.token_ids
            .iter()
            .filter(|(id, s)| {
                !self.eos_tokens.contains(id)
                    && !excluded.contains(s)
                    && !self.end_tokens.contains(s)
            })
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// Any number of (allowed special token, text) pairs; `None` when no special token is
    /// allowed.
    fn token_runs(&mut self, excluded: &[String], markers: &[String]) -> Result<Option<NodeId>> {
        let allowed = self.allowed_specials(excluded);
        if allowed.is_empty() {
            return Ok(None);
        }
        let mut alts = Vec::new();
        for s in &allowed {
            alts.push(self.special(s)?);
        }
        let u = self.c.b.push(Node::Union(alts))?;
        let t2 = self.text(markers, None)?;
        let pair = self.seq(vec![u, t2])?;
        Ok(Some(self.repeat(pair, 0, u32::MAX)?))
    }

    /// `exclude_token` (`first`) then `any_tokens` (`rest`): one token or more. The first is an
    /// allowed special token then any tokens, or an ordinary token, i.e. non-empty text, then
    /// any tokens (a token boundary inside text is free, so this is exact).
    fn some_tokens(
        &mut self,
        first: &[String],
        rest: &[String],
        markers: &[String],
    ) -> Result<NodeId> {
        let mut alts = Vec::new();
        let firsts = self.allowed_specials(first);
        if !firsts.is_empty() {
            let mut specials = Vec::new();
            for s in &firsts {
                specials.push(self.special(s)?);
            }
            let u = self.c.b.push(Node::Union(specials))?;
            let tail = self.any_tokens(rest, markers)?;
            alts.push(self.seq(vec![u, tail])?);
        }
        let text = self.nonempty_text(markers)?;
        alts.push(match self.token_runs(rest, markers)? {
            None => text,
            Some(more) => self.seq(vec![text, more])?,
        });
        self.c.b.push(Node::Union(alts))
    }

    /// Free text as [`Self::text`], not empty.
    fn nonempty_text(&mut self, markers: &[String]) -> Result<NodeId> {
        let mut m: Vec<String> = markers.iter().filter(|s| !s.is_empty()).cloned().collect();
        m.sort();
        m.dedup();
        let d = self.c.cached(Lexeme::NonEmptyText(m.clone()), |c| {
            let states = c.opts.max_lexeme_states;
            let ms: Vec<&str> = m.iter().map(String::as_str).collect();
            let t = crate::grammar::dfa::Dfa::text_without(&ms, None, states)
                .map_err(|e| c.b.dfa_err(e, "", ""))?;
            let empty = c.b.regex("", "")?;
            t.product(&empty, crate::grammar::dfa::Op::AndNot, states)
                .map_err(|e| c.b.dfa_err(e, "", ""))
        })?;
        let l = self.c.lexeme(d)?;
        self.c.b.push(Node::Capture(Capture::Text, l))
    }

    /// Free text then tags (`g`) as `triggered_tags` arranges them.
    fn triggered(
        &mut self,
        g: NodeId,
        free: &mut dyn FnMut(&mut Self) -> Result<NodeId>,
        at_least_one: bool,
        stop_after_first: bool,
    ) -> Result<NodeId> {
        match (at_least_one, stop_after_first) {
            // Exactly one tag, nothing around it.
            (true, true) => Ok(g),
            // Text, then at most one tag.
            (false, true) => {
                let t = free(self)?;
                let opt = self.repeat(g, 0, 1)?;
                self.seq(vec![t, opt])
            }
            // Text, then any number of (tag, text).
            (false, false) => {
                let t = free(self)?;
                let t2 = free(self)?;
                let pair = self.seq(vec![g, t2])?;
                let more = self.repeat(pair, 0, u32::MAX)?;
                self.seq(vec![t, more])
            }
            // A tag first, then text and tags.
            (true, false) => {
                let t = free(self)?;
                let t2 = free(self)?;
                let pair = self.seq(vec![g, t2])?;
                let more = self.repeat(pair, 0, u32::MAX)?;
                self.seq(vec![g, t, more])
            }
        }
    }

    /// Free text that holds none of `markers`, captured as the reply's text.
    fn text(&mut self, markers: &[String], max_chars: Option<u32>) -> Result<NodeId> {
        let mut m: Vec<String> = markers.iter().filter(|s| !s.is_empty()).cloned().collect();
        m.sort();
        m.dedup();
        text_node(&mut self.c, &m, max_chars, Capture::Text)
    }

    fn tag(&mut self, t: &'a Tag) -> Result<NodeId> {
        let begin = self.delim(&t.begin)?;
        let ends: Vec<String> = t.end.clone().unwrap_or_default();
        let end_token = match &t.end {
            Err(tok) => Some(self.token_text(tok)?),
            Ok(_) => None,
        };
        let pushed = end_token.is_some();
        if let Some(e) = &end_token {
            self.end_tokens.push(e.clone());
        }
        let content = self.format(&t.content, &ends, Some(&begin_text(t)));
        if pushed {
            self.end_tokens.pop();
        }
        let content = content?;
        let end = match &end_token {
            Some(tok) => self.special(tok)?,
            None => {
                let ends = t.end.as_ref().map_or(&[][..], Vec::as_slice);
                let mut alts = Vec::new();
                for e in ends {
                    alts.push(self.lit(e)?);
                }
                if alts.len() == 1 {
                    alts[0]
                } else {
                    self.c.b.push(Node::Union(alts))?
                }
            }
        };
        self.c.b.push(Node::Seq(vec![begin, content, end]))
    }

    fn tags(&mut self, tags: &'a [Tag]) -> Result<NodeId> {
        let mut alts = Vec::new();
        for t in tags {
            alts.push(self.tag(t)?);
        }
        self.c.b.push(Node::Union(alts))
    }

    fn repeat(&mut self, item: NodeId, min: u32, max: u32) -> Result<NodeId> {
        self.c.b.push(Node::Repeat { item, min, max })
    }

    fn seq(&mut self, items: Vec<NodeId>) -> Result<NodeId> {
        self.c.b.push(Node::Seq(items))
    }

    /// Lowers `f`; `ends` are the enclosing tag's end strings (free text stops at them),
    /// `begin` that tag's begin (names the calls).
    fn format(&mut self, f: &'a Format, ends: &[String], begin: Option<&str>) -> Result<NodeId> {
        self.c.b.check_budget()?;
        match f {
            Format::Const(s) => self.lit(s),
            Format::Token(t) => {
                let s = self.token_text(t)?;
                self.special(&s)
            }
            Format::AnyTokens(excl) => {
                let excluded = self.token_texts(excl)?;
                self.any_tokens(&excluded, ends)
            }
            Format::ExcludeToken(_, path) => Err(unsupported(
                "exclude_token",
                path,
                "exactly one token of any kind needs the matcher to see token boundaries \
                 (callmask matches ordinary tokens by their bytes); it is compiled only right \
                 before `any_tokens` in a sequence (one token or more)",
            )),
            Format::SomeTokens { first, rest } => {
                let first = self.token_texts(first)?;
                let rest = self.token_texts(rest)?;
                self.some_tokens(&first, &rest, ends)
            }
            Format::TokenTriggered {
                triggers,
                tags,
                at_least_one,
                stop_after_first,
                excludes,
            } => {
                let trig = self.token_texts(triggers)?;
                for t in tags {
                    let Delim::Token(b) = &t.begin else {
                        unreachable!("checked when read")
                    };
                    let b = self.token_text(b)?;
                    if !trig.contains(&b) {
                        return Err(bad(
                            &t.path,
                            format!("the tag's begin token {b:?} is not one of the trigger tokens"),
                        ));
                    }
                }
                let g = self.tags(tags)?;
                let mut excluded = self.token_texts(excludes)?;
                excluded.extend(trig);
                let markers = ends.to_vec();
                self.triggered(
                    g,
                    &mut |l: &mut Self| l.any_tokens(&excluded, &markers),
                    *at_least_one,
                    *stop_after_first,
                )
            }
            Format::TokenDispatch {
                rules,
                looping,
                excludes,
            } => {
                let mut excluded = self.token_texts(excludes)?;
                let mut alts = Vec::new();
                for (tok, x) in rules {
                    let t = self.token_text(tok)?;
                    let sp = self.special(&t)?;
                    let body = self.format(x, ends, Some(&t))?;
                    alts.push(self.seq(vec![sp, body])?);
                    excluded.push(t);
                }
                let g = self.c.b.push(Node::Union(alts))?;
                let t = self.any_tokens(&excluded, ends)?;
                if *looping {
                    let t2 = self.any_tokens(&excluded, ends)?;
                    let pair = self.seq(vec![g, t2])?;
                    let more = self.repeat(pair, 0, u32::MAX)?;
                    self.seq(vec![t, more])
                } else {
                    let opt = self.repeat(g, 0, 1)?;
                    self.seq(vec![t, opt])
                }
            }
            Format::Regex(r, path) => regex_node(&mut self.c, r).map_err(|e| match e {
                Error::InvalidPattern {
                    pattern, message, ..
                } => Error::InvalidPattern {
                    pattern,
                    path: format!("#{path}"),
                    message,
                },
                e => e,
            }),
            Format::Json {
                schema,
                xml: Some(style),
                path,
                ..
            } if !is_object_typed(schema) => self.xml_value(schema, *style, path, ends),
            Format::Json {
                schema,
                xml: Some(style),
                path,
                ..
            } => self.xml_args(schema, *style, path, begin),
            Format::Json { schema, .. } => {
                self.c.set_document(schema, Encoding::Json);
                let node = self.c.compile(schema, "")?;
                if !is_object_schema(schema) {
                    return Ok(node);
                }
                let args = self
                    .c
                    .b
                    .push(Node::Capture(Capture::Args(ArgEncoding::Json), node))?;
                self.functions.push(label(begin));
                let i = self.functions.len() as u32 - 1;
                self.c.b.push(Node::Capture(Capture::Call(i), args))
            }
            Format::AnyText {
                excludes,
                max_chars,
            } => {
                let m: Vec<String> = excludes.iter().chain(ends).cloned().collect();
                self.text(&m, *max_chars)
            }
            Format::Seq(v) => {
                let mut ids = Vec::new();
                for x in v {
                    ids.push(self.format(x, ends, begin)?);
                }
                self.seq(ids)
            }
            Format::Or(v) => {
                let mut ids = Vec::new();
                for x in v {
                    ids.push(self.format(x, ends, begin)?);
                }
                self.c.b.push(Node::Union(ids))
            }
            Format::Repeat(x, min, max) => {
                let item = self.format(x, ends, begin)?;
                self.repeat(item, *min, *max)
            }
            Format::Tag(t) => self.tag(t),
            Format::Triggered {
                triggers,
                tags,
                at_least_one,
                stop_after_first,
                excludes,
            } => {
                let g = self.tags(tags)?;
                let markers: Vec<String> = triggers
                    .iter()
                    .chain(excludes)
                    .chain(ends)
                    .cloned()
                    .collect();
                self.triggered(
                    g,
                    &mut |l: &mut Self| l.text(&markers, None),
                    *at_least_one,
                    *stop_after_first,
                )
            }
            Format::Separated {
                tags,
                separator,
                at_least_one,
                stop_after_first,
            } => {
                let g = self.tags(tags)?;
                let min = u32::from(*at_least_one);
                if *stop_after_first {
                    return self.repeat(g, min, 1);
                }
                let sep = self.lit(separator)?;
                let next = self.seq(vec![sep, g])?;
                let more = self.repeat(next, 0, u32::MAX)?;
                let list = self.seq(vec![g, more])?;
                self.repeat(list, min, 1)
            }
            Format::Dispatch {
                rules,
                looping,
                excludes,
            } => {
                let mut alts = Vec::new();
                let mut markers: Vec<String> = excludes.iter().chain(ends).cloned().collect();
                for (pat, x) in rules {
                    markers.push(pat.clone());
                    let p = self.lit(pat)?;
                    let body = self.format(x, ends, Some(pat))?;
                    alts.push(self.seq(vec![p, body])?);
                }
                let g = self.c.b.push(Node::Union(alts))?;
                let t = self.text(&markers, None)?;
                if *looping {
                    let t2 = self.text(&markers, None)?;
                    let pair = self.seq(vec![g, t2])?;
                    let more = self.repeat(pair, 0, u32::MAX)?;
                    self.seq(vec![t, more])
                } else {
                    let opt = self.repeat(g, 0, 1)?;
                    self.seq(vec![t, opt])
                }
            }
        }
    }
}

/// True when `k` is a top-level keyword an XML-style arguments schema may have (besides
/// annotations): `@xml_args`'s ([`XML_TOP_KEYWORDS`]), and the definitions its properties'
/// local `$ref`s point into.
fn xml_style_top_keyword(k: &str) -> bool {
    Keyword::from_name(k).is_some_and(|k| {
        XML_TOP_KEYWORDS.contains(&k) || matches!(k, Keyword::Defs | Keyword::Definitions)
    })
}

/// What an argument's value may be in an XML style: raw strings (string schemas) and JSON
/// values (schemas of the non-string values).
#[derive(Default)]
struct XmlKinds {
    raw: Vec<Map<String, Value>>,
    json: Vec<Value>,
}

/// True for the keywords that constrain strings only (the string role of the keyword table).
fn string_keyword(k: &str) -> bool {
    Keyword::from_name(k).is_some_and(|k| k.role() == Role::String)
}

/// Splits property schema `p` into raw strings and JSON values, as XGrammar's XML styles write
/// them; `Err` names what callmask cannot split.
fn xml_kinds(
    p: &Value,
    doc: &Value,
    depth: usize,
    out: &mut XmlKinds,
) -> std::result::Result<(), String> {
    if depth > 16 {
        return Err("`$ref`s nest too deep".into());
    }
    let any = |out: &mut XmlKinds| {
        out.raw
            .push(Map::from_iter([("type".to_owned(), Value::from("string"))]));
        out.json
            .push(serde_json::json!({"type": ["number", "boolean", "null", "array", "object"]}));
    };
    let o = match p {
        Value::Bool(true) => {
            any(out);
            return Ok(());
        }
        Value::Bool(false) => return Ok(()),
        Value::Object(o) => o,
        _ => return Err("a property schema must be an object or a boolean".into()),
    };
    let meaningful: Vec<&String> = o
        .keys()
        .filter(|k| {
            !crate::schema::is_annotation(k)
                && !matches!(
                    Keyword::from_name(k),
                    Some(Keyword::Defs | Keyword::Definitions)
                )
        })
        .collect();
    if let Some(Value::String(r)) = o.get("$ref") {
        if meaningful.len() != 1 {
            return Err("a `$ref` beside other keywords".into());
        }
        let target = r
            .strip_prefix('#')
            .and_then(|ptr| doc.pointer(ptr))
            .ok_or_else(|| format!("`$ref` {r:?} does not resolve in the schema"))?;
        return xml_kinds(target, doc, depth + 1, out);
    }
    if let Some(m) = raw_string_schema(p) {
        out.raw.push(m);
        return Ok(());
    }
    for comb in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = o.get(comb) {
            if meaningful.len() != 1 {
                return Err(format!("`{comb}` beside other keywords"));
            }
            for a in alts {
                xml_kinds(a, doc, depth + 1, out)?;
            }
            return Ok(());
        }
    }
    match o.get("type") {
        Some(Value::String(t)) if t == "string" => Err(
            "a string schema with keywords other than lengths, pattern, format, enum and const"
                .into(),
        ),
        Some(Value::String(_)) => {
            out.json.push(p.clone());
            Ok(())
        }
        Some(Value::Array(ts)) => {
            let has_string = ts.iter().any(|t| t == "string");
            let others: Vec<Value> = ts.iter().filter(|t| *t != "string").cloned().collect();
            if has_string {
                let mut raw: Map<String, Value> = o
                    .iter()
                    .filter(|(k, _)| string_keyword(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                raw.insert("type".into(), Value::from("string"));
                if o.keys().any(|k| matches!(k.as_str(), "enum" | "const")) {
                    return Err("`enum`/`const` beside a list of types".into());
                }
                out.raw.push(raw);
            }
            if !others.is_empty() {
                let mut json = o.clone();
                json.retain(|k, _| !string_keyword(k));
                json.insert("type".into(), Value::Array(others));
                out.json.push(Value::Object(json));
            }
            Ok(())
        }
        Some(_) => Err("`type` must be a string or a list".into()),
        None => {
            let lits: Option<Vec<Value>> = match (o.get("enum"), o.get("const")) {
                (Some(Value::Array(a)), None) => Some(a.clone()),
                (None, Some(c)) => Some(vec![c.clone()]),
                (None, None) => None,
                _ => return Err("`enum` beside `const`".into()),
            };
            match lits {
                Some(vals) => {
                    if meaningful.len() != 1 {
                        return Err("`enum`/`const` beside other keywords".into());
                    }
                    let strs: Vec<Value> = vals.iter().filter(|v| v.is_string()).cloned().collect();
                    let rest: Vec<Value> = vals.into_iter().filter(|v| !v.is_string()).collect();
                    if !strs.is_empty() {
                        out.raw
                            .push(Map::from_iter([("enum".to_owned(), Value::Array(strs))]));
                    }
                    if !rest.is_empty() {
                        out.json.push(serde_json::json!({ "enum": rest }));
                    }
                    Ok(())
                }
                // No type: any string (raw), or any other value the keywords allow.
                None if meaningful.iter().any(|k| string_keyword(k)) => {
                    Err("string keywords on a schema without `type`".into())
                }
                None => {
                    out.raw
                        .push(Map::from_iter([("type".to_owned(), Value::from("string"))]));
                    let mut json = o.clone();
                    json.insert(
                        "type".into(),
                        serde_json::json!(["number", "boolean", "null", "array", "object"]),
                    );
                    out.json.push(Value::Object(json));
                    Ok(())
                }
            }
        }
    }
}

impl<'a> StLower<'a> {
    /// A `json_schema` region in an XML style: the arguments, reported as a call.
    fn xml_args(
        &mut self,
        schema: &'a Value,
        style: XmlStyle,
        path: &str,
        begin: Option<&str>,
    ) -> Result<NodeId> {
        self.c.set_document(schema, Encoding::Json);
        let body = self.xml_body(schema, style, path)?;
        let ws = ws_node(&mut self.c)?;
        let body = self.seq(vec![body, ws])?;
        let fields = self.c.b.push(Node::Capture(Capture::Fields, body))?;
        self.functions.push(label(begin));
        let i = self.functions.len() as u32 - 1;
        self.c.b.push(Node::Capture(Capture::Call(i), fields))
    }

    /// One value as an XML style writes an argument's (the schema is not an object's): a string
    /// raw, holding none of the enclosing tag's end strings (`ends`), with whitespace around it
    /// where the schema constrains it (not in DeepSeek's styles); any other value as JSON with
    /// whitespace around it. Not a call: the enclosing tags name it.
    fn xml_value(
        &mut self,
        schema: &'a Value,
        style: XmlStyle,
        path: &str,
        ends: &[String],
    ) -> Result<NodeId> {
        self.c.set_document(schema, Encoding::Json);
        let mut kinds = XmlKinds::default();
        xml_kinds(schema, schema, 0, &mut kinds)
            .map_err(|reason| Self::xml_refuse(style, &format!("{path}/json_schema"), reason))?;
        let mut alts = Vec::new();
        for m in &kinds.raw {
            let d = self.c.cached(
                Lexeme::XmlValue {
                    ends: ends.to_vec(),
                    schema: Value::Object(m.clone()).to_string(),
                    strings: self.c.string_options_key(),
                },
                |c| {
                    let states = c.opts.max_lexeme_states;
                    let mut d = raw_string_content(c, m, path)?;
                    for e in ends.iter().filter(|e| !e.is_empty()) {
                        let bad =
                            c.b.regex(&format!("(?s:.)*{}(?s:.)*", regex_syntax::escape(e)), "")?;
                        d = d
                            .product(&bad, crate::grammar::dfa::Op::AndNot, states)
                            .map_err(|e| c.b.dfa_err(e, path, ""))?;
                    }
                    Ok(d)
                },
            )?;
            let v = self.c.lexeme(d)?;
            alts.push(self.raw_spacing(style, m, v)?);
        }
        for j in &kinds.json {
            let v = self.c.compile(j, path)?;
            let w1 = ws_node(&mut self.c)?;
            let w2 = ws_node(&mut self.c)?;
            alts.push(self.seq(vec![w1, v, w2])?);
        }
        self.c.enc = Encoding::Json;
        self.c.b.push(Node::Union(alts))
    }

    /// A raw string value `v` of string schema `m` as XGrammar spaces it: a constrained string
    /// (enum, pattern, lengths, format) may have whitespace around it, except in DeepSeek's
    /// styles; any other string is all value.
    fn raw_spacing(
        &mut self,
        style: XmlStyle,
        m: &Map<String, Value>,
        v: NodeId,
    ) -> Result<NodeId> {
        let constrained = m
            .keys()
            .any(|k| k != "type" && !crate::schema::is_annotation(k));
        if constrained && !style.split_by_string_attr() {
            let w1 = ws_node(&mut self.c)?;
            let w2 = ws_node(&mut self.c)?;
            self.seq(vec![w1, v, w2])
        } else {
            Ok(v)
        }
    }

    fn xml_refuse(style: XmlStyle, path: &str, reason: impl Into<String>) -> Error {
        let name = match style {
            XmlStyle::Qwen => "qwen_xml",
            XmlStyle::Minimax => "minimax_xml",
            XmlStyle::Glm => "glm_xml",
            XmlStyle::Deepseek => "deepseek_xml",
            XmlStyle::DeepseekV41 => "deepseek_v4_1_xml",
        };
        unsupported(format!("style: {name}"), path, &reason.into())
    }

    /// The arguments (without the trailing whitespace).
    fn xml_body(&mut self, schema: &'a Value, style: XmlStyle, path: &str) -> Result<NodeId> {
        let o = match schema {
            Value::Bool(false) => return self.c.b.push(Node::Never),
            Value::Bool(true) => return self.xml_generic(style),
            Value::Object(o) => o,
            _ => unreachable!("checked when read"),
        };
        if let Some(k) = o
            .keys()
            .find(|k| !xml_style_top_keyword(k) && !crate::schema::is_annotation(k))
        {
            return Err(Self::xml_refuse(
                style,
                path,
                format!("arguments written as tags take a plain object schema (properties, required), not `{k}`"),
            ));
        }
        match o.get("type") {
            None => {}
            Some(Value::String(t)) if t == "object" || t == "dict" => {}
            Some(_) => {
                return Err(Self::xml_refuse(
                    style,
                    path,
                    "the arguments schema must be of type object",
                ))
            }
        }
        let props: Vec<(&String, &'a Value)> = match o.get("properties") {
            None => Vec::new(),
            Some(Value::Object(p)) => p.iter().collect(),
            Some(_) => return Err(bad(path, "`properties` must be an object")),
        };
        let open = match o.get("additionalProperties") {
            None | Some(Value::Bool(true)) => true,
            Some(Value::Bool(false)) => false,
            Some(_) => {
                return Err(Self::xml_refuse(
                    style,
                    path,
                    "`additionalProperties` as a schema (callmask compiles true or false)",
                ))
            }
        };
        if open && props.is_empty() {
            return self.xml_generic(style);
        }
        if open {
            return Err(Self::xml_refuse(
                style,
                path,
                "extra arguments beside the listed ones (set additionalProperties to false)",
            ));
        }
        let required: Vec<&str> = match o.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err(bad(path, "`required` must be a list")),
        };
        if let Some(r) = required
            .iter()
            .find(|r| !props.iter().any(|(k, _)| k == *r))
        {
            // A required argument that cannot be written: nothing satisfies the schema.
            let _ = r;
            return self.c.b.push(Node::Never);
        }
        let mut fields = Vec::new();
        for (k, p) in &props {
            self.c.b.check_budget()?;
            let mut kinds = XmlKinds::default();
            xml_kinds(p, schema, 0, &mut kinds).map_err(|reason| {
                Self::xml_refuse(style, &format!("{path}/json_schema/properties/{k}"), reason)
            })?;
            let key = lit_node(&mut self.c, k.as_bytes())?;
            let key = self.c.b.push(Node::Capture(Capture::Key, key))?;
            fields.push(self.xml_field(style, key, &kinds, &format!("/properties/{k}"))?);
        }
        let req: Vec<bool> = props
            .iter()
            .map(|(k, _)| required.contains(&k.as_str()))
            .collect();
        if fields.len() <= XML_ANY_ORDER_MAX {
            let mut memo = std::collections::HashMap::new();
            self.field_sets(0, &fields, &req, &mut memo)
        } else {
            let mut items = Vec::new();
            for (f, r) in fields.iter().zip(&req) {
                items.push(if *r { *f } else { self.repeat(*f, 0, 1)? });
            }
            self.seq(items)
        }
    }

    /// Any arguments, each once or more, as XGrammar writes an open object: a name
    /// (`[a-zA-Z_][a-zA-Z0-9_]*`), then any value.
    fn xml_generic(&mut self, style: XmlStyle) -> Result<NodeId> {
        let key = regex_node(&mut self.c, "[a-zA-Z_][a-zA-Z0-9_]*")?;
        let key = self.c.b.push(Node::Capture(Capture::Key, key))?;
        let mut kinds = XmlKinds::default();
        xml_kinds(&Value::Bool(true), &Value::Null, 0, &mut kinds).map_err(|r| bad("", r))?;
        let field = self.xml_field(style, key, &kinds, "")?;
        self.repeat(field, 0, u32::MAX)
    }

    /// One argument: whitespace, its opening tag with `key`, the value, the closing tag.
    fn xml_field(
        &mut self,
        style: XmlStyle,
        key: NodeId,
        kinds: &XmlKinds,
        path: &str,
    ) -> Result<NodeId> {
        let close = style.close();
        let mut raws = Vec::new();
        for m in &kinds.raw {
            let l = raw_string_lexeme(&mut self.c, m, close, path)?;
            let v = self.c.b.push(Node::Capture(Capture::Value(true), l))?;
            raws.push(self.raw_spacing(style, m, v)?);
        }
        let json = if kinds.json.is_empty() {
            None
        } else {
            let mut alts = Vec::new();
            for j in &kinds.json {
                alts.push(self.c.compile(j, path)?);
            }
            let v = if alts.len() == 1 {
                alts[0]
            } else {
                self.c.b.push(Node::Union(alts))?
            };
            let v = self.c.b.push(Node::Capture(Capture::Value(false), v))?;
            let w1 = ws_node(&mut self.c)?;
            let w2 = ws_node(&mut self.c)?;
            Some(self.seq(vec![w1, v, w2])?)
        };
        let lead = ws_node(&mut self.c)?;
        let open = lit_node(&mut self.c, style.open().as_bytes())?;
        let close = lit_node(&mut self.c, close.as_bytes())?;
        let value = if style.split_by_string_attr() {
            let mut alts = Vec::new();
            if let Some(j) = json {
                let a = lit_node(&mut self.c, style.after_key(false).as_bytes())?;
                alts.push(self.seq(vec![a, j])?);
            }
            if !raws.is_empty() {
                let a = lit_node(&mut self.c, style.after_key(true).as_bytes())?;
                let r = if raws.len() == 1 {
                    raws[0]
                } else {
                    self.c.b.push(Node::Union(raws))?
                };
                alts.push(self.seq(vec![a, r])?);
            }
            self.c.b.push(Node::Union(alts))?
        } else {
            let after = lit_node(&mut self.c, style.after_key(true).as_bytes())?;
            let mut alts: Vec<NodeId> = json.into_iter().collect();
            alts.extend(raws);
            let v = self.c.b.push(Node::Union(alts))?;
            match style.value_open() {
                Some(vo) => {
                    let w = ws_node(&mut self.c)?;
                    let vo = lit_node(&mut self.c, vo.as_bytes())?;
                    self.seq(vec![after, w, vo, v])?
                }
                None => self.seq(vec![after, v])?,
            }
        };
        self.seq(vec![lead, open, key, value, close])
    }

    /// The arguments that may follow once those in `seen` (a bit set) are written: any order,
    /// each at most once, the required ones all there.
    fn field_sets(
        &mut self,
        seen: u32,
        fields: &[NodeId],
        req: &[bool],
        memo: &mut std::collections::HashMap<u32, NodeId>,
    ) -> Result<NodeId> {
        if let Some(&id) = memo.get(&seen) {
            return Ok(id);
        }
        let n = fields.len();
        let mut alts = Vec::new();
        if (0..n).all(|k| !req[k] || seen & (1 << k) != 0) {
            alts.push(self.seq(vec![])?);
        }
        for k in 0..n {
            if seen & (1 << k) == 0 {
                let rest = self.field_sets(seen | (1 << k), fields, req, memo)?;
                alts.push(self.seq(vec![fields[k], rest])?);
            }
        }
        let id = self.c.b.push(Node::Union(alts))?;
        memo.insert(seen, id);
        Ok(id)
    }
}
