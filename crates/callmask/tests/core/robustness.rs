//! Bad and hostile inputs get a clear typed error (or compile within limits), never a panic, a
//! hang or unbounded memory; and property tests over random schemas × random instances, with the
//! `jsonschema` crate as the oracle.
//!
//! Soundness is absolute: an instance `check_bytes` accepts must be valid. Completeness (valid
//! instances accepted in the compact serialization) is measured and held to a floor.

use callmask_testkit as testkit;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use callmask::{CompileOptions, Error, Grammar, TokenAutomaton, TokenMask};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{json, Value};

fn strict() -> CompileOptions {
    CompileOptions::default()
}

fn lenient() -> CompileOptions {
    CompileOptions::default().lenient(true)
}

fn compile(schema: &Value) -> Result<Grammar, Error> {
    Grammar::from_json_schema(schema, &strict())
}

fn accepts(grammar: &Grammar, text: &str) -> bool {
    grammar.check_bytes(text.as_bytes()).is_ok()
}

// ---------------------------------------------------------------------------------------------
// Bad schemas

#[test]
fn malformed_schema_json_is_a_json_error() {
    for text in [
        r#"{"type": "object",,}"#,
        r#"{"type": "object""#,
        r#"{"type": 'string'}"#,
        "",
    ] {
        let parsed: Result<Value, Error> = serde_json::from_str(text).map_err(Error::from);
        assert!(
            matches!(parsed, Err(Error::Json(_))),
            "{text:?}: {parsed:?}"
        );
    }
}

#[test]
fn unknown_type_is_an_invalid_schema() {
    for schema in [
        json!({"type": "strin"}),
        json!({"type": ["string", "strin"]}),
        json!({"properties": {"a": {"type": "strin"}}}),
        json!({"type": 5}),
    ] {
        for options in [strict(), lenient()] {
            match Grammar::from_json_schema(&schema, &options) {
                Err(Error::InvalidSchema { message, path }) => {
                    assert!(!message.is_empty(), "{schema}: empty message (path {path})");
                }
                other => panic!(
                    "{schema} (lenient {}): want InvalidSchema, got {other:?}",
                    options.lenient
                ),
            }
        }
    }
    // The message names the bad type.
    let Err(e) = compile(&json!({"type": "strin"})) else {
        unreachable!()
    };
    assert!(e.to_string().contains("strin"), "{e}");
}

#[test]
fn wrongly_typed_keyword_values_are_invalid_schemas() {
    for schema in [
        json!({"type": "string", "minLength": -1}),
        json!({"type": "string", "maxLength": "5"}),
        json!({"type": "object", "required": "a"}),
        json!({"type": "integer", "minimum": "5"}),
        json!({"type": "object", "properties": []}),
        json!({"enum": 5}),
    ] {
        let r = compile(&schema);
        assert!(
            matches!(r, Err(Error::InvalidSchema { .. })),
            "{schema}: want InvalidSchema, got {:?}",
            r.map(|_| "Ok(grammar)")
        );
    }
}

#[test]
fn dangling_ref_is_unresolved() {
    match compile(&json!({"$ref": "#/$defs/missing"})) {
        Err(Error::UnresolvedRef { reference, .. }) => assert_eq!(reference, "#/$defs/missing"),
        other => panic!("want UnresolvedRef, got {:?}", other.map(|_| "Ok(grammar)")),
    }
    let schema = json!({
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/nope"}},
        "definitions": {"yes": {"type": "string"}}
    });
    for options in [strict(), lenient()] {
        match Grammar::from_json_schema(&schema, &options) {
            Err(Error::UnresolvedRef { reference, path }) => {
                assert_eq!(reference, "#/definitions/nope");
                assert!(path.contains("/properties/a"), "path {path:?}");
            }
            other => panic!("want UnresolvedRef, got {:?}", other.map(|_| "Ok(grammar)")),
        }
    }
    // A remote reference is not fetched.
    let r = compile(&json!({"$ref": "http://localhost:1234/integer.json"}));
    assert!(
        matches!(r, Err(Error::UnresolvedRef { .. })),
        "{:?}",
        r.map(|_| "Ok(grammar)")
    );
}

#[test]
fn pattern_that_does_not_compile() {
    match compile(&json!({"type": "string", "pattern": "(unclosed"})) {
        Err(Error::InvalidPattern { pattern, .. }) => assert_eq!(pattern, "(unclosed"),
        other => panic!(
            "want InvalidPattern, got {:?}",
            other.map(|_| "Ok(grammar)")
        ),
    }
    // ECMA-262 look-around and back-references have no finite automaton: a typed refusal.
    for pattern in ["^(?=a)a$", "^(a)\\1$"] {
        let r = compile(&json!({"type": "string", "pattern": pattern}));
        assert!(
            matches!(
                r,
                Err(Error::InvalidPattern { .. } | Error::UnsupportedKeyword { .. })
            ),
            "{pattern}: {:?}",
            r.map(|_| "Ok(grammar)")
        );
    }
}

#[test]
fn pattern_with_exponential_dfa_is_bounded() {
    // The classic DFA blow-up: (a|b)*a(a|b){n} needs 2^n DFA states.
    let schema = json!({"type": "string", "pattern": "^(a|b)*a(a|b){24}$"});
    let started = Instant::now();
    let r = compile(&schema);
    let elapsed = started.elapsed();
    eprintln!("exponential pattern: {elapsed:?}, ok: {}", r.is_ok());
    assert!(
        matches!(r, Ok(_) | Err(Error::LimitExceeded { .. })),
        "{:?}",
        r.map(|_| "Ok(grammar)")
    );
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    if let Ok(g) = r {
        let yes = format!("\"b{}\"", "a".repeat(25));
        let no = format!("\"{}\"", "b".repeat(25));
        assert!(accepts(&g, &yes));
        assert!(!accepts(&g, &no));
    }
}

#[test]
fn unsupported_keyword_is_refused_by_name_and_dropped_when_lenient() {
    let schema = json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true});
    match compile(&schema) {
        Err(Error::UnsupportedKeyword { keyword, .. }) => assert_eq!(keyword, "uniqueItems"),
        other => panic!(
            "want UnsupportedKeyword, got {:?}",
            other.map(|_| "Ok(grammar)")
        ),
    }
    let g = Grammar::from_json_schema(&schema, &lenient()).expect("lenient mode drops it");
    assert!(
        g.dropped_keywords()
            .iter()
            .any(|k| k.contains("uniqueItems")),
        "{:?}",
        g.dropped_keywords()
    );
    assert!(accepts(&g, "[1,1]"));
    assert!(!accepts(&g, "[1,\"a\"]"));
}

// ---------------------------------------------------------------------------------------------
// Huge and deep schemas

/// `{"type": "array", "items": ...}` nested `depth` times around `{"type": "integer"}`.
fn nested_arrays(depth: usize) -> Value {
    let mut v = json!({"type": "integer"});
    for _ in 0..depth {
        // Moved, not copied: `json!` would serialize `v` again at every level (quadratic).
        let mut m = serde_json::Map::new();
        m.insert("type".into(), json!("array"));
        m.insert("items".into(), v);
        v = Value::Object(m);
    }
    v
}

/// `{"type": "object", "properties": {"a": ...}}` nested `depth` times.
fn nested_objects(depth: usize) -> Value {
    let mut v = json!({"type": "integer"});
    for _ in 0..depth {
        let mut props = serde_json::Map::new();
        props.insert("a".into(), v);
        let mut m = serde_json::Map::new();
        m.insert("type".into(), json!("object"));
        m.insert("properties".into(), Value::Object(props));
        m.insert("required".into(), json!(["a"]));
        v = Value::Object(m);
    }
    v
}

#[test]
fn schema_nested_10000_deep_as_text_is_a_json_error() {
    let text = format!(
        "{}{{\"type\":\"integer\"}}{}",
        "{\"type\":\"array\",\"items\":".repeat(10_000),
        "}".repeat(10_000)
    );
    // serde_json refuses more than 128 levels: a typed error, not a stack overflow.
    let parsed: Result<Value, Error> = serde_json::from_str(&text).map_err(Error::from);
    assert!(matches!(parsed, Err(Error::Json(_))), "{parsed:?}");
}

/// Compiles `schema` on a thread with Rust's default 2 MiB stack (what spawned threads and tokio
/// workers get), checks `instance` on it, and drops the grammar there too. Any outcome but a
/// stack overflow returns; the caller asserts on it.
fn compile_on_small_stack(
    schema: Arc<Value>,
    instance: String,
) -> (Result<(), Error>, Option<bool>, Duration) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let started = Instant::now();
            let r = Grammar::from_json_schema(&schema, &strict());
            let elapsed = started.elapsed();
            let checked = r.as_ref().ok().map(|g| accepts(g, &instance));
            (r.map(drop), checked, elapsed)
        })
        .expect("spawn")
        .join()
        .expect("no panic")
}

/// Runs the named `#[ignore]`d test of this binary in a child process, so that a stack overflow
/// (an abort, which cannot be caught) fails that one test with a clear message instead of
/// killing the whole binary, and a hang is cut short after `limit`.
fn run_isolated(test: &str, limit: Duration) {
    // Test names are module paths without the crate's name (`robustness::deep_schema_child`).
    let test = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{test}"),
        None => test.to_string(),
    };
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            test.as_str(),
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running the test binary");
    // Drain the pipes on threads so that a chatty child cannot block on a full pipe.
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    eprintln!("{stdout}{stderr}");
    let Some(status) = status else {
        panic!("{test} still running after {limit:?}: killed (a hang); see its output above");
    };
    assert!(
        status.success(),
        "{test} failed or crashed ({status}): see its output above (a stack overflow aborts the process)"
    );
    assert!(stdout.contains("1 passed"), "{test} did not run: {stdout}");
}

#[test]
fn schema_nested_10000_deep_as_value() {
    run_isolated("deep_schema_child", Duration::from_secs(60));
}

#[test]
#[ignore = "run in a child process by schema_nested_10000_deep_as_value"]
fn deep_schema_child() {
    // Building and dropping a 10,000-deep Value recurses in serde_json itself: do it on a big
    // stack, and hand callmask only a shared reference on a small one.
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(|| {
            for (name, depth, schema, instance) in [
                (
                    "arrays",
                    10_000,
                    nested_arrays(10_000),
                    format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000)),
                ),
                (
                    "objects",
                    10_000,
                    nested_objects(10_000),
                    format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000)),
                ),
                (
                    "arrays",
                    2_000,
                    nested_arrays(2_000),
                    format!("{}1{}", "[".repeat(2_000), "]".repeat(2_000)),
                ),
            ] {
                let schema = Arc::new(schema);
                let (r, checked, elapsed) = compile_on_small_stack(schema.clone(), instance);
                eprintln!(
                    "{name} nested {depth} deep: {:?} in {elapsed:?}, instance accepted: {checked:?}",
                    r.as_ref().map_err(|e| e.to_string())
                );
                assert!(
                    matches!(r, Ok(()) | Err(Error::LimitExceeded { .. })),
                    "{name} {depth} deep: want Ok or LimitExceeded, got {r:?}"
                );
                assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
                if r.is_ok() {
                    assert_eq!(checked, Some(true), "{name} {depth} deep: instance rejected");
                }
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

/// Peak resident memory of this process, in MiB (Linux), for the report.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

#[test]
fn schema_of_5_mb() {
    run_isolated("huge_schema_child", Duration::from_secs(120));
}

#[test]
#[ignore = "run in a child process by schema_of_5_mb (for its own peak-memory figure)"]
fn huge_schema_child() {
    let n = 50_000;
    let mut properties = serde_json::Map::new();
    for i in 0..n {
        properties.insert(
            format!("property_{i:05}"),
            json!({
                "type": "string",
                "maxLength": 20,
                "description": "A property of a very large schema, here to make it weigh 5 MB."
            }),
        );
    }
    let required: Vec<String> = (0..100).map(|i| format!("property_{i:05}")).collect();
    let schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    });
    let size = serde_json::to_string(&schema).unwrap().len();
    assert!(size >= 5_000_000, "schema is only {size} bytes");

    let started = Instant::now();
    let r = compile(&schema);
    let elapsed = started.elapsed();
    eprintln!(
        "{size}-byte schema ({n} properties): {:?} in {elapsed:?}, peak RSS {:?} MiB",
        r.as_ref().map(|_| "compiled").map_err(|e| e.to_string()),
        peak_rss_mib()
    );
    assert!(
        matches!(r, Ok(_) | Err(Error::LimitExceeded { .. })),
        "want Ok or LimitExceeded, got {:?}",
        r.map(|_| "Ok(grammar)")
    );
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
    let Ok(g) = r else { return };

    let mut full = serde_json::Map::new();
    for i in 0..100 {
        full.insert(format!("property_{i:05}"), json!("x"));
    }
    full.insert("property_49999".into(), json!("last"));
    let full = serde_json::to_string(&full).unwrap();
    assert!(accepts(&g, &full));
    let missing = full.replacen("\"property_00000\":\"x\",", "", 1);
    assert!(!accepts(&g, &missing), "a required property is missing");
    let extra = full.replacen('{', "{\"property_50000\":\"x\",", 1);
    assert!(!accepts(&g, &extra), "an unknown property");

    // First mask on a real vocabulary: bounded too.
    let vocab = testkit::llama_vocab();
    let started = Instant::now();
    let automaton = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let mut m = automaton.matcher();
    let mut mask = TokenMask::new(vocab.len());
    m.fill_mask(&mut mask);
    for t in vocab.tokenize("{\"property_0").unwrap() {
        m.accept(t).unwrap();
    }
    m.fill_mask(&mut mask);
    let elapsed = started.elapsed();
    eprintln!(
        "first masks: {elapsed:?} ({} tokens allowed after `{{\"property_0`), peak RSS {:?} MiB",
        mask.count(),
        peak_rss_mib()
    );
    assert!(mask.count() > 0);
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
}

// ---------------------------------------------------------------------------------------------
// Token-level misuse

const OBJ: &str = r#"{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false}"#;

fn obj_automaton() -> (TokenAutomaton, Arc<callmask::Vocab>) {
    let vocab = testkit::llama_vocab();
    let schema: Value = serde_json::from_str(OBJ).unwrap();
    let g = compile(&schema).expect("compiles");
    (TokenAutomaton::new(&g, vocab.clone()).unwrap(), vocab)
}

fn mask_of(m: &mut callmask::Matcher, n: usize) -> Vec<u32> {
    let mut mask = TokenMask::new(n);
    m.fill_mask(&mut mask);
    mask.iter().collect()
}

#[test]
fn out_of_vocabulary_token() {
    let (a, vocab) = obj_automaton();
    let mut m = a.matcher();
    for t in [vocab.len() as u32, vocab.len() as u32 + 5, u32::MAX] {
        match m.accept(t) {
            Err(Error::TokenOutOfVocabulary { token, vocab_size }) => {
                assert_eq!(token, t);
                assert_eq!(vocab_size, vocab.len());
            }
            other => panic!("token {t}: want TokenOutOfVocabulary, got {other:?}"),
        }
    }
    assert!(m.accepted_tokens().is_empty());
}

#[test]
fn forbidden_token_leaves_the_matcher_usable() {
    let (a, vocab) = obj_automaton();
    let mut m = a.matcher();
    let before = mask_of(&mut m, vocab.len());
    let hello = vocab.tokenize("hello").unwrap()[0];
    assert!(!before.contains(&hello));
    match m.accept(hello) {
        Err(Error::TokenForbidden { token, .. }) => assert_eq!(token, hello),
        other => panic!("want TokenForbidden, got {other:?}"),
    }
    // End of generation is forbidden before the output is complete.
    let eos = vocab.eos_tokens()[0];
    assert!(!m.can_end());
    assert!(!before.contains(&eos));
    assert!(matches!(m.accept(eos), Err(Error::TokenForbidden { .. })));
    // Nothing changed: the same mask, and a valid text still goes through.
    assert!(m.accepted_tokens().is_empty());
    assert_eq!(mask_of(&mut m, vocab.len()), before);
    for t in vocab.tokenize(r#"{"a":12}"#).unwrap() {
        m.accept(t).unwrap();
    }
    assert!(m.can_end());
}

#[test]
fn rollback_too_far() {
    let (a, vocab) = obj_automaton();
    let mut m = a.matcher();
    let initial = mask_of(&mut m, vocab.len());
    let tokens = vocab.tokenize(r#"{"a":"#).unwrap();
    for &t in &tokens {
        m.accept(t).unwrap();
    }
    let k = tokens.len();
    match m.rollback(k + 1) {
        Err(Error::Rollback {
            requested,
            available,
        }) => {
            assert_eq!((requested, available), (k + 1, k));
        }
        other => panic!("want Rollback, got {other:?}"),
    }
    assert_eq!(
        m.accepted_tokens(),
        &tokens[..],
        "a failed rollback changes nothing"
    );
    m.rollback(k).unwrap();
    assert!(m.accepted_tokens().is_empty());
    assert_eq!(mask_of(&mut m, vocab.len()), initial);
    assert!(matches!(m.rollback(1), Err(Error::Rollback { .. })));
    m.rollback(0).unwrap();
}

#[test]
fn accept_after_end_of_generation() {
    let (a, vocab) = obj_automaton();
    let mut m = a.matcher();
    for t in vocab.tokenize(r#"{"a":7}"#).unwrap() {
        m.accept(t).unwrap();
    }
    assert!(m.can_end());
    let eos = vocab.eos_tokens()[0];
    assert!(mask_of(&mut m, vocab.len()).contains(&eos));
    m.accept(eos).unwrap();
    assert!(m.is_finished());
    assert!(
        mask_of(&mut m, vocab.len()).is_empty(),
        "nothing after the end"
    );
    let one = vocab.tokenize("1").unwrap()[0];
    assert!(matches!(m.accept(one), Err(Error::TokenForbidden { .. })));
    assert!(matches!(m.accept(eos), Err(Error::TokenForbidden { .. })));
    // Rolling back the end of generation reopens the sequence.
    m.rollback(1).unwrap();
    assert!(!m.is_finished());
    assert!(m.can_end());
}

#[test]
fn forked_matchers_are_independent() {
    let (a, vocab) = obj_automaton();
    let mut m = a.matcher();
    for t in vocab.tokenize(r#"{"a":"#).unwrap() {
        m.accept(t).unwrap();
    }
    let mut fork = m.clone();
    for t in vocab.tokenize("1}").unwrap() {
        fork.accept(t).unwrap();
    }
    assert!(fork.can_end());
    assert!(!m.can_end());
    for t in vocab.tokenize("23}").unwrap() {
        m.accept(t).unwrap();
    }
    assert!(m.can_end());
}

// ---------------------------------------------------------------------------------------------
// Property tests: random schemas × random instances, against the jsonschema crate.

/// A random schema, kept to keywords callmask promises to enforce exactly.
#[derive(Debug, Clone)]
enum S {
    Null,
    Bool,
    Int(Option<i64>, Option<i64>, bool),
    Num(Option<i64>, Option<i64>),
    Str(Option<usize>, Option<usize>),
    Pattern(usize),
    Format(usize),
    Enum(Vec<Value>),
    Const(Value),
    Any,
    Obj(Vec<(String, S, bool)>, Option<bool>, Vec<(usize, S)>),
    Arr(Box<S>, Option<usize>, Option<usize>),
    Tuple(Vec<S>),
    AnyOf(Vec<S>),
    Nullable(Box<S>),
    /// A number with fractional bounds, exclusive or not.
    NumF(Option<f64>, Option<f64>, bool),
    AllOf(Vec<S>),
    OneOf(Vec<S>),
    /// An object schema (the second) with more properties under `allOf` (the first): where the
    /// parts merge, and where `additionalProperties` must not see the `allOf` properties.
    ObjAllOf(Box<S>, Box<S>),
    /// A recursive tree through `$ref` at the root: nodes `{"v": S, "kids": [node...]}`.
    Tree(Box<S>),
    /// A `uniqueItems` array of strings (a string schema, or a union of them) with `minItems`.
    Unique(Box<S>, usize),
}

/// `pattern`s, with a regex proptest generates candidate strings from.
const PATTERNS: [(&str, &str); 4] = [
    ("^[a-c]{1,5}$", "[a-c]{0,6}"),
    ("^\\d{3}-\\d{2}$", "[0-9]{2,3}-[0-9]{2}"),
    ("b", "[abé]{0,4}"),
    ("^(foo|bar)+$", "(foo|bar|fo){0,3}"),
];

/// `format`s, with a regex proptest generates (mostly valid) candidates from.
const FORMATS: [(&str, &str); 10] = [
    (
        "date",
        "20[0-9]{2}-(0[1-9]|1[0-3])-(0[1-9]|[12][0-9]|3[01])",
    ),
    (
        "uuid",
        "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-fg]{12}",
    ),
    (
        "ipv4",
        "(25[0-6]|2[0-4][0-9]|1?[0-9]{1,2})(\\.(25[0-5]|1?[0-9]{1,2})){3}",
    ),
    ("hostname", "[a-z0-9-]{1,5}(\\.[a-z0-9-]{0,4}){0,3}"),
    ("ipv6", "([0-9a-f]{1,5}:){0,8}(:[0-9a-f]{0,4}){0,3}"),
    (
        "duration",
        "P([0-9]{1,2}[YMWD]){0,3}(T([0-9]{1,2}[HMS]){0,3})?",
    ),
    ("json-pointer", "(/([a-z~/]|~[0-2]){0,3}){0,3}"),
    (
        "uri-template",
        "([a-z/%]|\\{[+#]?[a-z.]{0,2}(:[0-9]|\\*)?\\}|\\{){0,4}",
    ),
    (
        "relative-json-pointer",
        "(0|[1-9]|01|-1)(#|(/([a-z~]|~[0-2]){0,2}){0,2})",
    ),
    (
        "uri-reference",
        "([a-z]{1,3}:)?(//[a-z.]{1,5})?(/[a-z:%]{0,3}){0,3}(\\?[a-z]{0,2})?(#[a-z]{0,2})?",
    ),
];

/// `patternProperties` patterns of the random object schemas (anchored or not, overlapping).
const KEY_PATTERNS: [&str; 5] = ["^a", "b$", "^[cd]+$", "é", "."];

fn small_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-100i64..100).prop_map(Value::from),
        "[a-z\"\\\\é]{0,4}".prop_map(Value::from),
        (-100.0f64..100.0).prop_map(|f| json!((f * 100.0).round() / 100.0)),
    ]
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    small_value().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-c]{1,2}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn opt_bound() -> impl Strategy<Value = Option<i64>> {
    prop::option::of(-50i64..50)
}

/// A bound with at most 2 decimals.
/// A random double as the nearest number of 15 significant digits: what the grammar writes by
/// default (`CompileOptions::ijson_numbers`), so completeness is measured within it.
fn ijson_number(f: f64) -> Value {
    json!(format!("{f:.14e}")
        .parse::<f64>()
        .expect("a formatted double reads back"))
}

fn frac_bound() -> impl Strategy<Value = Option<f64>> {
    prop::option::of((-5000i64..5000).prop_map(|x| x as f64 / 100.0))
}

/// An object schema built on `inner`.
fn obj_strategy(inner: BoxedStrategy<S>) -> impl Strategy<Value = S> {
    (
        prop::collection::btree_map("[a-c\"é]{1,2}", (inner.clone(), any::<bool>()), 0..4),
        prop::option::of(any::<bool>()),
        prop::collection::btree_map(0..KEY_PATTERNS.len(), inner, 0..3),
    )
        .prop_map(|(props, additional, patterns)| {
            S::Obj(
                props.into_iter().map(|(k, (s, r))| (k, s, r)).collect(),
                additional,
                patterns.into_iter().collect(),
            )
        })
}

/// A string schema (lengths, pattern, format), or a union of two.
fn string_schema() -> impl Strategy<Value = S> {
    let one = prop_oneof![
        (prop::option::of(0usize..3), prop::option::of(0usize..3)).prop_map(|(a, b)| S::Str(a, b)),
        (0..PATTERNS.len()).prop_map(S::Pattern),
        (0..FORMATS.len()).prop_map(S::Format),
    ];
    prop_oneof![
        3 => one.clone(),
        1 => prop::collection::vec(one, 2..3).prop_map(S::AnyOf),
    ]
}

/// Random schemas, with a recursive `$ref` tree at the root now and then.
fn schema_strategy() -> impl Strategy<Value = S> {
    prop_oneof![
        6 => inner_schema_strategy(),
        1 => inner_schema_strategy().prop_map(|s| S::Tree(Box::new(s))),
    ]
}

fn inner_schema_strategy() -> impl Strategy<Value = S> {
    let leaf = prop_oneof![
        Just(S::Null),
        Just(S::Bool),
        (opt_bound(), opt_bound(), any::<bool>()).prop_map(|(a, b, e)| S::Int(a, b, e)),
        (opt_bound(), opt_bound()).prop_map(|(a, b)| S::Num(a, b)),
        (prop::option::of(0usize..4), prop::option::of(0usize..6)).prop_map(|(a, b)| S::Str(a, b)),
        (0..PATTERNS.len()).prop_map(S::Pattern),
        (0..FORMATS.len()).prop_map(S::Format),
        prop::collection::vec(small_value(), 1..4).prop_map(S::Enum),
        small_value().prop_map(S::Const),
        Just(S::Any),
        (frac_bound(), frac_bound(), any::<bool>()).prop_map(|(a, b, e)| S::NumF(a, b, e)),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            obj_strategy(inner.clone()),
            (
                inner.clone(),
                prop::option::of(0usize..3),
                prop::option::of(0usize..4)
            )
                .prop_map(|(s, a, b)| S::Arr(Box::new(s), a, b)),
            prop::collection::vec(inner.clone(), 1..3).prop_map(S::Tuple),
            prop::collection::vec(inner.clone(), 1..3).prop_map(S::AnyOf),
            inner.clone().prop_map(|s| S::Nullable(Box::new(s))),
            prop::collection::vec(inner.clone(), 1..3).prop_map(S::AllOf),
            prop::collection::vec(inner.clone(), 1..3).prop_map(S::OneOf),
            (obj_strategy(inner.clone()), obj_strategy(inner))
                .prop_map(|(a, b)| S::ObjAllOf(Box::new(a), Box::new(b))),
            (string_schema(), 0usize..4).prop_map(|(s, m)| S::Unique(Box::new(s), m)),
        ]
    })
}

impl S {
    fn to_schema(&self) -> Value {
        fn bounds(v: &mut Value, kw: [&str; 2], a: Option<i64>, b: Option<i64>) {
            if let Some(a) = a {
                v[kw[0]] = a.into();
            }
            if let Some(b) = b {
                v[kw[1]] = b.into();
            }
        }
        match self {
            S::Null => json!({"type": "null"}),
            S::Bool => json!({"type": "boolean"}),
            S::Int(a, b, exclusive) => {
                let mut v = json!({"type": "integer"});
                let kw = if *exclusive {
                    ["exclusiveMinimum", "exclusiveMaximum"]
                } else {
                    ["minimum", "maximum"]
                };
                bounds(&mut v, kw, *a, *b);
                v
            }
            S::Num(a, b) => {
                let mut v = json!({"type": "number"});
                bounds(&mut v, ["minimum", "maximum"], *a, *b);
                v
            }
            S::Str(a, b) => {
                let mut v = json!({"type": "string"});
                bounds(
                    &mut v,
                    ["minLength", "maxLength"],
                    a.map(|x| x as i64),
                    b.map(|x| x as i64),
                );
                v
            }
            S::Pattern(i) => json!({"type": "string", "pattern": PATTERNS[*i].0}),
            S::Format(i) => json!({"type": "string", "format": FORMATS[*i].0}),
            S::Enum(vs) => json!({ "enum": vs }),
            S::Const(v) => json!({ "const": v }),
            S::Any => json!({}),
            S::Obj(props, additional, patterns) => {
                let mut v = json!({"type": "object", "properties": {}});
                for (i, s) in patterns {
                    v["patternProperties"][KEY_PATTERNS[*i]] = s.to_schema();
                }
                let mut required = Vec::new();
                for (k, s, r) in props {
                    v["properties"][k] = s.to_schema();
                    if *r {
                        required.push(k.clone());
                    }
                }
                if !required.is_empty() {
                    v["required"] = required.into();
                }
                if let Some(a) = additional {
                    v["additionalProperties"] = (*a).into();
                }
                v
            }
            S::Arr(s, a, b) => {
                let mut v = json!({"type": "array", "items": s.to_schema()});
                bounds(
                    &mut v,
                    ["minItems", "maxItems"],
                    a.map(|x| x as i64),
                    b.map(|x| x as i64),
                );
                v
            }
            S::Tuple(ss) => json!({
                "type": "array",
                "prefixItems": ss.iter().map(S::to_schema).collect::<Vec<_>>(),
                "items": false
            }),
            S::AnyOf(ss) => json!({"anyOf": ss.iter().map(S::to_schema).collect::<Vec<_>>()}),
            S::Nullable(s) => json!({"anyOf": [s.to_schema(), {"type": "null"}]}),
            S::NumF(a, b, exclusive) => {
                let mut v = json!({"type": "number"});
                let kw = if *exclusive {
                    ["exclusiveMinimum", "exclusiveMaximum"]
                } else {
                    ["minimum", "maximum"]
                };
                if let Some(a) = a {
                    v[kw[0]] = json!(a);
                }
                if let Some(b) = b {
                    v[kw[1]] = json!(b);
                }
                v
            }
            S::AllOf(ss) => json!({"allOf": ss.iter().map(S::to_schema).collect::<Vec<_>>()}),
            S::OneOf(ss) => json!({"oneOf": ss.iter().map(S::to_schema).collect::<Vec<_>>()}),
            S::ObjAllOf(a, b) => {
                let mut v = b.to_schema();
                v["allOf"] = json!([a.to_schema()]);
                v
            }
            S::Unique(s, min) => json!({
                "type": "array", "items": s.to_schema(), "uniqueItems": true, "minItems": min
            }),
            S::Tree(s) => json!({
                "$defs": {"node": {
                    "type": "object",
                    "properties": {
                        "v": s.to_schema(),
                        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}
                    },
                    "required": ["v"],
                    "additionalProperties": false
                }},
                "$ref": "#/$defs/node"
            }),
        }
    }

    /// Candidate instances: mostly near-valid, built from the schema's shape.
    fn instance(&self) -> BoxedStrategy<Value> {
        let lo_hi = |a: &Option<i64>, b: &Option<i64>| {
            let lo = a.unwrap_or(-1000) - 2;
            let hi = b.unwrap_or(1000).max(lo) + 2;
            (lo, hi)
        };
        match self {
            S::Null => Just(Value::Null).boxed(),
            S::Bool => any::<bool>().prop_map(Value::from).boxed(),
            S::Int(a, b, _) => {
                let (lo, hi) = lo_hi(a, b);
                (lo..=hi).prop_map(Value::from).boxed()
            }
            S::Num(a, b) => {
                let (lo, hi) = lo_hi(a, b);
                prop_oneof![
                    (lo..=hi).prop_map(Value::from),
                    (lo as f64..=hi as f64).prop_map(|f| json!((f * 1000.0).round() / 1000.0)),
                    (lo as f64..=hi as f64).prop_map(ijson_number),
                ]
                .boxed()
            }
            S::Str(a, b) => {
                let lo = a.unwrap_or(0).saturating_sub(1);
                let hi = b.unwrap_or(8).max(lo) + 1;
                prop::collection::vec(
                    prop_oneof![
                        6 => proptest::char::range('a', 'z'),
                        1 => Just('"'),
                        1 => Just('\\'),
                        1 => Just('\n'),
                        1 => Just('\u{1}'),
                        1 => Just('\u{7f}'),
                        1 => Just('é'),
                        1 => Just('😀'),
                        1 => Just('/'),
                    ],
                    lo..=hi,
                )
                .prop_map(|cs| Value::from(cs.into_iter().collect::<String>()))
                .boxed()
            }
            S::Pattern(i) => proptest::string::string_regex(PATTERNS[*i].1)
                .unwrap()
                .prop_map(Value::from)
                .boxed(),
            S::Format(i) => proptest::string::string_regex(FORMATS[*i].1)
                .unwrap()
                .prop_map(Value::from)
                .boxed(),
            S::Enum(vs) => prop_oneof![
                4 => prop::sample::select(vs.clone()),
                1 => small_value(),
            ]
            .boxed(),
            S::Const(v) => prop_oneof![4 => Just(v.clone()), 1 => small_value()].boxed(),
            S::Any => arbitrary_json().boxed(),
            S::Obj(props, _, patterns) => {
                let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = props
                    .iter()
                    .map(|(k, s, r)| {
                        let k = k.clone();
                        let present = if *r { 0.95 } else { 0.6 };
                        prop::option::weighted(present, s.instance())
                            .prop_map(move |v| v.map(|v| (k.clone(), v)))
                            .boxed()
                    })
                    .collect();
                let extra_value = match patterns.first() {
                    Some((_, s)) => prop_oneof![small_value(), s.instance()].boxed(),
                    None => small_value().boxed(),
                };
                let extra = prop::option::weighted(
                    if patterns.is_empty() { 0.15 } else { 0.5 },
                    ("[a-dzé]{1,2}", extra_value),
                );
                (fields, extra, any::<bool>())
                    .prop_map(|(fields, extra, reverse)| {
                        let mut fields: Vec<(String, Value)> =
                            fields.into_iter().flatten().collect();
                        if reverse {
                            fields.reverse(); // properties in any order
                        }
                        let mut m = serde_json::Map::new();
                        for (k, v) in fields.into_iter().chain(extra) {
                            m.entry(k).or_insert(v);
                        }
                        Value::Object(m)
                    })
                    .boxed()
            }
            S::Arr(s, a, b) => {
                let lo = a.unwrap_or(0).saturating_sub(1);
                let hi = b.unwrap_or(4).max(lo) + 1;
                prop::collection::vec(s.instance(), lo..=hi)
                    .prop_map(Value::from)
                    .boxed()
            }
            S::Tuple(ss) => {
                let parts: Vec<BoxedStrategy<Value>> = ss.iter().map(S::instance).collect();
                (parts, 0..=ss.len() + 1)
                    .prop_map(|(mut vs, len)| {
                        vs.resize(len, Value::Null);
                        Value::from(vs)
                    })
                    .boxed()
            }
            S::AnyOf(ss) => {
                prop::strategy::Union::new(ss.iter().map(S::instance).collect::<Vec<_>>()).boxed()
            }
            S::Nullable(s) => prop_oneof![4 => s.instance(), 1 => Just(Value::Null)].boxed(),
            S::NumF(a, b, _) => {
                let lo = a.unwrap_or(-100.0);
                let hi = b.unwrap_or(100.0).max(lo);
                // Near the bounds: bound + k/1000, rounded to 3 decimals.
                let near = move |bound: f64| {
                    (-10i64..=10)
                        .prop_map(move |k| json!(((bound * 1000.0).round() + k as f64) / 1000.0))
                };
                prop_oneof![
                    near(lo),
                    near(hi),
                    (lo - 1.0..=hi + 1.0).prop_map(ijson_number),
                    ((lo - 1.0).floor() as i64..=(hi + 1.0).ceil() as i64).prop_map(Value::from),
                ]
                .boxed()
            }
            S::AllOf(ss) | S::OneOf(ss) => {
                prop::strategy::Union::new(ss.iter().map(S::instance).collect::<Vec<_>>()).boxed()
            }
            S::ObjAllOf(a, b) => (a.instance(), b.instance(), any::<bool>())
                .prop_map(|(x, y, merge)| match (x, y) {
                    (Value::Object(mut x), Value::Object(y)) if merge => {
                        x.extend(y);
                        Value::Object(x)
                    }
                    (x, _) if !merge => x,
                    (_, y) => y,
                })
                .boxed(),
            S::Unique(s, min) => {
                // Now and then an item written twice.
                (
                    prop::collection::vec(s.instance(), min.saturating_sub(1)..min + 3),
                    any::<bool>(),
                )
                    .prop_map(|(mut vs, dup)| {
                        if dup && !vs.is_empty() {
                            vs.push(vs[0].clone());
                        }
                        Value::from(vs)
                    })
                    .boxed()
            }
            S::Tree(s) => {
                let v = s.instance();
                let leaf = v.clone().prop_map(|v| json!({ "v": v }));
                leaf.prop_recursive(3, 12, 3, move |kids| {
                    (v.clone(), prop::collection::vec(kids, 0..3))
                        .prop_map(|(v, kids)| json!({"v": v, "kids": kids}))
                })
                .boxed()
            }
        }
    }
}

/// Floor on the share of valid instances `check_bytes` must accept in their compact form.
/// Conservative until the core's numbers settle; soundness is asserted separately and absolutely.
const MIN_COMPLETENESS: f64 = 0.95;

#[test]
fn random_schemas_and_instances_against_jsonschema() {
    let cases: u32 = std::env::var("CALLMASK_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let strategy = schema_strategy().prop_flat_map(|s| {
        let instances = prop::collection::vec(
            prop_oneof![6 => s.instance(), 1 => arbitrary_json().boxed()],
            1..8,
        );
        (Just(s), instances)
    });

    use std::cell::RefCell;
    #[derive(Default)]
    struct Tally {
        schemas: usize,
        compile_errors: Vec<String>,
        wrongly_invalid: Vec<String>,
        refused: std::collections::BTreeMap<String, usize>,
        valid: usize,
        valid_accepted: usize,
        invalid: usize,
        misses: Vec<String>,
    }
    let tally = RefCell::new(Tally::default());

    let result = runner.run(&strategy, |(s, instances)| {
        let schema = s.to_schema();
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| TestCaseError::fail(format!("jsonschema refuses {schema}: {e}")))?;
        let grammar = match compile(&schema) {
            Ok(g) => g,
            Err(Error::UnsupportedKeyword {
                keyword, reason, ..
            }) if keyword == "oneOf" || keyword == "allOf" || reason.contains("allOf") => {
                // Allowed refusals: oneOf whose branches may overlap, allOf whose parts don't
                // merge (named by the keyword that does not merge).
                *tally
                    .borrow_mut()
                    .refused
                    .entry(format!("{keyword}: {reason}"))
                    .or_default() += 1;
                return Ok(());
            }
            Err(e) => {
                let mut t = tally.borrow_mut();
                if matches!(e, Error::InvalidSchema { .. }) {
                    // The jsonschema crate built a validator from it: it is a valid schema.
                    t.wrongly_invalid.push(format!("{schema}: {e}"));
                }
                t.compile_errors.push(format!("{schema}: {e}"));
                return Ok(());
            }
        };
        let mut t = tally.borrow_mut();
        t.schemas += 1;
        for instance in &instances {
            let text = serde_json::to_string(instance).unwrap();
            let accepted = accepts(&grammar, &text);
            let valid = validator.is_valid(instance);
            if accepted && !valid {
                let why = validator
                    .validate(instance)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                return Err(TestCaseError::fail(format!(
                    "FALSE ACCEPT: schema {schema}\n  accepts {text}\n  which jsonschema rejects: {why}"
                )));
            }
            if valid {
                t.valid += 1;
                if accepted {
                    t.valid_accepted += 1;
                } else {
                    let reason = grammar
                        .check_bytes(text.as_bytes())
                        .err()
                        .map(|r| format!("byte {}: {}", r.offset, r.reason))
                        .unwrap_or_default();
                    t.misses.push(format!("schema {schema}\n    rejects valid {text}: {reason}"));
                }
            } else {
                t.invalid += 1;
            }
        }
        Ok(())
    });
    let t = tally.into_inner();
    if let Err(e) = result {
        panic!("{e}");
    }
    let rate = t.valid_accepted as f64 / t.valid.max(1) as f64;
    eprintln!(
        "proptest: {cases} cases, {} schemas compiled, {:?} refused, {} compile errors; \
         {} valid instances ({} accepted, {:.2}%), {} invalid instances, zero false accepts",
        t.schemas,
        t.refused,
        t.compile_errors.len(),
        t.valid,
        t.valid_accepted,
        100.0 * rate,
        t.invalid
    );
    for e in t.compile_errors.iter().take(10) {
        eprintln!("  compile error: {e}");
    }
    for m in t.misses.iter().take(20) {
        eprintln!("  miss: {m}");
    }
    let compiled_rate = t.schemas as f64 / (t.schemas + t.compile_errors.len()).max(1) as f64;
    assert!(
        compiled_rate >= 0.99,
        "{} of {} random schemas (supported keywords only) fail to compile, e.g.\n  {}",
        t.compile_errors.len(),
        t.schemas + t.compile_errors.len(),
        t.compile_errors
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    assert!(
        t.wrongly_invalid.is_empty(),
        "{} valid schemas (the jsonschema crate accepts them) refused as InvalidSchema, e.g.\n  {}",
        t.wrongly_invalid.len(),
        t.wrongly_invalid
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    assert!(
        t.valid > 100,
        "too few valid instances generated: {}",
        t.valid
    );
    assert!(
        rate >= MIN_COMPLETENESS,
        "only {:.2}% of valid instances accepted (floor {:.0}%), e.g.\n  {}",
        100.0 * rate,
        100.0 * MIN_COMPLETENESS,
        t.misses
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}

mod dialects {
    use callmask::{Dialect, DialectOptions};
    use proptest::prelude::*;

    use callmask_testkit::mixed_tools as tools;

    #[test]
    fn hostile_dialect_files_are_typed_errors() {
        let deep = format!("root ::= {}\"a\"{}", "(".repeat(10_000), ")".repeat(10_000));
        let long_alt = format!("root ::= {}", vec!["\"a\""; 5000].join(" | "));
        let cases = [
            deep.as_str(),
            "root ::= root",               // left recursion, nothing else
            "root ::= root \"x\" | \"y\"", // left recursion with a base case
            "root ::= \"a\"{0,100000}",    // too many repetitions
            "root ::= @text_without()",
            "root ::= <|unterminated",
            "root ::= @json_call(name_key=)",
            "root ::= /(/",
            "\u{0}",
            "root ::= \"\\x\"",
        ];
        for src in cases {
            // Any outcome but a panic or a hang; if it compiles, parsing must terminate.
            if let Ok(d) = Dialect::parse("t", src) {
                if let Ok(g) = d.compile(&tools(), &DialectOptions::default()) {
                    let _ = g.parse("yyyyxxxx");
                }
            }
        }
        let d = Dialect::parse("t", &long_alt).unwrap();
        let g = d.compile(&tools(), &DialectOptions::default()).unwrap();
        assert!(g.parse("a").is_ok());
        // Left recursion with a base case works within the depth limit.
        let d = Dialect::parse("t", "root ::= root \"x\" | \"y\"").unwrap();
        let g = d.compile(&tools(), &DialectOptions::default()).unwrap();
        assert!(g.parse("yxx").is_ok());
        assert!(g.parse("xy").is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

        #[test]
        fn dialect_parser_never_panics(src in "(root ::= )?[ -~\\n]{0,80}") {
            if let Ok(d) = Dialect::parse("fuzz", &src) {
                let _ = d.compile(&tools(), &DialectOptions::default());
            }
        }

        #[test]
        fn output_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120), d in 0usize..6) {
            let name = ["empower", "functools", "pythonic", "inline", "hermes", "llama31_json"][d];
            let g = Dialect::by_name(name).unwrap().compile(&tools(), &DialectOptions::default()).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            let _ = g.parse(&text);
            let mut p = callmask::parse::StreamParser::new(&g);
            for chunk in text.as_bytes().chunks(7) {
                if p.push(&String::from_utf8_lossy(chunk)).is_err() {
                    break;
                }
            }
            let _ = p.finish();
        }
    }
}
