//! String literals over a content automaton: [`Dfa::json_string`], [`Dfa::python_string`] and
//! [`Dfa::json_escaped`] turn an automaton over a string's *decoded* content (UTF-8) into one
//! over the way it is spelled, quotes and escapes included.
//!
//! Every escape decodes through the content automaton's own transitions, so a `maxLength`, a
//! `pattern`, an `enum` or a `format` sees `\u00f1` exactly as it sees `ñ`, and a surrogate
//! pair `\ud83d\ude00` as one character.
//!
//! Trade-offs:
//! - `\uXXXX` is built as a hex trie per content state whose leaves are the states after the
//!   decoded character (for a surrogate pair, the trie of the low unit). Trie states are
//!   interned by the code points they decode and where each leads, so a string whose
//!   characters all lead to one state costs about a dozen extra states, not 65,536 paths.
//! - The escape policy is bounded on purpose: printable ASCII (U+0020 to U+007E) is written as
//!   itself (or with its one-letter escape: `\"`, `\\`, `\/`); every other character may be
//!   written as itself or as `\uXXXX` (hex digits of either case), as `json.dumps` does with
//!   `ensure_ascii`. A `\u0041` for `A` is refused: no serializer writes it, and allowing it
//!   would give every ASCII key and name a second spelling to track.
//! - Python literals keep `\xXX` for control characters only.

use super::{dense_classes, merged_classes, refine, Dfa, DfaError, Op, StateId};
use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

/// A run of code points (or code units) `lo..=hi` and what each leads to.
type Run<T> = (u32, u32, T);

/// How a string literal spells its content.
struct StringSpec {
    /// The quote byte (a raw one always ends the literal or is refused).
    quote: u8,
    /// False for content written inside another string (no quotes of its own).
    quoted: bool,
    /// Escape letters after a backslash and the byte each stands for.
    escapes: &'static [(u8, u8)],
    /// The hex escape.
    hex: HexEscape,
}

/// The hex escape of a literal.
#[derive(Clone, Copy, PartialEq, Eq)]
enum HexEscape {
    /// JSON's `\uXXXX` (UTF-16 code units, a surrogate pair past U+FFFF) for every character
    /// outside printable ASCII.
    Utf16,
    /// Python's `\xXX`, for control characters.
    ControlByte,
}

impl HexEscape {
    fn letter(self) -> u8 {
        match self {
            HexEscape::Utf16 => b'u',
            HexEscape::ControlByte => b'x',
        }
    }

    fn digits(self) -> u32 {
        match self {
            HexEscape::Utf16 => 4,
            HexEscape::ControlByte => 2,
        }
    }
}

const JSON_ESCAPES: &[(u8, u8)] = &[
    (b'"', b'"'),
    (b'\\', b'\\'),
    (b'/', b'/'),
    (b'b', 0x08),
    (b'f', 0x0c),
    (b'n', b'\n'),
    (b'r', b'\r'),
    (b't', b'\t'),
];

const PYTHON_ESCAPES: &[(u8, u8)] = &[
    (b'\'', b'\''),
    (b'"', b'"'),
    (b'\\', b'\\'),
    (b'b', 0x08),
    (b'f', 0x0c),
    (b'n', b'\n'),
    (b'r', b'\r'),
    (b't', b'\t'),
];

impl Dfa {
    /// The JSON string literal (quotes included) whose decoded content this DFA accepts.
    ///
    /// Escaping policy: `"` and `\` are escaped (`\"`, `\\`); control characters are escaped
    /// (`\b`, `\f`, `\n`, `\r`, `\t`, or `\uXXXX`); `/` may be written `\/`; every character
    /// outside printable ASCII may be written as itself or as `\uXXXX` (a surrogate pair past
    /// U+FFFF), hex digits of either case; printable ASCII is never hex-escaped.
    pub(crate) fn json_string(&self, max_states: usize) -> Result<Dfa, DfaError> {
        self.string_literal(
            &StringSpec {
                quote: b'"',
                quoted: true,
                escapes: JSON_ESCAPES,
                hex: HexEscape::Utf16,
            },
            max_states,
        )
    }

    /// One character's spelling inside a literal ([`CharSpelling`]): the same automaton for
    /// every length, so a compile keeps it in its caches (and the library carries the common
    /// ones in its table of standard lexemes) instead of spelling it per string.
    pub(crate) fn char_spelling(spelling: CharSpelling) -> Result<Dfa, DfaError> {
        // Under 100 states each, so this limit never binds.
        const LIMIT: usize = 1_000;
        let one = Dfa::char_count(1, Some(1), 64)?;
        match spelling {
            CharSpelling::Json => one.json_escaped(LIMIT),
            CharSpelling::JsonInString => one.json_escaped(LIMIT)?.json_escaped(LIMIT),
            CharSpelling::Python(quote) => one.python_escaped(quote, LIMIT),
        }
    }

    /// The JSON string literal of `min..=max` characters, the automaton
    /// `Dfa::char_count(min, Some(max))?.json_string()` builds (the same states, numbered
    /// differently), built by chaining copies of one character's spelling (`one`, the
    /// automaton of [`CharSpelling::Json`]) rather than spelling every count's states one by
    /// one: a `maxLength` string is the commonest string argument, and spelling it state by
    /// state (code points and a hex trie per count) cost about ten times more than copying the
    /// rows of one.
    pub(crate) fn json_string_of_length(
        one: &Dfa,
        min: u64,
        max: u64,
        max_states: usize,
    ) -> Result<Dfa, DfaError> {
        // (Without an upper bound, the last two counts share one hex trie in `json_string`;
        // bounded, no two counts lead to the same place, so copies are all it builds.)
        literal_of_length(&[(Quote::Byte(b'"'), one)], min, max, max_states)
    }

    /// [`Dfa::json_string_of_length`] as written inside another JSON string (arguments that
    /// are a JSON string holding a JSON object): the language of
    /// `Dfa::json_string_of_length(min, max)?.json_escaped()`, built by copying one escaped
    /// character's spelling per count (`one`, the automaton of [`CharSpelling::JsonInString`])
    /// rather than escaping the whole literal state by state.
    pub(crate) fn json_in_string_of_length(
        one: &Dfa,
        min: u64,
        max: u64,
        max_states: usize,
    ) -> Result<Dfa, DfaError> {
        literal_of_length(&[(Quote::Escaped, one)], min, max, max_states)
    }

    /// The Python string literal of `min..=max` characters in either quote, the language of
    /// `python_string(b'\'')` or `python_string(b'"')` over `Dfa::char_count(min, Some(max))`,
    /// built as [`Dfa::json_string_of_length`] is from the spellings of one character in each
    /// quote (`single`, `double`: [`CharSpelling::Python`]), with one closing state for both
    /// quotes, where the union of the two literals has one per quote.
    pub(crate) fn python_string_of_length(
        single: &Dfa,
        double: &Dfa,
        min: u64,
        max: u64,
        max_states: usize,
    ) -> Result<Dfa, DfaError> {
        literal_of_length(
            &[(Quote::Byte(b'\''), single), (Quote::Byte(b'"'), double)],
            min,
            max,
            max_states,
        )
    }

    /// The JSON string literal of `word` (a function's name), the language of
    /// `Dfa::literals([word])?.json_string()`, through [`Dfa::words_quoted`].
    pub(crate) fn json_string_of_word(word: &[u8], max_states: usize) -> Result<Dfa, DfaError> {
        Dfa::words_quoted(&[word], WordQuotes::Json, max_states)
    }

    /// The string literals of `words` (an `enum`'s strings, a function's name): the language
    /// of `Dfa::literals(words)?.json_string()` (JSON) or of its
    /// [`Dfa::python_string_either`] (Python). Where every word is plain, each has one spelling per quote,
    /// itself in quotes, built directly as literals (about a tenth of spelling their content
    /// automaton); any other word set is spelled through the content automaton. Plain: printable
    /// ASCII other than `\` and the quotes, and in JSON other than `/` (which may be `\/`).
    pub(crate) fn words_quoted(
        words: &[&[u8]],
        quotes: WordQuotes,
        max_states: usize,
    ) -> Result<Dfa, DfaError> {
        let marks: &[u8] = match quotes {
            WordQuotes::Json => b"\"",
            WordQuotes::Python => b"'\"",
        };
        let plain = |b: &u8| {
            (0x20..=0x7e).contains(b)
                && *b != b'\\'
                && !marks.contains(b)
                && !(quotes == WordQuotes::Json && *b == b'/')
        };
        if words.iter().all(|w| w.iter().all(plain)) {
            let quoted: Vec<Vec<u8>> = marks
                .iter()
                .flat_map(|&q| words.iter().map(move |w| [&[q][..], w, &[q]].concat()))
                .collect();
            return Dfa::literals(quoted.iter().map(|w| w.as_slice()), max_states);
        }
        let content = Dfa::literals(words.iter().copied(), max_states)?;
        match quotes {
            WordQuotes::Json => content.json_string(max_states),
            WordQuotes::Python => content.python_string_either(max_states),
        }
    }

    /// A Python string literal in `quote` (`'` or `"`) whose value this DFA accepts.
    ///
    /// Escaping policy: the quote and `\` are escaped; so are control characters (`\b`, `\f`,
    /// `\n`, `\r`, `\t`, or `\xXX`); the other quote may be written `\'`/`\"` or as itself;
    /// every other character is written as itself (UTF-8).
    pub(crate) fn python_string(&self, quote: u8, max_states: usize) -> Result<Dfa, DfaError> {
        self.string_literal(
            &StringSpec {
                quote,
                quoted: true,
                escapes: PYTHON_ESCAPES,
                hex: HexEscape::ControlByte,
            },
            max_states,
        )
    }

    /// A Python string literal in either quote whose value this DFA accepts: the union of the
    /// two [`Dfa::python_string`]s.
    pub(crate) fn python_string_either(&self, max_states: usize) -> Result<Dfa, DfaError> {
        self.python_string(b'\'', max_states)?.product(
            &self.python_string(b'"', max_states)?,
            Op::Or,
            max_states,
        )
    }

    /// This automaton's language as it is written inside a JSON string (used for arguments
    /// embedded as a JSON string): the spellings [`Dfa::json_string`] allows, without the
    /// quotes. An escape decodes to the byte(s) this automaton reads, so `\u00f1` stands for an
    /// `ñ` of the inner text and `\\u00f1` for the inner text's own escape.
    pub(crate) fn json_escaped(&self, max_states: usize) -> Result<Dfa, DfaError> {
        self.string_literal(
            &StringSpec {
                quote: b'"',
                quoted: false,
                escapes: JSON_ESCAPES,
                hex: HexEscape::Utf16,
            },
            max_states,
        )
    }

    /// This automaton's language as it is written inside a Python literal in `quote`, without
    /// the quotes (one character's spelling, for [`Dfa::char_spelling`]).
    fn python_escaped(&self, quote: u8, max_states: usize) -> Result<Dfa, DfaError> {
        self.string_literal(
            &StringSpec {
                quote,
                quoted: false,
                escapes: PYTHON_ESCAPES,
                hex: HexEscape::ControlByte,
            },
            max_states,
        )
    }

    /// The string literal whose decoded content this DFA accepts, spelled per `spec`.
    fn string_literal(&self, spec: &StringSpec, max_states: usize) -> Result<Dfa, DfaError> {
        // Bytes with a role in the encoding get classes of their own; hex escapes decode by
        // hex digit, so each hex digit is its own class too.
        let mut special = [0u8; 256];
        special[spec.quote as usize] = 1;
        special[b'\\' as usize] = 2;
        special[spec.hex.letter() as usize] = 3;
        for (i, (letter, _)) in spec.escapes.iter().enumerate() {
            if special[*letter as usize] == 0 {
                special[*letter as usize] = 4 + i as u8;
            }
        }
        for b in special.iter_mut().take(0x20) {
            *b = 20;
        }
        for (i, b) in b"0123456789abcdefABCDEF".iter().enumerate() {
            if special[*b as usize] == 0 {
                special[*b as usize] = 30 + i as u8;
            }
        }
        let (cls, reps) = dense_classes(&refine(&self.classes, &special));
        let n = self.accept.len(); // content states, dead included
        let mut b = Spelling {
            stride: reps.len(),
            hex_class: reps
                .iter()
                .map(|&r| (r as char).to_digit(16).filter(|_| r != spec.hex.letter()))
                .collect(),
            backslash_class: cls[b'\\' as usize],
            u_class: cls[b'u' as usize],
            trans: vec![0; (FIRST_IN + n) * reps.len()],
            accept: vec![false; FIRST_IN + n],
            limit: max_states.saturating_mul(4),
            uniform: HashMap::default(),
            mixed: Default::default(),
            lows: Vec::new(),
            low_ids: HashMap::default(),
            low_states: HashMap::default(),
        };
        let start = if spec.quoted {
            b.accept[CLOSED] = true;
            if self.start != Self::DEAD {
                b.set(OPEN, cls[spec.quote as usize], in_(self.start));
            }
            OPEN
        } else {
            for q in 1..n {
                b.accept[in_(q as StateId) as usize] = self.accept[q];
            }
            in_(self.start) as usize
        };
        let mut points = CodePoints {
            dfa: self,
            suffixes: HashMap::default(),
        };
        let live = |q: usize, byte: u8| match self.next(q as StateId, byte) {
            Self::DEAD => 0,
            t => in_(t),
        };
        // The content's byte classes holding a byte that only a hex escape may spell (control
        // characters, DEL, the bytes of non-ASCII characters): a state with no live transition
        // in any of them has no hex escape, and its code points need not be listed.
        let mut hex_only = vec![false; self.stride];
        for byte in (0x00..0x20).chain(0x7f..=0xff) {
            hex_only[self.classes[byte] as usize] = true;
        }
        let mut units = Vec::new();
        for q in 1..n {
            let at = in_(q as StateId) as usize;
            for (c, &byte) in reps.iter().enumerate() {
                let t = if byte == spec.quote {
                    if spec.quoted && self.is_accepting(q as StateId) {
                        CLOSED as StateId
                    } else {
                        0
                    }
                } else if byte == b'\\' || byte < 0x20 {
                    0 // set below / always escaped
                } else {
                    live(q, byte)
                };
                b.set(at, c as u8, t);
            }
            // The escapes from `q`: one-letter ones, then the hex trie.
            let row = &self.trans[q * self.stride..(q + 1) * self.stride];
            let needs_hex = row
                .iter()
                .zip(&hex_only)
                .any(|(&t, &h)| h && t != Self::DEAD);
            let map = if needs_hex {
                points.map(q as StateId)
            } else {
                Vec::new()
            };
            units.clear();
            match spec.hex {
                HexEscape::Utf16 => utf16_units(&map, &mut units, &mut b),
                HexEscape::ControlByte => {
                    for &(lo, hi, t) in &map {
                        if lo < 0x20 {
                            units.push((lo, hi.min(0x1f), Out::In(t)));
                        }
                    }
                }
            }
            let hex = b.hex_node(spec.hex.digits(), &units)?;
            let letters = spec.escapes.iter().any(|&(_, d)| live(q, d) != 0);
            if hex == 0 && !letters {
                continue;
            }
            let esc = b.new_state()?;
            b.set(at, cls[b'\\' as usize], esc as StateId);
            for (c, &byte) in reps.iter().enumerate() {
                let t = if byte == spec.hex.letter() {
                    hex
                } else {
                    match spec.escapes.iter().find(|(l, _)| *l == byte) {
                        Some(&(_, decoded)) => live(q, decoded),
                        None => 0,
                    }
                };
                b.set(esc, c as u8, t);
            }
        }
        let (cls, stride, trans) = match merged_classes(&cls, b.stride, &b.trans) {
            Some(merged) => merged,
            None => (cls, b.stride, b.trans),
        };
        let d = Dfa::trimmed(cls, stride, trans, b.accept, start as StateId);
        if d.state_count() > max_states {
            return Err(DfaError::TooLarge);
        }
        Ok(d)
    }
}

/// One character's spelling inside a string literal, without the quotes: the piece
/// [`literal_of_length`] copies once per count ([`Dfa::char_spelling`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CharSpelling {
    /// Inside a JSON string.
    Json,
    /// Inside a JSON string that is itself inside a JSON string (escaped twice).
    JsonInString,
    /// Inside a Python literal in this quote (`'` or `"`).
    Python(u8),
}

/// Which string literals [`Dfa::words_quoted`] spells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WordQuotes {
    /// JSON's, in `"`.
    Json,
    /// Python's, in `'` or `"`.
    Python,
}

/// How a literal of [`literal_of_length`] is quoted.
#[derive(Clone, Copy)]
enum Quote {
    /// One byte on each side (`"` or `'`).
    Byte(u8),
    /// `\"` on each side: a JSON string written inside another JSON string. The closing `\`
    /// is the same byte that starts a character's escape, so the character's state after `\`
    /// also takes the `"` that closes (which no character's spelling reads there).
    Escaped,
}

/// String literals of `min..=max` characters, one per `(quote, one)`: `quote`, then `min` to
/// `max` copies of `one` (one character's spelling inside the literal, from its start to its
/// one accepting state, which has no way out), then `quote` again. Every state is reached from
/// the opening quote and reaches the closing one (a count below `min` reads on to `min`; a
/// copy's states lead to the next count), so the result needs no trimming.
fn literal_of_length(
    literals: &[(Quote, &Dfa)],
    min: u64,
    max: u64,
    max_states: usize,
) -> Result<Dfa, DfaError> {
    // The content automaton's own limit ([`Dfa::char_count`]: eight states per count), so that
    // both ways refuse the same lengths.
    let counts = usize::try_from(max).map_or(usize::MAX, |c| c.saturating_add(1));
    if counts.saturating_mul(8).saturating_add(1) > max_states {
        return Err(DfaError::TooLarge);
    }
    // The quote bytes get classes of their own: a quote transition must not carry the other
    // bytes of its class in `one`.
    let mut own = [0u8; 256];
    own[b'\\' as usize] = 1;
    for (k, (quote, _)) in literals.iter().enumerate() {
        match quote {
            Quote::Byte(q) => own[*q as usize] = 2 + k as u8,
            Quote::Escaped => own[b'"' as usize] = 2 + k as u8,
        }
    }
    let mut shared = own;
    for (_, one) in literals {
        shared = refine(&shared, &one.classes);
    }
    let (classes, reps) = dense_classes(&shared);
    let stride = reps.len();
    let mut trans = vec![0 as StateId; FIRST_IN * stride];
    let mut accept = vec![false; FIRST_IN];
    let mut has_out = vec![false; FIRST_IN];
    accept[CLOSED] = true;
    for &(quote, one) in literals {
        let end = (1..one.accept.len())
            .find(|&s| one.accept[s])
            .ok_or(DfaError::TooLarge)?;
        debug_assert!(!one.has_out[end] && one.start as usize != end);
        // With an escaped quote: where `one` goes on `\`, which must not read `"` itself.
        let after_backslash = match quote {
            Quote::Byte(_) => None,
            Quote::Escaped => {
                let e = one.next(one.start, b'\\') as usize;
                if e == 0
                    || e == end
                    || e == one.start as usize
                    || one.next(e as StateId, b'"') != 0
                {
                    return Err(DfaError::TooLarge);
                }
                Some(e)
            }
        };
        let inner: Vec<usize> = (1..one.accept.len())
            .filter(|&s| s != end && s != one.start as usize)
            .collect();
        let mut local = vec![0usize; one.accept.len()];
        for (i, &s) in inner.iter().enumerate() {
            local[s] = i;
        }
        // Every count has its copy of one character's states but the top one; an escaped
        // quote adds two: after the opening `\`, and after a closing `\` at the top count.
        let per_count = 1 + inner.len();
        let extra = if after_backslash.is_some() { 2 } else { 0 };
        let base = accept.len() + extra;
        let n = base.saturating_add((counts - 1).saturating_mul(per_count).saturating_add(1));
        if n > max_states.saturating_mul(4) {
            return Err(DfaError::TooLarge);
        }
        let at = |c: usize| base + c * per_count; // between characters, after `c` of them
                                                  // Every count below the top holds the same block of rows, its targets shifted by the
                                                  // count's offset (`at(c) - at(0)`): count 0's block is built once, then appended shifted
                                                  // per count (appended, not written over zeros: a long string's table is megabytes).
        let block = template_block(one, &reps, (&inner, &local, end), at(0), per_count);
        let block_out: Vec<bool> = block
            .chunks(stride)
            .map(|row| row.iter().any(|&t| t != 0))
            .collect();
        trans.reserve(n * stride - trans.len());
        trans.resize(base * stride, 0);
        has_out.resize(base, false);
        for c in 0..counts - 1 {
            let offset = (c * per_count) as StateId;
            // Branch-free, so that it vectorizes: the mask is all ones where there is a
            // transition (0, none, stays 0).
            trans.extend(
                block
                    .iter()
                    .map(|&t| t + (offset & 0u32.wrapping_sub(StateId::from(t != 0)))),
            );
            has_out.extend_from_slice(&block_out);
        }
        trans.resize(n * stride, 0); // the top count's row
        has_out.resize(n, false);
        accept.resize(n, false);
        let backslash = classes[b'\\' as usize] as usize;
        let mut set = |from: usize, class: usize, to: usize| {
            trans[from * stride + class] = to as StateId;
            has_out[from] = true;
        };
        let quote = match quote {
            Quote::Byte(q) => {
                let q = classes[q as usize] as usize;
                set(OPEN, q, at(0));
                q
            }
            Quote::Escaped => {
                let (opening, top) = (base - 2, base - 1);
                set(OPEN, backslash, opening);
                let q = classes[b'"' as usize] as usize;
                set(opening, q, at(0));
                set(top, q, CLOSED);
                q
            }
        };
        for c in (0..counts).filter(|&c| c as u64 >= min) {
            match after_backslash {
                None => set(at(c), quote, CLOSED),
                // At the top count no character follows: `\` leads to the closing `"` alone.
                // Below it, the character's own state after `\` also closes.
                Some(_) if c + 1 == counts => set(at(c), backslash, base - 1),
                Some(e) => set(at(c) + 1 + local[e], quote, CLOSED),
            }
        }
    }
    let d = Dfa::from_rows(classes, stride, trans, accept, has_out, OPEN as StateId);
    if d.state_count() > max_states {
        return Err(DfaError::TooLarge);
    }
    Ok(d)
}

/// The rows of count 0's copy of `one` in [`literal_of_length`] (its start state at `at0`, its
/// `inner` states after it, numbered by `local`, its `end` state at the next count's start),
/// over the literal's classes `reps`; 0 where `one` has no transition.
fn template_block(
    one: &Dfa,
    reps: &[u8],
    (inner, local, end): (&[usize], &[usize], usize),
    at0: usize,
    per_count: usize,
) -> Vec<StateId> {
    let place = |s: usize| match s {
        0 => 0,
        s if s == one.start as usize => at0,
        s if s == end => at0 + per_count,
        s => at0 + 1 + local[s],
    };
    let mut block = Vec::with_capacity(per_count * reps.len());
    for s in std::iter::once(one.start as usize).chain(inner.iter().copied()) {
        let row = &one.trans[s * one.stride..(s + 1) * one.stride];
        block.extend(
            reps.iter()
                .map(|&rep| place(row[one.classes[rep as usize] as usize] as usize) as StateId),
        );
    }
    block
}

/// State 1 waits for the opening quote, state 2 follows the closing one.
const OPEN: usize = 1;
const CLOSED: usize = 2;
/// `In(q)`, inside the literal at content state `q`, is state `FIRST_IN + q`.
const FIRST_IN: usize = 3;

fn in_(q: StateId) -> StateId {
    FIRST_IN as StateId + q
}

/// Where a decoded hex escape leads.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Out {
    /// To content state `q` (the literal's state `In(q)`).
    In(StateId),
    /// A high surrogate: to the `\uDCxx` escape of the low unit, decoding per `lows[i]`.
    Low(u32),
}

/// The spelled literal under construction, with its interned hex tries.
struct Spelling {
    stride: usize,
    /// Per byte class, its hex digit value (a class of its own for each hex digit byte).
    hex_class: Vec<Option<u32>>,
    /// The classes of `\` and `u` (a surrogate pair's second escape).
    backslash_class: u8,
    u_class: u8,
    trans: Vec<StateId>,
    accept: Vec<bool>,
    /// Most states before giving up.
    limit: usize,
    /// Trie nodes over `digits` remaining hex digits whose every value leads to one place.
    uniform: HashMap<(u32, Out), StateId>,
    /// Other trie nodes, by their runs, per number of digits remaining (looked up by slice,
    /// so that a hit allocates nothing).
    mixed: [HashMap<Vec<Run<Out>>, StateId>; 5],
    /// The code points (relative to their block of 1,024) each high surrogate's low unit decodes.
    lows: Vec<Vec<Run<StateId>>>,
    low_ids: HashMap<Vec<Run<StateId>>, u32>,
    /// The state after a high surrogate, per `lows` index.
    low_states: HashMap<u32, StateId>,
}

impl Spelling {
    fn set(&mut self, state: usize, class: u8, to: StateId) {
        self.trans[state * self.stride + class as usize] = to;
    }

    fn new_state(&mut self) -> Result<usize, DfaError> {
        if self.accept.len() >= self.limit {
            return Err(DfaError::TooLarge);
        }
        self.accept.push(false);
        self.trans.extend(std::iter::repeat_n(0, self.stride));
        Ok(self.accept.len() - 1)
    }

    fn low_id(&mut self, runs: Vec<Run<StateId>>) -> u32 {
        if let Some(&id) = self.low_ids.get(&runs) {
            return id;
        }
        let id = self.lows.len() as u32;
        self.lows.push(runs.clone());
        self.low_ids.insert(runs, id);
        id
    }

    /// The trie state that reads `digits` more hex digits of a value in `0..16^digits` and
    /// goes where `runs` (sorted, relative) say; 0 when no value is allowed.
    fn hex_node(&mut self, digits: u32, runs: &[Run<Out>]) -> Result<StateId, DfaError> {
        let Some(&(_, _, first)) = runs.first() else {
            return Ok(0);
        };
        if digits == 0 {
            return self.leaf(first);
        }
        let span = 16u32.pow(digits);
        let uniform = runs.len() == 1 && runs[0].0 == 0 && runs[0].1 == span - 1;
        let found = if uniform {
            self.uniform.get(&(digits, first))
        } else {
            self.mixed[digits as usize].get(runs)
        };
        if let Some(&s) = found {
            return Ok(s);
        }
        let id = self.new_state()?;
        if uniform {
            self.uniform.insert((digits, first), id as StateId);
        } else {
            self.mixed[digits as usize].insert(runs.to_vec(), id as StateId);
        }
        let part = span / 16;
        let mut children = [0 as StateId; 16];
        let mut sub: Vec<Run<Out>> = Vec::new();
        for (x, child) in children.iter_mut().enumerate() {
            let (lo, hi) = (x as u32 * part, (x as u32 + 1) * part - 1);
            sub.clear();
            for &(a, b, o) in runs {
                if b >= lo && a <= hi {
                    sub.push((a.max(lo) - lo, b.min(hi) - lo, o));
                }
            }
            *child = self.hex_node(digits - 1, &sub)?;
        }
        for c in 0..self.stride {
            if let Some(v) = self.hex_class[c] {
                self.set(id, c as u8, children[v as usize]);
            }
        }
        Ok(id as StateId)
    }

    /// The state a complete hex escape leads to.
    fn leaf(&mut self, out: Out) -> Result<StateId, DfaError> {
        let i = match out {
            Out::In(q) => return Ok(in_(q)),
            Out::Low(i) => i,
        };
        if let Some(&s) = self.low_states.get(&i) {
            return Ok(s);
        }
        // `\` `u` then the low unit DC00..DFFF.
        let backslash = self.new_state()?;
        self.low_states.insert(i, backslash as StateId);
        let u = self.new_state()?;
        let units: Vec<Run<Out>> = self.lows[i as usize]
            .iter()
            .map(|&(a, b, q)| (0xDC00 + a, 0xDC00 + b, Out::In(q)))
            .collect();
        let hex = self.hex_node(4, &units)?;
        self.set(backslash, self.backslash_class, u as StateId);
        self.set(u, self.u_class, hex);
        Ok(backslash as StateId)
    }
}

/// The UTF-16 units `\uXXXX` may spell from a state whose characters are `map`: control
/// characters and everything past printable ASCII; characters past U+FFFF through their high
/// surrogate.
fn utf16_units(map: &[Run<StateId>], units: &mut Vec<Run<Out>>, b: &mut Spelling) {
    let mut block: Option<u32> = None;
    let mut pending: Vec<Run<StateId>> = Vec::new();
    let flush = |block: &mut Option<u32>,
                 pending: &mut Vec<Run<StateId>>,
                 units: &mut Vec<Run<Out>>,
                 b: &mut Spelling| {
        if let Some(h) = block.take() {
            let id = b.low_id(std::mem::take(pending));
            push_run(units, (0xD800 + h, 0xD800 + h, Out::Low(id)));
        }
    };
    for &(lo, hi, t) in map {
        for (a, z) in [(0, 0x1f), (0x7f, 0xffff)] {
            if hi >= a && lo <= z {
                push_run(units, (lo.max(a), hi.min(z), Out::In(t)));
            }
        }
        if hi < 0x10000 {
            continue;
        }
        let (mut a, z) = (lo.max(0x10000) - 0x10000, hi - 0x10000);
        while a <= z {
            let h = a >> 10;
            let end = (h << 10) | 0x3ff;
            if a & 0x3ff == 0 && z >= end && block != Some(h) {
                // Whole blocks alike: one run of high surrogates.
                flush(&mut block, &mut pending, units, b);
                let last = if z & 0x3ff == 0x3ff {
                    z >> 10
                } else {
                    (z >> 10) - 1
                };
                let id = b.low_id(vec![(0, 0x3ff, t)]);
                push_run(units, (0xD800 + h, 0xD800 + last, Out::Low(id)));
                a = (last + 1) << 10;
                continue;
            }
            if block != Some(h) {
                flush(&mut block, &mut pending, units, b);
                block = Some(h);
            }
            let stop = z.min(end);
            push_run(&mut pending, (a & 0x3ff, stop & 0x3ff, t));
            a = stop + 1;
        }
    }
    flush(&mut block, &mut pending, units, b);
}

/// Appends a run, merged into the last one where it continues it.
fn push_run<T: PartialEq + Copy>(runs: &mut Vec<Run<T>>, r: Run<T>) {
    if let Some(last) = runs.last_mut() {
        if last.2 == r.2 && last.1 + 1 == r.0 {
            last.1 = r.1;
            return;
        }
    }
    runs.push(r);
}

/// The characters each state of a UTF-8 content automaton reads, by code point.
struct CodePoints<'d> {
    dfa: &'d Dfa,
    /// Per (state, continuation bytes left): runs of the bytes' 6-bit payloads.
    suffixes: HashMap<(StateId, u32), Rc<Vec<Run<StateId>>>>,
}

impl CodePoints<'_> {
    /// The code points `q` reads, in sorted runs, with the state after each.
    fn map(&mut self, q: StateId) -> Vec<Run<StateId>> {
        let d = self.dfa;
        let mut out = Vec::new();
        for b in 0..0x80u32 {
            let t = d.next(q, b as u8);
            if t != Dfa::DEAD {
                push_run(&mut out, (b, b, t));
            }
        }
        for lead in 0xc2u32..=0xf4 {
            let q1 = d.next(q, lead as u8);
            if q1 == Dfa::DEAD {
                continue;
            }
            let (k, base, lo, hi) = match lead {
                0xc2..=0xdf => (1, (lead & 0x1f) << 6, 0x80, 0x7ff),
                0xe0..=0xef => (2, (lead & 0x0f) << 12, 0x800, 0xffff),
                _ => (3, (lead & 0x07) << 18, 0x10000, 0x10ffff),
            };
            for &(a, z, t) in self.suffix(q1, k).iter() {
                let (a, z) = ((base + a).max(lo), (base + z).min(hi));
                // Surrogates are not characters.
                for (a, z) in [(a, z.min(0xd7ff)), (a.max(0xe000), z)] {
                    if a <= z {
                        push_run(&mut out, (a, z, t));
                    }
                }
            }
        }
        out
    }

    /// The payloads of `k` continuation bytes read from `q`, in sorted runs.
    fn suffix(&mut self, q: StateId, k: u32) -> Rc<Vec<Run<StateId>>> {
        if let Some(r) = self.suffixes.get(&(q, k)) {
            return r.clone();
        }
        let mut out = Vec::new();
        for c in 0..64u32 {
            let t = self.dfa.next(q, 0x80 | c as u8);
            if t == Dfa::DEAD {
                continue;
            }
            if k == 1 {
                push_run(&mut out, (c, c, t));
                continue;
            }
            let base = c << (6 * (k - 1));
            for &(a, z, s) in self.suffix(t, k - 1).iter() {
                push_run(&mut out, (base + a, base + z, s));
            }
        }
        let out = Rc::new(out);
        self.suffixes.insert((q, k), out.clone());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::dfa::Op;

    fn json_char() -> Dfa {
        Dfa::char_spelling(CharSpelling::Json).unwrap()
    }

    fn in_string_char() -> Dfa {
        Dfa::char_spelling(CharSpelling::JsonInString).unwrap()
    }

    fn py_char(quote: u8) -> Dfa {
        Dfa::char_spelling(CharSpelling::Python(quote)).unwrap()
    }

    /// True when a JSON string literal keeps the escape policy: no `\uXXXX` for printable ASCII.
    fn policy_ok(lit: &str) -> bool {
        let b = lit.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\\' && i + 1 < b.len() {
                if b[i + 1] == b'u' {
                    let v = lit
                        .get(i + 2..i + 6)
                        .and_then(|h| u32::from_str_radix(h, 16).ok());
                    if v.is_some_and(|v| (0x20..=0x7e).contains(&v)) {
                        return false;
                    }
                }
                i += 2;
            } else {
                i += 1;
            }
        }
        true
    }

    /// Every literal of up to 4 pieces (characters raw and escaped in every way, broken
    /// escapes, lone surrogates) is accepted exactly when `serde_json` decodes it to content
    /// the content automaton accepts and it keeps the escape policy.
    #[test]
    fn json_literals_equal_decoding_then_matching() {
        let pieces: &[&str] = &[
            "a",
            "A",
            "ñ",
            "€",
            "😀",
            "\\u00f1",
            "\\u00F1",
            "\\u20ac",
            "\\u20AC",
            "\\ud83d\\ude00",
            "\\uD83D\\uDE00",
            "\\ud83d",
            "\\ude00",
            "\\u0041",
            "\\u0061",
            "\\n",
            "\\u000a",
            "\\u007f",
            "\\\"",
            "\"",
            "\\\\",
            "\\/",
            "\\x41",
            "\\u00f",
            "\u{7f}",
        ];
        let contents = [
            "(?s:.)*",
            "(?s:.){0,2}",
            "[a-zñ]{1,2}",
            "año|€|😀a",
            "[^a]*",
            "[\\x00-\\x1f]",
            "[\\u{10000}-\\u{10ffff}]+",
            "[\\u{1f600}-\\u{1f64f}\\u{20000}]",
        ];
        for re in contents {
            let content = Dfa::from_regex(re, 10_000).unwrap();
            let lit = content.json_string(100_000).unwrap();
            let mut idx = [0usize; 4];
            for len in 0..=3usize {
                let total = pieces.len().pow(len as u32);
                for n in 0..total {
                    let mut m = n;
                    for x in idx.iter_mut().take(len) {
                        *x = m % pieces.len();
                        m /= pieces.len();
                    }
                    let body: String = idx[..len].iter().map(|&i| pieces[i]).collect();
                    let spelled = format!("\"{body}\"");
                    let want = policy_ok(&spelled)
                        && serde_json::from_str::<String>(&spelled)
                            .is_ok_and(|v| content.matches(v.as_bytes()));
                    assert_eq!(
                        lit.matches(spelled.as_bytes()),
                        want,
                        "content {re:?}, literal {spelled}"
                    );
                }
            }
        }
    }

    /// Both automata accept the same literals (strings of `min..=max` characters).
    fn assert_same_language(fast: &Dfa, slow: &Dfa, min: u64, max: u64) {
        for (a, b) in [(fast, slow), (slow, fast)] {
            assert!(
                a.product(b, Op::AndNot, 1_000_000).unwrap().is_empty(),
                "length {min}..={max}: the two spellings differ"
            );
        }
    }

    #[test]
    fn a_string_of_length_is_spelled_as_its_content_would_be() {
        for (min, max) in [(0, 0), (0, 1), (0, 3), (2, 5), (3, 3), (1, 40), (0, 200)] {
            let fast = Dfa::json_string_of_length(&json_char(), min, max, 100_000).unwrap();
            let slow = Dfa::char_count(min, Some(max), 10_000)
                .unwrap()
                .json_string(100_000)
                .unwrap();
            assert_same_language(&fast, &slow, min, max);
            assert_eq!(fast.state_count(), slow.state_count(), "{min}..={max}");
            assert!(fast.matches(b"\"\"") == (min == 0));
        }
        let d = Dfa::json_string_of_length(&json_char(), 2, 3, 10_000).unwrap();
        for (lit, ok) in [
            ("\"ab\"", true),
            ("\"a\\u00e9\\ud83d\\ude00\"", true),
            ("\"\\n\\\"\"", true),
            ("\"a\"", false),
            ("\"abcd\"", false),
            ("\"a\\u0041\"", false),
        ] {
            assert_eq!(d.matches(lit.as_bytes()), ok, "{lit}");
        }
        assert!(Dfa::json_string_of_length(&json_char(), 0, 100_000, 50_000).is_err());
        assert!(Dfa::char_count(0, Some(100_000), 50_000).is_err());
    }

    #[test]
    fn a_string_of_length_in_a_string_is_spelled_as_escaping_would() {
        for (min, max) in [(0, 0), (0, 1), (0, 3), (2, 5), (3, 3), (1, 40)] {
            let fast = Dfa::json_in_string_of_length(&in_string_char(), min, max, 100_000).unwrap();
            let slow = Dfa::json_string_of_length(&json_char(), min, max, 100_000)
                .unwrap()
                .json_escaped(100_000)
                .unwrap();
            assert_same_language(&fast, &slow, min, max);
            assert!(fast.state_count() <= slow.state_count(), "{min}..={max}");
        }
        let d = Dfa::json_in_string_of_length(&in_string_char(), 1, 2, 10_000).unwrap();
        for (lit, ok) in [
            (r#"\"a\""#, true),
            (r#"\"ab\""#, true),
            (r#"\"\\\"\""#, true),
            (r#"\"\\\\\""#, true),
            (r#"\"\\n\""#, true),
            (r#"\"\u00e9\""#, true),
            (r#"\"\\u00e9\""#, true),
            (r#"\"\""#, false),
            (r#"\"abc\""#, false),
            (r#""a""#, false),
            (r#"\"a""#, false),
            (r#"\"\n\""#, false),
        ] {
            assert_eq!(d.matches(lit.as_bytes()), ok, "{lit}");
        }
    }

    #[test]
    fn a_python_string_of_length_is_spelled_as_its_content_would_be() {
        for (min, max) in [(0, 0), (0, 1), (2, 5), (3, 3), (1, 40)] {
            let fast =
                Dfa::python_string_of_length(&py_char(b'\''), &py_char(b'"'), min, max, 100_000)
                    .unwrap();
            let content = Dfa::char_count(min, Some(max), 10_000).unwrap();
            let slow = content.python_string_either(100_000).unwrap();
            assert_same_language(&fast, &slow, min, max);
            assert!(fast.state_count() <= slow.state_count(), "{min}..={max}");
        }
        let d =
            Dfa::python_string_of_length(&py_char(b'\''), &py_char(b'"'), 1, 2, 10_000).unwrap();
        for (lit, ok) in [
            ("'a'", true),
            ("\"ab\"", true),
            ("'\\x1f\"'", true),
            ("'\\''", true),
            ("'a\"", false),
            ("''", false),
            ("'abc'", false),
        ] {
            assert_eq!(d.matches(lit.as_bytes()), ok, "{lit}");
        }
    }

    #[test]
    fn words_are_spelled_as_their_literals_would_be() {
        let sets: [&[&str]; 5] = [
            &["low", "normal", "high"],
            &["USD", "EUR", "x y", ""],
            &["a/b", "c"],
            &["it's", "q\"", "caf\u{e9}"],
            &["tab\t", "ok"],
        ];
        for words in sets {
            let bytes: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
            let content = Dfa::literals(bytes.iter().copied(), 10_000).unwrap();
            let json = content.json_string(10_000).unwrap();
            let python = content.python_string_either(10_000).unwrap();
            for (quotes, slow) in [(WordQuotes::Json, json), (WordQuotes::Python, python)] {
                let fast = Dfa::words_quoted(&bytes, quotes, 10_000).unwrap();
                for (a, b) in [(&fast, &slow), (&slow, &fast)] {
                    assert!(
                        a.product(b, Op::AndNot, 100_000).unwrap().is_empty(),
                        "{words:?} {quotes:?}: the two spellings differ"
                    );
                }
            }
        }
    }

    #[test]
    fn a_word_is_spelled_as_its_literal_would_be() {
        for w in [
            "get_weather",
            "a.b-c",
            "x y",
            "",
            "a/b",
            "caf\u{e9}",
            "q\"",
            "tab\t",
        ] {
            let fast = Dfa::json_string_of_word(w.as_bytes(), 10_000).unwrap();
            let slow = Dfa::literals([w.as_bytes()], 10_000)
                .unwrap()
                .json_string(10_000)
                .unwrap();
            for (a, b) in [(&fast, &slow), (&slow, &fast)] {
                assert!(
                    a.product(b, Op::AndNot, 100_000).unwrap().is_empty(),
                    "{w:?}: the two spellings differ"
                );
            }
            assert!(
                fast.matches(serde_json::to_string(w).unwrap().as_bytes()),
                "{w:?}"
            );
        }
    }

    #[test]
    fn escaped_inside_a_json_string() {
        let content = Dfa::from_regex("año|😀", 1000).unwrap();
        let inner = content.json_string(10_000).unwrap();
        let outer = inner.json_escaped(10_000).unwrap();
        for ok in [
            "\\\"año\\\"",
            "\\\"a\\\\u00f1o\\\"",
            "\\\"a\\u00f1o\\\"",
            "\\\"\\\\ud83d\\\\ude00\\\"",
            "\\\"\\ud83d\\ude00\\\"",
            "\\u0022año\\u0022",
        ] {
            let decoded: String = serde_json::from_str(&format!("\"{ok}\"")).unwrap();
            let want = inner.matches(decoded.as_bytes()) && !ok.contains("\\u0022");
            assert_eq!(outer.matches(ok.as_bytes()), want, "{ok}");
        }
        assert!(!outer.matches(b"\"a\\u00f1o\""));
        assert!(!outer.matches("\\\"añ\\\"".as_bytes()));
    }

    #[test]
    fn python_literals_keep_control_byte_escapes() {
        let any = Dfa::from_regex("(?s:.)*", 1000).unwrap();
        let p = any.python_string(b'\'', 10_000).unwrap();
        assert!(p.matches(b"'a\\x1f\\n\"\\''"));
        assert!(p.matches("'ñ'".as_bytes()));
        assert!(!p.matches(b"'\\x41'") && !p.matches(b"'\\u00f1'"));
    }
}
