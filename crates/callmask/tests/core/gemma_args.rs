//! Gemma 4's argument notation (`@args(as=gemma)`, the `gemma4` dialect): bare keys, strings
//! between `<|"|>` quotes that are special tokens where the vocabulary has one (Gemma 4's, here
//! Qwen 3's with Gemma 4's markers added) and text where it has none (Gemma 3's), JSON's
//! numbers and literals. Outputs pass token by token, parse and stream to the same calls;
//! what the notation cannot write exactly is refused at compile time with the keyword named.

use crate::xml_args_typed::streamed;
use callmask_testkit as testkit;

use callmask::{Dialect, DialectOptions, Error, Grammar, TokenAutomaton, Tools};
use serde_json::{json, Value};

use callmask_testkit::checks::tokens_accept;

fn tools() -> Tools {
    Tools::from_json_str(
        &json!([{
            "type": "function",
            "function": {
                "name": "plan",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string", "pattern": "^[A-Z][a-z]+$"},
                        "unit": {"enum": ["celsius", "fahrenheit", 3]},
                        "days": {"type": "integer", "minimum": 1, "maximum": 9},
                        "note": {"type": ["string", "null"], "maxLength": 12},
                        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                        "stops": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {"at": {"type": "string"}, "ok": {"type": "boolean"}},
                                "required": ["at"],
                                "additionalProperties": false
                            }
                        },
                        "meta": {"type": "object", "additionalProperties": {"type": "number"}},
                        "any": {}
                    },
                    "required": ["city"],
                    "additionalProperties": false
                }
            }
        }])
        .to_string(),
    )
    .unwrap()
}

fn grammar(tools: &Tools) -> callmask::Result<Grammar> {
    Dialect::by_name("gemma4")
        .unwrap()
        .compile(tools, &DialectOptions::default())
}

fn call(args: &str) -> String {
    format!("<|tool_call>call:plan{{{args}}}<tool_call|>")
}

#[test]
fn gemma_values_pass_parse_and_stream_alike() {
    let g = grammar(&tools()).unwrap();
    let with_quote = testkit::case_vocab("gemma4").unwrap();
    let without = testkit::gemma_vocab();
    let cases = [
        (r#"city:<|"|>Paris<|"|>"#, json!({"city": "Paris"})),
        (
            r#"city:<|"|>Oslo<|"|>,days:3,note:null,unit:<|"|>celsius<|"|>"#,
            json!({"city": "Oslo", "days": 3, "note": null, "unit": "celsius"}),
        ),
        (
            r#"unit:3, city:<|"|>Rome<|"|>, note:<|"|>a "b" \ {c}<|"|>"#,
            json!({"unit": 3, "city": "Rome", "note": "a \"b\" \\ {c}"}),
        ),
        (
            r#"city:<|"|>Lima<|"|>,tags:[<|"|><|"|>,<|"|>x, y<|"|>],stops:[{at:<|"|>A<|"|>,ok:true},{at:<|"|><|"|>}]"#,
            json!({"city": "Lima", "tags": ["", "x, y"],
                   "stops": [{"at": "A", "ok": true}, {"at": ""}]}),
        ),
        (
            r#"city:<|"|>Bern<|"|>,meta:{x.y:1.5,z-1:-2},any:{k:[<|"|>v<|"|>,null,{}]}"#,
            json!({"city": "Bern", "meta": {"x.y": 1.5, "z-1": -2},
                   "any": {"k": ["v", null, {}]}}),
        ),
    ];
    for (args, want) in cases {
        let text = call(args);
        let parsed = g.parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(parsed.tool_calls.len(), 1, "{text}");
        assert_eq!(
            parsed.tool_calls[0].arguments_json().unwrap(),
            want,
            "{text}"
        );
        for vocab in [&with_quote, &without] {
            assert!(
                tokens_accept(vocab, &g, &text),
                "{text}: rejected token by token"
            );
            assert_eq!(
                streamed(vocab, &g, &text),
                vec![("plan".to_string(), want.clone())]
            );
        }
    }
    // Gemma 4's vocabulary writes the quote as its special token.
    let auto = TokenAutomaton::new(&g, with_quote.clone()).unwrap();
    let quote = with_quote.special_token("<|\"|>").unwrap();
    let tokens = auto.tokenize(&call(r#"city:<|"|>Paris<|"|>"#)).unwrap();
    assert_eq!(tokens.iter().filter(|&&t| t == quote).count(), 2);
}

#[test]
fn gemma_refuses_what_the_schema_or_the_notation_does_not_allow() {
    let g = grammar(&tools()).unwrap();
    let vocab = testkit::case_vocab("gemma4").unwrap();
    for args in [
        r#"city:<|"|>paris<|"|>"#,                              // the pattern
        r#"city:"Paris""#,                                      // a JSON string
        r#"<|"|>city<|"|>:<|"|>Paris<|"|>"#,                    // a quoted key
        r#"city :<|"|>Paris<|"|>"#,                             // a space before the colon
        "city:<|\"|>Paris<|\"|>,\ndays:3",                      // a line break
        r#"city:<|"|>Paris<|"|>,days:10"#,                      // the maximum
        r#"city:<|"|>Paris<|"|>,note:<|"|>1234567890123<|"|>"#, // maxLength
        r#"city:<|"|>Paris<|"|>,unit:<|"|>kelvin<|"|>"#,        // the enum
        r#"city:<|"|>Paris<|"|>,unit:<|"|>3<|"|>"#,             // 3 is a number
        r#"city:<|"|>Paris<|"|>,stops:[{ok:true}]"#,            // a required key
        r#"city:<|"|>Paris<|"|>,meta:{x:<|"|>1<|"|>}"#,         // additionalProperties
        r#"city:<|"|>Paris<|"|>,city:<|"|>Rome<|"|>"#,          // a key twice
        r#"days:3"#,                                            // city is required
    ] {
        let text = call(args);
        assert!(!tokens_accept(&vocab, &g, &text), "{text}: accepted");
    }
    // A string's content never holds the quote: its first `<|"|>` ends it.
    let text = call(r#"city:<|"|>Paris<|"|>,note:<|"|>a<|"|>b<|"|>"#);
    assert!(!tokens_accept(&vocab, &g, &text), "{text}: accepted");
}

#[test]
fn gemma_refuses_schemas_it_cannot_write_by_keyword() {
    let refused = |params: Value| -> Error {
        let tools = Tools::from_json_str(
            &json!([{"type": "function", "function": {"name": "f", "parameters": params}}])
                .to_string(),
        )
        .unwrap();
        grammar(&tools).expect_err("compiled")
    };
    let keyword = |e: &Error| match e {
        Error::UnsupportedKeyword { keyword, .. } => keyword.clone(),
        Error::Dialect { message, .. } => message.clone(),
        other => format!("{other}"),
    };
    for (params, kw) in [
        (
            json!({"type": "object", "properties": {"a b": {"type": "string"}}}),
            "properties",
        ),
        (
            json!({"type": "object", "properties": {"k": {"not": {"type": "string"}}}}),
            "not",
        ),
        (
            json!({"type": "object", "properties": {"k": {"enum": ["x<|\"|>y"]}}}),
            "enum",
        ),
        (
            json!({"type": "object", "properties": {"k": {"type": "array",
                "items": {"type": "string"}, "uniqueItems": true}}}),
            "uniqueItems",
        ),
    ] {
        let e = refused(params.clone());
        assert!(
            keyword(&e).contains(kw) || format!("{e}").contains(kw),
            "{params}: {e}"
        );
    }
}
