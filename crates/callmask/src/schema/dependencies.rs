//! Dependencies between an object's keys.
//!
//! - `dependentRequired` (and draft 7's `dependencies` entries that list names) is enforced at
//!   run time: the object node keeps, per key, the keys it requires ([`ObjectNode`]'s
//!   `dependencies`), the object may close only when every present key has its required keys,
//!   a key that requires a key that cannot appear cannot appear either, and the completion count
//!   includes the keys still required. No variants, no cost beyond the check at the close.
//! - `dependentSchemas` (and draft 7's schema-valued `dependencies`) where the dependent part
//!   merges: `{a: S}` is rewritten as the union "`a` absent" ∨ "`a` present ∧ S", one more
//!   `allOf` part; the two are disjoint on objects, so the union stays exact. Each dependency
//!   doubles the object's variants, so at most [`MAX_DEPENDENT_SCHEMAS`] are rewritten; more are
//!   refused by name.

use super::*;

/// Most `dependentSchemas` entries one schema may hold (each doubles the variants).
pub(super) const MAX_DEPENDENT_SCHEMAS: usize = 4;

/// `dependentRequired` (and draft 7's `dependencies` entries that are lists of names): (key,
/// the keys it requires), merged per key.
pub(super) fn dependent_required(
    obj: &Map<String, Value>,
    path: &str,
) -> Result<Vec<(String, Vec<String>)>> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for kw in ["dependentRequired", "dependencies"] {
        let Some(v) = obj.get(kw) else { continue };
        let m = v
            .as_object()
            .ok_or_else(|| invalid(path, format!("{kw} must be an object")))?;
        for (k, needs) in m {
            let Value::Array(list) = needs else {
                if kw == "dependentRequired" {
                    return Err(invalid(path, "dependentRequired values must be arrays"));
                }
                // A schema-valued `dependencies` entry: dependentSchemas, handled elsewhere.
                continue;
            };
            let mut names = Vec::new();
            for n in list {
                let n = n
                    .as_str()
                    .ok_or_else(|| invalid(path, format!("{kw} must list strings")))?;
                names.push(n.to_string());
            }
            match out.iter_mut().find(|d| &d.0 == k) {
                Some(d) => d.1.extend(names),
                None => out.push((k.clone(), names)),
            }
        }
    }
    for d in &mut out {
        d.1.sort();
        d.1.dedup();
    }
    Ok(out)
}

impl Compiler<'_> {
    /// `obj` with its `dependentSchemas` (and schema-valued draft-7 `dependencies`) rewritten
    /// as unions (see the module doc); `None` when it has none, or more than
    /// [`MAX_DEPENDENT_SCHEMAS`] (left in place, to be refused by name).
    pub(super) fn rewrite_dependent_schemas(
        &self,
        obj: &Map<String, Value>,
        path: &str,
    ) -> Result<Option<Map<String, Value>>> {
        let mut found: Vec<(String, Value)> = Vec::new();
        for kw in ["dependentSchemas", "dependencies"] {
            let Some(v) = obj.get(kw) else { continue };
            let m = v
                .as_object()
                .ok_or_else(|| invalid(path, format!("{kw} must be an object")))?;
            for (k, s) in m {
                match s {
                    Value::Array(_) if kw == "dependencies" => {} // dependentRequired
                    Value::Object(_) | Value::Bool(_) => found.push((k.clone(), s.clone())),
                    _ => return Err(invalid(path, format!("{kw} values must be schemas"))),
                }
            }
        }
        if found.is_empty() || found.len() > MAX_DEPENDENT_SCHEMAS {
            return Ok(None);
        }
        let mut out = obj.clone();
        out.remove("dependentSchemas");
        if let Some(Value::Object(d)) = out.get_mut("dependencies") {
            d.retain(|_, v| v.is_array());
            if d.is_empty() {
                out.remove("dependencies");
            }
        }
        let mut parts = match out.remove("allOf") {
            Some(Value::Array(a)) => a,
            Some(_) => return Err(invalid(path, "allOf must be an array")),
            None => Vec::new(),
        };
        for (k, s) in found {
            let absent = serde_json::json!({ "properties": { k.clone(): false } });
            let present = serde_json::json!({ "type": "object", "required": [k], "allOf": [s] });
            parts.push(serde_json::json!({ "anyOf": [absent, present] }));
        }
        out.insert("allOf".into(), Value::Array(parts));
        Ok(Some(out))
    }
}
