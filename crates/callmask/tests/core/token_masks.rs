//! Token-level soundness and consistency on a small synthetic vocabulary: every mask equals the
//! set of tokens `accept` takes, random walks through the masks only produce schema-valid JSON,
//! and valid instances are accepted token by token.

use callmask::{CompileOptions, Grammar, TokenAutomaton, TokenMask, Vocab};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::Arc;

/// All 256 single bytes (as tokens 0..256) plus multi-byte tokens that cross JSON boundaries
/// (two of them twice, as vocabularies with byte-fallback tokens have).
fn small_vocab() -> Arc<Vocab> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for t in [
        "{\"",
        "\":",
        "\": ",
        "\",",
        "\"}",
        "\"}]",
        "}]",
        "},",
        "\", \"",
        ", \"",
        " \"",
        "[{",
        "true",
        "false",
        "null",
        "12",
        "3.5",
        "-1",
        "00",
        "\\n",
        "\\\"",
        "\\u00",
        "Paris",
        "Paris",
        "\",",
        "name",
        "\"name\":",
        "celsius",
        "\"unit\": \"",
        "\n  ",
        "  ",
        "e+",
        "1e",
        "\":[",
        "]}",
        "é",
        "\u{e9}t",
        "2024-",
        "-01",
        "T12:",
    ] {
        tokens.push(t.as_bytes().to_vec());
    }
    let n = tokens.len();
    tokens.push(b"<eos>".to_vec());
    let mut special = vec![false; n + 1];
    special[n] = true;
    Arc::new(Vocab::from_parts(tokens, special, vec![n as u32]).unwrap())
}

fn schemas() -> Vec<Value> {
    vec![
        json!({"type": "object", "properties": {
            "location": {"type": "string", "minLength": 1, "maxLength": 12},
            "unit": {"enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 14}
        }, "required": ["location"], "additionalProperties": false}),
        json!({"type": "array", "items": {"anyOf": [{"type": "number", "minimum": -2.5, "exclusiveMaximum": 10}, {"type": "boolean"}, {"type": "null"}]}, "minItems": 1, "maxItems": 4}),
        json!({"$defs": {"node": {"type": "object", "properties": {"name": {"type": "string", "pattern": "^[a-z]+$"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["name"], "additionalProperties": false}}, "$ref": "#/$defs/node"}),
        json!({"type": "object", "properties": {"d": {"type": "string", "format": "date"}, "e": {"type": "string", "format": "email"}}, "additionalProperties": {"type": "integer"}}),
        json!({"oneOf": [{"type": "object", "properties": {"k": {"const": "a"}, "x": {"type": "integer"}}, "required": ["k"], "additionalProperties": false}, {"type": "object", "properties": {"k": {"const": "b"}, "y": {"type": "string"}}, "required": ["k"], "additionalProperties": false}]}),
        json!({}),
        json!({"type": "string", "pattern": "\\d{3}-\\d{2}"}),
        json!({"type": "object", "patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "string"}},
            "properties": {"ab": {"type": "null"}}, "additionalProperties": {"type": "boolean"}}),
        json!({"type": "object", "properties": {"ñ": {"enum": ["é", "€"]}}, "additionalProperties": {"type": "string", "maxLength": 2}}),
        json!({"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": true, "minItems": 2}),
        json!({"type": "object", "propertyNames": {"maxLength": 1}, "additionalProperties": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}}),
    ]
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap()
}

#[test]
fn masks_agree_with_accept_and_walks_are_valid() {
    let vocab = small_vocab();
    let eos = vocab.eos_tokens()[0];
    let closers: Vec<u32> = (0..vocab.len() as u32)
        .filter(|&t| {
            t != eos
                && vocab
                    .token_bytes(t)
                    .unwrap()
                    .iter()
                    .any(|b| b"]}\"".contains(b))
        })
        .collect();
    for (si, schema) in schemas().iter().enumerate() {
        let grammar = Grammar::from_json_schema(schema, &CompileOptions::default()).unwrap();
        let auto = TokenAutomaton::new(&grammar, vocab.clone()).unwrap();
        let valid = validator(schema);
        let mut rng = StdRng::seed_from_u64(si as u64);
        let mut finished = 0;
        for walk in 0..60 {
            // Biased towards closing tokens so that free-form values end.
            let what = format!("schema {si} walk {walk}");
            let w = walk_checking_masks(&auto, &mut rng, 300, &closers, (0.3, 0.4), &what);
            if w.finished {
                finished += 1;
                let s = std::str::from_utf8(&w.text).expect("outputs are UTF-8");
                let v: Value = serde_json::from_str(s)
                    .unwrap_or_else(|e| panic!("schema {si}: not JSON {s:?}: {e}"));
                assert!(valid.is_valid(&v), "schema {si}: invalid output {s}");
            }
        }
        // A random walk rarely completes the pattern of schema 6; its masks are still checked.
        if si != 6 {
            assert!(finished > 10, "schema {si}: only {finished} walks finished");
        }
    }
}

#[test]
fn valid_instances_are_accepted_token_by_token() {
    let vocab = small_vocab();
    let cases = [
        (0, r#"{"location": "Paris", "unit": "celsius"}"#),
        (0, "{\n  \"days\": 14,\n  \"location\": \"été\"\n}"),
        (1, "[-2.5, true, null, 9.99]"),
        (
            2,
            r#"{"name":"root","kids":[{"name":"a"},{"kids":[],"name":"b"}]}"#,
        ),
        (3, r#"{"d":"2024-02-29","e":"a.b@example.com","zz":-1}"#),
        (4, r#"{"k":"b","y":"x"}"#),
        (5, r#"{"a":[1,{"b":null}],"c":"\n"}"#),
        (6, r#""ab123-45""#),
    ];
    let schemas = schemas();
    for (si, text) in cases {
        let grammar = Grammar::from_json_schema(&schemas[si], &CompileOptions::default()).unwrap();
        assert!(
            validator(&schemas[si]).is_valid(&serde_json::from_str(text).unwrap()),
            "{text} must be valid"
        );
        grammar
            .check_bytes(text.as_bytes())
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        let auto = TokenAutomaton::new(&grammar, vocab.clone()).unwrap();
        // Greedy longest-match tokenization over the small vocabulary.
        let mut m = auto.matcher();
        let mut mask = TokenMask::new(vocab.len());
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let t = (0..vocab.len() as u32 - 1)
                .filter(|&t| bytes[i..].starts_with(vocab.token_bytes(t).unwrap()))
                .max_by_key(|&t| vocab.token_bytes(t).unwrap().len())
                .unwrap();
            m.fill_mask(&mut mask);
            assert!(
                mask.is_allowed(t),
                "{text}: token {:?} at {i} not in mask",
                String::from_utf8_lossy(vocab.token_bytes(t).unwrap())
            );
            m.accept(t).unwrap();
            i += vocab.token_bytes(t).unwrap().len();
        }
        assert!(m.can_end(), "{text}: cannot end");
        m.fill_mask(&mut mask);
        assert!(mask.is_allowed(vocab.eos_tokens()[0]));
    }
}

#[test]
fn invalid_instances_are_rejected() {
    let schemas = schemas();
    let cases = [
        (0, r#"{"unit": "celsius"}"#),
        (0, r#"{"location": "Paris", "location": "Rome"}"#),
        (0, r#"{"location": "Paris", "days": 15}"#),
        (0, r#"{"location": "", "days": 1}"#),
        (0, r#"{"location": "x", "extra": 1}"#),
        (1, "[]"),
        (1, "[10]"),
        (1, "[-2.6]"),
        (2, r#"{"name":"Root"}"#),
        (3, r#"{"d":"2023-02-29"}"#),
        (3, r#"{"zz":"s"}"#),
        (4, r#"{"k":"c"}"#),
        (6, r#""ab12-45""#),
        (5, r#"{"a":1,}"#),
        (5, r#"{"a":"\x"}"#),
    ];
    for (si, text) in cases {
        let grammar = Grammar::from_json_schema(&schemas[si], &CompileOptions::default()).unwrap();
        assert!(
            grammar.check_bytes(text.as_bytes()).is_err(),
            "schema {si} accepted {text}"
        );
    }
}

/// The small vocabulary plus tokens of the dialects' markers and calls (whole, split, and glued
/// to text), so that the walks out of free text meet them.
fn dialect_vocab() -> Arc<Vocab> {
    small_vocab_plus(
        [
            "<tool_call>",
            "<tool",
            "_call>",
            "</tool_call>",
            ".<",
            " <",
            "Hi",
            "Hi there",
            "\n\n",
            "functools[",
            "functools",
            "[{\"",
            "<FUNCTION_CALL>",
            "</FUNCTION_CALL>",
            "<FUNCTION",
            "get_weather",
            "get_weather(",
            "(city=",
            "city",
            "=\"",
            "\")",
            ")]",
            "{\"name\": \"",
            "\", \"arguments\": {",
            "\", \"parameters\": {",
            "<f>",
            "<c>",
            "ping",
        ]
        .map(|t| t.as_bytes().to_vec()),
    )
}

/// [`small_vocab`]'s tokens, then `extra`, then the end-of-sequence token.
fn small_vocab_plus(extra: impl IntoIterator<Item = Vec<u8>>) -> Arc<Vocab> {
    let base = small_vocab();
    let eos = base.eos_tokens()[0];
    let mut tokens: Vec<Vec<u8>> = (0..eos)
        .map(|t| base.token_bytes(t).unwrap().to_vec())
        .collect();
    tokens.extend(extra);
    let n = tokens.len();
    tokens.push(b"<eos>".to_vec());
    let mut special = vec![false; n + 1];
    special[n] = true;
    Arc::new(Vocab::from_parts(tokens, special, vec![n as u32]).unwrap())
}

/// Text-first dialects (the first mask walks free text over the whole trie, from walks shared
/// across grammars) and the others, auto and required, two tool sets each: every mask along
/// random walks equals the set of tokens `accept` takes, so the shared walks give every grammar
/// its own masks.
#[test]
fn dialect_masks_agree_with_accept() {
    use callmask::{Dialect, DialectOptions, Tools};
    let vocab = dialect_vocab();
    let weather = json!({"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 8},
                       "days": {"type": "integer", "minimum": 1, "maximum": 3}},
        "required": ["city"]}});
    let ping = json!({"name": "ping", "parameters": {"type": "object", "properties": {}}});
    let tool_sets = [json!([weather.clone()]), json!([ping, weather])];
    // Tokens a walk prefers, so that walks leave the text and make calls.
    let lead: Vec<u32> = (0..vocab.len() as u32)
        .filter(|&t| {
            let b = vocab.token_bytes(t).unwrap();
            b.len() > 2 && !vocab.is_special(t)
        })
        .collect();
    let mut checked = 0usize;
    for d in [
        "hermes",
        "functools",
        "inline",
        "pythonic",
        "llama31_json",
        "empower",
    ] {
        for choice in ["auto", "required"] {
            for (ti, tools) in tool_sets.iter().enumerate() {
                let tools = Tools::from_openai_json(tools).unwrap();
                let opts = DialectOptions::default().tool_choice(choice.parse().unwrap());
                let g = Dialect::by_name(d).unwrap().compile(&tools, &opts).unwrap();
                let auto = TokenAutomaton::new(&g, vocab.clone()).unwrap();
                let mut rng = StdRng::seed_from_u64(ti as u64 * 31 + choice.len() as u64);
                for walk in 0..4 {
                    // The grammar's mask against `is_allowed` (which leaves the distinct-calls
                    // rule to masks and `accept`; `tests/core/distinct_calls.rs` covers it).
                    let what = format!("{d} {choice} tools {ti} walk {walk}");
                    checked +=
                        walk_checking_masks(&auto, &mut rng, 50, &lead, (0.15, 0.5), &what).checked;
                }
            }
        }
    }
    assert!(checked > 500, "only {checked} masks checked");
}

/// The whole-mask cache keeps each mask as a shared base and the words where it differs: the
/// same random walks run twice give the same masks, the second time all from the cache, in
/// every dialect over two tool sets; and those masks equal a fresh automaton's.
#[test]
fn cached_masks_equal_the_masks_first_computed() {
    use callmask::{Dialect, DialectOptions, Tools};
    // The dialect vocabulary and two-letter words (bare, after a space, a quote, a brace):
    // enough words of mask that masks are kept as differences from a base.
    let small = dialect_vocab();
    let eos = small.eos_tokens()[0];
    let mut tokens: Vec<Vec<u8>> = (0..eos)
        .map(|t| small.token_bytes(t).unwrap().to_vec())
        .collect();
    for a in b'a'..=b'z' {
        for b in b'a'..=b'z' {
            for lead in ["", " ", "\"", "{\""] {
                tokens.push([lead.as_bytes(), &[a, b]].concat());
            }
        }
    }
    let n = tokens.len();
    tokens.push(b"<eos>".to_vec());
    let mut special = vec![false; n + 1];
    special[n] = true;
    let vocab = Arc::new(Vocab::from_parts(tokens, special, vec![n as u32]).unwrap());
    let weather = json!({"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 8},
                       "days": {"type": "integer", "minimum": 1, "maximum": 3}},
        "required": ["city"]}});
    let ping = json!({"name": "ping", "parameters": {"type": "object", "properties": {}}});
    let tools = Tools::from_openai_json(&json!([ping, weather])).unwrap();
    let mut mask = TokenMask::new(vocab.len());
    for d in ["hermes", "functools", "pythonic", "llama31_json", "empower"] {
        for choice in ["auto", "required"] {
            let opts = DialectOptions::default().tool_choice(choice.parse().unwrap());
            let g = Dialect::by_name(d).unwrap().compile(&tools, &opts).unwrap();
            let auto = TokenAutomaton::new(&g, vocab.clone()).unwrap();
            let walks = |auto: &TokenAutomaton, mask: &mut TokenMask| {
                let mut rng = StdRng::seed_from_u64(7);
                let mut masks: Vec<Vec<u32>> = Vec::new();
                for _ in 0..6 {
                    let mut m = auto.matcher();
                    for _ in 0..40 {
                        m.fill_mask(mask);
                        let allowed: Vec<u32> = mask.iter().collect();
                        masks.push(allowed.clone());
                        if allowed.is_empty() || m.is_finished() {
                            break;
                        }
                        let t = allowed[rng.random_range(0..allowed.len())];
                        if vocab.eos_tokens().contains(&t) || m.accept(t).is_err() {
                            break;
                        }
                    }
                }
                masks
            };
            let first = walks(&auto, &mut mask);
            let again = walks(&auto, &mut mask);
            assert_eq!(first, again, "{d} {choice}: cached masks differ");
            let fresh = TokenAutomaton::new(&g, vocab.clone()).unwrap();
            assert_eq!(
                first,
                walks(&fresh, &mut mask),
                "{d} {choice}: a fresh automaton"
            );
            assert!(first.len() > 20, "{d} {choice}: walks too short");
        }
    }
}

/// A vocabulary rich in whitespace: runs of spaces, tabs and line breaks longer than the
/// policies allow, indentations, and whitespace glued to JSON's punctuation.
fn whitespace_vocab() -> Arc<Vocab> {
    let mut extra: Vec<String> = Vec::new();
    for k in 2..=24 {
        extra.push(" ".repeat(k));
    }
    for k in 0..=12 {
        extra.push(format!("\n{}", " ".repeat(k)));
        extra.push(format!(",\n{}\"", " ".repeat(k)));
        extra.push(format!("{{\n{}\"", " ".repeat(k)));
        extra.push(format!("\n{}}}", " ".repeat(k)));
    }
    for t in [
        "\t\t",
        "\t\t\t",
        "\n\t",
        "\n\t\t",
        "\n\n",
        " \n",
        "\r\n",
        " \t",
        "\t ",
        " {",
        "{\n",
        "[\n",
        "[\n  ",
        "\n]",
        "\n  ]",
        " [",
        " }",
        " ]",
        ": ",
        ":  ",
        ", ",
        ",  ",
        "\n ",
        "\" ",
        "\"\n",
        " \"",
        "  \"",
        "1 ",
        "1\n",
        "true ",
        "null\n",
        "kids",
        "\"kids\": [",
    ] {
        extra.push(t.to_string());
    }
    extra.sort();
    extra.dedup();
    small_vocab_plus(
        extra
            .into_iter()
            .filter(|t| t.len() > 1)
            .map(String::into_bytes),
    )
}

/// Gaps are walked as lexemes (one automaton per kind and depth, then the frame with its gap
/// closed): under every whitespace policy, in JSON Schema grammars and in a dialect whose
/// arguments are JSON inside a JSON string (gaps of spaces only), every mask along random walks
/// that favour whitespace equals the set of tokens `accept` takes.
#[test]
fn gap_masks_agree_with_accept_under_every_whitespace_policy() {
    use callmask::{Dialect, DialectOptions, Tools, Whitespace};
    let vocab = whitespace_vocab();
    let spacey: Vec<u32> = (0..vocab.len() as u32)
        .filter(|&t| {
            !vocab.is_special(t)
                && vocab
                    .token_bytes(t)
                    .unwrap()
                    .iter()
                    .any(|b| b" \t\n\r".contains(b))
        })
        .collect();
    let policies = [
        (Whitespace::Any, 3),
        (Whitespace::Any, 20),
        (Whitespace::Tidy { indent: 2 }, 3),
        (Whitespace::Tidy { indent: 4 }, 20),
        (Whitespace::Tidy { indent: 4 }, 0),
    ];
    let all = schemas();
    let tools = Tools::from_openai_json(&json!([{"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
        "days": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
        "required": ["city"]}}]))
    .unwrap();
    let mut checked = 0usize;
    for (pi, (whitespace, max)) in policies.into_iter().enumerate() {
        let mut opts = CompileOptions::default();
        opts.whitespace = whitespace;
        opts.max_whitespace = max;
        let mut grammars: Vec<(String, Grammar)> = [0, 1, 2]
            .iter()
            .map(|&si| {
                let g = Grammar::from_json_schema(&all[si], &opts).unwrap();
                (format!("schema {si}"), g)
            })
            .collect();
        for d in ["empower", "hermes"] {
            let mut dopts = DialectOptions::default();
            dopts.compile = opts.clone();
            let g = Dialect::by_name(d)
                .unwrap()
                .compile(&tools, &dopts)
                .unwrap();
            grammars.push((d.to_string(), g));
        }
        for (name, grammar) in &grammars {
            let auto = TokenAutomaton::new(grammar, vocab.clone()).unwrap();
            let mut rng = StdRng::seed_from_u64(pi as u64 * 7 + name.len() as u64);
            for walk in 0..12 {
                let what = format!("policy {pi} {name} walk {walk}");
                checked +=
                    walk_checking_masks(&auto, &mut rng, 80, &spacey, (0.2, 0.6), &what).checked;
            }
        }
    }
    assert!(checked > 2000, "only {checked} masks checked");
}

/// One random walk of at most `steps` tokens through `auto`'s masks (the distinct-calls rule
/// off), each mask checked against `is_allowed` for every token: the end-of-sequence token
/// drawn with probability `p.0` where allowed, else one of `favoured` (sorted) with `p.1`,
/// else any allowed token. `what` names the walk in failures.
fn walk_checking_masks(
    auto: &TokenAutomaton,
    rng: &mut StdRng,
    steps: usize,
    favoured: &[u32],
    p: (f64, f64),
    what: &str,
) -> Walk {
    let vocab = auto.vocab();
    let eos = vocab.eos_tokens()[0];
    let mut mask = TokenMask::new(vocab.len());
    let mut m = auto.matcher();
    m.set_distinct_calls(false);
    let mut text = Vec::new();
    let mut checked = 0;
    for _ in 0..steps {
        m.fill_mask(&mut mask);
        for t in 0..vocab.len() as u32 {
            assert_eq!(
                mask.is_allowed(t),
                m.is_allowed(t),
                "{what} token {t} ({:?}) after {:?}",
                String::from_utf8_lossy(vocab.token_bytes(t).unwrap()),
                String::from_utf8_lossy(&text)
            );
        }
        checked += 1;
        let allowed: Vec<u32> = mask.iter().collect();
        assert!(
            !allowed.is_empty(),
            "{what}: dead end after {:?}",
            String::from_utf8_lossy(&text)
        );
        let liked: Vec<u32> = allowed
            .iter()
            .copied()
            .filter(|t| favoured.binary_search(t).is_ok())
            .collect();
        let t = if mask.is_allowed(eos) && rng.random_bool(p.0) {
            eos
        } else if !liked.is_empty() && rng.random_bool(p.1) {
            liked[rng.random_range(0..liked.len())]
        } else {
            allowed[rng.random_range(0..allowed.len())]
        };
        m.accept(t).unwrap();
        if t == eos {
            break;
        }
        text.extend_from_slice(vocab.token_bytes(t).unwrap());
    }
    Walk {
        checked,
        finished: m.is_finished(),
        text,
    }
}

/// What [`walk_checking_masks`] saw: the masks checked, and the output (its bytes, and whether
/// the matcher finished it).
struct Walk {
    checked: usize,
    finished: bool,
    text: Vec<u8>,
}
