//! What a server answers for a request whose tools cannot be compiled: every such error is the
//! request's own fault ([`Fault::Request`]: HTTP 400), names the tool and schema path it is
//! about ([`Error::param`]), and says what is wrong in the user's terms: their pattern as they
//! wrote it, lookaround by name, the limit and the option that raises it, nesting by its limit.

use callmask::{Dialect, DialectOptions, Error, Fault, Tools, MAX_JSON_DEPTH};
use serde_json::{json, Value};

/// The error of compiling one tool `f` with parameter `a` of schema `a` in the hermes dialect.
fn refusal(a: Value) -> Error {
    let tools = json!([{"type": "function", "function": {
        "name": "f",
        "parameters": {"type": "object", "properties": {"a": a}, "required": ["a"]}
    }}]);
    let tools = Tools::from_json_str(&tools.to_string()).expect("tools parse");
    match Dialect::by_name("hermes")
        .unwrap()
        .compile(&tools, &DialectOptions::default())
    {
        Ok(_) => panic!("compiled: {a}"),
        Err(e) => e,
    }
}

fn assert_request_fault(e: &Error, param: &str, says: &[&str]) {
    assert_eq!(e.fault(), Fault::Request, "{e}");
    assert_eq!(e.param().as_deref(), Some(param), "{e}");
    let text = e.to_string();
    for s in says {
        assert!(text.contains(s), "{text:?} does not say {s:?}");
    }
}

#[test]
fn unknown_type_names_tool_and_path() {
    let e = refusal(json!({"type": "strng"}));
    assert!(matches!(e, Error::InvalidSchema { .. }), "{e}");
    assert_request_fault(&e, "tools[f].parameters#/properties/a", &["strng"]);
}

#[test]
fn missing_ref_names_tool_and_path() {
    let e = refusal(json!({"$ref": "#/$defs/missing"}));
    assert_request_fault(
        &e,
        "tools[f].parameters#/properties/a",
        &["#/$defs/missing"],
    );
}

#[test]
fn malformed_pattern_is_shown_as_written() {
    let e = refusal(json!({"type": "string", "pattern": "([a-z"}));
    assert!(matches!(e, Error::InvalidPattern { .. }), "{e}");
    assert_request_fault(&e, "tools[f].parameters#/properties/a", &["\"([a-z\""]);
    let text = e.to_string();
    // Not the internal rewrite of the pattern, nor the parser's multi-line rendering.
    assert!(!text.contains("(?s:.)"), "{text}");
    assert!(!text.contains('\n'), "{text}");
}

#[test]
fn lookaround_is_named() {
    for (pattern, kind) in [
        ("^(?=.*[0-9]).{8,}$", "lookahead `(?=`"),
        ("^(?!admin).*$", "negative lookahead `(?!`"),
        ("(?<=@)x", "lookbehind `(?<=`"),
        ("(?<!a)b", "negative lookbehind `(?<!`"),
    ] {
        let e = refusal(json!({"type": "string", "pattern": pattern}));
        assert_request_fault(
            &e,
            "tools[f].parameters#/properties/a",
            &["lookaround is not supported", kind],
        );
    }
    // A lookalike inside a class, or escaped, is not lookaround.
    for pattern in [r"^[(?=]+$", r"^\(?=x$"] {
        let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}}}}]);
        let tools = Tools::from_json_str(&tools.to_string()).unwrap();
        let r = Dialect::by_name("hermes")
            .unwrap()
            .compile(&tools, &DialectOptions::default());
        assert!(r.is_ok(), "{pattern}: {:?}", r.err());
    }
}

#[test]
fn backreference_is_named() {
    let e = refusal(json!({"type": "string", "pattern": r"^(a)\1$"}));
    assert_request_fault(
        &e,
        "tools[f].parameters#/properties/a",
        &["backreference `\\1`"],
    );
}

#[test]
fn lexeme_limit_names_property_and_option() {
    let e = refusal(json!({"type": "string", "pattern": "^(a|b|c){1,100000}$"}));
    assert!(matches!(e, Error::LimitExceeded { .. }), "{e}");
    assert_request_fault(
        &e,
        "tools[f].parameters#/properties/a",
        &[
            "states in one lexeme automaton",
            "max_lexeme_states",
            "at f: #/properties/a",
        ],
    );
}

#[test]
fn deep_nesting_is_a_named_limit_not_a_json_error() {
    // A schema 300 objects deep, as JSON text (what a server receives).
    let text = deep_tools_text(300);
    let e = Tools::from_json_str(&text).unwrap_err();
    assert!(
        matches!(e, Error::LimitExceeded { limit, .. } if limit == MAX_JSON_DEPTH),
        "{e}"
    );
    assert_request_fault(
        &e,
        "tools",
        &["JSON nesting depth", &MAX_JSON_DEPTH.to_string()],
    );
    assert!(!e.to_string().contains("recursion limit"), "{e}");
}

/// OpenAI tools text whose one function's parameters nest `depth` objects.
fn deep_tools_text(depth: usize) -> String {
    let open = r#"{"type": "object", "properties": {"a": "#;
    format!(
        r#"[{{"type": "function", "function": {{"name": "f", "parameters": {}{{"type": "string"}}{}}}}}]"#,
        open.repeat(depth),
        "}}".repeat(depth)
    )
}

#[test]
fn budget_too_small_is_the_requests_fault() {
    let e = Error::BudgetTooSmall {
        budget: 2,
        needed: 9,
    };
    assert_request_fault(&e, "max_tokens", &["2", "9"]);
}
