//! Checks and readings shared by the dialect tests: whether a text's tokens are accepted, and
//! the calls a case file lists.

use std::sync::Arc;

use callmask::{Grammar, TokenAutomaton, Vocab};
use serde_json::{json, Value};

/// True when the token matcher accepts `text` (special tokens spelled in it taken as the
/// vocabulary's special tokens) and may end after it.
pub fn tokens_accept(vocab: &Arc<Vocab>, g: &Grammar, text: &str) -> bool {
    let auto = TokenAutomaton::new(g, vocab.clone()).unwrap();
    let Ok(tokens) = auto.tokenize(text) else {
        return false;
    };
    let mut m = auto.matcher();
    for t in tokens {
        if m.accept(t).is_err() {
            return false;
        }
    }
    m.can_end()
}

/// The calls of a case (`{"calls": [{name, arguments}]}`), as `(name, arguments)`.
pub fn calls_of(case: &Value) -> Vec<(String, Value)> {
    case.get("calls")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap().to_owned(),
                        c.get("arguments").cloned().unwrap_or_else(|| json!({})),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}
