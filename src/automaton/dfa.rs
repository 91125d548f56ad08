//! Byte-level deterministic automata for lexemes (strings, numbers, literals, object keys).
//!
//! Regular expressions are compiled with regex-automata and copied into a small dense table that
//! is trimmed: every state can still reach an accepting state, so a lexeme that is live can always
//! be completed (no dead ends for the token mask). Products (intersection, union, difference)
//! combine constraints such as `pattern` with `maxLength`, and [`Dfa::json_string`] turns an
//! automaton over a string's *decoded* content into one over its JSON encoding.

use regex_automata::dfa::{dense, Automaton};
use regex_automata::nfa::thompson;
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};
use std::collections::HashMap;
use std::hash::Hash;

/// A state of a [`Dfa`]; [`Dfa::DEAD`] rejects everything.
pub(crate) type StateId = u32;

/// A trimmed dense byte DFA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dfa {
    /// `trans[s * 256 + b]`: the next state.
    trans: Vec<StateId>,
    accept: Vec<bool>,
    /// True when the state has at least one live transition.
    has_out: Vec<bool>,
    start: StateId,
}

/// How [`Dfa::product`] combines acceptance.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    /// Both accept.
    And,
    /// Either accepts.
    Or,
    /// The first accepts and the second does not.
    AndNot,
}

/// Why a DFA could not be built.
#[derive(Debug)]
pub(crate) enum DfaError {
    /// The regex does not parse or compile; the message says why.
    Regex(String),
    /// More states than allowed.
    TooLarge,
}

impl Dfa {
    /// The dead state.
    pub(crate) const DEAD: StateId = 0;

    /// The start state (DEAD for the empty language).
    #[inline]
    pub(crate) fn start(&self) -> StateId {
        self.start
    }

    /// The state after `byte`.
    #[inline]
    pub(crate) fn next(&self, state: StateId, byte: u8) -> StateId {
        self.trans[(state as usize) << 8 | byte as usize]
    }

    /// True when the input read so far is a complete lexeme.
    #[inline]
    pub(crate) fn is_accepting(&self, state: StateId) -> bool {
        self.accept[state as usize]
    }

    /// True when some byte continues from `state`.
    #[inline]
    pub(crate) fn has_out(&self, state: StateId) -> bool {
        self.has_out[state as usize]
    }

    /// True when no input is accepted.
    pub(crate) fn is_empty(&self) -> bool {
        self.start == Self::DEAD
    }

    /// Number of states, the dead one included.
    pub(crate) fn state_count(&self) -> usize {
        self.accept.len()
    }

    /// Heap bytes used.
    pub(crate) fn memory(&self) -> usize {
        self.trans.len() * 4 + self.accept.len() * 2
    }

    /// Whether `bytes` is accepted as a whole.
    #[cfg(test)]
    pub(crate) fn matches(&self, bytes: &[u8]) -> bool {
        let mut s = self.start;
        for &b in bytes {
            s = self.next(s, b);
            if s == Self::DEAD {
                return false;
            }
        }
        self.is_accepting(s)
    }

    /// Compiles a regex that must match the whole input (UTF-8, Unicode classes).
    pub(crate) fn from_regex(pattern: &str, max_states: usize) -> Result<Dfa, DfaError> {
        let limit = Some(max_states.saturating_mul(1024).max(1 << 16));
        let ra = dense::Builder::new()
            .syntax(syntax::Config::new().unicode(true).utf8(true))
            .thompson(thompson::Config::new().utf8(true).nfa_size_limit(limit))
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(regex_automata::dfa::StartKind::Anchored)
                    .dfa_size_limit(limit)
                    .determinize_size_limit(limit),
            )
            .build(pattern)
            .map_err(|e| {
                let msg = e.to_string();
                if msg.contains("exceeded") || msg.contains("limit") {
                    DfaError::TooLarge
                } else {
                    DfaError::Regex(msg)
                }
            })?;
        let start = ra
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| DfaError::Regex(e.to_string()))?;
        Self::build(
            start,
            max_states,
            |&s, b| {
                let n = ra.next_state(s, b);
                (!ra.is_dead_state(n) && !ra.is_quit_state(n)).then_some(n)
            },
            |&s| ra.is_match_state(ra.next_eoi_state(s)),
        )
    }

    /// The automaton matching exactly the given byte strings.
    pub(crate) fn literals<'a>(
        words: impl IntoIterator<Item = &'a [u8]>,
        max_states: usize,
    ) -> Result<Dfa, DfaError> {
        let mut words: Vec<&[u8]> = words.into_iter().collect();
        words.sort_unstable();
        words.dedup();
        // Key: (lo, hi, depth) = the range of words sharing the first `depth` bytes.
        Self::build(
            (0usize, words.len(), 0usize),
            max_states,
            |&(lo, hi, d), b| {
                let s = &words[lo..hi];
                let a = lo + s.partition_point(|w| w.len() <= d || w[d] < b);
                let z = lo + s.partition_point(|w| w.len() <= d || w[d] <= b);
                (a < z).then_some((a, z, d + 1))
            },
            |&(lo, hi, d)| lo < hi && words[lo].len() == d,
        )
    }

    /// Builds, by breadth-first exploration, the DFA of an implicit automaton, then trims it.
    pub(crate) fn build<K: Clone + Eq + Hash>(
        start: K,
        max_states: usize,
        step: impl Fn(&K, u8) -> Option<K>,
        accept: impl Fn(&K) -> bool,
    ) -> Result<Dfa, DfaError> {
        let mut ids: HashMap<K, StateId> = HashMap::new();
        let mut keys: Vec<K> = vec![start.clone()];
        ids.insert(start, 1);
        // state 0 dead, state 1 start
        let mut trans: Vec<StateId> = vec![0; 512];
        let mut acc = vec![false];
        let mut i = 0;
        while i < keys.len() {
            let k = keys[i].clone();
            acc.push(accept(&k));
            let sid = i + 1;
            for b in 0..=255u8 {
                if let Some(n) = step(&k, b) {
                    let id = match ids.get(&n) {
                        Some(&id) => id,
                        None => {
                            if keys.len() + 1 >= max_states {
                                return Err(DfaError::TooLarge);
                            }
                            let id = keys.len() as StateId + 1;
                            ids.insert(n.clone(), id);
                            keys.push(n);
                            trans.extend(std::iter::repeat_n(0, 256));
                            id
                        }
                    };
                    trans[sid << 8 | b as usize] = id;
                }
            }
            i += 1;
        }
        Ok(Dfa::trimmed(trans, acc, 1))
    }

    /// Drops states that cannot reach acceptance and renumbers in breadth-first order.
    fn trimmed(trans: Vec<StateId>, accept: Vec<bool>, start: StateId) -> Dfa {
        let n = accept.len();
        let mut rev: Vec<Vec<StateId>> = vec![Vec::new(); n];
        for s in 1..n {
            for b in 0..256 {
                let t = trans[s << 8 | b] as usize;
                if t != 0 {
                    rev[t].push(s as StateId);
                }
            }
        }
        let mut live = accept.clone();
        live[0] = false;
        let mut work: Vec<usize> = (1..n).filter(|&s| live[s]).collect();
        while let Some(s) = work.pop() {
            for &p in &rev[s] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    work.push(p as usize);
                }
            }
        }
        if !live[start as usize] {
            return Dfa {
                trans: vec![0; 256],
                accept: vec![false],
                has_out: vec![false],
                start: 0,
            };
        }
        let mut map = vec![0 as StateId; n];
        let mut order = vec![start as usize];
        map[start as usize] = 1;
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            for b in 0..256 {
                let t = trans[s << 8 | b] as usize;
                if t != 0 && live[t] && map[t] == 0 {
                    map[t] = order.len() as StateId + 1;
                    order.push(t);
                }
            }
            i += 1;
        }
        let m = order.len() + 1;
        let mut nt = vec![0 as StateId; m * 256];
        let mut na = vec![false; m];
        let mut no = vec![false; m];
        for (i, &s) in order.iter().enumerate() {
            let ns = i + 1;
            na[ns] = accept[s];
            for b in 0..256 {
                let t = trans[s << 8 | b] as usize;
                if t != 0 && live[t] {
                    nt[ns << 8 | b] = map[t];
                    no[ns] = true;
                }
            }
        }
        Dfa {
            trans: nt,
            accept: na,
            has_out: no,
            start: 1,
        }
    }

    /// Combines two automata over the same bytes.
    pub(crate) fn product(&self, other: &Dfa, op: Op, max_states: usize) -> Result<Dfa, DfaError> {
        Self::build(
            (self.start, other.start),
            max_states,
            |&(a, b), byte| {
                let (na, nb) = (self.next(a, byte), other.next(b, byte));
                let keep = match op {
                    Op::And => na != 0 && nb != 0,
                    Op::Or => na != 0 || nb != 0,
                    Op::AndNot => na != 0,
                };
                keep.then_some((na, nb))
            },
            |&(a, b)| {
                let (x, y) = (self.is_accepting(a), other.is_accepting(b));
                match op {
                    Op::And => x && y,
                    Op::Or => x || y,
                    Op::AndNot => x && !y,
                }
            },
        )
    }

    /// The JSON string literal (quotes included) whose decoded content this DFA accepts.
    ///
    /// Escaping policy: `"` and `\` must be escaped (`\"`, `\\`), control characters must be
    /// escaped (`\n`, `\t`, `\r`, `\b`, `\f` or `\u00XX`), `/` may be written `\/`; every other
    /// character is written as itself (UTF-8), so `\uXXXX` for non-control characters is not
    /// produced or accepted.
    pub(crate) fn json_string(&self, max_states: usize) -> Result<Dfa, DfaError> {
        #[derive(Clone, PartialEq, Eq, Hash)]
        enum K {
            Open,
            In(StateId),
            Esc(StateId),
            /// After `\u`, `\u0`, `\u00`, `\u00X` (with X the high nibble).
            U(StateId, u8, u8),
            Closed,
        }
        let content = self;
        Self::build(
            K::Open,
            max_states,
            |k, b| match *k {
                K::Open => (b == b'"' && content.start != 0).then_some(K::In(content.start)),
                K::In(q) => match b {
                    b'"' => content.is_accepting(q).then_some(K::Closed),
                    b'\\' => Some(K::Esc(q)),
                    0..=0x1f => None,
                    _ => {
                        let n = content.next(q, b);
                        (n != 0).then_some(K::In(n))
                    }
                },
                K::Esc(q) => {
                    let decoded = match b {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => return Some(K::U(q, 0, 0)),
                        _ => return None,
                    };
                    let n = content.next(q, decoded);
                    (n != 0).then_some(K::In(n))
                }
                K::U(q, pos, hi) => match (pos, b) {
                    (0, b'0') | (1, b'0') => Some(K::U(q, pos + 1, 0)),
                    (2, b'0') => Some(K::U(q, 3, 0)),
                    (2, b'1') => Some(K::U(q, 3, 1)),
                    (3, _) => {
                        let lo = (b as char).to_digit(16)? as u8;
                        let n = content.next(q, hi << 4 | lo);
                        (n != 0).then_some(K::In(n))
                    }
                    _ => None,
                },
                K::Closed => None,
            },
            |k| matches!(k, K::Closed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_full_match_and_trim() {
        let d = Dfa::from_regex("ab|abc", 1000).unwrap();
        assert!(d.matches(b"ab") && d.matches(b"abc"));
        assert!(!d.matches(b"a") && !d.matches(b"abcd"));
        let s = d.next(d.start(), b'x');
        assert_eq!(s, Dfa::DEAD);
    }

    #[test]
    fn json_string_escapes() {
        let any = Dfa::from_regex("(?s:.)*", 1000).unwrap();
        let s = any.json_string(1000).unwrap();
        assert!(s.matches(br#""a\"b\\c\n\u001f\/""#));
        assert!(s.matches("\"é\"".as_bytes()));
        assert!(!s.matches(b"\"a\nb\""));
        assert!(!s.matches(br#""\x""#));
        assert!(!s.matches(br#""a""b""#));
        let lit = Dfa::literals([&b"a\"b"[..]], 100).unwrap().json_string(100).unwrap();
        assert!(lit.matches(br#""a\"b""#) && !lit.matches(br#""a"b""#));
    }

    #[test]
    fn products() {
        let a = Dfa::from_regex("[a-z]*", 100).unwrap();
        let b = Dfa::literals([&b"ab"[..], b"cd"], 100).unwrap();
        let diff = a.product(&b, Op::AndNot, 100).unwrap();
        assert!(diff.matches(b"abc") && diff.matches(b"a") && !diff.matches(b"ab"));
        let and = a.product(&b, Op::And, 100).unwrap();
        assert!(and.matches(b"cd") && !and.matches(b"c"));
        // trimmed: "c" is a live prefix of "cd"
        assert_ne!(and.next(and.start(), b'c'), Dfa::DEAD);
        assert_eq!(and.next(and.start(), b'x'), Dfa::DEAD);
    }
}
