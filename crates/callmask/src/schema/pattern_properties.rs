//! `patternProperties`: a key's value must match the schema of every pattern the key matches
//! (a search, as ECMA-262's `RegExp.test`), beside its `properties` entry; only keys that match
//! neither fall to `additionalProperties`.
//!
//! Listed keys (`properties`, `required`, dependencies) are known: the patterns each matches are
//! decided at compile time and their schemas merged into its value (an `allOf`). Other keys
//! are sorted into *kinds* by the set of patterns they match (each kind an automaton over the
//! decoded name: the patterns it matches, minus the ones it does not, minus the listed keys);
//! the kind matching no pattern takes `additionalProperties`.
//!
//! Trade-offs:
//! - Kinds that want the same value schema are merged into one (the common shapes: one
//!   pattern with `additionalProperties: false`; a pattern that every key matches, such as
//!   `.*`). Otherwise the object keeps one lexeme for all extra keys, and the kind of a key is
//!   found from its decoded name when it is complete (`ObjectNode::extra_kinds`). The token
//!   budget then counts an extra key not yet complete at its costliest kind's value: never
//!   less than it needs, sometimes more (a tight budget may forbid an extra key it had room
//!   for).
//! - The kinds are complements of patterns, so every pattern must translate exactly (no
//!   `\s`, `\p{..}`, ...: see `pattern_negatable`), or it is refused by name.
//! - At most [`MAX_PATTERNS`] patterns per object: the kinds number 2^n.

use super::negate::pattern_negatable;
use super::*;

/// Most patterns in one `patternProperties` (the kinds of keys are the subsets of them).
const MAX_PATTERNS: usize = 4;

/// One pattern of `patternProperties`: the names it matches and its schema.
pub(super) struct PatternProperty {
    names: Dfa,
    schema: Value,
}

/// What `patternProperties` makes of an object's keys.
pub(super) struct PatternKeys {
    pub(super) patterns: Vec<PatternProperty>,
    /// The kinds of extra keys that may appear, disjoint: the names of each (decoded, listed
    /// keys excluded) and the schema parts its value must match (empty: any value). None when
    /// no extra key is allowed; one when every kind wants the same schema.
    pub(super) extra: Vec<(Dfa, Vec<Value>)>,
}

impl PatternKeys {
    /// The schemas of the patterns that `key` matches.
    pub(super) fn schemas_for(&self, key: &str) -> Vec<Value> {
        self.patterns
            .iter()
            .filter(|p| p.names.matches(key.as_bytes()))
            .map(|p| p.schema.clone())
            .collect()
    }
}

impl Compiler<'_> {
    /// `patternProperties` of `obj` for an object whose listed keys are `listed` and whose
    /// extra names are limited to `names` (`propertyNames`), or `None` when `obj` has none (or
    /// lenient mode dropped it).
    pub(super) fn pattern_keys(
        &mut self,
        obj: &Map<String, Value>,
        listed: &[&str],
        names: Option<&Dfa>,
        path: &str,
    ) -> Result<Option<PatternKeys>> {
        let pp = match obj.get("patternProperties") {
            None => return Ok(None),
            Some(Value::Object(m)) if m.is_empty() => return Ok(None),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(invalid(path, "patternProperties must be an object")),
        };
        let refuse = |this: &mut Self, reason: String| -> Result<Option<PatternKeys>> {
            this.b
                .unsupported("patternProperties", path, &reason)
                .map(|()| None)
        };
        if pp.len() > MAX_PATTERNS {
            return refuse(
                self,
                format!(
                    "more than {MAX_PATTERNS} patterns in one object (the kinds of keys double with each)"
                ),
            );
        }
        let mut patterns = Vec::new();
        for (p, schema) in pp {
            if !pattern_negatable(p) {
                return refuse(
                    self,
                    format!("pattern {p:?} does not translate exactly (its class escapes differ between ECMA-262 and the automaton), and the keys it does not match take other schemas"),
                );
            }
            patterns.push(PatternProperty {
                names: self.pattern_dfa(p, &format!("{path}/patternProperties"))?,
                schema: schema.clone(),
            });
        }
        let max = self.opts.max_lexeme_states;
        let op = |this: &Self, a: &Dfa, b: &Dfa, op: Op| {
            a.product(b, op, max)
                .map_err(|e| this.b.dfa_err(e, path, ""))
        };
        let listed_dfa = Dfa::literals(listed.iter().map(|k| k.as_bytes()), max)
            .map_err(|e| self.b.dfa_err(e, path, ""))?;
        let mut base = op(
            self,
            &self.b.regex("(?s:.)*", path)?,
            &listed_dfa,
            Op::AndNot,
        )?;
        if let Some(nd) = names {
            base = op(self, &base, nd, Op::And)?;
        }
        // The kinds of extra keys, by the set of patterns they match.
        let mut kinds: Vec<(Dfa, Vec<Value>)> = Vec::new();
        for set in 0u32..1 << patterns.len() {
            self.b.check_budget()?;
            let mut d = base.clone();
            for (i, p) in patterns.iter().enumerate() {
                let o = if set >> i & 1 == 1 {
                    Op::And
                } else {
                    Op::AndNot
                };
                d = op(self, &d, &p.names, o)?;
            }
            if d.is_empty() {
                continue;
            }
            let mut parts: Vec<Value> = if set == 0 {
                match obj.get("additionalProperties") {
                    None => vec![],
                    Some(s) => vec![s.clone()],
                }
            } else {
                patterns
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| set >> i & 1 == 1)
                    .map(|(_, p)| p.schema.clone())
                    .collect()
            };
            if parts.contains(&Value::Bool(false)) {
                continue;
            }
            parts
                .retain(|s| s != &Value::Bool(true) && s.as_object().is_none_or(|o| !o.is_empty()));
            parts.sort_by_key(|s| s.to_string());
            parts.dedup();
            kinds.push((d, parts));
        }
        // Kinds wanting the same schema are one kind.
        let mut extra: Vec<(Dfa, Vec<Value>)> = Vec::new();
        for (d, parts) in kinds {
            match extra.iter_mut().find(|k| k.1 == parts) {
                Some(k) => k.0 = op(self, &k.0, &d, Op::Or)?,
                None => extra.push((d, parts)),
            }
        }
        Ok(Some(PatternKeys { patterns, extra }))
    }
}
