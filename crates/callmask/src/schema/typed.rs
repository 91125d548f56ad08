//! A schema object read once: the value of each keyword of the table (`keywords.rs`) in its
//! own field, indexed by [`Keyword`], and every other keyword kept as an annotation.
//!
//! The scalar path (`scalars.rs`: `compile_typed`, `scalar_dfa`, `string_dfa`, `number_dfa`)
//! and its cache key ([`crate::Caches`]) work on this value: a scalar keyword is read by its
//! [`Keyword`] (a misspelling does not compile), and the cache key is the canonical form of the
//! fields of the scalar roles ([`Schema::canonical`]), so it cannot miss one.
//!
//! Trade-offs:
//! - The fields hold the keywords' JSON values, borrowed from the document; they are checked
//!   where they are read ([`Schema::count`], [`Schema::strings`], [`Schema::number`]), not when
//!   the schema is read. So a keyword that does not apply to the types being compiled
//!   (`minLength` on an integer) raises no error, as before, and reading costs one pass over
//!   the object's keys and no copy.
//! - Compile, merge and negate still work on the JSON object: they reach this value through
//!   [`Schema::read`] where they build scalar automata.

use super::keywords::Keyword;
use super::{invalid, Result};
use serde_json::{Map, Number, Value};

/// A schema object with its known keywords as typed fields (see the module doc).
pub(crate) struct Schema<'v> {
    /// The value of each keyword of the table, by `Keyword as usize`.
    fields: [Option<&'v Value>; Keyword::ALL.len()],
    /// The keywords not in the table (annotations), in the object's order.
    annotations: Vec<(&'v str, &'v Value)>,
}

impl<'v> Schema<'v> {
    /// Reads `obj` once.
    pub(crate) fn read(obj: &'v Map<String, Value>) -> Schema<'v> {
        let mut s = Schema {
            fields: [None; Keyword::ALL.len()],
            annotations: Vec::new(),
        };
        for (k, v) in obj {
            match Keyword::from_name(k) {
                Some(kw) => s.fields[kw as usize] = Some(v),
                None => s.annotations.push((k.as_str(), v)),
            }
        }
        s
    }

    /// The value of keyword `k`, if present.
    pub(crate) fn get(&self, k: Keyword) -> Option<&'v Value> {
        self.fields[k as usize]
    }

    /// The keywords not in the table (annotations: they never change the language).
    #[cfg(test)]
    pub(crate) fn annotations(&self) -> &[(&'v str, &'v Value)] {
        &self.annotations
    }

    /// A canonical form of the fields of the keywords `keep` selects (in table order): equal
    /// for two schemas exactly when those fields are equal.
    pub(crate) fn canonical(&self, keep: impl Fn(Keyword) -> bool) -> String {
        let mut out = String::new();
        for &k in Keyword::ALL.iter().filter(|&&k| keep(k)) {
            if let Some(v) = self.get(k) {
                out.push_str(k.name());
                // JSON text: quoted strings keep one keyword's value apart from the next name.
                out.push_str(&v.to_string());
            }
        }
        out
    }

    /// A count keyword (`minLength`, ...): a non-negative integer (a number with no
    /// fraction), saturated to `u64`.
    pub(crate) fn count(&self, k: Keyword, path: &str) -> Result<Option<u64>> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(f) if f >= 0.0 && f.fract() == 0.0 => Ok(Some(f.min(u64::MAX as f64) as u64)),
                _ => Err(invalid(
                    path,
                    format!("{} must be a non-negative integer", k.name()),
                )),
            },
        }
    }

    /// The strings of a `pattern` or `format` keyword: one string, or the list that merging
    /// `allOf` parts made of several (all must hold).
    pub(crate) fn strings(&self, k: Keyword, path: &str) -> Result<Vec<&'v str>> {
        let not_string = || invalid(path, format!("{} must be a string", k.name()));
        match self.get(k) {
            None => Ok(Vec::new()),
            Some(Value::String(s)) => Ok(vec![s.as_str()]),
            Some(Value::Array(list)) if !list.is_empty() => list
                .iter()
                .map(|v| v.as_str().ok_or_else(not_string))
                .collect(),
            Some(_) => Err(not_string()),
        }
    }

    /// A bound (`minimum`, ...): a number; a boolean, for the exclusive bounds, is draft 4's
    /// qualifier of `minimum`/`maximum` and no bound of its own.
    /// The number is as written (exact past 2^53, where a double is not).
    pub(crate) fn number(&self, k: Keyword, path: &str) -> Result<Option<&'v Number>> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(Some(n)),
            Some(Value::Bool(_))
                if matches!(k, Keyword::ExclusiveMinimum | Keyword::ExclusiveMaximum) =>
            {
                Ok(None)
            }
            Some(_) => Err(invalid(path, format!("{} must be a number", k.name()))),
        }
    }

    /// The steps of `multipleOf`: one number, or the list that merging `allOf` parts made of
    /// several (every step must hold).
    pub(crate) fn steps(&self, path: &str) -> Result<Vec<&'v Number>> {
        match self.get(Keyword::MultipleOf) {
            None => Ok(Vec::new()),
            Some(Value::Number(n)) => Ok(vec![n]),
            Some(Value::Array(list)) if !list.is_empty() && list.iter().all(Value::is_number) => {
                Ok(list.iter().filter_map(Value::as_number).collect())
            }
            Some(_) => Err(invalid(path, "multipleOf must be a number greater than 0")),
        }
    }

    /// True when boolean keyword `k` is `true`.
    pub(crate) fn is_true(&self, k: Keyword) -> bool {
        self.get(k) == Some(&Value::Bool(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_keywords_are_fields_and_the_rest_annotations() {
        let v = json!({"minLength": 2, "title": "t", "x-vendor": 1, "type": "string"});
        let s = Schema::read(v.as_object().expect("an object"));
        assert_eq!(s.get(Keyword::MinLength), Some(&json!(2)));
        assert_eq!(s.get(Keyword::Type), Some(&json!("string")));
        assert_eq!(s.get(Keyword::Title), Some(&json!("t")));
        assert_eq!(s.annotations(), &[("x-vendor", &json!(1))]);
        assert_eq!(s.count(Keyword::MinLength, "").ok(), Some(Some(2)));
        assert!(s.count(Keyword::Type, "").is_err());
        assert_eq!(
            s.canonical(|k| k.role().is_scalar()),
            "minLength2".to_string()
        );
    }
}
