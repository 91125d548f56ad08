//! What a model's own chat template writes is what its dialect reads: for each real chat
//! template of llama.cpp's `models/templates` (fetched by `scripts/fetch-data.sh templates`)
//! that `--dialect auto` maps to a dialect, an assistant turn with one call and one with two
//! calls are rendered by the template (as transformers renders it, through
//! [`callmask::prompt::render_chat_template`]); the rendered turn, less the end-of-turn marks the
//! template writes after it, must parse strictly with that dialect to the same calls.
//!
//! The templates that do not round-trip are listed with the reason in [`NOT_ROUND_TRIPPING`];
//! a template that stops round-tripping (or starts to) fails the test, which prints what it saw.

use callmask_testkit as testkit;

use callmask::prompt::{rendered_turn, PromptOptions};
use callmask::{Dialect, DialectOptions, FunctionCall, Message, ToolCall, Tools};
use serde_json::{json, Value};

/// The templates whose calls do not read back, and why; every other template with a dialect
/// round-trips.
const NOT_ROUND_TRIPPING: &[(&str, &str)] = &[
    (
        "CohereForAI-c4ai-command-r-plus-tool_use.jinja",
        "the template writes its tool-use instructions (a system turn) after the last turn, so the turn is not followed by end marks only",
    ),
    (
        "Kimi-K2-Instruct.jinja",
        "render: list.append, which minijinja lacks",
    ),
    (
        "Kimi-K2-Thinking.jinja",
        "render: list.append, which minijinja lacks",
    ),
    (
        "LFM2-8B-A1B.jinja",
        "the template renders the turn's content only (LFM2 keeps calls in the content)",
    ),
    (
        "LFM2.5-Instruct.jinja",
        "the template renders the turn's content only (LFM2 keeps calls in the content)",
    ),
    (
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
        "the template writes <｜tool▁calls▁end｜> only after a second call: one call is left open",
    ),
    (
        "ibm-granite-granite-3.3-2B-Instruct.jinja",
        "the template renders the turn's content only, not its tool_calls",
    ),
];

fn tools() -> Tools {
    Tools::from_json_str(
        &json!([
            {"type": "function", "function": {"name": "get_weather",
                "description": "The weather forecast for a city.",
                "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city's name."},
                    "days": {"type": "integer", "description": "How many days ahead."}},
                "required": ["city"]}}},
            {"type": "function", "function": {"name": "get_time",
                "description": "The current time.",
                "parameters": {"type": "object", "properties": {}}}}
        ])
        .to_string(),
    )
    .unwrap()
}

/// A call; `long_ids`: a 10-character lowercase id (Solar Open's), else 9 characters
/// (Mistral's templates refuse any other).
fn call(i: usize, name: &str, args: Value, long_ids: bool) -> ToolCall {
    ToolCall {
        id: if long_ids {
            format!("call{i:06}")
        } else {
            format!("call{i:05}")
        },
        kind: "function".into(),
        function: FunctionCall {
            name: name.into(),
            arguments: args.to_string(),
        },
    }
}

/// The rendering with the assistant turn and where it leaves the rendering that stops at the
/// generation prompt (not inside a marker). The turn's content is `""` with `empty_content`,
/// else `None` (templates differ in which they take for a turn with calls). `Ok(None)`: the template itself refuses the calls
/// (`raise_exception`, e.g. Llama 3.1's "only supports single tool-calls at once").
fn rendered(
    template: &str,
    calls: &[ToolCall],
    empty_content: bool,
) -> Result<Option<(String, usize)>, String> {
    let user = Message::new("user", "What is the weather in Paris?");
    let mut turn = Message::new("assistant", "");
    if !empty_content {
        turn.content = None;
    }
    turn.tool_calls = calls.to_vec();
    let prompt = PromptOptions::default()
        .bos_token("<s>".into())
        .eos_token("</s>".into());
    rendered_turn(template, &[user, turn], &tools(), &prompt).map_err(|e| format!("render: {e}"))
}

/// Whether `tail` is only end-of-turn marks: whitespace, `<...>`-style tokens, MiniMax's
/// `[e~[`, and the role of a next turn that the template opens (Firefunction v2's
/// `<|start_header_id|>assistant<|end_header_id|>`).
fn only_end_marks(tail: &str) -> bool {
    let mut rest = tail.trim_start();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("[e~[") {
            rest = r.trim_start();
        } else if let Some(r) = rest
            .strip_prefix("assistant")
            .filter(|r| r.starts_with('<'))
        {
            rest = r;
        } else if let Some(r) = rest.strip_prefix('<') {
            match r.find('>') {
                Some(k) => rest = r[k + 1..].trim_start(),
                None => return false,
            }
        } else {
            return false;
        }
    }
    true
}

/// Whether some stretch of `with` from a marker at or before `common` (the template's turn,
/// with as much of the generation prompt's opening as the dialect expects the model to see:
/// Kimi K3's `<|open|>think<|sep|>`) up to end-of-turn marks parses to `want`.
fn reads_back(g: &callmask::Grammar, with: &str, common: usize, want: &[(String, Value)]) -> bool {
    let mut from = common.saturating_sub(64);
    while !with.is_char_boundary(from) {
        from -= 1;
    }
    let starts = std::iter::once(common).chain(
        with[from..common]
            .char_indices()
            .filter(|(_, c)| *c == '<')
            .map(|(k, _)| from + k)
            .rev(),
    );
    let ends: Vec<usize> = (common..=with.len())
        .rev()
        .filter(|&k| with.is_char_boundary(k) && only_end_marks(&with[k..]))
        .collect();
    starts.filter(|&s| with.is_char_boundary(s)).any(|s| {
        ends.iter().filter(|&&e| e >= s).any(|&e| {
            g.parse(&with[s..e]).is_ok_and(|p| {
                p.tool_calls
                    .iter()
                    .map(|c| (c.function.name.clone(), c.arguments_json().unwrap()))
                    .collect::<Vec<_>>()
                    == want
            })
        })
    })
}

/// The outcome for one template and dialect.
fn round_trip(template: &str, dialect: &str) -> Result<(), String> {
    let g = Dialect::by_name(dialect)
        .unwrap()
        .compile(&tools(), &DialectOptions::default())
        .map_err(|e| format!("compile: {e}"))?;
    for two in [false, true] {
        let mut errors: Vec<String> = Vec::new();
        let mut read = false;
        for (empty_content, long_ids) in
            [(false, false), (true, false), (false, true), (true, true)]
        {
            let calls = if two {
                vec![
                    call(0, "get_weather", json!({"city": "Paris"}), long_ids),
                    call(1, "get_time", json!({}), long_ids),
                ]
            } else {
                vec![call(
                    0,
                    "get_weather",
                    json!({"city": "Paris", "days": 2}),
                    long_ids,
                )]
            };
            let mut want: Vec<(String, Value)> = calls
                .iter()
                .map(|c| (c.function.name.clone(), c.arguments_json().unwrap()))
                .collect();
            let rendering = rendered(template, &calls, empty_content);
            if let Ok(Some((with, common))) = &rendering {
                // Some templates write one call per turn (`tool_calls[0]`, gpt-oss's and
                // GigaChat 3's): the turn holds the calls it renders.
                if two && !with[*common..].contains("get_time") {
                    want.truncate(1);
                }
            }
            match rendering {
                Ok(None) => {
                    read = true; // the template refuses these calls: nothing to read
                    break;
                }
                Ok(Some((with, common))) => {
                    if reads_back(&g, &with, common, &want) {
                        read = true;
                        break;
                    }
                    let turn = &with[common..];
                    let e = match g.parse(turn.trim_end()) {
                        Err(e) => e.to_string(),
                        Ok(p) => format!("parsed to {} call(s)", p.tool_calls.len()),
                    };
                    errors.push(format!("{} call(s): {turn:?}: {e}", calls.len()));
                }
                Err(e) => errors.push(e),
            }
        }
        if !read {
            errors.dedup();
            return Err(errors.join(" | "));
        }
    }
    Ok(())
}

#[test]
fn real_templates_round_trip_their_calls() {
    let vocab = testkit::llama_vocab();
    let mut got: Vec<(String, String)> = Vec::new();
    for (f, t) in super::dialect_cases::real_chat_templates() {
        let Ok(d) = Dialect::detect(Some(&t), &vocab) else {
            continue;
        };
        let outcome = match round_trip(&t, d) {
            Ok(()) => "ok".to_owned(),
            Err(e) => e,
        };
        got.push((f, format!("{d}: {outcome}")));
    }
    let listing: String = got.iter().map(|(f, o)| format!("{f}\t{o}\n")).collect();
    println!("{listing}");
    let ok = got.iter().filter(|(_, o)| o.ends_with(": ok")).count();
    println!("{ok}/{} round-trip", got.len());
    let failing: Vec<&str> = got
        .iter()
        .filter(|(_, o)| !o.ends_with(": ok"))
        .map(|(f, _)| f.as_str())
        .collect();
    let listed: Vec<&str> = NOT_ROUND_TRIPPING.iter().map(|(f, _)| *f).collect();
    assert_eq!(failing, listed, "round trips:\n{listing}");
    assert!(ok >= 56, "{ok} templates round-trip:\n{listing}");
}
