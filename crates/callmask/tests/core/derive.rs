//! Dialects derived from real chat templates ([`callmask::derive_dialect`]), checked against
//! what is known: for each template of llama.cpp's `models/templates` the derivation either
//! gives a file or refuses with a reason (the outcome of every template is listed in
//! [`DERIVED`] and held to the truth); where the template is detected as a built-in dialect,
//! the derived grammar reads the outputs of that dialect's case file (the documented shapes
//! and the peers' test outputs) to the same calls or refuses them (narrower), and never
//! accepts an output the case file rejects; and the fuzzer's outputs of every derived dialect
//! are complete and schema-valid.

use callmask_testkit as testkit;

use callmask::fuzz::{Checker, FuzzOptions, Fuzzer, Outcome};
use callmask::{derive_dialect, Dialect, DialectOptions, TokenAutomaton, Tools};
use serde_json::Value;

/// The templates the derivation refuses, each with the start of its reason; every other
/// template derives.
const REFUSED: &[(&str, &str)] = &[
    ("Apertus-8B-Instruct.jinja", "no layout callmask knows"),
    (
        "HuggingFaceTB-SmolLM3-3B.jinja",
        "the template refuses an assistant turn with one call",
    ),
    ("Kimi-K2-Instruct.jinja", "the template does not render"),
    ("Kimi-K2-Thinking.jinja", "the template does not render"),
    ("Kimi-K3.jinja", "the template writes two calls unlike one"),
    (
        "LFM2-8B-A1B.jinja",
        "the template refuses an assistant turn with one call",
    ),
    (
        "LFM2.5-Instruct.jinja",
        "the template refuses an assistant turn with one call",
    ),
    ("MiniMax-M3.jinja", "no layout callmask knows"),
    (
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
        "the template writes two calls unlike one",
    ),
    (
        "google-gemma-2-2b-it.jinja",
        "the template refuses an assistant turn with one call",
    ),
    (
        "ibm-granite-granite-3.3-2B-Instruct.jinja",
        "the template does not render",
    ),
    (
        "llama-cpp-rwkv-world.jinja",
        "the template refuses an assistant turn with one call",
    ),
    (
        "meetkai-functionary-medium-v3.2.jinja",
        "the calls open with the function's name",
    ),
    (
        "microsoft-Phi-3.5-mini-instruct.jinja",
        "the template does not render",
    ),
    (
        "muse-glimmer.jinja",
        "the template writes two calls unlike one",
    ),
];

fn case_file(dialect: &str) -> Option<Value> {
    let path = format!(
        "{}/tests/dialect_cases/{dialect}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

fn tools_for(file: &Value) -> Tools {
    let mut list: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/tools/mixed.json"
        ))
        .unwrap(),
    )
    .unwrap();
    if let Some(extra) = file.get("extra_tools").and_then(Value::as_array) {
        list.extend(extra.iter().cloned());
    }
    Tools::from_json_str(&Value::Array(list).to_string()).unwrap()
}

fn calls_of(parsed: &callmask::Parsed) -> Vec<(String, Value)> {
    parsed
        .tool_calls
        .iter()
        .map(|c| (c.function.name.clone(), c.arguments_json().unwrap()))
        .collect()
}

fn want_calls(case: &Value) -> Vec<(String, Value)> {
    case["calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap().to_owned(),
                        c["arguments"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// How a derived grammar reads one built-in dialect's case file.
#[derive(Default)]
struct Reading {
    accepted: usize,
    outputs: usize,
    /// Rejected outputs the derived grammar reads as calls that fail the tools' schemas.
    rejects_taken: Vec<String>,
    /// Rejected outputs it reads as valid calls (a layout the family's parsers refuse).
    format_taken: Vec<String>,
    unread: Vec<String>,
}

fn read_cases(derived: &callmask::DerivedDialect, file: &Value) -> Reading {
    let tools = tools_for(file);
    let g = derived
        .dialect()
        .unwrap()
        .compile(&tools, &DialectOptions::default())
        .unwrap();
    let checker = Checker::for_tools(&tools).unwrap();
    let mut r = Reading::default();
    for case in file["accept"].as_array().unwrap() {
        r.outputs += 1;
        let text = case["text"].as_str().unwrap();
        match g.parse(text) {
            Ok(p) if calls_of(&p) == want_calls(case) => r.accepted += 1,
            Ok(_) => r.unread.push(format!("{text:?}: other calls")),
            Err(e) => r.unread.push(format!("{text:?}: {e}")),
        }
    }
    for case in file["reject"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        // Read as text is no harm; read as calls, they must be valid for the tools.
        if g.parse(text).is_ok_and(|p| !p.tool_calls.is_empty()) {
            match checker.check(&g, text) {
                Ok(_) => r.format_taken.push(format!("{text:?} ({})", case["why"])),
                Err(e) => r
                    .rejects_taken
                    .push(format!("{text:?} ({}): {e}", case["why"])),
            }
        }
    }
    r
}

#[test]
fn derived_dialects_against_the_builtin_ones() {
    let vocab = testkit::llama_vocab();
    let mut listing = String::new();
    let mut refused: Vec<(String, String)> = Vec::new();
    let (mut with_builtin, mut all_read, mut outputs, mut accepted) = (0, 0, 0, 0);
    let mut rejects_taken = Vec::new();
    let mut derived_count = 0;
    for (f, t) in super::dialect_cases::real_chat_templates() {
        let builtin = Dialect::detect(Some(&t), &vocab).ok();
        let derived = match derive_dialect(&t, None) {
            Ok(d) => d,
            Err(e) => {
                let why = e.to_string();
                listing.push_str(&format!(
                    "{f}\trefused: {}\n",
                    why.chars().take(160).collect::<String>()
                ));
                refused.push((f, why));
                continue;
            }
        };
        derived_count += 1;
        let Some((b, file)) = builtin.and_then(|b| case_file(b).map(|c| (b, c))) else {
            listing.push_str(&format!(
                "{f}\tderived ({}); no built-in dialect\n",
                derived.summary()
            ));
            continue;
        };
        with_builtin += 1;
        let r = read_cases(&derived, &file);
        outputs += r.outputs;
        accepted += r.accepted;
        if r.accepted == r.outputs {
            all_read += 1;
        }
        let verdict = if r.accepted == r.outputs {
            "same"
        } else {
            "narrower"
        };
        listing.push_str(&format!(
            "{f}\t{b}: {verdict}, reads {}/{} of its outputs\n",
            r.accepted, r.outputs
        ));
        for u in &r.format_taken {
            listing.push_str(&format!(
                "    reads a layout the family's parsers refuse: {}\n",
                u.chars().take(300).collect::<String>()
            ));
        }
        for u in &r.unread {
            listing.push_str(&format!(
                "    unread: {}\n",
                u.chars().take(300).collect::<String>()
            ));
        }
        rejects_taken.extend(
            r.rejects_taken
                .into_iter()
                .map(|x| format!("{f} ({b}): {x}")),
        );
        // The fuzzer's outputs of the derived grammar are complete and valid.
        let tools = testkit::mixed_tools();
        let g = derived
            .dialect()
            .unwrap()
            .compile(&tools, &DialectOptions::default())
            .unwrap();
        let a = TokenAutomaton::new(&g, testkit::family_vocab(b)).unwrap();
        let fuzzer = Fuzzer::new(&a, FuzzOptions::default().seed(5)).unwrap();
        let checker = Checker::for_tools(&tools).unwrap();
        fuzzer.run(
            &checker,
            40,
            |_| (),
            |s, ()| {
                assert_eq!(
                    s.outcome,
                    Outcome::Valid,
                    "{f}: derived output {:?}\n{}",
                    String::from_utf8_lossy(&s.text),
                    derived.text()
                );
                true
            },
        );
    }
    println!("{listing}");
    println!(
        "{derived_count} templates derive; of the {with_builtin} with a built-in dialect, {all_read} read \
         every output of its case file; {accepted}/{outputs} outputs read"
    );
    let got: Vec<(&str, &str)> = refused
        .iter()
        .map(|(f, w)| (f.as_str(), w.as_str()))
        .collect();
    let matches = got.len() == REFUSED.len()
        && got
            .iter()
            .zip(REFUSED)
            .all(|((f, w), (rf, rw))| f == rf && w.contains(rw));
    assert!(matches, "refused templates differ:\n{listing}");
    assert!(
        rejects_taken.is_empty(),
        "derived grammars accept rejected outputs:\n{}",
        rejects_taken.join("\n")
    );
}
