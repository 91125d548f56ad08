//! `not`, `if`/`then`/`else`, `oneOf` with overlapping alternatives (issue 17c) and
//! `multipleOf` (exact on decimal digits), `dependentRequired`/`dependentSchemas`, `propertyNames`,
//! `minProperties`/`maxProperties`, `contains`/`minContains`/`maxContains`, `format` as an annotation on request, the regular formats (hostname, ipv6, duration, json-pointer, uri-reference), static `unevaluatedProperties`/`unevaluatedItems`:
//! accepted and
//! rejected instances at the byte level and at the token level (Llama 3.1), agreement with the
//! `jsonschema` crate on generated values, refusals by name, and fuzzing with validation.

use callmask_testkit as testkit;

use callmask::fuzz::{Checker, FuzzOptions, Fuzzer, Outcome};
use callmask::{CompileOptions, Error, Grammar, TokenAutomaton};
use proptest::prelude::*;
use serde_json::{json, Value};

fn grammar(schema: &Value) -> Grammar {
    Grammar::from_json_schema(schema, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{schema}: {e}"))
}

/// Checks each instance three ways: the expected verdict, `check_bytes`, the token-level
/// matcher with the Llama 3.1 vocabulary (compact and pretty), and the `jsonschema` crate.
fn check(schema: Value, accept: &[Value], reject: &[Value]) {
    let g = grammar(&schema);
    let validator = jsonschema::validator_for(&schema).unwrap();
    let vocab = testkit::llama_vocab();
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    for (list, want) in [(accept, true), (reject, false)] {
        for v in list {
            assert_eq!(
                validator.is_valid(v),
                want,
                "jsonschema on {v} for {schema}"
            );
            for text in [
                serde_json::to_string(v).unwrap(),
                serde_json::to_string_pretty(v).unwrap(),
            ] {
                let bytes = g.check_bytes(text.as_bytes()).is_ok();
                assert_eq!(bytes, want, "check_bytes {text} for {schema}");
                let tokens = vocab.tokenize(&text).unwrap();
                let mut m = a.matcher();
                let ok = tokens.iter().all(|&t| m.accept(t).is_ok()) && m.can_end();
                assert_eq!(ok, want, "tokens of {text} for {schema}");
            }
        }
    }
}

fn refused(schema: Value, keyword: &str, reason_part: &str) {
    match Grammar::from_json_schema(&schema, &CompileOptions::default()) {
        Err(Error::UnsupportedKeyword {
            keyword: k, reason, ..
        }) => {
            assert_eq!(k, keyword, "{schema}: {reason}");
            assert!(reason.contains(reason_part), "{schema}: {reason}");
        }
        other => panic!(
            "{schema}: expected a refusal of {keyword}, got {:?}",
            other.err()
        ),
    }
}

#[test]
fn not_of_types_consts_and_ranges() {
    check(
        json!({"not": {"type": "integer"}}),
        &[
            json!("a"),
            json!(1.5),
            json!(null),
            json!({"a": 1}),
            json!([1]),
        ],
        &[json!(1), json!(0), json!(-7)],
    );
    check(
        json!({"not": {"type": ["integer", "boolean"]}}),
        &[json!("x"), json!(2.25)],
        &[json!(3), json!(true), json!(false)],
    );
    check(
        json!({"type": "string", "not": {"enum": ["a", "é", "x\"y"]}}),
        &[json!("b"), json!("ab"), json!("")],
        &[json!("a"), json!("é"), json!("x\"y"), json!(1)],
    );
    check(
        json!({"type": "number", "not": {"minimum": 2, "maximum": 5}}),
        &[json!(1.5), json!(5.5), json!(-3), json!(6)],
        &[json!(2), json!(3.25), json!(5), json!("3")],
    );
    check(
        json!({"type": "integer", "not": {"const": 0}}),
        &[json!(1), json!(-1)],
        &[json!(0)],
    );
    check(
        json!({"type": "string", "not": {"minLength": 2, "maxLength": 3}}),
        &[json!(""), json!("a"), json!("abcd")],
        &[json!("ab"), json!("abc")],
    );
    check(
        json!({"type": "string", "not": {"pattern": "^[0-9]+$"}}),
        &[json!("12a"), json!("")],
        &[json!("123"), json!("0")],
    );
}

#[test]
fn not_of_objects_and_arrays() {
    // a required key missing, or present with a value outside its schema
    check(
        json!({"type": "object", "not": {"properties": {"a": {"type": "string"}}, "required": ["a"]}}),
        &[
            json!({}),
            json!({"a": 1}),
            json!({"b": "x"}),
            json!({"a": null, "b": 1}),
        ],
        &[json!({"a": "x"}), json!({"a": "", "b": 2}), json!([])],
    );
    check(
        json!({"properties": {"foo": {"not": {}}}}),
        &[json!({}), json!({"bar": 1}), json!(3)],
        &[json!({"foo": 1}), json!({"foo": null})],
    );
    check(
        json!({"type": "array", "not": {"minItems": 1, "maxItems": 2, "prefixItems": [{"type": "integer"}]}}),
        &[json!([]), json!([1, 2, 3]), json!(["a"]), json!(["a", 1])],
        &[json!([1]), json!([1, "x"]), json!({})],
    );
    check(
        json!({"not": {"type": "array", "items": false}}),
        &[json!([1]), json!("x"), json!({})],
        &[json!([])],
    );
}

#[test]
fn not_through_combinators() {
    check(
        json!({"not": {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 3}]}}),
        &[json!(2), json!(null), json!([]), json!(2.5)],
        &[json!("s"), json!(3), json!(10)],
    );
    check(
        json!({"type": "integer", "not": {"allOf": [{"minimum": 0}, {"maximum": 9}]}}),
        &[json!(-1), json!(10)],
        &[json!(0), json!(9), json!(4)],
    );
    check(
        json!({"type": "integer", "not": {"not": {"minimum": 3}}}),
        &[json!(3), json!(4)],
        &[json!(2)],
    );
    check(
        json!({"type": "integer", "not": {"oneOf": [{"minimum": 0}, {"maximum": 5}]}}),
        &[json!(0), json!(5), json!(3)],
        &[json!(-1), json!(6)],
    );
    check(
        json!({"not": true}),
        &[],
        &[json!(1), json!({}), json!("a")],
    );
    check(json!({"not": {}}), &[], &[json!(1), json!([]), json!(null)]);
    check(
        json!({"not": false}),
        &[json!(1), json!({"a": [null]})],
        &[],
    );
    check(
        json!({"$defs": {"s": {"type": "string"}}, "not": {"$ref": "#/$defs/s"}}),
        &[json!(1), json!([])],
        &[json!("a")],
    );
    // two `not`s merged by allOf: neither may hold
    check(
        json!({"type": "integer", "allOf": [{"not": {"const": 1}}, {"not": {"const": 2}}]}),
        &[json!(0), json!(3)],
        &[json!(1), json!(2)],
    );
}

#[test]
fn if_then_else() {
    check(
        json!({"if": {"exclusiveMaximum": 0}, "then": {"minimum": -10}, "else": {"maximum": 100}}),
        &[json!(-1), json!(0), json!(100), json!(-10), json!("x")],
        &[json!(-11), json!(101)],
    );
    check(
        json!({"type": "object", "properties": {"kind": {"enum": ["a", "b"]}}, "required": ["kind"],
               "if": {"properties": {"kind": {"const": "a"}}},
               "then": {"required": ["x"]}, "else": {"required": ["y"]}}),
        &[json!({"kind": "a", "x": 1}), json!({"kind": "b", "y": 1})],
        &[
            json!({"kind": "a", "y": 1}),
            json!({"kind": "b", "x": 1}),
            json!({"kind": "a"}),
        ],
    );
    // then/else without if are ignored, and do not meet an `if` of another allOf part
    check(
        json!({"then": {"const": 0}, "else": {"const": 1}}),
        &[json!(5), json!("x")],
        &[],
    );
    check(
        json!({"allOf": [{"if": {"exclusiveMaximum": 0}}, {"then": {"minimum": -10}}, {"else": {"multipleOf": 2}}]}),
        &[json!(-100), json!(3)],
        &[],
    );
    check(
        json!({"if": false, "then": {"const": "then"}, "else": {"const": "else"}}),
        &[json!("else")],
        &[json!("then"), json!(1)],
    );
}

#[test]
fn one_of_with_overlapping_alternatives() {
    check(
        json!({"oneOf": [{"type": "integer"}, {"minimum": 2}]}),
        &[json!(1), json!(2.5), json!("x")],
        &[json!(3), json!(1.5)],
    );
    check(
        json!({"type": "string", "oneOf": [{"minLength": 2}, {"maxLength": 4}]}),
        &[json!("a"), json!("abcde")],
        &[json!("abc"), json!(1)],
    );
    check(
        json!({"type": "object", "oneOf": [{"required": ["foo", "bar"]}, {"required": ["foo", "baz"]}]}),
        &[json!({"foo": 1, "bar": 2}), json!({"foo": 1, "baz": 3})],
        &[json!({"foo": 1, "bar": 2, "baz": 3}), json!({"bar": 2})],
    );
    check(
        json!({"oneOf": [{"properties": {"bar": {"type": "integer"}}, "required": ["bar"]},
                         {"properties": {"foo": {"type": "string"}}, "required": ["foo"]}]}),
        &[
            json!({"bar": 2}),
            json!({"foo": "x"}),
            json!({"bar": 1, "foo": 2}),
        ],
        &[
            json!({"bar": 2, "foo": "x"}),
            json!({"bar": "x", "foo": 1}),
            json!(3),
        ],
    );
    check(json!({"oneOf": [true, true]}), &[], &[json!(1)]);
    check(
        json!({"oneOf": [true, false, false]}),
        &[json!(1), json!([])],
        &[],
    );
}

#[test]
fn refusals_name_the_keyword_and_the_reason() {
    refused(
        json!({"not": {"type": "object", "additionalProperties": false}}),
        "not",
        "additionalProperties",
    );
    refused(
        json!({"not": {"items": {"type": "integer"}}}),
        "not",
        "`items`",
    );
    refused(json!({"not": {"format": "email"}}), "not", "format");
    refused(json!({"not": {"pattern": "^\\s+$"}}), "not", "pattern");
    refused(json!({"not": {"enum": [{"a": 1}]}}), "not", "object values");
    refused(
        json!({"if": {"type": "array", "items": {"type": "string"}}, "then": {"minItems": 1}}),
        "if",
        "`items`",
    );
    refused(
        json!({"oneOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"minimum": 0}}]}),
        "oneOf",
        "`items`",
    );
    let many: Vec<Value> = (0..9).map(|i| json!({"minimum": i})).collect();
    refused(json!({"oneOf": many}), "oneOf", "more than 8");
    // lenient mode drops what it cannot build, and says so
    let g = Grammar::from_json_schema(
        &json!({"not": {"format": "email"}}),
        &CompileOptions::default().lenient(true),
    )
    .unwrap();
    assert_eq!(g.dropped_keywords(), ["not at #"]);
}

#[test]
fn multiple_of_integers_and_decimal_steps() {
    check(
        json!({"type": "number", "multipleOf": 1.5}),
        &[
            json!(0),
            json!(4.5),
            json!(-3),
            json!(1.5),
            json!(7.5),
            json!(-4.5),
        ],
        &[json!(35), json!(1), json!(0.75), json!("3")],
    );
    check(
        json!({"type": "integer", "multipleOf": 7, "minimum": -20, "maximum": 30}),
        &[json!(-14), json!(0), json!(28), json!(7)],
        &[json!(29), json!(-21), json!(35), json!(3), json!(3.5)],
    );
    // Prices in cents.
    check(
        json!({"type": "number", "multipleOf": 0.01, "minimum": 0}),
        &[json!(19.99), json!(0), json!(5), json!(0.1), json!(1234.5)],
        &[json!(0.001), json!(-1), json!(1.005)],
    );
    // Tiny and exponent-written steps.
    check(
        json!({"multipleOf": 1e-4}),
        &[json!(0.0075), json!(12), json!("x"), json!(null)],
        &[json!(0.00751)],
    );
    check(
        json!({"type": "integer", "multipleOf": 2.5e1}),
        &[json!(25), json!(-100), json!(0)],
        &[json!(5), json!(30)],
    );
    // allOf parts with different steps: both hold.
    check(
        json!({"allOf": [{"multipleOf": 2}, {"multipleOf": 3}]}),
        &[json!(6), json!(12), json!(-18), json!("x")],
        &[json!(4), json!(9), json!(1.5)],
    );
    // Beyond an exact automaton's size: refused by name; lenient drops it and says so.
    refused(
        json!({"multipleOf": 0.123456789}),
        "multipleOf",
        "remainders",
    );
    // Its complement is exact on canonical numbers.
    check(
        json!({"not": {"multipleOf": 2}}),
        &[json!(1), json!(3), json!(2.5), json!(-7)],
        &[json!(2), json!(0), json!(-4), json!("x"), json!(null)],
    );
    check(
        json!({"type": "array", "items": {"multipleOf": 2}, "contains": {"minimum": 5}}),
        &[json!([2, 6]), json!([8])],
        &[json!([2, 4]), json!([3, 6]), json!([])],
    );
    let g = Grammar::from_json_schema(
        &json!({"type": "number", "multipleOf": 123457}),
        &CompileOptions::default().lenient(true),
    )
    .unwrap();
    assert_eq!(g.dropped_keywords(), ["multipleOf at #"]);
    for bad in [json!(0), json!(-2), json!("2")] {
        assert!(
            matches!(
                Grammar::from_json_schema(&json!({"multipleOf": bad}), &CompileOptions::default()),
                Err(Error::InvalidSchema { .. })
            ),
            "multipleOf {bad}"
        );
    }
}

#[test]
fn format_is_asserted_by_default_and_an_annotation_on_request() {
    let strict = CompileOptions::default();
    let loose = CompileOptions::default().format_annotation(true);
    // A known format: enforced by default, not enforced as an annotation.
    let email = json!({"type": "string", "format": "email"});
    let g = Grammar::from_json_schema(&email, &strict).unwrap();
    assert!(g.check_bytes(br#""a@example.com""#).is_ok());
    assert!(g.check_bytes(br#""not an address""#).is_err());
    // Its internationalized form, as its ASCII subset.
    let idn = Grammar::from_json_schema(&json!({"type": "string", "format": "idn-email"}), &strict)
        .unwrap();
    assert!(idn.check_bytes(br#""a@example.com""#).is_ok());
    assert!(idn.check_bytes(br#""not an address""#).is_err());
    let g = Grammar::from_json_schema(&email, &loose).unwrap();
    assert!(g.check_bytes(br#""not an address""#).is_ok());
    assert!(g.check_bytes(b"12").is_err(), "the type still holds");
    // An unknown format: refused by name by default, ignored as an annotation; other
    // string keywords beside it still hold.
    let idn = json!({"type": "string", "format": "phone", "maxLength": 3});
    match Grammar::from_json_schema(&idn, &strict) {
        Err(Error::UnsupportedKeyword { keyword, .. }) => assert_eq!(keyword, "format"),
        other => panic!("expected the format refused by name, got {other:?}"),
    }
    let g = Grammar::from_json_schema(&idn, &loose).unwrap();
    assert!(g.check_bytes(br#""abc""#).is_ok());
    assert!(g.check_bytes(br#""abcd""#).is_err());
    // Inside `not`: the annotation is ignored there too (`not {}` admits nothing).
    let neg = json!({"not": {"format": "email"}});
    assert!(Grammar::from_json_schema(&neg, &strict).is_err());
    let g = Grammar::from_json_schema(&neg, &loose);
    assert!(g.map_or(true, |g| g.check_bytes(br#""x""#).is_err()));
    // The process-wide lexeme cache keeps the two modes apart.
    let g = Grammar::from_json_schema(&email, &strict).unwrap();
    assert!(g.check_bytes(br#""not an address""#).is_err());
}

/// The regular formats added for issue 17 (hostname, ipv6, duration, json-pointer,
/// uri-reference): strings they accept (every one valid for the `jsonschema` crate with formats
/// asserted, checked here) and strings they refuse, at the byte level and the token level.
/// Where a format is a subset of the valid strings (hostname, ipv6, uri-reference), the refused
/// list holds valid strings outside the subset too; they are documented in `strings.rs`.
#[test]
fn regular_formats() {
    let vocab = testkit::llama_vocab();
    let (long63, long64) = ("a".repeat(63), "a".repeat(64));
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "hostname",
            &[
                "localhost",
                "a.b.c",
                "x-1.example.com",
                "A0",
                "ab-c--d",
                "a-b",
                &long63,
            ],
            &[
                "", "-a", "a-", "a..b", "a.", "a_b", "ab--cd", &long64, "a.b.c.d",
            ],
        ),
        (
            "ipv6",
            &[
                "::",
                "::1",
                "1::",
                "2001:db8::8a2e:370:7334",
                "1:2:3:4:5:6:7:8",
                "FFFF::a:b",
            ],
            &[
                "",
                ":",
                "1:2:3:4:5:6:7",
                "1::2::3",
                "12345::",
                "1:2:3:4:5:6:7:8:9",
                "g::",
                "::1.2.3.4",
            ],
        ),
        (
            "duration",
            &[
                "P1D",
                "P3Y6M4DT12H30M5S",
                "PT0S",
                "P2W",
                "P1Y2M",
                "PT36H",
                "P0D",
            ],
            &[
                "", "P", "PT", "P1", "1D", "P1DT", "P1W2D", "P1D1Y", "PT1H1S", "P1Y1D", "P1.5D",
                "P-1D",
            ],
        ),
        (
            "json-pointer",
            &["", "/", "/a/b", "/~0~1", "/a~1b/0", "//", "/é\n"],
            &["a", "/~", "/~2", "/a~", "#/a"],
        ),
        (
            "uri-reference",
            &[
                "",
                "a/b",
                "/a/b?q#f",
                "?q",
                "#frag",
                "../x",
                "https://example.com/p?q=1#f",
                "a%20b",
            ],
            &["a:b/c:d", "//host", "a b", "%zz", "/a\\b"],
        ),
        (
            "relative-json-pointer",
            &["0", "1/a", "0#", "12/~0/b", "3"],
            &["", "01", "-1", "#", "/a", "1#/a", "1/~2"],
        ),
        (
            "uri-template",
            &[
                "",
                "http://example.com/{id}",
                "/search{?q,lang}",
                "{+path}/here",
                "{#frag:3}",
                "/users{/id*}",
                "a%20b{x.y}",
            ],
            &[
                "{",
                "}",
                "{}",
                "{a b}",
                "{id:0}",
                "{id:10000}",
                "a b",
                "{x..y}",
                "%zz",
                "<a>",
            ],
        ),
        // The internationalized formats: their ASCII subsets (every URI is an IRI, every
        // RFC 1123 host name an IDN host name).
        (
            "iri",
            &["https://example.com/a?b#c", "urn://x"],
            &["a b", "/rel", "https://exa mple.com"],
        ),
        (
            "iri-reference",
            &["a/b", "#f", "https://x.org/"],
            &["a b", "%zz"],
        ),
        (
            "idn-hostname",
            &["example.com", "a-b.c"],
            &["-a", "a..b", "a_b"],
        ),
    ];
    for (format, accept, reject) in cases {
        let schema = json!({"type": "string", "format": format});
        let g = grammar(&schema);
        let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .unwrap();
        for (list, want) in [(*accept, true), (*reject, false)] {
            for s in list {
                let v = json!(s);
                if want {
                    assert!(validator.is_valid(&v), "jsonschema refuses {v} as {format}");
                }
                let text = serde_json::to_string(&v).unwrap();
                let bytes = g.check_bytes(text.as_bytes()).is_ok();
                assert_eq!(bytes, want, "check_bytes {text} as {format}");
                let tokens = vocab.tokenize(&text).unwrap();
                let mut m = a.matcher();
                let ok = tokens.iter().all(|&t| m.accept(t).is_ok()) && m.can_end();
                assert_eq!(ok, want, "tokens of {text} as {format}");
            }
        }
    }
}

/// Checks texts as written (escapes and all): the expected verdict, `check_bytes`, the token
/// matcher (Llama 3.1), and, for texts that parse, the `jsonschema` crate.
fn check_texts(schema: Value, accept: &[&str], reject: &[&str]) {
    let g = grammar(&schema);
    let validator = jsonschema::validator_for(&schema).unwrap();
    let vocab = testkit::llama_vocab();
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    for (list, want) in [(accept, true), (reject, false)] {
        for text in list {
            match serde_json::from_str::<Value>(text) {
                Ok(v) if want => assert!(validator.is_valid(&v), "jsonschema on {text}"),
                Ok(_) | Err(_) => {}
            }
            assert_eq!(
                g.check_bytes(text.as_bytes()).is_ok(),
                want,
                "check_bytes {text} for {schema}"
            );
            let tokens = vocab.tokenize(text).unwrap();
            let mut m = a.matcher();
            let ok = tokens.iter().all(|&t| m.accept(t).is_ok()) && m.can_end();
            assert_eq!(ok, want, "tokens of {text} for {schema}");
        }
    }
}

/// Every character past ASCII may be written `\uXXXX` (either hex case; a surrogate pair past
/// U+FFFF) in free strings, enums, keys, patterns, and lengths count it as one character.
/// Printable ASCII is never hex-escaped (the documented policy) and lone surrogates are refused.
#[test]
fn unicode_escapes_in_every_string_position() {
    let schema = json!({
        "type": "object",
        "properties": {
            "año": {"enum": ["niño", "€uro"]},
            "s": {"type": "string", "maxLength": 2, "pattern": "^[a-zñ😀]*$"},
            "t": {"type": "string"}
        },
        "required": ["año"],
        "additionalProperties": {"type": "integer"}
    });
    check_texts(
        schema.clone(),
        &[
            r#"{"año": "niño"}"#,
            r#"{"a\u00f1o": "ni\u00f1o"}"#,
            r#"{"a\u00F1o": "\u20ACuro", "s": "\ud83d\ude00\u00f1"}"#,
            r#"{"año": "\u20acuro", "s": "😀", "t": "\u000a\u00e9\uD83D\uDE00"}"#,
            r#"{"año": "niño", "\u00e9": 1, "é\u00e9": 2}"#,
        ],
        &[
            r#"{"a\u00f1o": "nino"}"#,
            r#"{"año": "niño", "s": "\u00f1\u00f1a"}"#,
            r#"{"año": "niño", "s": "\u00f1a😀"}"#,
            r#"{"año": "niño", "t": "\ud83d"}"#,
            r#"{"año": "niño", "t": "\ude00\ud83d"}"#,
            r#"{"año": "ni\u00f1\u006f"}"#,
            r#"{"año": "niño", "t": "\u0061"}"#,
            r#"{"año": "niño", "a\u00f1o": "niño"}"#,
            r#"{"año": "niño", "\u00e9": 1, "é": 2}"#,
            r#"{"a\u00f1o": "ni\u00f1o", "\u00c9": "x"}"#,
        ],
    );
}

/// `patternProperties`: listed keys take the schemas of the patterns they match beside their
/// own; other keys take the patterns' schemas, or `additionalProperties` when they match none;
/// kinds of keys that would need different schemas are refused by name.
#[test]
fn pattern_properties() {
    check(
        json!({
            "properties": {"a": {"type": "integer"}, "x-b": {"maxLength": 2}},
            "patternProperties": {"^x-": {"type": "string"}},
            "additionalProperties": false
        }),
        &[
            json!({"a": 1}),
            json!({"x-c": "s"}),
            json!({"x-b": "ab", "x-": ""}),
            json!({}),
        ],
        &[
            json!({"b": 1}),
            json!({"x-c": 1}),
            json!({"x-b": "abc"}),
            json!({"x-b": 1}),
            json!({"ax-": "s"}),
        ],
    );
    // A pattern every key matches (unanchored search): every value is an integer.
    check(
        json!({"patternProperties": {".*": {"type": "integer"}}, "properties": {"p": {"minimum": 3}}}),
        &[json!({"a": 1, "": 2}), json!({"p": 3}), json!({})],
        &[json!({"a": "x"}), json!({"p": 2}), json!({"p": "x"})],
    );
    // Two patterns that agree on the schema; keys matching neither are refused.
    check(
        json!({"patternProperties": {"a": {"minimum": 0}, "b": {"minimum": 0}}, "additionalProperties": false}),
        &[json!({"ab": 1, "b": 2, "xa": 0})],
        &[json!({"c": 1}), json!({"ab": -1}), json!({"b": -1})],
    );
    // A pattern whose schema is `false`: those keys cannot appear.
    check(
        json!({"patternProperties": {"^_": false}, "additionalProperties": {"type": "string"}}),
        &[json!({"a": "x"}), json!({"a_": "x"})],
        &[json!({"_a": "x"}), json!({"a": 1})],
    );
    // Non-ASCII, and `.` stops at line terminators as in ECMA-262.
    check(
        json!({"patternProperties": {"^á": {}, "^b.c$": {}}, "additionalProperties": false}),
        &[json!({"ármányos": 2, "bxc": 1})],
        &[json!({"élmény": 2}), json!({"b\nc": 1})],
    );
    // ECMA-262's `.` does not match `\r` either (the jsonschema crate's regex engine does, so it
    // is not the judge of this one).
    let g = grammar(&json!({"patternProperties": {"^b.c$": {}}, "additionalProperties": false}));
    assert!(g.check_bytes(br#"{"bxc": 1}"#).is_ok());
    assert!(g.check_bytes(br#"{"b\rc": 1}"#).is_err());
    assert!(g.check_bytes(br#"{"b\u2028c": 1}"#).is_err());
    // Merged with a part that lists more properties: its patterns still govern them.
    check(
        json!({"allOf": [
            {"patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": false},
            {"properties": {"xa": {"minimum": 2}, "y": true}}
        ]}),
        &[json!({"xa": 2}), json!({"xb": 5}), json!({})],
        &[json!({"y": 1}), json!({"xa": 1}), json!({"xa": "s"})],
    );
    // Kinds of extra keys wanting different schemas: the kind is found from the decoded name.
    check(
        json!({"patternProperties": {"^[a-z]+$": {"type": "integer"}}}),
        &[json!({"ab": 1, "A": "x", "": null, "a1": [1]})],
        &[json!({"ab": "x"}), json!({"a": 1, "b": 2.5})],
    );
    check(
        json!({
            "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 5}},
            "properties": {"ab": {"maximum": 9}},
            "additionalProperties": {"type": "string"}
        }),
        &[
            json!({"ax": 1, "xb": 7, "ab": 5, "c": "s", "xbb": "s", "abb": 6}),
            json!({"añb": 5, "ñ": "ñ"}),
        ],
        &[
            json!({"ax": "s"}),
            json!({"ab": 4}),
            json!({"ab": 10}),
            json!({"abb": 5.5}),
            json!({"c": 1}),
            json!({"xb": 4}),
            json!({"añb": 4}),
        ],
    );
    refused(
        json!({"patternProperties": {"^\\s": {}}, "additionalProperties": false}),
        "patternProperties",
        "does not translate exactly",
    );
    refused(
        json!({"allOf": [
            {"properties": {"a": true}, "additionalProperties": false},
            {"patternProperties": {"^b": {}}}
        ]}),
        "allOf",
        "look past",
    );
}

/// `uniqueItems` over a finite set of values: each value at most once (by JSON equality, so
/// `1` and `1.0` are one), at every length the bounds allow; other item schemas are refused.
#[test]
fn unique_items_over_finite_sets() {
    check(
        json!({"type": "array", "items": {"enum": ["a", "b", 1, {"k": [2]}]}, "uniqueItems": true}),
        &[
            json!([]),
            json!(["a"]),
            json!(["b", "a", 1, {"k": [2]}]),
            json!([1, "a"]),
        ],
        &[
            json!(["a", "a"]),
            json!([1, 1]),
            json!([1, 1.0]),
            json!(["a", "b", "a"]),
            json!([{"k": [2]}, {"k": [2]}]),
            json!(["c"]),
        ],
    );
    check(
        json!({"type": "array", "items": {"type": ["boolean", "null"]}, "uniqueItems": true, "minItems": 2}),
        &[json!([true, false]), json!([null, false, true])],
        &[
            json!([true, true]),
            json!([true]),
            json!([null, null, true]),
        ],
    );
    check(
        json!({
            "$defs": {"tag": {"type": "string", "enum": ["x", "y", 3]}},
            "type": "array", "items": {"$ref": "#/$defs/tag"}, "uniqueItems": true
        }),
        &[json!(["x", "y"]), json!(["y"])],
        &[json!(["x", "x"]), json!([3])],
    );
    // Merged: either part's uniqueItems holds.
    check(
        json!({"allOf": [{"uniqueItems": true}, {"items": {"enum": [1, 2]}}]}),
        &[json!([2, 1])],
        &[json!([2, 2])],
    );
    refused(
        json!({"type": "array", "items": {"type": "object"}, "uniqueItems": true}),
        "uniqueItems",
        "finite set",
    );
    refused(
        json!({"type": "array", "prefixItems": [true], "items": {"enum": [1]}, "uniqueItems": true}),
        "uniqueItems",
        "prefixItems",
    );
}

/// `uniqueItems` over strings: no string twice in any spelling (`"ñ"`, `"\u00f1"`), and where
/// few strings fit the items schema, no item begins that could only repeat one and no comma
/// comes once all are used (the model would be stuck); a `minItems` more strings than exist
/// admits no array.
#[test]
fn unique_items_over_strings() {
    let free = json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true});
    check(
        free.clone(),
        &[
            json!([]),
            json!(["a"]),
            json!(["a", "ab", ""]),
            json!(["ñ", "n", "😀"]),
        ],
        &[json!(["a", "a"]), json!(["", "x", ""]), json!(["😀", "😀"])],
    );
    check_texts(
        free.clone(),
        &[r#"["\u00f1", "n"]"#],
        &[
            r#"["ñ", "\u00f1"]"#,
            r#"["\u00F1", "\u00f1"]"#,
            r#"["\ud83d\ude00", "😀"]"#,
            r#"["\n", "\u000a"]"#,
        ],
    );
    let few = json!({"type": "array", "items": {"type": "string", "pattern": "^(a|ab|ñ)$"},
        "uniqueItems": true, "minItems": 2});
    check(
        few.clone(),
        &[json!(["a", "ab"]), json!(["ab", "ñ", "a"])],
        &[
            json!(["a"]),
            json!(["a", "a"]),
            json!(["a", "ab", "ñ", "a"]),
        ],
    );
    // Prefixes that cannot end: the mask must not allow them.
    let g = grammar(&few);
    let vocab = testkit::llama_vocab();
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let prefix_ok = |text: &str| {
        let mut m = a.matcher();
        vocab
            .tokenize(text)
            .unwrap()
            .iter()
            .all(|&t| m.accept(t).is_ok())
    };
    for p in [r#"["a", "a"#, r#"["ñ", "ab"#, r#"["a", "ab", ""#] {
        assert!(prefix_ok(p), "{p} refused");
    }
    for p in [
        r#"["a", "ab", "a""#,
        r#"["ñ", "\u00f1"#,
        r#"["ñ", "\u00"#,
        r#"["a", "ab", "ñ","#,
        r#"["ab", "a", "ñ", "#,
    ] {
        assert!(!prefix_ok(p), "{p} allowed, yet it cannot end");
    }
    // More strings required than exist: no array at all.
    let none = grammar(
        &json!({"type": "array", "items": {"type": "string", "pattern": "^[ab]$"},
        "uniqueItems": true, "minItems": 3}),
    );
    assert!(none.check_bytes(br#"["a", "b"]"#).is_err());
    assert!(none.check_bytes(br#"["a", "b", "a"]"#).is_err());
    let none = grammar(
        &json!({"type": "array", "items": {"type": "string", "maxLength": 0},
        "uniqueItems": true, "minItems": 2}),
    );
    assert!(none.check_bytes(br#"["", ""]"#).is_err());
    assert!(none.check_bytes(br#"[""]"#).is_err());
    // Through a $ref, and a union of string schemas.
    check(
        json!({"$defs": {"id": {"type": "string", "minLength": 1}}, "type": "array",
            "items": {"$ref": "#/$defs/id"}, "uniqueItems": true}),
        &[json!(["x", "y"])],
        &[json!(["x", "x"]), json!([""])],
    );
    check(
        json!({"type": "array", "items": {"anyOf": [{"type": "string", "pattern": "^a"},
            {"type": "string", "maxLength": 1}]}, "uniqueItems": true}),
        &[json!(["ab", "b", "a"])],
        &[json!(["ab", "ab"]), json!(["a", "a"])],
    );
    // No item can be written, or at most one: nothing to enforce. But positions of a prefix
    // still must differ.
    check(
        json!({"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 1}, "uniqueItems": true}),
        &[json!([])],
        &[json!([""])],
    );
    check(
        json!({"type": "array", "items": {"type": "object"}, "uniqueItems": true, "maxItems": 1}),
        &[json!([{}])],
        &[json!([{}, {}])],
    );
    refused(
        json!({"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "boolean"}], "items": false, "uniqueItems": true}),
        "uniqueItems",
        "prefixItems",
    );
    refused(
        json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "minItems": 65}),
        "uniqueItems",
        "minItems",
    );
}

/// `allOf` parts with a `pattern` or `format` each merge into a list of them; beside an `enum`
/// (whose values are checked against the merged schema by a validator) the lists are spelled
/// out for it, not refused as an invalid schema (found by the random-schema proptest).
#[test]
fn merged_pattern_and_format_lists_beside_enum() {
    check(
        json!({"allOf": [{"pattern": "a"}, {"pattern": "b"}], "enum": ["ab", "a", "b", 3]}),
        &[json!("ab"), json!(3)],
        &[json!("a"), json!("b"), json!("ba")],
    );
    let both = json!({
        "properties": {"p": {"allOf": [
            {"type": "string", "format": "json-pointer"},
            {"type": "string", "format": "uuid"}
        ]}},
        "allOf": [{"properties": {"q": {"format": "date"}}}],
        "enum": [{"p": "/a"}, {"q": "2024-01-31"}, {"q": "x"}]
    });
    let g = grammar(&both);
    assert!(g.check_bytes(br#"{"q":"2024-01-31"}"#).is_ok());
    assert!(g.check_bytes(br#"{"p":"/a"}"#).is_err());
    assert!(g.check_bytes(br#"{"q":"x"}"#).is_err());
}

/// Draft 4 integers are written without a fraction (`1.0` is a number, not an integer); from
/// draft 6 on, `1.0` is an integer (found by the JSONSchemaBench run: two draft-04 schemas).
#[test]
fn draft4_integers_have_no_fraction() {
    let d4 = "http://json-schema.org/draft-04/schema#";
    // The same keywords without `$schema` first: the process-wide lexeme cache keeps the two
    // meanings apart.
    check(
        json!({"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}}}),
        &[json!({"id": 12345.0})],
        &[json!({"id": 0})],
    );
    check(
        json!({"$schema": d4, "type": "object", "properties": {"id": {"type": "integer", "minimum": 1}}}),
        &[json!({"id": 12345}), json!({})],
        &[json!({"id": 12345.0}), json!({"id": 0}), json!({"id": 1.5})],
    );
    check(
        json!({"type": "integer"}),
        &[json!(7), json!(7.0)],
        &[json!(7.5), json!("7")],
    );
}

#[test]
fn dependent_required() {
    check(
        json!({"dependentRequired": {"a": ["b"]}}),
        &[
            json!({}),
            json!({"b": 1}),
            json!({"a": 1, "b": 2}),
            json!("x"),
            json!([1]),
        ],
        &[json!({"a": 1}), json!({"a": 1, "c": 2})],
    );
    // Chains, with closed properties.
    check(
        json!({
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": true},
            "additionalProperties": false,
            "dependentRequired": {"a": ["b"], "b": ["c"]}
        }),
        &[
            json!({"a": 1, "b": "x", "c": null}),
            json!({"c": 1}),
            json!({"b": "s", "c": 0}),
        ],
        &[
            json!({"a": 1, "b": "x"}),
            json!({"b": "x"}),
            json!({"a": 1}),
            json!({"d": 1}),
        ],
    );
    // A key that requires a key that cannot appear cannot appear either.
    check(
        json!({"properties": {"a": true}, "additionalProperties": false, "dependentRequired": {"a": ["z"]}}),
        &[json!({})],
        &[json!({"a": 1}), json!({"a": 1, "z": 1})],
    );
    // A required key's dependencies are required.
    check(
        json!({"required": ["a"], "dependentRequired": {"a": ["b"]}}),
        &[json!({"a": 1, "b": 2})],
        &[json!({"a": 1}), json!({})],
    );
    // Draft 7's `dependencies` with lists of names; schema-valued ones stay refused.
    check(
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": ["b"]}}),
        &[json!({"a": 1, "b": 1}), json!({"b": 1})],
        &[json!({"a": 1})],
    );
    // dependentSchemas: "a absent" or "a present and the schema".
    check(
        json!({"dependentSchemas": {"a": {"required": ["b"], "properties": {"b": {"type": "integer"}}}}}),
        &[
            json!({}),
            json!({"b": "s"}),
            json!({"a": 1, "b": 2}),
            json!("x"),
        ],
        &[json!({"a": 1}), json!({"a": 1, "b": "s"})],
    );
    check(
        json!({
            "properties": {"a": true, "b": {"type": "integer"}},
            "additionalProperties": false,
            "dependentSchemas": {"a": {"required": ["b"]}}
        }),
        &[json!({"a": 1, "b": 2}), json!({"b": 1}), json!({})],
        &[json!({"a": 1}), json!({"c": 1})],
    );
    check(
        json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "dependencies": {"a": {"properties": {"c": {"type": "string"}}}, "b": ["c"]}
        }),
        &[
            json!({"a": 1, "c": "x"}),
            json!({"c": 1}),
            json!({"b": 0, "c": 1}),
        ],
        &[json!({"a": 1, "c": 1}), json!({"b": 0})],
    );
    refused(
        json!({"dependentSchemas": {"a": {}, "b": {}, "c": {}, "d": {}, "e": {}}}),
        "dependentSchemas",
        "more than 4",
    );
    // allOf parts' dependencies all hold.
    check(
        json!({"allOf": [{"dependentRequired": {"a": ["b"]}}, {"dependentRequired": {"a": ["x"]}}]}),
        &[json!({"a": 1, "b": 2, "x": 3})],
        &[json!({"a": 1, "b": 2}), json!({"a": 1, "x": 3})],
    );
}

#[test]
fn min_and_max_properties() {
    check(
        json!({"minProperties": 1}),
        &[json!({"a": 1}), json!("x"), json!({"a": 1, "b": 2})],
        &[json!({})],
    );
    check(
        json!({"maxProperties": 2}),
        &[json!({}), json!({"a": 1, "b": 2}), json!([1, 2, 3])],
        &[json!({"a": 1, "b": 2, "c": 3})],
    );
    check(
        json!({
            "properties": {"a": true, "b": true, "c": true},
            "additionalProperties": false,
            "minProperties": 2,
            "maxProperties": 2
        }),
        &[json!({"a": 1, "b": 2}), json!({"c": 1, "a": 2})],
        &[json!({"a": 1}), json!({"a": 1, "b": 2, "c": 3}), json!({})],
    );
    // With one key left and a required one missing, only the required one may start.
    check(
        json!({"required": ["a", "b"], "maxProperties": 2}),
        &[json!({"a": 1, "b": 2}), json!({"b": 1, "a": 2})],
        &[json!({"a": 1, "c": 2}), json!({"a": 1, "b": 2, "c": 3})],
    );
    check(
        json!({"required": ["a"], "minProperties": 2}),
        &[json!({"a": 1, "b": 2})],
        &[json!({"a": 1}), json!({"b": 1})],
    );
    // More required keys than allowed: no object at all.
    check(
        json!({"required": ["a", "b", "c"], "maxProperties": 2}),
        &[json!("x")],
        &[json!({"a": 1, "b": 1, "c": 1}), json!({})],
    );
    refused(
        json!({"minProperties": 3}),
        "minProperties",
        "more than one key",
    );
    refused(
        json!({"dependentRequired": {"a": ["b"]}, "maxProperties": 3}),
        "maxProperties",
        "dependentRequired",
    );
}

/// An `additionalProperties` (`items`) sees only its own part's properties (prefix): merged
/// with a part naming others, it governs those too.
#[test]
fn additional_properties_and_items_do_not_look_into_other_parts() {
    check(
        json!({"allOf": [{"properties": {"foo": {}}}], "additionalProperties": {"type": "boolean"}}),
        &[json!({"foo": true}), json!({"bar": false}), json!({})],
        &[json!({"foo": 1}), json!({"bar": 1})],
    );
    // The classic surprise, enforced as specified: the base's `id` is "additional" outside.
    check(
        json!({
            "$defs": {"base": {"properties": {"id": {"type": "integer"}}}},
            "allOf": [{"$ref": "#/$defs/base"}],
            "properties": {"name": {"type": "string"}},
            "additionalProperties": false
        }),
        &[json!({"name": "x"}), json!({})],
        &[json!({"id": 1, "name": "x"}), json!({"other": 1})],
    );
    check(
        json!({
            "allOf": [{"prefixItems": [{"type": "string"}, {"type": "string"}]}],
            "items": {"type": "string", "maxLength": 1}
        }),
        &[json!(["a", "b"]), json!(["a"]), json!(["a", "b", "c"])],
        &[json!(["ab"]), json!(["a", "bc"]), json!([1])],
    );
}

#[test]
fn contains_min_and_max() {
    check(
        json!({"contains": {"minimum": 5}}),
        &[
            json!([3, 4, 5]),
            json!([5]),
            json!([6, "x"]),
            json!("not an array"),
            json!(["x"]),
        ],
        &[json!([]), json!([2, 3, 4])],
    );
    check(
        json!({"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}, "minContains": 2, "maxContains": 3}),
        &[json!([1, 1]), json!([1, 2, 1, 1]), json!([2, 1, 3, 1])],
        &[
            json!([1]),
            json!([1, 1, 1, 1]),
            json!([1, 1, "x"]),
            json!([]),
        ],
    );
    // Within maxItems: the last slots go to the matches still missing.
    check(
        json!({"contains": {"type": "string"}, "minContains": 2, "maxItems": 3}),
        &[
            json!(["a", "b"]),
            json!([1, "a", "b"]),
            json!(["a", 2, "b"]),
        ],
        &[
            json!([1, 2, "a"]),
            json!(["a"]),
            json!(["a", "b", "c", "d"]),
        ],
    );
    check(
        json!({"contains": {"type": "null"}, "maxContains": 1}),
        &[json!([null]), json!([1, null, 2])],
        &[json!([null, null]), json!([])],
    );
    // minContains 0 without maxContains asks nothing; min/maxContains without contains are void.
    check(
        json!({"contains": false, "minContains": 0}),
        &[json!([]), json!([1])],
        &[],
    );
    check(
        json!({"minContains": 3, "maxContains": 0}),
        &[json!([]), json!([1, 2])],
        &[],
    );
    check(
        json!({"allOf": [{"contains": {"type": "integer"}}, {"maxContains": 0}]}),
        &[json!([1])],
        &[json!(["x"])],
    );
    // Impossible counts: no array.
    check(
        json!({"contains": true, "minContains": 3, "maxItems": 2}),
        &[json!("s")],
        &[json!([1, 2]), json!([])],
    );
    refused(
        json!({"prefixItems": [{"type": "string"}], "contains": {"type": "integer"}}),
        "contains",
        "prefixItems",
    );
}

#[test]
fn property_names() {
    check(
        json!({"propertyNames": {"maxLength": 3}}),
        &[
            json!({}),
            json!({"abc": 1}),
            json!("x"),
            json!({"a": 1, "bb": 2}),
        ],
        &[json!({"abcd": 1}), json!({"a": 1, "abcd": 2})],
    );
    check(
        json!({
            "properties": {"long_name": {"type": "integer"}, "a": true},
            "propertyNames": {"pattern": "^[a-z]{1,4}$"}
        }),
        &[json!({"a": 1}), json!({"xy": 2})],
        &[json!({"long_name": 1}), json!({"ABC": 1})],
    );
    check(
        json!({"propertyNames": false}),
        &[json!({}), json!(1)],
        &[json!({"a": 1})],
    );
    check(
        json!({"propertyNames": {"enum": ["x", "y"]}, "additionalProperties": {"type": "integer"}}),
        &[json!({"x": 1, "y": 2}), json!({})],
        &[json!({"z": 1}), json!({"x": "s"})],
    );
    // A required key the names exclude: no object at all.
    check(
        json!({"propertyNames": {"const": "a"}, "required": ["b"]}),
        &[json!("s")],
        &[json!({"b": 1}), json!({})],
    );
    refused(
        json!({"propertyNames": {"anyOf": [{"maxLength": 1}, {"pattern": "^x"}]}}),
        "propertyNames",
        "`anyOf`",
    );
}

#[test]
fn unevaluated_properties_and_items_where_static() {
    check(
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": false}),
        &[json!({"a": 1}), json!({})],
        &[json!({"b": 1}), json!({"a": "x"}), json!({"a": 1, "b": 2})],
    );
    // The common composition: a base through `$ref` in `allOf`, more properties beside it.
    let composed = json!({
        "$defs": {"base": {"properties": {"id": {"type": "integer"}}, "required": ["id"]}},
        "allOf": [{"$ref": "#/$defs/base"}],
        "properties": {"name": {"type": "string"}},
        "unevaluatedProperties": false
    });
    check(
        composed,
        &[json!({"id": 1, "name": "x"}), json!({"id": 2})],
        &[
            json!({"id": 1, "x": 2}),
            json!({"name": "x"}),
            json!({"id": 1, "name": 3}),
        ],
    );
    // A `$ref` with siblings, and an unevaluatedProperties schema.
    check(
        json!({
            "$defs": {"a": {"properties": {"a": {"type": "boolean"}}}},
            "$ref": "#/$defs/a",
            "unevaluatedProperties": {"type": "string"}
        }),
        &[json!({"a": true, "b": "x"}), json!({"c": "y"})],
        &[json!({"b": 1}), json!({"a": "s"})],
    );
    // An additionalProperties in a part evaluates everything: the keyword is void.
    check(
        json!({"allOf": [{"additionalProperties": {"type": "integer"}}], "unevaluatedProperties": false}),
        &[json!({"z": 3}), json!({})],
        &[json!({"z": "s"})],
    );
    check(
        json!({"prefixItems": [{"type": "integer"}], "unevaluatedItems": false}),
        &[json!([1]), json!([]), json!("not an array")],
        &[json!([1, 2]), json!(["a"])],
    );
    check(
        json!({
            "allOf": [{"prefixItems": [{"type": "integer"}, {"type": "string"}]}],
            "prefixItems": [{"minimum": 0}],
            "unevaluatedItems": false
        }),
        &[json!([1, "a"]), json!([1])],
        &[json!([1, "a", 3]), json!([1, 2]), json!([-1])],
    );
    // Not static: refused by name.
    refused(
        json!({"anyOf": [{"properties": {"a": true}}], "unevaluatedProperties": false}),
        "unevaluatedProperties",
        "static",
    );
    refused(
        json!({"not": {"required": ["a"]}, "unevaluatedProperties": false}),
        "unevaluatedProperties",
        "static",
    );
    // A part's own unevaluatedProperties sees only that part: never merged.
    refused(
        json!({"allOf": [{"properties": {"a": true}, "unevaluatedProperties": false}], "properties": {"b": true}}),
        "unevaluatedProperties",
        "allOf part",
    );
}

/// Random JSON values: numbers written canonically (integers, halves), short strings, small
/// containers.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-12i64..12).prop_map(|i| json!(i)),
        (-12i64..12).prop_map(|i| json!(i as f64 + 0.5)),
        "[ab0-9é]{0,5}".prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[abxy]", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Schemas of this file's keywords, to compare against the `jsonschema` crate.
fn schemas() -> Vec<Value> {
    vec![
        json!({"patternProperties": {"^x-": {"type": "integer", "minimum": 0}, "^x-.": {"minimum": 0, "type": "integer"}},
            "properties": {"a": {"type": "string"}, "x-a": {"maximum": 5}}, "additionalProperties": false}),
        json!({"patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 5}},
            "properties": {"ab": {"maximum": 9}}, "additionalProperties": {"type": "string", "maxLength": 2},
            "maxProperties": 4}),
        json!({"type": "array", "items": {"enum": ["x", 1, true, null, "yy"]}, "uniqueItems": true, "minItems": 2}),
        json!({"type": "array", "items": {"type": "string", "maxLength": 1, "pattern": "^[ab]*$"}, "uniqueItems": true, "minItems": 1}),
        json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "minItems": 3}),
        json!({"type": "object", "properties": {
            "año": {"enum": ["niño", "€uro", "😀"]},
            "s": {"type": "string", "maxLength": 3, "pattern": "^[^a-z]*$"}
        }, "required": ["año", "s"], "additionalProperties": {"type": "string", "maxLength": 1}}),
        json!({"type": "object", "properties": {
            "h": {"type": "string", "format": "hostname"},
            "i": {"type": "string", "format": "ipv6"},
            "d": {"type": "string", "format": "duration"},
            "p": {"type": "string", "format": "json-pointer"},
            "u": {"type": "string", "format": "uri-reference"}
        }, "required": ["h", "i", "d", "p", "u"], "additionalProperties": false}),
        json!({"not": {"type": "integer"}}),
        json!({"not": {"anyOf": [{"type": "string", "maxLength": 2}, {"minimum": 0}]}}),
        json!({"not": {"properties": {"a": {"type": "integer"}}, "required": ["b"]}}),
        json!({"not": {"type": "array", "prefixItems": [{"type": "string"}], "maxItems": 2}}),
        json!({"type": "object", "not": {"properties": {"a": {"not": {"type": "null"}}}}}),
        json!({"not": {"oneOf": [{"type": "number"}, {"minimum": 0}]}}),
        json!({"not": {"enum": [1, "a", null, 2.5]}}),
        json!({"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": "string"}}),
        json!({"if": {"required": ["a"]}, "then": {"properties": {"b": {"type": "string"}}}}),
        json!({"oneOf": [{"type": "integer"}, {"minimum": 2}]}),
        json!({"oneOf": [{"required": ["a"]}, {"required": ["b"]}, {"type": "array"}]}),
        json!({"oneOf": [{"items": false}, {"type": "array", "maxItems": 1}, {"type": "string", "pattern": "a"}]}),
        json!({"multipleOf": 0.5}),
        json!({"not": {"multipleOf": 0.5}}),
        json!({"dependentRequired": {"a": ["b"], "b": ["x"]}}),
        json!({"maxProperties": 1}),
        json!({"contains": {"type": "integer", "minimum": 0}, "minContains": 2, "maxContains": 3}),
        json!({"type": "array", "items": {"type": ["string", "null"]}, "contains": {"type": "null"}, "maxItems": 3}),
        json!({"allOf": [{"properties": {"a": {"type": "integer"}}}], "properties": {"b": true}, "additionalProperties": {"type": "string"}}),
        json!({"properties": {"a": {"type": "integer"}, "b": true}, "required": ["a"], "minProperties": 2, "maxProperties": 2}),
        json!({"propertyNames": {"pattern": "^[ab]"}, "properties": {"x": true}}),
        json!({"dependentSchemas": {"a": {"properties": {"b": {"type": "integer"}}}, "x": {"required": ["y"]}}}),
        json!({"properties": {"a": {"type": "integer"}}, "dependentRequired": {"a": ["y"]}, "additionalProperties": {"type": "null"}}),
        json!({"allOf": [{"properties": {"a": {"type": "integer"}}}], "properties": {"b": true}, "unevaluatedProperties": {"type": "array"}}),
        json!({"allOf": [{"prefixItems": [{"type": "string"}]}], "prefixItems": [true, {"type": "null"}], "unevaluatedItems": {"type": "boolean"}}),
        json!({"type": "integer", "multipleOf": 3, "maximum": 9}),
        json!({"type": "array", "items": {"type": "number", "multipleOf": 0.25, "exclusiveMinimum": -2}}),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The grammar accepts a value exactly when the `jsonschema` crate finds it valid.
    #[test]
    fn agrees_with_jsonschema(v in value()) {
        for s in schemas() {
            let g = grammar(&s);
            let valid = jsonschema::validator_for(&s).unwrap().is_valid(&v);
            let text = serde_json::to_string(&v).unwrap();
            prop_assert_eq!(g.check_bytes(text.as_bytes()).is_ok(), valid, "{} on {}", s, text);
        }
    }
}

/// Outputs fuzzed per schema. Few: masks over unions of object variants whose values are any
/// JSON are slow (about 1 s per output for three of these schemas, release build), a cost
/// to cut before more.
const FUZZ_OUTPUTS: u64 = 8;

/// Fuzzing: every output the automaton can produce finishes and validates.
#[test]
fn fuzzed_outputs_validate() {
    let vocab = testkit::llama_vocab();
    for s in schemas() {
        let started = std::time::Instant::now();
        let g = grammar(&s);
        let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        let checker = Checker::for_schema(&s).unwrap();
        let fuzzer = Fuzzer::new(&a, FuzzOptions::default().seed(17)).unwrap();
        let mut bad = Vec::new();
        fuzzer.run(
            &checker,
            FUZZ_OUTPUTS,
            |_| (),
            |sample, ()| {
                if sample.outcome != Outcome::Valid {
                    bad.push(String::from_utf8_lossy(&sample.text).into_owned());
                }
                true
            },
        );
        assert!(bad.is_empty(), "{s}: {bad:?}");
        eprintln!(
            "{s}: {FUZZ_OUTPUTS} outputs, {:.2} s",
            started.elapsed().as_secs_f64()
        );
    }
}
