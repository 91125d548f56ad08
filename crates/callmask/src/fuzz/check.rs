//! Independent validation of fuzz outputs: JSON parsed strictly (duplicate keys refused), calls
//! parsed back with the grammar, arguments validated with the `jsonschema` crate against the
//! original schemas, never with callmask's own automaton.

use crate::{DistinctCalls, Error, Grammar, Result, Tools};
use serde_json::Value;

/// What a valid output holds, for coverage.
#[derive(Debug, Clone)]
pub enum Checked {
    /// The output of a schema grammar: one JSON value.
    Value(Value),
    /// The calls of a dialect output, as (function index, arguments).
    Calls(Vec<(usize, Value)>),
}

/// Validates outputs against the original schemas.
pub enum Checker {
    /// A plain JSON Schema grammar.
    Schema(Box<jsonschema::Validator>),
    /// A dialect over tools: one validator per function, in the tools' order.
    Tools(Vec<(String, jsonschema::Validator)>),
}

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Checker::Schema(_) => f.write_str("Checker::Schema"),
            Checker::Tools(v) => write!(f, "Checker::Tools({} functions)", v.len()),
        }
    }
}

fn validator(schema: &Value, what: &str) -> Result<jsonschema::Validator> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| Error::InvalidSchema {
            path: what.to_owned(),
            message: format!("the jsonschema validator refuses it: {e}"),
        })
}

impl Checker {
    /// A checker for outputs of a grammar compiled from `schema`.
    pub fn for_schema(schema: &Value) -> Result<Checker> {
        Ok(Checker::Schema(Box::new(validator(schema, "the schema")?)))
    }

    /// A checker for the calls of a dialect grammar over `tools`.
    pub fn for_tools(tools: &Tools) -> Result<Checker> {
        let mut v = Vec::new();
        for t in tools.as_slice() {
            let schema = t.parameters.clone().unwrap_or_else(|| {
                serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false})
            });
            // The dialects' type aliases, as the jsonschema crate does not know them.
            let schema = crate::schema::normalize_type_aliases(&schema);
            v.push((
                t.name.clone(),
                validator(&schema, &format!("the parameters of {}", t.name))?,
            ));
        }
        Ok(Checker::Tools(v))
    }

    /// A checker for the calls of a structural-tag grammar: (name, arguments schema) pairs, as
    /// [`crate::StructuralTag::calls`] lists them (a name may repeat: a call is valid when one of
    /// its name's schemas accepts its arguments).
    pub fn for_calls(calls: &[(String, Value)]) -> Result<Checker> {
        let mut v = Vec::new();
        for (name, schema) in calls {
            let schema = crate::schema::normalize_type_aliases(schema);
            v.push((
                name.clone(),
                validator(&schema, &format!("the schema of {name}"))?,
            ));
        }
        Ok(Checker::Tools(v))
    }

    /// Checks one complete output of `grammar`; the error says what is wrong.
    pub fn check(&self, grammar: &Grammar, text: &str) -> std::result::Result<Checked, String> {
        self.check_calls(grammar, text, grammar.inner.distinct_calls)
    }

    /// [`Checker::check`] under the rule `distinct` on repeated calls: with `Bend`, no two
    /// calls equal; with `End`, no two of the parsed calls equal, and of the calls the output
    /// holds (repeats included), none after the first repeat; with `Allow`, nothing.
    pub fn check_calls(
        &self,
        grammar: &Grammar,
        text: &str,
        distinct: DistinctCalls,
    ) -> std::result::Result<Checked, String> {
        if distinct == DistinctCalls::End {
            let all = grammar
                .parse_every_call(text)
                .map_err(|e| format!("the output does not parse: {e}"))?;
            let first_repeat = (1..all.len()).find(|&j| {
                all[..j].iter().any(|a| {
                    a.function.name == all[j].function.name
                        && crate::mask::json_eq(&calls_value(a), &calls_value(&all[j]))
                })
            });
            if let Some(j) = first_repeat.filter(|&j| j + 1 < all.len()) {
                return Err(format!(
                    "call {} follows call {}, a repeat, which ends the calls",
                    all[j + 1].id,
                    all[j].id
                ));
            }
        }
        let distinct = distinct != DistinctCalls::Allow;
        match self {
            Checker::Schema(validator) => {
                let value =
                    parse_strict(text).map_err(|e| format!("output is not valid JSON: {e}"))?;
                validator
                    .validate(&value)
                    .map_err(|e| format!("schema violation at {}: {e}", e.instance_path()))?;
                Ok(Checked::Value(value))
            }
            Checker::Tools(validators) => {
                let parsed = grammar
                    .parse(text)
                    .map_err(|e| format!("the output does not parse: {e}"))?;
                let mut calls = Vec::new();
                for c in &parsed.tool_calls {
                    let named: Vec<usize> = (0..validators.len())
                        .filter(|&i| validators[i].0 == c.function.name)
                        .collect();
                    let Some(&first) = named.first() else {
                        return Err(format!("call of unknown function {:?}", c.function.name));
                    };
                    let args = parse_strict(&c.function.arguments)
                        .map_err(|e| format!("arguments of {} are not valid JSON: {e}", c.id))?;
                    // With several schemas of one name (structural tags), one must accept.
                    let i = match named.iter().find(|&&i| validators[i].1.is_valid(&args)) {
                        Some(&i) => i,
                        None => {
                            let e = validators[first]
                                .1
                                .validate(&args)
                                .err()
                                .map(|e| format!("at {}: {e}", e.instance_path()))
                                .unwrap_or_else(|| "(another schema of that name)".into());
                            return Err(format!(
                                "arguments of {} ({}) violate the schema {e}",
                                c.id, c.function.name
                            ));
                        }
                    };
                    calls.push((i, args));
                }
                // No two calls equal (the matcher's distinct-calls rule, on by default).
                let pairs = if distinct { parsed.tool_calls.len() } else { 0 };
                for (j, b) in parsed.tool_calls.iter().enumerate().take(pairs) {
                    for a in &parsed.tool_calls[..j] {
                        if a.function.name == b.function.name
                            && crate::mask::json_eq(&calls_value(a), &calls_value(b))
                        {
                            return Err(format!(
                                "calls {} and {} are equal: {}({})",
                                a.id, b.id, b.function.name, b.function.arguments
                            ));
                        }
                    }
                }
                Ok(Checked::Calls(calls))
            }
        }
    }
}

/// A call's arguments as a JSON value (`{}` when empty or unreadable).
fn calls_value(c: &crate::tools::ToolCall) -> Value {
    serde_json::from_str(&c.function.arguments)
        .unwrap_or_else(|_| Value::Object(Default::default()))
}

/// Parses JSON text into a [`Value`], refusing duplicate object keys (which `serde_json` would
/// silently merge, hiding a grammar bug).
pub fn parse_strict(text: &str) -> Result<Value, String> {
    use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};

    struct Strict;
    impl<'de> DeserializeSeed<'de> for Strict {
        type Value = Value;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Strict {
        type Value = Value;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
            serde_json::Number::from_f64(v)
                .map(Value::Number)
                .ok_or_else(|| E::custom("number out of range"))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> Result<Value, E> {
            Ok(Value::String(v))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut items = Vec::new();
            while let Some(v) = seq.next_element_seed(Strict)? {
                items.push(v);
            }
            Ok(Value::Array(items))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut obj = serde_json::Map::new();
            while let Some(key) = map.next_key::<String>()? {
                let v = map.next_value_seed(Strict)?;
                if obj.insert(key.clone(), v).is_some() {
                    return Err(A::Error::custom(format!("duplicate key {key:?}")));
                }
            }
            Ok(Value::Object(obj))
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let v = Strict.deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(v)
}
