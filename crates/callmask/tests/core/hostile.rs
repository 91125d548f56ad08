//! Hostile inputs and configured limits: every limit of [`CompileOptions`] is reachable and
//! reported by name as [`Error::LimitExceeded`]; huge or pathological schemas, patterns and
//! tool names compile within limits or fail with a typed error; masks stay sound over a
//! vocabulary of broken UTF-8; matcher history and mask caches stay bounded.
//!
//! Anything that could hang runs on a thread with a deadline (hang detection only, no timing
//! assertions).

use callmask_testkit as testkit;

use std::sync::{mpsc, Arc};
use std::time::Duration;

use callmask::mask::DEFAULT_MAX_ROLLBACK;
use callmask::{
    CompileOptions, Dialect, DialectOptions, Error, Grammar, TokenAutomaton, TokenMask, Tool,
    Tools, Vocab,
};
use serde_json::{json, Value};

/// Runs `f` on a thread with Rust's default 2 MiB stack; fails the test if it has not
/// returned after `limit` (a hang) or if it panicked.
fn with_deadline<T: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let _ = tx.send(f());
        })
        .unwrap();
    match rx.recv_timeout(limit) {
        Ok(v) => {
            handle.join().unwrap();
            v
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let e = handle.join().unwrap_err();
            std::panic::resume_unwind(e)
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: still running after {limit:?}"),
    }
}

/// Compiles `schema` with `opts` under a deadline.
fn compile_with(what: &str, schema: Value, opts: CompileOptions) -> Result<Grammar, Error> {
    with_deadline(what, Duration::from_secs(60), move || {
        Grammar::from_json_schema(&schema, &opts)
    })
}

fn compile(what: &str, schema: Value) -> Result<Grammar, Error> {
    compile_with(what, schema, CompileOptions::default())
}

fn accepts(g: &Grammar, text: &str) -> bool {
    g.check_bytes(text.as_bytes()).is_ok()
}

/// The `what` of a [`Error::LimitExceeded`], or a panic naming what came instead.
fn limit_name(what: &str, r: Result<Grammar, Error>) -> &'static str {
    match r {
        Err(Error::LimitExceeded { what, .. }) => what,
        other => panic!(
            "{what}: want LimitExceeded, got {:?}",
            other.map(|_| "Ok(grammar)")
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Each limit, by name

fn wide_object(n: usize) -> Value {
    let props: serde_json::Map<String, Value> = (0..n)
        .map(|i| (format!("p{i}"), json!({"type": "string", "maxLength": 5})))
        .collect();
    json!({"type": "object", "properties": props})
}

#[test]
fn each_limit_is_reported_by_name() {
    let d = CompileOptions::default;
    let cases: Vec<(&str, CompileOptions, Value, &str)> = vec![
        (
            "schema depth",
            d().max_schema_depth(5),
            json!({"type": "array", "items": {"type": "array", "items": {"type": "array", "items":
                {"type": "array", "items": {"type": "array", "items": {"type": "array", "items":
                {"type": "array", "items": {"type": "integer"}}}}}}}}),
            "nesting",
        ),
        (
            "schema size",
            d().max_schema_values(100),
            json!({"enum": (0..200).collect::<Vec<_>>()}),
            "schema size",
        ),
        (
            "one lexeme",
            d().max_lexeme_states(50),
            json!({"type": "string", "pattern": "^[a-z]{100}$"}),
            "lexeme",
        ),
        (
            "total states",
            d().max_total_states(200),
            wide_object(50),
            "automaton states",
        ),
        ("nodes", d().max_nodes(20), wide_object(50), "grammar nodes"),
        ("memory", d().max_memory(20_000), wide_object(200), "memory"),
        (
            "compile time",
            d().max_compile_time(Duration::ZERO),
            wide_object(50),
            "compile time",
        ),
    ];
    for (name, opts, schema, want) in cases {
        // Within the default limits, the same schema compiles.
        compile(name, schema.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let what = limit_name(name, compile_with(name, schema, opts));
        assert!(what.contains(want), "{name}: limit named {what:?}");
    }
}

#[test]
fn dialect_compile_applies_the_same_limits() {
    let tool = |params: Value| {
        Tools::new(vec![Tool {
            strict: None,
            name: "f".into(),
            description: None,
            parameters: Some(params),
        }])
        .unwrap()
    };
    // Not strict: the extra-key lexemes are part of what the limits must catch.
    let opts = |compile: CompileOptions| {
        DialectOptions::default()
            .compile(compile)
            .strict_arguments(false)
    };
    let d = CompileOptions::default;
    let cases: Vec<(CompileOptions, Value, &str)> = vec![
        (d().max_schema_values(100), wide_object(50), "schema size"),
        (d().max_memory(20_000), wide_object(200), "memory"),
        (d().max_nodes(20), wide_object(50), "grammar nodes"),
        (
            d().max_total_states(200),
            wide_object(50),
            "automaton states",
        ),
        (
            d().max_compile_time(Duration::ZERO),
            wide_object(50),
            "compile time",
        ),
    ];
    for dialect in Dialect::builtin_names() {
        let dl = Dialect::by_name(dialect).unwrap();
        for (compile_opts, params, want) in &cases {
            let tools = tool(params.clone());
            dl.compile(&tools, &DialectOptions::default())
                .unwrap_or_else(|e| panic!("{dialect} {want}: {e}"));
            match dl.compile(&tools, &opts(compile_opts.clone())) {
                Err(Error::LimitExceeded { what, .. }) => {
                    assert!(what.contains(want), "{dialect}: limit named {what:?}")
                }
                other => panic!(
                    "{dialect} {want}: want LimitExceeded, got {:?}",
                    other.map(|_| "Ok(grammar)")
                ),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Huge and pathological schemas

#[test]
fn enum_of_100k_values() {
    let values: Vec<String> = (0..100_000).map(|i| format!("value_{i:06}")).collect();
    let schema = json!({"enum": values});
    let r = compile("100k enum", schema.clone());
    eprintln!("100k-value enum: {:?}", r.as_ref().map(|_| "compiled"));
    match r {
        Ok(g) => {
            assert!(accepts(&g, "\"value_000000\""));
            assert!(accepts(&g, "\"value_099999\""));
            assert!(!accepts(&g, "\"value_100000\""));
            assert!(!accepts(&g, "\"value_00000\""));
        }
        Err(Error::LimitExceeded { .. }) => {}
        Err(e) => panic!("want Ok or LimitExceeded, got {e}"),
    }
    // A memory budget smaller than the enum's automaton refuses it by name.
    let small = CompileOptions::default().max_memory(1 << 20);
    let what = limit_name("100k enum, 1 MiB", compile_with("100k enum", schema, small));
    assert!(
        what.contains("memory") || what.contains("states"),
        "limit named {what:?}"
    );
    // Mixed-type enums (not one automaton) are bounded too.
    let mixed: Vec<Value> = (0..100_000)
        .map(|i| {
            if i % 2 == 0 {
                json!(i)
            } else {
                json!({ "k": i })
            }
        })
        .collect();
    match compile("100k mixed enum", json!({ "enum": mixed })) {
        Ok(g) => {
            assert!(accepts(&g, "{\"k\":99999}"));
            assert!(!accepts(&g, "{\"k\":99998}"));
        }
        Err(Error::LimitExceeded { .. }) => {}
        Err(e) => panic!("mixed: want Ok or LimitExceeded, got {e}"),
    }
}

#[test]
fn pattern_of_100_kb() {
    // 10,000 alternatives: a 100 KB regex.
    let words: Vec<String> = (0..10_000).map(|i| format!("w{i:07}x")).collect();
    let pattern = format!("^(?:{})$", words.join("|"));
    assert!(pattern.len() >= 100_000);
    let r = compile(
        "100 KB pattern",
        json!({"type": "string", "pattern": pattern}),
    );
    match r {
        Ok(g) => {
            assert!(accepts(&g, "\"w0009999x\""));
            assert!(!accepts(&g, "\"w0010000x\""));
        }
        Err(Error::LimitExceeded { .. }) => {}
        Err(e) => panic!("want Ok or LimitExceeded, got {e}"),
    }
    // One literal of 100 KB.
    let long = "ab".repeat(50_000);
    let r = compile(
        "100 KB literal pattern",
        json!({"type": "string", "pattern": format!("^{long}$")}),
    );
    match r {
        Ok(g) => {
            assert!(accepts(&g, &format!("\"{long}\"")));
            assert!(!accepts(&g, &format!("\"{long}a\"")));
        }
        Err(Error::LimitExceeded { .. }) => {}
        Err(e) => panic!("want Ok or LimitExceeded, got {e}"),
    }
}

#[test]
fn catastrophic_regexes() {
    // Backtracking blow-ups are linear for automata; the last one is a huge counted repetition.
    let cases: [(&str, &[&str], &[&str]); 3] = [
        (
            "(a+)+$",
            &["a", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "xa"],
            &["", "ab"],
        ),
        (
            "^(a|a)*b",
            &["b", "aaaaaaaaaaaaaaaaaaab", "bzz"],
            &["aaaa", "c"],
        ),
        ("^(x{1,1000}){1,1000}$", &["x", "xxxxxxxx"], &["", "xy"]),
    ];
    for (pattern, yes, no) in cases {
        let r = compile(pattern, json!({"type": "string", "pattern": pattern}));
        eprintln!("{pattern}: {:?}", r.as_ref().map(|_| "compiled"));
        match r {
            Ok(g) => {
                for s in yes {
                    assert!(accepts(&g, &format!("\"{s}\"")), "{pattern} rejects {s:?}");
                }
                for s in no {
                    assert!(!accepts(&g, &format!("\"{s}\"")), "{pattern} accepts {s:?}");
                }
            }
            Err(Error::LimitExceeded { .. }) => {}
            Err(e) => panic!("{pattern}: want Ok or LimitExceeded, got {e}"),
        }
    }
}

#[test]
fn recursive_schema_is_bounded_by_max_depth() {
    let tree = json!({
        "type": "object",
        "properties": {"c": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["c"],
        "additionalProperties": false
    });
    // `d` levels around the innermost {"c":[]}: 2d + 2 nested objects and arrays.
    let nested = |d: usize| format!("{}{{\"c\":[]}}{}", "{\"c\":[".repeat(d), "]}".repeat(d));
    let g = compile("tree", tree.clone()).unwrap();
    assert!(accepts(&g, &nested(0)));
    assert!(accepts(&g, &nested(20)));
    // Each level is an object and an array: 2 nestings per level, at most 64.
    assert!(accepts(&g, &nested(31)));
    assert!(!accepts(&g, &nested(32)), "deeper than max_depth");
    let shallow = CompileOptions::default().max_depth(6);
    let g = compile_with("tree", tree, shallow).unwrap();
    assert!(accepts(&g, &nested(2)));
    assert!(!accepts(&g, &nested(3)));
}

/// `allOf` parts whose properties refer back to the schema itself (the shape of SchemaStore's
/// `minecraft-item-modifier.json` "number provider", found by the JSONSchemaBench run): merging
/// them expanded the references into each other without bound (24 GB before the kernel killed
/// the process). Now the merge stops at its node limit, by name.
#[test]
fn self_referring_allof_parts_are_bounded() {
    let kinds: Vec<String> = (0..8).map(|i| format!("k{i}")).collect();
    let provider = |k: &str| {
        let mut then = serde_json::Map::new();
        for p in ["min", "max", "n", k] {
            then.insert(
                p.into(),
                json!({"type": ["number", "object"], "$ref": "#/definitions/p"}),
            );
        }
        json!({
            "if": {"properties": {"type": {"const": k}}},
            "then": {"properties": then}
        })
    };
    let schema = json!({
        "definitions": {"p": {
            "properties": {"type": {"enum": kinds}},
            "allOf": kinds.iter().map(|k| provider(k)).collect::<Vec<_>>()
        }},
        "type": "object",
        "properties": {"count": {"$ref": "#/definitions/p"}}
    });
    let r = compile("self-referring allOf", schema);
    let what = limit_name("self-referring allOf", r);
    assert!(what.contains("allOf"), "{what}");
}

/// A small byte vocabulary: every printable ASCII byte, some multi-byte pieces, and an end token.
fn tiny_vocab(extra: &[&[u8]]) -> Arc<Vocab> {
    let mut tokens: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
    tokens.extend(extra.iter().map(|t| t.to_vec()));
    tokens.push(b"</s>".to_vec());
    let n = tokens.len();
    let mut special = vec![false; n];
    special[n - 1] = true;
    Arc::new(Vocab::from_parts(tokens, special, vec![n as u32 - 1]).unwrap())
}

/// A deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Random walks over `automaton`, each picking tokens from the mask: every allowed token is
/// accepted, and the walk never reaches an empty mask unless the output is finished. Returns
/// the completed outputs.
fn walk_never_dead_ends(automaton: &TokenAutomaton, walks: usize, steps: usize) -> Vec<Vec<u8>> {
    let vocab = automaton.vocab().clone();
    let mut mask = TokenMask::new(vocab.len());
    let mut done = Vec::new();
    for seed in 0..walks as u64 {
        let mut rng = Rng(seed * 0x9e37_79b9_7f4a_7c15 + 1);
        let mut m = automaton.matcher();
        for _ in 0..steps {
            m.fill_mask(&mut mask);
            let allowed: Vec<u32> = mask.iter().collect();
            if allowed.is_empty() {
                assert!(m.is_finished(), "dead end after {:?}", m.accepted_tokens());
                break;
            }
            for &t in allowed.iter().take(50) {
                assert!(
                    m.is_allowed(t),
                    "mask allows {t} but accept would refuse it"
                );
            }
            let t = allowed[rng.below(allowed.len())];
            m.accept(t).unwrap();
            if m.is_finished() {
                let toks: Vec<u32> = m
                    .accepted_tokens()
                    .iter()
                    .copied()
                    .filter(|&t| !vocab.is_eos(t))
                    .collect();
                done.push(vocab.decode(&toks));
                break;
            }
        }
    }
    done
}

#[test]
fn ref_loops_error_or_never_dead_end() {
    let vocab = tiny_vocab(&[]);
    let cases = [
        json!({"$ref": "#"}),
        json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
        json!({
            "$defs": {
                "a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/b"}}, "required": ["x"]},
                "b": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}
            },
            "$ref": "#/$defs/a"
        }),
        json!({"anyOf": [{"$ref": "#"}, {"type": "array", "items": {"$ref": "#"}, "minItems": 1}]}),
        json!({"allOf": [{"$ref": "#"}]}),
    ];
    for schema in cases {
        let r = compile("ref loop", schema.clone());
        eprintln!(
            "{schema}: {:?}",
            r.as_ref().map_err(|e| e.to_string()).map(|_| ())
        );
        let g = match r {
            Err(
                Error::LimitExceeded { .. }
                | Error::InvalidSchema { .. }
                | Error::UnresolvedRef { .. },
            ) => continue,
            Err(e) => panic!("{schema}: unexpected error kind {e}"),
            Ok(g) => g,
        };
        if g.is_empty() {
            // No output at all: the automaton refuses it or admits nothing but can say so.
            match TokenAutomaton::new(&g, vocab.clone()) {
                Err(_) => continue,
                Ok(a) => {
                    let mut m = a.matcher();
                    let mut mask = TokenMask::new(vocab.len());
                    m.fill_mask(&mut mask);
                    assert_eq!(mask.count(), 0, "{schema}: empty grammar allows tokens");
                    continue;
                }
            }
        }
        let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        for out in walk_never_dead_ends(&a, 20, 60) {
            let v: Value = serde_json::from_slice(&out).expect("finished output is JSON");
            let _ = v;
        }
    }
}

#[test]
fn five_thousand_properties_in_a_dialect() {
    let params = json!({
        "type": "object",
        "properties": (0..5_000).map(|i| (format!("arg_{i:04}"), json!({"type": "integer"})))
            .collect::<serde_json::Map<_, _>>(),
        "required": ["arg_4999"],
        "additionalProperties": false
    });
    let tools = Tools::new(vec![Tool {
        strict: None,
        name: "wide".into(),
        description: None,
        parameters: Some(params),
    }])
    .unwrap();
    let g = with_deadline("5000 properties", Duration::from_secs(60), move || {
        Dialect::by_name("hermes")
            .unwrap()
            .compile(&tools, &DialectOptions::default())
    })
    .unwrap();
    let ok = "<tool_call>\n{\"name\": \"wide\", \"arguments\": {\"arg_0001\": 1, \"arg_4999\": 2}}\n</tool_call>";
    let parsed = g.parse(ok).unwrap();
    assert_eq!(parsed.tool_calls.len(), 1);
    assert_eq!(
        parsed.tool_calls[0].arguments_json().unwrap(),
        json!({"arg_0001": 1, "arg_4999": 2})
    );
    assert!(g.parse(&ok.replace("arg_0001", "arg_5000")).is_err());
    assert!(g.parse(&ok.replace(", \"arg_4999\": 2", "")).is_err());
}

// ---------------------------------------------------------------------------------------------
// Tool names

use callmask_testkit::writer;

#[test]
fn tool_names_with_quotes_and_unicode() {
    let names = [
        "say\"hi",
        "it's",
        "back\\slash",
        "café",
        "rocket_🚀",
        "plain_name",
    ];
    for dialect in Dialect::builtin_names() {
        let dl = Dialect::by_name(dialect).unwrap();
        for name in names {
            let tools = Tools::new(vec![Tool {
                strict: None,
                name: name.into(),
                description: None,
                parameters: Some(json!({
                    "type": "object",
                    "properties": {"x": {"type": "integer"}},
                    "required": ["x"]
                })),
            }])
            .unwrap();
            let opts = DialectOptions::default();
            match dl.compile(&tools, &opts) {
                Ok(g) => {
                    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
                    let text = writer::write(dialect, "", &[(leaked, json!({"x": 7}))]);
                    let parsed = g
                        .parse(&text)
                        .unwrap_or_else(|e| panic!("{dialect} {name:?}: {text:?}: {e}"));
                    assert_eq!(parsed.tool_calls.len(), 1, "{dialect} {name:?}");
                    assert_eq!(parsed.tool_calls[0].function.name, name, "{dialect}");
                    assert_eq!(
                        parsed.tool_calls[0].arguments_json().unwrap(),
                        json!({"x": 7}),
                        "{dialect} {name:?}"
                    );
                }
                Err(e @ Error::Unrepresentable { .. }) => {
                    assert!(
                        e.to_string().contains(&format!("{name:?}")),
                        "{dialect}: error does not name {name:?}: {e}"
                    );
                    assert_ne!(name, "plain_name", "{dialect}: {e}");
                }
                Err(e) => panic!("{dialect} {name:?}: want Ok or Unrepresentable, got {e}"),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Vocabularies and matchers

#[test]
fn broken_utf8_tokens_keep_masks_sound() {
    let extra: &[&[u8]] = &[
        &[0xff],
        &[0xc3],
        &[0xa9],
        &[0xc3, 0xa9],
        &[0xe2, 0x82],
        &[0xac],
        &[0xf0, 0x9f, 0x9a],
        &[0x80],
        &[0xc0, 0xaf],
    ];
    let vocab = tiny_vocab(extra);
    let id = |b: &[u8]| vocab.token_id(b).unwrap();
    for schema in [
        json!({"type": "string"}),
        json!({"type": "string", "pattern": "^(é|€|x)*$"}),
        json!({"type": "object", "additionalProperties": {"type": "string"}}),
        json!({"type": "array", "items": {"enum": ["é", "€€", "plain"]}}),
    ] {
        let g = compile("utf8", schema.clone()).unwrap();
        let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        let mut m = a.matcher();
        let mut mask = TokenMask::new(vocab.len());
        // Bytes that never occur in UTF-8 are never allowed.
        for _ in 0..3 {
            m.fill_mask(&mut mask);
            for bad in [id(&[0xff]), id(&[0x80]), id(&[0xc0, 0xaf])] {
                assert!(!mask.is_allowed(bad), "{schema}: {bad} allowed");
                assert!(!m.is_allowed(bad));
            }
            let first = mask.iter().find(|&t| t != id(b"\"")).unwrap_or(id(b"\""));
            m.accept(first).unwrap();
        }
        // Inside a string, a lone lead byte is allowed only where a continuation may follow,
        // and then only continuations are.
        let outs = walk_never_dead_ends(&a, 200, 40);
        assert!(!outs.is_empty(), "{schema}: no walk finished");
        for out in outs {
            let s = std::str::from_utf8(&out)
                .unwrap_or_else(|e| panic!("{schema}: output {out:?} is not UTF-8: {e}"));
            assert!(
                accepts(&g, s),
                "{schema}: {s:?} rejected by the byte grammar"
            );
            let v: Value = serde_json::from_str(s).unwrap();
            if schema.get("pattern").is_some() {
                let t = v.as_str().unwrap();
                assert!(t.chars().all(|c| "é€x".contains(c)), "{t:?}");
            }
        }
    }
    // Out-of-range ids.
    let g = compile("string", json!({"type": "string"})).unwrap();
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let mut m = a.matcher();
    for t in [vocab.len() as u32, u32::MAX] {
        assert!(!m.is_allowed(t));
        assert!(matches!(
            m.accept(t),
            Err(Error::TokenOutOfVocabulary { token, .. }) if token == t
        ));
    }
    // After the end token, nothing more.
    m.accept(id(b"\"")).unwrap();
    m.accept(id(b"\"")).unwrap();
    let eos = vocab.eos_tokens()[0];
    m.accept(eos).unwrap();
    assert!(m.is_finished());
    assert!(matches!(
        m.accept(id(b"a")),
        Err(Error::TokenForbidden { .. })
    ));
    assert!(matches!(m.accept(eos), Err(Error::TokenForbidden { .. })));
}

#[test]
fn rollback_window_is_bounded_and_typed() {
    let vocab = tiny_vocab(&[]);
    let g = compile("string", json!({"type": "string"})).unwrap();
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let id = |b: &[u8]| vocab.token_id(b).unwrap();
    let mut mask = TokenMask::new(vocab.len());

    // Default window: DEFAULT_MAX_ROLLBACK snapshots, however long the output.
    let mut m = a.matcher();
    m.accept(id(b"\"")).unwrap();
    for _ in 0..DEFAULT_MAX_ROLLBACK + 500 {
        m.accept(id(b"a")).unwrap();
    }
    assert_eq!(m.accepted_tokens().len(), DEFAULT_MAX_ROLLBACK + 501);
    assert_eq!(m.rollback_available(), DEFAULT_MAX_ROLLBACK);
    match m.rollback(DEFAULT_MAX_ROLLBACK + 1) {
        Err(Error::Rollback {
            requested,
            available,
        }) => assert_eq!(
            (requested, available),
            (DEFAULT_MAX_ROLLBACK + 1, DEFAULT_MAX_ROLLBACK)
        ),
        other => panic!("want Rollback, got {other:?}"),
    }
    m.rollback(DEFAULT_MAX_ROLLBACK).unwrap();
    assert_eq!(m.accepted_tokens().len(), 501);
    assert!(m.accept(id(b"\"")).is_ok());

    // A small window, set mid-way: older snapshots are dropped now; rollback within it works.
    let mut m = a.matcher();
    m.fill_mask(&mut mask);
    for t in [b"\"", b"a", b"b", b"c", b"d"] {
        m.accept(id(t)).unwrap();
    }
    let mut before = a.matcher();
    for t in [b"\"", b"a"] {
        before.accept(id(t)).unwrap();
    }
    m.set_max_rollback(3);
    assert_eq!(m.rollback_available(), 3);
    assert!(matches!(
        m.rollback(4),
        Err(Error::Rollback { available: 3, .. })
    ));
    assert_eq!(
        m.accepted_tokens().len(),
        5,
        "a failed rollback changes nothing"
    );
    m.rollback(3).unwrap();
    assert_eq!(m.accepted_tokens(), before.accepted_tokens());
    assert_eq!(m.state_hash(), before.state_hash());
    assert!(matches!(m.rollback(1), Err(Error::Rollback { .. })));

    // Unlimited keeps every snapshot.
    let mut m = a.matcher();
    m.set_max_rollback(usize::MAX);
    m.accept(id(b"\"")).unwrap();
    for _ in 0..DEFAULT_MAX_ROLLBACK + 10 {
        m.accept(id(b"a")).unwrap();
    }
    m.rollback(DEFAULT_MAX_ROLLBACK + 11).unwrap();
    assert!(m.accepted_tokens().is_empty());
}

#[test]
fn mask_caches_stay_bounded() {
    // Many distinct top frames: objects whose seen-key sets differ, strings with counters.
    let vocab = testkit::llama_vocab();
    let props: serde_json::Map<String, Value> = (0..40)
        .map(|i| {
            (
                format!("k{i}"),
                json!({"type": "string", "minLength": i, "maxLength": 40 + i}),
            )
        })
        .collect();
    let g = compile(
        "cache",
        json!({"type": "object", "properties": props, "additionalProperties": false}),
    )
    .unwrap();
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let mut mask = TokenMask::new(vocab.len());
    let mut rng = Rng(7);
    // 30 random walks of up to 40 steps each, under `budget`.
    let mut walk = |budget: Option<usize>| {
        for _ in 0..30 {
            let mut m = a.matcher();
            m.set_token_budget(budget).unwrap();
            for _ in 0..40 {
                m.fill_mask(&mut mask);
                let allowed: Vec<u32> = mask.iter().collect();
                if allowed.is_empty() || m.is_finished() {
                    break;
                }
                m.accept(allowed[rng.below(allowed.len())]).unwrap();
            }
        }
    };
    walk(None);
    let bytes = a.cache_bytes();
    eprintln!("cache after 1200 steps: {bytes} bytes");
    assert!(bytes > 0);
    // 64 MiB of walks + 16 MiB of the distinct-calls search's steps + 512 whole masks.
    assert!(bytes <= (80 << 20) + 512 * vocab.len().div_ceil(8));
    // Under a token budget the masks come from per-state costs: counted, and bounded too.
    walk(Some(400));
    let with_costs = a.cache_bytes();
    eprintln!("cache after 1200 budgeted steps: {with_costs} bytes");
    // (Seeded walks: the top-frame walks they add are 1.9 MB, with the costs 9.1 MB.)
    assert!(
        with_costs > bytes + (4 << 20),
        "the budget's costs are counted"
    );
    // 64 MiB of walks + 64 MiB of costs + 16 MiB of search steps + 512 whole masks.
    assert!(with_costs <= (144 << 20) + 512 * vocab.len().div_ceil(8));
}
