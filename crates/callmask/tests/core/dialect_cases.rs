//! Every built-in dialect against its case file (`tests/dialect_cases/NAME.json`): the outputs
//! its family writes (the documented shapes and the variants the peers' parsers and tests
//! accept) parse to the listed calls and pass token by token on the family's vocabulary (its own
//! where npm has it, else the closest with the family's special tokens added); malformed outputs
//! are rejected by both; the call writer's turns round-trip; the chat-template excerpts are
//! detected as the dialect; and the outputs the peers' parsers recover from unconstrained models
//! are recovered by [`Grammar::parse_recovering`] with the same calls.
//!
//! Every row of the dialect table must have a case file, and every case file a row.

use callmask_testkit as testkit;

use callmask::{Dialect, DialectOptions, Tools};
use serde_json::{json, Value};

use callmask_testkit::mixed_tools as tools;

/// `examples/tools/mixed.json` and the case file's `extra_tools` (tools a family treats in a
/// way of its own, such as Functionary's `python`).
use callmask_testkit::checks::{calls_of, tokens_accept};

fn tools_for(file: &Value) -> Tools {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/tools/mixed.json"
    ))
    .unwrap();
    let mut list: Vec<Value> = serde_json::from_str(&text).unwrap();
    list.extend(cases(file, "extra_tools").iter().cloned());
    Tools::from_json_str(&Value::Array(list).to_string()).unwrap()
}

fn same_calls(what: &str, parsed: &callmask::Parsed, want: &[(String, Value)]) {
    let got: Vec<(String, Value)> = parsed
        .tool_calls
        .iter()
        .map(|c| (c.function.name.clone(), c.arguments_json().unwrap()))
        .collect();
    assert_eq!(got, want, "{what}");
}

fn cases<'a>(file: &'a Value, key: &str) -> &'a [Value] {
    file.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The call sets each writer writes (all valid for `examples/tools/mixed.json`).
fn call_sets() -> Vec<Vec<(String, Value)>> {
    let one = |n: &str, a: Value| (n.to_owned(), a);
    vec![
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
        vec![one("get_stock_price", json!({"ticker": "NVDA"}))],
    ]
}

fn check_dialect(d: &str, file: &Value) {
    let g = Dialect::by_name(d)
        .unwrap()
        .compile(&tools_for(file), &DialectOptions::default())
        .unwrap_or_else(|e| panic!("{d}: {e}"));
    // Outputs that put a JSON call's name after another key (`"name_first": false` in the
    // case: what the engines' JSON parsers read) are taken with `name_first` off, and refused
    // with it on (the default).
    let any_order = Dialect::by_name(d)
        .unwrap()
        .compile(
            &tools_for(file),
            &DialectOptions::default().name_first(false),
        )
        .unwrap_or_else(|e| panic!("{d}: {e}"));
    let vocab = testkit::case_vocab(d).unwrap_or_else(|| panic!("{d}: no vocab in the case file"));
    let single = file.get("single_call").and_then(Value::as_bool) == Some(true);
    for (i, c) in cases(file, "accept").iter().enumerate() {
        let text = c["text"].as_str().unwrap();
        let what = format!("{d} accept[{i}] ({}):\n{text}", c["why"]);
        let g = if c.get("name_first").and_then(Value::as_bool) == Some(false) {
            assert!(
                !tokens_accept(&vocab, &g, text),
                "{what}\naccepted token by token with the name key first"
            );
            &any_order
        } else {
            &g
        };
        let parsed = g.parse(text).unwrap_or_else(|e| panic!("{what}\n{e}"));
        same_calls(&what, &parsed, &calls_of(c));
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
            tokens_accept(&vocab, g, text),
            "{what}\nrejected token by token"
        );
    }
    for (i, c) in cases(file, "reject").iter().enumerate() {
        let text = c["text"].as_str().unwrap();
        let what = format!("{d} reject[{i}] ({}):\n{text}", c["why"]);
        assert!(
            !tokens_accept(&vocab, &g, text),
            "{what}\naccepted token by token"
        );
    }
    // The writer's turns: the shared call sets, and the case file's `extra_call_sets` (calls of
    // its `extra_tools`).
    let extra: Vec<Vec<(String, Value)>> = cases(file, "extra_call_sets")
        .iter()
        .map(|set| calls_of(&json!({ "calls": set })))
        .collect();
    for calls in call_sets().into_iter().chain(extra) {
        if single && calls.len() > 1 {
            continue;
        }
        let template = callmask::prompt::builtin_writer(d).unwrap();
        let text = callmask::prompt::write_calls(template, "Let me check.", &calls)
            .unwrap_or_else(|e| panic!("{d}: writing {calls:?}: {e}"));
        let parsed = g
            .parse(&text)
            .unwrap_or_else(|e| panic!("{d}: {e}\n{text}"));
        same_calls(&format!("{d} writer:\n{text}"), &parsed, &calls);
        assert!(
            tokens_accept(&vocab, &g, &text),
            "{d} writer, token by token:\n{text}"
        );
    }
    for (i, c) in cases(file, "accept").iter().enumerate() {
        // The recovering parse gives the strict result on accepted outputs, recovering nothing.
        let text = c["text"].as_str().unwrap();
        let g = if c.get("name_first").and_then(Value::as_bool) == Some(false) {
            &any_order
        } else {
            &g
        };
        let p = g.parse_recovering(text).unwrap();
        assert!(p.recovered.is_empty(), "{d} accept[{i}]: {p:?}");
    }
    for (i, c) in cases(file, "recover").iter().enumerate() {
        let text = c["text"].as_str().unwrap();
        let what = format!("{d} recover[{i}] ({}):\n{text}", c["why"]);
        let parsed = g
            .parse_recovering(text)
            .unwrap_or_else(|e| panic!("{what}\n{e}"));
        // At least the calls the peer recovers, in order (callmask may also keep a call that is
        // complete in the text where a peer drops it).
        let got: Vec<(String, Value)> = parsed
            .tool_calls
            .iter()
            .map(|c| (c.function.name.clone(), c.arguments_json().unwrap()))
            .collect();
        let mut it = got.iter();
        for want in calls_of(c) {
            assert!(
                it.any(|g| *g == want),
                "{what}\nmissing {want:?} in {got:?}"
            );
        }
        if g.parse(text).is_err() {
            assert!(
                !parsed.recovered.is_empty(),
                "{what}: nothing reported as recovered"
            );
        }
    }
    for (i, t) in cases(file, "detect_examples").iter().enumerate() {
        let t = t.as_str().unwrap();
        assert_eq!(
            Dialect::detect(Some(t), &vocab).ok(),
            Some(d),
            "{d} detect_examples[{i}]:\n{t}"
        );
    }
}

#[test]
fn every_dialect_passes_its_cases() {
    let mut failures = Vec::new();
    for spec in Dialect::table() {
        let d = spec.name;
        let Some(file) = testkit::dialect_case(d) else {
            failures.push(format!("{d}: no tests/dialect_cases/{d}.json"));
            continue;
        };
        if let Err(e) = std::panic::catch_unwind(|| check_dialect(d, &file)) {
            let m = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(m);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Every case file belongs to a dialect of the table.
#[test]
fn every_case_file_has_a_dialect() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/dialect_cases");
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let d = name.strip_suffix(".json").unwrap_or(&name);
        assert!(
            Dialect::table().iter().any(|s| s.name == d),
            "tests/dialect_cases/{name} has no row in the dialect table"
        );
    }
}

/// The dialect `--dialect auto` picks for each real chat template of llama.cpp's
/// `models/templates` (fetched by `scripts/fetch-data.sh templates`); `None`: none is picked
/// (the template shows no tool-call format, e.g. Gemma 2's).
const REAL_TEMPLATES: &[(&str, Option<&str>)] = &[
    ("Apertus-8B-Instruct.jinja", Some("apertus")),
    ("Apriel-1.6-15b-Thinker-fixed.jinja", Some("apriel")),
    ("Bielik-11B-v3.0-Instruct.jinja", Some("qwen3")),
    ("ByteDance-Seed-OSS.jinja", Some("seed_oss")),
    ("Cohere2MoE.jinja", Some("cohere_command4")),
    (
        "CohereForAI-c4ai-command-r-plus-tool_use.jinja",
        Some("command_r_plus"),
    ),
    (
        "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
        Some("command_r7b"),
    ),
    ("GLM-4.6.jinja", Some("glm45")),
    ("GLM-4.7-Flash.jinja", Some("glm45")),
    ("GigaChat3-10B-A1.8B.jinja", Some("gigachat3")),
    ("GigaChat3.1-10B-A1.8B.jinja", Some("gigachat3")),
    ("HuggingFaceTB-SmolLM3-3B.jinja", None),
    ("Kimi-K2-Instruct.jinja", Some("kimi_k2")),
    ("Kimi-K2-Thinking.jinja", Some("kimi_k2")),
    ("Kimi-K3.jinja", Some("kimi_k3")),
    ("LFM2-8B-A1B.jinja", Some("lfm2")),
    ("LFM2.5-8B-A1B.jinja", Some("lfm25")),
    ("LFM2.5-Instruct.jinja", Some("lfm25")),
    ("MiMo-VL.jinja", Some("hermes")),
    ("MiniMax-M1.jinja", Some("minimax_m1")),
    ("MiniMax-M2.jinja", Some("minimax_m2")),
    ("MiniMax-M3.jinja", None),
    ("Mistral-Small-3.2-24B-Instruct-2506.jinja", Some("mistral")),
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", Some("qwen35")),
    ("NVIDIA-Nemotron-Nano-v2.jinja", Some("nemotron_v2")),
    (
        "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
        Some("hermes"),
    ),
    (
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
        Some("hermes"),
    ),
    ("Qwen-QwQ-32B.jinja", Some("qwen3")),
    ("Qwen-Qwen2.5-7B-Instruct.jinja", Some("hermes")),
    ("Qwen-Qwen3-0.6B.jinja", Some("qwen3")),
    ("Qwen3-Coder.jinja", Some("qwen3_coder")),
    ("Qwen3.5-4B.jinja", Some("qwen35")),
    ("Reka-Edge.jinja", Some("qwen3")),
    ("Spark2.5.jinja", Some("glm45")),
    ("StepFun3.5-Flash.jinja", Some("step3p5")),
    (
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
        Some("deepseek_r1"),
    ),
    (
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
        Some("deepseek_r1"),
    ),
    ("deepseek-ai-DeepSeek-V3.1.jinja", Some("deepseek_v31")),
    ("deepseek-ai-DeepSeek-V3.2.jinja", Some("deepseek_v32")),
    (
        "deepseek-ai-DeepSeek-V4-Flash-0731.jinja",
        Some("deepseek_v4"),
    ),
    ("deepseek-ai-DeepSeek-V4.jinja", Some("deepseek_v4")),
    (
        "fireworks-ai-llama-3-firefunction-v2.jinja",
        Some("functools"),
    ),
    ("google-gemma-2-2b-it.jinja", None),
    ("google-gemma-4-31B-it-interleaved.jinja", Some("gemma4")),
    ("google-gemma-4-31B-it.jinja", Some("gemma4")),
    ("ibm-granite-granite-3.3-2B-Instruct.jinja", Some("granite")),
    ("ibm-granite-granite-4.0.jinja", Some("granite4")),
    ("ibm-granite-granite-4.1.jinja", Some("granite4")),
    ("inclusionai-ling-3.0-flash.jinja", Some("ling3")),
    ("llama-cpp-deepseek-r1.jinja", Some("deepseek_r1")),
    ("llama-cpp-rwkv-world.jinja", None),
    (
        "meetkai-functionary-medium-v3.1.jinja",
        Some("functionary_v31"),
    ),
    (
        "meetkai-functionary-medium-v3.2.jinja",
        Some("functionary_v32"),
    ),
    (
        "meta-llama-Llama-3.1-8B-Instruct.jinja",
        Some("llama31_json"),
    ),
    (
        "meta-llama-Llama-3.2-3B-Instruct.jinja",
        Some("llama31_json"),
    ),
    (
        "meta-llama-Llama-3.3-70B-Instruct.jinja",
        Some("llama31_json"),
    ),
    ("microsoft-Phi-3.5-mini-instruct.jinja", None),
    (
        "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
        Some("ministral"),
    ),
    (
        "mistralai-Mistral-Nemo-Instruct-2407.jinja",
        Some("mistral"),
    ),
    ("moonshotai-Kimi-K2.jinja", Some("kimi_k2")),
    ("muse-glimmer.jinja", None),
    ("openai-gpt-oss-120b.jinja", Some("gpt_oss")),
    ("openbmb-MiniCPM5-1B.jinja", None),
    ("poolside-Laguna-S-2.1.jinja", Some("poolside_v1")),
    ("poolside-Laguna-XS-2.1.jinja", Some("poolside_v1")),
    ("poolside-Laguna-XS.2.jinja", Some("poolside_v1")),
    ("tencent-Hy3.jinja", Some("hy_v3")),
    ("unsloth-Apriel-1.5.jinja", Some("apriel")),
    (
        "unsloth-mistral-Devstral-Small-2507.jinja",
        Some("ministral"),
    ),
    ("upstage-Solar-Open-100B.jinja", Some("solar_open")),
];

/// llama.cpp's real chat templates (fetched by `scripts/fetch-data.sh templates`), by file
/// name, with their text, in the order of their names.
pub(crate) fn real_chat_templates() -> Vec<(String, String)> {
    let dir = testkit::require(
        testkit::cache_dir().join("chat-templates/llama.cpp-0.3.36"),
        "llama.cpp's chat templates",
        "templates",
    );
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".jinja"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let t = std::fs::read_to_string(dir.join(&f)).unwrap();
            (f, t)
        })
        .collect()
}

#[test]
fn real_chat_templates_are_detected() {
    let vocab = testkit::llama_vocab();
    let mut got = Vec::new();
    for (f, t) in real_chat_templates() {
        got.push((f, Dialect::detect(Some(&t), &vocab).ok()));
    }
    let listing: String = got
        .iter()
        .map(|(f, d)| format!("    ({f:?}, {d:?}),\n"))
        .collect();
    let want: Vec<(String, Option<&str>)> = REAL_TEMPLATES
        .iter()
        .map(|(f, d)| (f.to_string(), *d))
        .collect();
    assert_eq!(got, want, "detected:\n{listing}");
}

/// The recovering parse never completes what the model did not write: a truncated argument is
/// no call, a complete call before it is kept, and what was assumed or skipped is listed.
#[test]
fn recovering_never_invents_a_call() {
    let g = Dialect::by_name("hermes")
        .unwrap()
        .compile(&tools(), &DialectOptions::default())
        .unwrap();
    let truncated =
        "<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Par";
    match g.parse_recovering(truncated) {
        Ok(p) => assert!(p.tool_calls.is_empty(), "{p:?}"),
        Err(e) => assert!(matches!(e, callmask::Error::Parse(_)), "{e}"),
    }
    let good = "<tool_call>\n{\"name\": \"get_time_utc\", \"arguments\": {}}\n</tool_call>\n";
    let p = g.parse_recovering(&format!("{good}{truncated}")).unwrap();
    assert_eq!(p.tool_calls.len(), 1, "{p:?}");
    assert_eq!(p.tool_calls[0].function.name, "get_time_utc");
    assert!(!p.recovered.is_empty());
    // A missing closing marker at the end: assumed and reported.
    let open =
        "<tool_call>\n{\"name\": \"get_stock_price\", \"arguments\": {\"ticker\": \"NVDA\"}}";
    let p = g.parse_recovering(open).unwrap();
    assert_eq!(p.tool_calls.len(), 1, "{p:?}");
    assert!(g.parse(open).is_err() || p.recovered.is_empty());
    // An invalid argument value is not repaired.
    let bad = "<tool_call>\n{\"name\": \"get_stock_price\", \"arguments\": {\"ticker\": \"nvda\"}}\n</tool_call>";
    let p = g.parse_recovering(bad);
    assert!(p.map(|p| p.tool_calls.is_empty()).unwrap_or(true));
}

/// In a format whose calls must open the output, the recovering parse finds them after and
/// between texts (as the peers' parsers do), returns the text around them as text and says
/// so; a strict parse reads the same output as text only. The search also ends on a dialect
/// whose call list is a recursive rule.
#[test]
fn recovering_finds_calls_after_text() {
    let g = Dialect::by_name("pythonic")
        .unwrap()
        .compile(&tools(), &DialectOptions::default())
        .unwrap();
    let text = "Sure: [get_time_utc()] and then [get_stock_price(ticker='NVDA')] done";
    assert!(g.parse(text).unwrap().tool_calls.is_empty());
    let p = g.parse_recovering(text).unwrap();
    let names: Vec<&str> = p
        .tool_calls
        .iter()
        .map(|c| c.function.name.as_str())
        .collect();
    assert_eq!(names, ["get_time_utc", "get_stock_price"], "{p:?}");
    assert_eq!(p.text, "Sure: and then done", "{p:?}");
    let around = p
        .recovered
        .iter()
        .filter(|r| matches!(r, callmask::parse::Recovery::TextAround { .. }))
        .count();
    assert_eq!(around, 3, "{:?}", p.recovered);
    // A call of an unknown function is not found.
    let p = g.parse_recovering("Sure: [nope()]").unwrap();
    assert!(p.tool_calls.is_empty(), "{p:?}");
    // A recursive rule holding the calls.
    let d = Dialect::parse(
        "rec",
        "root ::= \"[\" list \"]\" | @text_matching(\"(?:[^\\\\[](?s:.)*)?\")\nlist ::= @python_call (\", \" list)?\n",
    )
    .unwrap();
    let g = d.compile(&tools(), &DialectOptions::default()).unwrap();
    let p = g
        .parse_recovering("ok [get_time_utc(), get_stock_price(ticker='NVDA')]")
        .unwrap();
    assert_eq!(p.tool_calls.len(), 2, "{p:?}");
}

/// `@json_call(args="either")`: the arguments as an object or as a JSON string holding one,
/// each checked against the schema.
#[test]
fn json_call_either_takes_an_object_or_a_string() {
    let d = Dialect::parse("e", "root ::= \"<c>\" @json_call(args=\"either\")\n").unwrap();
    let g = d.compile(&tools(), &DialectOptions::default()).unwrap();
    for text in [
        r#"<c>{"name": "get_stock_price", "arguments": {"ticker": "NVDA"}}"#,
        r#"<c>{"name": "get_stock_price", "arguments": "{\"ticker\": \"NVDA\"}"}"#,
    ] {
        let p = g.parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            p.tool_calls[0].arguments_json().unwrap(),
            json!({"ticker": "NVDA"}),
            "{text}"
        );
    }
    let bad = r#"<c>{"name": "get_stock_price", "arguments": "{\"ticker\": \"nvda\"}"}"#;
    assert!(g.parse(bad).is_err(), "{bad}");
}

/// The recovering parse reads arguments written as a JSON string only where the object the
/// string holds is one the strict grammar accepts: never a call against the schema.
#[test]
fn json_string_arguments_are_read_only_when_valid() {
    let g = Dialect::by_name("hermes")
        .unwrap()
        .compile(&tools(), &DialectOptions::default())
        .unwrap();
    let call = |args: &str| {
        format!(
            "<tool_call>\n{{\"name\": \"get_current_weather\", \"arguments\": {}}}\n</tool_call>",
            serde_json::to_string(args).unwrap()
        )
    };
    let ok = g
        .parse_recovering(&call(r#"{"location": "Oslo"}"#))
        .unwrap();
    assert_eq!(ok.tool_calls.len(), 1, "{ok:?}");
    assert_eq!(
        ok.tool_calls[0].arguments_json().unwrap(),
        json!({"location": "Oslo"})
    );
    assert!(
        matches!(ok.recovered[0], callmask::parse::Recovery::Decoded { .. }),
        "{ok:?}"
    );
    // Against the schema (unknown key, enum), not an object, not JSON: no call.
    for args in [
        r#"{"location": "Oslo", "extra": 1}"#,
        r#"{"location": "Oslo", "unit": "kelvin"}"#,
        r#"["Oslo"]"#,
        "Oslo",
    ] {
        let p = g.parse_recovering(&call(args));
        assert!(
            p.as_ref().map_or(true, |p| p.tool_calls.is_empty()),
            "{args}: {p:?}"
        );
    }
}
