//! Prompt rendering: chat messages and tools → the prompt text a model was trained on.
//!
//! Each dialect's prompt format is a [minijinja] template (a Jinja dialect, like the chat
//! templates of Hugging Face models); the built-in ones live in `grammars/<dialect>.jinja` and
//! are returned by [`builtin_template`]. [`render`] renders any such template (built-in or the
//! caller's own) for a list of [`Message`]s and a [`Tools`] set.
//!
//! # What a template sees
//!
//! Variables:
//! - `messages`: a list of `{role, content, tool_calls, tool_call_id, name}`; `content` is `""`
//!   when the message has none, `tool_calls` is a (possibly empty) list of
//!   `{id, type, function: {name, arguments}}` with `arguments` the JSON *text* of the arguments
//!   (as in OpenAI's shape), `tool_call_id` and `name` are `none` when absent.
//! - `tools`: a list of `{name, description, parameters}`; a missing description is `""`, missing
//!   parameters are the empty object schema `{"type": "object", "properties": {}}` (the OpenAI
//!   way of saying "no arguments", which is what the models were shown in training).
//! - `functions` and `functions_json`: the same list as JSON text indented by 2 spaces (the
//!   Firefunction v2 template concatenates `functions` into its system prompt).
//! - `functions_yaml`: the functions as YAML, in the layout of the `inline` dialect's source
//!   prompt (see [`functions_yaml`]).
//! - `datetime`: [`PromptOptions::datetime`], or `"unknown"` when it is `None` (the crate reads no
//!   clock: pass the date you want the model to see).
//! - `bos_token` and `add_generation_prompt`: from [`PromptOptions`].
//!
//! Functions and filters, besides minijinja's built-ins:
//! - `raise_exception(message)`: fails the render; [`render`] returns
//!   [`Error::Prompt`]`(message)`.
//! - `tojson` (filter, optional `indent`): JSON text as Python's `json.dumps` writes it
//!   (`", "` and `": "` separators, non-ASCII kept, no HTML escaping). It replaces minijinja's
//!   own `tojson`, which escapes `<`, `>`, `&` and `'` for HTML and so would change what the
//!   model sees (Hugging Face's templates also use the Python behaviour).
//! - `fromjson` (filter): parses JSON text (such as a call's `arguments`) into a value.
//! - `pythonic_call` (filter): a tool call as a Python call, `name(a=1, b='x')` (see
//!   [`pythonic_call`]).
//! - `xml_value` (filter): an argument value as the tagged-argument dialects write it: a
//!   string as is, anything else as JSON text.
//!
//! The environment trims blocks and strips leading block whitespace (`trim_blocks` and
//! `lstrip_blocks`), as Hugging Face renders chat templates. Undefined variables render as empty.

use crate::error::{Error, Result};
use crate::tools::{Message, Tool, ToolCall, Tools};
use minijinja::value::{Kwargs, Value};
use minijinja::{context, Environment, ErrorKind};
use serde::Serialize;
use serde_json::{json, Map, Value as Json};
use std::io;
use std::sync::{Arc, Mutex};

/// Options of [`render`] that are not messages or tools.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptOptions {
    /// The date (or date and time) the template shows the model, as text; the template sees
    /// `"unknown"` when this is `None`.
    pub datetime: Option<String>,
    /// The text of the model's beginning-of-sequence token (e.g. `<|begin_of_text|>`), for the
    /// templates that write it; empty by default, since tokenizers often add it themselves.
    pub bos_token: String,
    /// Whether to end the prompt with the header that opens the assistant's turn (default true).
    pub add_generation_prompt: bool,
    /// The text of the model's end-of-sequence token, for the chat templates that write it
    /// ([`render_chat_template`]); empty by default.
    pub eos_token: String,
}

crate::setters::option_setters!(PromptOptions { datetime: Option<String>, bos_token: String, add_generation_prompt: bool, eos_token: String });

impl Default for PromptOptions {
    fn default() -> Self {
        PromptOptions {
            datetime: None,
            bos_token: String::new(),
            add_generation_prompt: true,
            eos_token: String::new(),
        }
    }
}

/// The built-in dialects, each with a prompt template and a call writer (see
/// [`builtin_template`]), from the dialect table ([`crate::Dialect::table`]).
pub const BUILTIN_DIALECTS: &[&str] = &crate::formats::NAMES;

/// The built-in prompt template of `dialect` (one of [`BUILTIN_DIALECTS`] or an alias), as
/// minijinja source; `None` for any other name.
pub fn builtin_template(dialect: &str) -> Option<&'static str> {
    crate::formats::find(dialect).and_then(|d| d.prompt)
}

/// The built-in call writer of `dialect` (one of [`BUILTIN_DIALECTS`] or an alias): a template
/// that writes `text` and `calls` the way the dialect's model writes them (see [`write_calls`]).
pub fn builtin_writer(dialect: &str) -> Option<&'static str> {
    crate::formats::find(dialect).map(|d| d.writer)
}

/// Writes a model turn with a call writer `template` (minijinja source): `text` is the free
/// text (empty for none) and `calls` the calls, each `{name, arguments}` with `arguments` a
/// JSON object; the filters of [`render`] are available. Errors are [`Error::Prompt`].
pub fn write_calls(template: &str, text: &str, calls: &[(String, Json)]) -> Result<String> {
    let env = environment(Arc::new(Mutex::new(None)));
    let compiled = env
        .template_from_str(template)
        .map_err(|e| Error::Prompt(describe(&e)))?;
    let calls: Vec<Json> = calls
        .iter()
        .map(|(name, arguments)| serde_json::json!({"name": name, "arguments": arguments}))
        .collect();
    let ctx = context! {
        text => text,
        calls => Value::from_serialize(&calls),
    };
    compiled
        .render(ctx)
        .map_err(|e| Error::Prompt(describe(&e)))
}

/// Renders `template` (minijinja source) for `messages` and `tools`.
///
/// See the [module documentation](self) for the variables, functions and filters the template
/// sees. Any failure (a syntax error, an error while rendering, `raise_exception` called by the
/// template) is returned as [`Error::Prompt`]; rendering never panics.
pub fn render(
    template: &str,
    messages: &[Message],
    tools: &Tools,
    opts: &PromptOptions,
) -> Result<String> {
    let raised: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let env = environment(raised.clone());
    let to_error = |e: minijinja::Error| -> Error {
        if let Ok(mut slot) = raised.lock() {
            if let Some(message) = slot.take() {
                return Error::Prompt(message);
            }
        }
        Error::Prompt(describe(&e))
    };
    let compiled = env.template_from_str(template).map_err(to_error)?;

    let tool_values: Vec<Json> = tools.as_slice().iter().map(tool_value).collect();
    let functions = to_python_json(&Json::Array(tool_values.clone()), Some(2))
        .map_err(|e| Error::Prompt(format!("cannot write the functions as JSON: {e}")))?;
    let yaml = functions_yaml(tools)?;
    let message_values: Vec<Json> = messages.iter().map(message_value).collect();
    let ctx = context! {
        messages => Value::from_serialize(&message_values),
        tools => Value::from_serialize(&tool_values),
        functions => functions.clone(),
        functions_json => functions,
        functions_yaml => yaml,
        datetime => opts.datetime.clone().unwrap_or_else(|| "unknown".to_owned()),
        bos_token => opts.bos_token.clone(),
        add_generation_prompt => opts.add_generation_prompt,
    };
    compiled.render(ctx).map_err(to_error)
}

/// Renders a model's own chat template (the `tokenizer.chat_template` of its GGUF file or
/// `tokenizer_config.json`) the way Hugging Face's `apply_chat_template` does: `messages` in
/// OpenAI's shape (`{role, content}`, with `tool_calls` — each `{id, type, function: {name,
/// arguments}}`, `arguments` the JSON *object*, or the JSON string OpenAI's API sends where the
/// template fails on objects (DeepSeek-R1-Distill's and Functionary v3.2's concatenate it with
/// text; llama.cpp tries both the same way) — only where there are calls, `tool_call_id` and
/// `name` only where set, `content` `none` when a message has none), `tools` in OpenAI's shape
/// (`[{"type": "function", "function": {name, description, parameters}}]`, `none` when there are
/// no tools), `add_generation_prompt`, `bos_token`, `eos_token`, `raise_exception(message)`,
/// `strftime_now(format)` (which returns [`PromptOptions::datetime`], or `"unknown"`: the crate
/// reads no clock), `datetime` (the same) and `functions` (the tools' `function` objects as a
/// JSON list, `""` without tools: Firefunction v2's template takes both), Python's string and dict methods (`.strip()`, `.startswith()`, `.items()`,
/// ... through `minijinja-contrib`'s `pycompat`), and the filters of [`render`] (`tojson` as
/// Python writes it). Whether the template shows the tools to the model is up to it: see
/// [`template_uses_tools`] and [`tools_instructions`].
///
/// ```
/// use callmask::{Message, PromptOptions, Tools};
/// let template = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}\n{{ m.content | trim }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";
/// let prompt = callmask::prompt::render_chat_template(
///     template,
///     &[Message::new("user", " Hi ")],
///     &Tools::default(),
///     &PromptOptions::default().bos_token("<bos>".into()),
/// )?;
/// assert_eq!(prompt, "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
/// # Ok::<(), callmask::Error>(())
/// ```
pub fn render_chat_template(
    template: &str,
    messages: &[Message],
    tools: &Tools,
    opts: &PromptOptions,
) -> Result<String> {
    let raised: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let mut env = environment(raised.clone());
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    let date = opts
        .datetime
        .clone()
        .unwrap_or_else(|| "unknown".to_owned());
    let date_value = date.clone();
    env.add_function("strftime_now", move |_format: String| date.clone());
    let to_error = |e: minijinja::Error| -> Error {
        if let Ok(mut slot) = raised.lock() {
            if let Some(message) = slot.take() {
                return Error::Prompt(message);
            }
        }
        Error::Prompt(describe(&e))
    };
    let template = without_generation_tags(template);
    let compiled = env.template_from_str(&template).map_err(to_error)?;
    let tool_values: Vec<Json> = tools
        .as_slice()
        .iter()
        .map(|t| json!({"type": "function", "function": tool_value(t)}))
        .collect();
    let functions_json = if tool_values.is_empty() {
        String::new()
    } else {
        let functions: Vec<Json> = tools.as_slice().iter().map(tool_value).collect();
        Json::Array(functions).to_string()
    };
    let render = |string_args: bool| {
        let message_values: Vec<Json> = messages
            .iter()
            .map(|m| hf_message_value(m, string_args))
            .collect();
        let ctx = context! {
            messages => Value::from_serialize(&message_values),
            tools => if tool_values.is_empty() { Value::from(()) } else { Value::from_serialize(&tool_values) },
            bos_token => opts.bos_token.clone(),
            eos_token => opts.eos_token.clone(),
            add_generation_prompt => opts.add_generation_prompt,
            // What Firefunction v2's model card passes beside the messages.
            datetime => date_value.clone(),
            functions => functions_json.clone(),
        };
        compiled.render(ctx)
    };
    let has_calls = messages.iter().any(|m| !m.tool_calls.is_empty());
    match render(false) {
        Ok(text) => Ok(text),
        // Not the template's own `raise_exception`: try the arguments as JSON strings.
        Err(e) if has_calls && raised.lock().is_ok_and(|r| r.is_none()) => {
            render(true).map_err(|_| {
                // The first failure is the one to report, not the retry's.
                if let Ok(mut slot) = raised.lock() {
                    slot.take();
                }
                to_error(e)
            })
        }
        Err(e) => Err(to_error(e)),
    }
}

/// `template` without transformers' `{% generation %}` and `{% endgeneration %}` tags (they
/// mark the assistant's tokens for training masks and render nothing; minijinja has no such
/// statement).
fn without_generation_tags(template: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find("{%") {
        let after = &rest[i + 2..];
        let body = after.trim_start_matches(['-', '+']).trim_start();
        let word = body
            .strip_prefix("endgeneration")
            .or_else(|| body.strip_prefix("generation"));
        let end = word.and_then(|w| {
            let w = w.trim_start().trim_start_matches(['-', '+']);
            w.strip_prefix("%}")
        });
        match end {
            Some(tail) => {
                out.push_str(&rest[..i]);
                rest = tail;
            }
            None => {
                out.push_str(&rest[..i + 2]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The rendering of `conversation` (whose last message is the turn of interest, rendered
/// without a generation prompt) and where that turn starts in it: as far as the rendering of
/// the conversation before it, with the generation prompt, agrees byte for byte, backed off to
/// the start of a `<...>` marker it would cut (`<think>` against `<tool_call>`). `Ok(None)` where
/// the template raises an exception of its own (`raise_exception`: it refuses the turn).
pub fn rendered_turn(
    template: &str,
    conversation: &[Message],
    tools: &Tools,
    opts: &PromptOptions,
) -> Result<Option<(String, usize)>> {
    let Some((_, before)) = conversation.split_last() else {
        return Ok(None);
    };
    let with = match render_chat_template(
        template,
        conversation,
        tools,
        &opts.clone().add_generation_prompt(false),
    ) {
        Ok(w) => w,
        // The template's own `raise_exception` (its message, with no template location).
        Err(e) if !e.to_string().contains("(in <string>") => return Ok(None),
        Err(e) => return Err(e),
    };
    let prompt = render_chat_template(
        template,
        before,
        tools,
        &opts.clone().add_generation_prompt(true),
    )?;
    let mut common = with
        .bytes()
        .zip(prompt.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    while !with.is_char_boundary(common) {
        common -= 1;
    }
    if let Some(open) = with[..common].rfind('<') {
        if !with[open..common].contains('>') {
            common = open;
        }
    }
    Ok(Some((with, common)))
}

/// A turn format for a model whose GGUF file carries no chat template (Gemma 3 270M's, for
/// one), told from its special tokens: Gemma's `<start_of_turn>`, ChatML's `<|im_start|>`, Llama
/// 3's `<|start_header_id|>` (callmask's own minimal templates, `grammars/chat/*.jinja`, written
/// for [`render_chat_template`]; they show no tools). `None` when none of them fits.
pub fn fallback_chat_template(vocab: &crate::vocab::Vocab) -> Option<&'static str> {
    if vocab.special_token("<start_of_turn>").is_some() {
        Some(include_str!("../grammars/chat/gemma.jinja"))
    } else if vocab.special_token("<|im_start|>").is_some() {
        Some(include_str!("../grammars/chat/chatml.jinja"))
    } else if vocab.special_token("<|start_header_id|>").is_some() {
        Some(include_str!("../grammars/chat/llama3.jinja"))
    } else {
        None
    }
}

/// Whether a chat template refers to the `tools` it is given at all (Gemma 3's, for one, does
/// not: a model so templated has to be told about the tools in a message, see
/// [`tools_instructions`]).
pub fn template_uses_tools(template: &str) -> bool {
    template.contains("tools")
}

/// A system message telling a model whose chat template does not show tools what it may call
/// and how: the tools as JSON, one per line, and (given a call writer `writer`, a
/// `grammars/D.write.jinja` template, see [`write_calls`]) the shape of a call,
/// `function_name` with `{"argument_name": "argument value"}` written by that writer.
pub fn tools_instructions(tools: &Tools, writer: Option<&str>) -> Result<String> {
    let mut out = String::from("You can call these functions (JSON Schema of the arguments):\n");
    for t in tools.as_slice() {
        let line = to_python_json(&tool_value(t), None)
            .map_err(|e| Error::Prompt(format!("cannot write the tools as JSON: {e}")))?;
        out.push_str(&line);
        out.push('\n');
    }
    if let (false, Some(writer)) = (tools.is_empty(), writer) {
        // The shape only: a small model copies an example's values (tried on Gemma 3 270M).
        let args = json!({"argument_name": "argument value"});
        let example = write_calls(writer, "", &[("function_name".to_owned(), args)])?;
        out.push_str("To call a function, answer with the call, written like this:\n");
        out.push_str(&example);
    }
    Ok(out)
}

/// A message as Hugging Face chat templates see it (OpenAI's shape, arguments as objects, or
/// as JSON strings with `string_args`).
fn hf_message_value(m: &Message, string_args: bool) -> Json {
    let mut o = Map::new();
    o.insert("role".into(), json!(m.role));
    o.insert("content".into(), json!(m.content));
    if !m.tool_calls.is_empty() {
        let calls: Vec<Json> = m
            .tool_calls
            .iter()
            .map(|c| {
                let args = match serde_json::from_str::<Json>(&c.function.arguments) {
                    Ok(v) if !string_args => v,
                    _ => Json::String(c.function.arguments.clone()),
                };
                json!({"id": c.id, "type": c.kind, "function": {"name": c.function.name, "arguments": args}})
            })
            .collect();
        o.insert("tool_calls".into(), Json::Array(calls));
    }
    if let Some(id) = &m.tool_call_id {
        o.insert("tool_call_id".into(), json!(id));
    }
    if let Some(n) = &m.name {
        o.insert("name".into(), json!(n));
    }
    Json::Object(o)
}

/// A minijinja error as one line: its own message, then its causes.
fn describe(e: &minijinja::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The environment every template is rendered in: Hugging Face's whitespace settings plus the
/// functions and filters of the module documentation. `raised` receives the message of
/// `raise_exception`, so that [`render`] can return it unchanged.
fn environment(raised: Arc<Mutex<Option<String>>>) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.add_function(
        "raise_exception",
        move |message: String| -> std::result::Result<Value, minijinja::Error> {
            if let Ok(mut slot) = raised.lock() {
                *slot = Some(message.clone());
            }
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
        },
    );
    env.add_filter("tojson", tojson_filter);
    env.add_filter("fromjson", fromjson_filter);
    env.add_filter("pythonic_call", pythonic_call_filter);
    env.add_filter("xml_value", xml_value_filter);
    env
}

/// A tool as the templates see it: `{name, description, parameters}` with defaults filled in.
fn tool_value(t: &Tool) -> Json {
    json!({
        "name": t.name,
        "description": t.description.clone().unwrap_or_default(),
        "parameters": t.parameters.clone().unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

/// A message as the templates see it.
fn message_value(m: &Message) -> Json {
    let calls: Vec<Json> = m
        .tool_calls
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "type": c.kind,
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            })
        })
        .collect();
    json!({
        "role": m.role,
        "content": m.content.clone().unwrap_or_default(),
        "tool_calls": calls,
        "tool_call_id": m.tool_call_id,
        "name": m.name,
    })
}

/// The functions of `tools` in YAML, laid out as the `inline` dialect's source prompt shows
/// them: each function is a key holding its `parameters` (the JSON Schema, as YAML) and its
/// `description`; a function without parameters is written `name: # No parameters`, and a
/// missing description is left out. No trailing newline.
///
/// ```text
/// get_stock_price:
///   parameters:
///     type: object
///     ...
///   description: This function returns the current stock price of the given ticker symbol.
/// get_time_utc: # No parameters
///   description: Returns an ISO 8601 formatted string representing the current time in UTC.
/// ```
pub fn functions_yaml(tools: &Tools) -> Result<String> {
    let yaml_error = |e: serde_norway::Error| Error::Prompt(format!("cannot write YAML: {e}"));
    let mut out = String::new();
    for t in tools.as_slice() {
        let key = serde_norway::to_string(&t.name).map_err(yaml_error)?;
        out.push_str(key.trim_end());
        out.push(':');
        if t.parameters.is_none() {
            out.push_str(" # No parameters");
        }
        out.push('\n');
        let mut body = Map::new();
        if let Some(p) = &t.parameters {
            body.insert("parameters".to_owned(), p.clone());
        }
        if let Some(d) = &t.description {
            body.insert("description".to_owned(), Json::String(d.clone()));
        }
        if body.is_empty() {
            continue;
        }
        let text = serde_norway::to_string(&body).map_err(yaml_error)?;
        for line in text.lines() {
            if !line.is_empty() {
                out.push_str("  ");
                out.push_str(line);
            }
            out.push('\n');
        }
    }
    if out.ends_with('\n') {
        out.pop();
    }
    Ok(out)
}

/// serde_json formatter writing compact JSON the way Python's `json.dumps` does by default:
/// `", "` between items and `": "` after keys.
struct PythonCompact;

impl serde_json::ser::Formatter for PythonCompact {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

/// `value` as JSON text, as Python's `json.dumps(value, indent=indent, ensure_ascii=False)`.
fn to_python_json<T: Serialize + ?Sized>(
    value: &T,
    indent: Option<usize>,
) -> std::result::Result<String, serde_json::Error> {
    let mut buf = Vec::new();
    match indent {
        None => {
            let mut ser = serde_json::Serializer::with_formatter(&mut buf, PythonCompact);
            value.serialize(&mut ser)?;
        }
        Some(n) => {
            let spaces = vec![b' '; n];
            let formatter = serde_json::ser::PrettyFormatter::with_indent(&spaces);
            let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
            value.serialize(&mut ser)?;
        }
    }
    // serde_json writes valid UTF-8; the lossy conversion never replaces anything.
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn filter_error(message: impl Into<String>) -> minijinja::Error {
    minijinja::Error::new(ErrorKind::InvalidOperation, message.into())
}

/// A crate error as a filter error, without the `prompt: ` prefix of [`Error::Prompt`].
fn crate_to_filter_error(e: Error) -> minijinja::Error {
    match e {
        Error::Prompt(message) => filter_error(format!("pythonic_call: {message}")),
        other => filter_error(format!("pythonic_call: {other}")),
    }
}

/// `tojson` filter: `value|tojson`, `value|tojson(2)` or `value|tojson(indent=2)`.
fn tojson_filter(
    value: &Value,
    indent: Option<usize>,
    kwargs: Kwargs,
) -> std::result::Result<String, minijinja::Error> {
    let indent = match kwargs.get::<Option<usize>>("indent")? {
        Some(n) => Some(n),
        None => indent,
    };
    // transformers' `tojson`: `ensure_ascii` (default false) and `sort_keys` (default false).
    let ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false);
    let sort = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false);
    kwargs.assert_all_used()?;
    let text = if sort {
        let mut json: Json =
            serde_json::to_value(value).map_err(|e| filter_error(format!("tojson: {e}")))?;
        sort_keys(&mut json);
        to_python_json(&json, indent)
    } else {
        to_python_json(value, indent)
    }
    .map_err(|e| filter_error(format!("tojson: {e}")))?;
    Ok(if ascii {
        crate::python::escape_past_ascii(&text, false)
    } else {
        text
    })
}

/// `v` with every object's keys in sorted order (`json.dumps(.., sort_keys=True)`).
fn sort_keys(v: &mut Json) {
    match v {
        Json::Object(o) => {
            let mut entries: Vec<(String, Json)> = std::mem::take(o).into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (k, mut x) in entries {
                sort_keys(&mut x);
                o.insert(k, x);
            }
        }
        Json::Array(a) => a.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// `xml_value` filter: an argument value as the tagged-argument dialects write it (`@xml_args`):
/// a string as is, anything else as JSON.
fn xml_value_filter(value: &Value) -> std::result::Result<String, minijinja::Error> {
    match value.as_str() {
        Some(s) => Ok(s.to_owned()),
        None => to_python_json(value, None).map_err(|e| filter_error(format!("xml_value: {e}"))),
    }
}

/// `fromjson` filter: JSON text → value.
fn fromjson_filter(text: &str) -> std::result::Result<Value, minijinja::Error> {
    let v: Json = serde_json::from_str(text)
        .map_err(|e| filter_error(format!("fromjson: invalid JSON {text:?}: {e}")))?;
    Ok(Value::from_serialize(&v))
}

/// `pythonic_call` filter: a tool call value (`{function: {name, arguments}}`, as in
/// `messages[i].tool_calls`) → `name(k=v, ...)`.
fn pythonic_call_filter(call: &Value) -> std::result::Result<String, minijinja::Error> {
    let call: Json =
        serde_json::to_value(call).map_err(|e| filter_error(format!("pythonic_call: {e}")))?;
    let function = call.get("function").unwrap_or(&call);
    let name = function
        .get("name")
        .and_then(Json::as_str)
        .ok_or_else(|| filter_error("pythonic_call: the tool call has no function name"))?;
    let arguments = match function.get("arguments") {
        None | Some(Json::Null) => Json::Object(Map::new()),
        Some(Json::String(s)) => parse_arguments(s).map_err(crate_to_filter_error)?,
        Some(other) => other.clone(),
    };
    python_call_text(name, &arguments).map_err(crate_to_filter_error)
}

/// Arguments JSON text → value; blank text means no arguments.
fn parse_arguments(text: &str) -> Result<Json> {
    if text.trim().is_empty() {
        return Ok(Json::Object(Map::new()));
    }
    serde_json::from_str(text)
        .map_err(|e| Error::Prompt(format!("the arguments {text:?} are not JSON: {e}")))
}

/// A tool call written as a Python call, as the `pythonic` dialect (Llama 3.2) writes it:
/// `get_user_info(user_id=7890, special='black')`.
///
/// The arguments (a JSON object) become keyword arguments in their order; values become Python
/// literals as [`crate::python::python_repr`] writes them (the spelling the pythonic
/// grammar accepts): strings in single quotes unless the text holds a single quote and no
/// double quote, `true`/`false`/`null` as `True`/`False`/`None`, arrays as lists and objects as
/// dicts. Fails when the arguments are not a JSON object or a key is not a
/// Python identifier.
pub fn pythonic_call(call: &ToolCall) -> Result<String> {
    let arguments = parse_arguments(&call.function.arguments)?;
    python_call_text(&call.function.name, &arguments)
}

fn python_call_text(name: &str, arguments: &Json) -> Result<String> {
    let Json::Object(map) = arguments else {
        return Err(Error::Prompt(format!(
            "the arguments of {name} are not a JSON object"
        )));
    };
    if let Some(key) = map.keys().find(|k| !crate::python::is_identifier(k)) {
        return Err(Error::Prompt(format!(
            "argument {key:?} of {name} is not a Python identifier"
        )));
    }
    Ok(format!("{name}({})", crate::python::python_kwargs(map)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the real chat templates use beyond Jinja's core: transformers' `tojson` keywords,
    /// `{% generation %}` tags, `break`.
    #[test]
    fn chat_templates_render_transformers_extensions() {
        let t = "{% generation %}{{ {'b': 'é', 'a': [1]} | tojson(ensure_ascii=True, sort_keys=true) }}\
                 {%- endgeneration %}|{% for m in messages %}{{ m.role }}{% break %}{% endfor %}";
        let msgs = [Message::new("user", "x"), Message::new("assistant", "y")];
        let out =
            render_chat_template(t, &msgs, &Tools::default(), &PromptOptions::default()).unwrap();
        assert_eq!(out, r#"{"a": [1], "b": "\u00e9"}|user"#);
        let plain = render_chat_template(
            "{{ {'b': 'é'} | tojson(ensure_ascii=false) }}",
            &msgs,
            &Tools::default(),
            &PromptOptions::default(),
        )
        .unwrap();
        assert_eq!(plain, r#"{"b": "é"}"#);
    }

    /// A template that writes a call's arguments after text (`'..' + arguments`) fails on
    /// objects and renders them as the JSON string OpenAI sends; one that takes objects gets
    /// objects; the template's own `raise_exception` is not retried.
    #[test]
    fn templates_taking_string_arguments_get_strings() {
        let mut turn = Message::new("assistant", "");
        turn.tool_calls = vec![ToolCall::new("c0", "f", r#"{"a": 1}"#)];
        let msgs = [Message::new("user", "x"), turn];
        let render =
            |t: &str| render_chat_template(t, &msgs, &Tools::default(), &PromptOptions::default());
        let concat = "{% for m in messages %}{% for c in m.tool_calls or [] %}\
                      {{ 'args: ' + c.function.arguments }}{% endfor %}{% endfor %}";
        assert_eq!(render(concat).unwrap(), r#"args: {"a": 1}"#);
        let object = "{% for m in messages %}{% for c in m.tool_calls or [] %}\
                      {{ c.function.arguments.a }}{% endfor %}{% endfor %}";
        assert_eq!(render(object).unwrap(), "1");
        let refuses = "{% for m in messages %}{% if m.tool_calls %}\
                       {{ raise_exception('no calls') }}{% endif %}{% endfor %}";
        assert_eq!(
            render(refuses).unwrap_err().to_string(),
            Error::Prompt("no calls".into()).to_string()
        );
        let broken = "{{ 'x' + messages[1].tool_calls[0].function.arguments.missing }}";
        assert!(render(broken).is_err());
    }

    fn weather_tools() -> Tools {
        Tools::from_json_str(
            r#"[{"type": "function", "function": {
                "name": "get_current_weather",
                "description": "Get the current weather in a given location",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
                    },
                    "required": ["location"]
                }}}]"#,
        )
        .expect("valid tools")
    }

    fn stock_tools() -> Tools {
        Tools::from_json_str(
            r#"[{"name": "get_stock_price",
                 "description": "This function returns the current stock price of the given ticker symbol.",
                 "parameters": {"type": "object", "properties": {"ticker": {"type": "string"}}, "required": ["ticker"]}},
                {"name": "get_time_utc",
                 "description": "Returns an ISO 8601 formatted string representing the current time in UTC."}]"#,
        )
        .expect("valid tools")
    }

    fn user_info_tools() -> Tools {
        Tools::from_json_str(
            r#"[{"name": "get_user_info",
                 "description": "Retrieve details for a specific user by their unique identifier.",
                 "parameters": {"type": "dict", "required": ["user_id"], "properties": {
                    "user_id": {"type": "integer", "description": "The unique identifier of the user."},
                    "special": {"type": "string", "description": "Any special information.", "default": "none"}}}}]"#,
        )
        .expect("valid tools")
    }

    fn assistant_call(id: &str, name: &str, arguments: &str) -> Message {
        Message {
            role: "assistant".into(),
            content: None,
            tool_calls: vec![ToolCall::new(id, name, arguments)],
            tool_call_id: None,
            name: None,
        }
    }

    fn tool_result(id: &str, content: &str) -> Message {
        Message {
            role: "tool".into(),
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(id.into()),
            name: None,
        }
    }

    fn builtin(name: &str) -> &'static str {
        builtin_template(name).expect("built-in template")
    }

    #[test]
    fn every_builtin_template_renders_a_full_conversation() {
        let messages = vec![
            Message::new("system", "Be brief."),
            Message::new("user", "Weather in Paris?"),
            assistant_call("call_0", "get_current_weather", r#"{"location": "Paris"}"#),
            tool_result("call_0", r#"{"temperature": 20}"#),
            Message::new("assistant", "It is 20 degrees."),
            Message::new("user", "Thanks"),
        ];
        for &dialect in BUILTIN_DIALECTS
            .iter()
            .filter(|d| builtin_template(d).is_some())
        {
            let text = render(
                builtin(dialect),
                &messages,
                &weather_tools(),
                &PromptOptions::default(),
            )
            .unwrap_or_else(|e| panic!("{dialect}: {e}"));
            assert!(text.contains("Be brief."), "{dialect}: {text}");
            assert!(text.contains("Weather in Paris?"), "{dialect}: {text}");
            assert!(text.contains("It is 20 degrees."), "{dialect}: {text}");
            assert!(text.contains("get_current_weather"), "{dialect}: {text}");
            assert!(text.contains("Thanks"), "{dialect}: {text}");
        }
        assert!(builtin_template("nope").is_none());
    }

    #[test]
    fn empower_renders_the_seed_example() {
        let messages = vec![Message::new("user", "How's the weather in San Francisco?")];
        let text = render(
            builtin("empower"),
            &messages,
            &weather_tools(),
            &PromptOptions::default(),
        )
        .expect("renders");
        let expected = "<|start_header_id|>user<|end_header_id|>\n\n\
            In this environment you have access to a set of functions defined in the JSON format \
            you can use to address user's requests, use them if needed.\n\
            Functions: [\n  {\n    \"name\": \"get_current_weather\",\n    \
            \"description\": \"Get the current weather in a given location\",\n    \
            \"parameters\": {\n      \"type\": \"object\",\n";
        assert!(text.starts_with(expected), "{text}");
        assert!(
            text.contains("\n]\n\n<u>How's the weather in San Francisco?<|eot_id|>"),
            "{text}"
        );
        assert!(
            text.ends_with("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"),
            "{text}"
        );
        assert_eq!(text.matches("Functions: ").count(), 1);
    }

    #[test]
    fn empower_renders_calls_results_and_replies() {
        let messages = vec![
            Message::new("system", "Be brief."),
            Message::new("user", "Weather in SF and NYC?"),
            Message {
                role: "assistant".into(),
                content: None,
                tool_calls: vec![
                    ToolCall::new(
                        "c1",
                        "get_current_weather",
                        r#"{"location":"San Francisco"}"#,
                    ),
                    ToolCall::new("c2", "get_current_weather", r#"{"location":"New York"}"#),
                ],
                tool_call_id: None,
                name: None,
            },
            tool_result("c1", r#"{"temperature":"70 fahrenheit"}"#),
            tool_result("c2", "cold"),
            Message::new("assistant", "70F and cold."),
            Message::new("user", "Thanks"),
        ];
        let opts = PromptOptions {
            add_generation_prompt: false,
            bos_token: "<|begin_of_text|>".into(),
            ..PromptOptions::default()
        };
        let text = render(builtin("empower"), &messages, &weather_tools(), &opts).expect("renders");
        assert!(
            text.starts_with(
                "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nBe brief.\n\nIn this environment"
            ),
            "{text}"
        );
        assert!(text.contains(
            "<|start_header_id|>assistant<|end_header_id|>\n\n<f>[{\"name\": \"get_current_weather\", \
             \"arguments\": \"{\\\"location\\\":\\\"San Francisco\\\"}\"}, {\"name\": \"get_current_weather\", \
             \"arguments\": \"{\\\"location\\\":\\\"New York\\\"}\"}]<|eot_id|>"
        ), "{text}");
        assert!(text.contains(
            "<|start_header_id|>user<|end_header_id|>\n\n<r>[{\"value\": \"{\\\"temperature\\\":\\\"70 fahrenheit\\\"}\", \
             \"tool_call_id\": \"c1\"}, {\"value\": \"cold\", \"tool_call_id\": \"c2\"}]<|eot_id|>"
        ), "{text}");
        assert!(text.contains(
            "<|start_header_id|>assistant<|end_header_id|>\n\n<c>70F and cold.<|eot_id|>"
        ));
        assert!(
            text.ends_with("<|start_header_id|>user<|end_header_id|>\n\n<u>Thanks<|eot_id|>"),
            "{text}"
        );
        assert!(!text.contains("system"), "{text}");
    }

    #[test]
    fn functools_renders_the_firefunction_template() {
        let messages = vec![
            Message::new("user", "Weather in Paris?"),
            assistant_call("call_0", "get_current_weather", r#"{"location": "Paris"}"#),
            tool_result("call_0", "20 C"),
        ];
        let opts = PromptOptions {
            datetime: Some("2024-09-24".into()),
            bos_token: "<|begin_of_text|>".into(),
            ..PromptOptions::default()
        };
        let text =
            render(builtin("functools"), &messages, &weather_tools(), &opts).expect("renders");
        assert!(text.starts_with(
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant with access to functions.\nIn addition to plain text responses"
        ), "{text}");
        assert!(
            text.contains(
                "Available functions as JSON spec:\n[\n  {\n    \"name\": \"get_current_weather\""
            ),
            "{text}"
        );
        assert!(text.contains("\nToday is 2024-09-24.<|eot_id|>"), "{text}");
        assert!(text.contains(
            "<|start_header_id|>assistant<|end_header_id|>\n\n functools[{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris\"}}]<|eot_id|>"
        ), "{text}");
        assert!(
            text.contains("<|start_header_id|>tool<|end_header_id|>\n\n20 C<|eot_id|>"),
            "{text}"
        );
        assert!(text.ends_with("<|start_header_id|>assistant<|end_header_id|>\n\n"));

        // Without a datetime the template says so.
        let text = render(
            builtin("functools"),
            &messages,
            &weather_tools(),
            &PromptOptions::default(),
        )
        .expect("renders");
        assert!(text.contains("Today is unknown."), "{text}");
    }

    #[test]
    fn functools_keeps_the_system_message() {
        let messages = vec![
            Message::new("system", "  You are Fire.  "),
            Message::new("user", "hi"),
        ];
        let text = render(
            builtin("functools"),
            &messages,
            &weather_tools(),
            &PromptOptions::default(),
        )
        .expect("renders");
        assert!(
            text.starts_with(
                "<|start_header_id|>system<|end_header_id|>\n\nYou are Fire.\nIn addition"
            ),
            "{text}"
        );
        assert_eq!(text.matches("<|start_header_id|>system").count(), 1);
    }

    #[test]
    fn pythonic_renders_calls_as_python_and_results_as_ipython() {
        let messages = vec![
            Message::new(
                "user",
                "Can you retrieve the details for the user with the ID 7890, who has black as their special request?",
            ),
            assistant_call("c0", "get_user_info", r#"{"user_id":7890,"special":"black"}"#),
            tool_result("c0", r#"{"name": "Ann"}"#),
        ];
        let opts = PromptOptions {
            bos_token: "<|begin_of_text|>".into(),
            ..PromptOptions::default()
        };
        let text =
            render(builtin("pythonic"), &messages, &user_info_tools(), &opts).expect("renders");
        assert!(text.starts_with(
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are an expert in composing functions."
        ), "{text}");
        assert!(text.contains(
            "Here is a list of functions in JSON format that you can invoke.\n\n[\n    {\n        \"name\": \"get_user_info\",\n        \"description\""
        ), "{text}");
        assert!(text.contains(
            "<|start_header_id|>assistant<|end_header_id|>\n\n[get_user_info(user_id=7890, special='black')]<|eot_id|>"
        ), "{text}");
        assert!(
            text.contains(
                "<|start_header_id|>ipython<|end_header_id|>\n\n{\"name\": \"Ann\"}<|eot_id|>"
            ),
            "{text}"
        );
        assert!(!text.contains("<|start_header_id|>tool"), "{text}");
        assert!(text.ends_with("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"));
    }

    #[test]
    fn pythonic_call_writes_python_literals() {
        let call = ToolCall::new(
            "c",
            "f",
            r#"{"s": "it's", "q": "say \"hi\"", "both": "'\"", "n": null, "t": true, "f": false,
                "x": 1.5, "l": [1, "a\nb", {"k": [false]}], "u": "é\u0001\u2028"}"#,
        );
        assert_eq!(
            pythonic_call(&call).expect("writes"),
            "f(s=\"it's\", q='say \"hi\"', both='\\'\"', n=None, t=True, f=False, x=1.5, l=[1, 'a\\nb', {'k': [False]}], u='é\\x01\u{2028}')"
        );
        assert_eq!(
            pythonic_call(&ToolCall::new("c", "now", "")).expect("writes"),
            "now()"
        );
        assert!(matches!(
            pythonic_call(&ToolCall::new("c", "f", r#"{"not ok": 1}"#)),
            Err(Error::Prompt(_))
        ));
        assert!(matches!(
            pythonic_call(&ToolCall::new("c", "f", "[1]")),
            Err(Error::Prompt(_))
        ));
        assert!(matches!(
            pythonic_call(&ToolCall::new("c", "f", "{")),
            Err(Error::Prompt(_))
        ));
    }

    #[test]
    fn inline_lists_functions_in_yaml() {
        let yaml = functions_yaml(&stock_tools()).expect("yaml");
        assert_eq!(
            yaml,
            "get_stock_price:\n  parameters:\n    type: object\n    properties:\n      ticker:\n        type: string\n    \
             required:\n    - ticker\n  description: This function returns the current stock price of the given ticker symbol.\n\
             get_time_utc: # No parameters\n  description: Returns an ISO 8601 formatted string representing the current time in UTC."
        );
        let messages = vec![
            Message::new("system", "Answer in English."),
            Message::new("user", "What's the value of Nvidia stock today ?"),
            Message {
                content: Some("Sure, let me check that for you.".into()),
                ..assistant_call("c0", "get_stock_price", r#"{"ticker":"NVDA"}"#)
            },
            tool_result("c0", r#"{ "stock_price": 300.00 }"#),
            assistant_call("c1", "get_time_utc", "{}"),
        ];
        let text = render(
            builtin("inline"),
            &messages,
            &stock_tools(),
            &PromptOptions::default(),
        )
        .expect("renders");
        assert!(text.starts_with(
            "role: system\nYou're a helpful AI assistant and you help answer questions and perform tasks for a user, based on your prompt.\n"
        ), "{text}");
        assert!(text.contains(&format!("your provided functions are:\n```yml\n{yaml}\n```\nAnswer in English.\nrole: user\n<|USER|>\nWhat's the value")), "{text}");
        assert!(text.contains(
            "role: model\nSure, let me check that for you.\n<FUNCTION_CALL>get_stock_price({\"ticker\": \"NVDA\"})</FUNCTION_CALL>\nrole: user\n<|FUNCTION_OUTPUT|>\n{ \"stock_price\": 300.00 }\n"
        ), "{text}");
        assert!(
            text.contains("role: model\n<FUNCTION_CALL>get_time_utc()</FUNCTION_CALL>\n"),
            "{text}"
        );
        assert!(text.ends_with("role: model\n"), "{text}");

        // No system message: no "based on your prompt".
        let text = render(
            builtin("inline"),
            &messages[1..2],
            &stock_tools(),
            &PromptOptions::default(),
        )
        .expect("renders");
        assert!(text.contains("tasks for a user.\n"), "{text}");
        // No tools: the short prompt.
        let text = render(
            builtin("inline"),
            &messages[1..2],
            &Tools::default(),
            &PromptOptions::default(),
        )
        .expect("renders");
        assert!(text.starts_with("role: system\nYou are an AI assistant and you answer questions for the user.\nrole: user\n"), "{text}");
    }

    #[test]
    fn hermes_renders_tools_calls_and_responses() {
        let messages = vec![
            Message::new("user", "Weather in Paris?"),
            assistant_call("c0", "get_current_weather", r#"{"location":"Paris"}"#),
            tool_result("c0", "20 C"),
            tool_result("c1", "sunny"),
        ];
        let text = render(
            builtin("hermes"),
            &messages,
            &weather_tools(),
            &PromptOptions::default(),
        )
        .expect("renders");
        assert!(text.starts_with("<|im_start|>system\n"), "{text}");
        assert!(text.contains("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_current_weather\""), "{text}");
        assert!(
            text.contains("<|im_start|>user\nWeather in Paris?<|im_end|>\n"),
            "{text}"
        );
        assert!(text.contains(
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call><|im_end|>\n"
        ), "{text}");
        assert!(text.contains(
            "<|im_start|>user\n<tool_response>\n20 C\n</tool_response>\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
        ), "{text}");
        assert!(text.ends_with("<|im_start|>assistant\n"), "{text}");
    }

    #[test]
    fn llama31_json_renders_the_json_prompt() {
        let messages = vec![
            Message::new("user", "Weather in Paris?"),
            assistant_call("c0", "get_current_weather", r#"{"location":"Paris"}"#),
            tool_result("c0", "20 C"),
        ];
        let text = render(
            builtin("llama31_json"),
            &messages,
            &weather_tools(),
            &PromptOptions::default(),
        )
        .expect("renders");
        assert!(
            text.starts_with(
                "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "Given the following functions, please respond with a JSON for a function call"
            ),
            "{text}"
        );
        assert!(
            text.contains("Do not use variables.\n\n{\n    \"type\": \"function\""),
            "{text}"
        );
        assert!(text.contains(
            "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_current_weather\", \"parameters\": {\"location\": \"Paris\"}}<|eot_id|>"
        ), "{text}");
        assert!(
            text.contains("<|start_header_id|>ipython<|end_header_id|>\n\n20 C<|eot_id|>"),
            "{text}"
        );
    }

    #[test]
    fn raise_exception_becomes_a_prompt_error() {
        let r = render(
            "{{ raise_exception('no way: ' ~ messages|length) }}",
            &[Message::new("user", "hi")],
            &Tools::default(),
            &PromptOptions::default(),
        );
        match r {
            Err(Error::Prompt(m)) => assert_eq!(m, "no way: 1"),
            other => panic!("{other:?}"),
        }
        // Firefunction's own check for an empty conversation.
        match render(
            builtin("functools"),
            &[],
            &weather_tools(),
            &PromptOptions::default(),
        ) {
            Err(Error::Prompt(m)) => assert_eq!(m, "Expected non-empty messages"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn invalid_roles_are_reported_by_every_builtin_template() {
        let messages = vec![Message::new("user", "hi"), Message::new("robot", "beep")];
        let mut failed = Vec::new();
        for &dialect in BUILTIN_DIALECTS
            .iter()
            .filter(|d| builtin_template(d).is_some())
        {
            match render(
                builtin(dialect),
                &messages,
                &weather_tools(),
                &PromptOptions::default(),
            ) {
                Err(Error::Prompt(m)) if m.contains("robot") => {}
                other => failed.push(format!("{dialect}: {other:?}")),
            }
        }
        assert!(failed.is_empty(), "{}", failed.join("\n"));
        match render(
            builtin("functools"),
            &messages,
            &weather_tools(),
            &PromptOptions::default(),
        ) {
            Err(Error::Prompt(m)) => assert_eq!(
                m,
                "Invalid role robot. Only system, user, assistant, tool are supported."
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn template_errors_are_prompt_errors() {
        let tools = Tools::default();
        let opts = PromptOptions::default();
        assert!(matches!(
            render("{% if %}", &[], &tools, &opts),
            Err(Error::Prompt(_))
        ));
        assert!(matches!(
            render("{{ 1 + 'a' }}", &[], &tools, &opts),
            Err(Error::Prompt(_))
        ));
        assert!(matches!(
            render("{{ 'x'|fromjson }}", &[], &tools, &opts),
            Err(Error::Prompt(_))
        ));
    }

    #[test]
    fn variables_and_filters() {
        let tools = Tools::from_json_str(r#"[{"name": "now"}]"#).expect("tools");
        let messages = vec![Message {
            content: None,
            ..Message::new("user", "")
        }];
        let opts = PromptOptions {
            datetime: Some("2025-01-02".into()),
            bos_token: "<s>".into(),
            add_generation_prompt: false,
            eos_token: String::new(),
        };
        let text = render(
            "{{ bos_token }}|{{ datetime }}|{{ add_generation_prompt }}|{{ tools[0].description }}|\
             {{ tools[0].parameters|tojson }}|{{ messages[0].content }}|{{ messages[0].tool_calls|length }}|\
             {{ messages[0].tool_call_id is none }}|{{ {'a': \"<it's>\", 'é': [1, 2.5]}|tojson }}|\
             {{ [1]|tojson(indent=2) }}|{{ '{\"b\":1,\"a\":2}'|fromjson|tojson }}|{{ functions == functions_json }}",
            &messages,
            &tools,
            &opts,
        )
        .expect("renders");
        assert_eq!(
            text,
            "<s>|2025-01-02|False||{\"type\": \"object\", \"properties\": {}}||0|True|\
             {\"a\": \"<it's>\", \"é\": [1, 2.5]}|[\n  1\n]|{\"b\": 1, \"a\": 2}|True"
        );
        let text = render("{{ functions }}", &[], &tools, &opts).expect("renders");
        assert_eq!(
            text,
            "[\n  {\n    \"name\": \"now\",\n    \"description\": \"\",\n    \"parameters\": {\n      \"type\": \"object\",\n      \"properties\": {}\n    }\n  }\n]"
        );
        let text = render("{{ functions_yaml }}", &[], &tools, &opts).expect("renders");
        assert_eq!(text, "now: # No parameters");
    }

    #[test]
    fn fallback_turn_formats_render_a_conversation() {
        let tools = Tools::from_json_str(r#"[{"name": "now"}]"#).expect("tools");
        let call = ToolCall::new("call_0", "now", "{}");
        let messages = vec![
            Message::new("system", "Be brief."),
            Message::new("user", "Time? "),
            Message {
                tool_calls: vec![call],
                ..Message::new("assistant", "")
            },
            Message {
                name: Some("now".into()),
                tool_call_id: Some("call_0".into()),
                ..Message::new("tool", "12:00")
            },
        ];
        let opts = PromptOptions::default().bos_token("<bos>".into());
        let gemma = render_chat_template(
            include_str!("../grammars/chat/gemma.jinja"),
            &messages,
            &tools,
            &opts,
        )
        .expect("renders");
        assert_eq!(
            gemma,
            "<bos><start_of_turn>user\nBe brief.\n\nTime?<end_of_turn>\n\
             <start_of_turn>model\n{\"name\": \"now\", \"arguments\": {}}<end_of_turn>\n\
             <start_of_turn>user\nResult of the function call to now:\n12:00<end_of_turn>\n\
             <start_of_turn>model\n"
        );
        let chatml = render_chat_template(
            include_str!("../grammars/chat/chatml.jinja"),
            &messages[..2],
            &tools,
            &opts,
        )
        .expect("renders");
        assert_eq!(
            chatml,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nTime? <|im_end|>\n\
             <|im_start|>assistant\n"
        );
        let instructions = tools_instructions(&tools, builtin_writer("hermes")).expect("writes");
        assert!(instructions.contains(r#"{"name": "now", "description": "", "parameters""#));
        assert!(
            instructions.ends_with(
                "<tool_call>\n{\"name\": \"function_name\", \"arguments\": {\"argument_name\": \"argument value\"}}\n</tool_call>"
            ),
            "{instructions}"
        );
    }
}
