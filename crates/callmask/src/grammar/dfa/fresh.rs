//! Values of literals, and whether a literal being written can still end as a value not used yet.
//!
//! An object's extra keys must differ from each other, and so must the items of a `uniqueItems`
//! array of strings. Refusing a duplicate only at its closing quote is not enough: where the
//! literal's automaton allows few values (`propertyNames: {"enum": ["a", "b"]}`, a `maxLength`,
//! a `pattern`), a literal may begin that can only end as a value already used, and the model
//! is then stuck. So a byte is allowed only if some completion of the literal decodes to a
//! fresh value ([`can_be_fresh`]).
//!
//! Trade-offs:
//! - Values are compared decoded ([`literal_value`]): `"ñ"`, `"\u00f1"` and `"\u00F1"` are one
//!   value, as JSON says. So the check works on the decoded prefix of the literal's complete
//!   characters ([`decoded_prefix`]).
//! - Usually that prefix is already a prefix of no used value, and the answer is immediate (one
//!   decode and one binary search). Otherwise a search follows the automaton along the used
//!   values that share the prefix. It visits each (state, decoded prefix, undecoded rest) once,
//!   so that the many spellings of one character cost no more than one, and it is bounded by
//!   [`SEARCH_LIMIT`] expansions: past it, the answer is "no" (a byte refused, never a dead end
//!   allowed). The bound is far above what the values of one output make: the states visited
//!   are at most the automaton's states times the prefixes of the used values.

use crate::grammar::dfa::{Dfa, StateId};
use std::collections::HashSet;

/// Most states a [`can_be_fresh`] search expands before it answers "no".
pub(crate) const SEARCH_LIMIT: usize = 1 << 18;

/// What a literal written as `raw` stands for, so that two spellings of one value compare
/// equal: a JSON or Python string literal with its quotes (decoded), a Python keyword followed
/// by `=` or a Gemma key followed by `:` (the name), a string literal inside a JSON string (`\"k\"`: decoded twice), or any
/// other literal (a number, `true`, `None`: itself).
pub(crate) fn literal_value(raw: &[u8]) -> Vec<u8> {
    if raw.starts_with(b"\\") {
        key_value(&key_value(raw))
    } else {
        key_value(raw)
    }
}

/// One level of [`literal_value`]: decodes the escapes the grammar's string automata accept:
/// `\xXX`, `\uXXXX` (surrogate pairs as one character), `\b`, `\f`, `\n`, `\r`, `\t`, and a
/// backslash before any other character (`\"`, `\'`, `\\`, `\/`).
pub(crate) fn key_value(raw: &[u8]) -> Vec<u8> {
    let body = match raw {
        [q @ (b'"' | b'\''), body @ .., last] if last == q => body,
        [body @ .., b'=' | b':'] => body,
        _ => raw,
    };
    decode(body, false, None).0
}

/// The decoded prefix of a literal being written: the value of its complete characters, and
/// what is left undecoded (per level, innermost first), so that two spellings with equal
/// prefixes and rests have the same completions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Prefix {
    /// The decoded characters.
    pub(crate) value: Vec<u8>,
    /// Bytes of an unfinished escape (or character), per level.
    pub(crate) rest: [Vec<u8>; 2],
}

/// [`Prefix`] of the literal whose bytes so far are `raw` (not complete: a closing quote
/// ends the decoding).
pub(crate) fn decoded_prefix(raw: &[u8]) -> Prefix {
    match raw {
        [b'"' | b'\'', body @ ..] => {
            let (value, used) = decode(body, true, Some(raw[0]));
            Prefix {
                value,
                rest: [body[used..].to_vec(), Vec::new()],
            }
        }
        [b'\\', ..] => {
            // Inside a JSON string: the outer escapes, then the inner literal's.
            let (outer, used) = decode(raw, true, None);
            let inner = outer.strip_prefix(b"\"").unwrap_or(&outer);
            let (value, used_inner) = decode(inner, true, Some(b'"'));
            Prefix {
                value,
                rest: [inner[used_inner..].to_vec(), raw[used..].to_vec()],
            }
        }
        // A Python keyword or a Gemma key (`k:`): no escapes.
        _ => Prefix {
            value: raw
                .strip_suffix(b"=")
                .or_else(|| raw.strip_suffix(b":"))
                .unwrap_or(raw)
                .to_vec(),
            rest: [Vec::new(), Vec::new()],
        },
    }
}

/// Decodes `body`; with `partial`, stops before an unfinished escape or at an unescaped
/// `quote`. Returns the decoded bytes and how many bytes of `body` they took.
fn decode(body: &[u8], partial: bool, quote: Option<u8>) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        let b = body[i];
        if partial && Some(b) == quote {
            return (out, i);
        }
        if b != b'\\' || i + 1 == body.len() {
            if b == b'\\' && partial {
                return (out, i);
            }
            out.push(b);
            i += 1;
            continue;
        }
        let e = body[i + 1];
        let hex = match e {
            b'x' => 2,
            b'u' => 4,
            _ => 0,
        };
        let at = i + 2;
        if partial && hex > 0 && body.len() < at + hex {
            return (out, i);
        }
        let unit = |at: usize| {
            body.get(at..at + hex)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u32::from_str_radix(h, 16).ok())
        };
        if hex > 0 {
            let mut code = unit(at).map(|u| (u, hex));
            // A surrogate pair `\uD83D\uDE00` is one character.
            if let Some((hi @ 0xd800..=0xdbff, _)) = code {
                let low = &body[(at + 4).min(body.len())..];
                if partial && low.len() < 6 && b"\\u".starts_with(&low[..low.len().min(2)]) {
                    // The low half may still come.
                    return (out, i);
                }
                if hex == 4 && body.get(at + 4..at + 6) == Some(b"\\u") {
                    if let Some(lo @ 0xdc00..=0xdfff) = unit(at + 6) {
                        code = Some((0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00), 10));
                    }
                }
            }
            if let Some((c, len)) = code.and_then(|(u, len)| char::from_u32(u).map(|c| (c, len))) {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                i = at + len;
                continue;
            }
        }
        out.push(match e {
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            other => other,
        });
        i += 2;
    }
    (out, i)
}

/// True when some value in `used` (sorted) begins with `prefix`.
pub(crate) fn some_begins_with(used: &[Vec<u8>], prefix: &[u8]) -> bool {
    let at = used.partition_point(|u| u.as_slice() < prefix);
    used.get(at).is_some_and(|u| u.starts_with(prefix))
}

/// True when every state of `d` that can take a byte has infinitely many completions: a literal
/// of it can then always end as a value not used yet (each value has finitely many spellings),
/// and no search is needed. Linear in states × byte classes.
pub(crate) fn always_open(d: &Dfa) -> bool {
    let n = d.state_count();
    let reps = d.class_representatives();
    // Successor counts and predecessors, each successor once.
    let mut left = vec![0u32; n];
    let mut preds: Vec<Vec<StateId>> = vec![Vec::new(); n];
    let mut succ = Vec::new();
    for s in 1..n as StateId {
        succ.clear();
        succ.extend(
            reps.iter()
                .map(|&b| d.next(s, b))
                .filter(|&t| t != Dfa::DEAD),
        );
        succ.sort_unstable();
        succ.dedup();
        left[s as usize] = succ.len() as u32;
        for &t in &succ {
            preds[t as usize].push(s);
        }
    }
    // States with finitely many completions: those whose successors all have finitely many.
    let mut finite = vec![false; n];
    let mut todo: Vec<StateId> = (1..n as StateId)
        .filter(|&s| left[s as usize] == 0)
        .collect();
    while let Some(t) = todo.pop() {
        finite[t as usize] = true;
        for &p in &preds[t as usize] {
            left[p as usize] -= 1;
            if left[p as usize] == 0 {
                todo.push(p);
            }
        }
    }
    (1..n as StateId).all(|s| !finite[s as usize] || !d.has_out(s))
}

/// True when the complete characters of the literal whose bytes so far are `raw` make it a
/// prefix of no value in `used` (sorted): whatever it ends as is not in `used`.
pub(crate) fn diverges(raw: &[u8], used: &[Vec<u8>]) -> bool {
    used.is_empty() || !some_begins_with(used, &decoded_prefix(raw).value)
}

/// True when the literal whose bytes so far are `raw`, with automaton `d` in `state` after
/// them, can still end as a value (see [`literal_value`]) not in `used` (sorted). `state` must
/// be live (every state of a trimmed automaton is).
pub(crate) fn can_be_fresh(d: &Dfa, state: StateId, raw: &[u8], used: &[Vec<u8>]) -> bool {
    if diverges(raw, used) || (d.is_accepting(state) && !used.contains(&literal_value(raw))) {
        return true;
    }
    search(d, state, raw, used, None).is_some()
}

/// A value (decoded) of some literal of `d` that is not in `used` (sorted), if any: the same
/// search as [`can_be_fresh`] from the start, then a shortest way to the end.
pub(crate) fn fresh_value(d: &Dfa, used: &[Vec<u8>]) -> Option<Vec<u8>> {
    search(d, d.start(), b"", used, Some(&d.distances_to_accept()))
}

/// The search behind [`can_be_fresh`] and [`fresh_value`]: depth first from `state` (after
/// `raw`) along the used values that share the decoded prefix. With the automaton's distances
/// to acceptance (`dist`), the value found, finished along a shortest way; without, an empty
/// value once one is known to exist.
fn search(
    d: &Dfa,
    state: StateId,
    raw: &[u8],
    used: &[Vec<u8>],
    dist: Option<&[u32]>,
) -> Option<Vec<u8>> {
    let finish = |mut s: StateId, mut raw: Vec<u8>| -> Option<Vec<u8>> {
        let Some(dist) = dist else {
            return Some(Vec::new());
        };
        while dist
            .get(s as usize)
            .is_some_and(|&x| x > 0 && x != u32::MAX)
        {
            let b = (0..=255u8).find(|&b| {
                let n = d.next(s, b);
                n != Dfa::DEAD && dist[n as usize] < dist[s as usize]
            })?;
            raw.push(b);
            s = d.next(s, b);
        }
        (dist.get(s as usize) == Some(&0)).then(|| literal_value(&raw))
    };
    let mut visited: HashSet<(StateId, Prefix)> = HashSet::new();
    let mut todo = vec![(state, raw.to_vec())];
    while let Some((s, raw)) = todo.pop() {
        if d.is_accepting(s) {
            let v = literal_value(&raw);
            if used.binary_search(&v).is_err() {
                return Some(if dist.is_some() { v } else { Vec::new() });
            }
        }
        if !d.has_out(s) {
            continue;
        }
        let prefix = decoded_prefix(&raw);
        if !some_begins_with(used, &prefix.value) {
            // Every completion (there is one: the state is live) begins with a prefix that no
            // used value has.
            return finish(s, raw);
        }
        if visited.len() >= SEARCH_LIMIT || !visited.insert((s, prefix)) {
            continue;
        }
        for b in 0..=255u8 {
            let next = d.next(s, b);
            if next != Dfa::DEAD {
                let mut r = raw.clone();
                r.push(b);
                todo.push((next, r));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_decode_complete_characters_only() {
        let p = |raw: &str| decoded_prefix(raw.as_bytes());
        assert_eq!(p(r#""ab"#).value, b"ab");
        assert_eq!(p(r#""a\"#).value, b"a");
        assert_eq!(p(r#""a\"#).rest[0], b"\\");
        assert_eq!(p(r#""a\u00f"#).value, b"a");
        assert_eq!(p(r#""a\u00f1"#).value, "añ".as_bytes());
        assert_eq!(p(r#""\ud83d"#).value, b"");
        assert_eq!(p(r#""\ud83d\ude0"#).value, b"");
        assert_eq!(p(r#""\ud83d\ude00"#).value, "😀".as_bytes());
        assert_eq!(p(r#""a\n"#).value, b"a\n");
        assert_eq!(p(r#""ab""#).value, b"ab");
        assert_eq!(p("'a\\x4"), p("'a\\x4"));
        assert_eq!(p("'a\\x41").value, b"aA");
        // Inside a JSON string: two levels.
        assert_eq!(p(r#"\"a\\u00f1"#).value, "añ".as_bytes());
        assert_eq!(p(r#"\"a\\u00"#).value, b"a");
        assert_eq!(p(r#"\"a\\"#).value, b"a");
        assert_eq!(p(r#"\"a\"#).value, b"a");
        assert_eq!(p("name").value, b"name");
        assert_eq!(p("name=").value, b"name");
        // Every prefix of a literal decodes to a prefix of its value.
        for lit in [
            r#""x\u00f1\ud83d\ude00\n\"y""#,
            r#"\"a\\u00F1\\\"b\""#,
            "'\\x41\\n'",
        ] {
            let whole = literal_value(lit.as_bytes());
            for i in 1..lit.len() {
                let v = decoded_prefix(&lit.as_bytes()[..i]).value;
                assert!(whole.starts_with(&v), "{lit} at {i}: {v:?} of {whole:?}");
            }
        }
    }

    #[test]
    fn fresh_values_of_small_and_large_languages() {
        let quoted = |re: &str| {
            Dfa::from_regex(re, 10_000)
                .unwrap()
                .json_string(10_000)
                .unwrap()
        };
        let used = |v: &[&str]| {
            let mut u: Vec<Vec<u8>> = v.iter().map(|s| s.as_bytes().to_vec()).collect();
            u.sort();
            u
        };
        let at = |d: &Dfa, raw: &str| raw.bytes().fold(d.start(), |s, b| d.next(s, b));
        let two = quoted("a|ab");
        assert!(can_be_fresh(&two, at(&two, "\"a"), b"\"a", &used(&["a"])));
        assert!(!can_be_fresh(
            &two,
            at(&two, "\"a"),
            b"\"a",
            &used(&["a", "ab"])
        ));
        assert!(!can_be_fresh(
            &two,
            at(&two, "\""),
            b"\"",
            &used(&["a", "ab"])
        ));
        assert!(can_be_fresh(&two, at(&two, "\""), b"\"", &used(&["ab"])));
        // One value, many spellings: each is the used value.
        let n = quoted("ñ");
        for raw in ["\"", "\"\\u00", "\"\\u00F1", "\"ñ"] {
            assert!(
                !can_be_fresh(&n, at(&n, raw), raw.as_bytes(), &used(&["ñ"])),
                "{raw}"
            );
        }
        let n2 = quoted("ñ|ñx");
        assert!(can_be_fresh(
            &n2,
            at(&n2, "\"\\u00f1"),
            b"\"\\u00f1",
            &used(&["ñ"])
        ));
        assert_eq!(fresh_value(&two, &used(&["a"])), Some(b"ab".to_vec()));
        assert_eq!(fresh_value(&two, &used(&["a", "ab"])), None);
        assert_eq!(fresh_value(&n, &used(&["ñ"])), None);
        assert!(!always_open(&two) && !always_open(&n));
        let many = quoted("[a-z]*");
        assert!(always_open(&many));
        assert!(!always_open(&quoted("[a-z]{0,3}")));
        assert!(
            !always_open(&quoted("x|y[a-z]*")),
            "after x, only the quote"
        );
        assert!(always_open(&quoted("x[a-z]*|y[a-z]*")));
        assert!(fresh_value(&many, &used(&["", "a", "b"]))
            .is_some_and(|v| !used(&["", "a", "b"]).contains(&v)));
        assert!(can_be_fresh(
            &many,
            at(&many, "\"a"),
            b"\"a",
            &used(&["a", "ab", "abc"])
        ));
    }
}
