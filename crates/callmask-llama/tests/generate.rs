//! End to end on a real model (SmolLM2-135M-Instruct Q4_1, or Gemma 3 270M Q4_K_M with
//! `CALLMASK_E2E_MODEL=gemma`: `testkit::e2e_gguf`) on the CPU through llama.cpp, constrained by
//! each seed dialect, for the prompts of two tool sets (weather/stocks/user lookup/time, and a
//! set with nested objects, enums, arrays, patterns and formats):
//! `CALLMASK_E2E_PROMPTS_PER_SET` of each set, default 2 (CI), at most all 10
//! (`scripts/llama-e2e.sh`: 20 prompts). Every constrained output must parse and every call's
//! arguments validate with the `jsonschema` crate. Also: a batch of sequences decoded together
//! gives what decoding them one by one gives.

use callmask_testkit as testkit;
use callmask_testkit::e2e::{options, render, tools, validate, DIALECTS, PROMPTS};

use std::sync::OnceLock;

use callmask::{Dialect, Grammar, TokenAutomaton, Tools};
use callmask_llama::{Engine, Generation, SamplingParams};

fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| {
        let (path, name) = testkit::e2e_gguf();
        Engine::load(path, None).unwrap_or_else(|e| panic!("loading {name}: {e}"))
    })
}

/// How many prompts of each tool set run ([`PROMPTS`] has 10 per set).
fn prompts_per_set() -> usize {
    std::env::var("CALLMASK_E2E_PROMPTS_PER_SET")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2)
        .clamp(1, 10)
}

/// Generates the first [`prompts_per_set`] prompts of each tool set in `dialect` (one batch per
/// tool set).
fn run(
    dialect: &str,
    constrained: bool,
    max_tokens: usize,
) -> Vec<(String, Generation, Tools, Grammar)> {
    let e = engine();
    let mut out = Vec::new();
    for file in ["weather.json", "mixed.json"] {
        let tools = tools(file);
        let grammar = Dialect::by_name(dialect)
            .unwrap()
            .compile(&tools, &options())
            .unwrap();
        let auto = TokenAutomaton::new(&grammar, e.vocab().clone()).unwrap();
        let prompts: Vec<String> = PROMPTS
            .iter()
            .filter(|(f, _)| *f == file)
            .take(prompts_per_set())
            .map(|(_, p)| render(dialect, &tools, p, &e.bos_text()))
            .collect();
        let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
        let gens = e
            .generate_batch(
                &refs,
                constrained.then_some(&auto),
                &[SamplingParams::default()],
                max_tokens,
                &mut |_, _| {},
            )
            .unwrap();
        for (p, g) in prompts.into_iter().zip(gens) {
            out.push((p, g, tools.clone(), grammar.clone()));
        }
    }
    out
}

#[test]
fn constrained_outputs_all_parse_and_validate() {
    for d in DIALECTS {
        let results = run(d, true, 320);
        let n = 2 * prompts_per_set();
        assert_eq!(results.len(), n);
        let mut calls = 0;
        for (i, (_, g, tools, grammar)) in results.iter().enumerate() {
            assert!(
                g.finished,
                "{d} prompt {i}: unfinished after {} tokens: {:?}",
                g.tokens.len(),
                g.text
            );
            match validate(tools, grammar, &g.text) {
                Ok(n) => calls += n,
                Err(e) => panic!("{d} prompt {i}: {e}\n{}", g.text),
            }
        }
        // tool_choice required, one call each.
        assert_eq!(calls, n, "{d}");
        eprintln!("{d}: {n}/{n} constrained outputs parse and validate ({calls} calls)");
    }
}

#[test]
fn batch_equals_one_by_one() {
    let e = engine();
    let tools = tools("weather.json");
    let grammar = Dialect::by_name("pythonic")
        .unwrap()
        .compile(&tools, &options())
        .unwrap();
    let auto = TokenAutomaton::new(&grammar, e.vocab().clone()).unwrap();
    let prompts: Vec<String> = PROMPTS[..3]
        .iter()
        .map(|(_, p)| render("pythonic", &tools, p, &e.bos_text()))
        .collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let params: Vec<SamplingParams> = (0..3)
        .map(|i| SamplingParams::default().temperature(0.0).seed(11 + i))
        .collect();
    let batch = e
        .generate_batch(&refs, Some(&auto), &params, 60, &mut |_, _| {})
        .unwrap();
    for (i, p) in refs.iter().enumerate() {
        let one = e
            .generate(p, Some(&auto), &params[i], 60, &mut |_| {})
            .unwrap();
        let b = &batch[i];
        // llama.cpp's logits for a sequence decoded alone and in a batch may differ in the last
        // bits, which can flip a greedy choice between two near-equal tokens. What callmask must
        // guarantee: up to the first difference the runs agree, and there both tokens are ones
        // the matcher allows (the difference is the model's, not the mask's).
        let k = one
            .tokens
            .iter()
            .zip(&b.tokens)
            .take_while(|(x, y)| x == y)
            .count();
        if k < one.tokens.len() || k < b.tokens.len() {
            eprintln!(
                "sequence {i}: batch and alone differ at token {k}: {:?} vs {:?}",
                one.text, b.text
            );
            let mut m = auto.matcher();
            m.set_token_budget(Some(60)).unwrap();
            for &t in &one.tokens[..k] {
                m.accept(t).unwrap();
            }
            for t in [one.tokens.get(k), b.tokens.get(k)].into_iter().flatten() {
                assert!(m.is_allowed(*t), "sequence {i}: token {t} at {k}");
            }
        }
        for g in [&one, b] {
            assert!(g.finished, "sequence {i}: {:?}", g.text);
            validate(&tools, &grammar, &g.text)
                .unwrap_or_else(|e| panic!("sequence {i}: {e:?} {:?}", g.text));
        }
    }
}

#[test]
fn sampler_errors_and_plain_apply() {
    use callmask::TokenMask;
    use callmask_llama::ConstrainedSampler;
    let e = engine();
    let tools = tools("weather.json");
    let grammar = Dialect::by_name("pythonic")
        .unwrap()
        .compile(&tools, &options())
        .unwrap();
    let auto = TokenAutomaton::new(&grammar, e.vocab().clone()).unwrap();
    let n = e.vocab().len();
    let mut s =
        ConstrainedSampler::new(Some(auto.matcher()), n, &SamplingParams::default()).unwrap();
    // Wrong logits length, and a token the matcher refuses: typed errors, no panic.
    assert!(s.sample_logits(&[0.0; 3]).is_err());
    let hello = e.vocab().tokenize("Hello").unwrap()[0];
    let bracket = e.vocab().tokenize("[").unwrap()[0];
    // Logits that favour a forbidden token: the mask picks an allowed one.
    let mut logits = vec![0.0f32; n];
    let space_the = e.vocab().tokenize(" the").unwrap()[0];
    logits[space_the as usize] = 50.0; // a reply may not start with whitespace
    logits[bracket as usize] = 10.0;
    let t = s.sample_logits(&logits).unwrap();
    assert_eq!(t, bracket);
    assert_eq!(s.stats().masked, 1);
    s.accept(t).unwrap();
    assert!(s.accept(hello).is_err(), "\"Hello\" cannot follow `[`");
    s.reset();
    assert_eq!(s.stats().fast + s.stats().masked, 0);
    assert!(s.accept(bracket).is_ok());
    // The plain `apply` for other engines.
    let mut m = auto.matcher();
    let mut scratch = TokenMask::new(n);
    let mut row = vec![1.0f32; n];
    m.apply(&mut row, &mut scratch);
    assert!(row[bracket as usize].is_finite());
    assert!(row[space_the as usize] == f32::NEG_INFINITY);
}

/// Several samplers over one shared automaton, masks computed in parallel with rayon, draw the
/// same tokens (same seeds, same logits) as the same samplers run one after the other.
#[test]
fn parallel_sampling_equals_serial() {
    use callmask_llama::ConstrainedSampler;
    use rayon::prelude::*;
    let e = engine();
    let tools = tools("mixed.json");
    let grammar = Dialect::by_name("functools")
        .unwrap()
        .compile(&tools, &options())
        .unwrap();
    let auto = TokenAutomaton::new(&grammar, e.vocab().clone()).unwrap();
    let n = e.vocab().len();
    // Deterministic pseudo-random logits, one row per step.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let rows: Vec<Vec<f32>> = (0..40)
        .map(|_| {
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 1000) as f32 / 100.0
                })
                .collect()
        })
        .collect();
    let run = |parallel: bool| -> Vec<Vec<u32>> {
        let params: Vec<SamplingParams> = (0..4)
            .map(|i| SamplingParams::default().temperature(0.8).seed(100 + i))
            .collect();
        let mut samplers: Vec<ConstrainedSampler> = params
            .iter()
            .map(|p| ConstrainedSampler::new(Some(auto.matcher()), n, p).unwrap())
            .collect();
        let mut out = vec![Vec::new(); 4];
        for row in &rows {
            let step = |(s, o): (&mut ConstrainedSampler, &mut Vec<u32>)| {
                if s.is_finished() {
                    return;
                }
                let t = s.sample_logits(row).unwrap();
                if e.vocab().is_eos(t) {
                    return;
                }
                s.accept(t).unwrap();
                o.push(t);
            };
            if parallel {
                samplers
                    .par_iter_mut()
                    .zip(out.par_iter_mut())
                    .for_each(step);
            } else {
                samplers.iter_mut().zip(out.iter_mut()).for_each(step);
            }
        }
        out
    };
    let (a, b) = (run(true), run(false));
    assert_eq!(a, b);
    assert!(a.iter().all(|o| !o.is_empty()));
}

/// A character the vocabulary spells only over several tokens (a Gothic letter: byte tokens)
/// comes out whole in the generation's text: the text is decoded from all the bytes, not token
/// by token (which turned each piece into U+FFFD and made a constrained output unparseable).
#[test]
fn characters_split_over_tokens_are_whole() {
    let e = engine();
    let text = "\u{10348}\u{10348} and 다용도실";
    // A dialect whose whole output is that text, raw (no JSON escapes to choose instead).
    let dialect = Dialect::parse("raw", &format!("root ::= \"{text}\"")).unwrap();
    let options = callmask::DialectOptions::default().tool_choice(callmask::ToolChoice::Auto);
    let grammar = dialect.compile(&Tools::default(), &options).unwrap();
    let auto = TokenAutomaton::new(&grammar, e.vocab().clone()).unwrap();
    let mut streamed = Vec::new();
    let g = e
        .generate(
            "Write a string:",
            Some(&auto),
            &SamplingParams::default(),
            64,
            &mut |b| streamed.extend_from_slice(b),
        )
        .unwrap();
    assert_eq!(g.text, text);
    assert_eq!(String::from_utf8(streamed).unwrap(), g.text);
    let split = g
        .tokens
        .iter()
        .filter(|&&t| std::str::from_utf8(e.vocab().token_bytes(t).unwrap_or_default()).is_err())
        .count();
    assert!(
        split > 0,
        "the test needs a character spelled over tokens: {:?} {:?}",
        g.text,
        g.tokens
    );
}
