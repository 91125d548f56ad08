//! Python literal spelling: identifiers, string literals, `repr` of JSON values, keyword
//! arguments. One place for it, shared by the schema compiler (keys and kwargs the grammar
//! accepts), the output converter and the prompts (calls written the way the grammar reads them),
//! so what callmask writes is always what it accepts.
//!
//! Only control characters are escaped in strings (`\n`, `\r`, `\t`, `\xHH`, and the quote and
//! backslash); every other character is written as itself, which is valid Python.

use serde_json::{Map, Value};
use std::fmt::Write as _;

/// True for a Python identifier (ASCII letters, digits and `_`, not starting with a digit).
pub fn is_identifier(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c == b'_' || c.is_ascii_alphabetic())
        && b.all(|c| c == b'_' || c.is_ascii_alphanumeric())
}

/// JSON text as Python's `json.dumps` writes it by default (`ensure_ascii=True`): every
/// character past ASCII as `\uxxxx` (lowercase hex; a surrogate pair past U+FFFF), the rest
/// unchanged. The grammar accepts both this spelling and the raw one (see
/// docs/json-schema.md).
///
/// ```
/// let json = r#"{"city": "Asunción", "mood": "😀"}"#;
/// assert_eq!(
///     callmask::python::ensure_ascii(json),
///     r#"{"city": "Asunci\u00f3n", "mood": "\ud83d\ude00"}"#
/// );
/// ```
pub fn ensure_ascii(json: &str) -> String {
    escape_past_ascii(json, false)
}

/// `text` with every character past ASCII written as `\uXXXX` (a surrogate pair past U+FFFF),
/// in lowercase or uppercase hex.
pub(crate) fn escape_past_ascii(text: &str, upper: bool) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut units = [0u16; 2];
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
            continue;
        }
        for u in c.encode_utf16(&mut units) {
            let _ = if upper {
                write!(out, "\\u{u:04X}")
            } else {
                write!(out, "\\u{u:04x}")
            };
        }
    }
    out
}

/// `s` as a Python string literal in quote `q`, escaped the way the grammar accepts.
pub fn py_quote(s: &str, q: char) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

/// Writes a JSON value as a Python literal: strings quoted as Python's `repr` does (single
/// quotes unless the string has `'` and no `"`), `True`/`False`/`None`, lists, and dicts
/// `{'k': v}`.
///
/// Control characters are escaped (`\n`, `\r`, `\t`, `\xHH`); every other character is
/// written as itself (valid Python, and the spelling the pythonic grammar accepts).
pub fn python_repr(v: &Value) -> String {
    let mut out = String::new();
    write_python(&mut out, v);
    out
}

/// Writes arguments as Python keyword arguments, `a=1, b='x'` (names written as they are).
pub fn python_kwargs(args: &Map<String, Value>) -> String {
    let mut out = String::new();
    for (i, (k, v)) in args.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(k);
        out.push('=');
        write_python(&mut out, v);
    }
    out
}

/// One piece of work for [`write_python`], which uses a stack instead of recursion.
enum ReprItem<'a> {
    /// A value to write.
    Value(&'a Value),
    /// Fixed text.
    Text(&'static str),
    /// A dict key, written with its `: `.
    Key(&'a str),
}

/// Appends the Python literal for `v` to `out`.
fn write_python(out: &mut String, v: &Value) {
    let mut stack = vec![ReprItem::Value(v)];
    while let Some(item) = stack.pop() {
        match item {
            ReprItem::Text(t) => out.push_str(t),
            ReprItem::Key(k) => {
                write_python_str(out, k);
                out.push_str(": ");
            }
            ReprItem::Value(v) => match v {
                Value::Null => out.push_str("None"),
                Value::Bool(true) => out.push_str("True"),
                Value::Bool(false) => out.push_str("False"),
                Value::Number(n) => {
                    let _ = write!(out, "{n}");
                }
                Value::String(s) => write_python_str(out, s),
                Value::Array(items) => {
                    out.push('[');
                    stack.push(ReprItem::Text("]"));
                    for (i, x) in items.iter().enumerate().rev() {
                        stack.push(ReprItem::Value(x));
                        if i > 0 {
                            stack.push(ReprItem::Text(", "));
                        }
                    }
                }
                Value::Object(map) => {
                    out.push('{');
                    stack.push(ReprItem::Text("}"));
                    for (i, (k, x)) in map.iter().enumerate().rev() {
                        stack.push(ReprItem::Value(x));
                        stack.push(ReprItem::Key(k));
                        if i > 0 {
                            stack.push(ReprItem::Text(", "));
                        }
                    }
                }
            },
        }
    }
}

/// Appends `s` as a Python string literal, quoted the way Python's `repr` picks.
fn write_python_str(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push_str(&py_quote(s, quote));
}
