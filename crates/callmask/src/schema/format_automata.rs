//! The built-in formats' automata, read from a table instead of determinized per request.
//!
//! A format's regex is fixed (`format_regex`), so its automaton is the same in every process;
//! determinizing it was most of a cold request with formats (the `email` regex alone about 10M
//! instructions, `uri-reference` 7 ms). `format_automata.bin` holds, per distinct format
//! regex, its text, the least `max_lexeme_states` under which [`Dfa::from_regex`] builds it,
//! and that automaton ([`Dfa::to_table`]). A lookup matches the regex's *text*, so a regex
//! edited without regenerating the table is simply built as before (and the test below fails
//! until the table is regenerated); under a lower state limit the regex is built as before too,
//! so the limits and errors are unchanged. The trade-off: 52 KB of table in the library.
//!
//! Regenerate after changing a format regex or the automaton construction:
//! `CALLMASK_BLESS=1 cargo test --release -p callmask --lib format_automata`.

use crate::grammar::dfa::table::find_keyed;
use crate::grammar::dfa::Dfa;

/// Per distinct format regex: its length (u16 LE) and text, the least state limit (u32 LE),
/// then its automaton's table.
const TABLE: &[u8] = include_bytes!("format_automata.bin");

/// The automaton `Dfa::from_regex(re, max_states)` builds, read from the table; `None` when the
/// table holds no automaton for `re` or `max_states` is below the least limit it builds under
/// (the caller builds it then).
pub(super) fn prebuilt(re: &str, max_states: usize) -> Option<Dfa> {
    let (least, dfa) = find_keyed(TABLE, re.as_bytes())?;
    (max_states >= least as usize).then_some(dfa)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::dfa::table::{check_generated, push_keyed};
    use crate::schema::strings::{format_regex, FORMAT_NAMES};

    /// The distinct format regexes, in [`FORMAT_NAMES`] order.
    fn distinct_regexes() -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for re in FORMAT_NAMES.iter().filter_map(|f| format_regex(f)) {
            if !out.contains(&re) {
                out.push(re);
            }
        }
        out
    }

    /// The least state limit under which `Dfa::from_regex` builds `re` (the limits only refuse
    /// more states as they shrink, so a binary search finds it).
    fn least_limit(re: &str) -> usize {
        let (mut lo, mut hi) = (1usize, 1 << 20);
        assert!(Dfa::from_regex(re, hi).is_ok(), "{re} does not build");
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if Dfa::from_regex(re, mid).is_ok() {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }

    /// The table as [`TABLE`] should hold it.
    fn build_table() -> Vec<u8> {
        let mut out = Vec::new();
        for re in distinct_regexes() {
            let dfa = Dfa::from_regex(&re, 1 << 20).expect("a format regex builds");
            let least = u32::try_from(least_limit(&re)).expect("small limit");
            assert!(
                push_keyed(&mut out, re.as_bytes(), least, &dfa),
                "{re}: no table"
            );
        }
        out
    }

    #[test]
    fn the_table_is_built_from_the_format_regexes() {
        check_generated(
            TABLE,
            &build_table(),
            "schema/format_automata.bin",
            "format_automata",
        );
    }

    #[test]
    fn lookups_give_what_the_regex_builds_under_every_limit() {
        for re in distinct_regexes() {
            let least = least_limit(&re);
            for limit in [least - 1, least, least + 1, 50_000] {
                assert_eq!(
                    prebuilt(&re, limit),
                    Dfa::from_regex(&re, limit).ok(),
                    "{re} under {limit}"
                );
            }
        }
        assert_eq!(prebuilt("[a-z]+", 50_000), None, "not a format");
    }
}
