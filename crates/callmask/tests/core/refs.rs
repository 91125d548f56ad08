//! References (issue 17e): `$id`-relative `$ref`s, `$anchor`, draft-7 `$id: "#foo"` anchors and
//! `$ref` siblings, `$dynamicRef`/`$dynamicAnchor`, remote documents from a caller-supplied
//! [`SchemaRegistry`] (a map and a folder), and the bounds on hostile reference graphs.
//!
//! Every form is checked on accepted and rejected instances with `Grammar::check_bytes`, at the
//! token level on the Llama 3.1 vocabulary, against the `jsonschema` crate (so the expectations
//! themselves are checked), and fuzzed: random complete outputs drawn from the masks, each
//! validated with `jsonschema` (given the same registry documents).

use callmask_testkit as testkit;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use callmask::fuzz::{FuzzOptions, Fuzzer, Outcome};
use callmask::{CompileOptions, Error, Grammar, SchemaRegistry, TokenAutomaton, Vocab};
use serde_json::{json, Value};

/// Remote documents: (URI, schema).
type Remotes = Vec<(&'static str, Value)>;

fn registry(remotes: &Remotes) -> SchemaRegistry {
    let mut r = SchemaRegistry::new();
    for (uri, v) in remotes {
        r = r.with_schema(uri, v.clone()).unwrap();
    }
    r
}

/// The `jsonschema` crate's validator for `schema`, with the same remote documents.
fn reference_validator(schema: &Value, remotes: &Remotes) -> jsonschema::Validator {
    let mut reg = jsonschema::Registry::new();
    for (uri, v) in remotes {
        reg = reg.add(*uri, v.clone()).unwrap();
    }
    let reg = reg.prepare().unwrap();
    jsonschema::options()
        .with_registry(&reg)
        .build(schema)
        .unwrap()
}

/// Checks `schema` on `instances` (value, valid?) at the byte and token levels and against
/// `jsonschema`, then fuzzes it; returns the grammar.
fn check(schema: Value, remotes: Remotes, instances: &[(Value, bool)]) -> Grammar {
    let opts = CompileOptions::default().registry(registry(&remotes));
    let g = Grammar::from_json_schema(&schema, &opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let v = reference_validator(&schema, &remotes);
    let vocab = testkit::llama_vocab();
    let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    for (inst, valid) in instances {
        assert_eq!(v.is_valid(inst), *valid, "jsonschema disagrees on {inst}");
        for text in [
            serde_json::to_string(inst).unwrap(),
            serde_json::to_string_pretty(inst).unwrap(),
        ] {
            assert_eq!(
                g.check_bytes(text.as_bytes()).is_ok(),
                *valid,
                "check_bytes on {text} for {schema}"
            );
            assert_eq!(tokens_ok(&a, &vocab, &text), *valid, "tokens of {text}");
        }
    }
    fuzz(&a, &v, 150);
    g
}

/// Whether the matcher accepts `text` as Llama 3.1 tokenizes it, as a complete output.
fn tokens_ok(a: &TokenAutomaton, vocab: &Arc<Vocab>, text: &str) -> bool {
    let mut m = a.matcher();
    for t in vocab.tokenize(text).unwrap() {
        if m.accept(t).is_err() {
            return false;
        }
    }
    m.can_end()
}

/// `count` random complete outputs, each valid for `jsonschema`; some must be complete.
fn fuzz(a: &TokenAutomaton, v: &jsonschema::Validator, count: u64) {
    let f = Fuzzer::new(a, FuzzOptions::default().seed(17).walk_tokens(40)).unwrap();
    let mut valid = 0;
    for i in 0..count {
        let s = f.draw(i, &HashSet::new());
        match &s.outcome {
            Outcome::Violation(why) => panic!("output {i}: {why}"),
            Outcome::Unfinished => continue,
            Outcome::Valid => {}
        }
        let text = std::str::from_utf8(&s.text).unwrap();
        let value: Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{text:?} is not JSON: {e}"));
        assert!(v.is_valid(&value), "fuzz output {text} violates the schema");
        valid += 1;
    }
    assert!(
        valid > count / 2,
        "only {valid} of {count} outputs finished"
    );
}

#[test]
fn id_relative_refs_and_anchors() {
    let schema = json!({
        "$id": "https://example.com/root.json",
        "type": "object",
        "properties": {
            "a": {"$ref": "#pos"},
            "b": {"$ref": "item.json"},
            "c": {"$ref": "item.json#/$defs/tag"},
            "d": {"$ref": "https://example.com/nested/deep.json"},
            "e": {"$ref": "nested/deep.json#short"}
        },
        "additionalProperties": false,
        "$defs": {
            "p": {"$anchor": "pos", "type": "integer", "minimum": 0, "maximum": 99},
            "item": {
                "$id": "item.json",
                "type": "array",
                "items": {"$ref": "#/$defs/tag"},
                "maxItems": 2,
                "$defs": {"tag": {"enum": ["x", "y"]}}
            },
            "deep": {
                "$id": "nested/deep.json",
                "$ref": "#/$defs/s",
                "$defs": {"s": {"type": "string", "maxLength": 3}, "t": {"$anchor": "short", "const": "z"}}
            }
        }
    });
    check(
        schema,
        vec![],
        &[
            (
                json!({"a": 1, "b": ["x"], "c": "y", "d": "abc", "e": "z"}),
                true,
            ),
            (json!({}), true),
            (json!({"a": -1}), false),
            (json!({"b": ["z"]}), false),
            (json!({"b": ["x", "y", "x"]}), false),
            (json!({"c": "z"}), false),
            (json!({"d": "abcd"}), false),
            (json!({"e": "y"}), false),
            (json!({"f": 1}), false),
        ],
    );
}

#[test]
fn draft7_id_anchors_and_ref_siblings_ignored() {
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "definitions": {"a": {"$id": "#foo", "type": "integer"}},
        "properties": {
            "x": {"$ref": "#foo"},
            "y": {"$ref": "#/definitions/a", "type": "string"}
        },
        "additionalProperties": false
    });
    check(
        schema,
        vec![],
        &[
            (json!({"x": 1, "y": 2}), true),
            (json!({"x": "s"}), false),
            // draft 7: `$ref` overrides its sibling `type`.
            (json!({"y": "s"}), false),
        ],
    );
    // 2020-12: the siblings apply alongside (integer and string: nothing).
    let modern = json!({
        "type": "object",
        "$defs": {"a": {"type": "integer"}},
        "properties": {"y": {"$ref": "#/$defs/a", "minimum": 5}},
        "additionalProperties": false
    });
    check(
        modern,
        vec![],
        &[
            (json!({"y": 7}), true),
            (json!({"y": 2}), false),
            (json!({"y": "s"}), false),
        ],
    );
}

#[test]
fn dynamic_refs_resolve_to_the_outermost_anchor() {
    // A generic list whose items a referring schema chooses.
    let list = json!({
        "$id": "https://example.com/list",
        "type": "array",
        "maxItems": 3,
        "items": {"$dynamicRef": "#item"},
        "$defs": {"default": {"$dynamicAnchor": "item", "type": "string", "maxLength": 4}}
    });
    let ints = json!({
        "$id": "https://example.com/ints",
        "$ref": "list",
        "$defs": {"int": {"$dynamicAnchor": "item", "type": "integer"}}
    });
    let remotes: Remotes = vec![("https://example.com/list", list.clone())];
    check(
        ints,
        remotes.clone(),
        &[
            (json!([1, 2]), true),
            (json!([]), true),
            (json!(["a"]), false),
            (json!([1, 2, 3, 4]), false),
        ],
    );
    // The same list compiled from its own root: its own anchor.
    check(
        list,
        vec![],
        &[(json!(["ab", "c"]), true), (json!([1]), false)],
    );
    // A `$dynamicRef` without a matching `$dynamicAnchor` at its target is a plain `$ref`.
    let plain = json!({
        "$id": "https://example.com/plain",
        "$ref": "list2",
        "$defs": {
            "int": {"$dynamicAnchor": "item", "type": "integer"},
            "list2": {
                "$id": "list2",
                "type": "array",
                "items": {"$dynamicRef": "#item"},
                "$defs": {"default": {"$anchor": "item", "type": "string"}}
            }
        }
    });
    check(plain, vec![], &[(json!(["a"]), true), (json!([1]), false)]);
}

#[test]
fn dynamic_refs_in_recursion() {
    let schema = json!({
        "$id": "https://example.com/int-tree",
        "$ref": "tree",
        "$defs": {
            "leaf": {"$dynamicAnchor": "leaf", "type": "integer", "minimum": 0},
            "tree": {
                "$id": "tree",
                "type": "object",
                "properties": {
                    "v": {"$dynamicRef": "#leaf"},
                    "kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 2}
                },
                "required": ["v"],
                "additionalProperties": false,
                "$defs": {"leaf": {"$dynamicAnchor": "leaf"}}
            }
        }
    });
    check(
        schema,
        vec![],
        &[
            (
                json!({"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}),
                true,
            ),
            (json!({"v": 1, "kids": [{"v": "s"}]}), false),
            (json!({"v": 1, "kids": [{"v": -1}]}), false),
            (json!({"v": true}), false),
        ],
    );
}

#[test]
fn remote_refs_from_a_map_registry() {
    let remotes: Remotes = vec![
        (
            "https://schemas.example.com/geo/point.json",
            json!({
                "type": "object",
                "properties": {"x": {"$ref": "../common/num.json"}, "y": {"$ref": "../common/num.json"}},
                "required": ["x", "y"],
                "additionalProperties": false
            }),
        ),
        (
            "https://schemas.example.com/common/num.json",
            json!({"type": "integer", "minimum": -9, "maximum": 9}),
        ),
    ];
    let schema = json!({
        "type": "array",
        "items": {"$ref": "https://schemas.example.com/geo/point.json"},
        "maxItems": 2
    });
    check(
        schema,
        remotes,
        &[
            (json!([{"x": 1, "y": -2}]), true),
            (json!([{"x": 1}]), false),
            (json!([{"x": 1, "y": 10}]), false),
            (json!([{"x": 1, "y": 2, "z": 3}]), false),
        ],
    );
}

/// The copies of remote targets go under a root key the user's document lacks: a schema that
/// itself uses the first candidate key (here as a definitions holder it references) compiles,
/// and both its own definition and the remote one are enforced.
#[test]
fn the_copies_key_never_takes_a_user_key() {
    let remotes: Remotes = vec![(
        "https://schemas.example.com/common/small.json",
        json!({"type": "integer", "minimum": 0, "maximum": 5}),
    )];
    let schema = json!({
        "$callmask-refs": {"word": {"type": "string", "maxLength": 3}},
        "type": "object",
        "properties": {
            "n": {"$ref": "https://schemas.example.com/common/small.json"},
            "w": {"$ref": "#/$callmask-refs/word"}
        },
        "required": ["n", "w"],
        "additionalProperties": false
    });
    check(
        schema,
        remotes,
        &[
            (json!({"n": 3, "w": "abc"}), true),
            (json!({"n": 6, "w": "abc"}), false),
            (json!({"n": 3, "w": "abcd"}), false),
            (json!({"n": 3}), false),
        ],
    );
}

#[test]
fn remote_refs_from_a_folder_and_unresolved_ones_name_the_uri() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("refs-registry");
    std::fs::create_dir_all(dir.join("units")).unwrap();
    std::fs::write(
        dir.join("units/temp.json"),
        r#"{"type": "object", "properties": {"unit": {"enum": ["C", "F"]}, "v": {"type": "number"}}, "required": ["unit", "v"], "additionalProperties": false}"#,
    )
    .unwrap();
    let reg = SchemaRegistry::new()
        .with_folder("http://localhost:1234/", &dir)
        .unwrap();
    let opts = CompileOptions::default().registry(reg);
    let schema = json!({"$id": "http://localhost:1234/root.json", "$ref": "units/temp.json"});
    let g = Grammar::from_json_schema(&schema, &opts).unwrap();
    assert!(g.check_bytes(br#"{"unit":"C","v":21.5}"#).is_ok());
    assert!(g.check_bytes(br#"{"unit":"K","v":21.5}"#).is_err());
    assert!(g.check_bytes(br#"{"unit":"C"}"#).is_err());

    // Not in the folder (or outside it): a typed error naming the absolute URI.
    for (r, uri) in [
        (
            "units/missing.json",
            "http://localhost:1234/units/missing.json",
        ),
        ("../../etc/passwd", "http://localhost:1234/etc/passwd"),
        (
            "https://elsewhere.example/x.json",
            "https://elsewhere.example/x.json",
        ),
    ] {
        let schema = json!({"$id": "http://localhost:1234/root.json", "$ref": r});
        match Grammar::from_json_schema(&schema, &opts) {
            Err(Error::UnresolvedRef { reference, .. }) => {
                assert!(reference.contains(uri), "{reference} for {r}")
            }
            other => panic!("{r}: {:?}", other.map(|_| ())),
        }
    }
    // Without a registry, a remote `$ref` is unresolved, never fetched.
    let schema = json!({"$ref": "http://localhost:1234/units/temp.json"});
    assert!(matches!(
        Grammar::from_json_schema(&schema, &CompileOptions::default()),
        Err(Error::UnresolvedRef { .. })
    ));
}

#[test]
fn hostile_reference_graphs_are_bounded() {
    let started = Instant::now();
    let strict = CompileOptions::default();
    // A cycle of `$ref`s that never reaches a value: a typed error, no hang.
    let cycle = json!({
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "$ref": "#/$defs/a"
    });
    let no_value = |r: Result<Grammar, Error>| match r {
        Err(Error::LimitExceeded { .. } | Error::InvalidSchema { .. }) => {}
        Err(e) => panic!("unexpected error kind {e}"),
        Ok(g) => assert!(g.is_empty(), "a cycle without progress admits a value"),
    };
    no_value(Grammar::from_json_schema(&cycle, &strict));
    // The same through `$id`s and anchors.
    let cycle = json!({
        "$id": "https://example.com/c",
        "$defs": {"a": {"$id": "a", "$ref": "b#x"}, "b": {"$id": "b", "$anchor": "x", "$ref": "a"}},
        "$ref": "a"
    });
    no_value(Grammar::from_json_schema(&cycle, &strict));

    // Dynamic scopes that multiply: each level may or may not enter a resource with its own
    // dynamic anchor, so 2^levels scopes reach the last level; refused by name past the cap.
    let levels = 14;
    let mut defs = serde_json::Map::new();
    for i in 0..levels {
        let next = if i + 1 < levels {
            json!({"anyOf": [{"$ref": format!("a{}", i + 1)}, {"$ref": format!("b{}", i + 1)}]})
        } else {
            json!({"items": {"$dynamicRef": "#d0"}, "$defs": {"z": {"$dynamicAnchor": "d0"}}})
        };
        let mut a = next.clone();
        a["$id"] = json!(format!("a{i}"));
        let own = json!({"$dynamicAnchor": format!("d{i}"), "type": "integer"});
        match a.get_mut("$defs") {
            Some(Value::Object(m)) => {
                m.insert("d".into(), own);
            }
            _ => a["$defs"] = json!({ "d": own }),
        }
        let mut b = next;
        b["$id"] = json!(format!("b{i}"));
        defs.insert(format!("a{i}"), a);
        defs.insert(format!("b{i}"), b);
    }
    let explode = json!({
        "$id": "https://example.com/explode",
        "anyOf": [{"$ref": "a0"}, {"$ref": "b0"}],
        "$defs": defs
    });
    match Grammar::from_json_schema(&explode, &strict) {
        Err(Error::LimitExceeded { what, .. }) => assert!(what.contains("$ref"), "{what}"),
        other => panic!("{:?}", other.map(|_| ())),
    }

    // A deep chain of nested `$id`s: fine within the nesting limit, refused past it.
    let chain = |n: usize| {
        let mut s = json!({"type": "integer"});
        for _ in 0..n {
            s = json!({"$id": "d/", "type": "array", "items": s, "$defs": {"r": {"$ref": "#/items"}}});
        }
        s
    };
    assert!(Grammar::from_json_schema(&chain(40), &strict).is_ok());
    assert!(matches!(
        Grammar::from_json_schema(&chain(300), &strict),
        Err(Error::LimitExceeded { .. })
    ));

    // A huge registry costs nothing until a `$ref` names a document; too many documents in
    // one compile are refused.
    let mut reg = SchemaRegistry::new();
    for i in 0..20_000 {
        reg = reg
            .with_schema(&format!("https://r.example/{i}.json"), json!({"const": i}))
            .unwrap();
    }
    let opts = CompileOptions::default().registry(reg);
    let one = json!({"$ref": "https://r.example/7.json"});
    let g = Grammar::from_json_schema(&one, &opts).unwrap();
    assert!(g.check_bytes(b"7").is_ok() && g.check_bytes(b"8").is_err());
    let many: Vec<Value> = (0..300)
        .map(|i| json!({"$ref": format!("https://r.example/{i}.json")}))
        .collect();
    match Grammar::from_json_schema(&json!({"anyOf": many}), &opts) {
        Err(Error::LimitExceeded { what, .. }) => assert!(what.contains("registry"), "{what}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "hostile reference graphs took {:?}",
        started.elapsed()
    );
}
