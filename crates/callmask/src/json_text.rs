//! JSON text from a request (tools, schemas, options) read with a nesting limit of its own.
//!
//! serde_json refuses text nested deeper than 128 arrays and objects with a "recursion limit
//! exceeded" syntax error, which reads as if the JSON were malformed. [`parse_json`] counts the
//! nesting first, in one pass that keeps no stack, and refuses deeper text with
//! [`Error::LimitExceeded`] naming [`MAX_JSON_DEPTH`]; everything shallower is serde_json's.

use serde_json::Value;

use crate::error::{Error, Result};

/// The deepest nesting of arrays and objects accepted in JSON text (serde_json's own limit).
pub const MAX_JSON_DEPTH: usize = 127;

/// `text` as a JSON value; text nested deeper than [`MAX_JSON_DEPTH`] is refused with
/// [`Error::LimitExceeded`], malformed text with [`Error::Json`].
pub fn parse_json(text: &str) -> Result<Value> {
    if nesting_depth(text) > MAX_JSON_DEPTH {
        return Err(Error::LimitExceeded {
            what: "JSON nesting depth (arrays and objects)",
            limit: MAX_JSON_DEPTH,
            option: "",
            path: String::new(),
        });
    }
    Ok(serde_json::from_str(text)?)
}

/// The deepest nesting of `[` and `{` outside strings (brackets need not balance: malformed
/// text is serde_json's to report).
fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(n: usize) -> String {
        format!("{}{}", "[".repeat(n), "]".repeat(n))
    }

    #[test]
    fn the_limit_is_serde_jsons_own() {
        assert!(serde_json::from_str::<Value>(&nested(MAX_JSON_DEPTH)).is_ok());
        assert!(serde_json::from_str::<Value>(&nested(MAX_JSON_DEPTH + 1)).is_err());
        assert!(parse_json(&nested(MAX_JSON_DEPTH)).is_ok());
        let e = parse_json(&nested(MAX_JSON_DEPTH + 1)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::LimitExceeded {
                    limit: MAX_JSON_DEPTH,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("JSON nesting depth"), "{e}");
    }

    #[test]
    fn brackets_in_strings_do_not_count() {
        let text = format!(r#"{{"a": "{}\"{}"}}"#, "[".repeat(500), "{".repeat(500));
        assert_eq!(nesting_depth(&text), 1);
        assert!(parse_json(&text).is_ok());
    }

    #[test]
    fn malformed_text_is_a_json_error() {
        assert!(matches!(parse_json("{\"a\": ]"), Err(Error::Json(_))));
    }
}
