//! No key twice in one object, also where `additionalProperties` allows keys the schema does not
//! list: two spellings of one key (`"a/b"` and `"a\/b"`, `"\n"` and `"\u000a"`) count as the
//! same key, listed keys stay once each, nested objects have keys of their own, and a token
//! budget still always ends (the shortest way out of a key that would repeat one is longer).

use callmask_testkit as testkit;

use callmask::fuzz::{parse_strict, Checker, FuzzOptions, Fuzzer, Outcome};
use callmask::{
    CompileOptions, Dialect, DialectOptions, Grammar, TokenAutomaton, TokenMask, ToolChoice, Tools,
};
use serde_json::json;

fn schema_grammar(schema: &serde_json::Value) -> Grammar {
    Grammar::from_json_schema_str(&schema.to_string(), &CompileOptions::default()).unwrap()
}

fn open_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {"p": {"type": "integer"}},
        "additionalProperties": {"type": ["integer", "object"]}
    })
}

#[test]
fn an_extra_key_is_refused_the_second_time_in_any_spelling() {
    let g = schema_grammar(&open_schema());
    for ok in [
        r#"{"a": 1, "b": 2}"#,
        r#"{"p": 1, "a": 2, "aa": 3, "": 4}"#,
        r#"{"a": {"a": 1}, "b": {"a": 2, "b": 3}}"#,
        r#"{"a/b": 1, "a\\b": 2}"#,
    ] {
        g.check_bytes(ok.as_bytes())
            .unwrap_or_else(|e| panic!("{ok}: {e:?}"));
    }
    for (bad, offset) in [
        (r#"{"a": 1, "a": 2}"#, 11),
        (r#"{"x": 1, "y": 2, "x": 3}"#, 19),
        (r#"{"": 1, "": 2}"#, 9),
        (r#"{"a/b": 1, "a\/b": 2}"#, 16),
        (r#"{"\n": 1, "\u000a": 2}"#, 17),
        (r#"{"ñ": 1, "\u00f1": 2}"#, 17),
        (r#"{"😀": 1, "\ud83d\uDE00": 2}"#, 25),
        (r#"{"\uD83D\ude00": 1, "😀": 2}"#, 25),
        (r#"{"p": 1, "q": 2, "q": 3}"#, 19),
        (r#"{"p": 1, "p": 2}"#, 11),
        (r#"{"a": {"b": 1, "b": 2}}"#, 17),
    ] {
        let e = g
            .check_bytes(bad.as_bytes())
            .expect_err(&format!("{bad} was accepted"));
        assert_eq!(e.offset, offset, "{bad}: {e:?}");
        assert!(parse_strict(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_mask_never_offers_a_token_that_repeats_a_key() {
    let vocab = testkit::llama_vocab();
    let g = schema_grammar(&open_schema());
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let mut m = a.matcher();
    for t in a.tokenize(r#"{"alpha": 1, "al"#).unwrap() {
        m.accept(t).unwrap();
    }
    let mut mask = TokenMask::new(vocab.len());
    m.fill_mask(&mut mask);
    // Whatever the tokenization, `"alpha"` cannot be closed a second time...
    let rest = a.tokenize(r#"pha": 2}"#).unwrap();
    assert!(m.validate_tokens(&rest) < rest.len());
    // ...while a longer key that starts the same way can.
    let longer = a.tokenize(r#"phabet": 2}"#).unwrap();
    assert_eq!(m.validate_tokens(&longer), longer.len());
    // Every allowed token keeps the output one that parses without a repeated key.
    for t in mask.iter().filter(|&t| !vocab.is_special(t)) {
        let mut m2 = m.clone();
        m2.accept(t).unwrap();
        let text = String::from_utf8_lossy(&vocab.decode(m2.accepted_tokens())).into_owned();
        assert_eq!(text.matches(r#""alpha""#).count(), 1, "{text}");
    }
}

#[test]
fn masks_agree_with_accept_inside_extra_keys() {
    // Found by the token-mask consistency test: an extra key's closing token was in the mask
    // (walked as a plain string lexeme) though it repeated a key.
    let vocab = testkit::llama_vocab();
    let schema = json!({
        "type": "object",
        "properties": {"d": {"type": "integer"}, "e": {"type": "integer"}},
        "additionalProperties": {"type": "integer"}
    });
    let g = schema_grammar(&schema);
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let mut mask = TokenMask::new(vocab.len());
    for prefix in [r#"{", ":12, ""#, r#"{"ab": 1, "a"#, r#"{"x": 1, "y": 2, ""#] {
        let mut m = a.matcher();
        for t in a.tokenize(prefix).unwrap() {
            m.accept(t).unwrap();
        }
        m.fill_mask(&mut mask);
        for t in 0..vocab.len() as u32 {
            assert_eq!(
                mask.is_allowed(t),
                m.is_allowed(t),
                "{prefix} then token {t}"
            );
        }
    }
}

#[test]
fn python_keyword_arguments_are_not_repeated_either() {
    let tools = Tools::from_json_str(
        &json!([{"type": "function", "function": {
            "name": "f",
            "strict": false,
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}
        }}])
        .to_string(),
    )
    .unwrap();
    let g = Dialect::by_name("pythonic")
        .unwrap()
        .compile(&tools, &DialectOptions::default())
        .unwrap();
    g.check_bytes(b"[f(x=1, y=2, z=3)]").unwrap();
    assert!(g.check_bytes(b"[f(x=1, x=2)]").is_err());
    assert!(g.check_bytes(b"[f(y=1, z=2, y=3)]").is_err());
}

#[test]
fn budgets_still_end_when_the_shortest_key_is_taken() {
    let vocab = testkit::llama_vocab();
    let schema = open_schema();
    let g = schema_grammar(&schema);
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    // After `{"": 1, "`, closing the key at once would repeat `""`: the shortest way out is
    // longer, and a budget of exactly that must still end, whatever is chosen under it.
    for (prefix, pick_last) in [(r#"{"": 1, ""#, true), (r#"{"": 1, "a": 2, ""#, false)] {
        let mut m = a.matcher();
        for t in a.tokenize(prefix).unwrap() {
            m.accept(t).unwrap();
        }
        let need = m.min_tokens_to_end().unwrap();
        m.set_token_budget(Some(need)).unwrap();
        let mut mask = TokenMask::new(vocab.len());
        let start = m.accepted_tokens().len();
        loop {
            m.fill_mask(&mut mask);
            let t = if pick_last {
                mask.iter().last()
            } else {
                mask.iter().next()
            }
            .expect("a dead end under the budget");
            m.accept(t).unwrap();
            if vocab.is_eos(t) {
                break;
            }
        }
        assert!(m.accepted_tokens().len() - start <= need);
        let toks = m.accepted_tokens();
        let text = String::from_utf8(vocab.decode(&toks[..toks.len() - 1])).unwrap();
        g.check_bytes(text.as_bytes()).unwrap();
        parse_strict(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
    // Random walks under random budgets over objects with extra keys: all end within their
    // budget and parse without a repeated key (the checker refuses one).
    let checker = Checker::for_schema(&schema).unwrap();
    let mut o = FuzzOptions::default();
    o.budget_slack = Some((0, 40));
    let fuzzer = Fuzzer::new(&a, o).unwrap();
    let mut n = 0;
    fuzzer.run(
        &checker,
        300,
        |_| (),
        |s, ()| {
            assert!(
                matches!(s.outcome, Outcome::Valid),
                "{:?}: {:?}",
                s.outcome,
                String::from_utf8_lossy(&s.text)
            );
            n += 1;
            true
        },
    );
    assert_eq!(n, 300);
}

#[test]
fn strict_tool_arguments_stay_strict() {
    // The default for tools: no extra keys at all, so no repeats to track.
    let tools = Tools::from_json_str(
        &json!([{"type": "function", "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}
        }}])
        .to_string(),
    )
    .unwrap();
    let mut o = DialectOptions::default();
    o.tool_choice = ToolChoice::Required;
    let g = Dialect::by_name("pythonic")
        .unwrap()
        .compile(&tools, &o)
        .unwrap();
    assert!(g.check_bytes(b"[f(x=1, y=2)]").is_err());
}

/// Arguments embedded as a JSON string (empower): an extra key is the same key in every
/// spelling (escaped at the inner level, `\\u00f1`, or at the outer one, `\u00f1`), and its
/// kind (`patternProperties`) is read from its decoded name.
#[test]
fn keys_inside_a_json_string_decode_both_levels() {
    let tools = Tools::from_json_str(
        &json!([{"type": "function", "function": {
            "name": "f",
            "strict": false,
            "parameters": {
                "type": "object",
                "properties": {"año": {"type": "integer"}},
                "patternProperties": {"^ñ": {"type": "integer"}},
                "additionalProperties": {"type": "string"}
            }
        }}])
        .to_string(),
    )
    .unwrap();
    let g = Dialect::by_name("empower")
        .unwrap()
        .compile(&tools, &DialectOptions::default())
        .unwrap();
    let call = |args: &str| format!(r#"<f>[{{"name": "f", "arguments": "{args}"}}]"#);
    for ok in [
        r#"{\"año\": 1}"#,
        r#"{\"a\\u00f1o\": 1}"#,
        r#"{\"a\u00f1o\": 1}"#,
        r#"{\"ñx\": 1, \"x\": \"s\"}"#,
        r#"{\"\\u00f1x\": 1, \"\u00f1y\": 2, \"\\u00e9\": \"\u00e9\"}"#,
    ] {
        let text = call(ok);
        g.check_bytes(text.as_bytes())
            .unwrap_or_else(|e| panic!("{text}: {e:?}"));
    }
    for bad in [
        r#"{\"año\": \"s\"}"#,
        r#"{\"a\\u00f1o\": \"s\"}"#,
        r#"{\"ñx\": \"s\"}"#,
        r#"{\"\\u00f1x\": \"s\"}"#,
        r#"{\"\u00f1x\": \"s\"}"#,
        r#"{\"x\": 1}"#,
        r#"{\"ñx\": 1, \"\\u00f1x\": 2}"#,
        r#"{\"ñx\": 1, \"\u00f1x\": 2}"#,
        r#"{\"é\": \"s\", \"\\u00e9\": \"t\"}"#,
    ] {
        let text = call(bad);
        assert!(
            g.check_bytes(text.as_bytes()).is_err(),
            "{text} was accepted"
        );
    }
}

/// Where few names can be extra keys (`propertyNames` or `patternProperties` allow a finite
/// set), no key may begin that can only end as one already used, and no comma may come once
/// every name is used: the model would be stuck. Fuzzed walks (with and without a budget)
/// never meet a dead end.
#[test]
fn no_key_begins_that_can_only_repeat_one() {
    let vocab = testkit::llama_vocab();
    let cases = [
        (
            json!({"type": "object", "propertyNames": {"enum": ["a", "ab"]},
                "additionalProperties": {"type": "integer"}}),
            vec![
                r#"{"a": 1, "ab": 2}"#,
                r#"{"ab": 1, "a": 2}"#,
                r#"{"a": 1, "a"#,
            ],
            vec![
                r#"{"a": 1, "a""#,
                r#"{"a": 1, "ab": 2,"#,
                r#"{"ab": 1, "a": 2, "#,
            ],
        ),
        (
            json!({"type": "object", "propertyNames": {"pattern": "^[ñx]$"},
                "additionalProperties": {"type": "integer"}}),
            vec![r#"{"ñ": 1, "x": 2}"#, r#"{"\u00f1": 1, "x"#],
            vec![
                r#"{"ñ": 1, "\u00f1"#,
                r#"{"\u00F1": 1, "ñ"#,
                r#"{"ñ": 1, "\u00"#,
                r#"{"\u00F1": 1, "x": 2,"#,
            ],
        ),
        (
            json!({"type": "object", "patternProperties": {"^a$": {"type": "integer"},
                "^b$": {"type": "string"}}, "additionalProperties": false}),
            vec![r#"{"a": 1, "b": "x"}"#],
            vec![r#"{"a": 1, "a"#, r#"{"b": "", "a": 1,"#],
        ),
    ];
    for (schema, viable, dead) in cases {
        let g = schema_grammar(&schema);
        let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        let prefix_ok = |text: &str| {
            let mut m = a.matcher();
            a.tokenize(text)
                .unwrap()
                .iter()
                .all(|&t| m.accept(t).is_ok())
        };
        for p in viable {
            assert!(prefix_ok(p), "{schema}: {p} refused");
        }
        for p in dead {
            assert!(!prefix_ok(p), "{schema}: {p} allowed, yet it cannot end");
        }
        let checker = Checker::for_schema(&schema).unwrap();
        for budget in [None, Some((0, 12))] {
            let mut o = FuzzOptions::default().seed(5);
            o.budget_slack = budget;
            let fuzzer = Fuzzer::new(&a, o).unwrap();
            let mut n = 0;
            fuzzer.run(
                &checker,
                100,
                |_| (),
                |s, ()| {
                    assert!(
                        matches!(s.outcome, Outcome::Valid),
                        "{schema}: {:?}: {:?}",
                        s.outcome,
                        String::from_utf8_lossy(&s.text)
                    );
                    n += 1;
                    true
                },
            );
            assert_eq!(n, 100);
        }
    }
}
