//! The model-family dialects (issue 15): Qwen3, Llama 3.1 extended, Llama 4, Mistral,
//! Qwen3-Coder, DeepSeek R1 / V3.1, Kimi K2, GLM 4.5, MiniMax M2, gpt-oss, Command R7B,
//! Functionary v3.2 and Granite. Each is checked on the real vocabulary of its family where npm
//! has one (Qwen3, DeepSeek V3, gpt-oss, Llama 3.1), with its markers as the vocabulary's tokens,
//! and otherwise on Llama 3.1 with the family's special tokens added: round trips (calls written
//! the way the family writes them, checked token by token, parsed back to the same calls, also
//! streaming), outputs in the formats' documented shapes, rejections, and tool_choice.

use callmask_testkit as testkit;

use std::sync::Arc;

use callmask::parse::{Event, StreamParser};
use callmask::{Dialect, DialectOptions, Error, Grammar, TokenAutomaton, ToolChoice, Tools, Vocab};
use serde_json::{json, Value};

use callmask_testkit::writer;
use writer::{write, Call};

/// The dialects of this file.
const DIALECTS: [&str; 15] = [
    "qwen3",
    "qwen35",
    "llama31",
    "llama4",
    "mistral",
    "qwen3_coder",
    "deepseek_r1",
    "deepseek_v31",
    "kimi_k2",
    "glm45",
    "minimax_m2",
    "gpt_oss",
    "command_r7b",
    "functionary_v32",
    "granite",
];

/// The vocabularies each dialect is checked on: its family's where npm has it; otherwise Llama
/// 3.1 (markers as text) and Llama 3.1 with the family's special tokens added.
use callmask_testkit::checks::tokens_accept;

fn vocabs(d: &str) -> Vec<(String, Arc<Vocab>)> {
    let llama = || ("llama3.1".to_string(), testkit::llama_vocab());
    let plus = |extra: &[&str]| {
        (
            format!("llama3.1+{extra:?}"),
            testkit::with_specials(testkit::llama_vocab(), extra),
        )
    };
    match d {
        "qwen3" | "qwen3_coder" | "qwen35" => {
            vec![("qwen3".into(), testkit::npm_vocab("qwen3")), llama()]
        }
        "glm45" | "minimax_m2" => vec![("qwen3".into(), testkit::npm_vocab("qwen3")), llama()],
        "deepseek_r1" | "deepseek_v31" => {
            vec![("deepseek_v3".into(), testkit::npm_vocab("deepseek_v3"))]
        }
        "gpt_oss" => vec![("gptoss".into(), testkit::npm_vocab("gptoss"))],
        // Hermes 2 Pro / 3 are Llama 3 fine-tunes (only in this file's variant cases).
        "llama31" | "functionary_v32" | "hermes" => vec![llama()],
        // Without these tokens, their spelling is text, a plain reply: only Llama 4's tokens.
        "llama4" => vec![plus(&["<|python_start|>", "<|python_end|>"])],
        "mistral" => vec![llama(), plus(&["[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"])],
        "kimi_k2" => vec![
            llama(),
            plus(&[
                "<|tool_calls_section_begin|>",
                "<|tool_calls_section_end|>",
                "<|tool_call_begin|>",
                "<|tool_call_argument_begin|>",
                "<|tool_call_end|>",
            ]),
        ],
        "command_r7b" => vec![
            llama(),
            plus(&[
                "<|START_THINKING|>",
                "<|END_THINKING|>",
                "<|START_ACTION|>",
                "<|END_ACTION|>",
                "<|START_RESPONSE|>",
                "<|END_RESPONSE|>",
            ]),
        ],
        "granite" => vec![llama(), plus(&["<|tool_call|>"])],
        _ => panic!("no vocabularies for {d}"),
    }
}

use callmask_testkit::mixed_tools as tools;

fn compile_with(dialect: &str, tools: &Tools, opts: &DialectOptions) -> Grammar {
    Dialect::by_name(dialect)
        .unwrap()
        .compile(tools, opts)
        .unwrap_or_else(|e| panic!("{dialect}: {e}"))
}

fn compile(dialect: &str) -> Grammar {
    compile_with(dialect, &tools(), &DialectOptions::default())
}

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
                json!({"location": "Zürich\nline2\ttab <b>"}),
            ),
        ],
    ]
}

/// Dialects whose model makes one call per turn.
fn single_call(d: &str) -> bool {
    d == "gpt_oss"
}

/// Dialects whose text stands beside the calls (and is returned as the reply's text).
fn text_beside_calls(d: &str) -> bool {
    !matches!(d, "llama31" | "llama4" | "gpt_oss" | "command_r7b")
}

/// The id the dialect's writer gives call `i` of function `name`, which the parser must return
/// (`call_<i>` where the model writes none).
fn written_id(d: &str, i: usize, name: &str) -> String {
    match d {
        "mistral" => format!("{:09}", i + 1),
        "kimi_k2" => format!("functions.{name}:{i}"),
        "command_r7b" => i.to_string(),
        _ => format!("call_{i}"),
    }
}

fn same_calls(d: &str, parsed: &callmask::Parsed, calls: &[Call]) {
    assert_eq!(parsed.tool_calls.len(), calls.len(), "{d}: {parsed:?}");
    for (c, (n, a)) in parsed.tool_calls.iter().zip(calls) {
        assert_eq!(c.function.name, *n, "{d}");
        assert_eq!(
            &c.arguments_json().unwrap(),
            a,
            "{d}: {}",
            c.function.arguments
        );
    }
}

/// Parses `text` token by token with a [`StreamParser`], checking the events' order, and
/// returns the reply, the calls' names and arguments, and their ids (the model's where an
/// [`Event::CallId`] came, else the provisional one).
fn stream(
    vocab: &Arc<Vocab>,
    g: &Grammar,
    text: &str,
) -> (String, Vec<(String, Value)>, Vec<String>) {
    let auto = TokenAutomaton::new(g, vocab.clone()).unwrap();
    let mut p = StreamParser::new(g);
    let mut events = Vec::new();
    for t in auto.tokenize(text).unwrap() {
        events.extend(p.push_token(vocab, t).unwrap());
    }
    events.extend(p.finish().unwrap());
    let mut open: Option<usize> = None;
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    let mut reply = String::new();
    for e in events {
        match e {
            Event::CallStart { index, name, id } => {
                assert!(open.is_none(), "a call starts inside another: {text}");
                assert_eq!(index, calls.len());
                assert_eq!(id, format!("call_{index}"));
                calls.push((name, String::new()));
                ids.push(id);
                open = Some(index);
            }
            Event::CallId { index, id } => {
                assert_eq!(open, Some(index), "an id outside its call");
                ids[index] = id;
            }
            Event::Arguments { index, delta } => {
                assert_eq!(open, Some(index), "arguments outside their call");
                calls[index].1 += &delta;
            }
            Event::CallEnd { index } => assert_eq!(open.take(), Some(index)),
            Event::Text(t) => reply += &t,
            Event::Reasoning(_) => {}
        }
    }
    assert!(open.is_none(), "a call never ends");
    let calls = calls
        .into_iter()
        .map(|(n, a)| {
            let v: Value =
                serde_json::from_str(&a).unwrap_or_else(|e| panic!("streamed {a:?}: {e}"));
            (n, v)
        })
        .collect();
    (reply.trim().to_owned(), calls, ids)
}

#[test]
fn round_trips_on_the_families_vocabularies() {
    for d in DIALECTS {
        let g = compile(d);
        let vocabs = vocabs(d);
        for calls in call_sets() {
            if single_call(d) && calls.len() > 1 {
                continue;
            }
            let text = write(d, "Let me check.", &calls);
            let parsed = g
                .parse(&text)
                .unwrap_or_else(|e| panic!("{d}: {e}\n{text}"));
            same_calls(d, &parsed, &calls);
            for (i, (c, (n, _))) in parsed.tool_calls.iter().zip(&calls).enumerate() {
                assert_eq!(c.id, written_id(d, i, n), "{d}: the call's id");
            }
            if text_beside_calls(d) {
                assert_eq!(parsed.text, "Let me check.", "{d}");
            }
            for (vn, v) in &vocabs {
                assert!(tokens_accept(v, &g, &text), "{d} on {vn} rejects:\n{text}");
                let (reply, streamed, ids) = stream(v, &g, &text);
                assert_eq!(reply, parsed.text, "{d} on {vn}");
                let want_ids: Vec<&str> = parsed.tool_calls.iter().map(|c| c.id.as_str()).collect();
                assert_eq!(ids, want_ids, "{d} on {vn}: streamed ids");
                let want: Vec<(String, Value)> = calls
                    .iter()
                    .map(|(n, a)| (n.to_string(), a.clone()))
                    .collect();
                assert_eq!(streamed, want, "{d} on {vn}:\n{text}");
            }
        }
        // A plain reply, written the dialect's way.
        let text = write(d, "The capital of Poland is Warsaw.", &[]);
        let p = g
            .parse(&text)
            .unwrap_or_else(|e| panic!("{d}: {e}\n{text}"));
        assert!(p.tool_calls.is_empty(), "{d}");
        assert_eq!(p.text, "The capital of Poland is Warsaw.", "{d}: {text}");
        for (vn, v) in &vocabs {
            assert!(tokens_accept(v, &g, &text), "{d} on {vn} rejects:\n{text}");
        }
    }
}

/// The markers are the family vocabulary's own tokens: one token each, where the family has it.
#[test]
fn markers_are_the_vocabularies_tokens() {
    let cases: &[(&str, &str, &str)] = &[
        ("deepseek_v31", "deepseek_v3", "<｜tool▁calls▁begin｜>"),
        ("deepseek_r1", "deepseek_v3", "<｜tool▁sep｜>"),
        ("qwen3", "qwen3", "<tool_call>"),
        ("qwen3", "qwen3", "</think>"),
        ("qwen3_coder", "qwen3", "<tool_call>"),
        ("qwen35", "qwen3", "<tool_call>"),
        ("qwen35", "qwen3", "</think>"),
        ("gpt_oss", "gptoss", "<|constrain|>"),
        ("gpt_oss", "gptoss", "<|channel|>"),
    ];
    for (d, vn, marker) in cases {
        let v = testkit::npm_vocab(vn);
        let g = compile(d);
        let text = write(d, "", &[("get_time_utc", json!({}))]);
        assert!(text.contains(marker), "{d}: {text}");
        let auto = TokenAutomaton::new(&g, v.clone()).unwrap();
        let tokens = auto.tokenize(&text).unwrap();
        let ids: Vec<_> = tokens
            .iter()
            .filter(|&&t| v.token_bytes(t) == Some(marker.as_bytes()))
            .collect();
        assert!(
            !ids.is_empty(),
            "{d} on {vn}: {marker} is not one token of {tokens:?}"
        );
    }
    // Added special tokens are taken as such, and their spelling in plain tokens is not.
    let v = testkit::with_specials(
        testkit::llama_vocab(),
        &["[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"],
    );
    let g = compile("mistral");
    let auto = TokenAutomaton::new(&g, v.clone()).unwrap();
    let tc = v.special_token("[TOOL_CALLS]").unwrap();
    let mut m = auto.matcher();
    let mut mask = callmask::TokenMask::new(v.len());
    m.fill_mask(&mut mask);
    assert!(mask.is_allowed(tc));
    m.accept(tc).unwrap();
    m.fill_mask(&mut mask);
    assert!(mask.is_allowed(v.tokenize("[{\"").unwrap()[0]));
    assert!(mask.is_allowed(v.tokenize("get").unwrap()[0]));
    assert!(!mask.is_allowed(v.tokenize("Hello").unwrap()[0]));
}

/// Outputs in the shapes the formats' documentation and the peers' parsers show.
#[test]
fn documented_outputs() {
    type Case<'a> = (&'static str, &'static str, &'a [Call]);
    let cases: &[Case] = &[
        (
            "qwen3",
            "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>",
            &[("get_current_weather", json!({"location": "Paris"}))],
        ),
        (
            "qwen3",
            "<think>The reasoning.</think>\n\n<tool_call>\n{\"name\": \"get_time_utc\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_stock_price\", \"arguments\": {\"ticker\": \"NVDA\"}}\n</tool_call>",
            &[("get_time_utc", json!({})), ("get_stock_price", json!({"ticker": "NVDA"}))],
        ),
        (
            "llama31",
            "<|python_tag|>{\"name\": \"get_stock_price\", \"arguments\": {\"ticker\": \"NVDA\"}}; {\"name\": \"get_time_utc\", \"parameters\": {}}",
            &[("get_stock_price", json!({"ticker": "NVDA"})), ("get_time_utc", json!({}))],
        ),
        (
            "llama31",
            "{\"name\": \"get_time_utc\", \"parameters\": {}}\n{\"name\": \"get_user_info\", \"parameters\": {\"user_id\": 3}}",
            &[("get_time_utc", json!({})), ("get_user_info", json!({"user_id": 3}))],
        ),
        (
            "llama4",
            "<|python_start|>[get_user_info(user_id=7890, special='black'), get_time_utc()]<|python_end|>",
            &[("get_user_info", json!({"user_id": 7890, "special": "black"})), ("get_time_utc", json!({}))],
        ),
        (
            "llama4",
            "[get_time_utc()]",
            &[("get_time_utc", json!({}))],
        ),
        (
            "mistral",
            "[TOOL_CALLS][{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris\"}, \"id\": \"Ab3dE9fGh\"}]",
            &[("get_current_weather", json!({"location": "Paris"}))],
        ),
        (
            "mistral",
            "[TOOL_CALLS] [{\"name\": \"get_time_utc\", \"arguments\": {}}]",
            &[("get_time_utc", json!({}))],
        ),
        (
            "mistral",
            "[TOOL_CALLS]get_current_weather[ARGS]{\"location\": \"Paris\"}[TOOL_CALLS]get_time_utc[CALL_ID]a1b2c3d4e[ARGS]{}",
            &[("get_current_weather", json!({"location": "Paris"})), ("get_time_utc", json!({}))],
        ),
        (
            "qwen3_coder",
            "<tool_call>\n<function=book_flight>\n<parameter=from>\nSFO\n</parameter>\n<parameter=passengers>\n[{\"name\": \"Al\"}]\n</parameter>\n<parameter=to>\nJFK\n</parameter>\n<parameter=flexible>\nnull\n</parameter>\n</function>\n</tool_call>",
            &[("book_flight", json!({"from": "SFO", "passengers": [{"name": "Al"}], "to": "JFK", "flexible": null}))],
        ),
        (
            "qwen35",
            "<think>\nThe user asks for the weather in Paris.\n</think>\n\nLet me check.\n<tool_call>\n<function=get_current_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>",
            &[("get_current_weather", json!({"location": "Paris"}))],
        ),
        (
            "deepseek_r1",
            "<think>\nI need the time.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time_utc\n```json\n{}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_stock_price\n```json\n{\"ticker\": \"IBM\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            &[("get_time_utc", json!({})), ("get_stock_price", json!({"ticker": "IBM"}))],
        ),
        (
            "deepseek_v31",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_current_weather<｜tool▁sep｜>{\"location\": \"Tokyo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            &[("get_current_weather", json!({"location": "Tokyo"}))],
        ),
        (
            "kimi_k2",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_current_weather:0<|tool_call_argument_begin|>{\"location\": \"Beijing\"}<|tool_call_end|><|tool_call_begin|>functions.get_time_utc:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
            &[("get_current_weather", json!({"location": "Beijing"})), ("get_time_utc", json!({}))],
        ),
        (
            "glm45",
            "<think></think>\n<tool_call>get_user_info\n<arg_key>user_id</arg_key>\n<arg_value>42</arg_value>\n<arg_key>special</arg_key>\n<arg_value>none</arg_value>\n</tool_call>",
            &[("get_user_info", json!({"user_id": 42, "special": "none"}))],
        ),
        (
            "minimax_m2",
            "<think>\nweather\n</think>\n\n<minimax:tool_call>\n<invoke name=\"get_current_weather\">\n<parameter name=\"location\">San Francisco</parameter>\n<parameter name=\"unit\">celsius</parameter>\n</invoke>\n<invoke name=\"get_time_utc\">\n</invoke>\n</minimax:tool_call>",
            &[("get_current_weather", json!({"location": "San Francisco", "unit": "celsius"})), ("get_time_utc", json!({}))],
        ),
        (
            "gpt_oss",
            "<|channel|>analysis<|message|>Need to use function get_current_weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>{\"location\":\"San Francisco\"}<|call|>",
            &[("get_current_weather", json!({"location": "San Francisco"}))],
        ),
        (
            "gpt_oss",
            "<|channel|>commentary to=functions.get_time_utc<|message|>{}",
            &[("get_time_utc", json!({}))],
        ),
        (
            "command_r7b",
            "<|START_THINKING|>I will look up the weather.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_current_weather\", \"parameters\": {\"location\": \"Toronto\"}}\n]<|END_ACTION|>",
            &[("get_current_weather", json!({"location": "Toronto"}))],
        ),
        (
            "functionary_v32",
            "get_current_weather\n{\"location\": \"Hanoi\"}>>>get_time_utc\n{}",
            &[("get_current_weather", json!({"location": "Hanoi"})), ("get_time_utc", json!({}))],
        ),
        (
            "functionary_v32",
            "all\nLet me look that up.>>>get_stock_price\n{\"ticker\": \"AAPL\"}",
            &[("get_stock_price", json!({"ticker": "AAPL"}))],
        ),
        (
            "granite",
            "<|tool_call|>[{\"name\": \"get_stock_price\", \"arguments\": {\"ticker\": \"IBM\"}}]",
            &[("get_stock_price", json!({"ticker": "IBM"}))],
        ),        // GLM 4.7 / 5 write no line breaks inside a call.
        (
            "glm45",
            "<think>the user</think><tool_call>get_user_info<arg_key>user_id</arg_key><arg_value>42</arg_value><arg_key>special</arg_key><arg_value>none</arg_value></tool_call>",
            &[("get_user_info", json!({"user_id": 42, "special": "none"}))],
        ),
        // Harmony: the recipient in the role header, `json` without <|constrain|>, no space.
        (
            "gpt_oss",
            " to=functions.get_current_weather<|channel|>commentary <|constrain|>json<|message|>{\"location\":\"Oslo\"}<|call|>",
            &[("get_current_weather", json!({"location": "Oslo"}))],
        ),
        (
            "gpt_oss",
            " to=functions.get_time_utc<|channel|>commentary json<|message|>{}<|call|>",
            &[("get_time_utc", json!({}))],
        ),
        (
            "gpt_oss",
            "<|channel|>analysis<|message|>Time.<|end|><|start|>assistant<|channel|>commentary to=functions.get_time_utc<|constrain|>json<|message|>{}<|call|>",
            &[("get_time_utc", json!({}))],
        ),
    ];
    for (d, text, calls) in cases {
        let g = compile(d);
        let p = g.parse(text).unwrap_or_else(|e| panic!("{d}: {e}\n{text}"));
        same_calls(d, &p, calls);
        let (vn, v) = vocabs(d).pop().unwrap();
        assert!(tokens_accept(&v, &g, text), "{d} on {vn} rejects:\n{text}");
    }
    // The ids the models wrote are the calls' ids; where none was written, call_N.
    let ids = |d: &str, i: usize| -> Vec<String> {
        let p = compile(d).parse(cases[i].1).unwrap();
        assert_eq!(cases[i].0, d);
        p.tool_calls.into_iter().map(|c| c.id).collect()
    };
    assert_eq!(ids("mistral", 6), ["Ab3dE9fGh"]);
    assert_eq!(ids("mistral", 7), ["call_0"]);
    assert_eq!(ids("mistral", 8), ["call_0", "a1b2c3d4e"]);
    assert_eq!(
        ids("kimi_k2", 13),
        [
            "functions.get_current_weather:0",
            "functions.get_time_utc:1"
        ]
    );
    assert_eq!(ids("command_r7b", 18), ["0"]);
    assert_eq!(ids("qwen35", 10), ["call_0"]);
    // Reasoning is returned as such.
    let p = compile("qwen3").parse(cases[0].1).unwrap();
    assert_eq!(p.reasoning.as_deref(), Some("The user wants the weather."));
    let p = compile("gpt_oss").parse(cases[16].1).unwrap();
    assert_eq!(
        p.reasoning.as_deref(),
        Some("Need to use function get_current_weather.")
    );
}

/// Variants real models write that the peers' parsers read (cited in each grammar's header):
/// the text each returns and its calls.
#[test]
fn variants_real_models_write() {
    type Case<'a> = (&'static str, &'static str, &'static str, &'a [Call]);
    let weather = [("get_current_weather", json!({"location": "Paris"}))];
    let time = [("get_time_utc", json!({}))];
    let two = [
        ("get_stock_price", json!({"ticker": "NVDA"})),
        ("get_time_utc", json!({})),
    ];
    let user = [("get_user_info", json!({"user_id": 42, "special": "none"}))];
    let cases: &[Case] = &[
        // GLM 4.5 / 4.6: the turn starts with a line break before <think>.
        ("glm45", "\n<think>The user.</think>\n<tool_call>get_user_info\n<arg_key>user_id</arg_key>\n<arg_value>42</arg_value>\n<arg_key>special</arg_key>\n<arg_value>none</arg_value>\n</tool_call>", "", &user),
        ("glm45", "\n<think></think>\nSure.\n<tool_call>get_time_utc\n</tool_call>", "Sure.", &time),
        ("glm45", "<tool_call>get_user_info<arg_key>user_id</arg_key><arg_value>42</arg_value>\n<arg_key>special</arg_key><arg_value>none</arg_value>\n</tool_call>", "", &user),
        ("glm45", "<tool_call>get_time_utc</tool_call>", "", &time),
        // MiniMax M2 without the line breaks, or some of them.
        ("minimax_m2", "<minimax:tool_call><invoke name=\"get_current_weather\"><parameter name=\"location\">Paris</parameter></invoke></minimax:tool_call>", "", &weather),
        ("minimax_m2", "<minimax:tool_call><invoke name=\"get_stock_price\">\n<parameter name=\"ticker\">NVDA</parameter>\n</invoke><invoke name=\"get_time_utc\"></invoke>\n</minimax:tool_call>", "", &two),
        // Qwen3-Coder / Qwen3.5 without the line breaks; text after the calls.
        ("qwen3_coder", "<tool_call><function=get_current_weather><parameter=location>Paris</parameter></function></tool_call>", "", &weather),
        ("qwen3_coder", "<tool_call>\n<function=get_current_weather>\n<parameter=location>Paris\n</parameter>\n</function>\n</tool_call>", "", &weather),
        ("qwen3_coder", "<tool_call>\n<function=get_stock_price>\n<parameter=ticker>\nNVDA</parameter>\n</function>\n</tool_call>\n<tool_call><function=get_time_utc></function></tool_call>\nDone.", "Done.", &two),
        ("qwen35", "<think>\nweather\n</think>\n\n<tool_call><function=get_current_weather><parameter=location>Paris</parameter></function></tool_call>", "", &weather),
        ("qwen35", "<tool_call>\n<function=get_time_utc>\n</function>\n</tool_call>\nI asked for the time.", "I asked for the time.", &time),
        // Harmony: the call on the analysis channel, the recipient in the role header.
        ("gpt_oss", "<|channel|>analysis to=functions.get_current_weather<|message|>{\"location\": \"Paris\"}", "", &weather),
        ("gpt_oss", " to=functions.get_current_weather<|channel|>analysis<|message|>{\"location\": \"Paris\"}", "", &weather),
        ("gpt_oss", " to=functions.get_current_weather<|channel|>analysis <|constrain|>json<|message|>{\"location\": \"Paris\"}<|call|>", "", &weather),
        ("gpt_oss", "<|channel|>analysis<|message|>Need the time.<|end|><|start|>assistant to=functions.get_time_utc<|channel|>commentary json<|message|>{}<|call|>", "", &time),
        ("gpt_oss", "<|channel|>commentary<|message|>Hello, world!", "Hello, world!", &[]),
        // Kimi K2: text after the section; the section inside the reasoning.
        ("kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time_utc:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>Let me know.", "Let me know.", &time),
        ("kimi_k2", "<think>I need the time<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time_utc:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>", "", &time),
        // Llama 3.x JSON: text after the calls.
        ("llama31", "{\"name\": \"get_time_utc\", \"parameters\": {}}\n\nThis gives the current time.", "This gives the current time.", &time),
        // Hermes / Qwen3: the last </tool_call> missing at the end.
        ("qwen3", "<think>\nx\n</think>\n\n<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris\"}}\n", "", &weather),
        ("qwen3", "<tool_call>\n{\"name\": \"get_stock_price\", \"arguments\": {\"ticker\": \"NVDA\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time_utc\", \"arguments\": {}}", "", &two),
    ];
    for (d, text, reply, calls) in cases {
        let g = compile(d);
        let p = g.parse(text).unwrap_or_else(|e| panic!("{d}: {e}\n{text}"));
        same_calls(d, &p, calls);
        assert_eq!(p.text, *reply, "{d}: {text}");
        for (vn, v) in vocabs(d) {
            assert!(tokens_accept(&v, &g, text), "{d} on {vn} rejects:\n{text}");
            let (streamed_reply, streamed, _) = stream(&v, &g, text);
            assert_eq!(streamed.len(), calls.len(), "{d} on {vn}: {text}");
            let _ = streamed_reply;
        }
    }
    // Hermes (the dialects tests' vocabularies are Llama's and Gemma's).
    let g = compile("hermes");
    let p = g
        .parse("Sure.\n<tool_call>\n{\"name\": \"get_time_utc\", \"arguments\": {}}")
        .unwrap();
    assert_eq!(p.text, "Sure.");
    same_calls("hermes", &p, &time);
    // A raw Qwen3-Coder value keeps its inner line breaks; the wrapping ones are not in it.
    let p = compile("qwen3_coder")
        .parse("<tool_call>\n<function=get_current_weather>\n<parameter=location>\na\nb\n</parameter>\n</function>\n</tool_call>")
        .unwrap();
    assert_eq!(
        p.tool_calls[0].arguments_json().unwrap(),
        json!({"location": "a\nb"})
    );
}

#[test]
fn rejections() {
    let bad: &[(&str, &str, &str)] = &[
        ("qwen3", "<tool_call>\n{\"name\": \"get_stock_price\", \"arguments\": {\"ticker\": \"nvda\"}}\n</tool_call>", "pattern"),
        ("qwen3", "<think>a</think><think>b</think>hi", "two reasoning blocks"),
        ("llama31", "{\"name\": \"get_time_utc\", \"args\": {}}", "unknown arguments key"),
        ("llama31", "<|python_tag|>get_time_utc.call()", "a built-in call of a tool that is not built in"),
        ("llama31", " {\"name\": \"get_time_utc\", \"parameters\": {}}", "text starting with whitespace"),
        ("llama4", "<|python_start|>[get_user_info(user_id='1')]<|python_end|>", "wrong type"),
        ("llama4", "[get_time_utc()] and more", "text after the list"),
        ("mistral", "[TOOL_CALLS][{\"name\": \"get_time_utc\", \"arguments\": {}, \"id\": \"abc\"}]", "id of 3 characters"),
        ("mistral", "[TOOL_CALLS]get_time_utc[ARGS]{\"x\": 1}", "extra argument"),
        ("mistral", "[TOOL_CALLS]nope[ARGS]{}", "unknown function"),
        ("qwen3_coder", "<tool_call>\n<function=get_current_weather>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>", "missing required"),
        ("qwen3_coder", "<tool_call>\n<function=get_current_weather>\n<parameter=location>\nA\n</parameter>\n<parameter=location>\nB\n</parameter>\n</function>\n</tool_call>", "duplicate argument"),
        ("qwen3_coder", "<tool_call>\n<function=get_current_weather>\n<parameter=location>\nA\n</parameter>\n<parameter=unit>\nkelvin\n</parameter>\n</function>\n</tool_call>", "enum"),
        ("qwen3_coder", "<tool_call>\n<function=get_current_weather>\n<parameter=location>\n\nParis\n</parameter>\n</function>\n</tool_call>", "a raw value starting with a line break (vLLM strips one: a different value)"),
        ("qwen3_coder", "<tool_call>\n<function=get_current_weather>\n<parameter=location>\nParis\n\n</parameter>\n</function>\n</tool_call>", "a raw value ending with a line break"),
        ("qwen3_coder", "<tool_call>\n<function=get_current_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call> more <tool_call>", "a call marker in the text after the calls"),
        ("qwen35", "<tool_call><function=get_time_utc></function></tool_call><think>x</think>", "reasoning after the calls"),
        ("hermes", "<tool_call>\n{\"name\": \"get_time_utc\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time_utc\", \"arguments\": {}} bye", "text after an unclosed last call"),
        ("qwen3", "<tool_call>\n{\"name\": \"get_time_utc\", \"arguments\": {}}\n<tool_call>\n{\"name\": \"get_time_utc\", \"arguments\": {}}\n</tool_call>", "an unclosed call before another"),
        ("llama31", "{\"name\": \"get_time_utc\", \"parameters\": {}} and {\"x\": 1}", "a brace in the text after the calls (vLLM reads it as a call)"),
        ("kimi_k2", "<think>a<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time_utc:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|></think>b", "</think> after calls made inside the reasoning"),
        ("glm45", "\n\n<think>x</think>hi", "two line breaks before the reasoning"),
        ("minimax_m2", "<minimax:tool_call><invoke name=\"get_time_utc\">\n\n</invoke></minimax:tool_call>", "two line breaks inside an invoke"),
        ("gpt_oss", "<|channel|>commentary to=functions.get_time_utcjson<|message|>{}<|call|>", "the content type run into the recipient"),
        ("gpt_oss", "<|channel|>commentary to=functions.get_time_utc<|message|>{}<|call|><|start|>assistant<|channel|>final<|message|>hi", "text after the call"),
        ("qwen3_coder", "<tool_call>\n<function=get_user_info>\n<parameter=user_id>\nseven\n</parameter>\n</function>\n</tool_call>", "non-JSON integer"),
        ("deepseek_r1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time_utc\n```json\n{}\n```<｜tool▁call▁end｜>", "unclosed calls section"),
        ("deepseek_v31", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_stock_price<｜tool▁sep｜>{\"ticker\": 5}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "wrong type"),
        ("kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>get_time_utc:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>", "id without functions."),
        ("glm45", "<tool_call>get_user_info\n<arg_key>user_id</arg_key>\n<arg_value>\"42\"</arg_value>\n</tool_call>", "string for an integer"),
        ("glm45", "<tool_call>get_current_weather\n<arg_key>location</arg_key>\n<arg_value>a</arg_value>b</arg_value>\n</tool_call>", "closing tag inside a raw value"),
        ("minimax_m2", "<minimax:tool_call>\n<invoke name=\"get_current_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>", "unknown argument"),
        ("gpt_oss", "<|channel|>analysis<|message|>thinking<|end|>", "no answer after the reasoning"),
        ("gpt_oss", "<|channel|>commentary to=functions.get_stock_price <|constrain|>json<|message|>{\"ticker\": \"toolong\"}", "pattern"),
        ("command_r7b", "<|START_ACTION|>[{\"tool_name\": \"get_time_utc\", \"parameters\": {}}]<|END_ACTION|>", "no tool_call_id"),
        ("command_r7b", "Hello", "text outside a response"),
        ("functionary_v32", "get_time_utc\n{}>>>all\nDone.", "text after the calls"),
        ("granite", "<|tool_call|>[{\"name\": \"get_time_utc\", \"arguments\": {}}] thanks", "text after the list"),
    ];
    for (d, text, why) in bad {
        let g = compile(d);
        assert!(
            matches!(g.parse(text), Err(Error::Parse(_))),
            "{d} accepts ({why}): {text}"
        );
        for (vn, v) in vocabs(d) {
            assert!(
                !tokens_accept(&v, &g, text),
                "{d} on {vn} tokens accept ({why}): {text}"
            );
        }
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
    for d in DIALECTS {
        let (_, v) = vocabs(d).pop().unwrap();
        let ok = |g: &Grammar, t: &str| tokens_accept(&v, g, t);
        let text_only = write(d, "hello", &[]);
        let w1 = write(d, "", &one);
        let w2 = write(d, "", &two);
        let g = compile_with(d, &tools(), &opts(ToolChoice::Auto, true));
        assert!(ok(&g, &text_only) && ok(&g, &w1), "{d} auto");
        assert_eq!(ok(&g, &w2), !single_call(d), "{d} auto, two calls");
        let g = compile_with(d, &tools(), &opts(ToolChoice::None, true));
        assert!(
            ok(&g, &text_only) && !ok(&g, &w1) && !ok(&g, &w2),
            "{d} none"
        );
        let g = compile_with(d, &tools(), &opts(ToolChoice::Required, false));
        assert!(
            !ok(&g, &text_only) && ok(&g, &w1) && !ok(&g, &w2),
            "{d} required, single"
        );
        let g = compile_with(
            d,
            &tools(),
            &opts(ToolChoice::Function("get_stock_price".into()), true),
        );
        let only_stock = write(d, "", &[("get_stock_price", json!({"ticker": "B"}))]);
        assert!(!ok(&g, &w1) && ok(&g, &only_stock), "{d} named");
    }
}

/// `@xml_args`: the schema decides raw text or JSON for each value, any order, each argument at
/// most once, and the names and schemas it cannot write are refused by name.
#[test]
fn tagged_arguments() {
    let tools = Tools::from_openai_json(&json!([{
        "name": "edit",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"},
            "code": {"type": "string", "minLength": 1},
            "mode": {"enum": ["a", "b"]},
            "n": {"type": "integer"},
            "maybe": {"type": ["string", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}}
        }, "required": ["path", "code"]}
    }]))
    .unwrap();
    let g = compile_with("qwen3_coder", &tools, &DialectOptions::default());
    let code = "fn main() {\n    println!(\"</b> \\\\ \");\n}";
    let args = json!({"code": code, "path": "src/main.rs", "n": -3, "maybe": "x", "tags": ["a", "b"], "mode": "b"});
    let text = write("qwen3_coder", "", &[("edit", args.clone())]);
    // `maybe` admits null too: raw text is the string, as the writer writes it, and `null`
    // (JSON of its other type) is null, never the string "null"...
    let p = g.parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(p.tool_calls[0].arguments_json().unwrap(), args);
    let null = text.replace("\nx\n", "\nnull\n");
    let p = g.parse(&null).unwrap_or_else(|e| panic!("{e}\n{null}"));
    let mut want = args.clone();
    want["maybe"] = serde_json::Value::Null;
    assert_eq!(p.tool_calls[0].arguments_json().unwrap(), want);
    let qwen = testkit::npm_vocab("qwen3");
    assert!(tokens_accept(&qwen, &g, &text));
    // ...and a raw value may not hold its closing tag.
    let bad = write(
        "qwen3_coder",
        "",
        &[("edit", json!({"path": "a</parameter>b", "code": "x"}))],
    );
    assert!(g.parse(&bad).is_err());
    // An empty string where the schema allows it, and where it does not.
    for args in [
        json!({"path": "", "code": "x"}),
        json!({"code": "x", "path": ""}),
    ] {
        let empty = write("qwen3_coder", "", &[("edit", args.clone())]);
        let p = g.parse(&empty).unwrap_or_else(|e| panic!("{e}: {empty}"));
        assert_eq!(p.tool_calls[0].arguments_json().unwrap(), args, "{empty}");
        let (_, streamed, _) = stream(&qwen, &g, &empty);
        assert_eq!(streamed[0].1, args, "{empty}");
    }
    let empty = write(
        "qwen3_coder",
        "",
        &[("edit", json!({"path": "p", "code": ""}))],
    );
    assert!(g.parse(&empty).is_err(), "{empty}");
    // Unrepresentable names and schemas are refused by name.
    for (params, want) in [
        (
            json!({"type": "object", "properties": {"a<b": {"type": "string"}}}),
            "a<b",
        ),
        (
            json!({"type": "object", "properties": {"a": {}}, "minProperties": 1}),
            "minProperties",
        ),
        (
            json!({"type": "object", "anyOf": [{"required": ["a"]}]}),
            "anyOf",
        ),
        (
            json!({"type": "object", "properties": {}, "required": ["zz"]}),
            "zz",
        ),
    ] {
        let t = Tools::from_openai_json(&json!([{"name": "f", "parameters": params}])).unwrap();
        let e = Dialect::by_name("glm45")
            .unwrap()
            .compile(&t, &DialectOptions::default())
            .unwrap_err();
        assert!(matches!(e, Error::Unrepresentable { .. }), "{e}");
        assert!(e.to_string().contains(want), "{e}");
    }
    // Many arguments: in the schema's order beyond the any-order bound.
    let props: serde_json::Map<String, Value> = (0..12)
        .map(|i| (format!("p{i:02}"), json!({"type": "integer"})))
        .collect();
    let t = Tools::from_openai_json(
        &json!([{"name": "f", "parameters": {"type": "object", "properties": props, "required": ["p03"]}}]),
    )
    .unwrap();
    let g = compile_with("minimax_m2", &t, &DialectOptions::default());
    let ok = "<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"p01\">1</parameter>\n<parameter name=\"p03\">3</parameter>\n</invoke>\n</minimax:tool_call>";
    assert_eq!(
        g.parse(ok).unwrap().tool_calls[0].arguments_json().unwrap(),
        json!({"p01": 1, "p03": 3})
    );
    let swapped = ok
        .replace("p01\">1", "p0x")
        .replace("p03\">3", "p01\">1")
        .replace("p0x", "p03\">3");
    assert!(g.parse(&swapped).is_err(), "{swapped}");
    let missing = ok.replace("<parameter name=\"p03\">3</parameter>\n", "");
    assert!(g.parse(&missing).is_err());
}

/// Kimi K2's call ids and Mistral's must have the documented shape.
#[test]
fn call_id_shapes() {
    let g = compile("kimi_k2");
    for (id, ok) in [("0", true), ("12", true), ("x", false), ("", false)] {
        let text = format!("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time_utc:{id}<|tool_call_argument_begin|>{{}}<|tool_call_end|><|tool_calls_section_end|>");
        assert_eq!(g.parse(&text).is_ok(), ok, "{text}");
    }
    let g = compile("mistral");
    for (id, ok) in [
        ("abcDEF123", true),
        ("abcDEF12", false),
        ("abcDEF1234", false),
        ("abc-EF123", false),
    ] {
        let text = format!(
            "[TOOL_CALLS][{{\"name\": \"get_time_utc\", \"arguments\": {{}}, \"id\": \"{id}\"}}]"
        );
        assert_eq!(g.parse(&text).is_ok(), ok, "{text}");
        let text = format!("[TOOL_CALLS]get_time_utc[CALL_ID]{id}[ARGS]{{}}");
        assert_eq!(g.parse(&text).is_ok(), ok, "{text}");
    }
}

/// Every new dialect's prompt template renders a conversation with a call and its result in the
/// family's layout.
#[test]
fn prompt_templates_show_calls_the_dialect_way() {
    let messages: Vec<callmask::Message> = serde_json::from_value(json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function",
            "function": {"name": "get_current_weather", "arguments": "{\"location\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "{\"temperature\": 20}"},
        {"role": "user", "content": "Thanks"}
    ]))
    .unwrap();
    for d in DIALECTS {
        let template = callmask::prompt::builtin_template(d).unwrap();
        let text = callmask::render(
            template,
            &messages,
            &tools(),
            &callmask::PromptOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{d}: {e}"));
        // The history's call, written as the dialect writes calls, is in the prompt.
        let call = write(
            d,
            "",
            &[("get_current_weather", json!({"location": "Paris"}))],
        );
        let g = compile(d);
        let shown = match d {
            "qwen3" | "qwen3_coder" | "qwen35" | "glm45" => call
                .trim_start_matches("<think>\n\n</think>\n\n")
                .to_string(),
            "deepseek_r1" => call.trim_start_matches("<think>\n</think>\n\n").to_string(),
            "mistral" => call.replace("000000001", "call_0"),
            "llama31" => call.replace("; ", "\n"),
            "command_r7b" => call.replace("<|START_THINKING|><|END_THINKING|>", ""),
            _ => call.clone(),
        };
        assert!(
            text.contains(&shown),
            "{d}: the prompt lacks {shown:?}:\n{text}"
        );
        assert!(g.parse(&call).is_ok(), "{d}");
        assert!(
            text.contains("Be brief.") && text.contains("Thanks") && text.contains("20"),
            "{d}"
        );
    }
}

/// Misused call parts in a dialect file are refused with a message, never a panic.
#[test]
fn call_parts_misused() {
    for (src, want) in [
        ("root ::= @name", "inside @call"),
        ("root ::= \"x\" @args", "inside @call"),
        (
            "root ::= @xml_args(key_prefix=\"<\", key_suffix=\">\", value_suffix=\"</>\")",
            "inside @call",
        ),
        ("root ::= @call(@name @call(@name))", "a call inside a call"),
        ("root ::= @call(@name @json_call)", "a call inside a call"),
        ("root ::= @call(@name @args @args)", "once"),
        ("root ::= @call(@name (\",\" @args)*)", "once"),
        (
            "root ::= @call(@name a)\na ::= @args b\nb ::= @args",
            "once",
        ),
        ("root ::= @call(@name, names=\"(\")", "names"),
        ("root ::= @call(@name, nomes=\"x\")", "names="),
        ("root ::= @xml_args(key_prefix=\"\")", "non-empty"),
        (
            "root ::= @args(as=yaml)",
            "expected json, string, python, gemma or raw",
        ),
        ("root ::= @json_call(id_key=\"id\")", "both id_key and id"),
        ("root ::= @reasoning", "end marker"),
    ] {
        let r =
            Dialect::parse("t", src).and_then(|d| d.compile(&tools(), &DialectOptions::default()));
        let e = r.expect_err(src).to_string();
        assert!(e.contains(want), "{src}: {e}");
    }
    // Recursion through rules inside a call is fine when each path writes the arguments once.
    let d = Dialect::parse(
        "t",
        "root ::= @call(@name sep @args)\nsep ::= \" \" sep | \":\"",
    )
    .unwrap();
    let g = d.compile(&tools(), &DialectOptions::default()).unwrap();
    assert_eq!(
        g.parse("get_stock_price   :{\"ticker\": \"AB\"}")
            .unwrap()
            .tool_calls[0]
            .function
            .arguments,
        "{\"ticker\":\"AB\"}"
    );
}

#[test]
fn dialect_auto_reads_the_format_from_the_chat_template() {
    let vocab = testkit::llama_vocab();
    // Fragments of each family's own chat template (the tool-call part it writes back).
    let cases = [
        (
            "{{- '<|start|>assistant<|channel|>commentary to=functions.' + name }}",
            "gpt_oss",
        ),
        (
            "<tool_call>\n<function={{ name }}>\n<parameter={{ k }}>",
            "qwen3_coder",
        ),
        (
            "<think>\n\n</think>\n\n<tool_call>\n<function={{ name }}>\n<parameter={{ k }}>",
            "qwen35",
        ),
        ("<tool_call>{{ name }}\n<arg_key>{{ k }}</arg_key>", "glm45"),
        (
            "<minimax:tool_call>\n<invoke name=\"{{ name }}\">",
            "minimax_m2",
        ),
        ("<|tool_calls_section_begin|><|tool_call_begin|>", "kimi_k2"),
        (
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{{ name }}",
            "deepseek_r1",
        ),
        (
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{{ name }}<｜tool▁sep｜>",
            "deepseek_v31",
        ),
        ("[TOOL_CALLS]{{ name }}[ARGS]{{ args }}", "mistral"),
        ("<|START_ACTION|>[{{ calls }}]<|END_ACTION|>", "command_r7b"),
        (
            "{{ '>>>' + name + '\\n' + args }} >>>all",
            "functionary_v32",
        ),
        ("<|tool_call|>[{{ calls }}]", "granite"),
        ("<|python_start|>[{{ calls }}]<|python_end|>", "llama4"),
        (
            "<think>\n\n</think>\n\n<tool_call>\n{{ call }}\n</tool_call>",
            "qwen3",
        ),
        ("<tool_call>\n{{ call }}\n</tool_call>", "hermes"),
    ];
    for (template, want) in cases {
        assert_eq!(
            Dialect::detect(Some(template), &vocab).unwrap(),
            want,
            "{template}"
        );
        Dialect::by_name(want).unwrap();
    }
    assert!(Dialect::detect(Some("{{ messages }}"), &vocab).is_err());
}

/// SmolLM2-Instruct's trained tool prompt (its GGUF's chat template shows no tools): the system
/// turn with the tools as one JSON list and the answer format, ChatML turns, calls in the history
/// as the model writes them, tool results as `<tool_response>` blocks in a user turn; and the
/// answer itself is the call list alone, `[]` for no call.
#[test]
fn smollm2_renders_its_trained_tool_prompt_and_answers_only_with_the_list() {
    let messages: Vec<callmask::Message> = serde_json::from_value(json!([
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function",
            "function": {"name": "get_current_weather", "arguments": "{\"location\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "{\"temperature\": 20}"},
        {"role": "user", "content": "Thanks"}
    ]))
    .unwrap();
    let tools =
        Tools::from_openai_json(&json!([{"name": "get_time_utc", "description": "UTC time."}]))
            .unwrap();
    let text = callmask::render(
        callmask::prompt::builtin_template("smollm2").unwrap(),
        &messages,
        &tools,
        &callmask::PromptOptions::default(),
    )
    .unwrap();
    let system = "<|im_start|>system\nYou are an expert in composing functions. You are given a \
        question and a set of possible functions.\nBased on the question, you will need to make one \
        or more function/tool calls to achieve the purpose.\nIf none of the functions can be used, \
        point it out and refuse to answer.\nIf the given question lacks the parameters required by \
        the function, also point it out.\n\nYou have access to the following tools:\n<tools>[{\"name\": \
        \"get_time_utc\", \"description\": \"UTC time.\"";
    assert!(text.starts_with(system), "{text}");
    let rest = "</tools>\n\nThe output MUST strictly adhere to the following format, and NO other \
        text MUST be included.\nThe example format is as follows. Please make sure the parameter \
        type is correct. If no function call is needed, please make the tool calls an empty list \
        '[]'.\n<tool_call>[\n{\"name\": \"func_name1\", \"arguments\": {\"argument1\": \"value1\", \
        \"argument2\": \"value2\"}},\n... (more tool calls as required)\n]</tool_call><|im_end|>\n\
        <|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>[{\"name\": \
        \"get_current_weather\", \"arguments\": {\"location\": \"Paris\"}}]</tool_call><|im_end|>\n\
        <|im_start|>user\n<tool_response>\n{\"temperature\": 20}\n</tool_response><|im_end|>\n\
        <|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n";
    assert!(text.ends_with(rest), "{text}");
    // The history's call is what the writer writes, and the grammar reads it.
    let g = compile("smollm2");
    let call = write(
        "smollm2",
        "ignored: no text beside the list",
        &[("get_current_weather", json!({"location": "Paris"}))],
    );
    assert!(text.contains(&call), "{call}");
    assert_eq!(g.parse(&call).unwrap().tool_calls.len(), 1);
    // tool_choice: none is the empty list only; required refuses it; no text either way.
    let opts = |c: ToolChoice| DialectOptions::default().tool_choice(c);
    let v = testkit::llama_vocab();
    let none = compile_with("smollm2", &testkit::mixed_tools(), &opts(ToolChoice::None));
    let required = compile_with(
        "smollm2",
        &testkit::mixed_tools(),
        &opts(ToolChoice::Required),
    );
    assert!(tokens_accept(&v, &none, "<tool_call>[]</tool_call>"));
    assert!(!tokens_accept(&v, &none, &call));
    assert!(!tokens_accept(&v, &required, "<tool_call>[]</tool_call>"));
    assert!(tokens_accept(&v, &required, &call));
    for g in [&none, &required] {
        assert!(!tokens_accept(&v, g, "It is sunny."));
    }
}
