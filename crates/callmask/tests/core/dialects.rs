//! The tool-call dialects end to end, on the Llama 3.1 and Gemma 3 vocabularies: round trips
//! (write a call set the way the dialect writes it, check it token by token, parse it back),
//! rejections, tool_choice / parallel_calls, markers split across tokens, reasoning, special
//! tokens, streaming events, and the seeds' own examples.

use callmask_testkit as testkit;

use std::sync::Arc;

use callmask::parse::{Event, StreamParser};
use callmask::python::{python_kwargs, python_repr};
use callmask::{
    Dialect, DialectOptions, Error, Grammar, Reasoning, TokenAutomaton, TokenId, ToolChoice, Tools,
    Vocab,
};
use serde_json::{json, Value};

use testkit::ORIGINAL_DIALECTS as DIALECTS;

use callmask_testkit::mixed_tools as tools;

fn compile(dialect: &str, opts: &DialectOptions) -> Grammar {
    Dialect::by_name(dialect)
        .unwrap()
        .compile(&tools(), opts)
        .unwrap_or_else(|e| panic!("{dialect}: {e}"))
}

fn vocabs() -> Vec<(&'static str, Arc<Vocab>)> {
    vec![
        ("llama3.1", testkit::llama_vocab()),
        ("gemma3", testkit::gemma_vocab()),
    ]
}

/// Tokenizes like the model: the grammar's special tokens (spelled in the text) become the
/// vocabulary's special tokens.
fn tokenize(vocab: &Arc<Vocab>, g: &Grammar, text: &str) -> Vec<TokenId> {
    TokenAutomaton::new(g, vocab.clone())
        .unwrap()
        .tokenize(text)
        .unwrap()
}

/// True when the token matcher accepts the whole text and may end after it.
fn tokens_accept(vocab: &Arc<Vocab>, g: &Grammar, text: &str) -> bool {
    let auto = TokenAutomaton::new(g, vocab.clone()).unwrap();
    let mut m = auto.matcher();
    for t in tokenize(vocab, g, text) {
        if m.accept(t).is_err() {
            return false;
        }
    }
    m.can_end()
}

use callmask_testkit::writer;
use writer::{write, Call};

fn call_sets() -> Vec<Vec<Call>> {
    vec![
        vec![(
            "get_current_weather",
            json!({"location": "San Francisco, CA", "unit": "celsius"}),
        )],
        vec![
            (
                "get_user_info",
                json!({"user_id": 7890, "special": "black"}),
            ),
            ("get_time_utc", json!({})),
        ],
        vec![(
            "book_flight",
            json!({"from": "SFO", "to": "JFK", "date": "2025-03-01", "cabin": "business",
                   "passengers": [{"name": "An \"A\" O'N", "age": 34, "vegetarian": true},
                                  {"name": "Bo\\b é ü"}],
                   "flexible": null, "max_price": 1234.5}),
        )],
        vec![
            ("get_stock_price", json!({"ticker": "NVDA"})),
            (
                "get_current_weather",
                json!({"location": "Zürich\nline2\ttab"}),
            ),
        ],
    ]
}

fn same_calls(dialect: &str, parsed: &callmask::parse::Parsed, calls: &[Call]) {
    assert_eq!(
        parsed.tool_calls.len(),
        calls.len(),
        "{dialect}: {parsed:?}"
    );
    for (i, (c, (n, a))) in parsed.tool_calls.iter().zip(calls).enumerate() {
        assert_eq!(c.id, format!("call_{i}"));
        assert_eq!(c.kind, "function");
        assert_eq!(c.function.name, *n, "{dialect}");
        assert_eq!(
            &c.arguments_json().unwrap(),
            a,
            "{dialect}: {}",
            c.function.arguments
        );
    }
}

#[test]
fn round_trips_on_llama_and_gemma() {
    let vocabs = vocabs();
    for d in DIALECTS {
        let g = compile(d, &DialectOptions::default());
        for calls in call_sets() {
            // Llama 3.1 JSON makes one call per turn.
            if d == "llama31_json" && calls.len() > 1 {
                continue;
            }
            let text = write(d, "Let me check.", &calls);
            let parsed = g
                .parse(&text)
                .unwrap_or_else(|e| panic!("{d}: {e}\n{text}"));
            same_calls(d, &parsed, &calls);
            if matches!(d, "functools" | "inline" | "hermes") {
                assert_eq!(parsed.text, "Let me check.", "{d}");
            }
            for (vn, v) in &vocabs {
                assert!(tokens_accept(v, &g, &text), "{d} on {vn} rejects:\n{text}");
            }
        }
    }
}

#[test]
fn plain_replies() {
    let v = testkit::llama_vocab();
    let replies = [
        (
            "empower",
            "<c>The weather in San Francisco is 70 degrees Fahrenheit.",
        ),
        ("functools", "The capital of Poland is Warsaw."),
        ("pythonic", "None of the functions can answer that."),
        ("inline", "The current stock price of Nvidia is $300.00."),
        ("hermes", "Hello! How can I help?"),
        ("llama31_json", "I cannot help with that."),
    ];
    for (d, text) in replies {
        let g = compile(d, &DialectOptions::default());
        let p = g.parse(text).unwrap_or_else(|e| panic!("{d}: {e}"));
        assert!(p.tool_calls.is_empty());
        assert_eq!(p.text, text.trim_start_matches("<c>"), "{d}");
        assert!(tokens_accept(&v, &g, text), "{d}");
    }
}

#[test]
fn seed_examples() {
    let v = testkit::llama_vocab();
    let gemma = testkit::gemma_vocab();
    // empower (its prompt document), arguments as a JSON string.
    let g = compile("empower", &DialectOptions::default());
    let text = "<f>[{\n  \"name\": \"get_current_weather\",\n  \"arguments\": \"{\\\"location\\\":\\\"San Francisco\\\"}\"\n}]";
    let p = g.parse(text).unwrap();
    same_calls(
        "empower",
        &p,
        &[("get_current_weather", json!({"location": "San Francisco"}))],
    );
    assert!(tokens_accept(&v, &g, text) && tokens_accept(&gemma, &g, text));
    // pythonic (Llama 3.2 document), with and without the python tag.
    let g = compile("pythonic", &DialectOptions::default());
    for text in [
        "[get_user_info(user_id=7890, special='black')]",
        "<|python_tag|>[get_user_info(user_id=7890, special=\"black\")]",
    ] {
        let p = g.parse(text).unwrap();
        same_calls(
            "pythonic",
            &p,
            &[(
                "get_user_info",
                json!({"user_id": 7890, "special": "black"}),
            )],
        );
        assert!(tokens_accept(&v, &g, text), "{text}");
    }
    assert!(tokens_accept(
        &gemma,
        &g,
        "[get_user_info(user_id=7890, special='black')]"
    ));
    // inline (langxlang document): the NVDA example.
    let g = compile("inline", &DialectOptions::default());
    let text = "Sure, let me check that for you.\n<FUNCTION_CALL>get_stock_price({\"ticker\": \"NVDA\"})</FUNCTION_CALL>";
    let p = g.parse(text).unwrap();
    assert_eq!(p.text, "Sure, let me check that for you.");
    same_calls(
        "inline",
        &p,
        &[("get_stock_price", json!({"ticker": "NVDA"}))],
    );
    assert!(tokens_accept(&v, &g, text) && tokens_accept(&gemma, &g, text));
    // functools (Firefunction v2 template): ` functools[` after the text.
    let g = compile("functools", &DialectOptions::default());
    let text = " functools[{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"San Francisco, CA\"}}]";
    let p = g.parse(text).unwrap();
    same_calls(
        "functools",
        &p,
        &[(
            "get_current_weather",
            json!({"location": "San Francisco, CA"}),
        )],
    );
    assert!(tokens_accept(&v, &g, text));
}

#[test]
fn rejections() {
    let v = testkit::llama_vocab();
    let bad: &[(&str, &str, &str)] = &[
        ("empower", "<f>[{\"name\": \"get_weather\", \"arguments\": \"{}\"}]", "wrong name"),
        ("empower", "<f>[{\"name\": \"get_current_weather\", \"arguments\": \"{}\"}]", "missing required"),
        ("empower", "<f>[{\"name\": \"get_current_weather\", \"arguments\": \"{\\\"location\\\": 5}\"}]", "wrong type"),
        ("empower", "<f>[{\"name\": \"get_current_weather\", \"arguments\": \"{\"location\": \"x\"}\"}]", "unescaped inner JSON"),
        ("empower", "<f>[{\"name\": \"get_current_weather\", \"arguments\": \"{\\\"location\\\": \\\"a\\q\\\"}\"}]", "bad escape"),
        ("empower", "<f>[{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"x\"}}]", "object, not string"),
        ("empower", "<f>[{\"name\": \"get_time_utc\", \"arguments\": \"{}\"}] ok", "text after the list"),
        ("functools", "functools[{\"name\": \"get_stock_price\", \"arguments\": {\"ticker\": \"nvda\"}}]", "pattern"),
        ("functools", "functools[{\"name\": \"get_stock_price\", \"arguments\": {\"ticker\": \"NVDA\", \"x\": 1}}]", "extra key"),
        ("functools", "functools[{\"name\": \"get_time_utc\", \"arguments\": {}}] thanks", "text after the list"),
        ("functools", "functools[{\"name\": \"get_time_utc\"}]", "no arguments key"),
        ("pythonic", "[get_user_info(user_id='7890')]", "wrong type"),
        ("pythonic", "[get_user_info(special='x')]", "missing required"),
        ("pythonic", "[get_user_info(user_id=1, user_id=2)]", "duplicate keyword"),
        ("pythonic", "[get_user_info(user_id=1, extra=2)]", "extra keyword"),
        ("pythonic", "[get_current_weather(location='a\\qb')]", "bad escape"),
        ("pythonic", "[get_current_weather(location='x', unit='kelvin')]", "enum"),
        ("pythonic", "[get_time_utc()] more", "text after the list"),
        ("pythonic", "[get_time(x=1)]", "wrong name"),
        ("pythonic", "[get_current_weather(location=true)]", "JSON literal in Python"),
        ("inline", "<FUNCTION_CALL>get_stock_price({\"ticker\": 5})</FUNCTION_CALL>", "wrong type"),
        ("inline", "ok <FUNCTION_CALL>get_user_info()</FUNCTION_CALL>", "missing required"),
        ("inline", "ok <FUNCTION_CALL>nope()</FUNCTION_CALL>", "wrong name"),
        ("inline", "ok <FUNCTION_CALL>get_time_utc()", "unclosed call"),
        ("hermes", "<tool_call>\n{\"name\": \"book_flight\", \"arguments\": {\"from\": \"SF\", \"to\": \"JFK\", \"passengers\": [{\"name\": \"A\"}]}}\n</tool_call>", "pattern"),
        ("hermes", "<tool_call>\n{\"name\": \"book_flight\", \"arguments\": {\"from\": \"SFO\", \"to\": \"JFK\", \"passengers\": []}}\n</tool_call>", "minItems"),
        ("hermes", "<tool_call>\n{\"name\": \"get_time_utc\", \"arguments\": {}}\n</tool_call> bye", "text after the call"),
        ("llama31_json", "{\"name\": \"get_time_utc\", \"arguments\": {}}", "wrong arguments key"),
        ("llama31_json", "{\"name\": \"get_user_info\", \"parameters\": {\"user_id\": 0}}", "minimum"),
    ];
    for (d, text, why) in bad {
        let g = compile(d, &DialectOptions::default());
        assert!(
            matches!(g.parse(text), Err(Error::Parse(_))),
            "{d} accepts ({why}): {text}"
        );
        assert!(
            !tokens_accept(&v, &g, text),
            "{d} tokens accept ({why}): {text}"
        );
    }
}

#[test]
fn tool_choice_and_parallel_calls() {
    let opts = |tool_choice: ToolChoice, parallel_calls: bool| {
        DialectOptions::default()
            .tool_choice(tool_choice)
            .parallel_calls(parallel_calls)
    };
    let one = [("get_time_utc", json!({}))];
    let two = [
        ("get_time_utc", json!({})),
        ("get_stock_price", json!({"ticker": "A"})),
    ];
    for d in ["empower", "functools", "pythonic", "inline", "hermes"] {
        let text_only = match d {
            "empower" => "<c>hello".to_owned(),
            _ => "hello".to_owned(),
        };
        let w1 = write(d, "", &one);
        let w2 = write(d, "", &two);
        // Token level: what the model can write (a special token's spelling in plain text is
        // text, so the byte-level parser may read `<|python_tag|>[...]` as a reply).
        let v = testkit::llama_vocab();
        let ok = |g: &Grammar, t: &str| tokens_accept(&v, g, t);
        let g = compile(d, &opts(ToolChoice::Auto, true));
        assert!(ok(&g, &text_only) && ok(&g, &w1) && ok(&g, &w2), "{d} auto");
        let g = compile(d, &opts(ToolChoice::Auto, false));
        assert!(
            ok(&g, &text_only) && ok(&g, &w1) && !ok(&g, &w2),
            "{d} auto, single"
        );
        let g = compile(d, &opts(ToolChoice::None, true));
        assert!(
            ok(&g, &text_only) && !ok(&g, &w1) && !ok(&g, &w2),
            "{d} none"
        );
        let g = compile(d, &opts(ToolChoice::Required, true));
        assert!(
            !ok(&g, &text_only) && ok(&g, &w1) && ok(&g, &w2),
            "{d} required"
        );
        let g = compile(d, &opts(ToolChoice::Required, false));
        assert!(
            !ok(&g, &text_only) && ok(&g, &w1) && !ok(&g, &w2),
            "{d} required, single"
        );
        let g = compile(
            d,
            &opts(ToolChoice::Function("get_stock_price".into()), true),
        );
        let only_stock = write(d, "", &[("get_stock_price", json!({"ticker": "B"}))]);
        assert!(
            !ok(&g, &text_only) && !ok(&g, &w1) && ok(&g, &only_stock),
            "{d} named"
        );
    }
    let e = Dialect::by_name("pythonic")
        .unwrap()
        .compile(&tools(), &opts(ToolChoice::Function("nope".into()), true))
        .unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
    // No tools and a call required: nothing can be written.
    let e = Dialect::by_name("pythonic")
        .unwrap()
        .compile(&Tools::default(), &opts(ToolChoice::Required, true))
        .unwrap_err();
    assert!(matches!(e, Error::Dialect { .. }), "{e}");
}

#[test]
fn markers_split_across_tokens_and_shared_with_text() {
    let v = testkit::llama_vocab();
    let g = compile("inline", &DialectOptions::default());
    let auto = TokenAutomaton::new(&g, v.clone()).unwrap();
    // The marker written in pieces, the first sharing a token with the text before it.
    let pieces = [
        "Hello<",
        "FUNC",
        "TION_",
        "CALL",
        ">get_time_utc",
        "()</",
        "FUNCTION_CALL>",
    ];
    let mut m = auto.matcher();
    let mut mask = callmask::TokenMask::new(v.len());
    for (i, p) in pieces.iter().enumerate() {
        let ids = v.tokenize(p).unwrap();
        for t in ids {
            m.fill_mask(&mut mask);
            assert!(
                mask.is_allowed(t),
                "piece {i} {p:?} token {t} not in the mask"
            );
            m.accept(t).unwrap();
        }
        if *p == "CALL" {
            // Inside the marker, plain text may not go on: "Hello<FUNCTION_CALLx" is text, but
            // once `>` completes it, only a function name follows.
            m.fill_mask(&mut mask);
            assert!(mask.is_allowed(v.tokenize(">").unwrap()[0]));
        }
    }
    assert!(m.can_end());
    // Right after the complete marker, free text is no longer allowed.
    let mut m = auto.matcher();
    for t in v.tokenize("Hi <FUNCTION_CALL>").unwrap() {
        m.accept(t).unwrap();
    }
    m.fill_mask(&mut mask);
    for word in [" world", "hello", " get", "x"] {
        let t = v.tokenize(word).unwrap()[0];
        assert!(!mask.is_allowed(t), "{word:?} allowed after the marker");
    }
    assert!(mask.is_allowed(v.tokenize("get").unwrap()[0]));
    assert!(!m.can_end());
    // functools: the marker split, with text glued to it.
    let g = compile("functools", &DialectOptions::default());
    let text = "Checking:functools[{\"name\": \"get_time_utc\", \"arguments\": {}}]";
    assert!(tokens_accept(&v, &g, text));
    assert!(!tokens_accept(&v, &g, "Checking:functools[oops"));
}

#[test]
fn reasoning_prefix() {
    let v = testkit::llama_vocab();
    let opts = DialectOptions::default().reasoning(Some(Reasoning::default()));
    let g = compile("pythonic", &opts);
    let text = "<think>The user wants the time.\nCall get_time_utc.</think>\n[get_time_utc()]";
    let p = g.parse(text).unwrap();
    assert_eq!(
        p.reasoning.as_deref(),
        Some("The user wants the time.\nCall get_time_utc.")
    );
    same_calls("pythonic", &p, &[("get_time_utc", json!({}))]);
    assert!(tokens_accept(&v, &g, text));
    // The constraint applies right after the end marker.
    assert!(g.parse("<think>x</think>[get_time_utc(x=1)]").is_err());
    // Custom markers, and no reasoning at all is fine too.
    let opts = DialectOptions::default().reasoning(Some(Reasoning {
        start: "[[plan]]".into(),
        end: "[[/plan]]".into(),
    }));
    let g = compile("empower", &opts);
    let p = g
        .parse("[[plan]]weather[[/plan]]<f>[{\"name\": \"get_time_utc\", \"arguments\": \"{}\"}]")
        .unwrap();
    assert_eq!(p.reasoning.as_deref(), Some("weather"));
    assert_eq!(p.tool_calls.len(), 1);
    assert!(g.parse("<c>hi").unwrap().reasoning.is_none());
    // Qwen3 has <think> as a token of its own.
    let qwen = Arc::new(
        Vocab::from_tokenizer_json(
            testkit::cache_dir().join("tokenizers/qwen3-3.7.2/tokenizer.json"),
        )
        .unwrap(),
    );
    let g = compile(
        "hermes",
        &DialectOptions::default().reasoning(Some(Reasoning::default())),
    );
    let text = "<think>need weather</think>\n<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Oslo\"}}\n</tool_call>";
    assert!(tokens_accept(&qwen, &g, text));
    assert_eq!(
        g.parse(text).unwrap().reasoning.as_deref(),
        Some("need weather")
    );
}

#[test]
fn special_tokens() {
    let llama = testkit::llama_vocab();
    let gemma = testkit::gemma_vocab();
    let g = compile("pythonic", &DialectOptions::default());
    let auto = TokenAutomaton::new(&g, llama.clone()).unwrap();
    let mut mask = callmask::TokenMask::new(llama.len());
    auto.matcher().fill_mask(&mut mask);
    assert!(
        mask.is_allowed(128010),
        "<|python_tag|> allowed at the start"
    );
    // The spelling of the tag in plain tokens is text, not the tag: text cannot then be a call.
    let mut m = auto.matcher();
    m.accept(128010).unwrap();
    m.fill_mask(&mut mask);
    assert!(mask.is_allowed(llama.tokenize("[").unwrap()[0]));
    assert!(!mask.is_allowed(128010) && !mask.is_allowed(llama.tokenize("Hello").unwrap()[0]));
    // Gemma has no <|python_tag|>: the dialect works without it (the tag is optional)...
    assert!(TokenAutomaton::new(&g, gemma.clone()).is_ok());
    // ...but a dialect that needs it is refused with the token's name.
    let needs = Dialect::parse(
        "needs-tag",
        "root ::= <|python_tag|> \"[\" @python_call \"]\" | \"ok\"",
    )
    .unwrap();
    let g = needs.compile(&tools(), &DialectOptions::default()).unwrap();
    assert!(TokenAutomaton::new(&g, llama.clone()).is_ok());
    match TokenAutomaton::new(&g, gemma) {
        Err(Error::MissingSpecialToken(name)) => assert!(name.contains("python_tag")),
        other => panic!("expected MissingSpecialToken, got {other:?}"),
    }
}

#[test]
fn streaming_events() {
    let v = testkit::llama_vocab();
    for d in DIALECTS {
        let g = compile(d, &DialectOptions::default());
        for calls in call_sets() {
            if d == "llama31_json" && calls.len() > 1 {
                continue;
            }
            let text = write(d, "Let me check.", &calls);
            let whole = g.parse(&text).unwrap();
            let mut p = StreamParser::new(&g);
            let mut events = Vec::new();
            for t in tokenize(&v, &g, &text) {
                events.extend(p.push_token(&v, t).unwrap());
            }
            events.extend(p.finish().unwrap());
            // Starts before arguments, arguments before the end, in order.
            let mut open: Option<usize> = None;
            let mut args = vec![String::new(); calls.len()];
            let mut text_seen = String::new();
            for e in &events {
                match e {
                    Event::CallStart { index, name, .. } => {
                        assert!(open.is_none());
                        assert_eq!(name, calls[*index].0);
                        open = Some(*index);
                    }
                    Event::Arguments { index, delta } => {
                        assert_eq!(open, Some(*index), "{d}: arguments outside their call");
                        args[*index] += delta;
                    }
                    Event::CallEnd { index } => {
                        assert_eq!(open.take(), Some(*index));
                    }
                    Event::Text(t) => text_seen += t,
                    Event::Reasoning(_) => panic!("no reasoning here"),
                    Event::CallId { .. } => panic!("{d}: these dialects write no call ids"),
                }
            }
            assert!(open.is_none());
            assert_eq!(text_seen.trim(), whole.text, "{d}");
            for (a, c) in args.iter().zip(&whole.tool_calls) {
                let streamed: Value = serde_json::from_str(a).unwrap();
                assert_eq!(streamed, c.arguments_json().unwrap(), "{d}");
            }
        }
    }
    // Text is held back while it may still be the start of a marker.
    let g = compile("inline", &DialectOptions::default());
    let mut p = StreamParser::new(&g);
    let mut got = String::new();
    for chunk in ["Hello <FUNC", "TION_CALL>get_time_utc()</FUNCTION_CALL>"] {
        for e in p.push(chunk).unwrap() {
            match e {
                Event::Text(t) => got += &t,
                Event::CallStart { name, .. } => {
                    assert_eq!(got, "Hello ", "text emitted before the call");
                    assert_eq!(name, "get_time_utc");
                }
                _ => {}
            }
        }
        if chunk == "Hello <FUNC" {
            assert_eq!(got, "Hello ", "`<FUNC` must not be emitted as text yet");
        }
    }
    // A call's start is reported once the name is certain.
    let g = compile("pythonic", &DialectOptions::default());
    let mut p = StreamParser::new(&g);
    assert!(p.push("[get_").unwrap().is_empty());
    let ev = p.push("stock_price(").unwrap();
    assert!(
        matches!(&ev[..], [Event::CallStart { name, .. }, ..] if name == "get_stock_price"),
        "{ev:?}"
    );
    let ev = p.push("ticker='NV").unwrap();
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::Arguments { delta, .. } if delta.contains("\"N"))),
        "{ev:?}"
    );
}

#[test]
fn parse_errors_are_typed_with_offsets() {
    let g = compile("pythonic", &DialectOptions::default());
    match g.parse("[get_user_info(user_id=x)]") {
        Err(Error::Parse(r)) => assert_eq!(r.offset, 23),
        other => panic!("{other:?}"),
    }
    match g.parse("[get_user_info(user_id=1)") {
        Err(Error::Parse(r)) => assert_eq!(r.offset, 25),
        other => panic!("{other:?}"),
    }
}

#[test]
fn python_values_round_trip_through_the_grammar() {
    // Python literals for every JSON type, including tuples the model may write for arrays.
    let g = compile("pythonic", &DialectOptions::default());
    let args = json!({"from": "SFO", "to": "LAX", "passengers": [{"name": "it's", "vegetarian": false}], "flexible": null});
    let text = format!(
        "[book_flight({})]",
        python_kwargs(args.as_object().unwrap())
    );
    assert!(text.contains("False") && text.contains("None"), "{text}");
    let p = g.parse(&text).unwrap();
    assert_eq!(p.tool_calls[0].arguments_json().unwrap(), args);
    assert_eq!(python_repr(&json!("it's")), "\"it's\"");
    // What the writer escapes is what the grammar reads back, unusual characters included.
    let args = json!({"location": "a\u{1}\u{7f}\u{a0}\u{2028}é\t'\"\\"});
    let text = format!(
        "[get_current_weather({})]",
        python_kwargs(args.as_object().unwrap())
    );
    assert_eq!(
        g.parse(&text).unwrap().tool_calls[0]
            .arguments_json()
            .unwrap(),
        args,
        "{text}"
    );
    // Dict keys in either quote.
    let p = g
        .parse("[book_flight(from='SFO', to='LAX', passengers=[{\"name\": 'x', 'age': 3}])]")
        .unwrap();
    assert_eq!(
        p.tool_calls[0].arguments_json().unwrap(),
        json!({"from": "SFO", "to": "LAX", "passengers": [{"name": "x", "age": 3}]})
    );
}

#[test]
fn dialect_files_and_errors() {
    // A user's own dialect file, loaded by path.
    let dir = std::env::temp_dir().join(format!("callmask-dialect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mistral.gbnf");
    std::fs::write(&path, "# Mistral-like\nroot ::= \"[TOOL_CALLS]\" \"[\" call (\", \" call)* \"]\" | @text_without(\"[TOOL_CALLS]\")\ncall ::= @json_call(name_key=\"name\", args_key=\"arguments\")\n").unwrap();
    let d = Dialect::load(path.to_str().unwrap()).unwrap();
    let g = d.compile(&tools(), &DialectOptions::default()).unwrap();
    let p = g
        .parse("[TOOL_CALLS][{\"name\": \"get_time_utc\", \"arguments\": {}}]")
        .unwrap();
    assert_eq!(p.tool_calls[0].function.name, "get_time_utc");
    std::fs::remove_dir_all(&dir).ok();
    for (src, want) in [
        ("root ::= \"a\" missing", "unknown rule missing"),
        ("rot ::= \"a\"", "no `root` rule"),
        ("root ::= \"a\"\nroot ::= \"b\"", "defined twice"),
        ("root ::= @nope", "unknown builtin"),
        ("root ::= \"unterminated", "unterminated"),
        ("root ::= (\"a\"", "expected `)`"),
        (
            "root ::= @json_call(args=\"yaml\")",
            "expected object, string or either",
        ),
        ("root ::= @json_call(lines=\"two\")", "expected any or one"),
        ("root ::= @call{3,1}", "bad repetition"),
        ("root ::= /[/", "regex"),
    ] {
        let r =
            Dialect::parse("t", src).and_then(|d| d.compile(&tools(), &DialectOptions::default()));
        let e = r.expect_err(src).to_string();
        assert!(e.contains(want), "{src}: {e}");
    }
    assert!(matches!(
        Dialect::by_name("nope"),
        Err(Error::Dialect { .. })
    ));
    // Names a dialect cannot write are refused by name.
    let odd = Tools::from_openai_json(
        &json!([{"name": "get weather", "parameters": {"type": "object"}}]),
    )
    .unwrap();
    let e = Dialect::by_name("pythonic")
        .unwrap()
        .compile(&odd, &DialectOptions::default())
        .unwrap_err();
    assert!(e.to_string().contains("get weather"), "{e}");
    let odd = Tools::from_openai_json(
        &json!([{"name": "f", "parameters": {"type": "object", "properties": {"a-b": {}}}}]),
    )
    .unwrap();
    let e = Dialect::by_name("pythonic")
        .unwrap()
        .compile(&odd, &DialectOptions::default())
        .unwrap_err();
    assert!(e.to_string().contains("a-b"), "{e}");
    // ...while JSON dialects take any name, quotes and unicode included.
    let odd = Tools::from_openai_json(&json!([{"name": "wé\"ird", "parameters": {"type": "object", "properties": {"k\"ey": {"type": "integer"}}}}])).unwrap();
    let g = Dialect::by_name("empower")
        .unwrap()
        .compile(&odd, &DialectOptions::default())
        .unwrap();
    let p = g
        .parse(r#"<f>[{"name": "wé\"ird", "arguments": "{\"k\\\"ey\": 3}"}]"#)
        .unwrap();
    assert_eq!(p.tool_calls[0].function.name, "wé\"ird");
    assert_eq!(
        p.tool_calls[0].arguments_json().unwrap(),
        json!({"k\"ey": 3})
    );
}

/// The examples of docs/dialects.md (`examples/outputs/D.txt`) parse as the page says.
#[test]
fn docs_examples_parse() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let tools = Tools::from_json_str(
        &std::fs::read_to_string(format!("{dir}/tools/weather.json")).unwrap(),
    )
    .unwrap();
    let expect: [(&str, &[&str]); 6] = [
        ("empower", &["get_current_weather"]),
        ("functools", &["get_current_weather", "get_stock_price"]),
        ("pythonic", &["get_user_info", "get_time_utc"]),
        ("inline", &["get_stock_price"]),
        ("hermes", &["get_current_weather"]),
        ("llama31_json", &["get_user_info"]),
    ];
    let v = testkit::llama_vocab();
    for (d, names) in expect {
        let text = std::fs::read_to_string(format!("{dir}/outputs/{d}.txt")).unwrap();
        let g = Dialect::by_name(d)
            .unwrap()
            .compile(&tools, &DialectOptions::default())
            .unwrap();
        let p = g.parse(&text).unwrap();
        let got: Vec<&str> = p
            .tool_calls
            .iter()
            .map(|c| c.function.name.as_str())
            .collect();
        assert_eq!(got, names, "{d}");
        assert!(tokens_accept(&v, &g, &text), "{d}");
    }
}

#[test]
fn free_text_can_be_bounded() {
    let opts = DialectOptions::default().max_text_chars(Some(10));
    for d in ["functools", "inline", "pythonic", "empower"] {
        let g = compile(d, &opts);
        let (short, long) = match d {
            "empower" => ("<c>0123456789", "<c>0123456789x"),
            _ => ("0123456789", "0123456789x"),
        };
        assert!(g.parse(short).is_ok(), "{d}");
        assert!(g.parse(long).is_err(), "{d}");
    }
    let g = compile("functools", &opts);
    assert!(g
        .parse("0123456789functools[{\"name\": \"get_time_utc\", \"arguments\": {}}]")
        .is_ok());
}

#[test]
fn json_calls_open_with_their_name() {
    // By default (`name_first`) a JSON call's name key comes first: after `{"` the mask takes
    // the name key's next byte only, and an output that names its function last is refused;
    // with `name_first` off (or a dialect file's `keys="any"`) the keys go in any order.
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(b"</s>".to_vec());
    let mut special = vec![false; 256];
    special.push(true);
    let vocab = Arc::new(Vocab::from_parts(tokens, special, vec![256]).unwrap());
    let last = "<tool_call>\n{\"arguments\": {}, \"name\": \"get_time_utc\"}\n</tool_call>";
    let first = "<tool_call>\n{\"name\": \"get_time_utc\", \"arguments\": {}}\n</tool_call>";
    let any = DialectOptions::default().name_first(false);
    let budget_fits = |g: &Grammar, budget: usize| {
        // Under a token budget, every masked walk from `{"` still ends within it.
        let auto = TokenAutomaton::new(g, vocab.clone()).unwrap();
        let mut m = auto.matcher();
        m.set_token_budget(Some(budget)).unwrap();
        let mut mask = callmask::TokenMask::new(vocab.len());
        for b in "<tool_call>\n{\"".bytes() {
            m.accept(TokenId::from(b)).unwrap();
        }
        m.fill_mask(&mut mask);
        let next: Vec<u8> = mask.iter().filter(|&t| t < 256).map(|t| t as u8).collect();
        // The longest allowed byte each step: the walk is steered to the end by the mask alone.
        let mut n = 0;
        while !m.is_finished() {
            m.fill_mask(&mut mask);
            let t = mask.iter().filter(|&t| t < 256).max().unwrap_or(256);
            m.accept(t).unwrap();
            n += 1;
            assert!(n <= budget, "past the budget");
            if t == 256 {
                break;
            }
        }
        next
    };
    let g = compile("hermes", &DialectOptions::default());
    assert!(g.parse(first).is_ok());
    assert!(g.parse(last).is_err(), "the name last, refused by default");
    assert_eq!(budget_fits(&g, 60), b"n", "only the name key after {{\"");
    let g = compile("hermes", &any);
    assert_eq!(
        g.parse(last).unwrap().tool_calls[0].function.name,
        "get_time_utc"
    );
    assert_eq!(budget_fits(&g, 60), b"an", "any key after {{\"");
    // A dialect file: `keys="any"`, and an unknown value refused by name.
    let file = |keys: &str| {
        format!("root ::= \"<tool_call>\\n\" @json_call(name_key=\"name\", args_key=\"arguments\"{keys}) \"\\n</tool_call>\"")
    };
    let d = Dialect::parse("mine", &file(", keys=\"any\"")).unwrap();
    let g = d.compile(&tools(), &DialectOptions::default()).unwrap();
    assert!(g.parse(last).is_ok() && g.parse(first).is_ok());
    let d = Dialect::parse("mine", &file("")).unwrap();
    let g = d.compile(&tools(), &DialectOptions::default()).unwrap();
    assert!(g.parse(last).is_err() && g.parse(first).is_ok());
    let e = Dialect::parse("mine", &file(", keys=\"sorted\""))
        .and_then(|d| d.compile(&tools(), &DialectOptions::default()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected name_first or any"), "{e}");
    // The option from JSON, as every binding reads it.
    let o = DialectOptions::from_json(&json!({"name_first": false})).unwrap();
    assert!(!o.name_first);
}
