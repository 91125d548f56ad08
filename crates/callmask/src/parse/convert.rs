//! Converting a call's argument span into JSON, whole or as it streams in.
//!
//! The output parser knows the exact byte span of a call's arguments and how they are written
//! ([`ArgEncoding`]): a JSON object, a JSON object inside a JSON string literal, or Python
//! keyword arguments. [`to_json`] turns a complete span into a [`serde_json::Value`] object;
//! [`StreamConverter`] does the same incrementally, handing out JSON text only once it is certain,
//! so that the deltas can be forwarded as OpenAI `tool_calls[].function.arguments` chunks.
//!
//! All three encodings go through one byte-driven machine (no recursion; nesting is limited to
//! [`MAX_DEPTH`]):
//!
//! - `Json` validates the text and passes it through unchanged, whitespace included.
//! - `JsonInString` decodes the outer string literal (escapes, surrogate pairs) and passes the
//!   decoded text through the `Json` machine.
//! - `Python` transliterates keyword arguments into a JSON object text: `{` first, `"name": `
//!   for each `name=`, strings re-escaped as JSON strings, `True`/`False`/`None` as
//!   `true`/`false`/`null`, lists and tuples as arrays, dicts (string keys only) as objects,
//!   numbers normalized where Python's spelling is not JSON's (`1_000` → `1000`, `1.` → `1.0`,
//!   `.5` → `0.5`, `+1` → `1`, `0x1f` → `31`, `01.5` → `1.5`), and `}` at the end. Separators
//!   are written as `, ` and `: `.
//!
//! Python details: strings take single or double quotes with Python's escapes (`\\ \' \" \a \b
//! \f \n \r \t \v`, octal `\0`..`\777`, `\xHH`, `\uXXXX`, `\UXXXXXXXX`, backslash-newline);
//! an unknown escape such as `\d` keeps its backslash, as Python does; `\N{...}`, prefixed
//! (`r''`, `b''`, `f''`) and triple-quoted strings are rejected. Adjacent string literals are
//! concatenated (`'a' "b"` is `"ab"`). A `\uXXXX` high surrogate followed by a low one is
//! combined into one character (as JSON would); a lone surrogate is an error, since JSON text
//! cannot carry it. `(x)` is just `x`, `(x,)` and `()` are arrays. Trailing commas are allowed
//! in argument lists, lists, tuples and dicts. A repeated keyword argument (Python refuses it,
//! but the grammar cannot exclude repeats of names outside `properties`) and a repeated dict key
//! are kept in the text, and the last value wins when parsed (as for a Python dict). Numbers that do not fit a finite `f64` are an error.

#[cfg(test)]
use serde_json::Value;
use std::fmt::Write as _;

pub use crate::grammar::ArgEncoding;

/// Most containers open at once (the argument object itself included, and Python's grouping
/// parentheses); deeper input is an error. Kept under `serde_json`'s own limit of 128.
pub const MAX_DEPTH: usize = 100;

/// Converts a complete argument span to a JSON object ([`Value::Object`]).
///
/// `Err` says what is wrong and at which byte offset of `span`.
#[cfg(test)]
pub(crate) fn to_json(enc: ArgEncoding, span: &[u8]) -> Result<Value, String> {
    let mut conv = StreamConverter::new(enc);
    let mut text = conv.push(span)?;
    text.push_str(&conv.finish()?);
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| format!("converted arguments are not valid JSON ({e}): {text}"))?;
    if value.is_object() {
        Ok(value)
    } else {
        Err("arguments are not a JSON object".to_string())
    }
}

/// Incremental converter of one argument span to JSON object text.
///
/// Feed the span's bytes with [`push`](Self::push) as they arrive, then call
/// [`finish`](Self::finish). Each call returns the JSON text that became certain (maybe
/// empty, always whole UTF-8 characters); the concatenation of all of them is a valid JSON
/// object text equivalent to [`to_json`]'s result. No text is ever handed out that valid input
/// could later contradict. After an error every later call returns the same error.
#[derive(Debug, Clone)]
pub struct StreamConverter {
    /// The span's encoding.
    enc: ArgEncoding,
    /// Pending bytes of an incomplete UTF-8 character.
    utf8: Utf8,
    /// The outer string literal's state (used by `JsonInString` only).
    outer: Outer,
    /// Gemma's notation read into JSON text (used by `Gemma` only).
    gemma: GemmaFront,
    /// The JSON validator or Python transliterator.
    machine: Machine,
    /// Bytes consumed so far.
    offset: usize,
    /// The first error, repeated by every later call.
    error: Option<String>,
    /// Whether `finish` was called.
    finished: bool,
}

impl StreamConverter {
    /// A converter for a span written in `enc`.
    pub fn new(enc: ArgEncoding) -> Self {
        StreamConverter {
            enc,
            utf8: Utf8::default(),
            outer: Outer::Before,
            gemma: GemmaFront::default(),
            machine: Machine::new(enc == ArgEncoding::Python),
            offset: 0,
            error: None,
            finished: false,
        }
    }

    /// Feeds the next bytes of the span; returns the new JSON text they make certain (may be
    /// empty). `Err` names the problem and its byte offset in the whole span.
    pub fn push(&mut self, bytes: &[u8]) -> Result<String, String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.finished {
            return Err("bytes pushed after finish".to_string());
        }
        for &b in bytes {
            let off = self.offset;
            self.offset += 1;
            if let Err(e) = self.byte(b, off) {
                self.error = Some(e.clone());
                return Err(e);
            }
        }
        Ok(std::mem::take(&mut self.machine.out))
    }

    /// Ends the span; returns the rest of the JSON text (e.g. the closing `}` of Python
    /// keyword arguments), or `Err` if the span is incomplete.
    pub fn finish(&mut self) -> Result<String, String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.finished {
            return Err("finish called twice".to_string());
        }
        self.finished = true;
        match self.finish_inner() {
            Ok(()) => Ok(std::mem::take(&mut self.machine.out)),
            Err(e) => {
                self.error = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Checks that nothing is left open and closes the machine.
    fn finish_inner(&mut self) -> Result<(), String> {
        let end = self.offset;
        if self.utf8.len > 0 {
            return Err(at("truncated UTF-8 sequence", self.utf8.start));
        }
        if self.enc == ArgEncoding::Gemma && !matches!(self.gemma.state, GState::Plain) {
            return Err(at("unterminated key or string", end));
        }
        if self.enc == ArgEncoding::JsonInString {
            match self.outer {
                Outer::Before => return Err(at("expected a JSON string literal", end)),
                Outer::In(_) => return Err(at("unterminated string literal", end)),
                Outer::After => {}
            }
        }
        self.machine.finish(end)
    }

    /// Feeds one byte at offset `off`.
    fn byte(&mut self, b: u8, off: usize) -> Result<(), String> {
        let Some((c, coff)) = self.utf8.push(b, off)? else {
            return Ok(());
        };
        if self.enc == ArgEncoding::Gemma {
            return self.gemma.step(&mut self.machine, c, coff);
        }
        if self.enc != ArgEncoding::JsonInString {
            return self.machine.feed(c, coff);
        }
        match &mut self.outer {
            Outer::Before => {
                if c == '"' {
                    self.outer = Outer::In(JsonStr::new());
                } else if !is_json_ws(c) {
                    return Err(at("expected a JSON string literal", coff));
                }
            }
            Outer::In(s) => match s.step(c, coff)? {
                JStep::Nothing => {}
                JStep::Char(inner) => self.machine.feed(inner, coff)?,
                JStep::End => self.outer = Outer::After,
            },
            Outer::After => {
                if !is_json_ws(c) {
                    return Err(at("unexpected character after the string literal", coff));
                }
            }
        }
        Ok(())
    }
}

/// Gemma's string quote.
const GEMMA_QUOTE: &str = "<|\"|>";

/// Reads Gemma's notation (`{k:<|"|>text<|"|>,n:1,l:[true,null]}`) into JSON text for the
/// JSON machine, which checks the rest: bare keys are quoted, strings between `<|"|>`s are
/// escaped (a quote's first bytes are held until they turn out to be text), spaces are kept.
#[derive(Debug, Clone, Default)]
struct GemmaFront {
    /// Per open container, innermost last: true for an object.
    objects: Vec<bool>,
    /// An object's key comes next (after its `{` or a `,`).
    want_key: bool,
    /// Where the reader is.
    state: GState,
}

/// Where [`GemmaFront`] is.
#[derive(Debug, Clone, Default)]
enum GState {
    /// Between tokens.
    #[default]
    Plain,
    /// In an opening quote, this many of its bytes read.
    Opening(usize),
    /// In a bare key, read so far.
    Key(String),
    /// In a string, what may still be its closing quote.
    Str(String),
}

impl GemmaFront {
    /// Consumes character `c` at `off`, feeding `m` the JSON it makes.
    fn step(&mut self, m: &mut Machine, c: char, off: usize) -> Result<(), String> {
        match &mut self.state {
            GState::Plain if self.want_key && c != '}' => {
                if c == ' ' {
                    return m.feed(c, off);
                }
                if !gemma_key_char(c) {
                    return Err(at("expected a key", off));
                }
                self.state = GState::Key(c.to_string());
                Ok(())
            }
            GState::Plain => {
                self.want_key = false;
                match c {
                    '<' => {
                        self.state = GState::Opening(1);
                        return Ok(());
                    }
                    '"' => return Err(at("a JSON string where Gemma quotes with <|\"|>", off)),
                    '{' | '[' => self.objects.push(c == '{'),
                    '}' | ']' => {
                        self.objects.pop();
                    }
                    ',' => self.want_key = self.objects.last() == Some(&true),
                    _ => {}
                }
                if c == '{' {
                    self.want_key = true;
                }
                m.feed(c, off)
            }
            GState::Opening(n) => {
                if !GEMMA_QUOTE[*n..].starts_with(c) {
                    return Err(at("expected a <|\"|> quote", off));
                }
                *n += 1;
                if *n == GEMMA_QUOTE.len() {
                    self.state = GState::Str(String::new());
                    m.feed('"', off)?;
                }
                Ok(())
            }
            GState::Key(k) => match c {
                ':' => {
                    let key = std::mem::take(k);
                    self.state = GState::Plain;
                    self.want_key = false;
                    m.feed('"', off)?;
                    for ch in key.trim_end_matches(' ').chars() {
                        feed_json_char(m, ch, off)?;
                    }
                    m.feed('"', off)?;
                    m.feed(':', off)
                }
                ' ' => {
                    k.push(c);
                    Ok(())
                }
                c if gemma_key_char(c) && !k.ends_with(' ') => {
                    k.push(c);
                    Ok(())
                }
                _ => Err(at("unexpected character in a key", off)),
            },
            GState::Str(held) => {
                held.push(c);
                loop {
                    if held == GEMMA_QUOTE {
                        self.state = GState::Plain;
                        return m.feed('"', off);
                    }
                    if GEMMA_QUOTE.starts_with(held.as_str()) {
                        return Ok(());
                    }
                    let first = held.remove(0);
                    feed_json_char(m, first, off)?;
                }
            }
        }
    }
}

/// A character a bare Gemma key may hold (see the schema compiler's `GEMMA_KEY`).
fn gemma_key_char(c: char) -> bool {
    c > ' ' && c != '\u{7f}' && !":,={}[]<>\"'\\".contains(c)
}

/// Feeds `c` to the JSON machine as a JSON string writes it.
fn feed_json_char(m: &mut Machine, c: char, off: usize) -> Result<(), String> {
    let mut text = String::new();
    push_json_char(&mut text, c);
    text.chars().try_for_each(|x| m.feed(x, off))
}

/// Formats an error message with its byte offset.
fn at(msg: impl std::fmt::Display, off: usize) -> String {
    format!("{msg} at byte {off}")
}

/// JSON whitespace.
fn is_json_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// Python whitespace between tokens.
fn is_py_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c')
}

/// First character of a Python name.
fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

/// Later character of a Python name.
fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Appends `c` to `out` as it is written inside a JSON string.
fn push_json_char(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        c if u32::from(c) < 0x20 => {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        }
        c => out.push(c),
    }
}

/// Combines a UTF-16 surrogate pair.
fn combine_surrogates(high: u32, low: u32) -> Option<char> {
    let hi = high.checked_sub(0xD800)?;
    let lo = low.checked_sub(0xDC00)?;
    char::from_u32(0x10000 + (hi << 10) + lo)
}

/// Assembles UTF-8 characters from bytes.
#[derive(Debug, Default, Clone)]
struct Utf8 {
    /// The bytes of the character so far.
    buf: [u8; 4],
    /// How many of `buf` are filled.
    len: usize,
    /// How many bytes the character has.
    need: usize,
    /// Offset of the character's first byte.
    start: usize,
}

impl Utf8 {
    /// Feeds the byte at `off`; returns a completed character with the offset of its first byte.
    fn push(&mut self, b: u8, off: usize) -> Result<Option<(char, usize)>, String> {
        if self.len == 0 {
            if b < 0x80 {
                return Ok(Some((char::from(b), off)));
            }
            self.need = match b {
                0xC2..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF4 => 4,
                _ => return Err(at("invalid UTF-8", off)),
            };
            self.buf[0] = b;
            self.len = 1;
            self.start = off;
            return Ok(None);
        }
        if b & 0xC0 != 0x80 {
            return Err(at("invalid UTF-8", self.start));
        }
        match self.buf.get_mut(self.len) {
            Some(slot) => *slot = b,
            None => return Err(at("invalid UTF-8", self.start)),
        }
        self.len += 1;
        if self.len < self.need {
            return Ok(None);
        }
        let decoded = self
            .buf
            .get(..self.len)
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .and_then(|s| s.chars().next());
        self.len = 0;
        match decoded {
            Some(c) => Ok(Some((c, self.start))),
            None => Err(at("invalid UTF-8", self.start)),
        }
    }
}

/// Where `JsonInString` is in its outer string literal.
#[derive(Debug, Clone)]
enum Outer {
    /// Before the opening quote.
    Before,
    /// Inside the literal.
    In(JsonStr),
    /// After the closing quote.
    After,
}

/// Escape state inside a JSON string.
#[derive(Clone, Copy, Debug)]
enum JEsc {
    /// Not in an escape.
    No,
    /// After a backslash.
    Backslash,
    /// In `\uXXXX`, `got` digits read.
    Hex {
        /// Digits read so far.
        got: u8,
        /// Their value.
        val: u32,
    },
}

/// What one character of a JSON string amounts to.
#[derive(Debug, Clone)]
enum JStep {
    /// Nothing yet (inside an escape).
    Nothing,
    /// A decoded character of the content.
    Char(char),
    /// The closing quote.
    End,
}

/// The inside of a JSON string (after its opening quote): validates and decodes escapes.
#[derive(Clone, Copy, Debug)]
struct JsonStr {
    /// Escape state.
    esc: JEsc,
    /// A high surrogate waiting for its low half.
    high: Option<u32>,
    /// Offset of the current escape's backslash.
    esc_start: usize,
}

impl JsonStr {
    /// State right after the opening quote.
    fn new() -> Self {
        JsonStr {
            esc: JEsc::No,
            high: None,
            esc_start: 0,
        }
    }

    /// Consumes character `c` at `off`.
    fn step(&mut self, c: char, off: usize) -> Result<JStep, String> {
        match self.esc {
            JEsc::No => {
                if self.high.is_some() && c != '\\' {
                    return Err(at("unpaired surrogate in \\u escape", self.esc_start));
                }
                match c {
                    '"' => Ok(JStep::End),
                    '\\' => {
                        self.esc = JEsc::Backslash;
                        self.esc_start = off;
                        Ok(JStep::Nothing)
                    }
                    c if u32::from(c) < 0x20 => Err(at("control character in string", off)),
                    c => Ok(JStep::Char(c)),
                }
            }
            JEsc::Backslash => {
                if self.high.is_some() && c != 'u' {
                    return Err(at("unpaired surrogate in \\u escape", self.esc_start));
                }
                let decoded = match c {
                    '"' => '"',
                    '\\' => '\\',
                    '/' => '/',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'u' => {
                        self.esc = JEsc::Hex { got: 0, val: 0 };
                        return Ok(JStep::Nothing);
                    }
                    _ => return Err(at("invalid escape in string", self.esc_start)),
                };
                self.esc = JEsc::No;
                Ok(JStep::Char(decoded))
            }
            JEsc::Hex { got, val } => {
                let Some(d) = c.to_digit(16) else {
                    return Err(at("invalid \\u escape", self.esc_start));
                };
                let (got, val) = (got + 1, val * 16 + d);
                if got < 4 {
                    self.esc = JEsc::Hex { got, val };
                    return Ok(JStep::Nothing);
                }
                self.esc = JEsc::No;
                let decoded = match (self.high.take(), val) {
                    (Some(h), 0xDC00..=0xDFFF) => combine_surrogates(h, val),
                    (None, 0xD800..=0xDBFF) => {
                        self.high = Some(val);
                        return Ok(JStep::Nothing);
                    }
                    (Some(_), _) | (None, 0xDC00..=0xDFFF) => None,
                    (None, v) => char::from_u32(v),
                };
                decoded
                    .map(JStep::Char)
                    .ok_or_else(|| at("unpaired surrogate in \\u escape", self.esc_start))
            }
        }
    }
}

/// Escape state inside a Python string.
#[derive(Clone, Copy, Debug)]
enum PEsc {
    /// Not in an escape.
    No,
    /// After a backslash.
    Backslash,
    /// In an octal escape.
    Oct {
        /// Digits read so far (1 to 2).
        got: u8,
        /// Their value.
        val: u32,
    },
    /// In `\xHH`, `\uXXXX` or `\UXXXXXXXX`.
    Hex {
        /// Digits the escape has.
        need: u8,
        /// Digits read so far.
        got: u8,
        /// Their value.
        val: u32,
    },
}

/// The inside of a Python string (after its opening quote): decodes it and writes the content
/// JSON-escaped.
#[derive(Clone, Copy, Debug)]
struct PyStr {
    /// The quote that closes the string.
    quote: char,
    /// Escape state.
    esc: PEsc,
    /// A high surrogate waiting for its low half.
    high: Option<u32>,
    /// Offset of the current escape's backslash.
    esc_start: usize,
    /// Nothing has been read since the opening quote.
    empty: bool,
}

impl PyStr {
    /// State right after the opening `quote`.
    fn new(quote: char) -> Self {
        PyStr {
            quote,
            esc: PEsc::No,
            high: None,
            esc_start: 0,
            empty: true,
        }
    }

    /// Consumes `c` at `off`, writing decoded content to `out`; true at the closing quote.
    fn step(&mut self, c: char, off: usize, out: &mut String) -> Result<bool, String> {
        let empty = std::mem::replace(&mut self.empty, false);
        if empty && c == self.quote {
            self.empty = true;
            return Ok(true);
        }
        if let PEsc::Oct { got, val } = self.esc {
            if let Some(d) = c.to_digit(8) {
                let (got, val) = (got + 1, val * 8 + d);
                if got < 3 {
                    self.esc = PEsc::Oct { got, val };
                } else {
                    self.esc = PEsc::No;
                    self.code_point(val, out)?;
                }
                return Ok(false);
            }
            self.esc = PEsc::No;
            self.code_point(val, out)?;
        }
        match self.esc {
            PEsc::No | PEsc::Oct { .. } => match c {
                c if c == self.quote => {
                    if self.high.is_some() {
                        return Err(at("unpaired surrogate in escape", self.esc_start));
                    }
                    return Ok(true);
                }
                '\\' => {
                    self.esc = PEsc::Backslash;
                    self.esc_start = off;
                }
                '\n' | '\r' => return Err(at("unterminated string", off)),
                c => self.char_out(c, out)?,
            },
            PEsc::Backslash => {
                self.esc = PEsc::No;
                let decoded = match c {
                    // A line continuation: nothing.
                    '\n' | '\r' => return Ok(false),
                    '\\' | '\'' | '"' => c,
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'v' => '\u{b}',
                    '0'..='7' => {
                        let val = c.to_digit(8).unwrap_or(0);
                        self.esc = PEsc::Oct { got: 1, val };
                        return Ok(false);
                    }
                    'x' | 'u' | 'U' => {
                        let need = match c {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        self.esc = PEsc::Hex {
                            need,
                            got: 0,
                            val: 0,
                        };
                        return Ok(false);
                    }
                    'N' => {
                        return Err(at("\\N{...} escapes are not supported", self.esc_start));
                    }
                    // Python keeps an unknown escape as it is, backslash included.
                    c => {
                        self.char_out('\\', out)?;
                        c
                    }
                };
                self.char_out(decoded, out)?;
            }
            PEsc::Hex { need, got, val } => {
                let Some(d) = c.to_digit(16) else {
                    return Err(at("truncated \\x, \\u or \\U escape", self.esc_start));
                };
                // At most 8 digits: fits in u32.
                let (got, val) = (got + 1, val.wrapping_mul(16).wrapping_add(d));
                if got < need {
                    self.esc = PEsc::Hex { need, got, val };
                } else {
                    self.esc = PEsc::No;
                    self.code_point(val, out)?;
                }
            }
        }
        Ok(false)
    }

    /// Writes the code point of an escape, pairing surrogates.
    fn code_point(&mut self, cp: u32, out: &mut String) -> Result<(), String> {
        let decoded = match (self.high.take(), cp) {
            (Some(h), 0xDC00..=0xDFFF) => combine_surrogates(h, cp),
            (None, 0xD800..=0xDBFF) => {
                self.high = Some(cp);
                return Ok(());
            }
            (Some(_), _) | (None, 0xDC00..=0xDFFF) => {
                return Err(at("unpaired surrogate in escape", self.esc_start));
            }
            (None, cp) => char::from_u32(cp),
        };
        match decoded {
            Some(c) => {
                push_json_char(out, c);
                Ok(())
            }
            None => Err(at("escape out of the Unicode range", self.esc_start)),
        }
    }

    /// Writes a content character (not from a `\x`/`\u`/`\U`/octal escape).
    fn char_out(&mut self, c: char, out: &mut String) -> Result<(), String> {
        if self.high.is_some() {
            return Err(at("unpaired surrogate in escape", self.esc_start));
        }
        push_json_char(out, c);
        Ok(())
    }
}

/// Kinds of open container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// JSON: the whole span, one object.
    Top,
    /// Python: the keyword argument list.
    Kwargs,
    /// An object or dict.
    Object,
    /// An array or list.
    Array,
    /// Python parentheses: a tuple or a grouping.
    Paren,
}

/// Where a container is between its items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pos {
    /// Right after the opening bracket (no item yet).
    Start,
    /// After a comma.
    AfterComma,
    /// After a key or argument name, before `:` or `=`.
    AfterKey,
    /// After `:` or `=`, before the value.
    ExpectValue,
    /// After a complete item.
    AfterItem,
}

/// An open container.
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// What it is.
    kind: Kind,
    /// Where it is.
    pos: Pos,
    /// Complete items so far.
    count: usize,
    /// For `Paren`: a comma was seen, so it is a tuple (until then its output is held back).
    tuple: bool,
}

/// States of a JSON number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NumState {
    /// After `-`.
    Minus,
    /// After a leading `0`.
    Zero,
    /// In the integer digits.
    Int,
    /// After `.`.
    Dot,
    /// In the fraction digits.
    Frac,
    /// After `e`.
    E,
    /// After the exponent's sign.
    ESign,
    /// In the exponent digits.
    Exp,
}

impl NumState {
    /// The state after `c`, if `c` continues the number.
    fn next(self, c: char) -> Option<NumState> {
        use NumState::*;
        Some(match (self, c) {
            (Minus, '0') => Zero,
            (Minus | Int, '0'..='9') => Int,
            (Zero | Int, '.') => Dot,
            (Zero | Int | Frac, 'e' | 'E') => E,
            (Dot | Frac, '0'..='9') => Frac,
            (E, '+' | '-') => ESign,
            (E | ESign | Exp, '0'..='9') => Exp,
            _ => return None,
        })
    }

    /// Whether a number may end here.
    fn accepting(self) -> bool {
        matches!(
            self,
            NumState::Zero | NumState::Int | NumState::Frac | NumState::Exp
        )
    }
}

/// The token being read.
#[derive(Debug, Clone)]
enum Lex {
    /// Between tokens.
    Between,
    /// In a JSON string.
    JStr(JsonStr),
    /// In a JSON number (its text so far).
    JNum(NumState, String),
    /// In a JSON literal: the word, characters matched, start offset.
    JLit(&'static str, usize, usize),
    /// In a Python string.
    PyStr(PyStr),
    /// After a Python string's closing quote: another string may continue it.
    PyStrEnd {
        /// Right after a backslash (a line continuation).
        backslash: bool,
        /// The quote of an empty string that just closed: that quote again would open a
        /// triple-quoted string.
        empty: Option<char>,
    },
    /// Python: after a backslash between tokens, which must continue the line.
    LineCont,
    /// In a Python number: its text and start offset.
    PyNum(String, usize),
    /// In a Python name: its text and start offset.
    PyIdent(String, usize),
}

/// The JSON validator (passes its input through) or Python transliterator (writes JSON).
#[derive(Debug, Clone)]
struct Machine {
    /// Python rather than JSON.
    python: bool,
    /// Open containers; the bottom one (`Top` or `Kwargs`) is never closed.
    stack: Vec<Frame>,
    /// The token being read.
    lex: Lex,
    /// Output held back while parentheses are undecided (tuple or grouping), innermost last.
    holds: Vec<String>,
    /// Certain output not yet handed out.
    out: String,
    /// A keyword argument name waiting for its `=`.
    name: String,
}

impl Machine {
    /// A fresh machine for JSON (`python` false) or Python keyword arguments.
    fn new(python: bool) -> Self {
        let kind = if python { Kind::Kwargs } else { Kind::Top };
        Machine {
            python,
            stack: vec![Frame {
                kind,
                pos: Pos::Start,
                count: 0,
                tuple: false,
            }],
            lex: Lex::Between,
            holds: Vec::new(),
            out: if python {
                "{".to_string()
            } else {
                String::new()
            },
            name: String::new(),
        }
    }

    /// Where output goes now: the innermost hold, or the certain output.
    fn sink(&mut self) -> &mut String {
        match self.holds.last_mut() {
            Some(h) => h,
            None => &mut self.out,
        }
    }

    /// Writes Python-transliterated output.
    fn emit(&mut self, s: &str) {
        self.sink().push_str(s);
    }

    /// The innermost open container.
    fn top(&self, off: usize) -> Result<Frame, String> {
        self.stack
            .last()
            .copied()
            .ok_or_else(|| at("internal error: no open container", off))
    }

    /// Sets the innermost container's position.
    fn set_pos(&mut self, pos: Pos) {
        if let Some(f) = self.stack.last_mut() {
            f.pos = pos;
        }
    }

    /// Consumes character `c` at `off`.
    fn feed(&mut self, c: char, off: usize) -> Result<(), String> {
        self.step(c, off)?;
        if !self.python {
            self.out.push(c);
        }
        Ok(())
    }

    /// Consumes `c`: first as part of the current token, else (once the token is ended) as
    /// the start of what comes next.
    fn step(&mut self, c: char, off: usize) -> Result<(), String> {
        loop {
            match std::mem::replace(&mut self.lex, Lex::Between) {
                Lex::Between => return self.between(c, off),
                Lex::LineCont => {
                    if c != '\n' && c != '\r' {
                        return Err(at("unexpected character after a backslash", off));
                    }
                    return Ok(());
                }
                Lex::JStr(mut s) => {
                    match s.step(c, off)? {
                        JStep::End => self.string_done(),
                        JStep::Nothing | JStep::Char(_) => self.lex = Lex::JStr(s),
                    }
                    return Ok(());
                }
                Lex::PyStr(mut s) => {
                    let closed = s.step(c, off, self.sink())?;
                    self.lex = if closed {
                        Lex::PyStrEnd {
                            backslash: false,
                            empty: s.empty.then_some(s.quote),
                        }
                    } else {
                        Lex::PyStr(s)
                    };
                    return Ok(());
                }
                Lex::PyStrEnd { backslash, empty } => {
                    if backslash && c != '\n' && c != '\r' {
                        return Err(at("unexpected character after a backslash", off));
                    }
                    if empty == Some(c) {
                        return Err(at("triple-quoted strings are not supported", off));
                    }
                    if backslash || is_py_ws(c) || c == '\\' {
                        self.lex = Lex::PyStrEnd {
                            backslash: c == '\\',
                            empty: None,
                        };
                        return Ok(());
                    }
                    if c == '\'' || c == '"' {
                        self.lex = Lex::PyStr(PyStr::new(c));
                        return Ok(());
                    }
                    self.emit("\"");
                    self.string_done();
                }
                Lex::JNum(state, mut text) => {
                    if let Some(next) = state.next(c) {
                        text.push(c);
                        self.lex = Lex::JNum(next, text);
                        return Ok(());
                    }
                    self.end_json_number(state, &text, off)?;
                }
                Lex::JLit(word, got, start) => {
                    if let Some(&b) = word.as_bytes().get(got) {
                        if u32::from(b) != u32::from(c) {
                            return Err(at("invalid literal", start));
                        }
                        self.lex = Lex::JLit(word, got + 1, start);
                        return Ok(());
                    }
                    self.value_done();
                }
                Lex::PyNum(mut text, start) => {
                    if py_number_continues(&text, c) {
                        text.push(c);
                        self.lex = Lex::PyNum(text, start);
                        return Ok(());
                    }
                    self.end_py_number(&text, start)?;
                }
                Lex::PyIdent(mut text, start) => {
                    if is_ident_continue(c) {
                        text.push(c);
                        self.lex = Lex::PyIdent(text, start);
                        return Ok(());
                    }
                    self.end_ident(text, start)?;
                }
            }
        }
    }

    /// Handles `c` between tokens.
    fn between(&mut self, c: char, off: usize) -> Result<(), String> {
        if if self.python {
            is_py_ws(c)
        } else {
            is_json_ws(c)
        } {
            return Ok(());
        }
        if self.python && c == '\\' {
            self.lex = Lex::LineCont;
            return Ok(());
        }
        let top = self.top(off)?;
        match (top.kind, top.pos) {
            (Kind::Kwargs, Pos::Start | Pos::AfterComma) => {
                if !is_ident_start(c) {
                    return Err(at("expected a keyword argument name", off));
                }
                self.lex = Lex::PyIdent(c.to_string(), off);
                Ok(())
            }
            (Kind::Kwargs, Pos::AfterKey) => {
                if c != '=' {
                    return Err(at("expected '=' after the argument name", off));
                }
                // A repeated name is kept, like a repeated dict key (the last value wins when
                // parsed): the grammar cannot exclude repeats among the unboundedly many names
                // `additionalProperties` allows, and what it accepts must parse.
                let name = std::mem::take(&mut self.name);
                if top.count > 0 {
                    self.emit(", ");
                }
                let mut key = String::with_capacity(name.len() + 4);
                key.push('"');
                for ch in name.chars() {
                    push_json_char(&mut key, ch);
                }
                key.push_str("\": ");
                self.emit(&key);
                self.set_pos(Pos::ExpectValue);
                Ok(())
            }
            (Kind::Object, Pos::AfterKey) => {
                if c != ':' {
                    return Err(at("expected ':' after the key", off));
                }
                if self.python {
                    self.emit(": ");
                }
                self.set_pos(Pos::ExpectValue);
                Ok(())
            }
            (Kind::Object, Pos::Start | Pos::AfterComma) => {
                if c == '}' && (top.pos == Pos::Start || self.python) {
                    return self.close(top, off);
                }
                if c == '"' || (self.python && c == '\'') {
                    return self.begin_value(c, off);
                }
                Err(at(
                    if self.python {
                        "dict keys must be strings"
                    } else {
                        "expected a string key"
                    },
                    off,
                ))
            }
            (Kind::Array, Pos::Start | Pos::AfterComma)
                if c == ']' && (top.pos == Pos::Start || self.python) =>
            {
                self.close(top, off)
            }
            (Kind::Paren, Pos::Start | Pos::AfterComma) if c == ')' => self.close(top, off),
            (_, Pos::Start | Pos::AfterComma | Pos::ExpectValue) => self.begin_value(c, off),
            (_, Pos::AfterItem) => {
                if c == ',' && top.kind != Kind::Top {
                    if top.kind == Kind::Paren && !top.tuple {
                        let held = self.holds.pop().unwrap_or_default();
                        self.emit("[");
                        self.emit(&held);
                        if let Some(f) = self.stack.last_mut() {
                            f.tuple = true;
                        }
                    }
                    self.set_pos(Pos::AfterComma);
                    return Ok(());
                }
                let closer = match top.kind {
                    Kind::Object => '}',
                    Kind::Array => ']',
                    Kind::Paren => ')',
                    Kind::Top => {
                        return Err(at("unexpected character after the object", off));
                    }
                    Kind::Kwargs => return Err(at("expected ','", off)),
                };
                if c == closer {
                    self.close(top, off)
                } else {
                    Err(at(format!("expected ',' or '{closer}'"), off))
                }
            }
            (_, Pos::AfterKey) => Err(at("internal error: key outside an object", off)),
        }
    }

    /// Closes the innermost container `top` (its closing bracket was just read).
    fn close(&mut self, top: Frame, off: usize) -> Result<(), String> {
        if self.python {
            match top.kind {
                Kind::Object => self.emit("}"),
                Kind::Array => self.emit("]"),
                Kind::Paren if top.tuple => self.emit("]"),
                Kind::Paren => {
                    let held = self.holds.pop().unwrap_or_default();
                    if top.count == 0 {
                        self.emit("[]");
                    } else {
                        self.emit(&held);
                    }
                }
                Kind::Top | Kind::Kwargs => return Err(at("unexpected closing bracket", off)),
            }
        }
        self.stack.pop();
        self.value_done();
        Ok(())
    }

    /// Opens a container of `kind`.
    fn open(&mut self, kind: Kind, off: usize) -> Result<(), String> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(at(format!("nesting deeper than {MAX_DEPTH}"), off));
        }
        self.stack.push(Frame {
            kind,
            pos: Pos::Start,
            count: 0,
            tuple: false,
        });
        Ok(())
    }

    /// Starts a value (or dict key) with `c`.
    fn begin_value(&mut self, c: char, off: usize) -> Result<(), String> {
        let top = self.top(off)?;
        if !self.python {
            if top.kind == Kind::Top && c != '{' {
                return Err(at("expected a JSON object", off));
            }
            self.lex = match c {
                '"' => Lex::JStr(JsonStr::new()),
                '-' => Lex::JNum(NumState::Minus, c.to_string()),
                '0' => Lex::JNum(NumState::Zero, c.to_string()),
                '1'..='9' => Lex::JNum(NumState::Int, c.to_string()),
                't' => Lex::JLit("true", 1, off),
                'f' => Lex::JLit("false", 1, off),
                'n' => Lex::JLit("null", 1, off),
                '[' => return self.open(Kind::Array, off),
                '{' => return self.open(Kind::Object, off),
                _ => return Err(at("expected a value", off)),
            };
            return Ok(());
        }
        let kind = match c {
            '[' => Some(Kind::Array),
            '{' => Some(Kind::Object),
            '(' => Some(Kind::Paren),
            _ => None,
        };
        if let Some(kind) = kind {
            self.open(kind, off)?;
        }
        let lex = match c {
            '\'' | '"' => Some(Lex::PyStr(PyStr::new(c))),
            '0'..='9' | '.' | '-' | '+' => Some(Lex::PyNum(c.to_string(), off)),
            c if is_ident_start(c) => Some(Lex::PyIdent(c.to_string(), off)),
            _ => None,
        };
        if kind.is_none() && lex.is_none() {
            return Err(at("expected a value", off));
        }
        if top.pos == Pos::AfterComma {
            self.emit(", ");
        }
        match c {
            '\'' | '"' => self.emit("\""),
            '[' => self.emit("["),
            '{' => self.emit("{"),
            '(' => self.holds.push(String::new()),
            _ => {}
        }
        if let Some(lex) = lex {
            self.lex = lex;
        }
        Ok(())
    }

    /// A value ended: the innermost container has one more item.
    fn value_done(&mut self) {
        if let Some(f) = self.stack.last_mut() {
            f.pos = Pos::AfterItem;
            f.count += 1;
        }
    }

    /// A string ended: a key in key position, else a value.
    fn string_done(&mut self) {
        if let Some(f) = self.stack.last_mut() {
            if f.kind == Kind::Object && matches!(f.pos, Pos::Start | Pos::AfterComma) {
                f.pos = Pos::AfterKey;
                return;
            }
        }
        self.value_done();
    }

    /// A JSON number ended (in `state`, text `text`) before offset `off`.
    fn end_json_number(&mut self, state: NumState, text: &str, off: usize) -> Result<(), String> {
        if !state.accepting() {
            return Err(at("invalid number", off));
        }
        if !text.parse::<f64>().is_ok_and(f64::is_finite) {
            return Err(at("number out of range", off));
        }
        self.value_done();
        Ok(())
    }

    /// A Python number `text` (started at `start`) ended: writes its JSON spelling.
    fn end_py_number(&mut self, text: &str, start: usize) -> Result<(), String> {
        let json = py_number(text).map_err(|m| at(m, start))?;
        self.emit(&json);
        self.value_done();
        Ok(())
    }

    /// A Python name ended: an argument name, or `True`/`False`/`None`.
    fn end_ident(&mut self, text: String, start: usize) -> Result<(), String> {
        let top = self.top(start)?;
        if top.kind == Kind::Kwargs && matches!(top.pos, Pos::Start | Pos::AfterComma) {
            if matches!(text.as_str(), "True" | "False" | "None") {
                return Err(at(format!("'{text}' cannot be an argument name"), start));
            }
            self.name = text;
            self.set_pos(Pos::AfterKey);
            return Ok(());
        }
        // The JSON spellings too: a grammar with `literals=both` allows them (the grammar, not
        // this converter, decides what is allowed).
        let json = match text.as_str() {
            "True" | "true" => "true",
            "False" | "false" => "false",
            "None" | "null" => "null",
            _ => {
                return Err(at(
                    format!("unknown name '{text}' (only True, False and None are values)"),
                    start,
                ));
            }
        };
        self.emit(json);
        self.value_done();
        Ok(())
    }

    /// The input ended at offset `end`: closes the last token and checks that nothing is open.
    fn finish(&mut self, end: usize) -> Result<(), String> {
        match std::mem::replace(&mut self.lex, Lex::Between) {
            Lex::Between => {}
            Lex::LineCont
            | Lex::PyStrEnd {
                backslash: true, ..
            } => {
                return Err(at("unexpected end after a backslash", end));
            }
            Lex::JStr(_) | Lex::PyStr(_) => return Err(at("unterminated string", end)),
            Lex::PyStrEnd { .. } => {
                self.emit("\"");
                self.string_done();
            }
            Lex::JNum(state, text) => self.end_json_number(state, &text, end)?,
            Lex::JLit(word, got, start) => {
                if got != word.len() {
                    return Err(at("invalid literal", start));
                }
                self.value_done();
            }
            Lex::PyNum(text, start) => self.end_py_number(&text, start)?,
            Lex::PyIdent(text, start) => self.end_ident(text, start)?,
        }
        match self.stack.as_slice() {
            [f] if f.kind == Kind::Top => {
                if f.pos == Pos::AfterItem {
                    Ok(())
                } else {
                    Err(at("expected a JSON object", end))
                }
            }
            [f] if f.kind == Kind::Kwargs => match f.pos {
                Pos::Start | Pos::AfterComma | Pos::AfterItem => {
                    self.emit("}");
                    Ok(())
                }
                Pos::AfterKey => Err(at("expected '=' after the argument name", end)),
                Pos::ExpectValue => Err(at("expected a value", end)),
            },
            _ => Err(at("unexpected end: unclosed bracket", end)),
        }
    }
}

/// Whether `c` continues the Python number token `text`.
fn py_number_continues(text: &str, c: char) -> bool {
    if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
        return true;
    }
    if c == '+' || c == '-' {
        let body = text.trim_start_matches(['+', '-']);
        // `0x`, `0o`, `0b` numbers have no exponent; `0e-5` does.
        let radix_prefix = body.len() >= 2
            && body.starts_with('0')
            && body
                .as_bytes()
                .get(1)
                .is_some_and(|b| matches!(b, b'x' | b'X' | b'o' | b'O' | b'b' | b'B'));
        return !radix_prefix && text.ends_with(['e', 'E']);
    }
    false
}

/// Whether `s` is digits of `radix` with single underscores between digits.
fn digit_group(s: &str, radix: u32) -> bool {
    !s.is_empty()
        && !s.starts_with('_')
        && !s.ends_with('_')
        && !s.contains("__")
        && s.chars().all(|c| c == '_' || c.is_digit(radix))
}

/// `s` without underscores.
fn no_underscores(s: &str) -> String {
    s.chars().filter(|&c| c != '_').collect()
}

/// The JSON spelling of Python number literal `tok` (with an optional sign).
fn py_number(tok: &str) -> Result<String, &'static str> {
    let (sign, body) = if let Some(rest) = tok.strip_prefix('-') {
        ("-", rest)
    } else if let Some(rest) = tok.strip_prefix('+') {
        ("", rest)
    } else {
        ("", tok)
    };
    let radix = match body.get(..2).map(str::to_ascii_lowercase).as_deref() {
        Some("0x") => 16,
        Some("0o") => 8,
        Some("0b") => 2,
        _ => 10,
    };
    if radix != 10 {
        let digits = body.get(2..).unwrap_or("");
        let digits = digits.strip_prefix('_').unwrap_or(digits);
        if !digit_group(digits, radix) {
            return Err("invalid integer literal");
        }
        let value = u128::from_str_radix(&no_underscores(digits), radix)
            .map_err(|_| "integer literal too large")?;
        let json = if value == 0 {
            "0".to_string()
        } else {
            format!("{sign}{value}")
        };
        return check_range(json);
    }
    let (mantissa, exponent) = match body.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e)),
        None => (body, None),
    };
    let (int_part, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    if int_part.is_empty() && frac.is_none_or(str::is_empty) {
        return Err("invalid number");
    }
    if !int_part.is_empty() && !digit_group(int_part, 10) {
        return Err("invalid number");
    }
    if let Some(f) = frac {
        if !f.is_empty() && !digit_group(f, 10) {
            return Err("invalid number");
        }
    }
    let int_digits = no_underscores(int_part);
    let Some(exponent) = exponent else {
        if frac.is_none() {
            // An integer.
            if int_digits.bytes().all(|b| b == b'0') {
                return Ok("0".to_string());
            }
            if int_digits.starts_with('0') {
                return Err("leading zeros in an integer literal");
            }
            return check_range(format!("{sign}{int_digits}"));
        }
        return check_range(float_text(sign, &int_digits, frac, None));
    };
    let (exp_sign, exp_digits) = if let Some(rest) = exponent.strip_prefix('-') {
        ("-", rest)
    } else if let Some(rest) = exponent.strip_prefix('+') {
        ("", rest)
    } else {
        ("", exponent)
    };
    if !digit_group(exp_digits, 10) {
        return Err("invalid number");
    }
    let exp = format!("{exp_sign}{}", no_underscores(exp_digits));
    check_range(float_text(sign, &int_digits, frac, Some(&exp)))
}

/// JSON text of a float from its parts (underscores removed from `int_digits`).
fn float_text(sign: &str, int_digits: &str, frac: Option<&str>, exp: Option<&str>) -> String {
    let int_norm = int_digits.trim_start_matches('0');
    let mut s = format!("{sign}{}", if int_norm.is_empty() { "0" } else { int_norm });
    if let Some(f) = frac {
        let f = no_underscores(f);
        s.push('.');
        s.push_str(if f.is_empty() { "0" } else { &f });
    }
    if let Some(e) = exp {
        s.push('e');
        s.push_str(e);
    }
    s
}

/// `json` if it reads as a finite `f64` (as `serde_json` requires).
fn check_range(json: String) -> Result<String, &'static str> {
    if json.parse::<f64>().is_ok_and(f64::is_finite) {
        Ok(json)
    } else {
        Err("number out of range")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::{python_kwargs, python_repr};
    use proptest::prelude::*;
    use serde_json::{json, Map};

    /// Converts `span` by feeding it in pieces cut at `cuts` (offsets, any order).
    fn stream(enc: ArgEncoding, span: &[u8], cuts: &[usize]) -> Result<String, String> {
        let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(span.len())).collect();
        cuts.sort_unstable();
        let mut conv = StreamConverter::new(enc);
        let mut out = String::new();
        let mut prev = 0;
        for c in cuts {
            out.push_str(&conv.push(&span[prev..c])?);
            prev = c;
        }
        out.push_str(&conv.push(&span[prev..])?);
        out.push_str(&conv.finish()?);
        Ok(out)
    }

    /// Converts `span` one byte at a time, also returning the deltas.
    fn bytewise(enc: ArgEncoding, span: &[u8]) -> Result<(String, Vec<String>), String> {
        let mut conv = StreamConverter::new(enc);
        let mut deltas = Vec::new();
        for b in span {
            deltas.push(conv.push(std::slice::from_ref(b))?);
        }
        deltas.push(conv.finish()?);
        Ok((deltas.concat(), deltas))
    }

    fn py(span: &str) -> Result<Value, String> {
        to_json(ArgEncoding::Python, span.as_bytes())
    }

    fn py_text(span: &str) -> String {
        stream(ArgEncoding::Python, span.as_bytes(), &[]).unwrap()
    }

    #[test]
    fn empower_example() {
        let span = br#""{\"location\":\"San Francisco\"}""#;
        let v = to_json(ArgEncoding::JsonInString, span).unwrap();
        assert_eq!(v, json!({"location": "San Francisco"}));
        let text = stream(ArgEncoding::JsonInString, span, &[]).unwrap();
        assert_eq!(text, r#"{"location":"San Francisco"}"#);
        let (bytes, _) = bytewise(ArgEncoding::JsonInString, span).unwrap();
        assert_eq!(bytes, text);
    }

    #[test]
    fn gemma_values_read_as_json_under_every_chunking() {
        let span = r#"{city:<|"|>San "F" \ <|x<|"|>,n:-3, flag:true,x:null,l:[1.5,<|"|><|"|>,{a:[]}],o:{}}"#;
        let want = json!({"city": "San \"F\" \\ <|x", "n": -3, "flag": true, "x": null,
                          "l": [1.5, "", {"a": []}], "o": {}});
        assert_eq!(to_json(ArgEncoding::Gemma, span.as_bytes()).unwrap(), want);
        let (bytes, _) = bytewise(ArgEncoding::Gemma, span.as_bytes()).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&bytes).unwrap(), want);
        // Text that begins like a quote and is not one is the string's.
        let v = to_json(ArgEncoding::Gemma, "{s:<|\"|><|\"<|\"|>}".as_bytes()).unwrap();
        assert_eq!(v, json!({"s": "<|\""}));
        let v = to_json(ArgEncoding::Gemma, "{s:<|\"|>é\n\t<|\"|>}".as_bytes()).unwrap();
        assert_eq!(v, json!({"s": "é\n\t"}));
    }

    #[test]
    fn gemma_refuses_what_its_notation_does_not_write() {
        for span in [
            r#"{"k":1}"#,
            r#"{<|"|>k<|"|>:1}"#,
            r#"{k:"v"}"#,
            r#"{k:Paris}"#,
            r#"{k:<|"|>v}"#,
            r#"{k:<|"v<|"|>}"#,
            r#"{k:1,}"#,
            r#"{k}"#,
            r#"{a b:1}"#,
            r#"[1]"#,
        ] {
            assert!(
                to_json(ArgEncoding::Gemma, span.as_bytes()).is_err(),
                "{span} was read"
            );
        }
    }

    #[test]
    fn llama_example() {
        let span = "user_id=7890, special='black'";
        assert_eq!(
            py(span).unwrap(),
            json!({"user_id": 7890, "special": "black"})
        );
        assert_eq!(py_text(span), r#"{"user_id": 7890, "special": "black"}"#);
    }

    #[test]
    fn python_full_example() {
        let span = r#"city='San Francisco', metric="celsius", n=3, flag=True, x=None, tags=['a', "b"], point=(1, 2), opts={'k': 1.5, "j": [True]}"#;
        assert_eq!(
            py(span).unwrap(),
            json!({"city": "San Francisco", "metric": "celsius", "n": 3, "flag": true,
                   "x": null, "tags": ["a", "b"], "point": [1, 2],
                   "opts": {"k": 1.5, "j": [true]}})
        );
        assert_eq!(
            py_text(span),
            r#"{"city": "San Francisco", "metric": "celsius", "n": 3, "flag": true, "x": null, "tags": ["a", "b"], "point": [1, 2], "opts": {"k": 1.5, "j": [true]}}"#
        );
    }

    #[test]
    fn python_empty_and_whitespace() {
        assert_eq!(py("").unwrap(), json!({}));
        assert_eq!(py(" \n\t ").unwrap(), json!({}));
        assert_eq!(py("a \\\n = \\\n 1, \\\n").unwrap(), json!({"a": 1}));
        assert_eq!(py_text(""), "{}");
        assert_eq!(
            py("\n  a = 1 ,\n  b\t=\t[ 1 , 2 , ] ,\n").unwrap(),
            json!({"a": 1, "b": [1, 2]})
        );
    }

    #[test]
    fn python_strings() {
        assert_eq!(py_text(r#"s='it\'s "x"'"#), r#"{"s": "it's \"x\""}"#);
        assert_eq!(py_text(r#"s="it's""#), r#"{"s": "it's"}"#);
        let cases: &[(&str, &str)] = &[
            (r"'a\\b'", "a\\b"),
            (r"'\n\r\t\b\f\v\a'", "\n\r\t\u{8}\u{c}\u{b}\u{7}"),
            (r"'\0'", "\0"),
            (r"'\101\1012\7'", "AA2\u{7}"),
            (r"'\x41\xe9'", "Aé"),
            (r"'\u00e9\u20AC'", "é€"),
            (r"'\U0001F600'", "😀"),
            (r"'\ud83d\ude00'", "😀"),
            (r"'\d\w'", "\\d\\w"),
            ("'a\\\nb'", "ab"),
            ("'héllo 😀'", "héllo 😀"),
            (r#"'a' "b" 'c'"#, "abc"),
            ("'a'\n  'b'", "ab"),
            ("''", ""),
            ("'' 'a'", "a"),
            ("'a' \\\n 'b'", "ab"),
            ("'\u{1}'", "\u{1}"),
        ];
        for (lit, want) in cases {
            let v = py(&format!("s={lit}")).unwrap_or_else(|e| panic!("{lit}: {e}"));
            assert_eq!(v, json!({ "s": want }), "{lit}");
        }
        assert_eq!(py_text(r"s='\0\x01'"), r#"{"s": "\u0000\u0001"}"#);
        assert_eq!(py("d={'a' 'b': 1}").unwrap(), json!({"d": {"ab": 1}}));
    }

    #[test]
    fn python_numbers() {
        let cases: &[(&str, &str)] = &[
            ("0", "0"),
            ("00", "0"),
            ("-0", "0"),
            ("7", "7"),
            ("-7", "-7"),
            ("+7", "7"),
            ("1_000", "1000"),
            ("12345678901234567890", "12345678901234567890"),
            ("1.5", "1.5"),
            ("1.", "1.0"),
            (".5", "0.5"),
            ("-.5", "-0.5"),
            ("-2e3", "-2e3"),
            ("1.e5", "1.0e5"),
            ("1E+5", "1e5"),
            ("2e-3", "2e-3"),
            ("01.5", "1.5"),
            ("00e1", "0e1"),
            ("0E-36", "0e-36"),
            ("0e+5", "0e5"),
            ("1_0.0_1e0_1", "10.01e01"),
            ("0x1F", "31"),
            ("-0x_10", "-16"),
            ("0o17", "15"),
            ("0b101", "5"),
            ("0x0", "0"),
        ];
        for (lit, want) in cases {
            let text = stream(ArgEncoding::Python, format!("n={lit}").as_bytes(), &[])
                .unwrap_or_else(|e| panic!("{lit}: {e}"));
            assert_eq!(text, format!("{{\"n\": {want}}}"), "{lit}");
        }
        for bad in [
            "1__0", "1_", "_1", "01", "1e", "1e+", ".", "-", "+-1", "1.2.3", "1j", "0x", "0xg",
            "1e999", "0b2", "--1", "- 1", "1.5_", "1._5",
        ] {
            assert!(py(&format!("n={bad}")).is_err(), "{bad} should fail");
        }
        assert_eq!(
            py("n=[-1, +2.5, 3e2]").unwrap(),
            json!({"n": [-1, 2.5, 300.0]})
        );
    }

    #[test]
    fn python_tuples_and_groups() {
        let cases: &[(&str, Value)] = &[
            ("(1)", json!(1)),
            ("((1))", json!(1)),
            ("(1,)", json!([1])),
            ("()", json!([])),
            ("( )", json!([])),
            ("(1, 2)", json!([1, 2])),
            ("(1, 2,)", json!([1, 2])),
            ("((1, 2))", json!([1, 2])),
            ("((1),)", json!([1])),
            (
                "(('a'), [()], {'k': (None,)})",
                json!(["a", [[]], {"k": [null]}]),
            ),
            ("[(1), (2,)]", json!([1, [2]])),
            ("('a' 'b')", json!("ab")),
        ];
        for (lit, want) in cases {
            let v = py(&format!("t={lit}")).unwrap_or_else(|e| panic!("{lit}: {e}"));
            assert_eq!(v, json!({ "t": want }), "{lit}");
        }
        // An undecided parenthesis holds its output back.
        let mut conv = StreamConverter::new(ArgEncoding::Python);
        assert_eq!(conv.push(b"t=(1").unwrap(), "{\"t\": ");
        assert_eq!(conv.push(b",").unwrap(), "[1");
        assert_eq!(conv.push(b" 2)").unwrap(), ", 2]");
        assert_eq!(conv.finish().unwrap(), "}");
    }

    #[test]
    fn python_containers() {
        assert_eq!(
            py("a=[], b={}, c=[[], {}], d={'x': {'y': [1, {'z': None}]},},").unwrap(),
            json!({"a": [], "b": {}, "c": [[], {}], "d": {"x": {"y": [1, {"z": null}]}}})
        );
        assert_eq!(py("d={'k': 1, 'k': 2}").unwrap(), json!({"d": {"k": 2}}));
        assert_eq!(py("é_1=1").unwrap(), json!({"é_1": 1}));
    }

    #[test]
    fn streaming_deltas_are_certain() {
        // The closing quote waits for a possible continuation, the number for its end.
        let mut conv = StreamConverter::new(ArgEncoding::Python);
        assert_eq!(conv.push(b"s='ab").unwrap(), "{\"s\": \"ab");
        assert_eq!(conv.push(b"'").unwrap(), "");
        assert_eq!(conv.push(b", n=12").unwrap(), "\", \"n\": ");
        assert_eq!(conv.push(b"3,").unwrap(), "123");
        assert_eq!(conv.finish().unwrap(), "}");
        // Partial UTF-8 and escapes are held back.
        let mut conv = StreamConverter::new(ArgEncoding::Json);
        let text = "{\"a\":\"é\"}".as_bytes();
        assert_eq!(conv.push(&text[..7]).unwrap(), "{\"a\":\"");
        assert_eq!(conv.push(&text[7..]).unwrap(), "é\"}");
        assert_eq!(conv.finish().unwrap(), "");
        let mut conv = StreamConverter::new(ArgEncoding::JsonInString);
        assert_eq!(conv.push(br#""{\"a\":\"\ud83d"#).unwrap(), "{\"a\":\"");
        assert_eq!(conv.push(br#"\ude00\"}""#).unwrap(), "😀\"}");
        assert_eq!(conv.finish().unwrap(), "");
    }

    #[test]
    fn json_passes_through() {
        let span = " {\n  \"a\" : [1, 2.5e-3, true, null],\"b\":{\"c\":\"\\u00e9\\n\"}\n} ";
        let text = stream(ArgEncoding::Json, span.as_bytes(), &[]).unwrap();
        assert_eq!(text, span);
        assert_eq!(
            to_json(ArgEncoding::Json, span.as_bytes()).unwrap(),
            json!({"a": [1, 0.0025, true, null], "b": {"c": "é\n"}})
        );
    }

    #[test]
    fn repeated_keyword_arguments_keep_the_last_value() {
        // The grammar cannot forbid repeating a keyword that additionalProperties admits, so
        // the converter must not fail on what the grammar let through: the last value wins, as
        // for a repeated dict key.
        let v = to_json(ArgEncoding::Python, b"x=1, x=2").unwrap();
        assert_eq!(v, serde_json::json!({"x": 2}));
    }

    #[test]
    fn json_literals_in_python_values() {
        // `@python_call(literals=both)` lets these through; the converter reads both spellings.
        let v = to_json(
            ArgEncoding::Python,
            b"x=true, y=null, z=[False, false, {'k': None}]",
        )
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"x": true, "y": null, "z": [false, false, {"k": null}]})
        );
    }

    #[test]
    fn errors_not_panics() {
        let cases: &[(ArgEncoding, &str)] = &[
            (ArgEncoding::Python, "s='abc"),
            (ArgEncoding::Python, "s=\"abc"),
            (ArgEncoding::Python, "s='a\nb'"),
            (ArgEncoding::Python, r"s='\x4'"),
            (ArgEncoding::Python, r"s='\u12'"),
            (ArgEncoding::Python, r"s='\U00110000'"),
            (ArgEncoding::Python, r"s='\ud800'"),
            (ArgEncoding::Python, r"s='\ude00'"),
            (ArgEncoding::Python, r"s='\N{DASH}'"),
            (ArgEncoding::Python, "d={1: 2}"),
            (ArgEncoding::Python, "d={None: 2}"),
            (ArgEncoding::Python, "d={(1,): 2}"),
            (ArgEncoding::Python, "d={'a'}"),
            (ArgEncoding::Python, "d={'a': }"),
            (ArgEncoding::Python, "x"),
            (ArgEncoding::Python, "x="),
            (ArgEncoding::Python, "x=1 y=2"),
            (ArgEncoding::Python, "'a'"),
            (ArgEncoding::Python, "1"),
            (ArgEncoding::Python, ","),
            (ArgEncoding::Python, "x=1,,"),
            (ArgEncoding::Python, "x=[1,,2]"),
            (ArgEncoding::Python, "x=(,)"),
            (ArgEncoding::Python, "x=[1"),
            (ArgEncoding::Python, "x=[1)"),
            (ArgEncoding::Python, "x=(1]"),
            (ArgEncoding::Python, "x=nil"),
            (ArgEncoding::Python, "x=TRUE"),
            (ArgEncoding::Python, "x=inf"),
            (ArgEncoding::Python, "True=1"),
            (ArgEncoding::Python, "x=r'a'"),
            (ArgEncoding::Python, "x=1)"),
            (ArgEncoding::Python, "x=@"),
            (ArgEncoding::Python, "**kw"),
            (ArgEncoding::Python, "x='''a'''"),
            (ArgEncoding::Python, "x=\"\"\"a\"\"\""),
            (ArgEncoding::Python, "x=1 \\ y"),
            (ArgEncoding::Python, "x=1 \\"),
            (ArgEncoding::Python, "x='a' \\ 'b'"),
            (ArgEncoding::Json, ""),
            (ArgEncoding::Json, "[]"),
            (ArgEncoding::Json, "{"),
            (ArgEncoding::Json, "{\"a\":1,}"),
            (ArgEncoding::Json, "{\"a\":[1,]}"),
            (ArgEncoding::Json, "{'a':1}"),
            (ArgEncoding::Json, "{\"a\":01}"),
            (ArgEncoding::Json, "{\"a\":1.}"),
            (ArgEncoding::Json, "{\"a\":tru}"),
            (ArgEncoding::Json, "{\"a\":\"\\x\"}"),
            (ArgEncoding::Json, "{\"a\":\"\\ud800\"}"),
            (ArgEncoding::Json, "{\"a\":\"\n\"}"),
            (ArgEncoding::Json, "{\"a\":1e999}"),
            (ArgEncoding::Json, "{} x"),
            (ArgEncoding::Json, "{1:2}"),
            (ArgEncoding::JsonInString, ""),
            (ArgEncoding::JsonInString, "{}"),
            (ArgEncoding::JsonInString, "\"{}"),
            (ArgEncoding::JsonInString, "\"{\""),
            (ArgEncoding::JsonInString, "\"{}\" x"),
            (ArgEncoding::JsonInString, "\"{\\\"a\\\":\\q}\""),
            (ArgEncoding::JsonInString, "\"[]\""),
        ];
        for (enc, span) in cases {
            let whole = to_json(*enc, span.as_bytes());
            assert!(whole.is_err(), "{enc:?} {span:?} gave {whole:?}");
            let msg = whole.unwrap_err();
            assert!(msg.contains("at byte"), "{span:?}: {msg}");
            assert!(bytewise(*enc, span.as_bytes()).is_err(), "{enc:?} {span:?}");
        }
        // Invalid UTF-8, truncated UTF-8.
        for enc in [
            ArgEncoding::Json,
            ArgEncoding::Python,
            ArgEncoding::JsonInString,
        ] {
            assert!(to_json(enc, b"\xff").is_err());
            assert!(to_json(enc, b"s='\xc3").is_err());
        }
        // Errors are sticky.
        let mut conv = StreamConverter::new(ArgEncoding::Python);
        assert!(conv.push(b"x=@").is_err());
        assert!(conv.push(b"1").is_err());
        assert!(conv.finish().is_err());
    }

    #[test]
    fn error_offsets() {
        let e = py("a=1, b='x', c={3: 4}").unwrap_err();
        assert!(e.ends_with("at byte 15"), "{e}");
        let e = to_json(ArgEncoding::Json, b"{\"a\": 1,, }").unwrap_err();
        assert!(e.ends_with("at byte 8"), "{e}");
        let e = py("a='unterminated").unwrap_err();
        assert!(e.ends_with("at byte 15"), "{e}");
    }

    #[test]
    fn nesting_limit() {
        let deep = format!("x={}1{}", "[".repeat(500), "]".repeat(500));
        assert!(py(&deep).unwrap_err().contains("nesting"));
        let deep = format!("x={}", "(".repeat(100_000));
        assert!(py(&deep).is_err());
        let ok = format!("x={}1{}", "[".repeat(90), "]".repeat(90));
        assert!(py(&ok).is_ok());
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        assert!(to_json(ArgEncoding::Json, deep.as_bytes()).is_err());
        let ok = format!("{{\"a\":{}1{}}}", "[".repeat(90), "]".repeat(90));
        assert!(to_json(ArgEncoding::Json, ok.as_bytes()).is_ok());
    }

    #[test]
    fn repr_examples() {
        assert_eq!(python_repr(&json!("it's")), r#""it's""#);
        assert_eq!(python_repr(&json!("say \"hi\"")), r#"'say "hi"'"#);
        assert_eq!(python_repr(&json!("a'b\"c")), r#"'a\'b"c'"#);
        assert_eq!(
            python_repr(&json!("x\\y\n\u{1}\u{7f}")),
            "'x\\\\y\\n\\x01\u{7f}'"
        );
        assert_eq!(python_repr(&json!("é😀")), "'é😀'");
        assert_eq!(python_repr(&json!(null)), "None");
        assert_eq!(
            python_repr(&json!([true, false, 1, -2.5, {"k": []}])),
            "[True, False, 1, -2.5, {'k': []}]"
        );
        let args = json!({"user_id": 7890, "special": "black"});
        let args = args.as_object().unwrap();
        assert_eq!(python_kwargs(args), "user_id=7890, special='black'");
        assert_eq!(python_kwargs(&Map::new()), "");
    }

    #[test]
    fn round_trip_examples() {
        let v = json!({
            "s": "quotes ' \" both, backslash \\ newline \n tab \t nul \0 é 😀 \u{2028}",
            "only_single": "it's",
            "nested": {"a": [1, [2, [3, {"b": null}]]], "c": {"d": {}}, "e": []},
            "nums": [0, -1, 1.5, 1e300, -2.5e-8, 18446744073709551615u64, -9223372036854775808i64],
            "flags": [true, false, null],
        });
        let map = v.as_object().unwrap();
        let kwargs = python_kwargs(map);
        assert_eq!(py(&kwargs).unwrap(), v, "{kwargs}");
        assert_eq!(py("").unwrap(), json!({}));
    }

    fn arb_string() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[a-z '\"\\\\\n\r\t\u{0}\u{1}\u{7f}é😀\u{2028}\u{a0}]{0,12}",
        ]
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                // serde_json (without `float_roundtrip`) reads some floats back 1 ulp off.
                .prop_filter("finite, read back exactly", |f| {
                    f.is_finite()
                        && serde_json::to_string(f)
                            .ok()
                            .and_then(|t| serde_json::from_str::<f64>(&t).ok())
                            == Some(*f)
                })
                .prop_map(Value::from),
            arb_string().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((arb_string(), inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn arb_args() -> impl Strategy<Value = Map<String, Value>> {
        let name = "[a-zA-Z_][a-zA-Z0-9_]{0,6}".prop_filter("keyword", |n| {
            !matches!(n.as_str(), "True" | "False" | "None")
        });
        prop::collection::vec((name, arb_value()), 0..5).prop_map(|kv| kv.into_iter().collect())
    }

    /// The span of `args` in `enc`.
    fn span_of(enc: ArgEncoding, args: &Map<String, Value>, pretty: bool) -> String {
        let text = if pretty {
            serde_json::to_string_pretty(args).unwrap()
        } else {
            serde_json::to_string(args).unwrap()
        };
        match enc {
            ArgEncoding::Json => text,
            ArgEncoding::JsonInString => serde_json::to_string(&text).unwrap(),
            ArgEncoding::Python => python_kwargs(args),
            ArgEncoding::Gemma => gemma_text(&Value::Object(args.clone()), pretty),
        }
    }

    /// `v` in Gemma's notation (`pretty`: a space after each comma); `None` for a value it
    /// cannot write (a key that is not bare, a string holding the quote).
    fn gemma_text(v: &Value, pretty: bool) -> String {
        let sep = if pretty { ", " } else { "," };
        match v {
            Value::String(s) => format!("{GEMMA_QUOTE}{s}{GEMMA_QUOTE}"),
            Value::Array(a) => {
                let items: Vec<String> = a.iter().map(|x| gemma_text(x, pretty)).collect();
                format!("[{}]", items.join(sep))
            }
            Value::Object(o) => {
                let items: Vec<String> = o
                    .iter()
                    .map(|(k, x)| format!("{k}:{}", gemma_text(x, pretty)))
                    .collect();
                format!("{{{}}}", items.join(sep))
            }
            other => other.to_string(),
        }
    }

    /// True when Gemma's notation writes `v` exactly.
    fn gemma_writes(v: &Value) -> bool {
        match v {
            Value::String(s) => !s.contains(GEMMA_QUOTE),
            Value::Array(a) => a.iter().all(gemma_writes),
            Value::Object(o) => o
                .iter()
                .all(|(k, x)| !k.is_empty() && k.chars().all(gemma_key_char) && gemma_writes(x)),
            _ => true,
        }
    }

    /// The encodings that write `args` exactly.
    fn encodings_for(args: &Map<String, Value>) -> Vec<ArgEncoding> {
        let mut e = ENCODINGS.to_vec();
        if gemma_writes(&Value::Object(args.clone())) {
            e.push(ArgEncoding::Gemma);
        }
        e
    }

    const ENCODINGS: [ArgEncoding; 3] = [
        ArgEncoding::Json,
        ArgEncoding::JsonInString,
        ArgEncoding::Python,
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn round_trips(args in arb_args(), pretty in any::<bool>()) {
            let want = Value::Object(args.clone());
            for enc in encodings_for(&args) {
                let span = span_of(enc, &args, pretty);
                let got = to_json(enc, span.as_bytes());
                prop_assert_eq!(got.as_ref(), Ok(&want), "{:?} {}", enc, span);
            }
        }

        #[test]
        fn streaming_matches_whole(
            args in arb_args(),
            pretty in any::<bool>(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            for enc in encodings_for(&args) {
                let span = span_of(enc, &args, pretty);
                let bytes = span.as_bytes();
                let whole = stream(enc, bytes, &[]).unwrap();
                if enc == ArgEncoding::Json {
                    prop_assert_eq!(&whole, &span);
                }
                if enc == ArgEncoding::JsonInString {
                    let inner: String = serde_json::from_str(&span).unwrap();
                    prop_assert_eq!(&whole, &inner);
                }
                let (by_byte, _) = bytewise(enc, bytes).unwrap();
                prop_assert_eq!(&by_byte, &whole);
                let cuts: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
                let chunked = stream(enc, bytes, &cuts).unwrap();
                prop_assert_eq!(&chunked, &whole);
                let parsed: Value = serde_json::from_str(&whole).unwrap();
                prop_assert_eq!(parsed, to_json(enc, bytes).unwrap());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            for enc in ENCODINGS.into_iter().chain([ArgEncoding::Gemma]) {
                let _ = to_json(enc, &bytes);
                let _ = bytewise(enc, &bytes);
            }
        }

        #[test]
        fn token_soup_python(parts in prop::collection::vec(prop::sample::select(vec![
            "'", "\"", "\\", "x", "=", "(", ")", "[", "]", "{", "}", ",", ":", "1", "_", ".",
            "e", "-", "+", "0x", "True", "None", " ", "\n", "\\u", "d83d", "é", "a=", "'a'",
            "\\x4", "0", "7", "\\ude00", "j",
        ]), 0..24)) {
            let span = parts.concat();
            let whole = to_json(ArgEncoding::Python, span.as_bytes());
            let streamed = bytewise(ArgEncoding::Python, span.as_bytes());
            prop_assert_eq!(whole.is_ok(), streamed.is_ok(), "{}", span);
            if let (Ok(v), Ok((text, _))) = (whole, streamed) {
                let parsed: Value = serde_json::from_str(&text).unwrap();
                prop_assert_eq!(parsed, v);
            }
        }

        #[test]
        fn json_agrees_with_serde(parts in prop::collection::vec(prop::sample::select(vec![
            "{", "}", "[", "]", ",", ":", "\"a\"", "\"", "\\", "\\u", "d800", "dc00", "0", "1",
            "-", ".", "e", "+", "true", "nul", "null", " ", "\n", "\"\\ud83d\\ude00\"", "1e400",
            "é", "\u{1}", "01", "\\n", "/",
        ]), 0..24), wrap in any::<bool>()) {
            let body = parts.concat();
            let span = if wrap { format!("{{\"k\": {body}}}") } else { body };
            let mine = to_json(ArgEncoding::Json, span.as_bytes());
            let serde = serde_json::from_str::<Value>(&span).ok().filter(Value::is_object);
            prop_assert_eq!(mine.as_ref().ok(), serde.as_ref(), "{} {:?}", span, mine);
            let in_string = serde_json::to_string(&span).unwrap();
            let mine2 = to_json(ArgEncoding::JsonInString, in_string.as_bytes());
            prop_assert_eq!(mine2.ok(), serde);
        }
    }
}
