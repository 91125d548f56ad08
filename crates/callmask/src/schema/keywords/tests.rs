//! The keyword table's tests: every keyword the compiler reads is in the table, every keyword
//! with an enforcing role is enforced (a witness schema whose language it changes) or refused
//! by name, and the scalar cache key covers every keyword the scalar compiler reads.

use super::*;
use crate::error::{Error, Result};
use crate::grammar::{CompileOptions, Grammar};
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// How a keyword shows that it is enforced.
enum Witness {
    /// `text` is accepted by exactly one of `schema` and `schema` without the keyword (at its
    /// top level).
    Changes(Value, &'static str),
    /// Compiling `schema` is refused with [`Error::UnsupportedKeyword`] naming the keyword.
    Refused(Value),
    /// The keyword never constrains a value (its role is not enforcing).
    Declared,
}

/// The witness of each keyword. Exhaustive on purpose: a new keyword does not compile until it
/// has one.
fn witness(k: Keyword) -> Witness {
    use Witness::*;
    match k {
        Keyword::Type => Changes(json!({"type": "string"}), "1"),
        Keyword::Nullable => Changes(json!({"type": "string", "nullable": true}), "null"),
        Keyword::Enum => Changes(json!({"enum": ["a"]}), r#""b""#),
        Keyword::Const => Changes(json!({"const": "a"}), r#""b""#),
        Keyword::MinLength => Changes(json!({"type": "string", "minLength": 2}), r#""a""#),
        Keyword::MaxLength => Changes(json!({"type": "string", "maxLength": 1}), r#""ab""#),
        Keyword::Pattern => Changes(json!({"type": "string", "pattern": "^a"}), r#""b""#),
        Keyword::Format => Changes(json!({"type": "string", "format": "date"}), r#""x""#),
        Keyword::Minimum => Changes(json!({"type": "integer", "minimum": 2}), "1"),
        Keyword::Maximum => Changes(json!({"type": "integer", "maximum": 0}), "1"),
        Keyword::ExclusiveMinimum => {
            Changes(json!({"type": "integer", "exclusiveMinimum": 1}), "1")
        }
        Keyword::ExclusiveMaximum => {
            Changes(json!({"type": "integer", "exclusiveMaximum": 1}), "1")
        }
        Keyword::MultipleOf => Changes(json!({"type": "integer", "multipleOf": 2}), "3"),
        Keyword::Properties => Changes(
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            r#"{"a":1}"#,
        ),
        Keyword::Required => Changes(json!({"type": "object", "required": ["a"]}), "{}"),
        Keyword::AdditionalProperties => Changes(
            json!({"type": "object", "additionalProperties": false}),
            r#"{"a":1}"#,
        ),
        Keyword::PatternProperties => Changes(
            json!({"type": "object", "patternProperties": {"^a": {"type": "string"}}}),
            r#"{"a":1}"#,
        ),
        Keyword::PropertyNames => Changes(
            json!({"type": "object", "propertyNames": {"maxLength": 1}}),
            r#"{"ab":1}"#,
        ),
        Keyword::MinProperties => Changes(json!({"type": "object", "minProperties": 1}), "{}"),
        Keyword::MaxProperties => {
            Changes(json!({"type": "object", "maxProperties": 0}), r#"{"a":1}"#)
        }
        Keyword::DependentRequired => Changes(
            json!({"type": "object", "dependentRequired": {"a": ["b"]}}),
            r#"{"a":1}"#,
        ),
        Keyword::DependentSchemas => Changes(
            json!({"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}}),
            r#"{"a":1}"#,
        ),
        Keyword::Dependencies => Changes(
            json!({"type": "object", "dependencies": {"a": ["b"]}}),
            r#"{"a":1}"#,
        ),
        Keyword::UnevaluatedProperties => Changes(
            json!({"type": "object", "properties": {"a": {}}, "unevaluatedProperties": false}),
            r#"{"b":1}"#,
        ),
        Keyword::Items => Changes(json!({"type": "array", "items": {"type": "string"}}), "[1]"),
        Keyword::PrefixItems => Changes(
            json!({"type": "array", "prefixItems": [{"type": "string"}]}),
            "[1]",
        ),
        Keyword::AdditionalItems => Changes(
            json!({"type": "array", "items": [{}], "additionalItems": false}),
            "[1,2]",
        ),
        Keyword::MinItems => Changes(json!({"type": "array", "minItems": 1}), "[]"),
        Keyword::MaxItems => Changes(json!({"type": "array", "maxItems": 0}), "[1]"),
        Keyword::UniqueItems => Changes(
            json!({"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": true}),
            "[1,1]",
        ),
        Keyword::Contains => Changes(
            json!({"type": "array", "contains": {"type": "string"}}),
            "[1]",
        ),
        Keyword::MinContains => Changes(
            json!({"type": "array", "contains": {"type": "string"}, "minContains": 2}),
            r#"["a"]"#,
        ),
        Keyword::MaxContains => Changes(
            json!({"type": "array", "contains": {"type": "string"}, "maxContains": 1}),
            r#"["a","b"]"#,
        ),
        Keyword::UnevaluatedItems => Changes(
            json!({"type": "array", "prefixItems": [{}], "unevaluatedItems": false}),
            "[1,2]",
        ),
        Keyword::AllOf => Changes(json!({"allOf": [{"type": "string"}]}), "1"),
        Keyword::AnyOf => Changes(json!({"anyOf": [{"type": "string"}]}), "1"),
        Keyword::OneOf => Changes(json!({"oneOf": [{"type": "string"}]}), "1"),
        Keyword::Not => Changes(json!({"not": {"type": "string"}}), r#""a""#),
        Keyword::If | Keyword::Then => Changes(
            json!({"if": {"type": "string"}, "then": {"maxLength": 1}}),
            r#""ab""#,
        ),
        Keyword::Else => Changes(
            json!({"if": {"type": "string"}, "else": {"type": "null"}}),
            "1",
        ),
        Keyword::Ref => Changes(
            json!({"$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}}),
            "1",
        ),
        Keyword::DynamicRef => Changes(
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$dynamicRef": "#s",
                "$defs": {"s": {"$dynamicAnchor": "s", "type": "string"}}
            }),
            "1",
        ),
        Keyword::RecursiveRef => Refused(json!({"$recursiveRef": "#"})),
        Keyword::Schema
        | Keyword::Id
        | Keyword::Anchor
        | Keyword::DynamicAnchor
        | Keyword::Defs
        | Keyword::Definitions
        | Keyword::Comment
        | Keyword::Title
        | Keyword::Description
        | Keyword::Default
        | Keyword::Examples
        | Keyword::Deprecated
        | Keyword::ReadOnly
        | Keyword::WriteOnly
        | Keyword::ContentEncoding
        | Keyword::ContentMediaType => Declared,
    }
}

/// A schema that keeps `k` after its supported rewrites, so that it is refused (for the
/// keywords with a [`Keyword::refusal`]). Exhaustive, as [`witness`].
fn refused_use(k: Keyword) -> Option<Value> {
    let five = |v: Value| {
        Value::Object(
            ["a", "b", "c", "d", "e"]
                .iter()
                .map(|n| (n.to_string(), v.clone()))
                .collect(),
        )
    };
    match k {
        Keyword::DependentSchemas => Some(json!({
            "type": "object",
            "dependentSchemas": five(json!({"required": ["z"]}))
        })),
        Keyword::Dependencies => Some(json!({
            "type": "object",
            "dependencies": five(json!({"required": ["z"]}))
        })),
        Keyword::UnevaluatedProperties => Some(json!({
            "anyOf": [{"properties": {"a": {}}}, {}],
            "unevaluatedProperties": false
        })),
        Keyword::UnevaluatedItems => Some(json!({
            "anyOf": [{"prefixItems": [{}]}, {}],
            "unevaluatedItems": false
        })),
        Keyword::DynamicRef => Some(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$dynamicRef": "#s"
        })),
        Keyword::RecursiveRef => Some(json!({"$recursiveRef": "#"})),
        _ => None,
    }
}

fn compile(schema: &Value) -> Result<Grammar> {
    Grammar::from_json_schema(schema, &CompileOptions::default())
}

fn accepts(schema: &Value, text: &str) -> bool {
    let g = compile(schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
    g.check_bytes(text.as_bytes()).is_ok()
}

/// `e` is a refusal of keyword `k`.
fn names(e: &Error, k: Keyword) -> bool {
    matches!(e, Error::UnsupportedKeyword { keyword, .. } if keyword == k.name())
}

#[test]
fn names_round_trip() {
    let mut seen = BTreeSet::new();
    for &k in Keyword::ALL {
        assert_eq!(Keyword::from_name(k.name()), Some(k));
        assert!(seen.insert(k.name()), "{} twice", k.name());
    }
    assert_eq!(Keyword::from_name("x-vendor"), None);
    assert!(is_annotation("x-vendor") && is_annotation("title") && is_annotation("then"));
    assert!(!is_annotation("minLength") && !is_annotation("$recursiveRef"));
}

/// Every keyword with an enforcing role changes the language of a schema that uses it (or is
/// refused naming it); the others are declared, never enforced.
#[test]
fn every_enforced_keyword_is_exercised() {
    for &k in Keyword::ALL {
        match witness(k) {
            Witness::Changes(schema, text) => {
                let mut without = schema.clone();
                without
                    .as_object_mut()
                    .expect("a witness schema is an object")
                    .remove(k.name());
                assert_ne!(
                    accepts(&schema, text),
                    accepts(&without, text),
                    "`{}` does not change the language of {schema} on {text}",
                    k.name()
                );
            }
            Witness::Refused(schema) => match compile(&schema) {
                Err(e) => assert!(names(&e, k), "{schema}: {e}"),
                Ok(_) => panic!("{schema} compiles: `{}` is not refused", k.name()),
            },
            Witness::Declared => assert!(
                !k.role().constrains(),
                "`{}` has the enforcing role {:?} but no witness",
                k.name(),
                k.role()
            ),
        }
    }
}

/// Every keyword with a refusal is refused, by name and with its reason, where it cannot be
/// enforced.
#[test]
fn every_refused_keyword_is_refused_by_name() {
    for &k in Keyword::ALL {
        let (Some(reason), schema) = (k.refusal(), refused_use(k)) else {
            assert!(refused_use(k).is_none(), "`{}` is never refused", k.name());
            continue;
        };
        let schema = schema.unwrap_or_else(|| panic!("no refused use of `{}`", k.name()));
        match compile(&schema) {
            Err(Error::UnsupportedKeyword {
                keyword, reason: r, ..
            }) => {
                assert_eq!(keyword, k.name(), "{schema}");
                assert_eq!(r, reason, "{schema}");
            }
            other => panic!(
                "{schema}: expected a refusal of `{}`, got {:?}",
                k.name(),
                other.err()
            ),
        }
    }
}

/// One string literal in Rust source, with the code around it.
struct Literal<'s> {
    text: &'s str,
    before: &'s str,
    after: &'s str,
}

/// The string literals of Rust source `src` (comments, character literals and raw strings
/// skipped).
fn literals(src: &str) -> Vec<Literal<'_>> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'r' if b.get(i + 1) == Some(&b'#') && !is_ident(b, i) => {
                let mut hashes = 0;
                let mut j = i + 1;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                i = j + 1;
                while i < b.len() && !b[i..].starts_with(&close) {
                    i += 1;
                }
                i += close.len();
            }
            b'\'' => {
                // A character literal (`'"'`, `'\''`) or a lifetime.
                if b.get(i + 1) == Some(&b'\\') {
                    i += 2;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                    i += 1;
                } else if b.get(i + 2) == Some(&b'\'') {
                    i += 3;
                } else {
                    i += 1;
                }
            }
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let line_start = src[..i].rfind('\n').map_or(0, |p| p + 1);
                let line_end = src[j..].find('\n').map_or(src.len(), |p| j + p);
                out.push(Literal {
                    text: &src[start..j],
                    before: &src[line_start..i],
                    after: &src[(j + 1).min(line_end)..line_end],
                });
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    out
}

fn is_ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// Functions whose string arguments are keyword names (map access, and the compiler's own
/// helpers that read a keyword's value or refuse one).
const READERS: &[&str] = &[
    "get",
    "get_mut",
    "contains_key",
    "remove",
    "insert",
    "get_count",
    "string_list",
    "bound",
    "kw_or_true",
    "without",
    "unsupported",
    "len",
];

/// True when literal `l` stands where a keyword name is read: an argument of a [`READERS`]
/// function, a `keyword:` field, a `match` arm or `matches!` pattern, a comparison, or a list
/// of names.
fn is_keyword_read(l: &Literal, in_list: bool) -> bool {
    let before = l.before.trim_end();
    let after = l.after.trim_start();
    let call = before.strip_suffix('(').or_else(|| {
        // `f(obj, "kw"`: the literal as a later argument.
        let open = before.rfind('(')?;
        let args = &before[open + 1..];
        (args.ends_with(',') && !args.contains(['"', ')'])).then_some(&before[..open])
    });
    if let Some(f) = call {
        let name = f
            .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()
            .unwrap_or("");
        if READERS.contains(&name) {
            return true;
        }
    }
    before.ends_with("keyword:")
        || before.ends_with('|')
        || before.ends_with("==")
        || before.ends_with("!=")
        || after.starts_with("=>")
        || after.starts_with('|')
        || after.starts_with("if ")
        || before.ends_with('[')
        || (in_list && before.ends_with(','))
}

/// The names read as keywords in `src`.
fn keyword_reads(src: &str) -> Vec<String> {
    let shaped = |t: &str| {
        let t = t.strip_prefix('$').unwrap_or(t);
        t.starts_with(|c: char| c.is_ascii_alphabetic())
            && t.chars().all(|c| c.is_ascii_alphanumeric())
    };
    let mut out = Vec::new();
    let mut in_list = false;
    for l in literals(src) {
        let read = is_keyword_read(&l, in_list);
        in_list = read && l.after.trim_start().starts_with(',');
        if read && shaped(l.text) {
            out.push(l.text.to_string());
        }
    }
    out
}

/// The keywords `src` names as [`Keyword`] values (`Keyword::MinLength`).
fn typed_reads(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in src.match_indices("Keyword::") {
        let rest = &src[at + "Keyword::".len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if let Some(k) = Keyword::ALL
            .iter()
            .find(|k| format!("{k:?}") == rest[..end])
        {
            out.push(k.name().to_string());
        }
    }
    out
}

/// The sources that read schema keywords: the schema compiler and the dialects that inspect
/// parameter schemas.
fn keyword_sources() -> Vec<(String, String)> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![
        src.join("schema.rs"),
        src.join("dialect/lower.rs"),
        src.join("dialect/structural.rs"),
    ];
    let mut dir: Vec<_> = std::fs::read_dir(src.join("schema"))
        .expect("src/schema")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    dir.sort();
    files.extend(dir);
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            (p.display().to_string(), text)
        })
        .collect()
}

/// Names that stand where keywords are read but are values, not keywords: JSON type names
/// (with the tool-calling aliases), format names, and the fields of the dialect formats the
/// dialect sources also read.
const NOT_KEYWORDS: &[&str] = &[
    // Type names (`type`'s values).
    "null",
    "boolean",
    "bool",
    "integer",
    "int",
    "number",
    "float",
    "string",
    "str",
    "object",
    "dict",
    "array",
    "tuple",
    "list",
    "any",
    // Format names (`format`'s values).
    "date",
    "time",
    "email",
    "uuid",
    "ipv4",
    "ipv6",
    "uri",
    "hostname",
    "duration",
    "iri",
    // Dialect fields and structural tag types (structural tags, dialect options).
    "begin",
    "end",
    "content",
    "elements",
    "loop",
    "max",
    "min",
    "rules",
    "schema",
    "structures",
    "style",
    "tags",
    "token",
    "triggers",
    "value",
    "dispatch",
    "grammar",
    "json",
    "optional",
    "or",
    "plus",
    "regex",
    "repeat",
    "sequence",
    "star",
    "tag",
];

/// Every keyword the compiler (or a dialect) reads by name is in the table: a keyword read but
/// not in the table would be neither enforced by a role, refused, nor declared an annotation.
#[test]
fn every_keyword_read_is_in_the_table() {
    let mut unknown = BTreeSet::new();
    let mut known = BTreeSet::new();
    for (file, text) in keyword_sources() {
        for k in keyword_reads(&text) {
            known.extend(Keyword::from_name(&k));
            if Keyword::from_name(&k).is_none() && !NOT_KEYWORDS.contains(&k.as_str()) {
                unknown.insert(format!("{k} ({file})"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "keywords read but not in the table (schema/keywords.rs): {unknown:?}"
    );
    // The scan sees the reads it is meant to (most of the table is read by name somewhere).
    assert!(known.len() > 40, "the scan found only {known:?}");
}

/// The scanner sees the reads it is meant to see.
#[test]
fn keyword_reads_are_found() {
    let src = r#"
        let a = obj.get("minLength");
        if o.contains_key("zzA") && get_count(obj, "zzB", path)? {}
        match k.as_str() { "zzC" | "zzD" => {}, _ => {} }
        for kw in ["zzE", "zzF"] {}
        // obj.get("zzCommented")
        let msg = format!("{k} must be a string");
        let c = '"'; let q = obj.get("zzG");
    "#;
    assert_eq!(
        keyword_reads(src),
        ["minLength", "zzA", "zzB", "zzC", "zzD", "zzE", "zzF", "zzG"]
    );
}

/// Every keyword the scalar compiler reads (`scalars.rs`, `strings.rs`, `numbers.rs`) is in
/// the scalar cache key: a scalar role (made part of the key by [`Compiler::scalar_key`]), or
/// a type keyword (folded into the key's type bits). A keyword missing from the key would make
/// two different schemas share one automaton.
#[test]
fn scalar_cache_key_covers_every_scalar_read() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/schema");
    for file in ["scalars.rs", "strings.rs", "numbers.rs"] {
        let text = std::fs::read_to_string(src.join(file)).expect("a scalar source");
        let typed = typed_reads(&text);
        if file == "scalars.rs" {
            assert!(
                typed.len() > 5,
                "the scalar path reads its keywords typed: {typed:?}"
            );
        }
        for k in keyword_reads(&text).into_iter().chain(typed) {
            if NOT_KEYWORDS.contains(&k.as_str()) {
                continue;
            }
            let role = Keyword::from_name(&k).map(Keyword::role);
            assert!(
                role.is_some_and(|r| r.is_scalar() || r == Role::Type),
                "{file} reads `{k}` (role {role:?}), which is not in the scalar cache key"
            );
        }
    }
}

/// Two schemas that differ in one scalar keyword have different scalar cache keys.
#[test]
fn scalar_cache_key_tells_every_scalar_keyword_apart() {
    let root = json!({});
    let opts = CompileOptions::default();
    let c = crate::schema::Compiler::new(&root, &opts);
    let types = super::super::T_STR | super::super::T_NUM;
    for k in Keyword::ALL.iter().filter(|k| k.role().is_scalar()) {
        let with = |v: i32| serde_json::Map::from_iter([(k.name().to_string(), json!(v))]);
        let keys = [serde_json::Map::new(), with(1), with(2)]
            .map(|s| c.scalar_key(&crate::schema::typed::Schema::read(&s), types));
        assert!(
            keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2],
            "`{}`: {keys:?}",
            k.name()
        );
    }
}
