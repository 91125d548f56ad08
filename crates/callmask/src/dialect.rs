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

mod ir;
mod lower;
mod structural;
mod syntax;

use crate::formats as registry;
pub use crate::formats::{DialectSpec, RefusedSpec};

pub use structural::{StructuralTag, StructuralTagOptions};

use crate::error::{Error, Result};
use crate::grammar::{Capture, DistinctCalls, Grammar, Node, NodeId};
use crate::python::is_identifier;
use crate::schema::{CompileOptions, Compiler, Encoding};
use crate::tools::Tools;
use ir::Expr;
use lower::lower;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use syntax::parse_rules;

/// How [`DialectOptions`] and [`CompileOptions`] read and write JSON.
mod options_json;

/// Most bytes of a dialect file (they are small).
const MAX_FILE_BYTES: usize = 1 << 20;
/// Deepest nesting of a dialect file's expressions, and of a structural tag's format objects.
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

crate::setters::options_struct! {
/// How to compile a dialect for a tool set.
///
/// The one options type of dialect compiles: the bindings (C, Python), the engine specs and the
/// CLI's `--options` read it from JSON with the field names below, and [`CompileOptions`]'s
/// fields may stand beside them instead of under `compile` (see [`DialectOptions::from_json`]).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct DialectOptions {
    /// Which calls are allowed or required.
    pub tool_choice: ToolChoice = ToolChoice::Auto,
    /// `true`: one or more calls; `false`: exactly one call when calling (in JSON also
    /// OpenAI's name, `parallel_tool_calls`).
    #[serde(alias = "parallel_tool_calls")]
    pub parallel_calls: bool = true,
    /// An optional reasoning block before the answer (unconstrained text between the markers).
    /// In JSON: `true` (`<think>`/`</think>`), `false` or `null` (none), `{"start": ..., "end":
    /// ...}` or `[start, end]`.
    #[serde(with = "options_json::reasoning")]
    pub reasoning: Option<Reasoning> = None,
    /// At most this many characters in each stretch of free text (`@text...` builtins): keeps a
    /// model from rambling before (or instead of) its calls. `None` (the default): unbounded
    /// with `tool_choice` `auto` or `none`, and [`DEFAULT_REQUIRED_TEXT_CHARS`] with
    /// `required` or a named function, where a call must come; `Some(u32::MAX)` lifts that
    /// bound too.
    pub max_text_chars: Option<u32> = None,
    /// Schema compile options and limits (whitespace, depth, states, time, lenient mode).
    pub compile: CompileOptions = CompileOptions::default(),
    /// Strict tool arguments (default `true`), as OpenAI's `strict: true` and XGrammar's strict
    /// mode: in a tool's parameters, an object schema that lists `properties` and says nothing
    /// of `additionalProperties` (nor `patternProperties`, `unevaluatedProperties`, or a
    /// combinator beside it that could add keys) allows only its declared keys, so a model
    /// cannot invent arguments. A tool opts out with `"strict": false` ([`crate::Tool::strict`]);
    /// `false` here keeps JSON Schema's default (extra keys allowed) for every tool.
    /// [`crate::Grammar::from_json_schema`] always keeps JSON Schema's default.
    pub strict_arguments: bool = true,
    /// What a call that repeats an earlier call of the same output (same function, arguments
    /// equal as JSON values) does: ends the calls ([`DistinctCalls::End`], the default), is
    /// bent into a different call, or is allowed; the default of every [`crate::Matcher`] over
    /// the grammar ([`crate::Matcher::set_distinct_calls`]) and what its parsers do with a
    /// repeat. In JSON `"end"`, `"bend"`, `"allow"`, or `true` / `false`.
    pub distinct_calls: DistinctCalls = DistinctCalls::End,
    /// A call written as a JSON object (`@json_call`) opens with its name key (default
    /// `true`), as the models' templates write it and as XGrammar's and llguidance's call
    /// formats fix it: a call's arguments are then constrained by the one function it names
    /// from their first byte, and a call union of N tools is one call past the name instead of
    /// N through the arguments. `false` takes the keys in any order, as the engines' JSON
    /// parsers read them (for parsing unconstrained outputs that put the arguments first). A
    /// dialect file's `@json_call(..., keys="any")` always takes any order.
    pub name_first: bool = true,
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

impl Dialect {
    /// A dialect shipped with callmask, by its name or an alias (see [`Dialect::table`]); a
    /// format the peers have that callmask refuses is an [`Error::Dialect`] with the reason.
    pub fn by_name(name: &str) -> Result<Dialect> {
        if let Some(spec) = registry::find(name) {
            return Dialect::parse(spec.name, spec.grammar);
        }
        let message = match registry::REFUSED.iter().find(|r| r.name == name) {
            Some(r) => format!("not supported: {}", r.reason),
            None => format!(
                "unknown dialect (built in: {}; or give a path to a grammar file)",
                Self::builtin_names().join(", ")
            ),
        };
        Err(Error::Dialect {
            dialect: name.into(),
            message,
        })
    }

    /// The table of built-in dialects (families, output shapes, detection markers, sources),
    /// most specific detection markers first.
    pub fn table() -> &'static [DialectSpec] {
        registry::DIALECTS
    }

    /// Formats the peers support that callmask has no dialect for, each with the reason.
    pub fn refused() -> &'static [RefusedSpec] {
        registry::REFUSED
    }

    /// The built-in dialect a model writes its calls in, told from its chat template (the
    /// `tokenizer.chat_template` of its GGUF file or `tokenizer_config.json`) and its
    /// vocabulary, most specific marker first (e.g. `<function=` with `<parameter=` →
    /// `qwen3_coder`, or `qwen35` where the template also thinks; `[TOOL_CALLS]` → `mistral`;
    /// `<|channel|>` → `gpt_oss`; every built-in dialect has its marker), then: `<tool_call>` in
    /// the template → `hermes` (`qwen3` with `<think>`); `functools[` → `functools`;
    /// `<FUNCTION_CALL>` → `inline`; a pythonic call list (`[func_name1(`) → `pythonic`;
    /// Llama 3.1's JSON instruction (`"parameters": dictionary`) or, without a template, a
    /// `<|python_tag|>` special token → `llama31_json`. Anything else (Gemma 3's template says
    /// nothing of tools) is [`Error::Dialect`]: give the dialect.
    ///
    /// ```
    /// # use callmask::{Dialect, Vocab};
    /// let vocab = Vocab::from_parts(vec![b"a".to_vec(), b"<eos>".to_vec()], vec![false, true], vec![1])?;
    /// let qwen = "{%- if tools %}...<tool_call>\n{\"name\": <function-name>, ...}\n</tool_call>{% endif %}";
    /// assert_eq!(Dialect::detect(Some(qwen), &vocab)?, "hermes");
    /// assert!(Dialect::detect(Some("{{ bos_token }}{% for m in messages %}..."), &vocab).is_err());
    /// # Ok::<(), callmask::Error>(())
    /// ```
    pub fn detect(
        chat_template: Option<&str>,
        vocab: &crate::vocab::Vocab,
    ) -> Result<&'static str> {
        let t = chat_template.unwrap_or("");
        let found = if t.is_empty() {
            // No template: Llama 3.1's vocabulary says enough.
            vocab
                .special_token("<|python_tag|>")
                .map(|_| "llama31_json")
        } else {
            if let Some(r) = registry::REFUSED.iter().find(|r| {
                r.detect
                    .iter()
                    .any(|g| !g.is_empty() && g.iter().all(|m| t.contains(m)))
            }) {
                return Err(Error::Dialect {
                    dialect: "auto".into(),
                    message: format!(
                        "the chat template shows the {} format, which callmask does not support: {}",
                        r.name, r.reason
                    ),
                });
            }
            registry::DIALECTS
                .iter()
                .find(|d| d.detected_in(t))
                .map(|d| d.name)
        };
        found.ok_or_else(|| Error::Dialect {
            dialect: "auto".into(),
            message: if t.is_empty() {
                "the model has no chat template and its vocabulary does not tell the tool-call \
                 format: give the dialect"
                    .into()
            } else {
                "the model's chat template does not show a tool-call format callmask knows: \
                 give the dialect"
                    .into()
            },
        })
    }

    /// The names of the built-in dialects.
    pub fn builtin_names() -> Vec<&'static str> {
        registry::NAMES.to_vec()
    }

    /// A built-in dialect by name, or else a grammar file at that path.
    pub fn load(name_or_path: &str) -> Result<Dialect> {
        if registry::find(name_or_path).is_some() {
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
        let rules = parse_rules(text).map_err(|(l, m)| err(l, m))?;
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
        let g = lower(self, tools, options, allowed)?;
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
