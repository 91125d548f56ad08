//! Token budgets ([`Matcher::set_token_budget`]): random walks under random budgets always end,
//! within the budget, with an output that validates against the schemas (checked by the
//! `jsonschema` crate, not by callmask), on vocabularies with every byte token (Llama 3.1, Qwen3,
//! Gemma 3) and without some (SmolLM2's missing bytes, random subsets): a byte without a token of
//! its own is never counted as one.
//!
//! `CALLMASK_BUDGET_FUZZ_SCALE` sets the fuzz counts: 2,100 outputs per (tool set, dialect,
//! tool choice, vocabulary) times the scale, over 48 combinations (default 0.01: 1,008 outputs,
//! seconds; 0.05: 5,040 outputs, what `scripts/test.sh` (CI) runs; 1: 100,800 outputs;
//! 10: a million, `scripts/fuzz-all.sh`).
//! `CALLMASK_BUDGET_FUZZ_DIALECTS=hermes,inline` runs only those dialects. The model-family
//! dialects (`qwen3`, `mistral`, `gpt_oss`, ...) get 200 × scale outputs per (dialect, tool
//! choice), on their family's vocabulary (6,000 outputs at scale 1, 60,000 at 10).

use callmask_testkit as testkit;

use std::sync::Arc;

use callmask::fuzz::{Checker, FuzzOptions, Fuzzer, Outcome};
use callmask::{
    CompileOptions, Dialect, DialectOptions, Error, Grammar, TokenAutomaton, TokenMask, ToolChoice,
    Tools, Vocab,
};

use callmask_testkit::example_tools as tools;

fn qwen_vocab() -> Arc<Vocab> {
    let path = testkit::require(
        testkit::cache_dir()
            .join("tokenizers")
            .join("qwen3-3.7.2")
            .join("tokenizer.json"),
        "the Qwen3 tokenizer",
        "tokenizers",
    );
    Arc::new(Vocab::from_tokenizer_json(path).unwrap())
}

fn automaton(d: &str, tools: &Tools, choice: ToolChoice, vocab: Arc<Vocab>) -> TokenAutomaton {
    let mut o = DialectOptions::default();
    o.tool_choice = choice;
    let g = Dialect::by_name(d).unwrap().compile(tools, &o).unwrap();
    TokenAutomaton::new(&g, vocab).unwrap()
}

#[test]
fn every_byte_has_its_own_token_in_llama_qwen_and_gemma() {
    let g = Grammar::from_json_schema_str(r#"{"type": "integer"}"#, &CompileOptions::default())
        .unwrap();
    for (name, vocab) in [
        ("llama3.1", testkit::llama_vocab()),
        ("qwen3", qwen_vocab()),
        ("gemma3", testkit::gemma_vocab()),
    ] {
        for b in 0..=255u8 {
            let t = vocab
                .token_id(&[b])
                .unwrap_or_else(|| panic!("{name}: no token for byte {b:#04x}"));
            assert!(!vocab.is_special(t), "{name}: byte {b:#04x} is special");
            assert_eq!(vocab.decode(&[t]), vec![b], "{name}: byte {b:#04x}");
        }
        let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        assert!(a.bytes_without_token().is_empty(), "{name}");
        a.matcher().set_token_budget(Some(4)).unwrap();
    }
}

/// `base` with its single-byte tokens for `bytes` turned into special tokens (renamed
/// `<|no byte XX|>`): the same vocabulary, ids unchanged, with no token for those bytes alone.
fn without_byte_tokens(base: &Vocab, bytes: &[u8]) -> Arc<Vocab> {
    let n = base.len() as u32;
    let mut tokens: Vec<Vec<u8>> = (0..n)
        .map(|i| base.token_bytes(i).unwrap_or_default().to_vec())
        .collect();
    let mut special: Vec<bool> = (0..n).map(|i| base.is_special(i)).collect();
    for (t, s) in tokens.iter_mut().zip(&mut special) {
        if !*s && t.len() == 1 && bytes.contains(&t[0]) {
            *t = format!("<|no byte {:02x}|>", t[0]).into_bytes();
            *s = true;
        }
    }
    Arc::new(Vocab::from_parts(tokens, special, base.eos_tokens().to_vec()).unwrap())
}

/// Every byte but 'q' alone (with "qq" and `"qq` instead), and an end token.
fn vocab_without_q() -> Arc<Vocab> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8)
        .filter(|&b| b != b'q')
        .map(|b| vec![b])
        .collect();
    tokens.push(b"qq".to_vec());
    tokens.push(b"</s>".to_vec());
    let mut special = vec![false; tokens.len()];
    *special.last_mut().unwrap() = true;
    let eos = tokens.len() as u32 - 1;
    Arc::new(Vocab::from_parts(tokens, special, vec![eos]).unwrap())
}

/// Always takes the largest allowed token id under a budget of exactly the fewest tokens to
/// the end, checking that the mask is never empty before the end: the output and its tokens.
fn tight_walk(a: &TokenAutomaton) -> (String, usize, usize) {
    let mut m = a.matcher();
    let need = m.min_tokens_to_end().unwrap();
    m.set_token_budget(Some(need)).unwrap();
    let vocab = a.vocab().clone();
    let mut mask = TokenMask::new(vocab.len());
    loop {
        m.fill_mask(&mut mask);
        let tok = mask.iter().last().expect("a dead end under the budget");
        m.accept(tok).unwrap();
        if vocab.is_eos(tok) {
            break;
        }
        assert!(m.accepted_tokens().len() < need, "over the budget");
    }
    let toks = m.accepted_tokens();
    let text = String::from_utf8(vocab.decode(&toks[..toks.len() - 1])).unwrap();
    (text, toks.len(), need)
}

#[test]
fn a_byte_without_its_own_token_is_never_counted_as_one() {
    let vocab = vocab_without_q();
    let schema = |s: &str| {
        let g = Grammar::from_json_schema_str(s, &CompileOptions::default()).unwrap();
        TokenAutomaton::new(&g, vocab.clone()).unwrap()
    };
    // A string need not hold a 'q': `""` and the end.
    let a = schema(r#"{"type": "string"}"#);
    assert_eq!(a.bytes_without_token(), b"q");
    assert_eq!(a.matcher().min_tokens_to_end(), Some(3));
    // One 'q' cannot be spelled ("qq" is the only token with a 'q'): refused, naming the byte
    // and the text before it.
    let mut m = schema(r#"{"const": "q"}"#).matcher();
    match m.set_token_budget(Some(100)) {
        Err(Error::BudgetUnsupported { byte, after }) => {
            assert_eq!((byte, after.as_str()), (b'q', "\""))
        }
        other => panic!("expected BudgetUnsupported, got {other:?}"),
    }
    assert_eq!(m.tokens_left(), None);
    // Two can: `"`, `qq`, `"` and the end, through the longer token.
    for s in [
        r#"{"const": "qq"}"#,
        r#"{"enum": ["q", "qq"]}"#,
        r#"{"type": "string", "pattern": "^q+$"}"#,
        r#"{"type": "string", "pattern": "^(q|qq|qqqqqq)$"}"#,
    ] {
        let a = schema(s);
        assert_eq!(a.matcher().min_tokens_to_end(), Some(4), "{s}");
        let (text, used, need) = tight_walk(&a);
        assert_eq!((text.as_str(), used, need), ("\"qq\"", 4, 4), "{s}");
    }
    // A budget that fits leaves no way to a lone 'q' open: every walk ends within it.
    let a = schema(
        r#"{"type": "array", "items": {"type": "string", "pattern": "^q+$"}, "minItems": 2}"#,
    );
    let need = a.matcher().min_tokens_to_end().unwrap();
    assert_eq!(need, 10, "[\"qq\",\"qq\"] and the end");
    let checker = Checker::for_schema(&serde_json::json!(
        {"type": "array", "items": {"type": "string", "pattern": "^q+$"}, "minItems": 2}
    ))
    .unwrap();
    let (n, _, _) = fuzz_budget(&a, &checker, 200, 7);
    assert_eq!(n, 200);
}

#[test]
fn a_structural_byte_without_its_own_token_is_named_where_it_is_needed() {
    // No ',' alone: two items need one.
    let mut tokens: Vec<Vec<u8>> = (0..=255u8)
        .filter(|&b| b != b',')
        .map(|b| vec![b])
        .collect();
    tokens.push(b"</s>".to_vec());
    let mut special = vec![false; tokens.len()];
    *special.last_mut().unwrap() = true;
    let eos = tokens.len() as u32 - 1;
    let vocab = Arc::new(Vocab::from_parts(tokens, special, vec![eos]).unwrap());
    let g = Grammar::from_json_schema_str(
        r#"{"type": "array", "items": {"type": "integer"}, "minItems": 2}"#,
        &CompileOptions::default(),
    )
    .unwrap();
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    match a.matcher().set_token_budget(Some(100)) {
        Err(Error::BudgetUnsupported { byte, after }) => {
            assert_eq!((byte, after.as_str()), (b',', "[0"))
        }
        other => panic!("expected BudgetUnsupported, got {other:?}"),
    }
    // One item needs none: the budget holds, and never opens the way to a second item.
    let g = Grammar::from_json_schema_str(
        r#"{"type": "array", "items": {"type": "integer"}, "minItems": 1}"#,
        &CompileOptions::default(),
    )
    .unwrap();
    let a = TokenAutomaton::new(&g, vocab).unwrap();
    assert_eq!(a.matcher().min_tokens_to_end(), Some(4));
    let (text, used, need) = tight_walk(&a);
    assert!(
        used <= need && text.starts_with('[') && !text.contains(','),
        "{text}"
    );
}

/// Sets the fewest tokens a complete output needs as the budget, then always takes the largest
/// allowed token id (a special token when one is allowed): returns the tokens used (end
/// included) and the budget.
fn forced_walk(a: &TokenAutomaton) -> (usize, usize, String) {
    let mut m = a.matcher();
    let need = m.min_tokens_to_end().unwrap();
    assert!(matches!(
        m.clone().set_token_budget(Some(need - 1)),
        Err(Error::BudgetTooSmall { .. })
    ));
    m.set_token_budget(Some(need)).unwrap();
    let vocab = a.vocab().clone();
    let mut mask = TokenMask::new(vocab.len());
    loop {
        m.fill_mask(&mut mask);
        let tok = mask.iter().last().expect("a dead end under the budget");
        m.accept(tok).unwrap();
        if vocab.is_eos(tok) {
            break;
        }
        assert!(m.accepted_tokens().len() < need, "over the budget");
    }
    let toks = m.accepted_tokens();
    let text = String::from_utf8(vocab.decode(&toks[..toks.len() - 1])).unwrap();
    (toks.len(), need, text)
}

#[test]
fn a_tight_budget_forces_the_shortest_call_and_counts_special_tokens_as_one() {
    let t = tools("travel.json");
    for (d, vocab) in [
        // `<|python_tag|>` is one token in Llama 3.1.
        ("pythonic", testkit::llama_vocab()),
        // `<tool_call>` and `</tool_call>` are single tokens in Qwen3.
        ("hermes", qwen_vocab()),
        ("empower", testkit::gemma_vocab()),
        ("functools", testkit::gemma_vocab()),
        ("inline", testkit::llama_vocab()),
    ] {
        for choice in [
            ToolChoice::Required,
            ToolChoice::Function("convert_currency".into()),
        ] {
            let a = automaton(d, &t, choice.clone(), vocab.clone());
            let (used, need, text) = forced_walk(&a);
            eprintln!(
                "{d} {choice:?}: {need} tokens (end included), {} bytes: {text:?}",
                text.len()
            );
            assert!(
                used <= need,
                "{d} {choice:?}: {used} tokens for a budget of {need}"
            );
            // Counted in tokens, not bytes: at most about half the bytes.
            assert!(2 * need <= text.len() + 2, "{d} {choice:?}: {need} tokens");
            let calls = a.grammar().parse(&text).unwrap().tool_calls;
            assert!(!calls.is_empty(), "{d} {choice:?}: {text:?}");
            let checker = Checker::for_tools(&t).unwrap();
            checker.check(a.grammar(), &text).unwrap();
        }
    }
}

#[test]
fn budget_survives_rollback_and_forbids_over_budget_tokens() {
    let t = tools("weather.json");
    let a = automaton(
        "functools",
        &t,
        ToolChoice::Required,
        testkit::llama_vocab(),
    );
    let mut m = a.matcher();
    m.set_token_budget(Some(60)).unwrap();
    let toks = a
        .tokenize(
            " functools[{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Par",
        )
        .unwrap();
    for &t in &toks {
        m.accept(t).unwrap();
    }
    assert_eq!(m.tokens_left(), Some(60 - toks.len()));
    m.rollback(3).unwrap();
    assert_eq!(m.tokens_left(), Some(60 - toks.len() + 3));
    // A budget that leaves room for nothing but the shortest end: long string tokens are
    // refused by accept and by is_allowed, consistently with the mask.
    let need = m.min_tokens_to_end().unwrap();
    m.set_token_budget(Some(need)).unwrap();
    let mut mask = TokenMask::new(a.vocab().len());
    m.fill_mask(&mut mask);
    let mut refused = 0;
    for tok in 0..a.vocab().len() as u32 {
        assert_eq!(mask.is_allowed(tok), m.is_allowed(tok), "token {tok}");
        if m.is_allowed_by_grammar(tok) && !m.is_allowed(tok) {
            refused += 1;
            assert!(matches!(
                m.clone().accept(tok),
                Err(Error::OverBudget { .. })
            ));
        }
    }
    assert!(refused > 0);
}

/// Runs `count` budgeted outputs of `a`; returns (outputs, steered masks, tokens).
use testkit::ORIGINAL_DIALECTS as ORIGINAL;

/// Budgeted outputs in which the distinct-calls rule gave way (reported, see `docs/budgets.md`).
static GAVE_WAY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn fuzz_budget(a: &TokenAutomaton, checker: &Checker, count: u64, seed: u64) -> (u64, u64, u64) {
    let mut o = FuzzOptions::default();
    o.seed = seed;
    o.budget_slack = Some((0, 80));
    let fuzzer = Fuzzer::new(a, o).unwrap();
    let (mut n, mut steered, mut tokens) = (0, 0, 0);
    fuzzer.run(
        checker,
        count,
        |_| (),
        |s, ()| {
            match &s.outcome {
                Outcome::Valid => {}
                other => panic!(
                    "output {} (budget {:?}): {other:?}\n{:?}",
                    s.index,
                    s.budget,
                    String::from_utf8_lossy(&s.text)
                ),
            }
            let b = s.budget.unwrap();
            assert!(s.tokens.len() < b && s.eos.is_some());
            n += 1;
            steered += s.budget_steered;
            tokens += s.tokens.len() as u64 + 1;
            if s.distinct_gave_up > 0 {
                GAVE_WAY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            true
        },
    );
    (n, steered, tokens)
}

#[test]
fn random_walks_under_random_budgets_end_valid_within_the_budget() {
    let scale: f64 = std::env::var("CALLMASK_BUDGET_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.01);
    let per = ((2100.0 * scale) as u64).max(1);
    // `CALLMASK_BUDGET_FUZZ_DIALECTS`: a comma list to run only those dialects.
    let only: Option<Vec<String>> = std::env::var("CALLMASK_BUDGET_FUZZ_DIALECTS")
        .ok()
        .map(|s| s.split(',').map(str::to_owned).collect());
    let mut combos = 0;
    let (mut total, mut steered, mut tokens) = (0, 0, 0);
    let started = std::time::Instant::now();
    for file in ["travel.json", "mixed.json"] {
        let t = tools(file);
        let checker = Checker::for_tools(&t).unwrap();
        for &d in &ORIGINAL {
            if only.as_ref().is_some_and(|o| !o.iter().any(|x| x == d)) {
                continue;
            }
            for choice in [ToolChoice::Auto, ToolChoice::Required] {
                for vocab in [testkit::llama_vocab(), testkit::gemma_vocab()] {
                    combos += 1;
                    let a = automaton(d, &t, choice.clone(), vocab);
                    let t0 = std::time::Instant::now();
                    let (n, s, k) = fuzz_budget(&a, &checker, per, total);
                    eprintln!(
                        "{file} {d} {choice:?} {}: {n} outputs {k} tokens {s} steered {:.2}s",
                        a.vocab().len(),
                        t0.elapsed().as_secs_f64()
                    );
                    total += n;
                    steered += s;
                    tokens += k;
                }
            }
        }
    }
    eprintln!(
        "budget fuzz: {total} outputs, {tokens} tokens, {steered} masks steered by the budget ({:.1}%), {:.1} s; outputs in which the distinct-calls rule gave way (all tests so far): {}",
        100.0 * steered as f64 / tokens as f64,
        started.elapsed().as_secs_f64(),
        GAVE_WAY.load(std::sync::atomic::Ordering::Relaxed)
    );
    assert_eq!(total, per * combos);
}

/// JSON Schema keywords that change what a completion must still write (`dependentRequired`
/// and `minProperties` add keys, `maxProperties` stops them, `multipleOf` restricts numbers, static `unevaluated*` close objects and arrays,
/// `patternProperties` gives extra keys values by kind)
/// under random budgets on Llama 3.1: every output ends valid within its budget (100 × scale
/// outputs per schema, at least 20).
#[test]
fn schema_keywords_end_valid_within_random_budgets() {
    let schemas = [
        serde_json::json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "string", "maxLength": 5},
                "c": {"type": "boolean"}
            },
            "dependentRequired": {"a": ["b"], "b": ["c"]},
            "additionalProperties": false
        }),
        serde_json::json!({
            "type": "object",
            "properties": {"x": {"type": "number", "multipleOf": 0.25}},
            "required": ["x"],
            "dependentRequired": {"x": ["y"], "z": ["x", "y"]},
            "additionalProperties": {"type": "integer", "multipleOf": 3}
        }),
        serde_json::json!({
            "type": "object",
            "allOf": [{"properties": {"id": {"type": "integer"}}, "required": ["id"]}],
            "properties": {
                "tags": {"type": "array", "prefixItems": [{"type": "string"}], "unevaluatedItems": false}
            },
            "unevaluatedProperties": false
        }),
        serde_json::json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": true},
            "required": ["a"],
            "minProperties": 2,
            "maxProperties": 2,
            "additionalProperties": {"type": "boolean"}
        }),
        serde_json::json!({"type": "object", "minProperties": 1, "additionalProperties": {"type": "integer"}}),
        serde_json::json!({
            "type": "array",
            "items": {"type": ["integer", "string"]},
            "contains": {"type": "string", "minLength": 3},
            "minContains": 2,
            "maxContains": 3,
            "maxItems": 6
        }),
        serde_json::json!({
            "type": "object",
            "properties": {"p": {"type": "integer"}, "q": {"type": "integer"}, "r": {"type": "integer"}},
            "additionalProperties": false,
            "minProperties": 3
        }),
        // uniqueItems over a finite set: the cheapest values may be used up.
        serde_json::json!({
            "type": "array",
            "items": {"enum": ["x", "yyyyyyyyyyyy", "zzzzzzzzzzzzzzzzzzzz", 7]},
            "uniqueItems": true,
            "minItems": 3
        }),
        // uniqueItems over strings: the shortest strings get used up, and few strings fit.
        serde_json::json!({
            "type": "array",
            "items": {"type": "string", "maxLength": 2},
            "uniqueItems": true,
            "minItems": 4
        }),
        serde_json::json!({
            "type": "array",
            "items": {"type": "string", "pattern": "^(x|yyyyyyyyyy|zzzzzzzzzzzzzzzzzzzz)$"},
            "uniqueItems": true,
            "minItems": 2
        }),
        // Few names for extra keys: the shortest get used up.
        serde_json::json!({
            "type": "object",
            "propertyNames": {"pattern": "^(a|bbbbbbbbbb|cccccccccccccccccccc)$"},
            "additionalProperties": {"type": "integer"},
            "minProperties": 1
        }),
        // Kinds of extra keys with values of very different lengths.
        serde_json::json!({
            "type": "object",
            "patternProperties": {
                "^a": {"type": "array", "items": {"type": "integer"}, "minItems": 6},
                "^b": {"type": "boolean"}
            },
            "additionalProperties": false,
            "minProperties": 1
        }),
    ];
    let scale: f64 = std::env::var("CALLMASK_BUDGET_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.01);
    let per = ((100.0 * scale) as u64).max(20);
    for (i, s) in schemas.iter().enumerate() {
        let g = Grammar::from_json_schema(s, &CompileOptions::default()).unwrap();
        let a = TokenAutomaton::new(&g, testkit::llama_vocab()).unwrap();
        let checker = Checker::for_schema(s).unwrap();
        let t0 = std::time::Instant::now();
        let (n, steered, _) = fuzz_budget(&a, &checker, per, 100 + i as u64);
        assert_eq!(n, per);
        eprintln!(
            "{s}: {per} outputs, {steered} masks steered by the budget, {:.1} s",
            t0.elapsed().as_secs_f64()
        );
    }
}

/// The model-family dialects under random budgets, each on its family's vocabulary (the travel
/// tools: nested objects, arrays, enums, formats).
#[test]
fn model_family_dialects_end_valid_within_random_budgets() {
    let scale: f64 = std::env::var("CALLMASK_BUDGET_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.01);
    let per = ((200.0 * scale) as u64).max(1);
    let only: Option<Vec<String>> = std::env::var("CALLMASK_BUDGET_FUZZ_DIALECTS")
        .ok()
        .map(|s| s.split(',').map(str::to_owned).collect());
    let t = tools("travel.json");
    let checker = Checker::for_tools(&t).unwrap();
    let (mut total, mut combos, mut steered) = (0, 0, 0);
    let started = std::time::Instant::now();
    for &d in callmask::prompt::BUILTIN_DIALECTS {
        let listed = only.as_ref().is_some_and(|o| o.iter().any(|x| x == d));
        if (ORIGINAL.contains(&d) && !listed) || only.as_ref().is_some_and(|_| !listed) {
            continue;
        }
        for choice in [ToolChoice::Auto, ToolChoice::Required] {
            combos += 1;
            let a = automaton(d, &t, choice.clone(), testkit::family_vocab(d));
            let (n, s, _) = fuzz_budget(&a, &checker, per, total);
            total += n;
            steered += s;
        }
    }
    eprintln!(
        "model-family budget fuzz: {total} outputs in {combos} combinations, {steered} masks steered, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(total, per * combos);
}

/// The bytes SmolLM2-135M-Instruct's vocabulary has no single-byte token for (read from its
/// GGUF: its byte-level BPE lacks 21 of the 256 byte tokens).
const SMOLLM2_MISSING: [u8; 21] = [
    0x04, 0x06, 0x13, 0x14, 0x16, 0x1d, 0xc0, 0xc1, 0xf1, 0xf2, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa,
    0xfb, 0xfc, 0xfd, 0xfe, 0xff,
];

fn budget_scale() -> f64 {
    std::env::var("CALLMASK_BUDGET_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.01)
}

/// Walks `a` under a budget of `budget` tokens, filling the whole mask at every step (never
/// empty before the end) and taking a random allowed token (an end token where one is allowed,
/// one time in eight): the output must end within the budget.
fn masked_walk(a: &TokenAutomaton, budget: usize, rng: &mut rand::rngs::StdRng) {
    use rand::Rng;
    let mut m = a.matcher();
    m.set_token_budget(Some(budget)).unwrap();
    let vocab = a.vocab().clone();
    let mut mask = TokenMask::new(vocab.len());
    loop {
        m.fill_mask(&mut mask);
        let n = mask.count();
        assert!(
            n > 0,
            "an empty mask before the end, {} tokens in",
            m.accepted_tokens().len()
        );
        let eos = vocab
            .eos_tokens()
            .iter()
            .copied()
            .find(|&e| mask.is_allowed(e));
        let tok = match eos {
            Some(e) if rng.random_range(0..8) == 0 => e,
            _ => mask.iter().nth(rng.random_range(0..n)).unwrap(),
        };
        m.accept(tok).unwrap();
        assert!(
            m.accepted_tokens().len() <= budget,
            "over the budget of {budget}"
        );
        if vocab.is_eos(tok) && m.is_finished() {
            return;
        }
    }
}

/// SmolLM2's vocabulary lacks 21 byte tokens, none of which a shortest output needs: on Llama
/// 3.1 (and each family's vocabulary) without them, every dialect counts the same fewest tokens
/// as with them, and random walks under random budgets end valid within the budget.
#[test]
fn smollm2_s_missing_byte_tokens_change_no_count_and_budgets_hold_in_every_dialect() {
    use rand::Rng;
    let per = ((200.0 * budget_scale()) as u64).max(4);
    let smol = without_byte_tokens(&testkit::llama_vocab(), &SMOLLM2_MISSING);
    assert_eq!(
        TokenAutomaton::new(
            &Grammar::from_json_schema_str(r#"{"type": "integer"}"#, &CompileOptions::default())
                .unwrap(),
            smol.clone()
        )
        .unwrap()
        .bytes_without_token(),
        SMOLLM2_MISSING
    );
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(44);
    let (mut total, mut combos) = (0, 0);
    for file in ["travel.json", "mixed.json"] {
        let t = tools(file);
        let checker = Checker::for_tools(&t).unwrap();
        for &d in callmask::prompt::BUILTIN_DIALECTS {
            if file == "mixed.json" && !ORIGINAL.contains(&d) {
                continue;
            }
            for choice in [ToolChoice::Auto, ToolChoice::Required] {
                let full = testkit::family_vocab(d);
                let vocab = without_byte_tokens(&full, &SMOLLM2_MISSING);
                let a = automaton(d, &t, choice.clone(), vocab);
                let need = a.matcher().min_tokens_to_end();
                let full_need = automaton(d, &t, choice.clone(), full)
                    .matcher()
                    .min_tokens_to_end();
                assert_eq!(need, full_need, "{file} {d} {choice:?}");
                let (n, _, _) = fuzz_budget(&a, &checker, per, combos);
                total += n;
                combos += 1;
                let need = need.unwrap();
                masked_walk(&a, need + rng.random_range(0..40), &mut rng);
            }
        }
    }
    assert_eq!(total, per * combos);
}

/// Random subsets of the single-byte tokens removed, every dialect, `auto` or `required` (in
/// turn): three kinds of subsets. (0) Bytes that never occur in a valid output's text alone
/// (control bytes, `c0`, `c1`, `f5`-`ff`) and (1) those and UTF-8's lead and continuation bytes
/// (which longer tokens spell): a budget is always taken. (2) Any bytes (letters, digits,
/// punctuation): a budget is refused only with a removed byte named. Wherever it is taken,
/// random walks under random budgets end valid within it, with a mask never empty before the
/// end; with (0), the fuzzer's own shortest completions (no budget) avoid the bytes removed too.
#[test]
fn random_byte_tokens_removed_budgets_hold_in_every_dialect() {
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    let per = ((200.0 * budget_scale()) as u64).max(4);
    let never_in_text: Vec<u8> = (0u8..=255)
        .filter(|&b| {
            matches!(b, 0x00..=0x08 | 0x0b | 0x0c | 0x0e..=0x1f | 0x7f | 0xc0 | 0xc1 | 0xf5..=0xff)
        })
        .collect();
    let never_alone: Vec<u8> = (0u8..=255)
        .filter(|&b| !matches!(b, b'\t' | b'\n' | b'\r' | 0x20..=0x7e))
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(4401);
    let t = tools("travel.json");
    let checker = Checker::for_tools(&t).unwrap();
    let (mut taken, mut refused) = (0u64, 0u64);
    for (di, &d) in callmask::prompt::BUILTIN_DIALECTS.iter().enumerate() {
        for kind in 0..3 {
            let choice = if (di + kind) % 2 == 0 {
                ToolChoice::Auto
            } else {
                ToolChoice::Required
            };
            let mut removed: Vec<u8> = if kind == 2 {
                let mut all: Vec<u8> = (0u8..=255).collect();
                all.shuffle(&mut rng);
                all.truncate(rng.random_range(1..=16));
                all
            } else {
                let pool = if kind == 0 {
                    &never_in_text
                } else {
                    &never_alone
                };
                let p = rng.random_range(0.1..1.0);
                pool.iter()
                    .copied()
                    .filter(|_| rng.random_bool(p))
                    .collect()
            };
            removed.sort_unstable();
            let vocab = without_byte_tokens(&testkit::family_vocab(d), &removed);
            let a = automaton(d, &t, choice.clone(), vocab);
            let what = format!("{d} {choice:?} without {removed:02x?}");
            match a.matcher().set_token_budget(Some(10_000)) {
                Ok(()) => taken += 1,
                Err(Error::BudgetUnsupported { byte, after }) if kind == 2 => {
                    assert!(
                        removed.contains(&byte),
                        "{what}: {byte:#04x} after {after:?}"
                    );
                    refused += 1;
                    eprintln!("{what}: refused, {byte:#04x} after {after:?}");
                    continue;
                }
                Err(e) => panic!("{what}: {e}"),
            }
            let seed = 1000 * taken + kind as u64;
            let (n, _, _) = fuzz_budget(&a, &checker, per, seed);
            assert_eq!(n, per, "{what}");
            let need = a.matcher().min_tokens_to_end().unwrap();
            for _ in 0..2 {
                masked_walk(&a, need + rng.random_range(0..30), &mut rng);
            }
            if kind == 0 {
                let mut o = FuzzOptions::default();
                o.seed = seed;
                let fuzzer = Fuzzer::new(&a, o).unwrap();
                fuzzer.run(
                    &checker,
                    per,
                    |_| (),
                    |s, ()| {
                        let text = String::from_utf8_lossy(&s.text);
                        assert_eq!(s.outcome, Outcome::Valid, "{what}: {text:?}");
                        true
                    },
                );
            }
        }
    }
    eprintln!("random byte tokens removed: {taken} budgets taken, {refused} refused");
    assert!(taken > 2 * refused);
}

#[test]
fn tool_arguments_are_strict_by_default_with_opt_outs() {
    let params = r#"{"type": "object", "properties": {"a": {"type": "integer"},
        "o": {"type": "object", "properties": {"b": {"type": "string"}}}}, "required": ["a"]}"#;
    let tools_json = |strict: &str| {
        format!(
            r#"[{{"type": "function", "function": {{"name": "f", {strict} "parameters": {params}}}}}]"#
        )
    };
    let compile = |tools: &Tools, strict_option: bool| {
        let mut o = DialectOptions::default();
        o.strict_arguments = strict_option;
        Dialect::by_name("pythonic")
            .unwrap()
            .compile(tools, &o)
            .unwrap()
    };
    let extra_top = "[f(a=1, zz=2)]";
    let extra_nested = "[f(a=1, o={'b': 'x', 'zz': 1})]";
    let declared = "[f(a=1, o={'b': 'x'})]";
    let strict = Tools::from_json_str(&tools_json("")).unwrap();
    let g = compile(&strict, true);
    assert!(g.parse(declared).is_ok());
    assert!(g.parse(extra_top).is_err(), "an undeclared keyword");
    assert!(g.parse(extra_nested).is_err(), "an undeclared nested key");
    // The tool opts out (OpenAI's `strict: false`), or the option does.
    let lax = Tools::from_json_str(&tools_json(r#""strict": false,"#)).unwrap();
    assert_eq!(lax.as_slice()[0].strict, Some(false));
    for g in [compile(&lax, true), compile(&strict, false)] {
        assert!(g.parse(extra_top).is_ok());
        assert!(g.parse(extra_nested).is_ok());
    }
    // A plain JSON Schema keeps JSON Schema's default.
    let g = Grammar::from_json_schema_str(params, &CompileOptions::default()).unwrap();
    assert!(g.parse(r#"{"a": 1, "zz": 2}"#).is_ok());
}

#[test]
fn free_text_before_a_required_call_is_bounded_by_default() {
    let t = tools("weather.json");
    let call = r#" functools[{"name": "get_current_weather", "arguments": {"location": "Oslo"}}]"#;
    let short = format!("{}{call}", "a".repeat(50));
    let long = format!(
        "{}{call}",
        "a".repeat(callmask::DEFAULT_REQUIRED_TEXT_CHARS as usize + 50)
    );
    for choice in [
        ToolChoice::Required,
        ToolChoice::Function("get_current_weather".into()),
    ] {
        let mut o = DialectOptions::default();
        o.tool_choice = choice;
        let g = Dialect::by_name("functools")
            .unwrap()
            .compile(&t, &o)
            .unwrap();
        assert!(g.parse(&short).is_ok());
        assert!(g.parse(&long).is_err());
        o.max_text_chars = Some(u32::MAX);
        let g = Dialect::by_name("functools")
            .unwrap()
            .compile(&t, &o)
            .unwrap();
        assert!(g.parse(&long).is_ok());
    }
    // `auto` keeps free text unbounded.
    let g = Dialect::by_name("functools")
        .unwrap()
        .compile(&t, &DialectOptions::default())
        .unwrap();
    assert!(g.parse(&long).is_ok());
}

/// gpt-oss's `<|end|>` is an end-of-generation token of its vocabulary and a special token the
/// harmony grammar takes (it closes a message). Where the budget leaves no room for the next
/// message, the mask allows it as the end, and `accept` agrees: it ends the output.
#[test]
fn an_end_token_the_grammar_also_takes_ends_the_output_where_nothing_else_fits() {
    let vocab = testkit::family_vocab("gpt_oss");
    let end = vocab.special_token("<|end|>").unwrap();
    assert!(
        vocab.is_eos(end),
        "the test needs <|end|> among the end tokens"
    );
    let a = automaton("gpt_oss", &tools("travel.json"), ToolChoice::Auto, vocab);
    let mut m = a.matcher();
    for t in a
        .tokenize("<|channel|>commentary<|message|>Sure, here it is.")
        .unwrap()
    {
        m.accept(t).unwrap();
    }
    // Unbounded: `<|end|>` closes the message and more follows.
    assert!(m.clone().accept(end).is_ok());
    let mut unbounded = m.clone();
    unbounded.accept(end).unwrap();
    assert!(!unbounded.is_finished());
    // Room for one token only: the mask allows `<|end|>` as the end, and accept ends there.
    m.set_token_budget(Some(1)).unwrap();
    let mut mask = TokenMask::new(a.vocab().len());
    m.fill_mask(&mut mask);
    assert!(mask.is_allowed(end));
    assert_eq!(mask.is_allowed(end), m.is_allowed(end));
    m.accept(end).unwrap();
    assert!(m.is_finished());
}
