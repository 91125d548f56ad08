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
use rustc_hash::FxHashMap as HashMap;
use std::hash::Hash;

pub(crate) mod fresh;
mod string_literal;
pub(crate) use string_literal::{CharSpelling, WordQuotes};
pub(crate) mod table;

/// Most state pairs [`Dfa::product`] numbers through a dense table (4 bytes each); larger
/// products use a hash map.
const DENSE_PRODUCT_PAIRS: usize = 1 << 22;

/// A state of a [`Dfa`]; [`Dfa::DEAD`] rejects everything.
pub(crate) type StateId = u32;

/// A trimmed dense byte DFA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dfa {
    /// Byte → equivalence class (bytes of one class behave alike in every state).
    classes: [u8; 256],
    /// Number of classes: the width of a row of `trans`.
    stride: usize,
    /// `trans[s * stride + classes[b]]`: the next state.
    trans: Vec<StateId>,
    accept: Vec<bool>,
    /// True when the state has at least one live transition.
    has_out: Vec<bool>,
    start: StateId,
    /// Set by [`Dfa::text_without`] alone (every other construction leaves it `None`): the
    /// automaton is exactly "valid UTF-8 holding none of these markers, of at most this many
    /// characters", which lets token walks use a per-vocabulary index instead of walking the
    /// whole vocabulary.
    text: Option<std::sync::Arc<TextSpec>>,
    /// Set by [`Dfa::with_text_states`] alone: pure text's automaton (valid UTF-8, no markers,
    /// no bound; [`Dfa::text_without`]) and, per state of this one, the state of it with the
    /// same future ([`Dfa::DEAD`] for none).
    text_states: Option<std::sync::Arc<(Dfa, Vec<StateId>)>>,
}

/// What an automaton built by [`Dfa::text_without`] accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TextSpec {
    /// The markers the text never holds (none empty).
    pub(crate) markers: Vec<Vec<u8>>,
    /// The most characters, if bounded.
    pub(crate) max_chars: Option<u64>,
    /// Bounded: per state, the characters left where the state is between characters with no
    /// marker begun (its future is the start's with that bound), `u16::MAX` elsewhere; empty
    /// when unbounded.
    pub(crate) chars_left: Vec<u16>,
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

/// The token trie's walks run lexeme automata through this trait, so the trie knows no grammar.
impl crate::vocab::trie::ByteRecognizer for Dfa {
    #[inline]
    fn step(&self, state: u32, byte: u8) -> u32 {
        self.next(state, byte)
    }

    #[inline]
    fn is_accepting(&self, state: u32) -> bool {
        Dfa::is_accepting(self, state)
    }
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
        self.trans[state as usize * self.stride + self.classes[byte as usize] as usize]
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

    /// The lowest byte of each byte class (bytes of one class lead to the same states).
    pub(crate) fn class_representatives(&self) -> Vec<u8> {
        let mut seen = vec![false; self.stride];
        let mut reps = Vec::new();
        for b in 0..=255u8 {
            let c = self.classes[b as usize] as usize;
            if !seen[c] {
                seen[c] = true;
                reps.push(b);
            }
        }
        reps
    }

    /// Per state, the fewest bytes that lead to an accepting state (`u32::MAX`: none do).
    pub(crate) fn distances_to_accept(&self) -> Vec<u32> {
        self.distances_over(&[true; 256])
    }

    /// The lowest byte of each byte class among the bytes `usable` allows (classes without
    /// one are left out).
    pub(crate) fn usable_representatives(&self, usable: &[bool; 256]) -> Vec<u8> {
        let mut seen = vec![false; self.stride];
        let mut reps = Vec::new();
        for b in 0..=255u8 {
            let c = self.classes[b as usize] as usize;
            if usable[b as usize] && !seen[c] {
                seen[c] = true;
                reps.push(b);
            }
        }
        reps
    }

    /// [`Dfa::distances_to_accept`] over the bytes `usable` allows only (`u32::MAX` for a state
    /// from which every way to an accepting state needs another byte).
    pub(crate) fn distances_over(&self, usable: &[bool; 256]) -> Vec<u32> {
        let n = self.state_count();
        let mut class_ok = vec![false; self.stride];
        for b in 0..256 {
            if usable[b] {
                class_ok[self.classes[b] as usize] = true;
            }
        }
        let mut reverse: Vec<Vec<StateId>> = vec![Vec::new(); n];
        for s in 1..n {
            for c in (0..self.stride).filter(|&c| class_ok[c]) {
                let t = self.trans[s * self.stride + c];
                if t != Self::DEAD {
                    reverse[t as usize].push(s as StateId);
                }
            }
        }
        let mut dist = vec![u32::MAX; n];
        let mut queue = std::collections::VecDeque::new();
        for (s, d) in dist.iter_mut().enumerate().skip(1) {
            if self.accept[s] {
                *d = 0;
                queue.push_back(s);
            }
        }
        while let Some(t) = queue.pop_front() {
            let d = dist[t] + 1;
            for &s in &reverse[t] {
                if dist[s as usize] == u32::MAX {
                    dist[s as usize] = d;
                    queue.push_back(s as usize);
                }
            }
        }
        dist
    }

    /// Every live state reachable from the start after at least one byte, ascending.
    pub(crate) fn states_after_a_byte(&self) -> Vec<StateId> {
        let n = self.state_count();
        let mut seen = vec![false; n];
        let mut stack: Vec<StateId> = Vec::new();
        let push = |s: StateId, seen: &mut Vec<bool>, stack: &mut Vec<StateId>| {
            for c in 0..self.stride {
                let t = self.trans[s as usize * self.stride + c];
                if t != Self::DEAD && !seen[t as usize] {
                    seen[t as usize] = true;
                    stack.push(t);
                }
            }
        };
        if self.start != Self::DEAD {
            push(self.start, &mut seen, &mut stack);
        }
        while let Some(s) = stack.pop() {
            push(s, &mut seen, &mut stack);
        }
        (0..n as StateId).filter(|&s| seen[s as usize]).collect()
    }

    /// Number of states, the dead one included.
    pub(crate) fn state_count(&self) -> usize {
        self.accept.len()
    }

    /// Heap bytes used.
    pub(crate) fn memory(&self) -> usize {
        self.trans.len() * 4 + self.accept.len() * 2 + 256
    }

    /// Whether `bytes` is accepted as a whole.
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
                // The size-limit errors are wrapped ("error building NFA"): read the chain.
                let mut msg = e.to_string();
                let mut src = std::error::Error::source(&e);
                while let Some(s) = src {
                    msg = format!("{msg}: {s}");
                    src = s.source();
                }
                if msg.contains("exceeded") || msg.contains("limit") {
                    DfaError::TooLarge
                } else {
                    DfaError::Regex(msg)
                }
            })?;
        let start = ra
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| DfaError::Regex(e.to_string()))?;
        let bc = ra.byte_classes();
        let mut classes = [0u8; 256];
        for b in 0..=255u8 {
            classes[b as usize] = bc.get(b);
        }
        Self::build(
            start,
            max_states,
            &classes,
            |&s, b| {
                let n = ra.next_state(s, b);
                (!ra.is_dead_state(n) && !ra.is_quit_state(n)).then_some(n)
            },
            |&s| ra.is_match_state(ra.next_eoi_state(s)),
        )
    }

    /// Valid UTF-8 strings of `min..=max` characters (`max = None`: no upper bound), built
    /// directly: eight states per count (one between characters, seven inside a multi-byte one).
    pub(crate) fn char_count(
        min: u64,
        max: Option<u64>,
        max_states: usize,
    ) -> Result<Dfa, DfaError> {
        let cap = max.unwrap_or(min);
        let counts = cap as usize + 1;
        if counts.saturating_mul(8).saturating_add(1) > max_states {
            return Err(DfaError::TooLarge);
        }
        // Classes: 0 ASCII, 1 80-8F, 2 90-9F, 3 A0-BF, 4 invalid, 5 C2-DF, 6 E0, 7 E1-EC|EE-EF,
        // 8 ED, 9 F0, 10 F1-F3, 11 F4.
        let classes: [u8; 256] = std::array::from_fn(|b| match b as u8 {
            0x00..=0x7f => 0,
            0x80..=0x8f => 1,
            0x90..=0x9f => 2,
            0xa0..=0xbf => 3,
            0xc2..=0xdf => 5,
            0xe0 => 6,
            0xe1..=0xec | 0xee..=0xef => 7,
            0xed => 8,
            0xf0 => 9,
            0xf1..=0xf3 => 10,
            0xf4 => 11,
            _ => 4,
        });
        const STRIDE: usize = 12;
        // State of count c: S = 1 + 8c; pending kinds 1..=7: one more, two more, E0, ED,
        // three more, F0, F4 continuation bytes.
        let st = |c: usize, k: usize| (1 + 8 * c + k) as StateId;
        let n = 1 + 8 * counts;
        let mut trans = vec![0 as StateId; n * STRIDE];
        let mut accept = vec![false; n];
        for c in 0..counts {
            let unbounded_top = max.is_none() && c == cap as usize;
            let next = if unbounded_top { c } else { c + 1 };
            accept[st(c, 0) as usize] = c as u64 >= min;
            if next >= counts {
                continue; // at the maximum: no more characters
            }
            let row = |s: StateId| s as usize * STRIDE;
            let s0 = row(st(c, 0));
            trans[s0] = st(next, 0);
            trans[s0 + 5] = st(c, 1);
            trans[s0 + 6] = st(c, 3);
            trans[s0 + 7] = st(c, 2);
            trans[s0 + 8] = st(c, 4);
            trans[s0 + 9] = st(c, 6);
            trans[s0 + 10] = st(c, 5);
            trans[s0 + 11] = st(c, 7);
            for cont in 1..=3 {
                trans[row(st(c, 1)) + cont] = st(next, 0); // last continuation byte
                trans[row(st(c, 2)) + cont] = st(c, 1);
                trans[row(st(c, 5)) + cont] = st(c, 2);
            }
            trans[row(st(c, 3)) + 3] = st(c, 1); // E0: A0-BF
            trans[row(st(c, 4)) + 1] = st(c, 1); // ED: 80-9F
            trans[row(st(c, 4)) + 2] = st(c, 1);
            trans[row(st(c, 6)) + 2] = st(c, 2); // F0: 90-BF
            trans[row(st(c, 6)) + 3] = st(c, 2);
            trans[row(st(c, 7)) + 1] = st(c, 2); // F4: 80-8F
        }
        Ok(Dfa::trimmed(classes, STRIDE, trans, accept, 1))
    }

    /// Free text: valid UTF-8 holding none of `markers` (as bytes; a marker is itself UTF-8, so
    /// it can only occur at a character boundary), of at most `max` characters. Built directly,
    /// as a product of [`Dfa::char_count`] and a marker-avoiding automaton (the longest suffix
    /// that begins a marker is the state, as in Aho-Corasick), not by determinizing a regex.
    /// The result is marked as text ([`Dfa::text_spec`]).
    pub(crate) fn text_without(
        markers: &[&str],
        max: Option<u64>,
        max_states: usize,
    ) -> Result<Dfa, DfaError> {
        let any = Dfa::char_count(0, max, max_states)?;
        let words: Vec<&[u8]> = markers.iter().map(|m| m.as_bytes()).collect();
        if words.iter().any(|w| w.is_empty()) {
            // Every text, the empty one included, holds the empty marker.
            return Dfa::literals(std::iter::empty(), max_states);
        }
        let mut d = if words.is_empty() {
            any
        } else {
            let mut classes = [0u8; 256];
            let mut next = 1u8;
            for w in &words {
                for &b in *w {
                    if classes[b as usize] == 0 {
                        classes[b as usize] = next;
                        next = next.saturating_add(1);
                    }
                }
            }
            if next == u8::MAX {
                classes = std::array::from_fn(|i| i as u8);
            }
            // State: the longest suffix of what was read that is a proper prefix of a marker.
            let avoid = Self::build(
                Vec::<u8>::new(),
                max_states,
                &classes,
                |s: &Vec<u8>, b| {
                    let mut t = s.clone();
                    t.push(b);
                    if words.iter().any(|w| t.ends_with(w)) {
                        return None;
                    }
                    let keep = (0..=t.len())
                        .find(|&k| words.iter().any(|w| w.starts_with(&t[k..])))
                        .unwrap_or(t.len());
                    Some(t[keep..].to_vec())
                },
                |_| true,
            )?;
            any.product(&avoid, Op::And, max_states)?
        };
        if !d.is_empty() {
            let chars_left = match max {
                Some(m) if m < u64::from(u16::MAX) => d.fresh_text_states(&words, m as u16),
                _ => Vec::new(),
            };
            d.text = Some(std::sync::Arc::new(TextSpec {
                markers: words.iter().map(|w| w.to_vec()).collect(),
                max_chars: max,
                chars_left,
            }));
        }
        Ok(d)
    }

    /// [`TextSpec::chars_left`] of a text automaton of at most `max` characters avoiding
    /// `markers`: the states after `k` characters that begin no marker are those its start
    /// reaches by `k` copies of one such ASCII character (empty when every letter and digit is
    /// in a marker).
    fn fresh_text_states(&self, markers: &[&[u8]], max: u16) -> Vec<u16> {
        let Some(plain) = (b'a'..=b'z')
            .chain(b'0'..=b'9')
            .find(|b| markers.iter().all(|w| !w.contains(b)))
        else {
            return Vec::new();
        };
        let mut left = vec![u16::MAX; self.accept.len()];
        let mut s = self.start;
        for k in 0..=max {
            if s == Self::DEAD {
                break;
            }
            left[s as usize] = max - k;
            s = self.next(s, plain);
        }
        left
    }

    /// Where `state` of a text automaton ([`Dfa::text_without`], bounded) is between
    /// characters with no marker begun: the characters left (its future is the start's with
    /// that bound).
    pub(crate) fn text_chars_left(&self, state: StateId) -> Option<u64> {
        let left = *self.text.as_ref()?.chars_left.get(state as usize)?;
        (left != u16::MAX).then_some(u64::from(left))
    }

    /// Marks, in a small automaton (at most 64 states), the states whose future is that of
    /// pure text (any valid UTF-8) from one of its states, found by partition refinement of
    /// both automata together (Moore): e.g. every state of `(?:[^{\s](?s:.)*)?` after its
    /// first character. Token walks from such a state take the text index
    /// ([`Dfa::text_view`]). A no-op for other automata.
    pub(crate) fn with_text_states(mut self) -> Dfa {
        if self.text.is_some() || self.accept.len() > 64 || self.is_empty() {
            return self;
        }
        let Ok(u) = Dfa::text_without(&[], None, 64) else {
            return self;
        };
        let (_, reps) = dense_classes(&refine(&self.classes, &u.classes));
        let n = self.accept.len();
        let total = n + u.accept.len();
        // Nodes 0..n are this automaton's states, n.. pure text's (n is its dead state).
        let next = |x: usize, b: u8| -> usize {
            if x < n {
                self.next(x as StateId, b) as usize
            } else {
                n + u.next((x - n) as StateId, b) as usize
            }
        };
        let accepting = |x: usize| {
            if x < n {
                self.is_accepting(x as StateId)
            } else {
                u.is_accepting((x - n) as StateId)
            }
        };
        let mut block: Vec<u32> = (0..total)
            .map(|x| match x {
                _ if x == 0 || x == n => 0,
                _ if accepting(x) => 1,
                _ => 2,
            })
            .collect();
        let mut blocks = 3;
        loop {
            let mut ids: HashMap<(u32, Vec<u32>), u32> = HashMap::default();
            let refined: Vec<u32> = (0..total)
                .map(|x| {
                    let sig = (block[x], reps.iter().map(|&b| block[next(x, b)]).collect());
                    let fresh = ids.len() as u32;
                    *ids.entry(sig).or_insert(fresh)
                })
                .collect();
            let count = ids.len();
            block = refined;
            if count == blocks {
                break;
            }
            blocks = count;
        }
        let dead = block[0];
        let equiv: Vec<StateId> = (0..n)
            .map(|q| {
                (1..u.accept.len())
                    .find(|&v| block[q] != dead && block[n + v] == block[q])
                    .map_or(Self::DEAD, |v| v as StateId)
            })
            .collect();
        if equiv.iter().any(|&e| e != Self::DEAD) {
            self.text_states = Some(std::sync::Arc::new((u, equiv)));
        }
        self
    }

    /// The free-text automaton and its state that `state` of this one behaves as: this
    /// automaton itself where [`Dfa::text_without`] built it, else the pure-text state marked by
    /// [`Dfa::with_text_states`]; `None` where neither applies.
    pub(crate) fn text_view(&self, state: StateId) -> Option<(&Dfa, StateId)> {
        if self.text.is_some() {
            return Some((self, state));
        }
        let (u, equiv) = self.text_states.as_deref()?;
        match equiv.get(state as usize) {
            Some(&s) if s != Self::DEAD => Some((u, s)),
            _ => None,
        }
    }

    /// What an automaton built as free text by [`Dfa::text_without`] accepts; `None` for every
    /// other automaton.
    pub(crate) fn text_spec(&self) -> Option<&TextSpec> {
        self.text.as_deref()
    }

    /// The automaton matching exactly the given byte strings.
    pub(crate) fn literals<'a>(
        words: impl IntoIterator<Item = &'a [u8]>,
        max_states: usize,
    ) -> Result<Dfa, DfaError> {
        let mut words: Vec<&[u8]> = words.into_iter().collect();
        words.sort_unstable();
        words.dedup();
        let classes = word_classes(&words);
        match words[..] {
            [word] => Self::word_chain(word, &classes, max_states),
            _ => Self::literals_built(&words, &classes, max_states),
        }
    }

    /// [`Dfa::literals`] of sorted, distinct `words` by breadth-first exploration.
    fn literals_built(
        words: &[&[u8]],
        classes: &[u8; 256],
        max_states: usize,
    ) -> Result<Dfa, DfaError> {
        // Key: (lo, hi, depth) = the range of words sharing the first `depth` bytes.
        Self::build(
            (0usize, words.len(), 0usize),
            max_states,
            classes,
            |&(lo, hi, d), b| {
                let s = &words[lo..hi];
                let a = lo + s.partition_point(|w| w.len() <= d || w[d] < b);
                let z = lo + s.partition_point(|w| w.len() <= d || w[d] <= b);
                (a < z).then_some((a, z, d + 1))
            },
            |&(lo, hi, d)| lo < hi && words[lo].len() == d,
        )
    }

    /// [`Dfa::literals`] of one word, built directly (the same automaton, state for state):
    /// a chain of states, one per prefix. A tool set's function names are each one.
    fn word_chain(word: &[u8], classes: &[u8; 256], max_states: usize) -> Result<Dfa, DfaError> {
        let n = word.len();
        if n >= 1 && n + 1 >= max_states {
            return Err(DfaError::TooLarge);
        }
        let (cls, reps) = dense_classes(classes);
        let stride = reps.len();
        // State 0 dead, state k + 1 after the word's first k bytes.
        let mut trans = vec![0 as StateId; (n + 2) * stride];
        for (k, &b) in word.iter().enumerate() {
            trans[(k + 1) * stride + cls[b as usize] as usize] = k as StateId + 2;
        }
        let mut accept = vec![false; n + 2];
        accept[n + 1] = true;
        let has_out = (0..n + 2).map(|s| (1..=n).contains(&s)).collect();
        Ok(Dfa::from_rows(cls, stride, trans, accept, has_out, 1))
    }

    /// Builds, by breadth-first exploration, the DFA of an implicit automaton, then trims it.
    pub(crate) fn build<K: Clone + Eq + Hash>(
        start: K,
        max_states: usize,
        classes: &[u8; 256],
        step: impl Fn(&K, u8) -> Option<K>,
        accept: impl Fn(&K) -> bool,
    ) -> Result<Dfa, DfaError> {
        let (cls, reps) = dense_classes(classes);
        let stride = reps.len();
        let mut ids: HashMap<K, StateId> = HashMap::default();
        let mut keys: Vec<K> = vec![start.clone()];
        ids.insert(start, 1);
        // state 0 dead, state 1 start
        let mut trans: Vec<StateId> = vec![0; 2 * stride];
        let mut acc = vec![false];
        let mut i = 0;
        while i < keys.len() {
            let k = keys[i].clone();
            acc.push(accept(&k));
            let sid = i + 1;
            for (c, &b) in reps.iter().enumerate() {
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
                            trans.extend(std::iter::repeat_n(0, stride));
                            id
                        }
                    };
                    trans[sid * stride + c] = id;
                }
            }
            i += 1;
        }
        Ok(Dfa::trimmed(cls, stride, trans, acc, 1))
    }

    /// Drops states that cannot reach acceptance and renumbers in breadth-first order.
    fn trimmed(
        classes: [u8; 256],
        stride: usize,
        trans: Vec<StateId>,
        accept: Vec<bool>,
        start: StateId,
    ) -> Dfa {
        let n = accept.len();
        // Predecessors in one flat array (counted, then placed): `preds[at[t]..at[t + 1]]`.
        let mut at = vec![0u32; n + 1];
        for s in 1..n {
            for &t in &trans[s * stride..(s + 1) * stride] {
                if t != 0 {
                    at[t as usize + 1] += 1;
                }
            }
        }
        for t in 0..n {
            at[t + 1] += at[t];
        }
        let mut fill = at.clone();
        let mut preds = vec![0 as StateId; at[n] as usize];
        for s in 1..n {
            for &t in &trans[s * stride..(s + 1) * stride] {
                if t != 0 {
                    preds[fill[t as usize] as usize] = s as StateId;
                    fill[t as usize] += 1;
                }
            }
        }
        let mut live = accept.clone();
        live[0] = false;
        let mut work: Vec<usize> = (1..n).filter(|&s| live[s]).collect();
        while let Some(s) = work.pop() {
            for &p in &preds[at[s] as usize..at[s + 1] as usize] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    work.push(p as usize);
                }
            }
        }
        if !live[start as usize] {
            return Dfa::from_rows([0; 256], 1, vec![0], vec![false], vec![false], 0);
        }
        let mut map = vec![0 as StateId; n];
        let mut order = vec![start as usize];
        map[start as usize] = 1;
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            for b in 0..stride {
                let t = trans[s * stride + b] as usize;
                if t != 0 && live[t] && map[t] == 0 {
                    map[t] = order.len() as StateId + 1;
                    order.push(t);
                }
            }
            i += 1;
        }
        let m = order.len() + 1;
        let mut nt = vec![0 as StateId; m * stride];
        let mut na = vec![false; m];
        let mut no = vec![false; m];
        for (i, &s) in order.iter().enumerate() {
            let ns = i + 1;
            na[ns] = accept[s];
            for b in 0..stride {
                let t = trans[s * stride + b] as usize;
                if t != 0 && live[t] {
                    nt[ns * stride + b] = map[t];
                    no[ns] = true;
                }
            }
        }
        Dfa::from_rows(classes, stride, nt, na, no, 1)
    }

    /// The automaton of these rows (`trans`: `stride` targets per state, by byte class;
    /// `has_out`: per state, whether its row has a target), with no text view.
    fn from_rows(
        classes: [u8; 256],
        stride: usize,
        trans: Vec<StateId>,
        accept: Vec<bool>,
        has_out: Vec<bool>,
        start: StateId,
    ) -> Dfa {
        Dfa {
            classes,
            stride,
            trans,
            accept,
            has_out,
            start,
            text: None,
            text_states: None,
        }
    }

    /// This automaton's language with `byte` after each of its strings. `byte` must not occur
    /// in the strings themselves (the caller intersects them with a set of strings without it;
    /// an inner transition on `byte` is not followed).
    pub(crate) fn then_byte(&self, byte: u8, max_states: usize) -> Result<Dfa, DfaError> {
        // `byte` gets a class of its own; the others keep this automaton's classes.
        let classes: [u8; 256] = if self.stride < 256 {
            std::array::from_fn(|b| {
                if b as u8 == byte {
                    0
                } else {
                    self.classes[b] + 1
                }
            })
        } else {
            std::array::from_fn(|b| b as u8)
        };
        // `Some(state)`: inside a string; `None`: after `byte`.
        let step = |k: &Option<StateId>, b: u8| match *k {
            Some(s) if b == byte => self.is_accepting(s).then_some(None),
            Some(s) => match self.next(s, b) {
                Self::DEAD => None,
                t => Some(Some(t)),
            },
            None => None,
        };
        if self.is_empty() {
            return Ok(self.clone());
        }
        Dfa::build(
            Some(self.start),
            max_states,
            &classes,
            step,
            Option::is_none,
        )
    }

    /// Combines two automata over the same bytes.
    pub(crate) fn product(&self, other: &Dfa, op: Op, max_states: usize) -> Result<Dfa, DfaError> {
        let classes = refine(&self.classes, &other.classes);
        let (na, nb) = (self.accept.len(), other.accept.len());
        if na.saturating_mul(nb) <= DENSE_PRODUCT_PAIRS {
            return self.dense_product(other, op, max_states, &classes);
        }
        Self::build(
            (self.start, other.start),
            max_states,
            &classes,
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

    /// [`Dfa::product`] with the pairs numbered through a dense table instead of a hash map
    /// (the same exploration order, so the same automaton).
    fn dense_product(
        &self,
        other: &Dfa,
        op: Op,
        max_states: usize,
        classes: &[u8; 256],
    ) -> Result<Dfa, DfaError> {
        let (cls, reps) = dense_classes(classes);
        let stride = reps.len();
        let nb = other.accept.len();
        let pair = |a: StateId, b: StateId| a as usize * nb + b as usize;
        let mut ids = vec![0 as StateId; self.accept.len() * nb];
        let mut keys: Vec<(StateId, StateId)> = vec![(self.start, other.start)];
        ids[pair(self.start, other.start)] = 1;
        let mut trans: Vec<StateId> = vec![0; 2 * stride];
        let mut acc = vec![false];
        let mut i = 0;
        while i < keys.len() {
            let (a, b) = keys[i];
            let (x, y) = (self.is_accepting(a), other.is_accepting(b));
            acc.push(match op {
                Op::And => x && y,
                Op::Or => x || y,
                Op::AndNot => x && !y,
            });
            let sid = i + 1;
            for (c, &byte) in reps.iter().enumerate() {
                let (na, nb) = (self.next(a, byte), other.next(b, byte));
                let keep = match op {
                    Op::And => na != 0 && nb != 0,
                    Op::Or => na != 0 || nb != 0,
                    Op::AndNot => na != 0,
                };
                if !keep {
                    continue;
                }
                let slot = pair(na, nb);
                let id = if ids[slot] != 0 {
                    ids[slot]
                } else {
                    if keys.len() + 1 >= max_states {
                        return Err(DfaError::TooLarge);
                    }
                    let id = keys.len() as StateId + 1;
                    ids[slot] = id;
                    keys.push((na, nb));
                    trans.extend(std::iter::repeat_n(0, stride));
                    id
                };
                trans[sid * stride + c] = id;
            }
            i += 1;
        }
        Ok(Dfa::trimmed(cls, stride, trans, acc, 1))
    }
}

/// Classes renumbered densely from 0, and one representative byte per class.
/// Byte classes for literal words: each byte that occurs in a word its own class, the others
/// one class (one class per byte where more than 255 bytes occur).
fn word_classes(words: &[&[u8]]) -> [u8; 256] {
    let mut used = [false; 256];
    words
        .iter()
        .flat_map(|w| w.iter())
        .for_each(|&b| used[b as usize] = true);
    let mut classes = [0u8; 256];
    let mut next_class = 1u8;
    for b in 0..256 {
        if used[b] {
            classes[b] = next_class;
            next_class = next_class.wrapping_add(1);
            if next_class == 0 {
                return std::array::from_fn(|i| i as u8);
            }
        }
    }
    classes
}

fn dense_classes(classes: &[u8; 256]) -> ([u8; 256], Vec<u8>) {
    let mut dense = [u8::MAX; 256];
    let mut reps: Vec<u8> = Vec::new();
    let mut cls = [0u8; 256];
    for b in 0..256 {
        let c = classes[b] as usize;
        if dense[c] == u8::MAX {
            dense[c] = reps.len() as u8;
            reps.push(b as u8);
        }
        cls[b] = dense[c];
    }
    (cls, reps)
}

/// The byte classes of `trans` (rows of `stride` targets, by class) with the classes whose
/// columns are equal in every row merged: the same automaton over fewer classes, as
/// `(classes, stride, trans)`; `None` when no two columns are equal. Constructions that give
/// bytes classes of their own while they build (a string literal's hex digits and escape
/// letters) end with many classes that behave alike everywhere; fewer classes make every later
/// pass over the rows (trimming, products, copies per count) that much shorter.
fn merged_classes(
    classes: &[u8; 256],
    stride: usize,
    trans: &[StateId],
) -> Option<([u8; 256], usize, Vec<StateId>)> {
    // A fingerprint per column, then equal fingerprints compared column against column.
    let mut prints = vec![0u64; stride];
    for row in trans.chunks_exact(stride) {
        for (p, &t) in prints.iter_mut().zip(row) {
            *p = (*p ^ u64::from(t)).wrapping_mul(0x100_0000_01b3);
        }
    }
    let equal = |a: usize, b: usize| trans.chunks_exact(stride).all(|row| row[a] == row[b]);
    let mut kept: Vec<usize> = Vec::new(); // per new class, the old class it keeps
    let mut merged = vec![0u8; stride]; // per old class, its new class
    for c in 0..stride {
        match kept
            .iter()
            .position(|&k| prints[k] == prints[c] && equal(k, c))
        {
            Some(i) => merged[c] = i as u8,
            None => {
                merged[c] = kept.len() as u8;
                kept.push(c);
            }
        }
    }
    if kept.len() == stride {
        return None;
    }
    let new_classes = classes.map(|c| merged[c as usize]);
    let new_trans = trans
        .chunks_exact(stride)
        .flat_map(|row| kept.iter().map(move |&k| row[k]))
        .collect();
    Some((new_classes, kept.len(), new_trans))
}

/// The coarsest partition of bytes finer than both `a` and `b`.
fn refine(a: &[u8; 256], b: &[u8; 256]) -> [u8; 256] {
    let mut ids: HashMap<(u8, u8), u8> = HashMap::default();
    let mut out = [0u8; 256];
    for i in 0..256 {
        let n = ids.len() as u8;
        out[i] = *ids.entry((a[i], b[i])).or_insert(n);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merging classes keeps every transition and leaves no two equal columns; a string
    /// literal's automaton (built with a class per hex digit) comes out merged.
    #[test]
    fn merged_classes_keep_every_transition() {
        // Five classes over bytes 0..5 (the rest in class 4): columns 0 and 2 equal, 3 and 4.
        let mut classes = [4u8; 256];
        for (b, class) in classes.iter_mut().enumerate().take(5) {
            *class = b as u8;
        }
        let trans: Vec<StateId> = vec![
            0, 0, 0, 0, 0, // dead
            2, 1, 2, 0, 0, //
            0, 2, 0, 1, 1, //
        ];
        let (merged, stride, rows) = merged_classes(&classes, 5, &trans).expect("two merges");
        assert_eq!(stride, 3);
        for s in 0..3 {
            for b in 0..256 {
                assert_eq!(
                    rows[s * stride + merged[b] as usize],
                    trans[s * 5 + classes[b] as usize],
                    "state {s}, byte {b}"
                );
            }
        }
        assert_eq!(merged_classes(&merged, stride, &rows), None);
        let email = Dfa::from_regex("[a-z0-9._%+-]{1,8}@[a-z]{1,8}\\.[a-z]{2,4}", 10_000)
            .unwrap()
            .json_string(10_000)
            .unwrap();
        assert_eq!(
            merged_classes(&email.classes, email.stride, &email.trans),
            None
        );
    }

    /// One word's chain is the automaton the breadth-first build gives, state for state, and
    /// is refused under the same state limits.
    #[test]
    fn word_chains_equal_built_literals() {
        let all: Vec<u8> = (0..=255).collect();
        let words: [&[u8]; 6] = [
            b"",
            b"a",
            b"\"get_weather\"",
            b"aaaa",
            "né".as_bytes(),
            &all,
        ];
        for w in words {
            let classes = word_classes(&[w]);
            for max in [1, 2, 3, w.len(), w.len() + 1, w.len() + 2, 100_000] {
                let chain = Dfa::word_chain(w, &classes, max);
                let built = Dfa::literals_built(&[w], &classes, max);
                match (chain, built) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b, "{w:?} under {max} states"),
                    (Err(DfaError::TooLarge), Err(DfaError::TooLarge)) => {}
                    (a, b) => panic!("{w:?} under {max} states: {a:?} vs {b:?}"),
                }
            }
        }
    }

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
        assert!(s.matches(br#""a\"b\\c\n\t\/\u001f\u000A""#));
        assert!(!s.matches(br#""\u0041""#));
        assert!(s.matches("\"é\"".as_bytes()));
        assert!(!s.matches(b"\"a\nb\""));
        assert!(!s.matches(br#""\x""#));
        assert!(!s.matches(br#""a""b""#));
        let lit = Dfa::literals([&b"a\"b"[..]], 100)
            .unwrap()
            .json_string(100)
            .unwrap();
        assert!(lit.matches(br#""a\"b""#) && !lit.matches(br#""a"b""#));
    }

    /// The direct free-text automaton has the language (and live prefixes) of the regex one it
    /// replaced, on every string of up to 6 bytes over an alphabet that makes markers, UTF-8
    /// characters of 2 and 3 bytes, and broken UTF-8.
    #[test]
    fn text_without_equals_the_regex_construction() {
        let alphabet: &[u8] = &[b'a', b'<', b't', b'>', 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xff];
        let sets: &[&[&str]] = &[
            &[],
            &["<t>"],
            &["<", "<<"],
            &["at", "ta", "<t>"],
            &["é", "€a"],
            &["t<t", "<t<"],
        ];
        for markers in sets {
            let fast = Dfa::text_without(markers, None, 10_000).unwrap();
            let any = Dfa::from_regex("(?s:.)*", 10_000).unwrap();
            let slow = if markers.is_empty() {
                any
            } else {
                let alts: Vec<String> = markers.iter().map(|m| regex_syntax::escape(m)).collect();
                let bad = Dfa::from_regex(&format!("(?s:.)*(?:{})(?s:.)*", alts.join("|")), 10_000)
                    .unwrap();
                any.product(&bad, Op::AndNot, 10_000).unwrap()
            };
            assert!(fast.text_spec().is_some());
            let mut words: Vec<Vec<u8>> = vec![vec![]];
            let mut checked = 0;
            while let Some(w) = words.pop() {
                let run = |d: &Dfa| w.iter().fold(d.start(), |s, &b| d.next(s, b));
                let (f, s) = (run(&fast), run(&slow));
                assert_eq!(f == Dfa::DEAD, s == Dfa::DEAD, "{markers:?} {w:?}");
                assert_eq!(
                    fast.is_accepting(f),
                    slow.is_accepting(s),
                    "{markers:?} {w:?}"
                );
                checked += 1;
                if w.len() < 6 && f != Dfa::DEAD {
                    for &b in alphabet {
                        let mut n = w.clone();
                        n.push(b);
                        words.push(n);
                    }
                }
            }
            assert!(checked > 1000, "{markers:?}: {checked}");
        }
        let none = Dfa::text_without(&[""], None, 100).unwrap();
        assert!(none.is_empty() && none.text_spec().is_none());
        let capped = Dfa::text_without(&["<t>"], Some(2), 100).unwrap();
        assert!(capped.matches("é<".as_bytes()) && !capped.matches(b"a<t"));
        assert_eq!(capped.text_spec().unwrap().max_chars, Some(2));
    }

    /// The dense-table product is the hash-map one, state for state.
    #[test]
    fn dense_products_equal_hashed_products() {
        let a = Dfa::from_regex("[a-c]{0,6}x?", 1000).unwrap();
        let b = Dfa::text_without(&["ab", "ca"], Some(5), 1000).unwrap();
        for op in [Op::And, Op::Or, Op::AndNot] {
            let classes = refine(&a.classes, &b.classes);
            let dense = a.dense_product(&b, op, 10_000, &classes).unwrap();
            let hashed = Dfa::build(
                (a.start, b.start),
                10_000,
                &classes,
                |&(x, y), byte| {
                    let (nx, ny) = (a.next(x, byte), b.next(y, byte));
                    let keep = match op {
                        Op::And => nx != 0 && ny != 0,
                        Op::Or => nx != 0 || ny != 0,
                        Op::AndNot => nx != 0,
                    };
                    keep.then_some((nx, ny))
                },
                |&(x, y)| {
                    let (p, q) = (a.is_accepting(x), b.is_accepting(y));
                    match op {
                        Op::And => p && q,
                        Op::Or => p || q,
                        Op::AndNot => p && !q,
                    }
                },
            )
            .unwrap();
            assert_eq!(dense, hashed, "{op:?}");
            assert!(dense.state_count() > 5, "{op:?}");
            assert!(matches!(
                a.dense_product(&b, op, 3, &classes),
                Err(DfaError::TooLarge)
            ));
        }
    }

    /// States of a text-like regex after its first character behave as pure text; the others
    /// (and automata that are not text) are not marked.
    #[test]
    fn text_states_of_a_text_like_regex() {
        let d = Dfa::from_regex("(?:[^{\\s](?s:.)*)?", 1000)
            .unwrap()
            .with_text_states();
        assert!(
            d.text_view(d.start()).is_none(),
            "the first character is restricted"
        );
        let (u, s) = d
            .text_view(d.next(d.start(), b'a'))
            .expect("text after 'a'");
        assert_eq!(s, u.next(u.start(), b'a'));
        let (u, s) = d
            .text_view(d.next(d.start(), 0xc3))
            .expect("inside a character");
        assert_eq!(s, u.next(u.start(), 0xc3));
        let lit = Dfa::from_regex("abc", 100).unwrap().with_text_states();
        assert!((0..lit.state_count() as StateId + 1).all(|q| lit.text_view(q).is_none()));
        let any = Dfa::from_regex("(?s:.)*", 100).unwrap().with_text_states();
        assert!(any.text_view(any.start()).is_some());
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

    #[test]
    fn char_counts() {
        let d = Dfa::char_count(2, Some(3), 1000).unwrap();
        assert!(
            !d.matches(b"a")
                && d.matches(b"ab")
                && d.matches("aé€".as_bytes())
                && !d.matches(b"abcd")
        );
        assert!(d.matches("𝄞x".as_bytes()) && !d.matches(b"a\xff") && !d.matches(b"\xed\xa0\x80a"));
        let u = Dfa::char_count(1, None, 1000).unwrap();
        assert!(!u.matches(b"") && u.matches(b"abcdefgh") && u.matches("日本語".as_bytes()));
        let re = Dfa::from_regex("(?s:.){0,5}", 1000).unwrap();
        let me = Dfa::char_count(0, Some(5), 1000).unwrap();
        for w in [
            "",
            "abc",
            "ééééé",
            "éééééé",
            "\u{10ffff}",
            "ab\u{7ff}\u{800}",
        ] {
            assert_eq!(re.matches(w.as_bytes()), me.matches(w.as_bytes()), "{w:?}");
        }
    }
}
