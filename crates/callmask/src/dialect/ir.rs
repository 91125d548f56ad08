//! The one intermediate form of a tool-call format: [`Expr`], a tree of rules that both front
//! ends produce and one lowerer (`lower.rs`) turns into a grammar. Dialect files are read into it
//! by `syntax.rs`; XGrammar's structural tags by `structural.rs` (the variants after
//! [`Expr::XmlArgs`]: inline schemas, tags, triggered and dispatched forms, token sets).
//!
//! The two front ends mean the same by a literal, a regex, a special token, a sequence, a
//! choice, a repetition and free text. Calls differ: a dialect file writes one call per function
//! of the tool set (`@call(...)` and the call builtins); a structural tag names its calls itself
//! (each [`Expr::Schema`] region of an object schema is one).

use crate::error::Error;
use crate::schema::Encoding;
use serde_json::Value;

/// A dialect expression.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Expr {
    Lit(Vec<u8>),
    Regex(String),
    Special(String),
    Rule(String),
    Seq(Vec<Expr>),
    Alt(Vec<Expr>),
    Repeat(Box<Expr>, u32, u32),
    Text(Vec<String>),
    TextMatching(String),
    /// Reasoning text up to (not holding) any of the markers.
    Reasoning(Vec<String>),
    /// The vocabulary's special token of this text where it has one, else the text.
    Marker(String),
    Ws,
    JsonCall {
        name_key: String,
        args_key: String,
        enc: Encoding,
        /// `args="either"`: the arguments as a JSON object or as a JSON string holding one
        /// (`enc` is then [`Encoding::Json`]).
        either: bool,
        /// An extra `"key": "id"` entry whose string content matches the regex.
        id: Option<(String, String)>,
        /// The keys in any order (`keys="any"`); by default the name key comes first, as
        /// the models' templates write it.
        any_order: bool,
        /// `lines="one"`: the call's JSON on one line (its whitespace spaces only), for the
        /// formats whose parsers read one call per line (MiniMax-M1's `<tool_calls>`).
        one_line: bool,
    },
    /// `@python_call`; `true` with `literals=both`: values may also spell `true`, `false` and
    /// `null` as JSON does.
    PythonCall(bool),
    ParenCall,
    /// `@call(expr)`: one call per function, `expr` written with that function's `@name` and
    /// `@args...`; `@call(expr, names="regex")`: only for the functions whose name matches.
    Call(Box<Expr>, Option<String>),
    /// `@call_id(expr)`: the call's own id, as the model writes it (inside `@call`); the parser
    /// returns the text `expr` matched as the call's id.
    CallId(Box<Expr>),
    /// The function's name, as is (inside `@call`).
    Name,
    /// The function's name as a JSON string (inside `@call`).
    NameJson,
    /// The function's arguments in this encoding (inside `@call`).
    Args(Encoding),
    /// The function's arguments as the raw text of their one string argument, the one named
    /// here (inside `@call`): `@args(as=raw, key="code")`.
    RawArgs(String),
    /// The function's arguments as tagged fields (inside `@call`): per argument
    /// `key_prefix KEY key_suffix VALUE value_suffix`; see [`XmlArgs`].
    XmlArgs(Box<XmlArgs>),
    /// A JSON value of an inline schema (structural tags' `json_schema`): reported as a call
    /// where the schema is an object's, named by the enclosing tag's begin.
    Schema(Box<SchemaRegion>),
    /// Free text holding none of the excluded strings (nor the enclosing tags' end strings), at
    /// most `max_chars` characters (structural tags' `any_text`).
    AnyText {
        excludes: Vec<String>,
        max_chars: Option<u32>,
    },
    /// Where a structural tag's format object stands (a JSON pointer), for the errors of what
    /// is inside.
    At(String, Box<Expr>),
    /// `begin content end`; free text inside stops at the end strings.
    Tag(Box<Tag>),
    /// Free text with tags, each opened by a text trigger (structural tags' `triggered_tags`).
    Triggered(Box<Triggered<String>>),
    /// Tags joined by a separator (structural tags' `tags_with_separator`).
    Separated {
        tags: Vec<Tag>,
        separator: String,
        at_least_one: bool,
        stop_after_first: bool,
    },
    /// Free text with forms, each opened by its pattern (structural tags' `dispatch`).
    Dispatch(Box<Dispatch<String>>),
    /// One special token (structural tags' `token`).
    Token(TokenRef),
    /// Any tokens but these special tokens (structural tags' `any_tokens`).
    AnyTokens(Vec<TokenRef>),
    /// `exclude_token`: exactly one token but these; compiled only directly before
    /// `any_tokens` (see [`Expr::SomeTokens`]), refused elsewhere.
    ExcludeToken(Vec<TokenRef>),
    /// `exclude_token` then `any_tokens` in a sequence: one token or more, the first not in
    /// `first`, the others not in `rest`. Exact at the token level: the first token is a special
    /// token not excluded, or an ordinary one, which starts a non-empty run of text.
    SomeTokens {
        first: Vec<TokenRef>,
        rest: Vec<TokenRef>,
    },
    /// Any tokens with tags, each opened by a trigger token (`token_triggered_tags`).
    TokenTriggered(Box<Triggered<TokenRef>>),
    /// Any tokens with forms, each opened by its token (`token_dispatch`).
    TokenDispatch(Box<Dispatch<TokenRef>>),
}

/// One piece of an `@xml_args` affix: literal bytes, a special token, a marker (the special
/// token where the vocabulary has one, else its text), or whitespace as the grammar's policy
/// allows it (XGrammar's XML styles).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Affix {
    Lit(Vec<u8>),
    Special(String),
    Marker(String),
    Ws,
}

/// The text an affix spells (special tokens and markers by their text).
pub(super) fn affix_text(a: &[Affix]) -> Vec<u8> {
    let mut out = Vec::new();
    for x in a {
        match x {
            Affix::Lit(b) => out.extend_from_slice(b),
            Affix::Special(s) | Affix::Marker(s) => out.extend_from_slice(s.as_bytes()),
            Affix::Ws => {}
        }
    }
    out
}

/// How `@xml_args` tells a raw string value from a JSON one.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum XmlTyping {
    /// By the schema: raw where the property admits only strings, else JSON (one `key_suffix`).
    BySchema,
    /// By the suffix after the key: one suffix per group of JSON types (`json_key_suffix`, or
    /// `types=(...)` with `{type}` in `key_suffix`); the group holding `string` is raw text.
    Tagged(Vec<TypeGroup>),
}

/// The JSON types whose values follow `suffix` (raw text for `string`, alone in its group;
/// JSON otherwise).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct TypeGroup {
    pub(super) types: Vec<&'static str>,
    pub(super) suffix: Vec<Affix>,
}

impl TypeGroup {
    pub(super) fn raw(&self) -> bool {
        self.types == ["string"]
    }
}

/// The JSON types, as `types=(...)` names them.
pub(super) const JSON_TYPES: [&str; 7] = [
    "string", "integer", "number", "boolean", "null", "object", "array",
];

/// `@xml_args(...)`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct XmlArgs {
    pub(super) key_prefix: Vec<Affix>,
    pub(super) key_suffix: Vec<Affix>,
    pub(super) value_suffix: Vec<Affix>,
    pub(super) typing: XmlTyping,
    /// Texts a raw value may not hold besides its suffix and the key prefix (`value_without`).
    pub(super) value_without: Vec<String>,
    /// Text that may come before each field (`sep`, may be empty).
    pub(super) sep: Vec<u8>,
    /// Text that may come right after the key suffix and right before the value suffix, not
    /// part of the value (`pad`, may be empty): a raw value then may not start or end with it,
    /// so each output has one reading.
    pub(super) pad: Vec<u8>,
    /// Whether whitespace (`@ws`) may come around a JSON-typed value (`json_ws=any`), as
    /// parsers that strip such values before reading them accept it (vLLM's and SGLang's
    /// Step3); a raw value keeps its whitespace.
    pub(super) json_ws: bool,
    /// Whose conventions the arguments follow.
    pub(super) reading: XmlReading,
}

/// Whose conventions tagged arguments follow where the peers' parsers differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum XmlReading {
    /// A dialect file's: a raw value holds neither the key prefix nor a special token's text,
    /// argument names are plain, a required argument that is not listed is an error, and
    /// `additionalProperties` is not read (only the listed arguments are written).
    Strict,
    /// XGrammar's XML styles: a raw value stops only at its closing tag, any argument name, an
    /// open object takes any arguments (a listed one beside them is refused), a required
    /// argument not listed allows nothing; whitespace around JSON values and, where `ws_raw`,
    /// around raw values whose schema constrains them (not in DeepSeek's styles).
    XGrammar { ws_raw: bool },
}

/// A token named by a token-level form: by id or by text, with where it was named.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct TokenRef {
    pub(super) id: std::result::Result<u64, String>,
    pub(super) path: String,
}

impl TokenRef {
    /// The token as an error names it.
    pub(super) fn describe(&self) -> String {
        match &self.id {
            Ok(n) => format!("token id {n}"),
            Err(t) => format!("token {t:?}"),
        }
    }

    /// Its text where named by text, else its description.
    pub(super) fn label(&self) -> String {
        match &self.id {
            Err(s) => s.clone(),
            Ok(_) => self.describe(),
        }
    }
}

/// Where a tag's begin or end is: text, or one special token.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Delim {
    Text(String),
    Token(TokenRef),
}

/// `begin content end` (a structural tag's `tag`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tag {
    pub(super) begin: Delim,
    pub(super) content: Expr,
    /// End strings (any of them), or one token.
    pub(super) end: std::result::Result<Vec<String>, TokenRef>,
    pub(super) path: String,
}

impl Tag {
    /// The begin's text (a token's text, or its description where named by id): names the
    /// calls inside.
    pub(super) fn begin_text(&self) -> String {
        match &self.begin {
            Delim::Text(s) => s.clone(),
            Delim::Token(r) => r.label(),
        }
    }
}

/// Free text (or tokens) with tags opened by triggers `T` (text, or tokens).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Triggered<T> {
    pub(super) triggers: Vec<T>,
    pub(super) tags: Vec<Tag>,
    pub(super) at_least_one: bool,
    pub(super) stop_after_first: bool,
    pub(super) excludes: Vec<T>,
}

/// Free text (or tokens) with forms opened by patterns `T` (text, or tokens); `looping`: any
/// number of them, else at most one.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Dispatch<T> {
    pub(super) rules: Vec<(T, Expr)>,
    pub(super) looping: bool,
    pub(super) excludes: Vec<T>,
}

/// An inline JSON schema's region ([`Expr::Schema`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SchemaRegion {
    pub(super) schema: Value,
    /// The region's `max_whitespace_cnt`.
    pub(super) max_ws: Option<u16>,
    /// `None`: JSON; else the XML style that writes the arguments as tags.
    pub(super) xml: Option<XmlStyle>,
    pub(super) path: String,
}

/// XGrammar's XML styles of `json_schema`: how one argument is written. A string value is
/// written raw (up to the closing tag), any other value as JSON with whitespace around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum XmlStyle {
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
    pub(super) fn from_name(s: &str) -> Option<XmlStyle> {
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
    pub(super) fn open(self) -> &'static str {
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
    pub(super) fn after_key(self, raw: bool) -> &'static str {
        match (self, raw) {
            (XmlStyle::Qwen, _) => ">",
            (XmlStyle::Minimax, _) => "\">",
            (XmlStyle::Glm, _) => "</arg_key>",
            (XmlStyle::Deepseek | XmlStyle::DeepseekV41, true) => "\" string=\"true\">",
            (XmlStyle::Deepseek | XmlStyle::DeepseekV41, false) => "\" string=\"false\">",
        }
    }

    /// GLM's second tag, after whitespace, before the value.
    pub(super) fn value_open(self) -> Option<&'static str> {
        (self == XmlStyle::Glm).then_some("<arg_value>")
    }

    /// The value's closing tag.
    pub(super) fn close(self) -> &'static str {
        match self {
            XmlStyle::Qwen | XmlStyle::Minimax => "</parameter>",
            XmlStyle::Glm => "</arg_value>",
            XmlStyle::Deepseek => "</\u{ff5c}DSML\u{ff5c}parameter>",
            XmlStyle::DeepseekV41 => "</\u{ff5c}DSML\u{ff5c} parameter>",
        }
    }

    pub(super) fn split_by_string_attr(self) -> bool {
        matches!(self, XmlStyle::Deepseek | XmlStyle::DeepseekV41)
    }

    /// The style's name in a structural tag.
    pub(super) fn name(self) -> &'static str {
        match self {
            XmlStyle::Qwen => "qwen_xml",
            XmlStyle::Minimax => "minimax_xml",
            XmlStyle::Glm => "glm_xml",
            XmlStyle::Deepseek => "deepseek_xml",
            XmlStyle::DeepseekV41 => "deepseek_v4_1_xml",
        }
    }

    /// The style as tagged arguments: whitespace then the opening tag before each key; after
    /// the key one suffix for raw strings and one for JSON values (the same but in DeepSeek's
    /// styles; GLM's second tag after whitespace); the closing tag after the value.
    pub(super) fn args(self) -> XmlArgs {
        let suffix = |raw: bool| {
            let mut a = vec![Affix::Lit(self.after_key(raw).as_bytes().to_vec())];
            if let Some(vo) = self.value_open() {
                a.extend([Affix::Ws, Affix::Lit(vo.as_bytes().to_vec())]);
            }
            a
        };
        let json_types = JSON_TYPES.iter().copied().filter(|t| *t != "string");
        XmlArgs {
            key_prefix: vec![Affix::Ws, Affix::Lit(self.open().as_bytes().to_vec())],
            key_suffix: Vec::new(),
            value_suffix: vec![Affix::Lit(self.close().as_bytes().to_vec())],
            // JSON first: where a value reads both ways (`null` of `["string", "null"]`), the
            // parser takes the first, as XGrammar's parsers read it.
            typing: XmlTyping::Tagged(vec![
                TypeGroup {
                    types: json_types.collect(),
                    suffix: suffix(false),
                },
                TypeGroup {
                    types: vec!["string"],
                    suffix: suffix(true),
                },
            ]),
            value_without: Vec::new(),
            sep: Vec::new(),
            pad: Vec::new(),
            json_ws: true,
            reading: XmlReading::XGrammar {
                ws_raw: !self.split_by_string_attr(),
            },
        }
    }
}

impl SchemaRegion {
    /// Whether the parser reports the region as a call: an object schema, or, in an XML style,
    /// an argument list (see [`Self::is_arguments`]).
    pub(super) fn is_call(&self) -> bool {
        (self.xml.is_some() && self.is_arguments()) || is_object_schema(&self.schema)
    }

    /// In an XML style: the schema is an object's (`true`, no `type`, or `type` object), so
    /// the region holds the arguments as tags; any other (SGLang's Kimi K3 tags give one
    /// argument's schema) holds one value as the style writes an argument's.
    pub(super) fn is_arguments(&self) -> bool {
        match self.schema.get("type") {
            None => true,
            Some(Value::String(t)) => t == "object" || t == "dict",
            Some(_) => false,
        }
    }
}

/// Whether a JSON region of `schema` is reported as a call: the schema says its value is an
/// object.
pub(super) fn is_object_schema(schema: &Value) -> bool {
    matches!(
        schema.get("type").and_then(Value::as_str),
        Some("object" | "dict")
    )
}

impl Expr {
    /// Calls `f` on each inline schema region, with the begin of the nearest enclosing tag (or
    /// dispatch pattern) that names its call.
    pub(super) fn for_each_region(
        &self,
        begin: Option<&str>,
        f: &mut dyn FnMut(&SchemaRegion, Option<&str>),
    ) {
        let tags = |tags: &[Tag], f: &mut dyn FnMut(&SchemaRegion, Option<&str>)| {
            for t in tags {
                t.content.for_each_region(Some(&t.begin_text()), f);
            }
        };
        match self {
            Expr::Schema(r) => f(r, begin),
            Expr::Seq(v) | Expr::Alt(v) => v.iter().for_each(|x| x.for_each_region(begin, f)),
            Expr::Repeat(x, ..) | Expr::At(_, x) => x.for_each_region(begin, f),
            Expr::Tag(t) => tags(std::slice::from_ref(t), f),
            Expr::Triggered(t) => tags(&t.tags, f),
            Expr::TokenTriggered(t) => tags(&t.tags, f),
            Expr::Separated { tags: ts, .. } => tags(ts, f),
            Expr::Dispatch(d) => d
                .rules
                .iter()
                .for_each(|(p, x)| x.for_each_region(Some(p), f)),
            Expr::TokenDispatch(d) => d
                .rules
                .iter()
                .for_each(|(t, x)| x.for_each_region(Some(&t.label()), f)),
            _ => {}
        }
    }
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

/// The name of the call a schema region holds, from the begin of its enclosing tag.
pub(super) fn call_label(tag_begin: Option<&str>) -> String {
    match tag_begin {
        Some(b) => name_in(b).unwrap_or_else(|| b.trim().to_owned()),
        None => "json_schema".to_owned(),
    }
}

/// A malformed structural tag, at a JSON pointer.
pub(super) fn bad(path: &str, message: impl Into<String>) -> Error {
    Error::StructuralTag {
        path: pointer(path),
        message: message.into(),
    }
}

/// A structural tag form callmask does not compile, at a JSON pointer.
pub(super) fn unsupported(format: impl Into<String>, path: &str, reason: &str) -> Error {
    Error::UnsupportedFormat {
        format: format.into(),
        path: pointer(path),
        reason: reason.into(),
    }
}

/// `path` as an error names it (`#` for the root).
pub(super) fn pointer(path: &str) -> String {
    format!("#{path}")
}
