//! Numbers every JSON parser reads exactly (I-JSON, RFC 7493) by default: integers within
//! ±(2^53 − 1) and other numbers with at most 15 significant digits, unless the schema's own
//! bounds reach further; `ijson_numbers(false)` gives back every number JSON spells (19 integer
//! and 20 fraction digits). Negative zero is never written. Bounds past 2^53 are exact.

use callmask::{CompileOptions, Dialect, DialectOptions, Grammar, ToolChoice, Tools};
use serde_json::{json, Value};

fn grammar(schema: Value, opts: &CompileOptions) -> Grammar {
    Grammar::from_json_schema(&schema, opts).unwrap_or_else(|e| panic!("{schema}: {e}"))
}

fn accepts(g: &Grammar, text: &str) -> bool {
    g.check_bytes(text.as_bytes()).is_ok()
}

/// `(text, accepted by default, accepted with ijson_numbers off)` for one schema.
fn check(schema: Value, cases: &[(&str, bool, bool)]) {
    let ijson = grammar(schema.clone(), &CompileOptions::default());
    let json = grammar(
        schema.clone(),
        &CompileOptions::default().ijson_numbers(false),
    );
    for &(text, by_default, without_ijson) in cases {
        assert_eq!(
            accepts(&ijson, text),
            by_default,
            "{schema} (I-JSON): {text}"
        );
        assert_eq!(
            accepts(&json, text),
            without_ijson,
            "{schema} (JSON): {text}"
        );
    }
}

#[test]
fn integers_stay_within_what_doubles_hold() {
    check(
        json!({"type": "integer"}),
        &[
            ("9007199254740991", true, true),
            ("-9007199254740991", true, true),
            ("9007199254740992", false, true),
            ("4444444444444444444", false, true),
            ("-0", false, false),
            ("0", true, true),
            ("12.0", true, true),
            // The BFCL run's runaway zeros: one `.0` by default.
            ("2.00000000000000000000", false, true),
            ("1000000000000000.0000000000000", false, true),
        ],
    );
    // One bound: the other side keeps the I-JSON cap.
    check(
        json!({"type": "integer", "minimum": 0}),
        &[
            ("0", true, true),
            ("9007199254740991", true, true),
            ("9007199254740992", false, true),
            ("-1", false, false),
        ],
    );
}

#[test]
fn schema_bounds_past_the_cap_are_kept_exactly() {
    // A lower bound past 2^53 − 1 opens the upper side to 19 digits.
    check(
        json!({"type": "integer", "minimum": 9007199254740993u64}),
        &[
            ("9007199254740992", false, false),
            ("9007199254740993", true, true),
            ("9999999999999999999", true, true),
        ],
    );
    // -1e18 + 1 is not a double: the bound is computed on integers.
    check(
        json!({"type": "integer", "exclusiveMinimum": -1e18, "maximum": 0}),
        &[
            ("-1000000000000000000", false, false),
            ("-999999999999999999", true, true),
            ("0", true, true),
        ],
    );
    check(
        json!({"type": "integer", "exclusiveMaximum": 9007199254740993u64}),
        &[
            ("9007199254740992", true, true),
            ("9007199254740993", false, false),
            ("-9007199254740992", false, true),
        ],
    );
}

#[test]
fn integer_bounds_past_every_integer_saturate() {
    // `exclusiveMinimum: 1e300` read as the greatest i128 plus one used to wrap around to the
    // least one, and every integer went through.
    for (schema, below, above) in [
        (
            json!({"type": "integer", "exclusiveMinimum": 1e300}),
            "-5",
            "5",
        ),
        (
            json!({"type": "integer", "exclusiveMaximum": -1e300}),
            "5",
            "-5",
        ),
    ] {
        for opts in [
            CompileOptions::default(),
            CompileOptions::default().ijson_numbers(false),
        ] {
            // No integer is allowed: either the compile says so or nothing matches.
            if let Ok(g) = Grammar::from_json_schema(&schema, &opts) {
                for text in [below, above, "0", "9223372036854775807"] {
                    assert!(!accepts(&g, text), "{schema}: {text}");
                }
            }
        }
    }
    check(
        json!({"type": "integer", "minimum": -1e300, "maximum": 1e300}),
        // Bounds that reach past the I-JSON cap open it (the schema's own bounds win).
        &[("-5", true, true), ("9007199254740992", true, true)],
    );
}

#[test]
fn numbers_have_at_most_fifteen_significant_digits() {
    check(
        json!({"type": "number"}),
        &[
            ("3.14159265358979", true, true),
            ("3.141592653589793", false, true),
            ("123456789012345", true, true),
            ("1234567890123456", false, true),
            ("1.5e300", false, false),
            ("1.5e99", true, true),
            ("0.00000000000000000001", true, true),
            ("-0", false, false),
            ("-0.0", false, false),
            ("-0.25", true, true),
        ],
    );
    // Bounds within reach keep the I-JSON digits.
    check(
        json!({"type": "number", "minimum": 0, "maximum": 100}),
        &[
            ("99.5", true, true),
            ("99.12345678901234", false, true),
            ("100.5", false, false),
        ],
    );
    // A bound of 10^15 or more keeps the plain JSON digits.
    check(
        json!({"type": "number", "minimum": 0, "maximum": 1e18}),
        &[("123456789012345678", true, true), ("0.5", true, true)],
    );
    // Values without a schema (`true`, `{}`) follow the same rule.
    check(
        json!({"type": "array", "items": true}),
        &[("[1.5]", true, true), ("[12345678901234567]", false, true)],
    );
}

/// In a tool call too: the issue's runaway integer is refused, the default way.
#[test]
fn tool_call_arguments_are_read_exactly() {
    let tools = Tools::from_openai_json(&json!([{"type": "function", "function": {
        "name": "math.gcd",
        "parameters": {"type": "object", "properties": {
            "num1": {"type": "integer"}, "c": {"type": "number"}},
            "required": ["num1"]}}}]))
    .unwrap();
    let hermes = Dialect::by_name("hermes").unwrap();
    for (ijson, runaway_ok) in [(true, false), (false, true)] {
        let mut opts = DialectOptions::default();
        opts.tool_choice = ToolChoice::Required;
        opts.compile = CompileOptions::default().ijson_numbers(ijson);
        let g = hermes.compile(&tools, &opts).unwrap();
        let call = |args: &str| {
            format!("<tool_call>\n{{\"name\": \"math.gcd\", \"arguments\": {args}}}\n</tool_call>")
        };
        assert!(accepts(&g, &call(r#"{"num1": 40}"#)));
        assert_eq!(
            accepts(&g, &call(r#"{"num1": 4444444444444444444}"#)),
            runaway_ok
        );
        assert_eq!(
            accepts(&g, &call(r#"{"num1": 1, "c": 0.12345678901234567}"#)),
            runaway_ok
        );
    }
}

/// Lexemes compiled one way are not handed to a compile the other way through shared caches.
#[test]
fn shared_caches_keep_the_two_spellings_apart() {
    let caches = callmask::Caches::default();
    let schema = json!({"type": "array", "items": {"type": "integer"}});
    let with = |ijson: bool| {
        let opts = CompileOptions::default()
            .caches(Some(caches.clone()))
            .ijson_numbers(ijson);
        grammar(schema.clone(), &opts)
    };
    for _ in 0..2 {
        assert!(!accepts(&with(true), "[4444444444444444444]"));
        assert!(accepts(&with(false), "[4444444444444444444]"));
    }
}
