//! Dialects derived from a model's own chat template.
//!
//! A model is trained on what its chat template renders, so the template says how the model
//! writes its calls. [`derive_dialect`] renders probe conversations with the template (a reply
//! of text only, one call, two calls, text then a call), reads from the differences where calls
//! start and end, how the name and the arguments are written and how several calls are joined,
//! and writes a dialect file in the language of `grammars/*.gbnf`: the file a user would have
//! written by hand, which they can keep and edit (`callmask dialects --from-template`).
//!
//! Trade-offs:
//! - **Exact, not lenient.** The derived grammar allows what the template writes, with the
//!   whitespace between markers relaxed to `@ws`; it does not guess the variants a family's
//!   parsers also read (a missing closing tag, text after the calls). A built-in dialect, where
//!   one exists, reads more; derivation is for the model no built-in dialect matches.
//! - **Only the layouts callmask has a builtin for**: a JSON call object (`@json_call`, the
//!   arguments an object or a JSON string), a name followed by a JSON object or string
//!   (`@args`, `@args(as=string)`), Python keyword arguments (`@args(as=python)`) and tagged
//!   fields (`@xml_args`, raw strings and JSON for the rest, optionally with a type tag telling
//!   them apart). Anything else is refused with what the template was seen to write.
//! - **Checked before it is returned**: the derived file is compiled with the probe tools and
//!   must parse the template's own renderings back to the probe calls; a derivation that does
//!   not is an error, never a grammar that reads the template's calls wrong.

use crate::dialect::Dialect;
use crate::error::{Error, Result};
use crate::prompt::{rendered_turn, PromptOptions};
use crate::tools::{Message, ToolCall, Tools};
use crate::vocab::Vocab;
use serde_json::{json, Value as Json};

const NAME_A: &str = "probe_lookup_alpha";
const NAME_B: &str = "probe_lookup_beta";
const KEY_TEXT: &str = "probe_text";
const KEY_COUNT: &str = "probe_count";
const VALUE_TEXT: &str = "probe value";
const VALUE_COUNT: i64 = 42;
const COUNT_B: i64 = 7;
const TEXT_B: &str = "second value";
const REPLY: &str = "Probe reply text.";
const CALL_ID: &str = "call00000";
const CALL_ID_B: &str = "call00001";
/// Stands for a call id in the text read from the template (written `@call_id(..)`).
const ID_MARK: &str = "\u{1}";
/// Stands for a call index (written `/[0-9]+/`).
const INDEX_MARK: &str = "\u{2}";

/// A dialect derived from a chat template: its file text and what was read from the template.
#[derive(Debug, Clone)]
pub struct DerivedDialect {
    text: String,
    summary: String,
}

impl DerivedDialect {
    /// The dialect file (the language of `grammars/*.gbnf`), with a header saying what it was
    /// derived from.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// One line saying the layout read from the template (e.g. `tagged fields between
    /// "<tool_call>" and "</tool_call>", several calls, text before`).
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// The dialect, ready to compile with tool sets (named `derived`).
    pub fn dialect(&self) -> Result<Dialect> {
        Dialect::parse("derived", &self.text)
    }
}

/// Derives a dialect from `chat_template` (Jinja, as in `tokenizer_config.json` or a GGUF's
/// `tokenizer.chat_template`). With `vocab`, the markers that are its special tokens are
/// written as special tokens (`@special`), the others as text; without, marker-shaped pieces
/// (`<|...|>`, `[TOOL_CALLS]`) are written `@marker(..)` (the special token where the
/// vocabulary has one). [`Error::Dialect`] (dialect `derived`) when the template renders no
/// calls, renders them in a layout callmask has no builtin for, or the derived file does not
/// read the template's own calls back; the message says what the template wrote.
///
/// ```
/// let template = "{% for m in messages %}{% if m.role == 'assistant' %}{% for c in m.tool_calls %}\
///     <call>{{ c.function.name }}\n{{ c.function.arguments | tojson }}</call>{% endfor %}\
///     {{ m.content or '' }}{% else %}{{ m.content }}\n{% endif %}{% endfor %}";
/// let derived = callmask::derive_dialect(template, None)?;
/// assert!(derived.text().contains("@call("));
/// # Ok::<(), callmask::Error>(())
/// ```
pub fn derive_dialect(chat_template: &str, vocab: Option<&Vocab>) -> Result<DerivedDialect> {
    let probe = Probe::new(chat_template)?;
    let one = probe.calls_turn(&[call_a()])?.ok_or_else(|| {
        refused("the template refuses an assistant turn with one call".to_owned())
    })?;
    let core_a = locate(&one, NAME_A, &args_a())?;
    let pre = &one[..core_a.start];
    let post = &one[core_a.end..];
    let mut layout = core_a.layout.clone();
    let mut shape = Shape {
        section_open: with_id_marks(pre),
        section_close: with_id_marks(post),
        call_open: String::new(),
        call_close: String::new(),
        sep: None,
        text_before: false,
        think: false,
    };
    if let Some(two) = probe.calls_turn(&[call_a(), call_b()])? {
        if two.contains(NAME_B) {
            layout = shape.split_several(&two, &one, &core_a)?;
        }
    }
    if let Some(with_text) = probe.text_and_call_turn()? {
        shape.text_before = with_text.starts_with(REPLY) && with_text.ends_with(&one);
    }
    // A template that knows reasoning blocks lets a turn open with one, rendered or not.
    shape.think = probe.think.get()
        || (chat_template.contains("<think>") && chat_template.contains("</think>"));
    if shape.first_marker().is_empty() && !matches!(layout, Layout::JsonCall { .. }) {
        return Err(refused(format!(
            "the calls open with the function's name and no marker before it, so free text \
             could not be told from a call: {one:?}"
        )));
    }
    // Call ids: of the probe's length where the template refuses another (Mistral's nine
    // characters), else any short run of letters, digits, `_` and `-` (the model's choice).
    let long_id = ToolCall::new("call0000000000", NAME_A, args_a().to_string());
    let id_regex = match probe.calls_turn(&[long_id]) {
        Ok(Some(_)) => "[A-Za-z0-9_-]{1,64}".to_owned(),
        _ => format!("[A-Za-z0-9]{{{}}}", CALL_ID.len()),
    };
    if let Layout::JsonCall {
        id_key: Some((_, re)),
        ..
    } = &mut layout
    {
        if re.starts_with("[A-Za-z0-9]{") {
            *re = id_regex.clone();
        }
    }
    let writer = Writer { vocab, id_regex };
    let text = shape.file(&layout, &writer, &one);
    let summary = shape.summary(&layout);
    let derived = DerivedDialect { text, summary };
    check_reads_back(&derived, &probe, &one)?;
    Ok(derived)
}

fn refused(message: String) -> Error {
    Error::Dialect {
        dialect: "derived".into(),
        message,
    }
}

fn args_a() -> Json {
    json!({KEY_TEXT: VALUE_TEXT, KEY_COUNT: VALUE_COUNT})
}

fn args_b() -> Json {
    json!({KEY_TEXT: TEXT_B, KEY_COUNT: COUNT_B})
}

fn call_a() -> ToolCall {
    ToolCall::new(CALL_ID, NAME_A, args_a().to_string())
}

fn call_b() -> ToolCall {
    ToolCall::new(CALL_ID_B, NAME_B, args_b().to_string())
}

fn probe_tools() -> Tools {
    let params = json!({"type": "object", "properties": {
        KEY_TEXT: {"type": "string", "description": "A text."},
        KEY_COUNT: {"type": "integer", "description": "A count."}},
        "required": [KEY_COUNT]});
    Tools::from_json_str(
        &json!([
            {"type": "function", "function": {"name": NAME_A, "description": "Looks up a text.", "parameters": params}},
            {"type": "function", "function": {"name": NAME_B, "description": "Looks up a count.", "parameters": params}}
        ])
        .to_string(),
    )
    .expect("the probe tools are valid")
}

/// The template with the probe conversation: renders assistant turns and cuts them out.
struct Probe<'t> {
    template: &'t str,
    tools: Tools,
    options: PromptOptions,
    /// What the template writes after a reply's text (end-of-turn marks).
    end: String,
    /// Whether the turns open with a reasoning block (`<think>..</think>`).
    think: std::cell::Cell<bool>,
}

impl<'t> Probe<'t> {
    fn new(template: &'t str) -> Result<Self> {
        let mut probe = Probe {
            template,
            tools: probe_tools(),
            options: PromptOptions::default()
                .bos_token("<s>".into())
                .eos_token("</s>".into()),
            end: String::new(),
            think: std::cell::Cell::new(false),
        };
        let text = probe
            .turn(Some(REPLY), &[])?
            .ok_or_else(|| refused("the template refuses an assistant turn of text".into()))?;
        let Some(at) = text.find(REPLY) else {
            return Err(refused(format!(
                "the template does not write an assistant turn's text (it wrote {text:?})"
            )));
        };
        probe.end = text[at + REPLY.len()..].to_owned();
        Ok(probe)
    }

    /// The assistant turn with `content` and `calls`, cut from the rendering after the prompt
    /// that opens it (not inside a marker); `None` where the template raises an exception.
    fn turn(&self, content: Option<&str>, calls: &[ToolCall]) -> Result<Option<String>> {
        let user = Message::new("user", "Probe question?");
        let mut turn = Message::new("assistant", content.unwrap_or(""));
        if content.is_none() {
            turn.content = None;
        }
        turn.tool_calls = calls.to_vec();
        match rendered_turn(self.template, &[user, turn], &self.tools, &self.options) {
            Ok(Some((with, start))) => Ok(Some(with[start..].to_owned())),
            Ok(None) => Ok(None),
            Err(e) => Err(refused(format!("the template does not render: {e}"))),
        }
    }

    /// A turn with calls, less the end-of-turn marks; tried with no content, then empty content
    /// (templates differ in which they take).
    fn calls_turn(&self, calls: &[ToolCall]) -> Result<Option<String>> {
        let mut error = None;
        let mut found: Option<String> = None;
        for content in [None, Some("")] {
            match self.turn(content, calls) {
                Ok(Some(t)) if t.contains(&calls[0].function.name) => {
                    // A template that prints a missing content as `None` is read with "".
                    if found.is_none() || !t.contains("None") {
                        found = Some(t);
                    }
                    if !found.as_deref().is_some_and(|f| f.contains("None")) {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => error = Some(e),
            }
        }
        match found {
            Some(t) => Ok(Some(self.strip_think(&self.strip_end(&t)))),
            None => error.map_or(Ok(None), Err),
        }
    }

    /// A turn of text then one call, less the end-of-turn marks.
    fn text_and_call_turn(&self) -> Result<Option<String>> {
        Ok(self
            .turn(Some(REPLY), &[call_a()])?
            .filter(|t| t.contains(NAME_A))
            .map(|t| self.strip_think(&self.strip_end(&t))))
    }

    /// `turn` less an empty reasoning block it opens with (`<think>\n\n</think>\n\n`, as
    /// thinking templates write the last turn), or the `</think>` closing one the prompt
    /// opened; noted in `self.think`.
    fn strip_think(&self, turn: &str) -> String {
        let trimmed = turn.trim_start();
        if let Some(r) = trimmed.strip_prefix("<think>") {
            if let Some(end) = r.find("</think>") {
                if r[..end].trim().is_empty() {
                    self.think.set(true);
                    return r[end + "</think>".len()..].trim_start().to_owned();
                }
            }
        }
        if let Some(r) = trimmed.strip_prefix("</think>") {
            self.think.set(true);
            return r.trim_start().to_owned();
        }
        turn.to_owned()
    }

    /// `turn` less what the template writes after a turn: the text turn's end marks, or as
    /// much of them as it shares from a marker or line break on (a turn with calls may end
    /// with another end token: Llama 3.1's `<|eom_id|>`), then trailing whitespace.
    fn strip_end(&self, turn: &str) -> String {
        let shared = turn
            .chars()
            .rev()
            .zip(self.end.chars().rev())
            .take_while(|(a, b)| a == b)
            .map(|(a, _)| a.len_utf8())
            .sum::<usize>();
        let tail = &turn[turn.len() - shared..];
        let cut = tail
            .char_indices()
            .find(|(k, c)| *k == 0 && shared == self.end.len() || *c == '<' || c.is_whitespace())
            .map(|(k, _)| turn.len() - shared + k)
            .unwrap_or(turn.len());
        turn[..cut].trim_end().to_owned()
    }
}

/// How one call's name and arguments are written.
#[derive(Debug, Clone, PartialEq)]
enum Layout {
    /// `{"NAME_KEY": "f", "ARGS_KEY": {...}}` (or the arguments as a JSON string).
    JsonCall {
        name_key: String,
        args_key: String,
        args_string: bool,
        any_order: bool,
        /// A key holding the call's id, and the id's regex.
        id_key: Option<(String, String)>,
    },
    /// The name, `between`, then the arguments as a JSON object or string.
    NameJson { between: String, args_string: bool },
    /// `f(k=v, ...)`.
    Python,
    /// `f{k:<|"|>text<|"|>,n:1}` (Gemma 4's notation).
    Gemma,
    /// The name, `between`, then tagged fields.
    Tagged {
        between: String,
        key_prefix: String,
        key_suffix: String,
        json_key_suffix: Option<String>,
        value_suffix: String,
        sep: String,
        pad: String,
    },
}

/// Where one call's core (from its JSON object's brace or its name to its arguments' end)
/// is in a turn, and its layout.
#[derive(Debug)]
struct Core {
    start: usize,
    end: usize,
    layout: Layout,
}

/// The JSON value that starts at `text[at..]` and where it ends.
fn json_at(text: &str, at: usize) -> Option<(Json, usize)> {
    let mut stream = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Json>();
    match stream.next() {
        Some(Ok(v)) => Some((v, at + stream.byte_offset())),
        _ => None,
    }
}

/// Whether `v` is `args`, or a JSON string holding it; `Some(true)` for the string.
fn args_form(v: &Json, args: &Json) -> Option<bool> {
    if v == args {
        return Some(false);
    }
    let s = v.as_str()?;
    (serde_json::from_str::<Json>(s).ok()? == *args).then_some(true)
}

/// The call named `name` with `args` in `turn`: its core and layout.
fn locate(turn: &str, name: &str, args: &Json) -> Result<Core> {
    let Some(at) = turn.find(name) else {
        return Err(refused(format!(
            "the template did not write the call's name; it wrote {turn:?}"
        )));
    };
    if let Some(core) = json_call_around(turn, at, name, args) {
        return Ok(core);
    }
    let after = &turn[at + name.len()..];
    if after.starts_with('(') && after.contains(&format!("{KEY_COUNT}=")) {
        let close = after
            .find(')')
            .ok_or_else(|| refused(format!("Python-style call not closed in {turn:?}")))?;
        return Ok(Core {
            start: at,
            end: at + name.len() + close + 1,
            layout: Layout::Python,
        });
    }
    if after.starts_with('{') && after.contains(&format!("{KEY_TEXT}:<|\"|>")) {
        let close = after
            .find('}')
            .ok_or_else(|| refused(format!("Gemma-style arguments not closed in {turn:?}")))?;
        return Ok(Core {
            start: at,
            end: at + name.len() + close + 1,
            layout: Layout::Gemma,
        });
    }
    if let Some(k) = after.find(['{', '"']) {
        let between = &after[..k];
        if between.len() <= 40 && !between.contains(KEY_COUNT) {
            let from = at + name.len() + k;
            if let Some((v, end)) = json_at(turn, from) {
                if let Some(args_string) = args_form(&v, args) {
                    return Ok(Core {
                        start: at,
                        end,
                        layout: Layout::NameJson {
                            between: between.to_owned(),
                            args_string,
                        },
                    });
                }
            }
        }
    }
    tagged(turn, at, name, args).ok_or_else(|| {
        refused(format!(
            "no layout callmask knows writes the call as the template does: {turn:?}"
        ))
    })
}

/// A JSON object around `turn[at..]` (the name's place) that holds the name and the arguments.
fn json_call_around(turn: &str, at: usize, name: &str, args: &Json) -> Option<Core> {
    for (open, _) in turn[..at]
        .match_indices('{')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .take(8)
    {
        let Some((Json::Object(map), end)) = json_at(turn, open) else {
            continue;
        };
        let Some(name_key) = map
            .iter()
            .find(|(_, v)| v.as_str() == Some(name))
            .map(|(k, _)| k.clone())
        else {
            continue;
        };
        let Some((args_key, args_string)) = map
            .iter()
            .find_map(|(k, v)| args_form(v, args).map(|s| (k.clone(), s)))
        else {
            continue;
        };
        let mut id_key = None;
        for (k, v) in &map {
            if *k == name_key || *k == args_key {
                continue;
            }
            match v.as_str() {
                Some(id) if id.starts_with("call0000") => {
                    id_key = Some((k.clone(), format!("[A-Za-z0-9]{{{}}}", id.len())))
                }
                Some("0" | "1") => id_key = Some((k.clone(), "[0-9]+".to_owned())),
                _ => return None,
            }
        }
        let first_key = turn[open + 1..end]
            .trim_start()
            .starts_with(&format!("\"{name_key}\""));
        return Some(Core {
            start: open,
            end,
            layout: Layout::JsonCall {
                any_order: !first_key,
                name_key,
                args_key,
                args_string,
                id_key,
            },
        });
    }
    None
}

/// Tagged fields after the name: `KP key KS value VS` for both probe arguments.
fn tagged(turn: &str, at: usize, name: &str, args: &Json) -> Option<Core> {
    let base = at + name.len();
    let after = &turn[base..];
    let value_text = args.get(KEY_TEXT)?.as_str()?;
    let count = args.get(KEY_COUNT)?.to_string();
    let field = |key: &str, value: &str| -> Option<(usize, usize, usize)> {
        let k = after.find(key)?;
        let v = k + key.len() + after[k + key.len()..].find(value)?;
        Some((k, v, v + value.len()))
    };
    let text = field(KEY_TEXT, value_text)?;
    let num = field(KEY_COUNT, &count)?;
    if after[..text.1].ends_with('"') {
        return None; // strings written as JSON between tags: no builtin writes them
    }
    let (first, first_key, second, second_key) = if text.0 < num.0 {
        (text, KEY_TEXT, num, KEY_COUNT)
    } else {
        (num, KEY_COUNT, text, KEY_TEXT)
    };
    let head = &after[..first.0];
    let mid = &after[first.2..second.0];
    // The key prefix starts after whatever closes the name or the value before it (the
    // `>` of `<function=f>` and of `</parameter>` look alike from the end).
    let mut kp = common_suffix(head, mid);
    while kp.starts_with(['>', ']', '}', ')', '"']) {
        kp = &kp[1..];
    }
    if kp.is_empty() || kp.len() == mid.len() {
        return None;
    }
    let value_suffix = &mid[..mid.len() - kp.len()];
    if !after[second.2..].starts_with(value_suffix) {
        return None;
    }
    let suffix_of = |f: (usize, usize, usize), key: &str| after[f.0 + key.len()..f.1].to_owned();
    let (ks_text, ks_num) = if first_key == KEY_TEXT {
        (suffix_of(first, first_key), suffix_of(second, second_key))
    } else {
        (suffix_of(second, second_key), suffix_of(first, first_key))
    };
    // One leading line break (or run of whitespace) of the key prefix is `sep`; the
    // whitespace the key suffix ends with and the value suffix starts with is `pad`.
    let sep: String = kp.chars().take_while(|c| c.is_whitespace()).collect();
    let key_prefix = kp[sep.len()..].to_owned();
    let ws_end: String = {
        let rev: String = ks_text
            .chars()
            .rev()
            .take_while(|c| c.is_whitespace())
            .collect();
        rev.chars().rev().collect()
    };
    let pad =
        if !ws_end.is_empty() && value_suffix.starts_with(&ws_end) && ks_num.ends_with(&ws_end) {
            ws_end
        } else {
            String::new()
        };
    let strip = |s: &str| s[..s.len() - pad.len()].to_owned();
    let key_suffix = strip(&ks_text);
    let json_suffix = strip(&ks_num);
    let between = head[..head.len() - kp.len()].to_owned();
    if key_prefix.is_empty() || between.contains(KEY_TEXT) {
        return None;
    }
    Some(Core {
        start: at,
        end: base + second.2 + value_suffix.len(),
        layout: Layout::Tagged {
            between,
            key_prefix,
            json_key_suffix: (json_suffix != key_suffix).then_some(json_suffix),
            key_suffix,
            value_suffix: value_suffix[pad.len()..].to_owned(),
            sep,
            pad,
        },
    })
}

/// `k`, or the end of the marker `k` falls inside in `s`.
fn after_marker(s: &str, k: usize) -> usize {
    marker_spans(s)
        .into_iter()
        .find(|&(a, b)| a < k && k < b)
        .map_or(k, |(_, b)| b)
}

/// `k`, or the start of the marker `k` falls inside in `s`.
fn before_marker(s: &str, k: usize) -> usize {
    marker_spans(s)
        .into_iter()
        .find(|&(a, b)| a < k && k < b)
        .map_or(k, |(a, _)| a)
}

/// Where `s`'s marker-shaped pieces are.
fn marker_spans(s: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut at = 0;
    for part in split_markers(s) {
        if is_marker(part) {
            spans.push((at, at + part.len()));
        }
        at += part.len();
    }
    spans
}

fn common_suffix<'a>(a: &'a str, b: &str) -> &'a str {
    let n: usize = a
        .chars()
        .rev()
        .zip(b.chars().rev())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.len_utf8())
        .sum();
    &a[a.len() - n..]
}

fn common_prefix<'a>(a: &'a str, b: &str) -> &'a str {
    let n: usize = a
        .chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.len_utf8())
        .sum();
    &a[..n]
}

/// Where calls go: the section around them, each call's own open and close, the separator.
struct Shape {
    section_open: String,
    section_close: String,
    call_open: String,
    call_close: String,
    /// `None`: one call per turn.
    sep: Option<String>,
    text_before: bool,
    /// Whether an optional reasoning block `<think>..</think>` opens the output.
    think: bool,
}

impl Shape {
    /// Reads the two-call turn: what lies between the calls is one call's close, the
    /// separator and the next call's open. Returns the layout both calls share (a call index
    /// the template numbers, `:0` then `:1`, becomes a number).
    fn split_several(&mut self, two: &str, one: &str, core_a: &Core) -> Result<Layout> {
        let pre = &one[..core_a.start];
        let post = &one[core_a.end..];
        let core_text = &one[core_a.start..core_a.end];
        let differs = || {
            refused(format!(
                "the template writes two calls unlike one: one call {one:?}, two {two:?}"
            ))
        };
        if !two.starts_with(pre) || !two[pre.len()..].starts_with(core_text) || !two.ends_with(post)
        {
            return Err(differs());
        }
        let after_a = pre.len() + core_text.len();
        let core_b = locate(two, NAME_B, &args_b())?;
        if core_b.start < after_a || core_b.end != two.len() - post.len() {
            return Err(differs());
        }
        let layout = shared_layout(&core_a.layout, &core_b.layout).ok_or_else(differs)?;
        let (pre, post) = (with_id_marks(pre), with_id_marks(post));
        let mid = with_id_marks(&two[after_a..core_b.start]);
        let call_open = common_suffix(&mid, &pre);
        let call_open = &call_open
            [after_marker(&pre, pre.len() - call_open.len()) - (pre.len() - call_open.len())..];
        let rest = &mid[..mid.len() - call_open.len()];
        let call_close = common_prefix(rest, &post);
        let call_close = &call_close[..before_marker(&post, call_close.len())];
        self.sep = Some(rest[call_close.len()..].to_owned());
        self.call_open = call_open.to_owned();
        self.call_close = call_close.to_owned();
        self.section_open = pre[..pre.len() - call_open.len()].to_owned();
        self.section_close = post[call_close.len()..].to_owned();
        Ok(layout)
    }

    /// The first marker of the calls (what ends free text before them): the first
    /// marker-shaped piece they open with, else their opening text up to whitespace.
    fn first_marker(&self) -> String {
        let open = format!("{}{}", self.section_open, self.call_open);
        let open = open.trim_start();
        match split_markers(open).first() {
            Some(m) if is_marker(m) => (*m).to_owned(),
            _ => open
                .split(char::is_whitespace)
                .next()
                .unwrap_or("")
                .to_owned(),
        }
    }

    fn file(&self, layout: &Layout, w: &Writer, one: &str) -> String {
        let mut out = String::new();
        out.push_str(
            "# Derived from a chat template by callmask (`callmask dialects --from-template`).\n",
        );
        out.push_str(&format!("# {}\n", self.summary(layout)));
        for line in format!("The template's one-call turn: {one:?}").lines() {
            out.push_str(&format!("# {line}\n"));
        }
        let marker = self.first_marker();
        let calls = match &self.sep {
            Some(_) => "section_open call (sep call)* section_close",
            None => "section_open call section_close",
        };
        let think = if self.think { "think? " } else { "" };
        let root = if self.text_before && marker.chars().count() >= 2 {
            format!(
                "root ::= {think}@text_without({}) ({calls})?\n",
                w.quoted(&marker)
            )
        } else {
            let first = match (marker.chars().next(), layout) {
                (Some(c), _) => c,
                (None, Layout::JsonCall { .. }) => '{',
                // checked by `derive_dialect`
                (None, _) => return String::new(),
            };
            format!(
                "root ::= {think}({calls}\n      | @text_matching({}))\n",
                w.quoted(&format!("(?:[^{}\\s](?s:.)*)?", regex_syntax_escape(first)))
            )
        };
        out.push_str(&root);
        if self.think {
            out.push_str("# A reasoning block opens the turn (where the prompt opens it, feed `<think>` first).\n");
            out.push_str("think ::= \"<think>\" @reasoning(\"</think>\") \"</think>\" @ws\n");
        }
        let rule = |name: &str, text: &str| {
            let p = w.pieces(text);
            format!(
                "{name} ::= {}\n",
                if p.is_empty() { "\"\"".to_owned() } else { p }
            )
        };
        out.push_str(&rule("section_open", &self.section_open));
        out.push_str(&rule("section_close", &self.section_close));
        if let Some(sep) = &self.sep {
            out.push_str(&rule("sep", sep));
        }
        let parts: Vec<String> = [
            w.pieces(&self.call_open),
            w.core(layout),
            w.pieces(&self.call_close),
        ]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect();
        let call = match layout {
            Layout::JsonCall { .. } => parts.join(" "),
            _ => format!("@call({})", parts.join(" ")),
        };
        out.push_str(&format!("call ::= {call}\n"));
        out
    }

    fn summary(&self, layout: &Layout) -> String {
        let what = match layout {
            Layout::JsonCall {
                args_string: true, ..
            } => "JSON call objects, arguments as a JSON string",
            Layout::JsonCall { .. } => "JSON call objects",
            Layout::NameJson {
                args_string: true, ..
            } => "the name, then the arguments as a JSON string",
            Layout::NameJson { .. } => "the name, then the arguments as a JSON object",
            Layout::Python => "Python calls",
            Layout::Gemma => "the name, then the arguments in Gemma's notation",
            Layout::Tagged {
                json_key_suffix: Some(_),
                ..
            } => "the name, then type-tagged fields",
            Layout::Tagged { .. } => "the name, then tagged fields",
        };
        format!(
            "{what}; calls open with {:?}; {}; {}",
            self.first_marker(),
            if self.sep.is_some() {
                "several calls"
            } else {
                "one call a turn"
            },
            if self.text_before {
                "text may come before"
            } else {
                "text or calls"
            }
        )
    }
}

/// Where the template writes a call id (`call00000`, `call00001`), [`ID_MARK`].
fn with_id_marks(s: &str) -> String {
    s.replace(CALL_ID, ID_MARK).replace(CALL_ID_B, ID_MARK)
}

/// The layout of two calls' cores, where they differ only in call ids and in a call index
/// (`0` where the first call has it and `1` in the second: [`INDEX_MARK`]).
fn shared_layout(a: &Layout, b: &Layout) -> Option<Layout> {
    let unify = |x: &str, y: &str| -> Option<String> {
        let (x, y) = (with_id_marks(x), with_id_marks(y));
        if x == y {
            return Some(x);
        }
        let (xs, ys): (Vec<char>, Vec<char>) = (x.chars().collect(), y.chars().collect());
        let diff: Vec<usize> = (0..xs.len().min(ys.len()))
            .filter(|&i| xs[i] != ys[i])
            .collect();
        (xs.len() == ys.len() && diff.len() == 1 && xs[diff[0]] == '0' && ys[diff[0]] == '1').then(
            || {
                let mut out = xs;
                out[diff[0]] = INDEX_MARK.chars().next().unwrap_or('0');
                out.into_iter().collect()
            },
        )
    };
    match (a, b) {
        (
            Layout::NameJson {
                between: x,
                args_string: s,
            },
            Layout::NameJson {
                between: y,
                args_string: t,
            },
        ) if s == t => Some(Layout::NameJson {
            between: unify(x, y)?,
            args_string: *s,
        }),
        (Layout::Tagged { between: x, .. }, Layout::Tagged { between: y, .. }) => {
            let mut l = a.clone();
            if let Layout::Tagged { between, .. } = &mut l {
                *between = unify(x, y)?;
            }
            (l == {
                let mut m = b.clone();
                if let Layout::Tagged { between, .. } = &mut m {
                    *between = unify(x, y)?;
                }
                m
            })
            .then_some(l)
        }
        _ => (a == b).then(|| a.clone()),
    }
}

fn regex_syntax_escape(c: char) -> String {
    if matches!(c, '\\' | ']' | '[' | '^' | '-' | '&' | '~') {
        format!("\\{c}")
    } else {
        c.to_string()
    }
}

/// Writes literal text as grammar pieces.
struct Writer<'v> {
    vocab: Option<&'v Vocab>,
    /// The regex of a call id the model writes.
    id_regex: String,
}

impl Writer<'_> {
    /// A quoted grammar literal.
    fn quoted(&self, s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// A marker-shaped piece (`<|x|>`, `<｜x｜>`, `[TOOL_CALLS]`, `<x|>`, `<|x>`) as a special
    /// token or marker; other text quoted.
    fn piece(&self, s: &str) -> String {
        if is_marker(s) {
            return match self.vocab {
                Some(v) if v.special_token(s).is_some() => format!("@special({})", self.quoted(s)),
                Some(_) => self.quoted(s),
                None => format!("@marker({})", self.quoted(s)),
            };
        }
        self.quoted(s)
    }

    /// Literal text as pieces: markers, whitespace runs (at most one line break) as `@ws`,
    /// the rest quoted; `""` for nothing.
    fn pieces(&self, s: &str) -> String {
        let mut out: Vec<String> = Vec::new();
        for part in split_markers(s) {
            if part == ID_MARK {
                out.push(format!("@call_id(/{}/)", self.id_regex));
                continue;
            }
            if part == INDEX_MARK {
                out.push("/[0-9]+/".into());
                continue;
            }
            if is_marker(part) {
                out.push(self.piece(part));
                continue;
            }
            let mut rest = part;
            while !rest.is_empty() {
                let ws = rest.len() - rest.trim_start().len();
                if ws > 0 {
                    let run = &rest[..ws];
                    if run.matches('\n').count() <= 1 {
                        if out.last().map(String::as_str) != Some("@ws") {
                            out.push("@ws".into());
                        }
                    } else {
                        out.push(self.quoted(run));
                    }
                    rest = &rest[ws..];
                    continue;
                }
                let word = rest.find(char::is_whitespace).unwrap_or(rest.len());
                out.push(self.quoted(&rest[..word]));
                rest = &rest[word..];
            }
        }
        out.join(" ")
    }

    /// An affix of `@xml_args`: markers inside it as tokens, in parentheses.
    fn affix(&self, s: &str) -> String {
        let parts: Vec<String> = split_markers(s)
            .into_iter()
            .map(|p| self.piece(p))
            .collect();
        if parts.len() == 1 {
            parts.into_iter().next().unwrap_or_default()
        } else {
            format!("({})", parts.join(" "))
        }
    }

    fn core(&self, layout: &Layout) -> String {
        match layout {
            Layout::JsonCall {
                name_key,
                args_key,
                args_string,
                any_order,
                id_key,
            } => {
                let mut s = format!(
                    "@json_call(name_key={}, args_key={}, args=\"{}\"",
                    self.quoted(name_key),
                    self.quoted(args_key),
                    if *args_string { "string" } else { "object" }
                );
                if *any_order {
                    s.push_str(", keys=\"any\"");
                }
                if let Some((k, re)) = id_key {
                    s.push_str(&format!(
                        ", id_key={}, id={}",
                        self.quoted(k),
                        self.quoted(re)
                    ));
                }
                s.push(')');
                s
            }
            Layout::NameJson {
                between,
                args_string,
            } => format!(
                "@name {} {}",
                self.pieces(between),
                if *args_string {
                    "@args(as=string)"
                } else {
                    "@args"
                }
            ),
            Layout::Python => "@name @args(as=python)".into(),
            Layout::Gemma => "@name @args(as=gemma)".into(),
            Layout::Tagged {
                between,
                key_prefix,
                key_suffix,
                json_key_suffix,
                value_suffix,
                sep,
                pad,
            } => {
                let mut s = format!(
                    "@name {} @xml_args(key_prefix={}, key_suffix={}",
                    self.pieces(between),
                    self.affix(key_prefix),
                    self.affix(key_suffix)
                );
                if let Some(j) = json_key_suffix {
                    s.push_str(&format!(", json_key_suffix={}", self.affix(j)));
                }
                s.push_str(&format!(", value_suffix={}", self.affix(value_suffix)));
                if !sep.is_empty() {
                    s.push_str(&format!(", sep={}", self.quoted(sep)));
                }
                if !pad.is_empty() {
                    s.push_str(&format!(", pad={}", self.quoted(pad)));
                }
                s.push(')');
                s
            }
        }
    }
}

fn is_marker(s: &str) -> bool {
    let b = s.as_bytes();
    let angle = s.starts_with('<')
        && s.ends_with('>')
        && s.chars().count() >= 3
        && (s.contains('|') || s.contains('｜'))
        && !s[1..s.len() - 1].contains(['<', '>', ' ', '\n']);
    let bracket = b.len() >= 4
        && b[0] == b'['
        && b[b.len() - 1] == b']'
        && b[1..b.len() - 1]
            .iter()
            .all(|c| c.is_ascii_uppercase() || *c == b'_');
    angle || bracket
}

/// `s` cut around its marker-shaped pieces.
fn split_markers(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut from = 0;
    let mut k = 0;
    while k < s.len() {
        let c = s[k..].chars().next().unwrap_or(' ');
        let close = match c {
            '<' => s[k..].find('>').map(|e| k + e + 1),
            '[' => s[k..].find(']').map(|e| k + e + 1),
            '\u{1}' | '\u{2}' => Some(k + 1),
            _ => None,
        };
        if let Some(e) = close.filter(|&e| is_marker(&s[k..e]) || e == k + 1) {
            if from < k {
                out.push(&s[from..k]);
            }
            out.push(&s[k..e]);
            from = e;
            k = e;
        } else {
            k += c.len_utf8();
        }
    }
    if from < s.len() {
        out.push(&s[from..]);
    }
    out
}

/// The derived file must parse the template's renderings to the probe calls.
fn check_reads_back(derived: &DerivedDialect, probe: &Probe, one: &str) -> Result<()> {
    let dialect = derived.dialect().map_err(|e| {
        refused(format!(
            "the derived file does not parse ({e}):\n{}",
            derived.text
        ))
    })?;
    let grammar = dialect
        .compile(&probe.tools, &crate::dialect::DialectOptions::default())
        .map_err(|e| {
            refused(format!(
                "the derived file does not compile ({e}):\n{}",
                derived.text
            ))
        })?;
    let mut turns = vec![(one.to_owned(), vec![(NAME_A, args_a())])];
    if derived.text.contains("(sep call)*") {
        if let Some(two) = probe.calls_turn(&[call_a(), call_b()])? {
            turns.push((two, vec![(NAME_A, args_a()), (NAME_B, args_b())]));
        }
    }
    for (turn, want) in turns {
        let parsed = grammar.parse(&turn).map_err(|e| {
            refused(format!(
                "the derived file does not read the template's turn {turn:?} ({e}):\n{}",
                derived.text
            ))
        })?;
        let got: Vec<(String, Json)> = parsed
            .tool_calls
            .iter()
            .map(|c| {
                (
                    c.function.name.clone(),
                    c.arguments_json().unwrap_or(Json::Null),
                )
            })
            .collect();
        let want: Vec<(String, Json)> = want.into_iter().map(|(n, a)| (n.to_owned(), a)).collect();
        if got != want {
            return Err(refused(format!(
                "the derived file reads the template's turn {turn:?} as other calls ({got:?}):\n{}",
                derived.text
            )));
        }
    }
    Ok(())
}
