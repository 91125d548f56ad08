//! [`DialectOptions`] and [`CompileOptions`] from JSON, for the bindings (C, Python) that take
//! options as one JSON object instead of Rust structs.
//!
//! Every field is optional (a missing one keeps its default); an unknown field, or a value of
//! the wrong type, is an [`Error::InvalidOptions`] that names it, never ignored.
//!
//! ```
//! use callmask::{DialectOptions, ToolChoice};
//! let o = DialectOptions::from_json(&serde_json::json!({
//!     "tool_choice": "required",
//!     "parallel_calls": false,
//!     "reasoning": {"start": "<think>", "end": "</think>"},
//!     "compile": {"max_whitespace": 4}
//! }))?;
//! assert_eq!(o.tool_choice, ToolChoice::Required);
//! assert_eq!(o.compile.max_whitespace, 4);
//! assert!(DialectOptions::from_json(&serde_json::json!({"tool_chioce": "auto"})).is_err());
//! # Ok::<(), callmask::Error>(())
//! ```

use super::{DialectOptions, Reasoning, ToolChoice};
use crate::error::{Error, Result};
use crate::grammar::Whitespace;
use crate::schema::CompileOptions;
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

/// The JSON shape of [`DialectOptions`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DialectJson {
    tool_choice: Option<ToolChoiceJson>,
    parallel_calls: Option<bool>,
    /// OpenAI's request field name for `parallel_calls`.
    parallel_tool_calls: Option<bool>,
    reasoning: Option<ReasoningJson>,
    max_text_chars: Option<u32>,
    strict_arguments: Option<bool>,
    distinct_calls: Option<bool>,
    compile: Option<CompileJson>,
}

/// `"auto"`, `"required"`, `"none"`, a function name, or OpenAI's
/// `{"type": "function", "function": {"name": ...}}`.
#[derive(Deserialize)]
#[serde(untagged)]
enum ToolChoiceJson {
    Name(String),
    Function { function: FunctionName },
}

#[derive(Deserialize)]
struct FunctionName {
    name: String,
}

/// `true` (the default `<think>`/`</think>` markers), `false`, or the markers.
#[derive(Deserialize)]
#[serde(untagged)]
enum ReasoningJson {
    On(bool),
    Markers { start: String, end: String },
}

/// The JSON shape of [`CompileOptions`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompileJson {
    lenient: Option<bool>,
    max_whitespace: Option<u16>,
    /// `"tidy"` (the default) or `"any"`.
    whitespace: Option<WhitespaceJson>,
    /// The tidy policy's indentation per level (default 4).
    indent: Option<u16>,
    max_depth: Option<u32>,
    max_schema_depth: Option<usize>,
    max_lexeme_states: Option<usize>,
    max_total_states: Option<usize>,
    max_nodes: Option<usize>,
    max_compile_secs: Option<f64>,
    max_schema_values: Option<usize>,
    max_memory: Option<usize>,
    format_annotation: Option<bool>,
    ijson_numbers: Option<bool>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum WhitespaceJson {
    Tidy,
    Any,
}

fn invalid(e: serde_json::Error) -> Error {
    Error::InvalidOptions(e.to_string())
}

impl CompileJson {
    fn apply(self, o: &mut CompileOptions) -> Result<()> {
        macro_rules! set {
            ($($f:ident),*) => { $(if let Some(v) = self.$f { o.$f = v; })* };
        }
        set!(
            lenient,
            max_whitespace,
            max_depth,
            max_schema_depth,
            max_lexeme_states,
            max_total_states,
            max_nodes,
            max_schema_values,
            max_memory,
            format_annotation,
            ijson_numbers
        );
        match (self.whitespace, self.indent) {
            (Some(WhitespaceJson::Any), Some(_)) => {
                return Err(Error::InvalidOptions(
                    "indent: only the tidy whitespace policy has an indentation".into(),
                ))
            }
            (Some(WhitespaceJson::Any), None) => o.whitespace = Whitespace::Any,
            (_, Some(indent)) => o.whitespace = Whitespace::Tidy { indent },
            (Some(WhitespaceJson::Tidy), None) => o.whitespace = Whitespace::default(),
            (None, None) => {}
        }
        if let Some(s) = self.max_compile_secs {
            o.max_compile_time = Duration::try_from_secs_f64(s).map_err(|_| {
                Error::InvalidOptions(format!(
                    "max_compile_secs: {s} is not a non-negative number of seconds"
                ))
            })?;
        }
        Ok(())
    }
}

impl CompileOptions {
    /// Compile options from a JSON object with any of the fields `lenient`, `max_whitespace`,
    /// `whitespace` (`"tidy"` or `"any"`, see [`Whitespace`]), `indent` (the tidy policy's
    /// indentation per level),
    /// `max_depth`, `max_schema_depth`, `max_lexeme_states`, `max_total_states`, `max_nodes`,
    /// `max_compile_secs` (seconds, may be fractional), `max_schema_values`, `max_memory`
    /// (bytes), `format_annotation` (see [`CompileOptions::format_annotation`]),
    /// `ijson_numbers` (see [`CompileOptions::ijson_numbers`]); `null` is the
    /// defaults. [`Error::InvalidOptions`] names an unknown field or a
    /// value of the wrong type.
    pub fn from_json(value: &Value) -> Result<CompileOptions> {
        let mut o = CompileOptions::default();
        if !value.is_null() {
            CompileJson::deserialize(value)
                .map_err(invalid)?
                .apply(&mut o)?;
        }
        Ok(o)
    }
}

impl DialectOptions {
    /// Dialect options from a JSON object (`null` is the defaults):
    /// - `tool_choice`: `"auto"`, `"required"`, `"none"`, a function name, or OpenAI's
    ///   `{"type": "function", "function": {"name": "..."}}`;
    /// - `parallel_calls` (or OpenAI's `parallel_tool_calls`): `false` for exactly one call;
    /// - `reasoning`: `true` (markers `<think>`/`</think>`), `false`/`null`, or
    ///   `{"start": "...", "end": "..."}`;
    /// - `max_text_chars`: most characters per stretch of free text, or `null`;
    /// - `strict_arguments`: `false` to allow undeclared argument keys where a tool's schema does
    ///   not say (see [`DialectOptions::strict_arguments`]);
    /// - `distinct_calls`: `false` to let a call repeat an earlier one (see
    ///   [`DialectOptions::distinct_calls`]);
    /// - `compile`: the [`CompileOptions::from_json`] object.
    ///
    /// [`Error::InvalidOptions`] names an unknown field or a value of the wrong type.
    pub fn from_json(value: &Value) -> Result<DialectOptions> {
        let mut o = DialectOptions::default();
        if value.is_null() {
            return Ok(o);
        }
        let j = DialectJson::deserialize(value).map_err(invalid)?;
        if let Some(tc) = j.tool_choice {
            o.tool_choice = match tc {
                ToolChoiceJson::Name(s) if s.is_empty() => {
                    return Err(Error::InvalidOptions("tool_choice: empty".into()))
                }
                ToolChoiceJson::Name(s) => s.parse::<ToolChoice>()?,
                ToolChoiceJson::Function { function } => ToolChoice::Function(function.name),
            };
        }
        match (j.parallel_calls, j.parallel_tool_calls) {
            (Some(a), Some(b)) if a != b => {
                return Err(Error::InvalidOptions(
                    "parallel_calls and parallel_tool_calls disagree".into(),
                ))
            }
            (Some(p), _) | (None, Some(p)) => o.parallel_calls = p,
            (None, None) => {}
        }
        o.reasoning = match j.reasoning {
            None | Some(ReasoningJson::On(false)) => None,
            Some(ReasoningJson::On(true)) => Some(Reasoning::default()),
            Some(ReasoningJson::Markers { start, end }) => {
                if start.is_empty() || end.is_empty() {
                    return Err(Error::InvalidOptions(
                        "reasoning: the start and end markers must not be empty".into(),
                    ));
                }
                Some(Reasoning { start, end })
            }
        };
        o.max_text_chars = j.max_text_chars;
        if let Some(strict) = j.strict_arguments {
            o.strict_arguments = strict;
        }
        if let Some(distinct) = j.distinct_calls {
            o.distinct_calls = distinct;
        }
        if let Some(c) = j.compile {
            c.apply(&mut o.compile)?;
        }
        Ok(o)
    }
}

#[cfg(test)]
mod unit {
    use super::*;
    use serde_json::json;

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
    fn typed_errors() {
        for bad in [
            json!({"tool_choise": "auto"}),
            json!({"compile": {"max_dept": 3}}),
            json!({"parallel_calls": "yes"}),
            json!({"tool_choice": ""}),
            json!({"tool_choice": 3}),
            json!({"reasoning": {"start": "", "end": "x"}}),
            json!({"parallel_calls": true, "parallel_tool_calls": false}),
            json!({"compile": {"max_compile_secs": -1.0}}),
            json!([1]),
        ] {
            let e = DialectOptions::from_json(&bad).unwrap_err();
            assert!(
                matches!(e, Error::InvalidOptions(_) | Error::InvalidTools(_)),
                "{bad}: {e}"
            );
        }
        let e = DialectOptions::from_json(&json!({"tool_choise": "auto"})).unwrap_err();
        assert!(e.to_string().contains("tool_choise"), "{e}");
    }
}
