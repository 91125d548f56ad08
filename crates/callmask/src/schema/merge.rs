//! `allOf`: the parts are merged into one schema where every keyword combines exactly (bounds
//! take the tighter value, enums intersect, patterns and formats are all kept); keywords whose
//! meaning depends on their siblings are merged only when the result stays exact, and refused
//! by name otherwise.

use super::*;

impl Compiler<'_> {
    pub(super) fn merge_all(&self, parts: &[Value], path: &str) -> Result<Value> {
        let mut acc = Value::Object(Map::new());
        for p in parts {
            let p = self.deref_part(p, path, 0)?;
            acc = self.merge_two(&acc, &p, path, 0)?;
        }
        Ok(acc)
    }

    /// The conjunction of two schemas as one schema, where keywords combine exactly (bounded
    /// in steps and size: [`Compiler::merge_step`], [`Compiler::merge_charge`]).
    pub(super) fn merge_two(
        &self,
        a: &Value,
        b: &Value,
        path: &str,
        depth: usize,
    ) -> Result<Value> {
        self.merge_step()?;
        let merged = self.merge_two_unbounded(a, b, path, depth)?;
        self.merge_charge(&merged)?;
        Ok(merged)
    }

    /// [`Compiler::merge_two`] without its bounds, in steps: both parts as objects (`$ref`s
    /// followed), their `unevaluated*` keywords kept apart ([`Compiler::unevaluated_apart`]),
    /// their conditionals rewritten, their sibling-dependent keywords spelled out
    /// ([`Compiler::spell_out_pair`]), their unions distributed ([`Compiler::merge_unions`]),
    /// then keyword by keyword ([`Compiler::merge_values`]).
    fn merge_two_unbounded(&self, a: &Value, b: &Value, path: &str, depth: usize) -> Result<Value> {
        let (a, b) = match (a, b) {
            (Value::Bool(false), _) | (_, Value::Bool(false)) => return Ok(Value::Bool(false)),
            (Value::Bool(true), x) | (x, Value::Bool(true)) => {
                return self.deref_part(x, path, depth)
            }
            (Value::Object(a), Value::Object(b)) => (a, b),
            _ => return Err(invalid(path, "allOf parts must be schemas")),
        };
        let b = match self.deref_part(&Value::Object(b.clone()), path, depth)? {
            Value::Object(b) => b,
            other => return self.merge_two(&Value::Object(a.clone()), &other, path, depth),
        };
        let (mut a, mut b) = (a.clone(), b);
        self.unevaluated_apart(&mut a, &mut b, path)?;
        let a = &a;
        // `if`/`then`/`else` belong to their own part: rewritten before merging.
        if let Some(x) = self.conditional(a, path)? {
            return self.merge_two(&x, &Value::Object(b), path, depth + 1);
        }
        if let Some(y) = self.conditional(&b, path)? {
            return self.merge_two(&Value::Object(a.clone()), &y, path, depth + 1);
        }
        let (a, b) = self.spell_out_pair(a, &b, path)?;
        if let Some(merged) = self.merge_unions(&a, &b, path, depth)? {
            return Ok(merged);
        }
        let mut out = a.clone();
        for (k, bv) in b.iter() {
            let Some(av) = out.get(k).cloned() else {
                out.insert(k.clone(), bv.clone());
                continue;
            };
            if &av == bv {
                continue;
            }
            match self.merge_values(k, av, bv, &a, &b, path)? {
                Merged::Value(v) => {
                    out.insert(k.clone(), v);
                }
                Merged::Enum(values) => {
                    out.remove("const");
                    out.insert("enum".into(), Value::Array(values));
                }
                Merged::Never => return Ok(Value::Bool(false)),
                Merged::Annotation => {}
            }
        }
        Ok(Value::Object(out))
    }

    /// Keeps each part's `unevaluated*` keywords to that part: an `unevaluated*` keyword sees
    /// only its own part's evaluations, and merged with a part that constrains it would see
    /// that part's too (a wider language). Static ones were rewritten before merging
    /// (`unevaluated.rs`); the rest are refused, or dropped in lenient mode (where
    /// `refuse_unsupported` listed them). A part merged with nothing but annotations keeps its
    /// own meaning.
    fn unevaluated_apart(
        &self,
        a: &mut Map<String, Value>,
        b: &mut Map<String, Value>,
        path: &str,
    ) -> Result<()> {
        let bare = |m: &Map<String, Value>| m.keys().all(|k| is_annotation(k));
        for k in unevaluated::UNEVALUATED.map(Keyword::name) {
            if (a.contains_key(k) && !bare(b)) || (b.contains_key(k) && !bare(a)) {
                if !self.opts.lenient {
                    return Err(Error::UnsupportedKeyword {
                        keyword: k.into(),
                        path: ptr(path),
                        reason: "inside an allOf part (or beside a $ref) it sees only its own part's evaluations, which a merge cannot keep apart".into(),
                    });
                }
                a.remove(k);
                b.remove(k);
            }
        }
        Ok(())
    }

    /// Both parts with their sibling-dependent keywords spelled out for the other part's
    /// siblings (see [`spell_out_siblings`]); refused where that cannot be exact
    /// ([`refuse_sibling_conflicts`]).
    fn spell_out_pair(
        &self,
        a: &Map<String, Value>,
        b: &Map<String, Value>,
        path: &str,
    ) -> Result<(Map<String, Value>, Map<String, Value>)> {
        // Keywords that depend on their siblings (additionalProperties on properties, items on
        // prefixItems, additionalItems on array items) see only their own part's siblings: a
        // property (position) the other part names but this one does not is, for this part, one
        // its additionalProperties (items) governs. Spelled out first, the merge is exact.
        let (mut a2, mut b2) = (a.clone(), b.clone());
        let by_a = self.matching_pattern_properties(a, b, path)?;
        let by_b = self.matching_pattern_properties(b, a, path)?;
        spell_out_siblings(&mut a2, b, &by_a);
        spell_out_siblings(&mut b2, a, &by_b);
        refuse_sibling_conflicts(&a2, &b2, path)?;
        Ok((a2, b2))
    }

    /// Two parts that both carry `anyOf` (or `oneOf`): the `anyOf`s become the product of
    /// their alternatives (`oneOf`s are refused), merged with the rest; `None` when at most one
    /// part carries each (the other part is distributed into them when compiled).
    fn merge_unions(
        &self,
        a: &Map<String, Value>,
        b: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<Option<Value>> {
        for kw in ["anyOf", "oneOf"] {
            let (Some(x), Some(y)) = (a.get(kw), b.get(kw)) else {
                continue;
            };
            // allOf of two unions: expand the product for anyOf; refuse for oneOf.
            if kw == "oneOf" {
                return Err(Error::UnsupportedKeyword {
                    keyword: "oneOf".into(),
                    path: ptr(path),
                    reason: "allOf of two oneOf cannot be merged".into(),
                });
            }
            let (xs, ys) = (
                x.as_array().cloned().unwrap_or_default(),
                y.as_array().cloned().unwrap_or_default(),
            );
            let mut prod = Vec::new();
            for x in &xs {
                for y in &ys {
                    prod.push(serde_json::json!({ "allOf": [x, y] }));
                }
            }
            let mut out = a.clone();
            out.remove(kw);
            out.insert(kw.into(), Value::Array(prod));
            let mut b2 = b.clone();
            b2.remove(kw);
            return self
                .merge_two(&Value::Object(out), &Value::Object(b2), path, depth)
                .map(Some);
        }
        Ok(None)
    }

    /// The conjunction of the values `av` and `bv` (not equal) that parts `a` and `b` give
    /// keyword `k`, where it combines exactly; refused by name otherwise.
    fn merge_values(
        &self,
        k: &str,
        av: Value,
        bv: &Value,
        a: &Map<String, Value>,
        b: &Map<String, Value>,
        path: &str,
    ) -> Result<Merged> {
        let merged = match Keyword::from_name(k) {
            Some(Keyword::Type) => {
                let ta = type_set(&av, path)?;
                let tb = type_set(bv, path)?;
                // "number" includes "integer" in these sets, so the intersection is exact.
                let t = ta & tb;
                if t == 0 {
                    // No type left: nothing matches.
                    return Ok(Merged::Never);
                }
                type_value(t)
            }
            Some(Keyword::Required) => {
                let mut r: Vec<Value> = av.as_array().cloned().unwrap_or_default();
                for x in bv.as_array().cloned().unwrap_or_default() {
                    if !r.contains(&x) {
                        r.push(x);
                    }
                }
                Value::Array(r)
            }
            Some(Keyword::Properties) => {
                let (pa, pb) = match (av.as_object(), bv.as_object()) {
                    (Some(x), Some(y)) => (x, y),
                    _ => return Err(invalid(path, "properties must be an object")),
                };
                let mut m = pa.clone();
                for (pk, ps) in pb {
                    match m.get(pk) {
                        Some(x) if ps == &Value::Bool(true) || x == ps => {}
                        Some(x) if x == &Value::Bool(true) => {
                            m.insert(pk.clone(), ps.clone());
                        }
                        Some(x) => {
                            let both = serde_json::json!({ "allOf": [x, ps] });
                            m.insert(pk.clone(), both);
                        }
                        None => {
                            m.insert(pk.clone(), ps.clone());
                        }
                    }
                }
                Value::Object(m)
            }
            Some(Keyword::Items | Keyword::AdditionalProperties)
                if av.is_object() || av.is_boolean() =>
            {
                if k == Keyword::AdditionalProperties.name() {
                    // Exact only when both sides list the same properties.
                    if property_names(a) != property_names(b) {
                        return Err(Error::UnsupportedKeyword {
                            keyword: "additionalProperties".into(),
                            path: ptr(path),
                            reason: "allOf parts with different properties and additionalProperties cannot be merged".into(),
                        });
                    }
                }
                serde_json::json!({ "allOf": [av, bv] })
            }
            // not A ∧ not B = not (A ∨ B)
            Some(Keyword::Not) => serde_json::json!({ "anyOf": [av, bv] }),
            Some(
                Keyword::Minimum
                | Keyword::ExclusiveMinimum
                | Keyword::MinLength
                | Keyword::MinItems,
            ) => num_pick(&av, bv, true, path)?,
            Some(
                Keyword::Maximum
                | Keyword::ExclusiveMaximum
                | Keyword::MaxLength
                | Keyword::MaxItems,
            ) => num_pick(&av, bv, false, path)?,
            Some(Keyword::Enum | Keyword::Const) => {
                // keep both: compile_enum filters values by the rest of the schema
                let va = enum_values(k, &av);
                let vb = enum_values(k, bv);
                let both: Vec<Value> = va
                    .into_iter()
                    .filter(|x| vb.iter().any(|y| json_eq(x, y)))
                    .collect();
                return Ok(Merged::Enum(both));
            }
            Some(Keyword::Pattern | Keyword::Format) => {
                // Two patterns (or formats) that must both hold: the keyword becomes the list
                // of them, which `string_dfa` intersects. The list lives in the keyword's own
                // value, never in a key of ours that a user's schema could also contain.
                let mut all = Vec::new();
                for v in [&av, bv] {
                    match v {
                        Value::String(_) => all.push(v.clone()),
                        Value::Array(list) if list.iter().all(Value::is_string) => {
                            all.extend(list.iter().cloned())
                        }
                        _ => return Err(invalid(path, format!("{k} must be a string"))),
                    }
                }
                Value::Array(all)
            }
            // Both parts' items must be unique when either says so.
            Some(Keyword::UniqueItems) => {
                Value::Bool(av == Value::Bool(true) || bv == &Value::Bool(true))
            }
            Some(Keyword::PatternProperties) => {
                // Every pattern of both parts applies; a pattern in both takes both schemas.
                let (Some(pa), Some(pb)) = (av.as_object(), bv.as_object()) else {
                    return Err(invalid(path, "patternProperties must be an object"));
                };
                let mut m = pa.clone();
                for (p, ps) in pb {
                    let both = match m.get(p) {
                        Some(x) if x == ps => continue,
                        Some(x) => serde_json::json!({ "allOf": [x, ps] }),
                        None => ps.clone(),
                    };
                    m.insert(p.clone(), both);
                }
                Value::Object(m)
            }
            Some(Keyword::DependentRequired) => {
                // Both parts' dependencies hold: per key, the union of the names.
                let (Some(da), Some(db)) = (av.as_object(), bv.as_object()) else {
                    return Err(invalid(path, "dependentRequired must be an object"));
                };
                let mut m = da.clone();
                for (k, names) in db {
                    let mut list = m
                        .get(k)
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    for n in names.as_array().into_iter().flatten() {
                        if !list.contains(n) {
                            list.push(n.clone());
                        }
                    }
                    m.insert(k.clone(), Value::Array(list));
                }
                Value::Object(m)
            }
            Some(Keyword::PrefixItems) => {
                // Position by position; the longer side's tail stays. Exact: a shorter
                // side whose `items` would constrain that tail was refused above.
                let (Some(pa), Some(pb)) = (av.as_array(), bv.as_array()) else {
                    return Err(invalid(path, "prefixItems must be an array"));
                };
                let n = pa.len().max(pb.len());
                let merged = (0..n)
                    .map(|i| match (pa.get(i), pb.get(i)) {
                        (Some(x), Some(y)) if x == y => x.clone(),
                        (Some(x), Some(y)) => serde_json::json!({ "allOf": [x, y] }),
                        (Some(x), None) | (None, Some(x)) => x.clone(),
                        (None, None) => Value::Bool(true),
                    })
                    .collect();
                Value::Array(merged)
            }
            Some(Keyword::MultipleOf) => {
                // Both steps must hold: the keyword becomes the list of them, which
                // `number_dfa` intersects (as with patterns above).
                let mut all = Vec::new();
                for v in [&av, bv] {
                    match v {
                        Value::Number(_) => all.push(v.clone()),
                        Value::Array(list) if list.iter().all(Value::is_number) => {
                            all.extend(list.iter().cloned())
                        }
                        _ => return Err(invalid(path, "multipleOf must be a number")),
                    }
                }
                Value::Array(all)
            }
            _ if is_annotation(k) => return Ok(Merged::Annotation),
            _ => {
                return Err(Error::UnsupportedKeyword {
                    keyword: k.to_string(),
                    path: ptr(path),
                    reason: "allOf parts with different values for this keyword cannot be merged"
                        .into(),
                })
            }
        };
        Ok(Merged::Value(merged))
    }
}

/// What merging one keyword's two values gives.
enum Merged {
    /// The keyword's merged value.
    Value(Value),
    /// `enum`/`const`: the values in both (as `enum`, replacing any `const`).
    Enum(Vec<Value>),
    /// No value satisfies both parts.
    Never,
    /// An annotation: the first part's value stays.
    Annotation,
}

/// Refuses parts whose `additionalProperties`/`items`/`additionalItems` would have to look past
/// the `properties`/`prefixItems`/`items` of the other part (after spelling out).
fn refuse_sibling_conflicts(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    path: &str,
) -> Result<()> {
    for (x, y) in [(a, b), (b, a)] {
        let keys = property_names;
        let len = |o: &Map<String, Value>, k: &str| {
            o.get(k).and_then(Value::as_array).map_or(0, Vec::len)
        };
        let restricts = |v: Option<&Value>| v.is_some_and(|v| v != &Value::Bool(true));
        let new_patterns = |x: &Map<String, Value>, y: &Map<String, Value>| {
            y.get("patternProperties")
                .and_then(Value::as_object)
                .is_some_and(|yp| {
                    let xp = x.get("patternProperties").and_then(Value::as_object);
                    yp.keys().any(|p| xp.is_none_or(|xp| !xp.contains_key(p)))
                })
        };
        let conflict = (restricts(x.get("additionalProperties")) && new_patterns(x, y))
            || (restricts(x.get("additionalProperties"))
                && y.contains_key("properties")
                && keys(x)
                    != keys(y)
                        .into_iter()
                        .chain(keys(x))
                        .collect::<std::collections::BTreeSet<_>>()
                        .into_iter()
                        .collect::<Vec<_>>())
            || (restricts(x.get("items"))
                && x.get("items").is_some_and(|i| !i.is_array())
                && len(y, "prefixItems") > len(x, "prefixItems"))
            || (restricts(x.get("additionalItems")) && len(y, "items") > len(x, "items"))
            || (restricts(x.get("items"))
                && x.get("items").is_some_and(|i| !i.is_array())
                && y.get("items").is_some_and(Value::is_array));
        if conflict {
            return Err(Error::UnsupportedKeyword {
                keyword: "allOf".into(),
                path: ptr(path),
                reason: "parts whose additionalProperties/items would have to look past properties/prefixItems of another part cannot be merged".into(),
            });
        }
    }
    Ok(())
}

impl Compiler<'_> {
    /// The properties `y` names that match a `patternProperties` pattern of `x`.
    fn matching_pattern_properties(
        &self,
        x: &Map<String, Value>,
        y: &Map<String, Value>,
        path: &str,
    ) -> Result<Vec<String>> {
        let (Some(Value::Object(xp)), Some(Value::Object(yp))) =
            (x.get("patternProperties"), y.get("properties"))
        else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for p in xp.keys() {
            let d = self.pattern_dfa(p, path)?;
            for k in yp.keys() {
                if d.matches(k.as_bytes()) && !out.contains(k) {
                    out.push(k.clone());
                }
            }
        }
        Ok(out)
    }
}

/// Gives `x` an explicit entry for each property (prefix position) that `y` names and `x` leaves
/// to its `additionalProperties` (`items`): the entry is that keyword's schema, so `x` accepts
/// exactly what it did, and its siblings now cover `y`'s. A property matching one of `x`'s
/// `patternProperties` (listed in `by_pattern`) is not `x`'s additional one: its entry is
/// `true`, the patterns (kept in the merge) still apply to it.
fn spell_out_siblings(x: &mut Map<String, Value>, y: &Map<String, Value>, by_pattern: &[String]) {
    // minContains/maxContains qualify only their own part's `contains`: without one they are
    // void, and must not attach to the other part's.
    if !x.contains_key("contains") {
        x.remove("minContains");
        x.remove("maxContains");
    }
    if let Some(add) = x.get("additionalProperties").cloned() {
        if let Some(Value::Object(yp)) = y.get("properties") {
            let mut xp = match x.get("properties") {
                Some(Value::Object(p)) => p.clone(),
                _ => Map::new(),
            };
            let mut changed = false;
            for k in yp.keys() {
                if !xp.contains_key(k) {
                    let entry = if by_pattern.contains(k) {
                        Value::Bool(true)
                    } else {
                        add.clone()
                    };
                    xp.insert(k.clone(), entry);
                    changed = true;
                }
            }
            if changed {
                x.insert("properties".into(), Value::Object(xp));
            }
        }
    }
    // 2020-12 `items` after `prefixItems`.
    if let Some(items) = x.get("items").filter(|i| !i.is_array()).cloned() {
        let ylen = y
            .get("prefixItems")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let mut xp = x
            .get("prefixItems")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if ylen > xp.len() {
            xp.resize(ylen, items);
            x.insert("prefixItems".into(), Value::Array(xp));
        }
    }
    // Draft 7's `additionalItems` after array-form `items`.
    if let (Some(add), Some(Value::Array(xi))) = (x.get("additionalItems").cloned(), x.get("items"))
    {
        let ylen = y.get("items").and_then(Value::as_array).map_or(0, Vec::len);
        if ylen > xi.len() {
            let mut xi = xi.clone();
            xi.resize(ylen, add);
            x.insert("items".into(), Value::Array(xi));
        }
    }
}
