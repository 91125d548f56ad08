//! `unevaluatedProperties` and `unevaluatedItems` where the evaluated set is static.
//!
//! What these keywords see depends on which subschemas evaluated which properties (items) of
//! the instance: in general a run-time question (`anyOf` branches that matched, `if` outcomes,
//! `dependentSchemas` that fired, `patternProperties` matches). When a schema's in-place
//! applicators are only `allOf` parts and `$ref`s (followed transitively), and none of them
//! holds a keyword whose evaluation depends on the instance, every property named by a
//! `properties` keyword in that closure is evaluated, whatever the instance: the keyword is then
//! exactly `additionalProperties` over the union of those names (`items` past the longest
//! `prefixItems`), and it is rewritten so, as one more `allOf` part the merge handles exactly.
//! An `additionalProperties` (`items`) anywhere in the closure evaluates every property (item):
//! the keyword is then void and dropped.
//!
//! Anything else keeps the keyword, which [`Keyword::refusal`] then refuses by name. A closure part
//! holding its own `unevaluated*` keyword is not static either (it sees only its own part), and
//! [`Compiler::merge_two`] refuses to merge a part that still holds one.

use super::*;
use std::collections::BTreeSet;

/// Keywords whose evaluation of properties or items depends on the instance (or that callmask
/// does not follow statically).
const DYNAMIC: &[Keyword] = &[
    Keyword::AnyOf,
    Keyword::OneOf,
    Keyword::Not,
    Keyword::If,
    Keyword::Then,
    Keyword::Else,
    Keyword::DependentSchemas,
    Keyword::Dependencies,
    Keyword::PatternProperties,
    Keyword::Contains,
    Keyword::DynamicRef,
    Keyword::RecursiveRef,
];

/// The `unevaluated*` keywords.
pub(super) const UNEVALUATED: [Keyword; 2] =
    [Keyword::UnevaluatedProperties, Keyword::UnevaluatedItems];

/// Most subschemas followed through `allOf` and `$ref` from one schema.
const MAX_CLOSURE: usize = 256;

impl Compiler<'_> {
    /// `obj` with its `unevaluatedProperties`/`unevaluatedItems` rewritten where static (see
    /// the module doc); `None` when it has neither or they are not static (left in place).
    pub(super) fn rewrite_unevaluated(
        &self,
        obj: &Map<String, Value>,
        path: &str,
    ) -> Result<Option<Map<String, Value>>> {
        let props = obj.get(UNEVALUATED[0].name());
        let items = obj.get(UNEVALUATED[1].name());
        if props.is_none() && items.is_none() {
            return Ok(None);
        }
        let Some(closure) = self.in_place_closure(obj, path)? else {
            return Ok(None);
        };
        let all = || std::iter::once(obj).chain(closure.iter());
        if all().any(|o| DYNAMIC.iter().any(|k| o.contains_key(k.name())))
            || closure
                .iter()
                .any(|o| UNEVALUATED.iter().any(|k| o.contains_key(k.name())))
        {
            return Ok(None);
        }
        let mut out = obj.clone();
        let mut part = Map::new();
        if let Some(u) = props {
            out.remove(UNEVALUATED[0].name());
            if !all().any(|o| o.contains_key("additionalProperties")) {
                if closure.is_empty() {
                    out.insert("additionalProperties".into(), u.clone());
                } else {
                    let names: BTreeSet<&String> = all()
                        .filter_map(|o| o.get("properties").and_then(Value::as_object))
                        .flat_map(|p| p.keys())
                        .collect();
                    let listed: Map<String, Value> = names
                        .into_iter()
                        .map(|n| (n.clone(), Value::Bool(true)))
                        .collect();
                    part.insert("properties".into(), Value::Object(listed));
                    part.insert("additionalProperties".into(), u.clone());
                }
            }
        }
        if let Some(v) = items {
            // Draft-7 array-form `items` (a prefix by another name) is not followed here.
            if all().any(|o| o.get("items").is_some_and(Value::is_array)) {
                return Ok(None);
            }
            out.remove(UNEVALUATED[1].name());
            if !all().any(|o| o.contains_key("items") || o.contains_key("additionalItems")) {
                if closure.is_empty() {
                    out.insert("items".into(), v.clone());
                } else {
                    let longest = all()
                        .filter_map(|o| o.get("prefixItems").and_then(Value::as_array))
                        .map(Vec::len)
                        .max()
                        .unwrap_or(0);
                    part.insert(
                        "prefixItems".into(),
                        Value::Array(vec![Value::Bool(true); longest]),
                    );
                    part.insert("items".into(), v.clone());
                }
            }
        }
        if !part.is_empty() {
            let mut parts = match out.remove("allOf") {
                Some(Value::Array(a)) => a,
                Some(_) => return Err(invalid(path, "allOf must be an array")),
                None => Vec::new(),
            };
            parts.push(Value::Object(part));
            out.insert("allOf".into(), Value::Array(parts));
        }
        Ok(Some(out))
    }

    /// The object subschemas `obj` applies in place through `allOf` and `$ref`, transitively
    /// (not `obj` itself); `None` past [`MAX_CLOSURE`] subschemas.
    fn in_place_closure(
        &self,
        obj: &Map<String, Value>,
        path: &str,
    ) -> Result<Option<Vec<Map<String, Value>>>> {
        let mut out: Vec<Map<String, Value>> = Vec::new();
        let mut seen_refs: BTreeSet<String> = BTreeSet::new();
        let mut todo: Vec<Value> = self.in_place_parts(obj, path, &mut seen_refs)?;
        while let Some(s) = todo.pop() {
            let Value::Object(o) = s else {
                continue;
            };
            if out.len() >= MAX_CLOSURE {
                return Ok(None);
            }
            todo.extend(self.in_place_parts(&o, path, &mut seen_refs)?);
            out.push(o);
        }
        Ok(Some(out))
    }

    /// The `allOf` parts and the `$ref` target of one schema (each target once).
    fn in_place_parts(
        &self,
        o: &Map<String, Value>,
        path: &str,
        seen_refs: &mut BTreeSet<String>,
    ) -> Result<Vec<Value>> {
        let mut parts = match o.get("allOf") {
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(invalid(path, "allOf must be an array")),
            None => Vec::new(),
        };
        if let Some(r) = o.get("$ref") {
            let r = r
                .as_str()
                .ok_or_else(|| invalid(path, "$ref must be a string"))?;
            let (pointer, target) = self.ref_target_of(r, path)?;
            if seen_refs.insert(pointer) {
                parts.push(target.clone());
            }
        }
        Ok(parts)
    }
}
