//! `@args(as=raw, key="K")`: a call whose arguments `{K: TEXT}` are written as TEXT, raw
//! (Functionary's `<|python_tag|>` code, read by llama.cpp as `python` with `{"code": ..}`).
//! The raw form is a call only of a function whose parameters are one string `K`; for other
//! functions the spelling writes nothing (the mask never offers it). Streamed and whole parses
//! agree; the file errors name the misuse. Also `@python_call(literals=both)`.

use callmask_testkit as testkit;

use callmask::parse::{Event, StreamParser};
use callmask::{Dialect, DialectOptions, Error, TokenAutomaton, TokenMask, Tools};
use serde_json::{json, Value};

const GRAMMAR: &str = r#"root ::= @text_without("<|python_tag|>") python?
python ::= @call(<|python_tag|> @args(as=raw, key="code"))"#;

fn tools(code_schema: Value, extra_required: bool) -> Tools {
    let mut params = json!({
        "type": "object",
        "properties": {"code": code_schema, "timeout": {"type": "integer"}},
        "required": ["code"]
    });
    if extra_required {
        params["required"] = json!(["code", "timeout"]);
    }
    Tools::from_json_str(
        &json!([
            {"type": "function", "function": {"name": "python", "parameters": params}},
            {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
        ])
        .to_string(),
    )
    .unwrap()
}

fn calls(g: &callmask::Grammar, text: &str) -> callmask::Result<Vec<(String, Value)>> {
    Ok(g.parse(text)?
        .tool_calls
        .iter()
        .map(|c| (c.function.name.clone(), c.arguments_json().unwrap()))
        .collect())
}

#[test]
fn raw_text_is_the_one_string_argument() {
    let d = Dialect::parse("raw", GRAMMAR).unwrap();
    let g = d
        .compile(
            &tools(json!({"type": "string"}), false),
            &DialectOptions::default(),
        )
        .unwrap();
    let code = "import math\nprint(\"<|x|>\", math.pi)\n";
    assert_eq!(
        calls(&g, &format!("Sure.<|python_tag|>{code}")).unwrap(),
        vec![("python".to_owned(), json!({ "code": code }))]
    );
    // Empty code is no call (it would read as no arguments).
    assert!(calls(&g, "<|python_tag|>").is_err());
    // Streamed token by token on Llama 3.1's vocabulary: the same arguments.
    let vocab = testkit::llama_vocab();
    let auto = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let mut p = StreamParser::new(&g);
    let mut args = String::new();
    let mut m = auto.matcher();
    for t in auto.tokenize(&format!("ok<|python_tag|>{code}")).unwrap() {
        m.accept(t).unwrap();
        for e in p.push_token(&vocab, t).unwrap() {
            if let Event::Arguments { delta, .. } = e {
                args += &delta;
            }
        }
    }
    for e in p.finish().unwrap() {
        if let Event::Arguments { delta, .. } = e {
            args += &delta;
        }
    }
    assert!(m.can_end());
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        json!({ "code": code })
    );
}

#[test]
fn the_string_schema_binds_the_raw_text() {
    let d = Dialect::parse("raw", GRAMMAR).unwrap();
    let g = d
        .compile(
            &tools(
                json!({"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"}),
                false,
            ),
            &DialectOptions::default(),
        )
        .unwrap();
    assert!(calls(&g, "<|python_tag|>abc").is_ok());
    assert!(
        calls(&g, "<|python_tag|>abcdef").is_err(),
        "longer than maxLength"
    );
    assert!(calls(&g, "<|python_tag|>ab1").is_err(), "not the pattern");
}

#[test]
fn other_functions_have_no_raw_form_and_the_mask_never_offers_it() {
    let d = Dialect::parse("raw", GRAMMAR).unwrap();
    let vocab = testkit::llama_vocab();
    let tag = vocab.special_token("<|python_tag|>").unwrap();
    // `code` not a string, or a second required argument: the raw text is not the arguments.
    for t in [
        tools(json!({"type": "integer"}), false),
        tools(json!({"type": "string"}), true),
    ] {
        let g = d.compile(&t, &DialectOptions::default()).unwrap();
        assert!(matches!(
            g.parse("<|python_tag|>print(1)"),
            Err(Error::Parse(_))
        ));
        let auto = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        let mut m = auto.matcher();
        let mut mask = TokenMask::new(vocab.len());
        m.fill_mask(&mut mask);
        assert!(!mask.is_allowed(tag));
        assert!(m.accept(tag).is_err());
    }
}

#[test]
fn misuse_is_a_dialect_error() {
    for (src, want) in [
        ("root ::= @call(\"x\" @args(as=raw))", "needs key="),
        (
            "root ::= @call(\"x\" @args(as=json, key=\"code\"))",
            "as=raw only",
        ),
        ("root ::= \"x\" @args(as=raw, key=\"code\")", "inside @call"),
        (
            "root ::= @call(\"x\" @args(as=rawest, key=\"c\"))",
            "expected json, string, python, gemma or raw",
        ),
    ] {
        let e = Dialect::parse("bad", src).unwrap_err().to_string();
        assert!(e.contains(want), "{src}: {e}");
    }
}

/// `@python_call(literals=both)`: Python values that may also spell `true`, `false` and `null`
/// as JSON does (LFM2, OLMo 3), everywhere a literal is (enums, `not`); plain `@python_call`
/// keeps Python's only.
#[test]
fn python_calls_with_json_literals() {
    let tools = Tools::from_json_str(
        &json!([{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object",
            "properties": {
                "flag": {"type": "boolean"},
                "x": {"type": ["integer", "null"]},
                "on": {"enum": [true, null]},
                "not_true": {"not": {"const": true}, "type": "boolean"},
                "items": {"type": "array", "items": {"type": "object", "properties": {"v": {"type": "boolean"}}}}
            }
        }}}])
        .to_string(),
    )
    .unwrap();
    let both = Dialect::parse("b", "root ::= \"[\" @python_call(literals=both) \"]\"")
        .unwrap()
        .compile(&tools, &DialectOptions::default())
        .unwrap();
    let python = Dialect::parse("p", "root ::= \"[\" @python_call \"]\"")
        .unwrap()
        .compile(&tools, &DialectOptions::default())
        .unwrap();
    let text = "[f(flag=true, x=null, on=None, items=[{'v': false}, {\"v\": True}])]";
    assert_eq!(
        calls(&both, text).unwrap(),
        vec![(
            "f".to_owned(),
            json!({"flag": true, "x": null, "on": null, "items": [{"v": false}, {"v": true}]})
        )]
    );
    assert!(calls(&python, text).is_err());
    assert!(calls(&python, "[f(flag=True, x=None)]").is_ok());
    for bad in [
        "[f(not_true=true)]",
        "[f(not_true=True)]",
        "[f(on=false)]",
        "[f(flag=TRUE)]",
        "[f(x=nil)]",
    ] {
        assert!(calls(&both, bad).is_err(), "{bad}");
    }
    assert!(calls(&both, "[f(not_true=false)]").is_ok());
    let vocab = testkit::llama_vocab();
    let auto = TokenAutomaton::new(&both, vocab).unwrap();
    let mut m = auto.matcher();
    for t in auto.tokenize(text).unwrap() {
        m.accept(t).unwrap();
    }
    assert!(m.can_end());
}
