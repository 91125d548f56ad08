//! Token masks: the token-level automaton shared across sequences, and per-sequence matchers.
//!
//! The layer holds, one idea per file: the token sets (`bitset`), the walks of grammar states
//! over the vocabulary's token trie (`walks`, with `text_walks` for free text; the trie and its text index are
//! [`crate::vocab`]'s and know no grammar), the shared [`TokenAutomaton`] (here) and the
//! per-sequence [`Matcher`] (`matcher`), and applying bitmasks to an engine's logits ([`logits`]).
//!
//! The vocabulary's tokens are laid out as a byte trie in depth-first order, so a subtree is a
//! contiguous run of nodes and a dead prefix skips its whole subtree at once. For the frame on
//! top of a matcher stack, the tokens it accepts on its own (without completing) do not depend
//! on the frames below it: they are computed once per distinct top frame by one walk over the
//! trie and cached — that cache *is* the token-level automaton, built lazily and shared by every
//! sequence. The few tokens that complete the top value and continue into its parent ("exits")
//! are checked against the real stack at run time. Whole masks are also cached per matcher state.
//!
//! Every cache is bounded, so memory does not grow with use: per automaton, the top-frame walks
//! hold at most 64 MiB (emptied when full), the budget's token costs per matcher state at most
//! 64 MiB (emptied when full), the distinct-calls search's steps per state set at most 16 MiB
//! (no more added once full), and whole masks at most 512 entries (no more are added once
//! full; each kept as the words where it differs from a base mask that many share); the lexeme walks shared by every grammar over a vocabulary go into a
//! [`crate::Caches`] (bounded in bytes, least recently used evicted first: see
//! [`TokenAutomaton::with_caches`]). A [`Matcher`] keeps one rollback snapshot per accepted token, at
//! most [`DEFAULT_MAX_ROLLBACK`] of them unless told otherwise ([`Matcher::set_max_rollback`]);
//! its list of accepted token ids (4 bytes each) grows with the output.

use crate::automaton::complete::{Completer, INF};
use crate::automaton::{advance, Frame, Stack, Sym, SPECIAL};
use crate::cache::{CacheKey, Caches};
use crate::error::{Error, Result};
use crate::grammar::dfa::Dfa;
use crate::grammar::{Grammar, GrammarInner};
use crate::vocab::trie::TokenTrie;
use crate::vocab::{TokenId, Vocab};
use rustc_hash::FxHashMap;
use std::sync::{Arc, OnceLock, RwLock, Weak};

mod bitset;
mod distinct;
pub mod logits;
mod matcher;
mod rows;
mod text_walks;
mod walks;

pub use bitset::TokenMask;
use bitset::{TokenSet, TokenSetBuilder, WalkTokens};
pub(crate) use distinct::json_eq;
pub use matcher::{fill_u32_rows, Matcher};
pub use rows::{map_rows, SERIAL_ROWS_BUDGET};
use walks::{ExitChildren, FirstSteps, Walker};

/// A cached lexeme walk, holding its automaton so that the address in its key stays unique.
type LexemeWalk = (Arc<Dfa>, Arc<Local>);

/// The cache key of a lexeme automaton's walk over a whole vocabulary, from one state (the
/// automaton by address: the entry holds it, so the address is not reused while it lives).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LexemeWalkKey {
    vocab: u64,
    dfa: usize,
    state: u32,
}

/// The cache key of a gap automaton's walk over a whole vocabulary, from one state, by what
/// the automaton is a function of ([`crate::grammar::GapLexeme::key`]) rather than by address:
/// every grammar with the same whitespace policy walks the same gaps, so the walk is kept in
/// the vocabulary's own caches ([`Vocab::caches`]) and a new grammar, with its compile caches
/// cold, finds it there.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GapWalkKey {
    vocab: u64,
    gap: crate::grammar::builder::GapKey,
    state: u32,
}

impl CacheKey for GapWalkKey {
    type Value = Local;
}

impl CacheKey for LexemeWalkKey {
    type Value = LexemeWalk;
}

/// Tokens a top frame accepts on its own, and where it may complete with more bytes to follow.
#[derive(Debug)]
struct Local {
    allowed: TokenSet,
    /// Trie nodes (0 = before any byte) where the frame is complete and the token may go on.
    exits: Vec<u32>,
    /// The children of `exits` but node 0, by byte: what a walk out of the frame visits.
    children: ExitChildren,
    /// The allowed tokens by completion cost, computed when a token budget first needs them.
    costs: OnceLock<Costs>,
}

/// Token bitmaps by cost, while a state's costs are gathered.
type Groups = std::collections::BTreeMap<u32, TokenSetBuilder>;

/// A top frame's own tokens grouped by the fewest tokens the frame (with what it pushed)
/// needs after each before it is complete.
#[derive(Debug)]
struct Costs {
    /// The largest cost (0 when there are no tokens).
    max: u32,
    /// Increasing costs, each with its tokens (a token reached along several paths may be in
    /// several groups: it is allowed under a limit if one of its groups is).
    groups: Vec<(u32, TokenSet)>,
}

impl Costs {
    /// Estimated heap bytes.
    fn bytes(&self) -> usize {
        self.groups.iter().map(|(_, set)| set.bytes() + 8).sum()
    }

    /// The costs of tokens gathered by cost.
    fn from_groups(groups: Groups) -> Costs {
        Costs {
            max: groups.keys().next_back().copied().unwrap_or(0),
            groups: groups
                .into_iter()
                .map(|(c, set)| (c, set.finish()))
                .collect(),
        }
    }

    fn new(list: Vec<(TokenId, u32)>, vocab_len: usize) -> Costs {
        // Grouped by cost without sorting the (large) list; a token reached along several paths
        // may land in several groups, which is what `groups` allows.
        let mut by_cost: std::collections::BTreeMap<u32, Vec<TokenId>> = Default::default();
        for (t, c) in list {
            by_cost.entry(c).or_default().push(t);
        }
        let max = by_cost.keys().next_back().copied().unwrap_or(0);
        let groups = by_cost
            .into_iter()
            .map(|(c, ids)| (c, TokenSet::new(ids, vocab_len)))
            .collect();
        Costs { max, groups }
    }
}

/// Most whole masks kept per automaton.
const FULL_CACHE_ENTRIES: usize = 512;

/// Most bytes of top-frame walks kept per automaton; the cache is emptied when it would exceed
/// them (walks are recomputed on demand, identically).
const LOCAL_CACHE_BYTES: usize = 64 << 20;

/// Most bytes of a token budget's costs per matcher state kept per automaton; emptied when it
/// would exceed them (recomputed on demand, identically). Most states' cost groups are a few
/// tokens each (kept as ids), so this holds thousands of states: a batch of random outputs
/// reaches a new state at nearly every token.
const COSTS_CACHE_BYTES: usize = 64 << 20;

/// How many tokens a new [`Matcher`] can roll back: one state snapshot is kept per accepted
/// token, the oldest dropped beyond this many.
pub const DEFAULT_MAX_ROLLBACK: usize = 1024;

/// A token budget's costs per matcher state, and their estimated heap bytes.
#[derive(Default)]
struct CostsCache {
    map: FxHashMap<Vec<Stack>, Arc<Costs>>,
    bytes: usize,
}

/// Top-frame walks and their estimated heap bytes.
#[derive(Default)]
struct LocalCache {
    map: FxHashMap<Frame, Arc<Local>>,
    bytes: usize,
}

/// A state set's whole mask by the grammar alone (cached by the state set), and what the
/// distinct-calls rule learns of those states once it needs it.
///
/// The mask is kept as a *base* mask shared with other entries plus the words where it differs
/// from it: the masks of one grammar are mostly alike (inside strings nearly the whole
/// vocabulary, in structure a few tokens), so a hit copies a base that many states share and
/// that stays in the CPU's caches, then patches a few words, where a mask of its own per state
/// (a vocabulary-sized read from memory at every step) cost most of a warm step.
#[derive(Debug)]
pub(crate) struct FullEntry {
    /// The shared mask this one is written against; `None`: no token.
    base: Option<Arc<TokenMask>>,
    /// The words where this mask differs from `base`: (index, xor).
    diff: Box<[(u32, u64)]>,
    /// Whether every token of the mask keeps new calls new ([`TokenAutomaton::calls_stay_new`]).
    calls_stay_new: OnceLock<bool>,
    /// The entries of the states after a token, as matchers found them: a hit after an accept
    /// is then one lookup by token, not a hash of every stack of the new states. Weak: states
    /// that loop would otherwise keep their entries alive; entries live as long as the
    /// automaton's cache, which never drops one.
    next: RwLock<FxHashMap<TokenId, Weak<FullEntry>>>,
}

/// Most successors kept per whole-mask cache entry.
const FULL_ENTRY_NEXT: usize = 256;

impl FullEntry {
    /// Writes the entry's mask into `mask` (of the vocabulary's length).
    fn write_into(&self, mask: &mut TokenMask) {
        match &self.base {
            Some(b) => mask.words.copy_from_slice(&b.words),
            None => mask.words.fill(0),
        }
        for &(i, x) in self.diff.iter() {
            mask.words[i as usize] ^= x;
        }
    }

    /// The base the entry's mask is written against.
    fn base(&self) -> Option<&Arc<TokenMask>> {
        self.base.as_ref()
    }

    /// The entry of the states after `token`, where a matcher linked it.
    fn next(&self, token: TokenId) -> Option<Arc<FullEntry>> {
        read(&self.next).get(&token).and_then(Weak::upgrade)
    }

    /// Links `next`, the entry of the states after `token` (bounded per entry).
    fn link(&self, token: TokenId, next: &Arc<FullEntry>) {
        let mut map = self.next.write().unwrap_or_else(|e| e.into_inner());
        if map.len() < FULL_ENTRY_NEXT {
            map.insert(token, Arc::downgrade(next));
        }
    }
}

/// Most base masks per automaton (see [`FullEntry`]); past them a mask far from every base is
/// kept whole (a base of its own that no other entry shares).
const FULL_CACHE_BASES: usize = 32;

/// A mask is written against a base when it differs from it in at most one word in this many.
const FULL_DIFF_DENSITY: usize = 8;

/// The words where `mask` differs from `base` (all-zero where `None`): (index, xor), or `None`
/// past `limit` of them.
fn word_diff(mask: &TokenMask, base: Option<&TokenMask>, limit: usize) -> Option<Vec<(u32, u64)>> {
    match base {
        Some(b) => diff_by(&mask.words, limit, |i, w| w ^ b.words[i]),
        None => diff_by(&mask.words, limit, |_, w| w),
    }
}

/// [`word_diff`] with `xor(i, word)` the difference of word `i`: eight words at a time, a run
/// of equal words costing one test.
#[inline(always)]
fn diff_by(
    words: &[u64],
    limit: usize,
    xor: impl Fn(usize, u64) -> u64,
) -> Option<Vec<(u32, u64)>> {
    const CHUNK: usize = 8;
    let mut diff = Vec::new();
    for (c, chunk) in words.chunks(CHUNK).enumerate() {
        let at = c * CHUNK;
        let any = chunk
            .iter()
            .enumerate()
            .fold(0, |a, (j, &w)| a | xor(at + j, w));
        if any == 0 {
            continue;
        }
        for (j, &w) in chunk.iter().enumerate() {
            let x = xor(at + j, w);
            if x != 0 {
                if diff.len() == limit {
                    return None;
                }
                diff.push(((at + j) as u32, x));
            }
        }
    }
    Some(diff)
}

struct Shared {
    grammar: Grammar,
    vocab: Arc<Vocab>,
    trie: Arc<TokenTrie>,
    /// Where lexeme walks are shared with every grammar over the vocabulary.
    caches: Caches,
    /// The vocabulary's token for each special token of the grammar, where it has one.
    specials: Vec<Option<TokenId>>,
    local: RwLock<LocalCache>,
    full: RwLock<FxHashMap<Vec<Stack>, Arc<FullEntry>>>,
    /// The base masks of `full`'s entries that others may share, newest last.
    full_bases: RwLock<Vec<Arc<TokenMask>>>,
    /// Bytes without a single-byte (non-special) token: a budget cannot be guaranteed if any.
    missing_bytes: OnceLock<Vec<u8>>,
    /// Shortest completions, built when a token budget is first set.
    completer: OnceLock<Completer>,
    /// Per matcher state: its allowed tokens by completion cost (bounded in bytes).
    budget_costs: RwLock<CostsCache>,
    /// Shortest completions that start no new call (the distinct-calls rule), built when
    /// first needed.
    no_calls: OnceLock<Completer>,
    /// Shortest completions in bytes, and the longest token's length in bytes (the
    /// distinct-calls rule's quick exit), computed when first needed.
    symbols: OnceLock<(Completer, u32)>,
    /// Per grammar node: whether a call may start in it (the distinct-calls rule).
    call_nodes: OnceLock<Vec<bool>>,
    /// The tokens that cannot start a call (the distinct-calls rule).
    quiet: OnceLock<TokenMask>,
    /// The tokens with fewer bytes than the shortest call (the distinct-calls rule).
    shorter_than_calls: OnceLock<TokenMask>,
    /// Per frame outside calls: its tokens by the cost of ending with no new call (the
    /// distinct-calls rule; bounded like `full`).
    no_call_costs: RwLock<FxHashMap<Frame, Arc<Costs>>>,
    /// Per state set the distinct-calls search expanded: its steps by each byte (bounded in
    /// bytes; see [`TokenAutomaton::byte_steps`]).
    byte_steps: RwLock<ByteStepsCache>,
}

/// Byte steps per state set and their estimated heap bytes.
#[derive(Default)]
struct ByteStepsCache {
    map: FxHashMap<Vec<Stack>, Arc<ByteSteps>>,
    bytes: usize,
}

/// The bytes a state set takes, in the order the distinct-calls search tries them (the bytes
/// that close and open most things first, then the others), each with the states after it and
/// the fewest tokens that then end the output; bytes without a single-byte token and those
/// after which the output cannot end are left out.
pub(crate) type ByteSteps = [(Sym, Vec<Stack>, u32)];

/// Most bytes of byte steps kept per automaton; no more are added past them (they are
/// recomputed on demand, identically).
const BYTE_STEPS_BYTES: usize = 16 << 20;

/// Estimated heap bytes of a state set.
fn states_bytes(states: &[Stack]) -> usize {
    states
        .iter()
        .map(|s| std::mem::size_of::<Stack>() + s.len() * std::mem::size_of::<Frame>())
        .sum()
}

/// A compiled grammar bound to a vocabulary: the shared token-level automaton.
///
/// Clone it freely (it is an `Arc`); it is `Send + Sync`, and its mask caches are shared by
/// every [`Matcher`] made from it.
#[derive(Clone)]
pub struct TokenAutomaton {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TokenAutomaton {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAutomaton")
            .field("vocab_len", &self.shared.vocab.len())
            .finish_non_exhaustive()
    }
}

impl TokenAutomaton {
    /// Binds `grammar` to `vocab`. Cheap: masks are computed lazily and cached.
    ///
    /// [`Error::MissingSpecialToken`] when the grammar needs a special token (e.g.
    /// `<|python_tag|>`) that the vocabulary lacks: one without which no output, or no call, is
    /// possible any more. Special tokens the grammar can do without are simply never allowed.
    ///
    /// The lexeme walks it shares with other automata over `vocab` go into the caches the
    /// grammar was compiled with ([`crate::CompileOptions::caches`]), else into the
    /// vocabulary's own ([`Vocab::caches`]).
    pub fn new(grammar: &Grammar, vocab: Arc<Vocab>) -> Result<Self> {
        let caches = match &grammar.inner.caches {
            Some(c) => c.clone(),
            None => vocab.caches().clone(),
        };
        Self::with_caches(grammar, vocab, &caches)
    }

    /// [`TokenAutomaton::new`] keeping the walks it shares with other automata over `vocab` in
    /// `caches`.
    pub fn with_caches(grammar: &Grammar, vocab: Arc<Vocab>, caches: &Caches) -> Result<Self> {
        let g = &grammar.inner;
        let specials: Vec<Option<TokenId>> = g
            .specials
            .iter()
            .map(|name| vocab.special_token(name))
            .collect();
        let missing: Vec<u32> = (0..specials.len() as u32)
            .filter(|&i| specials[i as usize].is_none())
            .collect();
        if !missing.is_empty() {
            let before = g.reach(&[]);
            let after = g.reach(&missing);
            if before != after {
                let names: Vec<&str> = missing
                    .iter()
                    .map(|&i| g.specials[i as usize].as_str())
                    .collect();
                return Err(Error::MissingSpecialToken(names.join(", ")));
            }
        }
        let trie = vocab.trie().clone();
        Ok(TokenAutomaton {
            shared: Arc::new(Shared {
                grammar: grammar.clone(),
                vocab,
                trie,
                caches: caches.clone(),
                specials,
                local: RwLock::new(LocalCache::default()),
                full: RwLock::new(FxHashMap::default()),
                full_bases: RwLock::new(Vec::new()),
                missing_bytes: OnceLock::new(),
                completer: OnceLock::new(),
                budget_costs: RwLock::new(CostsCache::default()),
                no_calls: OnceLock::new(),
                symbols: OnceLock::new(),
                call_nodes: OnceLock::new(),
                quiet: OnceLock::new(),
                shorter_than_calls: OnceLock::new(),
                no_call_costs: RwLock::new(FxHashMap::default()),
                byte_steps: RwLock::new(ByteStepsCache::default()),
            }),
        })
    }

    /// Tokenizes `text` as the model would, the grammar's special tokens spelled in it (e.g.
    /// `<|python_tag|>`) becoming the vocabulary's special tokens, as a model emits them.
    pub fn tokenize(&self, text: &str) -> Result<Vec<TokenId>> {
        let names = &self.g().specials;
        let vocab = &self.shared.vocab;
        let mut out = Vec::new();
        let mut rest = text;
        loop {
            let next = names
                .iter()
                .zip(&self.shared.specials)
                .filter_map(|(name, t)| Some((rest.find(name.as_str())?, name.len(), (*t)?)))
                .min_by_key(|x| x.0);
            match next {
                Some((i, len, t)) => {
                    if i > 0 {
                        out.extend(vocab.tokenize(&rest[..i])?);
                    }
                    out.push(t);
                    rest = &rest[i + len..];
                }
                None => {
                    if !rest.is_empty() {
                        out.extend(vocab.tokenize(rest)?);
                    }
                    return Ok(out);
                }
            }
        }
    }

    /// The grammar's index of special token `token`, if the grammar refers to it.
    fn special_index(&self, token: TokenId) -> Option<usize> {
        self.shared.specials.iter().position(|&t| t == Some(token))
    }

    /// The symbols `token` is read as from `states`: its special symbol where the grammar
    /// takes it there, else its bytes (none for any other special token).
    pub(crate) fn token_symbols(&self, states: &[Stack], token: TokenId) -> Vec<Sym> {
        if let Some(k) = self.special_index(token) {
            let sym = SPECIAL + k as Sym;
            let mut next = Vec::new();
            advance(self.g(), states, sym, &mut next);
            if !next.is_empty() {
                return vec![sym];
            }
        }
        let vocab = &self.shared.vocab;
        if vocab.is_special(token) {
            return Vec::new();
        }
        let bytes = vocab.token_bytes(token).unwrap_or_default();
        bytes.iter().map(|&b| b as Sym).collect()
    }

    /// Calls `each(token, next states)` for every special token of the grammar that the
    /// vocabulary has and `states` take.
    fn for_each_special(&self, states: &[Stack], mut each: impl FnMut(TokenId, &[Stack])) {
        let mut out = Vec::new();
        for (k, t) in self.shared.specials.iter().enumerate() {
            if let Some(t) = *t {
                advance(self.g(), states, SPECIAL + k as Sym, &mut out);
                if !out.is_empty() {
                    each(t, &out);
                }
            }
        }
    }

    /// Fills `mask` with the tokens the grammar alone allows next from `states` (end-of-
    /// generation tokens where one of them may end; `mask` cleared first).
    fn fill_states_mask(&self, states: &[Stack], mask: &mut TokenMask) {
        mask.clear();
        for s in states {
            self.fill_stack(s, mask);
        }
        self.for_each_special(states, |t, _| mask.set(t));
        let g = self.g();
        if states.iter().any(|s| g.can_end(s)) {
            for &t in self.shared.vocab.eos_tokens() {
                if (t as usize) < mask.len() {
                    mask.set(t);
                }
            }
        }
    }

    /// `mask` as a cache entry: written against the closest of the empty mask, `near` (the
    /// base of the matcher's previous mask: consecutive masks are alike) and the newest bases,
    /// or a new base where none is close. An output's first mask (`first`) is kept whole,
    /// unshared: it is read once per output, and comparing it would add to the time to a new
    /// request's first mask.
    pub(crate) fn full_entry(
        &self,
        mask: &TokenMask,
        near: Option<&Arc<TokenMask>>,
        first: bool,
    ) -> FullEntry {
        if first {
            return FullEntry {
                base: Some(Arc::new(mask.clone())),
                diff: Box::default(),
                calls_stay_new: OnceLock::new(),
                next: RwLock::default(),
            };
        }
        let limit = mask.words.len() / FULL_DIFF_DENSITY;
        // The closest base so far (`None`: the empty mask) and the words that differ.
        let mut base: Option<Arc<TokenMask>> = None;
        let mut diff = word_diff(mask, None, limit);
        let bases = read(&self.shared.full_bases);
        let candidates = near.into_iter().chain(
            bases
                .iter()
                .rev()
                .take(4)
                .filter(|b| near.is_none_or(|n| !Arc::ptr_eq(n, b))),
        );
        // A mask close to empty is written against the empty mask (a hit clears and sets a
        // few words, reading no base); the others against the closest base.
        for b in candidates {
            let room = match &diff {
                Some(_) if base.is_none() => break,
                Some(d) if d.is_empty() => break,
                Some(d) => d.len() - 1,
                None => limit,
            };
            if let Some(d) = word_diff(mask, Some(b), room) {
                base = Some(b.clone());
                diff = Some(d);
            }
        }
        drop(bases);
        let diff = match diff {
            Some(d) => d,
            None => {
                let own = Arc::new(mask.clone());
                let mut bases = self
                    .shared
                    .full_bases
                    .write()
                    .unwrap_or_else(|e| e.into_inner());
                if bases.len() < FULL_CACHE_BASES {
                    bases.push(own.clone());
                }
                base = Some(own);
                Vec::new()
            }
        };
        FullEntry {
            base,
            diff: diff.into_boxed_slice(),
            calls_stay_new: OnceLock::new(),
            next: RwLock::default(),
        }
    }

    /// For the distinct-calls rule, with every stack of `states` inside a call of a function
    /// not called yet: true when every token of `mask` (the grammar's mask at `states`) leaves
    /// the calls distinct whatever follows, and the output a way to end within no budget:
    /// - a token after which no call may have ended ([`distinct::may_end_call`]) keeps a call
    ///   in progress open (new whatever it becomes), and is taken by a stack from where the
    ///   output may end with no further call;
    /// - a token that may end one (the call is new) holds no whole call besides (it is shorter
    ///   than the shortest call), and leaves some stack outside calls from where the output
    ///   may end with no further call.
    ///
    /// A function of the states alone, kept with their mask's cache entry. A token that the
    /// top frame of a stack from where the output may end takes on its own, where the call
    /// needs more than that frame, or one with fewer symbols than the fewest that complete any
    /// call in progress, ends none along that stack; the others are checked one by one.
    pub(crate) fn calls_stay_new(&self, states: &[Stack], mask: &TokenMask) -> bool {
        let g = self.g();
        let nc = self.no_calls_completer();
        let ending: Vec<Stack> = states
            .iter()
            .filter(|s| nc.remaining(s) < INF)
            .cloned()
            .collect();
        if ending.is_empty() {
            return false;
        }
        if ending.len() < states.len() {
            let mut covered = TokenMask::new(mask.len());
            self.fill_states_mask(&ending, &mut covered);
            if mask
                .words
                .iter()
                .zip(&covered.words)
                .any(|(m, c)| m & !c != 0)
            {
                return false;
            }
        }
        let sym = self.symbol_completer();
        let fewest = states
            .iter()
            .map(|s| match distinct::open_call(g, s) {
                Some((k, _)) if k + 1 < s.len() => sym.remaining(&s[k + 1..]),
                _ => 0,
            })
            .min()
            .unwrap_or(0) as usize;
        // Tokens that a stack from where the output may end takes in its top frame alone,
        // where the call needs more than that frame to be complete: along that stack, no call
        // ends (the frame may complete, the call not).
        let mut local = TokenMask::new(mask.len());
        for s in &ending {
            if distinct::open_call(g, s).is_some_and(|(k, _)| sym.remaining_below(&s[k + 1..]) > 0)
            {
                self.local(&s[s.len() - 1]).allowed.or_into(&mut local);
            }
        }
        // The fewest symbols of any call: a token shorter holds no whole call.
        let shortest_call = g
            .nodes
            .iter()
            .filter_map(|n| match n {
                crate::grammar::Node::Capture(crate::grammar::Capture::Call(_), inner) => {
                    Some(sym.node_min(*inner))
                }
                _ => None,
            })
            .min()
            .unwrap_or(INF) as usize;
        let vocab = &self.shared.vocab;
        for (i, (&m, &l)) in mask.words.iter().zip(&local.words).enumerate() {
            let mut w = m & !l;
            while w != 0 {
                let t = (i * 64) as TokenId + w.trailing_zeros();
                w &= w - 1;
                let len = match self.special_index(t) {
                    Some(_) => 1,
                    None => vocab.token_bytes(t).map_or(0, <[u8]>::len),
                };
                if len < fewest {
                    continue;
                }
                let syms = self.token_symbols(states, t);
                if distinct::may_end_call(g, states, &syms)
                    && (len >= shortest_call || !self.leaves_a_quiet_end(states, &syms))
                {
                    return false;
                }
            }
        }
        true
    }

    /// True when, after `syms` from `states`, some stack is outside calls with a way to end
    /// that starts no call.
    fn leaves_a_quiet_end(&self, states: &[Stack], syms: &[Sym]) -> bool {
        let g = self.g();
        let nc = self.no_calls_completer();
        let mut cur = states.to_vec();
        let mut next = Vec::new();
        for &sym in syms {
            advance(g, &cur, sym, &mut next);
            std::mem::swap(&mut cur, &mut next);
        }
        cur.iter()
            .any(|s| distinct::open_call(g, s).is_none() && nc.remaining(s) < INF)
    }

    /// A matcher at the start of an output.
    pub fn matcher(&self) -> Matcher {
        Matcher::at_start(self.clone())
    }

    /// The bytes that have no single-byte token of their own in the vocabulary (special tokens
    /// excluded). Empty for byte-level BPE vocabularies with all 256 byte tokens and for
    /// SentencePiece ones with byte fallback (`<0xNN>`); SmolLM2's lacks 21. A token budget
    /// ([`Matcher::set_token_budget`]) never counts such a byte as a token of its own.
    pub fn bytes_without_token(&self) -> &[u8] {
        // Computed on first use (a token budget asks for it), not on every compile.
        self.shared.missing_bytes.get_or_init(|| {
            let vocab = &self.shared.vocab;
            (0..=255u8)
                .filter(|&b| vocab.token_id(&[b]).is_none_or(|t| vocab.is_special(t)))
                .collect()
        })
    }

    /// Where no complete output from `states` can be spelled with this vocabulary's tokens but
    /// the grammar has one: a byte without a single-byte token that the shortest complete
    /// output (in bytes) needs, and that output's text before it (special tokens by name).
    /// `None` where the grammar itself has no complete output from `states`.
    pub(crate) fn unspellable(&self, states: &[Stack]) -> Option<(u8, String)> {
        let ok = self.shared.specials.iter().map(Option::is_some).collect();
        let g = self.shared.grammar.inner.clone();
        let any = Completer::with_specials(g, ok);
        let r = any.remaining_any(states);
        if r >= INF {
            return None;
        }
        let syms = any.complete(states, |_| true, 0, (r as usize + 1) * 16)?;
        let tokens = self.completer();
        let mut text = Vec::new();
        for &sym in &syms {
            if sym < SPECIAL {
                let b = sym as u8;
                if !tokens.usable(b) {
                    return Some((b, String::from_utf8_lossy(&text).into_owned()));
                }
                text.push(b);
            } else if let Some(name) = self.g().specials.get((sym - SPECIAL) as usize) {
                text.extend_from_slice(name.as_bytes());
            }
        }
        // Not expected (a way over bytes with tokens is always spelled): name the first byte
        // without a token, after the whole shortest output.
        let b = (0..=255u8).find(|&b| !tokens.usable(b))?;
        Some((b, String::from_utf8_lossy(&text).into_owned()))
    }

    /// Shortest completions in tokens of this vocabulary (built on first use).
    fn completer(&self) -> &Completer {
        self.shared.completer.get_or_init(|| {
            let ok = self.shared.specials.iter().map(Option::is_some).collect();
            Completer::in_tokens(
                self.shared.grammar.inner.clone(),
                ok,
                self.shared.vocab.clone(),
            )
        })
    }

    /// The completer of [`Completer::without_calls`] (built on first use).
    fn no_calls_completer(&self) -> &Completer {
        self.shared.no_calls.get_or_init(|| {
            let ok = self.shared.specials.iter().map(Option::is_some).collect();
            Completer::without_calls(
                self.shared.grammar.inner.clone(),
                ok,
                self.shared.vocab.clone(),
            )
        })
    }

    /// The byte steps of `states` ([`ByteSteps`], trying the bytes of `first` before the
    /// others): the distinct-calls search expands the same state sets for every token of a
    /// mask and again at the next steps of the output, so they are kept per automaton.
    pub(crate) fn byte_steps(&self, states: &[Stack], first: &[u8]) -> Arc<ByteSteps> {
        if let Some(s) = read(&self.shared.byte_steps).map.get(states) {
            return s.clone();
        }
        let g = self.g();
        let comp = self.completer();
        let mut seen = [false; 256];
        let mut steps = Vec::new();
        let mut out = Vec::new();
        for b in first.iter().map(|&b| b as usize).chain(0..256) {
            if !comp.usable(b as u8) || std::mem::replace(&mut seen[b], true) {
                continue;
            }
            advance(g, states, b as Sym, &mut out);
            if out.is_empty() {
                continue;
            }
            let h = comp.remaining_any(&out);
            if h < INF {
                steps.push((b as Sym, std::mem::take(&mut out), h));
            }
        }
        let bytes = states_bytes(states)
            + steps
                .iter()
                .map(|(_, after, _)| 16 + states_bytes(after))
                .sum::<usize>();
        let steps: Arc<ByteSteps> = steps.into();
        let mut cache = self
            .shared
            .byte_steps
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if cache.bytes + bytes <= BYTE_STEPS_BYTES {
            cache.bytes += bytes;
            cache.map.insert(states.to_vec(), steps.clone());
        }
        steps
    }

    /// Shortest completions in symbols (bytes), and the longest token's length in bytes.
    fn symbols(&self) -> &(Completer, u32) {
        self.shared.symbols.get_or_init(|| {
            let ok = self.shared.specials.iter().map(Option::is_some).collect();
            let v = &self.shared.vocab;
            let longest = (0..v.len() as TokenId)
                .map(|t| v.token_bytes(t).map_or(0, <[u8]>::len))
                .max()
                .unwrap_or(0);
            (
                Completer::with_specials(self.shared.grammar.inner.clone(), ok),
                longest as u32,
            )
        })
    }

    /// Per grammar node: whether a call may start in it (built on first use).
    fn call_nodes(&self) -> &[bool] {
        self.shared
            .call_nodes
            .get_or_init(|| distinct::nodes_with_calls(self.g()))
    }

    /// The tokens that cannot start a call: no special token, and no byte any call may start
    /// with (built on first use).
    fn quiet_tokens(&self) -> &TokenMask {
        self.shared.quiet.get_or_init(|| {
            let g = self.g();
            let mut starts = [0u64; 4];
            for (id, node) in g.nodes.iter().enumerate() {
                if let crate::grammar::Node::Capture(crate::grammar::Capture::Call(_), _) = node {
                    for (w, f) in starts.iter_mut().zip(&g.first[id]) {
                        *w |= f;
                    }
                }
            }
            let vocab = &self.shared.vocab;
            let mut quiet = TokenMask::new(vocab.len());
            for t in 0..vocab.len() as TokenId {
                if vocab.is_special(t) {
                    continue;
                }
                if let Some(bytes) = vocab.token_bytes(t) {
                    if !bytes.is_empty()
                        && bytes
                            .iter()
                            .all(|&b| starts[b as usize / 64] & (1u64 << (b % 64)) == 0)
                    {
                        quiet.set(t);
                    }
                }
            }
            quiet
        })
    }

    /// The tokens too short to hold a whole call: fewer bytes than the fewest symbols of any
    /// call (special tokens aside). Read from outside calls, such a token ends no call.
    fn shorter_than_calls(&self) -> &TokenMask {
        self.shared.shorter_than_calls.get_or_init(|| {
            let g = self.g();
            let sym = self.symbol_completer();
            let shortest = g
                .nodes
                .iter()
                .filter_map(|n| match n {
                    crate::grammar::Node::Capture(crate::grammar::Capture::Call(_), inner) => {
                        Some(sym.node_min(*inner))
                    }
                    _ => None,
                })
                .min()
                .unwrap_or(INF) as usize;
            let vocab = &self.shared.vocab;
            let mut short = TokenMask::new(vocab.len());
            for t in 0..vocab.len() as TokenId {
                if !vocab.is_special(t) && vocab.token_bytes(t).is_some_and(|b| b.len() < shortest)
                {
                    short.set(t);
                }
            }
            short
        })
    }

    /// The tokens of `frame` (a frame outside calls, with what it may push) by the fewest
    /// tokens after each before the frame is complete, starting no new call.
    fn no_call_costs(&self, frame: &Frame) -> Arc<Costs> {
        if let Some(c) = read(&self.shared.no_call_costs).get(frame) {
            return c.clone();
        }
        let mut list = Vec::new();
        self.walker().walk_costs(
            self.g(),
            self.no_calls_completer(),
            0,
            vec![vec![frame.clone()]],
            &mut list,
        );
        let costs = Arc::new(Costs::new(list, self.shared.vocab.len()));
        if let Ok(mut map) = self.shared.no_call_costs.write() {
            if map.len() < FULL_CACHE_ENTRIES {
                map.insert(frame.clone(), costs.clone());
            }
        }
        costs
    }

    /// See [`TokenAutomaton::symbols`].
    fn symbol_completer(&self) -> &Completer {
        &self.symbols().0
    }

    /// The longest token's length in bytes.
    fn longest_token(&self) -> u32 {
        self.symbols().1
    }

    /// Local tokens of `frame` by cost (see [`Costs`]).
    fn local_costs<'a>(&self, frame: &Frame, local: &'a Local) -> &'a Costs {
        local.costs.get_or_init(|| {
            let g = self.g();
            let trie = self.walker();
            let mut list = Vec::new();
            match g.as_lexeme(frame) {
                Some((lex, state, None)) => {
                    let dfa = &g.lexemes[lex as usize];
                    let dist = self.completer().lex_distances(lex);
                    trie.walk_lex_costs(0, dfa, state, dist, &mut list);
                }
                Some((lex, state, Some(closed))) => {
                    return self.gap_costs(frame, lex, state, &closed)
                }
                None => {
                    trie.walk_costs(g, self.completer(), 0, vec![vec![frame.clone()]], &mut list)
                }
            }
            Costs::new(list, self.shared.vocab.len())
        })
    }

    /// [`TokenAutomaton::local_costs`] of a frame in a gap (its whitespace so far in state
    /// `state` of gap lexeme `lex`; `closed`: the frame with its gap closed). A token either
    /// starts with a byte the gap takes (walked from here) or closes the gap at once, and is
    /// then one of `closed`'s own, with the same cost: those are read from `closed`'s costs,
    /// which every length of the gap shares, instead of walking the vocabulary again per length.
    fn gap_costs(
        &self,
        frame: &Frame,
        lex: crate::grammar::LexId,
        state: u32,
        closed: &Frame,
    ) -> Costs {
        let g = self.g();
        let dfa = &g.lexemes[lex as usize];
        let words = self.shared.vocab.len().div_ceil(64);
        let mut groups = Groups::new();
        if dfa.is_accepting(state) {
            let local = self.local(closed);
            for (c, set) in &self.local_costs(closed, &local).groups {
                groups.entry(*c).or_default().add_set(set, words);
            }
        }
        let mut gap_bytes = [0u64; 4];
        for b in 0..=255u8 {
            if dfa.next(state, b) != Dfa::DEAD {
                gap_bytes[usize::from(b / 64)] |= 1 << (b % 64);
            }
        }
        let mut list = Vec::new();
        self.walker()
            .walk_costs_into(g, self.completer(), frame, &gap_bytes, &mut list);
        for (t, c) in list {
            groups.entry(c).or_default().add(t, words);
        }
        Costs::from_groups(groups)
    }

    /// Appends every token `stack` accepts, with the fewest tokens a complete output needs
    /// after it.
    fn stack_costs(&self, stack: &[Frame], groups: &mut Groups, out: &mut Vec<(TokenId, u32)>) {
        let n = stack.len();
        let top = &stack[n - 1];
        let local = self.local(top);
        let comp = self.completer();
        let parent: Option<Stack> = (n > 1).then(|| {
            let mut p = stack[..n - 1].to_vec();
            GrammarInner::child_done(p.last_mut().unwrap());
            p
        });
        let below = parent.as_ref().map_or(0, |p| comp.remaining(p));
        let words = self.shared.vocab.len().div_ceil(64);
        for (c, set) in &self.local_costs(top, &local).groups {
            let c = c.saturating_add(below).min(INF);
            groups.entry(c).or_default().add_set(set, words);
        }
        let Some(parent) = parent else { return };
        if local.exits.first() == Some(&0) {
            self.stack_costs(&parent, groups, out);
        }
        self.walker()
            .walk_indexed_costs(self.g(), comp, &local.children, &parent, out);
    }

    /// Every token allowed in `states` (end-of-generation tokens excepted) by the fewest
    /// tokens a complete output needs after it; cached per state.
    fn state_costs(&self, states: &[Stack]) -> Arc<Costs> {
        if let Some(c) = read(&self.shared.budget_costs).map.get(states) {
            return c.clone();
        }
        let mut list = Vec::new();
        let mut groups = Groups::new();
        for s in states {
            self.stack_costs(s, &mut groups, &mut list);
        }
        let comp = self.completer();
        self.for_each_special(states, |t, next| list.push((t, comp.remaining_any(next))));
        let words = self.shared.vocab.len().div_ceil(64);
        for (t, c) in list {
            groups.entry(c).or_default().add(t, words);
        }
        let c = Arc::new(Costs::from_groups(groups));
        let mut cache = self
            .shared
            .budget_costs
            .write()
            .unwrap_or_else(|e| e.into_inner());
        let frames: usize = states.iter().map(|s| s.len()).sum();
        let bytes = c.bytes() + frames * std::mem::size_of::<Frame>() + states.len() * 24 + 64;
        if cache.bytes + bytes > COSTS_CACHE_BYTES {
            cache.map.clear();
            cache.bytes = 0;
        }
        if cache.map.insert(states.to_vec(), c.clone()).is_none() {
            cache.bytes += bytes;
        }
        c
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.shared.vocab
    }

    /// The grammar.
    pub fn grammar(&self) -> &Grammar {
        &self.shared.grammar
    }

    /// Approximate heap bytes held by this automaton's mask caches (bounded: see the module
    /// documentation).
    pub fn cache_bytes(&self) -> usize {
        let local = read(&self.shared.local).bytes;
        let full = {
            let entries = read(&self.shared.full);
            let mut bases = rustc_hash::FxHashSet::default();
            let diffs: usize = entries
                .values()
                .map(|e| {
                    if let Some(b) = e.base() {
                        bases.insert(Arc::as_ptr(b));
                    }
                    e.diff.len() * std::mem::size_of::<(u32, u64)>()
                })
                .sum();
            diffs + bases.len() * self.shared.vocab.len().div_ceil(8)
        };
        let costs = read(&self.shared.budget_costs).bytes;
        let steps = read(&self.shared.byte_steps).bytes;
        local + full + costs + steps
    }

    pub(crate) fn g(&self) -> &GrammarInner {
        &self.shared.grammar.inner
    }

    /// Per input symbol (byte `b`, then the grammar's special tokens): the one token that is
    /// exactly that symbol, where the vocabulary has one.
    pub(crate) fn symbol_tokens(&self) -> Vec<Option<TokenId>> {
        let vocab = &self.shared.vocab;
        let mut out: Vec<Option<TokenId>> = (0..=255u8)
            .map(|b| vocab.token_id(&[b]).filter(|&t| !vocab.is_special(t)))
            .collect();
        out.extend(self.shared.specials.iter().copied());
        out
    }

    /// What walks read: the trie, its text index, the caches.
    fn walker(&self) -> Walker<'_> {
        Walker {
            trie: &self.shared.trie,
            caches: &self.shared.caches,
            vocab: self.shared.vocab.id(),
            vocab_len: self.shared.vocab.len(),
        }
    }

    /// The walk of lexeme `lex` from `state` over the whole trie (shared through the caches by
    /// every grammar over the vocabulary; a gap's, through the vocabulary's own by its
    /// [`GapWalkKey`]).
    fn lexeme_local(&self, lex: crate::grammar::LexId, state: u32) -> Arc<Local> {
        let g = self.g();
        let dfa = &g.lexemes[lex as usize];
        if let Some(gap) = g.gap_key(lex) {
            let key = GapWalkKey {
                vocab: self.shared.vocab.id(),
                gap: gap.clone(),
                state,
            };
            let walk: Result<Arc<Local>, std::convert::Infallible> =
                self.shared.vocab.caches().get_or_build(key, || {
                    let l = self.walk_whole(dfa, state);
                    let bytes = l.allowed.bytes() + l.exits.len() * 4 + l.children.bytes() + 64;
                    Ok((l, bytes))
                });
            let Ok(walk) = walk;
            return walk;
        }
        let key = LexemeWalkKey {
            vocab: self.shared.vocab.id(),
            dfa: Arc::as_ptr(dfa) as usize,
            state,
        };
        let walk: Result<Arc<LexemeWalk>, std::convert::Infallible> =
            self.shared.caches.get_or_build(key, || {
                let l = self.walk_whole(dfa, state);
                let bytes = l.allowed.bytes() + l.exits.len() * 4 + l.children.bytes() + 64;
                Ok(((dfa.clone(), Arc::new(l)), bytes))
            });
        let Ok(walk) = walk;
        walk.1.clone()
    }

    /// [`TokenAutomaton::lexeme_local`]'s walk: lexeme automaton `dfa` from `state` over the
    /// whole trie.
    fn walk_whole(&self, dfa: &Dfa, state: u32) -> Local {
        match self.walker().walk_text(0, dfa, state) {
            // Free text: its exits' children read from the text index when asked for
            // (a text may end almost anywhere: sorting every exit's children by byte
            // would cost more than the walk). Node 0's are left out, as below.
            Some(w) => Local {
                allowed: w.tokens,
                children: match w.children {
                    ExitChildren::Text(t) => ExitChildren::Text(walks::TextChildren {
                        from_exit: false,
                        ..t
                    }),
                    sorted => sorted,
                },
                exits: w.exits,
                costs: OnceLock::new(),
            },
            None => {
                let mut tokens = WalkTokens::default();
                let mut exits = Vec::new();
                self.walker()
                    .walk_lex(0, dfa, state, &mut tokens, &mut exits);
                Local {
                    allowed: tokens.finish(self.shared.vocab.len()),
                    children: self.walker().exit_children(after_start(&exits)),
                    exits,
                    costs: OnceLock::new(),
                }
            }
        }
    }

    fn local(&self, frame: &Frame) -> Arc<Local> {
        let g = self.g();
        let after = match g.as_lexeme(frame) {
            Some((lex, state, None)) => return self.lexeme_local(lex, state),
            Some((lex, state, Some(after))) => Some((lex, state, after)),
            None => None,
        };
        if let Some(l) = read(&self.shared.local).map.get(frame) {
            return l.clone();
        }
        let trie = self.walker();
        let mut tokens = WalkTokens::default();
        let mut exits = Vec::new();
        let allowed = match after {
            Some((lex, state, after)) => {
                // A lexeme, then `after` (a gap's whitespace, then the frame): the shared
                // lexeme walk plus its continuations. The frame is complete before any byte
                // and, if `after` is, wherever the lexeme may end.
                let lw = self.lexeme_local(lex, state);
                if g.is_complete(frame) {
                    exits.push(0);
                }
                if g.is_complete(&after) {
                    exits.extend(lw.exits.iter().copied().filter(|&e| e != 0));
                }
                let cont = vec![after.clone()];
                let mut memo = FirstSteps::default();
                if lw.exits.first() == Some(&0) {
                    // The tokens that close the gap at once are `after`'s own: its walk,
                    // shared by every length of the gap.
                    let closed = self.local(&after);
                    tokens.add_set(&closed.allowed);
                    exits.extend(after_start(&closed.exits).iter().copied());
                }
                trie.walk_indexed_exits(
                    g,
                    &lw.children,
                    &cont,
                    &mut tokens,
                    Some(&mut exits),
                    &mut memo,
                );
                tokens.add_set(&lw.allowed);
                tokens.finish(self.shared.vocab.len())
            }
            None => {
                if g.is_complete(frame) {
                    exits.push(0);
                }
                let start = vec![vec![frame.clone()]];
                trie.walk_stacks(g, 0, start, &mut tokens, Some(&mut exits));
                tokens.finish(self.shared.vocab.len())
            }
        };
        let l = Arc::new(Local {
            allowed,
            children: trie.exit_children(after_start(&exits)),
            exits,
            costs: OnceLock::new(),
        });
        let bytes = l.allowed.bytes()
            + l.exits.len() * 4
            + l.children.bytes()
            + 2 * std::mem::size_of::<Frame>()
            + 64;
        let mut cache = self.shared.local.write().unwrap_or_else(|e| e.into_inner());
        if cache.bytes + bytes > LOCAL_CACHE_BYTES {
            cache.map.clear();
            cache.bytes = 0;
        }
        if cache.map.insert(frame.clone(), l.clone()).is_none() {
            cache.bytes += bytes;
        }
        l
    }

    /// Adds to `mask` every token `stack` accepts.
    fn fill_stack(&self, stack: &[Frame], mask: &mut TokenMask) {
        let n = stack.len();
        let local = self.local(&stack[n - 1]);
        local.allowed.or_into(mask);
        if n == 1 || local.exits.is_empty() {
            return;
        }
        let mut parent: Stack = stack[..n - 1].to_vec();
        GrammarInner::child_done(parent.last_mut().unwrap());
        let mut tokens = WalkTokens::default();
        // Node 0 (complete before any byte) comes first where it is an exit.
        if local.exits.first() == Some(&0) {
            self.fill_stack(&parent, mask);
        }
        self.walker().walk_indexed_exits(
            self.g(),
            &local.children,
            &parent,
            &mut tokens,
            None,
            &mut FirstSteps::default(),
        );
        tokens.or_into(mask);
    }
}

/// `exits` without node 0 (before any byte), which comes first where it is one.
fn after_start(exits: &[u32]) -> &[u32] {
    exits.strip_prefix(&[0]).unwrap_or(exits)
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}
