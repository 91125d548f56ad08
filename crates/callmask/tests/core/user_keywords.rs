//! Internal state never lives in the user's keyword space: schemas sprinkled with unknown
//! keywords, including names shaped like callmask-internal markers (`x-callmask-*`) with any
//! value, compile without panicking into a grammar with exactly the language of the clean schema.

use callmask_testkit as testkit;

use std::collections::HashSet;

use callmask::fuzz::{FuzzOptions, Fuzzer};
use callmask::{CompileOptions, Grammar, TokenAutomaton};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

const SCHEMAS: [&str; 6] = ["weather", "order", "meeting", "profile", "tree", "shipment"];

fn bench_schema(name: &str) -> Value {
    let path = format!(
        "{}/benches/schemas/{name}.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The schema objects of a schema (itself, its `properties`' values, `items`, `$defs`' values,
/// `anyOf`/`oneOf`/`allOf` members), as JSON pointers.
fn schema_positions(v: &Value, at: String, out: &mut Vec<String>) {
    let Value::Object(o) = v else { return };
    out.push(at.clone());
    for map_kw in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(m)) = o.get(map_kw) {
            for (k, sub) in m {
                let k = k.replace('~', "~0").replace('/', "~1");
                schema_positions(sub, format!("{at}/{map_kw}/{k}"), out);
            }
        }
    }
    if let Some(items) = o.get("items") {
        schema_positions(items, format!("{at}/items"), out);
    }
    for list_kw in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(a)) = o.get(list_kw) {
            for (i, sub) in a.iter().enumerate() {
                schema_positions(sub, format!("{at}/{list_kw}/{i}"), out);
            }
        }
    }
}

fn keyword_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("x-callmask-allOf-strings".to_string()),
        "x-callmask-[a-zA-Z-]{0,12}",
        "x-[a-z]{1,8}",
        "[a-z][a-zA-Z]{2,10}".prop_filter("not a JSON Schema keyword", |k| !KNOWN
            .contains(&k.as_str())),
    ]
}

/// Keywords with a meaning: a generated name that collides with one is skipped.
const KNOWN: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "items",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "default",
    "examples",
    "title",
    "description",
    "nullable",
    "not",
    "contains",
    "anyOf",
    "oneOf",
    "allOf",
    "additionalProperties",
    "prefixItems",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "propertyNames",
    "patternProperties",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
    "if",
    "then",
    "else",
    "definitions",
    "additionalItems",
    "dependencies",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "minContains",
    "maxContains",
    "readOnly",
    "writeOnly",
    "deprecated",
];

fn keyword_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        "[a-z]{0,5}".prop_map(Value::from),
        Just(json!(null)),
        Just(json!([{"pattern": "z"}, 1, "x"])),
        Just(json!({"pattern": "q", "type": "integer"})),
        Just(json!([])),
    ]
}

/// Up to `n` outputs of `g`, drawn by the fuzzer.
fn outputs(g: &Grammar, n: u64) -> Vec<Vec<u8>> {
    let a = TokenAutomaton::new(g, testkit::llama_vocab()).unwrap();
    let f = Fuzzer::new(&a, FuzzOptions::default().seed(7)).unwrap();
    (0..n).map(|i| f.draw(i, &HashSet::new()).text).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn unknown_keywords_change_nothing(
        which in 0..SCHEMAS.len(),
        inserts in prop::collection::vec((any::<prop::sample::Index>(), keyword_name(), keyword_value()), 1..5),
    ) {
        let clean = bench_schema(SCHEMAS[which]);
        let mut positions = Vec::new();
        schema_positions(&clean, String::new(), &mut positions);
        let mut dirty = clean.clone();
        for (at, name, value) in &inserts {
            let p = at.get(&positions);
            if let Some(Value::Object(o)) = dirty.pointer_mut(p) {
                o.insert(name.clone(), value.clone());
            }
        }
        let opts = CompileOptions::default();
        let g_clean = Grammar::from_json_schema(&clean, &opts).unwrap();
        // Never a panic: `Ok`, or a typed error (unknown keywords are annotations, so `Ok`).
        let g_dirty = Grammar::from_json_schema(&dirty, &opts);
        let g_dirty = g_dirty.map_err(|e| TestCaseError::fail(format!("{e}: {dirty}")))?;
        for text in outputs(&g_clean, 12) {
            prop_assert!(g_dirty.check_bytes(&text).is_ok(), "dirty refuses {:?}", String::from_utf8_lossy(&text));
        }
        for text in outputs(&g_dirty, 12) {
            prop_assert!(g_clean.check_bytes(&text).is_ok(), "dirty allows {:?}", String::from_utf8_lossy(&text));
        }
    }
}

#[test]
fn a_marker_named_keyword_does_not_weaken_allof_patterns() {
    let schema: Value = serde_json::from_str(
        r#"{"type":"string","allOf":[{"x-callmask-allOf-strings":1,"pattern":"a"},{"pattern":"b"}]}"#,
    )
    .unwrap();
    let g = Grammar::from_json_schema(&schema, &CompileOptions::default()).unwrap();
    assert!(g.check_bytes(br#""ab""#).is_ok());
    assert!(g.check_bytes(br#""xbya""#).is_ok());
    assert!(g.check_bytes(br#""a""#).is_err());
    assert!(g.check_bytes(br#""b""#).is_err());
    // A marker-shaped keyword holding a list is still only an annotation.
    let mut m = Map::new();
    m.insert("type".into(), json!("string"));
    m.insert("x-callmask-allOf-strings".into(), json!([{"pattern": "z"}]));
    let g = Grammar::from_json_schema(&Value::Object(m), &CompileOptions::default()).unwrap();
    assert!(g.check_bytes(br#""a""#).is_ok());
}

/// Found by the property above: an unknown keyword beside a recursive `$ref` made the `$ref`
/// look constrained, so it was merged (inlined) instead of referenced, and the recursion
/// unrolled until the depth limit refused the schema.
#[test]
fn an_unknown_keyword_beside_a_recursive_ref_keeps_it_a_reference() {
    let schema = json!({
        "$defs": {"node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/node", "x-note": 0}}
        }, "additionalProperties": false}},
        "$ref": "#/$defs/node",
        "x-callmask-allOf-strings": [1],
    });
    let g = Grammar::from_json_schema(&schema, &CompileOptions::default()).unwrap();
    assert!(g
        .check_bytes(br#"{"children": [{"children": [{}]}]}"#)
        .is_ok());
    assert!(g.check_bytes(br#"{"children": [{"x": 1}]}"#).is_err());
}
