//! The whitespace policy: compact, `", "`-style and pretty-printed JSON (and Python calls) are
//! allowed; blank lines, carriage returns and runaway indentation are not (the default,
//! `Whitespace::Tidy`); `Whitespace::Any` keeps the old anything-up-to-N-bytes policy.

use callmask_testkit as testkit;

use callmask::{
    CompileOptions, Dialect, DialectOptions, Grammar, TokenAutomaton, Tools, Whitespace,
};
use serde_json::{json, Value};

fn schema() -> Value {
    json!({"type": "object", "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "nested": {"type": "object", "properties": {"deeper": {"type": "object", "properties": {
            "deepest": {"type": "array", "items": {"type": "object", "properties": {
                "x": {"type": "array", "items": {"type": "integer"}}}}}}}}}
    }})
}

fn value() -> Value {
    json!({"name": "a", "tags": ["x", "y"],
           "nested": {"deeper": {"deepest": [{"x": [1, 2]}, {"x": []}]}}})
}

/// `v` as Python's `json.dumps(v, indent=indent)` writes it (or with `unit` per level).
fn pretty(v: &Value, unit: &[u8]) -> String {
    let mut out = Vec::new();
    let f = serde_json::ser::PrettyFormatter::with_indent(unit);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, f);
    serde::Serialize::serialize(v, &mut ser).unwrap();
    String::from_utf8(out).unwrap()
}

fn grammar(opts: &CompileOptions) -> Grammar {
    Grammar::from_json_schema(&schema(), opts).unwrap()
}

#[test]
fn tidy_allows_the_usual_layouts() {
    let g = grammar(&CompileOptions::default());
    let v = value();
    let compact = serde_json::to_string(&v).unwrap();
    let spaced = compact.replace(",", ", ").replace(":", ": ");
    for text in [
        compact.clone(),
        spaced,
        pretty(&v, b"  "),
        pretty(&v, b"    "),
        pretty(&v, b"\t"),
        format!("\n{compact}\n"),
        // Python's json.dumps(indent=2) before 3.4: ", " then the line break.
        pretty(&v, b"  ").replace(",\n", ", \n"),
    ] {
        assert!(g.check_bytes(text.as_bytes()).is_ok(), "{text}");
    }
    // Indentation deeper than `max_whitespace` (20) is fine where the nesting warrants it.
    let deep = pretty(&v, b"    ");
    assert!(
        deep.lines().any(|l| l.len() - l.trim_start().len() > 20),
        "{deep}"
    );
}

#[test]
fn tidy_refuses_blank_lines_cr_and_runaway_indentation() {
    let g = grammar(&CompileOptions::default());
    let v = value();
    let p = pretty(&v, b"  ");
    let bad = [
        p.replacen(",\n", ",\n\n", 1),
        p.replacen(",\n", ",\n  \n", 1),
        p.replace('\n', "\r\n"),
        p.replacen("\n  \"name\"", &format!("\n{}\"name\"", " ".repeat(9)), 1),
        format!("\n\n{}", serde_json::to_string(&v).unwrap()),
        format!("{{\"name\":{}\"a\"}}", " ".repeat(21)),
    ];
    for text in &bad {
        let r = g.check_bytes(text.as_bytes());
        assert!(r.is_err(), "accepted: {text:?}");
    }
    // The old policy accepts the blank lines and carriage returns.
    let any = grammar(&CompileOptions::default().whitespace(Whitespace::Any));
    for text in &bad[..3] {
        assert!(any.check_bytes(text.as_bytes()).is_ok(), "{text:?}");
    }
    // A narrower indentation, and compact only.
    let two = grammar(&CompileOptions::default().whitespace(Whitespace::Tidy { indent: 2 }));
    assert!(two.check_bytes(pretty(&v, b"  ").as_bytes()).is_ok());
    assert!(two.check_bytes(pretty(&v, b"     ").as_bytes()).is_err());
    let compact = grammar(&CompileOptions::default().max_whitespace(0));
    assert!(compact
        .check_bytes(serde_json::to_string(&v).unwrap().as_bytes())
        .is_ok());
    assert!(compact.check_bytes(pretty(&v, b"  ").as_bytes()).is_err());
}

fn weather_tools() -> Tools {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/tools/weather.json"
    ))
    .unwrap();
    Tools::from_json_str(&text).unwrap()
}

#[test]
fn the_demo_blank_lines_are_refused_in_pythonic() {
    let g = Dialect::by_name("pythonic")
        .unwrap()
        .compile(&weather_tools(), &DialectOptions::default())
        .unwrap();
    let good = "[\n    get_current_weather(\n        location=\"San Francisco\",\n        unit=\"celsius\"\n    )\n]";
    assert!(g.parse(good).is_ok());
    assert!(g
        .parse("[get_current_weather(location='SF', unit='celsius')]")
        .is_ok());
    // What Gemma 3 270M wrote in the README's demo: blank lines of indentation before `]`.
    let demo = "[\n    get_current_weather(\n        location=\"San Francisco\",\n        unit=\"celsius\"\n    )\n    \n    \n    \n    ]";
    assert!(g.parse(demo).is_err());
    let runaway = "[get_current_weather(\n                    location=\"SF\")]";
    assert!(g.parse(runaway).is_err());
    // The old policy took it.
    let any = Dialect::by_name("pythonic")
        .unwrap()
        .compile(
            &weather_tools(),
            &DialectOptions::default()
                .compile(CompileOptions::default().whitespace(Whitespace::Any)),
        )
        .unwrap();
    assert!(any.parse(demo).is_ok());
}

#[test]
fn masks_on_a_real_vocabulary_refuse_a_second_line_break() {
    let vocab = testkit::llama_vocab();
    let g = grammar(&CompileOptions::default());
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let nl = vocab.token_id(b"\n").unwrap();
    let nlnl = vocab.token_id(b"\n\n").unwrap();
    let mut m = a.matcher();
    let mut mask = callmask::TokenMask::new(vocab.len());
    m.accept(vocab.token_id(b"{").unwrap()).unwrap();
    m.fill_mask(&mut mask);
    assert!(mask.is_allowed(nl) && !mask.is_allowed(nlnl));
    m.accept(nl).unwrap();
    m.fill_mask(&mut mask);
    assert!(!mask.is_allowed(nl) && !mask.is_allowed(nlnl));
    // Indentation is allowed, up to two levels (8 bytes) at depth 1.
    let four = vocab.token_id(b"    ").unwrap();
    assert!(mask.is_allowed(four));
    m.accept(four).unwrap();
    m.accept(four).unwrap();
    m.fill_mask(&mut mask);
    assert!(!mask.is_allowed(vocab.token_id(b" ").unwrap()));
}

#[test]
fn options_json_sets_the_policy() {
    let o = CompileOptions::from_json(&json!({"whitespace": "any"})).unwrap();
    assert_eq!(o.whitespace, Whitespace::Any);
    let o = CompileOptions::from_json(&json!({"indent": 2})).unwrap();
    assert_eq!(o.whitespace, Whitespace::Tidy { indent: 2 });
    assert_eq!(
        CompileOptions::from_json(&json!({})).unwrap().whitespace,
        Whitespace::Tidy { indent: 4 }
    );
    assert!(CompileOptions::from_json(&json!({"whitespace": "any", "indent": 2})).is_err());
    assert!(CompileOptions::from_json(&json!({"whitespace": "pretty"})).is_err());
}
