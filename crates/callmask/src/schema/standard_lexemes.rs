//! The lexemes of the common schemas, read from a table instead of built per process.
//!
//! A plain `{"type": "string"}`, an `integer`, a `number`, a `boolean`, `{}` (any value), the
//! keys of a free object, a string of a built-in `format` (its automaton quoted, which cost
//! a cold request with an `email` about 80 µs) and one character's spelling inside a literal
//! (which strings of a length copy) compile to lexeme automata that depend on nothing but the options
//! in their cache key (encoding, state limit, number spelling), so they are the same in every
//! process; building them was most of a cold request of a small schema (`{}` about 2.6M
//! instructions, a plain string about 1.5M). `standard_lexemes.bin` holds, per cache key the
//! standard schemas below build under the default options, the automaton (a keyed table,
//! [`find_keyed`]). The key holds the state limit, so another limit builds as before; a
//! lexeme whose construction changes without the table being regenerated is caught by the test
//! that rebuilds the table (the compiles that write it do not read it). The trade-off: the
//! table's bytes in the library, for automata of up to [`MAX_ENTRY_BYTES`] each.
//!
//! Regenerate after changing how these lexemes are built:
//! `CALLMASK_BLESS=1 cargo test --release -p callmask --lib standard_lexemes`.

use crate::grammar::dfa::table::find_keyed;
use crate::grammar::dfa::Dfa;

/// Per lexeme cache key: the key, 0, and the automaton (see [`find_keyed`]).
const TABLE: &[u8] = include_bytes!("standard_lexemes.bin");

/// Largest automaton table an entry may hold.
#[cfg(test)]
const MAX_ENTRY_BYTES: usize = 64 << 10;

/// The automaton the lexeme of cache key `key` builds, where the table has it.
pub(super) fn prebuilt(key: &str) -> Option<Dfa> {
    find_keyed(TABLE, key.as_bytes()).map(|(_, dfa)| dfa)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::dfa::table::{check_generated, push_keyed};
    use crate::grammar::CompileOptions;
    use crate::schema::strings::FORMAT_NAMES;
    use crate::schema::{Compiler, Encoding};
    use serde_json::{json, Value};
    use std::sync::Arc;

    /// The schemas whose lexemes the table holds (each in JSON and in Python): the plain
    /// types, and a string of each built-in format.
    fn standard_schemas() -> Vec<Value> {
        let formats = FORMAT_NAMES
            .iter()
            .map(|f| json!({"type": "string", "format": f}));
        let plain = [
            json!({"type": "string"}),
            json!({"type": "integer"}),
            json!({"type": "number"}),
            json!({"type": "boolean"}),
            json!({"type": "null"}),
            json!({}),
            json!({"type": "object"}),
            json!({"type": ["string", "null"]}),
            json!({"type": ["integer", "null"]}),
            json!({"type": ["number", "null"]}),
            json!({"type": ["boolean", "null"]}),
            json!({"type": ["string", "integer"]}),
            json!({"type": ["string", "number"]}),
            // (For the spellings of one character that strings of a length copy.)
            json!({"type": "string", "maxLength": 1}),
        ];
        plain.into_iter().chain(formats).collect()
    }

    /// Every lexeme the standard schemas build under the default options, by cache key, with
    /// the table out of use.
    fn built_lexemes() -> Vec<(String, Arc<Dfa>)> {
        let opts = CompileOptions::default();
        let mut out: Vec<(String, Arc<Dfa>)> = Vec::new();
        for schema in standard_schemas() {
            // (Python values with JSON's literals too, LFM2's, are left to be built.)
            for (enc, json_literals) in [(Encoding::Json, false), (Encoding::Python, false)] {
                let mut c = Compiler::new(&schema, &opts);
                c.prebuilt_lexemes = false;
                c.set_document(&schema, enc);
                c.set_json_literals(json_literals);
                c.compile(&schema, "").expect("a standard schema compiles");
                for (k, d) in std::mem::take(&mut c.built) {
                    if !out.iter().any(|e| e.0 == k) {
                        out.push((k, d));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The table as [`TABLE`] should hold it.
    fn build_table() -> Vec<u8> {
        let mut out = Vec::new();
        for (key, dfa) in built_lexemes() {
            if dfa.to_table().is_some_and(|t| t.len() <= MAX_ENTRY_BYTES) {
                assert!(push_keyed(&mut out, key.as_bytes(), 0, &dfa), "{key}");
            }
        }
        out
    }

    #[test]
    fn the_table_is_built_from_the_standard_schemas() {
        check_generated(
            TABLE,
            &build_table(),
            "schema/standard_lexemes.bin",
            "standard_lexemes",
        );
    }

    #[test]
    fn lookups_give_what_the_compile_builds() {
        let lexemes = built_lexemes();
        let found = lexemes
            .iter()
            .filter(|(key, dfa)| match prebuilt(key) {
                Some(d) => {
                    assert_eq!(&d, dfa.as_ref(), "{key}");
                    true
                }
                None => false,
            })
            .count();
        assert!(found * 2 > lexemes.len(), "{found} of {}", lexemes.len());
        assert_eq!(prebuilt("no such key"), None);
    }
}
