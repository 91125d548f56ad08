//! `@xml_args` beyond the schema-decided form: type-tagged values (`json_key_suffix`, or
//! `types=(...)` with `{type}` in `key_suffix`), affixes holding special tokens and markers,
//! raw values that hold neither the key prefix nor `value_without`'s texts, and argument rules
//! outside `@call(...)` used only inside one. The DeepSeek V3.2 and V4 (DSML) grammars against
//! their case files, token by token on the DeepSeek V3 vocabulary; a Kimi-K3-shaped grammar on
//! a vocabulary with its markers as special tokens and on one without them.

use callmask_testkit as testkit;

use std::sync::Arc;

use callmask::parse::{Event, StreamParser};
use callmask::{Dialect, DialectOptions, Error, Grammar, TokenAutomaton, Tools, Vocab};
use serde_json::{json, Value};

use callmask_testkit::mixed_tools;

use callmask_testkit::checks::{calls_of, tokens_accept};

fn grammar_file(name: &str) -> String {
    format!("{}/grammars/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The calls a token stream parses to, streaming (`(name, arguments)`).
pub(crate) fn streamed(vocab: &Arc<Vocab>, g: &Grammar, text: &str) -> Vec<(String, Value)> {
    let auto = TokenAutomaton::new(g, vocab.clone()).unwrap();
    let mut p = StreamParser::new(g);
    let mut events = Vec::new();
    for t in auto.tokenize(text).unwrap() {
        events.extend(p.push_token(vocab, t).unwrap());
    }
    events.extend(p.finish().unwrap());
    let mut calls: Vec<(String, String)> = Vec::new();
    for e in events {
        match e {
            Event::CallStart { name, .. } => calls.push((name, String::new())),
            Event::Arguments { index, delta } => calls[index].1 += &delta,
            _ => {}
        }
    }
    calls
        .into_iter()
        .map(|(n, a)| {
            let v = serde_json::from_str(&a).unwrap_or_else(|e| panic!("{a}: {e}"));
            (n, v)
        })
        .collect()
}

fn parsed_calls(g: &Grammar, text: &str) -> callmask::Result<Vec<(String, Value)>> {
    Ok(g.parse(text)?
        .tool_calls
        .iter()
        .map(|c| (c.function.name.clone(), c.arguments_json().unwrap()))
        .collect())
}

fn check_case_file(d: &str) {
    let dialect = Dialect::from_file(grammar_file(&format!("{d}.gbnf"))).unwrap();
    let g = dialect
        .compile(&mixed_tools(), &DialectOptions::default())
        .unwrap_or_else(|e| panic!("{d}: {e}"));
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/tests/dialect_cases/{d}.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let vocab = testkit::npm_vocab("deepseek_v3");
    let list = |k: &str| file[k].as_array().cloned().unwrap_or_default();
    for (i, c) in list("accept").iter().enumerate() {
        let text = c["text"].as_str().unwrap();
        let what = format!("{d} accept[{i}] ({}):\n{text}", c["why"]);
        let parsed = g.parse(text).unwrap_or_else(|e| panic!("{what}\n{e}"));
        let got: Vec<(String, Value)> = parsed
            .tool_calls
            .iter()
            .map(|c| (c.function.name.clone(), c.arguments_json().unwrap()))
            .collect();
        assert_eq!(got, calls_of(c), "{what}");
        if let Some(content) = c.get("content").and_then(Value::as_str) {
            assert_eq!(parsed.text, content.trim(), "{what}");
        }
        if let Some(r) = c.get("reasoning").and_then(Value::as_str) {
            assert_eq!(
                parsed.reasoning.as_deref().map(str::trim),
                Some(r.trim()),
                "{what}"
            );
        }
        assert!(
            tokens_accept(&vocab, &g, text),
            "{what}\nrejected token by token"
        );
        assert_eq!(streamed(&vocab, &g, text), calls_of(c), "{what}\nstreamed");
    }
    for (i, c) in list("reject").iter().enumerate() {
        let text = c["text"].as_str().unwrap();
        let what = format!("{d} reject[{i}] ({}):\n{text}", c["why"]);
        assert!(g.parse(text).is_err(), "{what}\nparsed");
        assert!(
            !tokens_accept(&vocab, &g, text),
            "{what}\naccepted token by token"
        );
    }
    // The call writer's turns round-trip.
    let writer = std::fs::read_to_string(grammar_file(&format!("{d}.write.jinja"))).unwrap();
    let one = |n: &str, a: Value| (n.to_owned(), a);
    for calls in [
        vec![one(
            "get_current_weather",
            json!({"location": "San Francisco, CA", "unit": "celsius"}),
        )],
        vec![
            one(
                "get_user_info",
                json!({"user_id": 7890, "special": "black"}),
            ),
            one("get_time_utc", json!({})),
        ],
        vec![one(
            "book_flight",
            json!({"from": "SFO", "to": "JFK", "date": "2025-03-01", "cabin": "business",
                   "passengers": [{"name": "An \"A\" O'N", "age": 34, "vegetarian": true},
                                  {"name": "Bo\\b é ü"}],
                   "flexible": null, "max_price": 1234.5}),
        )],
        vec![one(
            "get_current_weather",
            json!({"location": "Zürich\nline2\t<tab>"}),
        )],
    ] {
        let text = callmask::prompt::write_calls(&writer, "Let me check.", &calls).unwrap();
        let what = format!("{d} writer:\n{text}");
        assert_eq!(
            parsed_calls(&g, &text).unwrap_or_else(|e| panic!("{what}\n{e}")),
            calls,
            "{what}"
        );
        assert!(
            tokens_accept(&vocab, &g, &text),
            "{what}\nrejected token by token"
        );
        assert_eq!(streamed(&vocab, &g, &text), calls, "{what}\nstreamed");
    }
}

#[test]
fn deepseek_v32_cases() {
    check_case_file("deepseek_v32");
}

#[test]
fn deepseek_v4_cases() {
    check_case_file("deepseek_v4");
}

/// DSML's string attribute: `string="true"` only for string values (written raw), and
/// `string="false"` only for the others (JSON), each restricted by the property's schema.
#[test]
fn dsml_string_attribute_follows_the_value_type() {
    let tools = Tools::from_openai_json(&json!([{
        "name": "f",
        "parameters": {"type": "object", "properties": {
            "s": {"type": "string", "maxLength": 3},
            "opt": {"anyOf": [{"type": "string", "pattern": "^[a-z]+$"}, {"type": "null"}]},
            "either": {"type": ["string", "integer"]},
            "unit": {"$ref": "#/$defs/Unit"},
            "mixed": {"enum": ["a", 1, null]},
            "any": {}
        }, "$defs": {"Unit": {"type": "string", "enum": ["c", "f"]}}}
    }]))
    .unwrap();
    // `$defs` beside the properties: annotations for @xml_args.
    let g = Dialect::from_file(grammar_file("deepseek_v32.gbnf"))
        .unwrap()
        .compile(&tools, &DialectOptions::default())
        .unwrap();
    let call = |params: &[(&str, &str, &str)]| {
        let mut t = String::from("<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n");
        for (k, s, v) in params {
            t += &format!(
                "<｜DSML｜parameter name=\"{k}\" string=\"{s}\">{v}</｜DSML｜parameter>\n"
            );
        }
        t + "</｜DSML｜invoke>\n</｜DSML｜function_calls>"
    };
    let vocab = testkit::npm_vocab("deepseek_v3");
    for (params, want) in [
        (vec![("s", "true", "abc")], Some(json!({"s": "abc"}))),
        (vec![("s", "true", "abcd")], None),
        (vec![("s", "false", "\"abc\"")], None),
        (vec![("opt", "true", "xyz")], Some(json!({"opt": "xyz"}))),
        (vec![("opt", "true", "X")], None),
        (vec![("opt", "false", "null")], Some(json!({"opt": null}))),
        (vec![("opt", "true", "null")], Some(json!({"opt": "null"}))),
        (
            vec![("either", "true", "12")],
            Some(json!({"either": "12"})),
        ),
        (vec![("either", "false", "12")], Some(json!({"either": 12}))),
        (vec![("either", "false", "1.5")], None),
        (vec![("unit", "true", "c")], Some(json!({"unit": "c"}))),
        (vec![("unit", "true", "x")], None),
        (vec![("mixed", "true", "a")], Some(json!({"mixed": "a"}))),
        (vec![("mixed", "false", "1")], Some(json!({"mixed": 1}))),
        (vec![("mixed", "false", "\"a\"")], None),
        (vec![("mixed", "true", "1")], None),
        (
            vec![("any", "false", "[1, {\"a\": true}]")],
            Some(json!({"any": [1, {"a": true}]})),
        ),
        (vec![("any", "true", "[1]")], Some(json!({"any": "[1]"}))),
        // A raw value ends at the next field: it may not hold the key prefix's text.
        (vec![("any", "true", "x<｜DSML｜parameter name=\"y")], None),
        (vec![("any", "true", "x</｜DSML｜parameter>")], None),
    ] {
        let text = call(&params);
        match &want {
            Some(args) => {
                assert_eq!(
                    parsed_calls(&g, &text).unwrap_or_else(|e| panic!("{text}\n{e}")),
                    vec![("f".to_owned(), args.clone())],
                    "{text}"
                );
                assert!(tokens_accept(&vocab, &g, &text), "{text}");
            }
            None => {
                assert!(g.parse(&text).is_err(), "{text}");
                assert!(!tokens_accept(&vocab, &g, &text), "{text}");
            }
        }
    }
    // Strings a raw value cannot be checked against are refused by name.
    for (schema, want) in [
        (
            json!({"allOf": [{"type": "string"}, {"maxLength": 3}]}),
            "allOf",
        ),
        (json!({"type": "string", "not": {"const": "x"}}), "not"),
        (
            json!({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 1}]}),
            "oneOf",
        ),
    ] {
        let t = Tools::from_openai_json(&json!([{"name": "f", "parameters":
            {"type": "object", "properties": {"bad": schema}}}]))
        .unwrap();
        let e = Dialect::from_file(grammar_file("deepseek_v4.gbnf"))
            .unwrap()
            .compile(&t, &DialectOptions::default())
            .unwrap_err();
        assert!(matches!(e, Error::Unrepresentable { .. }), "{e}");
        let m = e.to_string();
        assert!(m.contains("f.bad") && m.contains(want), "{m}");
    }
}

/// A Kimi-K3-shaped format: markers in the affixes, the value's JSON type in the key suffix,
/// the arguments rule outside `@call(...)` (used only inside it).
const K3: &str = r#"
root  ::= @text_without("<|calls_begin|>") calls?
calls ::= @marker("<|calls_begin|>") call+ @marker("<|calls_end|>")
call  ::= @call(@marker("<|open|>") "invoke name=\"" @name "\">" args @marker("<|close|>") "invoke")
args  ::= @xml_args(
            key_prefix=(@marker("<|open|>") "argument key=\""),
            key_suffix="\" type=\"{type}\">",
            types=(string="string", integer="number", number="number", boolean="boolean",
                   null="null", object="object", array="array"),
            value_suffix=(@marker("<|close|>") "argument" @marker("<|sep|>")))
"#;

fn k3_tools() -> Tools {
    Tools::from_openai_json(&json!([{
        "name": "f",
        "parameters": {"type": "object", "properties": {
            "s": {"type": "string"},
            "n": {"type": "integer", "minimum": 0},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
            "o": {"type": ["object", "null"], "properties": {"a": {"type": "integer"}}},
            "l": {"type": "array", "items": {"type": "string"}},
            "u": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}
        }, "required": ["s"]}
    }]))
    .unwrap()
}

fn k3_call(params: &[(&str, &str, &str)]) -> String {
    let mut t = String::from("<|calls_begin|><|open|>invoke name=\"f\">");
    for (k, ty, v) in params {
        t += &format!("<|open|>argument key=\"{k}\" type=\"{ty}\">{v}<|close|>argument<|sep|>");
    }
    t + "<|close|>invoke<|calls_end|>"
}

#[test]
fn typed_fields_with_markers() {
    let g = Dialect::parse("k3", K3)
        .unwrap()
        .compile(&k3_tools(), &DialectOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let markers = [
        "<|calls_begin|>",
        "<|calls_end|>",
        "<|open|>",
        "<|close|>",
        "<|sep|>",
    ];
    let special = testkit::with_specials(testkit::llama_vocab(), &markers);
    let plain = testkit::llama_vocab();
    type Case<'a> = (Vec<(&'a str, &'a str, &'a str)>, Option<Value>);
    let cases: Vec<Case> = vec![
        (
            vec![
                ("n", "number", "3"),
                ("s", "string", "a \"b\" {c}\nd"),
                ("x", "number", "-2.5e3"),
                ("b", "boolean", "false"),
                ("o", "object", "{\"a\": 1}"),
                ("l", "array", "[\"p\", \"q\"]"),
                ("u", "null", "null"),
            ],
            Some(
                json!({"n": 3, "s": "a \"b\" {c}\nd", "x": -2500.0, "b": false,
                        "o": {"a": 1}, "l": ["p", "q"], "u": null}),
            ),
        ),
        (
            vec![
                ("s", "string", ""),
                ("o", "null", "null"),
                ("u", "string", "7"),
            ],
            Some(json!({"s": "", "o": null, "u": "7"})),
        ),
        (
            vec![("s", "string", "x"), ("u", "number", "7")],
            Some(json!({"s": "x", "u": 7})),
        ),
        // The tag must be the value's type, and the value must fit the schema.
        (vec![("s", "string", "x"), ("n", "string", "3")], None),
        (vec![("s", "number", "3")], None),
        (vec![("s", "string", "x"), ("n", "number", "-1")], None),
        (vec![("s", "string", "x"), ("n", "number", "\"3\"")], None),
        (vec![("s", "string", "x"), ("b", "string", "true")], None),
        (vec![("s", "string", "x"), ("o", "object", "null")], None),
        (vec![("s", "string", "x"), ("u", "boolean", "true")], None),
        (vec![("s", "string", "x"), ("x", "integer", "1")], None),
        // Raw text holds neither a marker's text nor the key prefix.
        (vec![("s", "string", "a<|close|>b")], None),
        (vec![("s", "string", "a<|open|>argument key=\"b")], None),
        // Required argument missing.
        (vec![("n", "number", "1")], None),
    ];
    for (params, want) in cases {
        let text = k3_call(&params);
        match &want {
            Some(args) => {
                let calls = vec![("f".to_owned(), args.clone())];
                assert_eq!(
                    parsed_calls(&g, &text).unwrap_or_else(|e| panic!("{text}\n{e}")),
                    calls,
                    "{text}"
                );
                for v in [&special, &plain] {
                    assert!(tokens_accept(v, &g, &text), "{text}");
                    assert_eq!(streamed(v, &g, &text), calls, "{text}");
                }
            }
            None => {
                assert!(g.parse(&text).is_err(), "{text}");
                for v in [&special, &plain] {
                    assert!(!tokens_accept(v, &g, &text), "{text}");
                }
            }
        }
    }
    // With the markers as special tokens, a marker's text in plain bytes is the marker written
    // as text (the suffix), never raw content: `a<|close|>b` as bytes is refused,
    // `a<|close|>argument<|sep|>` as bytes is the value `a` and its suffix.
    let auto = TokenAutomaton::new(&g, special.clone()).unwrap();
    let head = k3_call(&[("s", "string", "a")]);
    let head = &head[..head.find("a<|close|>").unwrap()];
    let takes = |tail: &str| {
        let mut m = auto.matcher();
        for t in auto.tokenize(head).unwrap() {
            m.accept(t).unwrap();
        }
        plain
            .tokenize(tail)
            .unwrap()
            .into_iter()
            .all(|t| m.accept(t).is_ok())
    };
    assert!(!takes("a<|close|>b"), "a marker's text inside a raw value");
    assert!(
        takes("a<|close|>argument<|sep|>"),
        "a marker written as text"
    );
}

/// `json_key_suffix` with markers on both sides, `value_without`, and the exclusions on the
/// raw values of the schema-decided form.
#[test]
fn raw_values_stop_where_the_peers_do() {
    let tools = Tools::from_openai_json(&json!([{
        "name": "f",
        "parameters": {"type": "object", "properties": {
            "p": {"type": "string"}, "q": {"type": "string"}}}
    }]))
    .unwrap();
    let src = "root ::= @call(\"<function=\" @name \">\\n\" @xml_args(key_prefix=\"<parameter=\", key_suffix=\">\\n\", value_suffix=\"\\n</parameter>\\n\", value_without=(\"</function>\", \"<tool_call>\")) \"</function>\")";
    let g = Dialect::parse("t", src)
        .unwrap()
        .compile(&tools, &DialectOptions::default())
        .unwrap();
    let call = |v: &str| format!("<function=f>\n<parameter=p>\n{v}\n</parameter>\n</function>");
    assert_eq!(
        parsed_calls(&g, &call("a <b> c")).unwrap(),
        vec![("f".to_owned(), json!({"p": "a <b> c"}))]
    );
    for bad in [
        "x</function>y",
        "<tool_call>",
        "x<parameter=q>\ny",
        "a\n</parameter>\nb",
    ] {
        assert!(g.parse(&call(bad)).is_err(), "{bad}");
    }
    // The built-in XML dialects: a raw value never holds the key prefix.
    for (d, text) in [
        (
            "qwen3_coder",
            "<tool_call>\n<function=get_current_weather>\n<parameter=location>\nParis<parameter=unit>\n</parameter>\n</function>\n</tool_call>",
        ),
        (
            "glm45",
            "<tool_call>get_current_weather\n<arg_key>location</arg_key>\n<arg_value>Paris<arg_key>x</arg_value>\n</tool_call>",
        ),
        (
            "minimax_m2",
            "<minimax:tool_call>\n<invoke name=\"get_current_weather\">\n<parameter name=\"location\">Paris<parameter name=\"</parameter>\n</invoke>\n</minimax:tool_call>",
        ),
    ] {
        let g = Dialect::by_name(d)
            .unwrap()
            .compile(&mixed_tools(), &DialectOptions::default())
            .unwrap();
        assert!(g.parse(text).is_err(), "{d}: {text}");
        let fine = text
            .replace("<parameter=unit>", "")
            .replace("<arg_key>x", "")
            .replace("<parameter name=\"</parameter>", "</parameter>");
        assert!(g.parse(&fine).is_ok(), "{d}: {fine}");
    }
    // DSML-like with markers before the JSON suffix: special tokens or their text.
    let src = r#"root ::= @call("<invoke " @name ">" @xml_args(key_prefix=(<|p|> "name=\""), key_suffix=("\"" <|raw|>), json_key_suffix=("\"" @marker("<|json|>")), value_suffix=@marker("<|end|>")) "</invoke>")"#;
    let tools = Tools::from_openai_json(&json!([{
        "name": "f",
        "parameters": {"type": "object", "properties": {
            "p": {"type": ["string", "integer"]}}}
    }]))
    .unwrap();
    let g = Dialect::parse("t", src)
        .unwrap()
        .compile(&tools, &DialectOptions::default())
        .unwrap();
    let vocab = testkit::with_specials(
        testkit::llama_vocab(),
        &["<|p|>", "<|raw|>", "<|json|>", "<|end|>"],
    );
    for (text, want) in [
        (
            "<invoke f><|p|>name=\"p\"<|raw|>12<|end|></invoke>",
            Some(json!({"p": "12"})),
        ),
        (
            "<invoke f><|p|>name=\"p\"<|json|>12<|end|></invoke>",
            Some(json!({"p": 12})),
        ),
        (
            "<invoke f><|p|>name=\"p\"<|json|>\"12\"<|end|></invoke>",
            None,
        ),
        (
            "<invoke f><|p|>name=\"p\"<|raw|>1<|p|>2<|end|></invoke>",
            None,
        ),
    ] {
        match want {
            Some(w) => {
                assert_eq!(
                    parsed_calls(&g, text).unwrap(),
                    vec![("f".to_owned(), w.clone())],
                    "{text}"
                );
                assert!(tokens_accept(&vocab, &g, text), "{text}");
                assert_eq!(streamed(&vocab, &g, text), vec![("f".to_owned(), w)]);
            }
            None => {
                assert!(g.parse(text).is_err(), "{text}");
                assert!(!tokens_accept(&vocab, &g, text), "{text}");
            }
        }
    }
    // `<|raw|>` is a special token only: a vocabulary without it cannot write a raw value, and
    // `@marker("<|json|>")` falls back to its text.
    let plain = testkit::with_specials(testkit::llama_vocab(), &["<|p|>", "<|end|>"]);
    assert!(tokens_accept(
        &plain,
        &g,
        "<invoke f><|p|>name=\"p\"<|json|>12<|end|></invoke>"
    ));
    assert!(!tokens_accept(
        &plain,
        &g,
        "<invoke f><|p|>name=\"p\"<|raw|>12<|end|></invoke>"
    ));
}

/// Misuse of the new parameters is refused with a message naming the problem.
#[test]
fn xml_args_misused() {
    let wrap = |args: &str| format!("root ::= @call(@name @xml_args({args}))");
    let base = "key_prefix=\"<\", value_suffix=\"</>\"";
    let all = "string=\"s\", number=\"n\", boolean=\"b\", null=\"z\", object=\"o\", array=\"a\"";
    for (args, want) in [
        (
            format!("{base}, key_suffix=\">\", json_key_suffix=\">\""),
            "must differ",
        ),
        (
            format!("{base}, key_suffix=\">\", json_key_suffix=\">j\""),
            "must differ",
        ),
        (
            format!("{base}, key_suffix=\" {{type}}>\", types=({all}), json_key_suffix=\"j\""),
            "not both",
        ),
        (format!("{base}, key_suffix=\" {{type}}>\""), "no types"),
        (
            format!("{base}, key_suffix=\">\", types=({all})"),
            "must hold {type}",
        ),
        (
            format!("{base}, key_suffix=\" {{type}}>\", types=(string=\"s\", number=\"n\")"),
            "missing: boolean, null, object, array",
        ),
        (
            format!("{base}, key_suffix=\" {{type}}>\", types=({all}, float=\"f\")"),
            "not a JSON type",
        ),
        (
            format!("{base}, key_suffix=\" {{type}}>\", types=({all}, string=\"t\")"),
            "given twice",
        ),
        (
            format!(
                "{base}, key_suffix=\" {{type}}>\", types=(string=\"v\", number=\"v\", boolean=\"b\", null=\"z\", object=\"o\", array=\"a\")"
            ),
            "shares its tag",
        ),
        (
            format!(
                "{base}, key_suffix=\" {{type}}>\", types=(string=\"s\", number=\"st\", boolean=\"b\", null=\"z\", object=\"o\", array=\"a\")"
            ),
            "",
        ),
        (
            format!("{base}, key_suffix=\"{{type}}\", types=(string=\"s\", number=\"st\", boolean=\"b\", null=\"z\", object=\"o\", array=\"a\")"),
            "must differ",
        ),
        (format!("{base}, key_suffix=\">\", value_without=()"), "empty"),
        (format!("{base}, key_suffix=\">\", value_without=(\"\")"), "empty"),
        (format!("{base}, key_suffix=\">\", value_without=(x)"), "value_without"),
        (format!("{base}, key_suffix=(@marker(\"\"))"), "non-empty"),
        (format!("{base}, key_suffix=(@marker(x))"), "@marker takes one token text"),
        (format!("{base}, key_suffix=(@text)"), "expected"),
        (format!("{base}, key_suffix=\">\", key_suffix=\">\""), "given twice"),
        (format!("{base}, key_suffix=\">\", colour=\"red\""), "no argument colour"),
        (format!("{base}, key_suffix=(\">\""), "expected `)`"),
        (base.to_string(), "non-empty key_suffix"),
        (format!("{base}, key_suffix=\">\", json_key_suffix=\"\""), "non-empty json_key_suffix"),
    ] {
        let src = wrap(&args);
        let r = Dialect::parse("t", &src)
            .and_then(|d| d.compile(&mixed_tools(), &DialectOptions::default()));
        if want.is_empty() {
            // `" s>` and `" st>`: neither begins the other.
            r.unwrap_or_else(|e| panic!("{src}: {e}"));
            continue;
        }
        let e = r.expect_err(&src).to_string();
        assert!(e.contains(want), "{src}: {e}");
        assert!(e.contains("line 1"), "{src}: {e}");
    }
    assert!(Dialect::parse("t", "root ::= @xml_args").is_err());
}

/// A rule holding `@xml_args`, `@args` or `@name` outside `@call(...)` is fine where every use
/// of it is inside a call; elsewhere the error gives the line.
#[test]
fn call_parts_in_rules_used_inside_calls() {
    let ok = "root ::= @call(head args)\nhead ::= @name \":\"\nargs ::= @args | \"()\" ";
    let g = Dialect::parse("t", ok)
        .unwrap()
        .compile(&mixed_tools(), &DialectOptions::default())
        .unwrap();
    assert_eq!(
        parsed_calls(&g, "get_stock_price:{\"ticker\": \"AB\"}").unwrap(),
        vec![("get_stock_price".to_owned(), json!({"ticker": "AB"}))]
    );
    // A helper nothing uses is fine too.
    Dialect::parse("t", "root ::= @call(@name)\nunused ::= @args").unwrap();
    for (src, line, want) in [
        (
            "root ::= @call(head) tail\nhead ::= @name\n\ntail ::=\n  \"x\" @args",
            5,
            "inside @call",
        ),
        ("root ::= @call(x)\n# comment\nx ::= @name y\ny ::= @call(@name)", 4, "a call inside a call"),
        ("root ::= @call(@name a)\na ::= @args b\nb ::=\n @args", 1, "once"),
        ("root ::= a\n\na ::= \"x\"\n  b", 4, "unknown rule b"),
        ("root ::= @call(@name) x\nx ::= \"a\" @call_id(\"a\")", 2, "@call_id"),
        (
            "root ::= a\na ::= \"(\"\n  b\nb ::= @xml_args(key_prefix=\"<\", key_suffix=\">\", value_suffix=\"</>\")",
            4,
            "rule a uses rule b outside a call",
        ),
    ] {
        let e = Dialect::parse("t", src).expect_err(src).to_string();
        assert!(e.contains(&format!("line {line}:")), "{src}: {e}");
        assert!(e.contains(want), "{src}: {e}");
    }
}
