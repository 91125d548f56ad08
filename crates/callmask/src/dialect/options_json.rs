//! How [`DialectOptions`] and [`CompileOptions`] read and write JSON: they are their own JSON
//! types (serde, one set of field names, no mirror), and this module holds what their fields
//! need beyond a derive, plus the two `from_json` entry points the bindings call.
//!
//! Every field is optional (a missing one keeps its default); an unknown field, or a value of
//! the wrong type, is an [`Error::InvalidOptions`] that names it, never ignored. A dialect's
//! options may hold the compile options beside its own fields (as the Python keyword arguments
//! and the engine specs do) or under `compile`.
//!
//! ```
//! use callmask::{DialectOptions, ToolChoice};
//! let o = DialectOptions::from_json(&serde_json::json!({
//!     "tool_choice": "required",
//!     "parallel_calls": false,
//!     "reasoning": {"start": "<think>", "end": "</think>"},
//!     "max_whitespace": 4
//! }))?;
//! assert_eq!(o.tool_choice, ToolChoice::Required);
//! assert_eq!(o.compile.max_whitespace, 4);
//! assert!(DialectOptions::from_json(&serde_json::json!({"tool_chioce": "auto"})).is_err());
//! # Ok::<(), callmask::Error>(())
//! ```

use super::{DialectOptions, Reasoning, ToolChoice};
use crate::error::{Error, Result};
use crate::schema::CompileOptions;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

fn invalid(e: serde_json::Error) -> Error {
    Error::InvalidOptions(e.to_string())
}

/// The names a struct's derived `Deserialize` reads (its fields and their aliases), as serde
/// hands them to `deserialize_struct`.
fn field_names<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    struct Fields<'a>(&'a mut &'static [&'static str]);
    impl<'de> Deserializer<'de> for Fields<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(
            self,
            _: V,
        ) -> std::result::Result<V::Value, Self::Error> {
            Err(de::Error::custom("only the field names are read"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> std::result::Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("only the field names are read"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
}

impl CompileOptions {
    /// Compile options from a JSON object of [`CompileOptions`]' fields (by their Rust names;
    /// `whitespace` is `"tidy"`, `"any"` or `{"tidy": {"indent": N}}`, `max_compile_time` a
    /// number of seconds); `null` is the defaults. Deprecated spellings still read:
    /// `max_compile_secs`, and `indent` beside `whitespace` (the tidy policy's indentation).
    /// [`Error::InvalidOptions`] names an unknown field or a value of the wrong type.
    pub fn from_json(value: &Value) -> Result<CompileOptions> {
        if value.is_null() {
            return Ok(CompileOptions::default());
        }
        let mut value = value.clone();
        if let Value::Object(map) = &mut value {
            fold_indent(map)?;
        }
        CompileOptions::deserialize(value).map_err(invalid)
    }
}

/// The deprecated `indent` field (the tidy policy's indentation, beside `whitespace`) folded
/// into `whitespace`.
fn fold_indent(map: &mut Map<String, Value>) -> Result<()> {
    let Some(indent) = map.remove("indent") else {
        return Ok(());
    };
    match map.get("whitespace") {
        None => {}
        Some(Value::String(s)) if s == "tidy" => {}
        Some(_) => {
            return Err(Error::InvalidOptions(
                "indent: only the tidy whitespace policy has an indentation (give \
                 {\"whitespace\": {\"tidy\": {\"indent\": N}}})"
                    .into(),
            ))
        }
    }
    map.insert(
        "whitespace".into(),
        serde_json::json!({"tidy": {"indent": indent}}),
    );
    Ok(())
}

impl DialectOptions {
    /// Dialect options from a JSON object of [`DialectOptions`]' fields (`null` is the
    /// defaults): `tool_choice` (see [`ToolChoice`]'s JSON), `parallel_calls` (or OpenAI's
    /// `parallel_tool_calls`), `reasoning`, `max_text_chars`, `strict_arguments`,
    /// `distinct_calls`, `name_first`, and the [`CompileOptions::from_json`] fields, either beside these or as
    /// an object under `compile` (not both).
    ///
    /// [`Error::InvalidOptions`] names an unknown field or a value of the wrong type.
    pub fn from_json(value: &Value) -> Result<DialectOptions> {
        let map = match value {
            Value::Null => return Ok(DialectOptions::default()),
            Value::Object(map) => map,
            other => {
                return Err(Error::InvalidOptions(format!(
                    "dialect options must be a JSON object, not {other}"
                )))
            }
        };
        let own = field_names::<DialectOptions>();
        let mut dialect = Map::new();
        let mut compile = Map::new();
        for (k, v) in map {
            if own.contains(&k.as_str()) {
                dialect.insert(k.clone(), v.clone());
            } else {
                compile.insert(k.clone(), v.clone());
            }
        }
        if !compile.is_empty() {
            if dialect.contains_key("compile") {
                let keys: Vec<&String> = compile.keys().collect();
                return Err(Error::InvalidOptions(format!(
                    "{keys:?}: give the compile options beside the dialect's or under `compile`, \
                     not both (or an unknown field)"
                )));
            }
            dialect.insert("compile".into(), Value::Object(compile));
        }
        let compile = dialect.remove("compile");
        let mut o = DialectOptions::deserialize(Value::Object(dialect)).map_err(invalid)?;
        if let Some(c) = compile {
            o.compile = CompileOptions::from_json(&c)?;
        }
        Ok(o)
    }
}

/// [`ToolChoice`] in JSON: `"auto"`, `"required"`, `"none"`, a function name, or OpenAI's
/// `{"type": "function", "function": {"name": ...}}` (written that way for a function).
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum ToolChoiceJson {
    Name(String),
    Function {
        #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        function: FunctionName,
    },
}

#[derive(Serialize, Deserialize)]
struct FunctionName {
    name: String,
}

impl Serialize for ToolChoice {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            ToolChoice::Auto => s.serialize_str("auto"),
            ToolChoice::Required => s.serialize_str("required"),
            ToolChoice::None => s.serialize_str("none"),
            ToolChoice::Function(name) => ToolChoiceJson::Function {
                kind: Some("function".into()),
                function: FunctionName { name: name.clone() },
            }
            .serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let json = ToolChoiceJson::deserialize(d).map_err(|_| {
            de::Error::custom(
                "tool_choice: expected \"auto\", \"required\", \"none\", a function name or \
                 {\"type\": \"function\", \"function\": {\"name\": ...}}",
            )
        })?;
        let name = match json {
            ToolChoiceJson::Name(s) => return s.parse().map_err(de::Error::custom),
            ToolChoiceJson::Function { kind, function } => {
                if kind.is_some_and(|k| k != "function") {
                    return Err(de::Error::custom(
                        "tool_choice: `type` must be \"function\"",
                    ));
                }
                function.name
            }
        };
        if name.is_empty() {
            return Err(de::Error::custom("tool_choice: empty function name"));
        }
        Ok(ToolChoice::Function(name))
    }
}

/// [`DialectOptions::reasoning`] in JSON.
pub(super) mod reasoning {
    use super::*;

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ReasoningJson {
        On(bool),
        Markers { start: String, end: String },
        Pair(String, String),
    }

    pub(crate) fn serialize<S: Serializer>(
        r: &Option<Reasoning>,
        s: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        match r {
            None => s.serialize_bool(false),
            Some(r) => serde_json::json!({"start": r.start, "end": r.end}).serialize(s),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> std::result::Result<Option<Reasoning>, D::Error> {
        let json = Option::<ReasoningJson>::deserialize(d).map_err(|_| {
            de::Error::custom(
                "reasoning: expected true, false, null, {\"start\": ..., \"end\": ...} or \
                 [start, end]",
            )
        })?;
        let (start, end) = match json {
            None | Some(ReasoningJson::On(false)) => return Ok(None),
            Some(ReasoningJson::On(true)) => return Ok(Some(Reasoning::default())),
            Some(ReasoningJson::Markers { start, end } | ReasoningJson::Pair(start, end)) => {
                (start, end)
            }
        };
        if start.is_empty() || end.is_empty() {
            return Err(de::Error::custom(
                "reasoning: the start and end markers must not be empty",
            ));
        }
        Ok(Some(Reasoning { start, end }))
    }
}

#[cfg(test)]
mod unit {
    use super::*;
    use crate::grammar::Whitespace;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn fields_and_defaults() {
        let d = DialectOptions::from_json(&Value::Null).unwrap();
        assert_eq!(d.tool_choice, ToolChoice::Auto);
        assert!(d.parallel_calls && d.reasoning.is_none());
        let o = DialectOptions::from_json(&json!({
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "parallel_tool_calls": false,
            "reasoning": true,
            "max_text_chars": 100,
            "compile": {"lenient": true, "max_compile_secs": 0.5, "max_depth": 3}
        }))
        .unwrap();
        assert_eq!(o.tool_choice, ToolChoice::Function("f".into()));
        assert!(!o.parallel_calls);
        assert_eq!(o.reasoning, Some(Reasoning::default()));
        assert_eq!(o.max_text_chars, Some(100));
        assert!(o.compile.lenient);
        assert_eq!(o.compile.max_depth, 3);
        assert_eq!(o.compile.max_compile_time, Duration::from_millis(500));
    }

    #[test]
    fn compile_fields_beside_the_dialects() {
        let o = DialectOptions::from_json(&json!({
            "tool_choice": "none",
            "lenient": true,
            "max_compile_time": 2.5,
            "whitespace": {"tidy": {"indent": 2}},
            "reasoning": ["<r>", "</r>"],
            "ijson_numbers": false
        }))
        .unwrap();
        assert_eq!(o.tool_choice, ToolChoice::None);
        assert!(o.compile.lenient && !o.compile.ijson_numbers);
        assert_eq!(o.compile.max_compile_time, Duration::from_millis(2500));
        assert_eq!(o.compile.whitespace, Whitespace::Tidy { indent: 2 });
        assert_eq!(o.reasoning.unwrap().end, "</r>");
        let c = CompileOptions::from_json(&json!({"indent": 3})).unwrap();
        assert_eq!(c.whitespace, Whitespace::Tidy { indent: 3 });
        let c = CompileOptions::from_json(&json!({"whitespace": "any"})).unwrap();
        assert_eq!(c.whitespace, Whitespace::Any);
    }

    #[test]
    fn json_round_trip() {
        let o = DialectOptions::from_json(&json!({
            "tool_choice": "get_weather",
            "parallel_calls": false,
            "reasoning": {"start": "<a>", "end": "</a>"},
            "max_text_chars": 7,
            "distinct_calls": false,
            "whitespace": "any",
            "max_compile_time": 0.25,
            "max_memory": 12345
        }))
        .unwrap();
        let text = serde_json::to_value(&o).unwrap();
        let back = DialectOptions::from_json(&text).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), text);
        assert_eq!(back.tool_choice, ToolChoice::Function("get_weather".into()));
        assert_eq!(back.compile.whitespace, Whitespace::Any);
        assert_eq!(back.compile.max_memory, 12345);
        assert_eq!(back.compile.max_compile_time, Duration::from_millis(250));
        let d = serde_json::to_value(DialectOptions::default()).unwrap();
        assert_eq!(d["tool_choice"], "auto");
        assert_eq!(d["compile"]["whitespace"], json!({"tidy": {"indent": 4}}));
    }

    #[test]
    fn typed_errors() {
        for bad in [
            json!({"tool_choise": "auto"}),
            json!({"compile": {"max_dept": 3}}),
            json!({"max_dept": 3}),
            json!({"parallel_calls": "yes"}),
            json!({"tool_choice": ""}),
            json!({"tool_choice": 3}),
            json!({"tool_choice": {"type": "tool", "function": {"name": "f"}}}),
            json!({"reasoning": {"start": "", "end": "x"}}),
            json!({"reasoning": "yes"}),
            json!({"parallel_calls": true, "parallel_tool_calls": false}),
            json!({"compile": {"max_compile_secs": -1.0}}),
            json!({"max_compile_time": -1.0}),
            json!({"whitespace": "loose"}),
            json!({"whitespace": "any", "indent": 2}),
            json!({"lenient": true, "compile": {}}),
            json!([1]),
        ] {
            let e = DialectOptions::from_json(&bad).unwrap_err();
            assert!(matches!(e, Error::InvalidOptions(_)), "{bad}: {e}");
        }
        let e = DialectOptions::from_json(&json!({"tool_choise": "auto"})).unwrap_err();
        assert!(e.to_string().contains("tool_choise"), "{e}");
        let e = CompileOptions::from_json(&json!({"max_dept": 3})).unwrap_err();
        assert!(e.to_string().contains("max_dept"), "{e}");
    }
}
