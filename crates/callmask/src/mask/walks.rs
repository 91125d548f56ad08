//! Walks of grammar states over the token trie: which tokens a matcher state takes, computed
//! once per state by one pass over the trie.
//!
//! A walk carries the grammar's stacks down the trie, byte by byte, and skips a whole subtree
//! where no stack survives. One stack inside a lexeme (a string, a number, free text) runs the
//! lexeme's automaton alone, through the trie's [`ByteRecognizer`] walk, and hands the nodes
//! where the lexeme may end ("exits") to what follows it. Those lexeme walks below a first-byte
//! node do not depend on the grammar: they go into the [`Caches`], keyed by vocabulary,
//! automaton and state, and every grammar over the vocabulary shares them; free-text walks read
//! the trie's text index (`crate::vocab::text_index`) instead of visiting the trie.
//!
//! Trade-offs: a [`Walker`] is a few references, made per walk; the first steps out of the exits
//! are memoized per stack within one walk ([`FirstSteps`]), not across walks.

use super::bitset::{TokenSet, WalkTokens};
use crate::automaton::complete::{Completer, INF};
use crate::automaton::{advance_merging, advance_reusing, Frame, Stack, Sym};
use crate::cache::{CacheKey, Caches};
use crate::grammar::dfa::Dfa;
use crate::grammar::GrammarInner;
use crate::vocab::trie::{TokenTrie, NO_TOKEN};
use crate::vocab::TokenId;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// Levels of a walk with at least this many stacks try their children's bytes against the
/// stacks' byte sets ([`LevelBytes`]) rather than stack by stack.
const MANY_STACKS: usize = 8;

/// The bytes a level of a walk may take: the union of its stacks' [`GrammarInner::first_bytes`],
/// and the stacks without one, asked per byte.
#[derive(Clone)]
struct LevelBytes {
    set: [u64; 4],
    others: Vec<u32>,
}

impl LevelBytes {
    fn of(g: &GrammarInner, level: &[Stack]) -> LevelBytes {
        let mut set = [0u64; 4];
        let mut others = Vec::new();
        for (k, s) in level.iter().enumerate() {
            match g.first_bytes(s) {
                Some(f) => {
                    for (w, x) in set.iter_mut().zip(f) {
                        *w |= x;
                    }
                }
                None => others.push(k as u32),
            }
        }
        LevelBytes { set, others }
    }

    /// False when no stack of `level` (the level this was read from) can take `byte`.
    fn may_take(&self, g: &GrammarInner, level: &[Stack], byte: Sym) -> bool {
        (byte < 256 && self.set[(byte / 64) as usize] >> (byte % 64) & 1 == 1)
            || self
                .others
                .iter()
                .any(|&k| g.may_take(&level[k as usize], byte))
    }
}

/// Per stack, the stacks after each byte (`None` not yet known, `Some(None)` the byte is not
/// taken): the first steps out of the nodes where a lexeme ends, shared by a walk's calls.
pub(super) type FirstSteps = FxHashMap<Stack, Vec<Option<Option<Vec<Stack>>>>>;

/// A cached first-byte walk, holding its automaton so that the address in its key stays unique.
type SharedSubWalk = (Arc<Dfa>, Arc<SubWalk>);

/// The cache key of a lexeme automaton's walk below one first-byte node of a vocabulary's
/// trie, from one state (the automaton by address, held by the entry).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SubWalkKey {
    vocab: u64,
    dfa: usize,
    state: u32,
    node: u32,
}

impl CacheKey for SubWalkKey {
    type Value = SharedSubWalk;
}

/// A lexeme walk below one node: the tokens it takes and the nodes where it may end with more
/// bytes to follow (as [`TokenTrie::walk_lex`] gives them).
#[derive(Debug)]
pub(super) struct SubWalk {
    pub(super) tokens: TokenSet,
    pub(super) exits: Vec<u32>,
    /// The exits' children by byte, so that a walk out of the exits visits only the children
    /// whose byte what follows the lexeme takes.
    pub(super) children: ExitChildren,
}

/// A node range `[lo, hi)`: a subtree.
pub(super) type Range = (u32, u32);

/// What a text walk needs to list its exits' children by byte: its subtree, the subtrees cut
/// out below completed markers, and whether the subtree's root is an exit.
#[derive(Debug)]
pub(super) struct TextChildren {
    pub(super) from: u32,
    pub(super) end: u32,
    pub(super) cuts: Vec<Range>,
    pub(super) from_exit: bool,
    /// The most characters an exit may have begun.
    pub(super) cap: u16,
}

impl TextChildren {
    /// Size in 4-byte words.
    pub(super) fn len(&self) -> usize {
        4 + 2 * self.cuts.len()
    }
}

/// The children of a lexeme walk's exits, by byte.
#[derive(Debug)]
pub(super) enum ExitChildren {
    /// Those of byte `b` are `children[starts[b]..starts[b + 1]]`.
    Sorted {
        children: Vec<u32>,
        starts: Vec<u32>,
    },
    /// A free-text walk's, read from the vocabulary's text index for the bytes asked for
    /// ([`TokenTrie::text_children`]).
    Text(TextChildren),
}

impl ExitChildren {
    /// False when no child has byte `byte` (a text walk's are read when asked for: true).
    pub(super) fn may_have(&self, byte: u8) -> bool {
        match self {
            ExitChildren::Sorted { starts, .. } => {
                starts[byte as usize] != starts[byte as usize + 1]
            }
            ExitChildren::Text(_) => true,
        }
    }

    /// Estimated heap bytes.
    pub(super) fn bytes(&self) -> usize {
        match self {
            ExitChildren::Sorted { children, starts } => (children.len() + starts.len()) * 4,
            ExitChildren::Text(t) => t.len() * 4,
        }
    }
}

/// What a walk reads: the trie (with its text index), and where shared lexeme walks are kept.
pub(super) struct Walker<'a> {
    pub(super) trie: &'a TokenTrie,
    pub(super) caches: &'a Caches,
    /// The vocabulary's [`crate::Vocab::id`], part of the cache keys.
    pub(super) vocab: u64,
    /// Tokens in the vocabulary.
    pub(super) vocab_len: usize,
}

impl Walker<'_> {
    /// True when some child of `node` leads by a byte that `stack` can take (`memo` caches
    /// the answer per byte for this stack: 0 unknown, 1 yes, 2 no). Lets walks skip, without
    /// allocating, the many exit nodes where what follows a lexeme cannot go on.
    pub(super) fn any_child_taken(
        &self,
        g: &GrammarInner,
        node: usize,
        stack: &Stack,
        memo: &mut [u8; 256],
    ) -> bool {
        let end = self.trie.nodes[node].next as usize;
        let mut i = node + 1;
        let mut one = Vec::new();
        while i < end {
            let b = self.trie.nodes[i].byte as usize;
            if memo[b] == 0 {
                advance_merging(g, std::slice::from_ref(stack), b as Sym, &mut one);
                memo[b] = if one.is_empty() { 2 } else { 1 };
            }
            if memo[b] == 1 {
                return true;
            }
            i = self.trie.nodes[i].next as usize;
        }
        false
    }

    /// Walks a lexeme automaton from `state` over the subtree below `from` (its own tokens
    /// excluded). Records as exits the nodes (`from` included) where the lexeme is complete and
    /// longer tokens go on.
    pub(super) fn walk_lex(
        &self,
        from: usize,
        dfa: &crate::grammar::dfa::Dfa,
        state: u32,
        out: &mut WalkTokens,
        exits: &mut Vec<u32>,
    ) {
        if let Some(w) = self.walk_text(from, dfa, state) {
            out.add_set(&w.tokens);
            exits.extend_from_slice(&w.exits);
            return;
        }
        self.trie
            .walk_recognizer(from, dfa, state, &mut out.ids, exits);
    }

    /// Walks stacks over the subtree below `from` (its own tokens excluded). With `exits`, the
    /// stacks are a local walk whose bottom frame may complete: nodes where it can are recorded.
    pub(super) fn walk_stacks(
        &self,
        g: &GrammarInner,
        from: usize,
        start: Vec<Stack>,
        out: &mut WalkTokens,
        exits: Option<&mut Vec<u32>>,
    ) {
        self.walk_stacks_with(g, from, &start, out, exits, &mut FirstSteps::default());
    }

    /// [`Walker::walk_stacks`] with the first steps out of lexeme ends kept in `memo`.
    fn walk_stacks_with(
        &self,
        g: &GrammarInner,
        from: usize,
        start: &[Stack],
        out: &mut WalkTokens,
        mut exits: Option<&mut Vec<u32>>,
        memo: &mut FirstSteps,
    ) {
        let base = self.trie.nodes[from].depth as usize;
        // The stacks after each level's node, by depth below `from` (level 0 is `start`,
        // borrowed: a union's stacks reached by a memoized first step are not copied).
        let mut levels: Vec<Vec<Stack>> = vec![Vec::new()];
        // Per level of many stacks, the bytes they may take, read once when its first child
        // is tried (`None`: not read yet): a union of N objects tries each child byte against
        // one set, not N stacks.
        let mut level_bytes: Vec<Option<LevelBytes>> = vec![None];
        // The stacks after node `i`'s byte; on success they become level `d` and that level's
        // old buffer is reused here (most nodes take no stack: no allocation for them).
        let mut next = Vec::new();
        // The buffers of stacks stepped past, for the next steps' stacks.
        let mut spare = Vec::new();
        let mut i = from + 1;
        let end = self.trie.nodes[from].next as usize;
        while i < end {
            let d = self.trie.nodes[i].depth as usize - base;
            let byte = self.trie.nodes[i].byte as Sym;
            let level: &[Stack] = if d == 1 { start } else { &levels[d - 1] };
            let may = if level.len() >= MANY_STACKS {
                level_bytes[d - 1]
                    .get_or_insert_with(|| LevelBytes::of(g, level))
                    .may_take(g, level, byte)
            } else {
                level.iter().any(|s| g.may_take(s, byte))
            };
            if !may {
                i = self.trie.nodes[i].next as usize;
                continue;
            }
            advance_reusing(g, level, byte, &mut next, &mut spare);
            if next.is_empty() {
                i = self.trie.nodes[i].next as usize;
                continue;
            }
            self.trie.push_tokens(i, &mut out.ids);
            if let Some(ex) = exits.as_deref_mut() {
                if self.trie.has_children(i)
                    && next.iter().any(|s| s.len() == 1 && g.is_complete(&s[0]))
                {
                    ex.push(i as u32);
                }
            }
            // Fast path: one stack inside a lexeme (a string, number, free object key...) runs
            // the lexeme's automaton alone over the subtree, and hands the nodes where the
            // lexeme may end back to what follows it.
            if let [stack] = next.as_slice() {
                if let Some((lex, state, after)) = g.as_lexeme(stack.last().unwrap()) {
                    if after.is_some() || stack.len() > 1 {
                        self.lexeme_then(
                            g,
                            i,
                            (lex, state),
                            stack,
                            after,
                            out,
                            exits.as_deref_mut(),
                            memo,
                        );
                        i = self.trie.nodes[i].next as usize;
                        continue;
                    }
                }
            }
            if levels.len() <= d {
                levels.resize(d + 1, Vec::new());
                level_bytes.resize(d + 1, None);
            }
            std::mem::swap(&mut levels[d], &mut next);
            level_bytes[d] = None;
            i += 1;
        }
    }

    /// The fast path of [`Walker::walk_stacks`] at node `i`, where `stack` is inside a
    /// lexeme (`lex` in `state`, `after` what replaces it once complete): the lexeme's
    /// automaton alone over the subtree (below a first-byte node, a walk shared per vocabulary:
    /// the start of every text-first grammar walks the whole trie so), then what follows the
    /// lexeme from the nodes where it may end.
    #[allow(clippy::too_many_arguments)]
    fn lexeme_then(
        &self,
        g: &GrammarInner,
        i: usize,
        (lex, state): (crate::grammar::LexId, u32),
        stack: &Stack,
        after: Option<Frame>,
        out: &mut WalkTokens,
        mut exits: Option<&mut Vec<u32>>,
        memo: &mut FirstSteps,
    ) {
        let dfa = &g.lexemes[lex as usize];
        let shared;
        let mut own = Vec::new();
        let lex_exits: &[u32] = if self.trie.nodes[i].depth == 1 {
            shared = Some(self.sub_walk(i, dfa, state));
            let w = shared.as_ref().unwrap();
            out.add_set(&w.tokens);
            &w.exits
        } else {
            shared = None;
            self.walk_lex(i, dfa, state, out, &mut own);
            &own
        };
        if lex_exits.is_empty() {
            return;
        }
        let cont = continuation(stack, after);
        if let Some(ex) = exits.as_deref_mut() {
            if cont.len() == 1 && g.is_complete(&cont[0]) {
                ex.extend(
                    lex_exits
                        .iter()
                        .copied()
                        .filter(|&e| self.trie.has_children(e as usize)),
                );
            }
        }
        match &shared {
            Some(w) => self.walk_indexed_exits(g, &w.children, &cont, out, exits, memo),
            None => self.walk_exits(g, lex_exits, &cont, out, exits, memo),
        }
    }

    /// The exits' children of byte `byte` (`kids` holds them where they are read from the
    /// text index).
    fn children_by<'k>(
        &self,
        children: &'k ExitChildren,
        byte: u8,
        kids: &'k mut Vec<u32>,
    ) -> &'k [u32] {
        match children {
            ExitChildren::Sorted { children, starts } => {
                &children[starts[byte as usize] as usize..starts[byte as usize + 1] as usize]
            }
            ExitChildren::Text(t) => {
                kids.clear();
                self.text_children(t, byte, kids);
                kids
            }
        }
    }

    /// [`Walker::walk_exits`] out of exits indexed by child byte ([`Walker::exit_children`] or
    /// a shared walk's): a byte `stack` cannot take skips all its children at once.
    pub(super) fn walk_indexed_exits(
        &self,
        g: &GrammarInner,
        children: &ExitChildren,
        stack: &Stack,
        out: &mut WalkTokens,
        mut exits: Option<&mut Vec<u32>>,
        memo: &mut FirstSteps,
    ) {
        let mut first = memo.remove(stack).unwrap_or_else(|| vec![None; 256]);
        let takes = g.first_bytes(stack).unwrap_or([u64::MAX; 4]);
        let mut kids: Vec<u32> = Vec::new();
        for (b, step) in first.iter_mut().enumerate() {
            if takes[b / 64] >> (b % 64) & 1 == 0 || !children.may_have(b as u8) {
                continue;
            }
            let next = step.get_or_insert_with(|| first_step(g, stack, b as Sym));
            let Some(next) = next else { continue };
            for &c in self.children_by(children, b as u8, &mut kids) {
                self.walk_node(g, c as usize, next, out, exits.as_deref_mut(), memo);
            }
        }
        memo.insert(stack.clone(), first);
    }

    /// From each node of `from` (nodes where a lexeme may end), walks `stack` into the node's
    /// children: what `walk_stacks(e, vec![stack])` does for each `e`, but each child byte's
    /// first step is taken once for all the nodes, not once per child, and children whose byte
    /// `stack` cannot take cost a table lookup. The steps are kept in `memo` for the next call
    /// with the same stack (a text-first grammar's start makes one per first byte).
    pub(super) fn walk_exits(
        &self,
        g: &GrammarInner,
        from: &[u32],
        stack: &Stack,
        out: &mut WalkTokens,
        mut exits: Option<&mut Vec<u32>>,
        memo: &mut FirstSteps,
    ) {
        let mut first = memo.remove(stack).unwrap_or_else(|| vec![None; 256]);
        let takes = g.first_bytes(stack).unwrap_or([u64::MAX; 4]);
        for &e in from {
            let end = self.trie.nodes[e as usize].next as usize;
            let mut c = e as usize + 1;
            while c < end {
                let b = self.trie.nodes[c].byte;
                if takes[usize::from(b / 64)] >> (b % 64) & 1 == 0 {
                    c = self.trie.nodes[c].next as usize;
                    continue;
                }
                let next = first[b as usize].get_or_insert_with(|| first_step(g, stack, b as Sym));
                if let Some(next) = next {
                    self.walk_node(g, c, next, out, exits.as_deref_mut(), memo);
                }
                c = self.trie.nodes[c].next as usize;
            }
        }
        memo.insert(stack.clone(), first);
    }

    /// [`Walker::walk_stacks`]' step at node `i`, reached with `next` (not empty), then the
    /// subtree below it.
    fn walk_node(
        &self,
        g: &GrammarInner,
        i: usize,
        next: &[Stack],
        out: &mut WalkTokens,
        mut exits: Option<&mut Vec<u32>>,
        memo: &mut FirstSteps,
    ) {
        self.trie.push_tokens(i, &mut out.ids);
        if let Some(ex) = exits.as_deref_mut() {
            if self.trie.has_children(i)
                && next.iter().any(|s| s.len() == 1 && g.is_complete(&s[0]))
            {
                ex.push(i as u32);
            }
        }
        if let [stack] = next {
            if let Some((lex, state, after)) = g.as_lexeme(stack.last().unwrap()) {
                if after.is_some() || stack.len() > 1 {
                    self.lexeme_then(g, i, (lex, state), stack, after, out, exits, memo);
                    return;
                }
            }
        }
        if self.trie.has_children(i) {
            self.walk_stacks_with(g, i, next, out, exits, memo);
        }
    }

    /// The lexeme walk below first-byte node `i` from `state` ([`Walker::walk_lex`]), kept in
    /// the caches for every grammar over the vocabulary (the automaton's address is in the key,
    /// the entry keeps the automaton alive).
    fn sub_walk(&self, i: usize, dfa: &Arc<Dfa>, state: u32) -> Arc<SubWalk> {
        let key = SubWalkKey {
            vocab: self.vocab,
            dfa: Arc::as_ptr(dfa) as usize,
            state,
            node: i as u32,
        };
        let entry: Result<Arc<SharedSubWalk>, std::convert::Infallible> =
            self.caches.get_or_build(key, || {
                let w = self
                    .walk_text(i, dfa, state)
                    .unwrap_or_else(|| self.sub_walk_general(i, dfa, state));
                let bytes = w.tokens.bytes() + w.exits.len() * 4 + w.children.bytes() + 128;
                Ok(((dfa.clone(), Arc::new(w)), bytes))
            });
        let Ok(entry) = entry;
        entry.1.clone()
    }

    /// [`Walker::sub_walk`]'s walk, node by node, for any automaton.
    pub(super) fn sub_walk_general(&self, i: usize, dfa: &Dfa, state: u32) -> SubWalk {
        let mut ids = Vec::new();
        let mut exits = Vec::new();
        self.trie
            .walk_recognizer(i, dfa, state, &mut ids, &mut exits);
        let children = self.exit_children(&exits);
        SubWalk {
            tokens: TokenSet::new(ids, self.vocab_len),
            exits,
            children,
        }
    }

    /// The children of `exits` (trie nodes) by byte, for [`Walker::walk_indexed_exits`].
    pub(super) fn exit_children(&self, exits: &[u32]) -> ExitChildren {
        // Counting sort: count, then place.
        let each_child = |f: &mut dyn FnMut(u8, u32)| {
            for &e in exits {
                let end = self.trie.nodes[e as usize].next as usize;
                let mut c = e as usize + 1;
                while c < end {
                    f(self.trie.nodes[c].byte, c as u32);
                    c = self.trie.nodes[c].next as usize;
                }
            }
        };
        let mut starts = vec![0u32; 257];
        each_child(&mut |b, _| starts[b as usize + 1] += 1);
        for b in 0..256 {
            starts[b + 1] += starts[b];
        }
        let mut children = vec![0u32; starts[256] as usize];
        let mut at: Vec<u32> = starts[..256].to_vec();
        each_child(&mut |b, c| {
            children[at[b as usize] as usize] = c;
            at[b as usize] += 1;
        });
        ExitChildren::Sorted { children, starts }
    }

    /// Like [`Walker::walk_lex`] without exits: each token below `from` that the automaton
    /// takes, with its distance to an accepting state (`dist`) after it.
    pub(super) fn walk_lex_costs(
        &self,
        from: usize,
        dfa: &Dfa,
        state: u32,
        dist: &[u32],
        out: &mut Vec<(TokenId, u32)>,
    ) {
        self.trie.walk_recognizer_tokens(from, dfa, state, |t, s| {
            out.push((t, dist.get(s as usize).copied().unwrap_or(INF).min(INF)));
        });
    }

    /// Every token below `from` that `start` (full or local stacks) takes, with the fewest
    /// tokens before an end after it ([`Completer::remaining_any`]). Stacks are never popped
    /// below their bottom frame, as in [`Walker::walk_stacks`].
    pub(super) fn walk_costs(
        &self,
        g: &GrammarInner,
        comp: &Completer,
        from: usize,
        start: Vec<Stack>,
        out: &mut Vec<(TokenId, u32)>,
    ) {
        let base = self.trie.nodes[from].depth as usize;
        let mut levels: Vec<Vec<Stack>> = vec![start];
        // Per level of many stacks, the bytes they may take, read once when its first child
        // is tried (`None`: not read yet): a union of N objects tries each child byte against
        // one set, not N stacks.
        let mut level_bytes: Vec<Option<LevelBytes>> = vec![None];
        // Reused as in `walk_stacks_with`.
        let mut next = Vec::new();
        let mut i = from + 1;
        let end = self.trie.nodes[from].next as usize;
        let mut toks = Vec::new();
        let mut spare = Vec::new();
        while i < end {
            let d = self.trie.nodes[i].depth as usize - base;
            let byte = self.trie.nodes[i].byte as Sym;
            advance_reusing(g, &levels[d - 1], byte, &mut next, &mut spare);
            if next.is_empty() || self.cost_node(g, comp, i, &next, &mut toks, out) {
                i = self.trie.nodes[i].next as usize;
                continue;
            }
            if levels.len() <= d {
                levels.resize(d + 1, Vec::new());
                level_bytes.resize(d + 1, None);
            }
            std::mem::swap(&mut levels[d], &mut next);
            level_bytes[d] = None;
            i += 1;
        }
    }

    /// [`Walker::walk_costs`] of `frame` from the trie's root, only into the tokens whose
    /// first byte is in `first` (a bitset by byte).
    pub(super) fn walk_costs_into(
        &self,
        g: &GrammarInner,
        comp: &Completer,
        frame: &Frame,
        first: &[u64; 4],
        out: &mut Vec<(TokenId, u32)>,
    ) {
        let start = [vec![frame.clone()]];
        let (mut next, mut spare, mut toks) = (Vec::new(), Vec::new(), Vec::new());
        let end = self.trie.nodes[0].next as usize;
        let mut c = 1;
        while c < end {
            let b = self.trie.nodes[c].byte;
            if first[usize::from(b / 64)] >> (b % 64) & 1 == 1 {
                advance_reusing(g, &start, Sym::from(b), &mut next, &mut spare);
                if !next.is_empty() && !self.cost_node(g, comp, c, &next, &mut toks, out) {
                    self.walk_costs(g, comp, c, std::mem::take(&mut next), out);
                }
            }
            c = self.trie.nodes[c].next as usize;
        }
    }

    /// Node `i` of a costs walk ([`Walker::walk_costs`]), reached with the stacks `next`: the
    /// cost of its token; and where one stack is inside a lexeme, the whole subtree below `i`
    /// by the lexeme's automaton, with what follows the lexeme walked from the nodes where it
    /// may end (true: the caller skips the subtree).
    fn cost_node(
        &self,
        g: &GrammarInner,
        comp: &Completer,
        i: usize,
        next: &[Stack],
        toks: &mut Vec<TokenId>,
        out: &mut Vec<(TokenId, u32)>,
    ) -> bool {
        if self.trie.nodes[i].tok != NO_TOKEN {
            let c = comp.remaining_any(next);
            toks.clear();
            self.trie.push_tokens(i, toks);
            out.extend(toks.iter().map(|&t| (t, c)));
        }
        // Fast path: one stack inside a lexeme runs the lexeme's automaton alone (its cost is
        // the lexeme's distance to accepting plus what the rest of the stack needs).
        let [stack] = next else {
            return false;
        };
        let Some((lex, state, after)) = g.as_lexeme(stack.last().unwrap()) else {
            return false;
        };
        if after.is_none() && stack.len() == 1 {
            return false;
        }
        let cont = continuation(stack, after);
        let below = comp.remaining(&cont);
        let dfa = &g.lexemes[lex as usize];
        let start_len = out.len();
        self.walk_lex_costs(i, dfa, state, comp.lex_distances(lex), out);
        for o in &mut out[start_len..] {
            o.1 = (o.1 + below).min(INF);
        }
        let mut lex_exits = Vec::new();
        self.walk_lex(i, dfa, state, &mut WalkTokens::default(), &mut lex_exits);
        let mut memo = [0u8; 256];
        for &e in &lex_exits {
            if self.any_child_taken(g, e as usize, &cont, &mut memo) {
                self.walk_costs(g, comp, e as usize, vec![cont.clone()], out);
            }
        }
        true
    }

    /// [`Walker::walk_costs`] out of a frame, from all its exits at once: `stack` (the frame's
    /// parent, the frame complete) walked into the exits' `children`, by byte, only the bytes
    /// it takes (one step each, where a walk per exit would try each exit's children).
    pub(super) fn walk_indexed_costs(
        &self,
        g: &GrammarInner,
        comp: &Completer,
        children: &ExitChildren,
        stack: &Stack,
        out: &mut Vec<(TokenId, u32)>,
    ) {
        let mut kids: Vec<u32> = Vec::new();
        let mut next = Vec::new();
        let mut toks = Vec::new();
        for b in 0..=255u8 {
            if !children.may_have(b) {
                continue;
            }
            advance_merging(g, std::slice::from_ref(stack), Sym::from(b), &mut next);
            if next.is_empty() {
                continue;
            }
            for &c in self.children_by(children, b, &mut kids) {
                if !self.cost_node(g, comp, c as usize, &next, &mut toks, out) {
                    self.walk_costs(g, comp, c as usize, next.clone(), out);
                }
            }
        }
    }
}

/// The stacks `stack` becomes after `sym`, `None` for none (tried with
/// [`GrammarInner::may_take`] first: most bytes out of a lexeme's exits are refused).
fn first_step(g: &GrammarInner, stack: &Stack, sym: Sym) -> Option<Vec<Stack>> {
    if !g.may_take(stack, sym) {
        return None;
    }
    let mut n = Vec::new();
    advance_merging(g, std::slice::from_ref(stack), sym, &mut n);
    (!n.is_empty()).then_some(n)
}

/// The stack once the lexeme on top of `stack` is complete: the top replaced by `after`, or
/// popped (its parent told that its child is done).
pub(super) fn continuation(stack: &[Frame], after: Option<Frame>) -> Stack {
    match after {
        Some(f) => {
            let mut s = stack.to_vec();
            *s.last_mut().unwrap() = f;
            s
        }
        None => {
            let mut p = stack[..stack.len() - 1].to_vec();
            GrammarInner::child_done(p.last_mut().unwrap());
            p
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::automaton::advance;
    use crate::mask::{TokenAutomaton, TokenMask};
    use crate::vocab::Vocab;

    /// A xorshift generator of indices below its argument, from `seed` (tests only).
    pub(in crate::mask) fn index_rng(mut seed: u64) -> impl FnMut(usize) -> usize {
        move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        }
    }

    /// A vocabulary of `pieces` and the ASCII bytes, none special but `special` (an index
    /// into `pieces`).
    fn pieces_vocab(pieces: &[&str], special: Option<usize>) -> Arc<Vocab> {
        let tokens: Vec<Vec<u8>> = pieces
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .chain((0..128u8).map(|b| vec![b]))
            .collect();
        let mut flags = vec![false; tokens.len()];
        if let Some(i) = special {
            flags[i] = true;
        }
        Arc::new(Vocab::from_parts(tokens, flags, vec![]).unwrap())
    }

    /// Pieces of JSON calls for test vocabularies (`extra` first).
    fn call_pieces(extra: &[&'static str]) -> Vec<&'static str> {
        let common = [
            "{\"",
            "\"name\"",
            "name",
            "\": \"",
            "\":",
            "\"f",
            "f2",
            "2\"",
            "\", \"",
            "arguments",
            "\": {",
            "}}",
            "{}",
            "\"x\": ",
            "true",
            "12",
            " {",
            ": ",
            ", ",
        ];
        extra.iter().chain(&common).copied().collect()
    }

    /// `walks` random token walks of at most `steps` tokens, the same tokens through matchers
    /// of `a` and `b` (every other walk under a token budget of `budget`): their masks are
    /// equal at every step.
    fn same_masks_along_walks(
        (a, b): (&TokenAutomaton, &TokenAutomaton),
        (walks, steps, budget): (usize, usize, usize),
        rand: &mut impl FnMut(usize) -> usize,
        what: &str,
    ) {
        let n = a.vocab().len();
        for walk in 0..walks {
            let (mut ma, mut mb) = (a.matcher(), b.matcher());
            if walk % 2 == 1 {
                ma.set_token_budget(Some(budget)).unwrap();
                mb.set_token_budget(Some(budget)).unwrap();
            }
            let (mut ka, mut kb) = (TokenMask::new(n), TokenMask::new(n));
            for step in 0..steps {
                ma.fill_mask(&mut ka);
                mb.fill_mask(&mut kb);
                assert_eq!(ka.words, kb.words, "{what} walk {walk} step {step}");
                let allowed: Vec<u32> = kb.iter().collect();
                if allowed.is_empty() || mb.is_finished() {
                    break;
                }
                let t = allowed[rand(allowed.len())];
                ma.accept(t).unwrap();
                mb.accept(t).unwrap();
            }
        }
    }
    use crate::dialect::{Dialect, DialectOptions};
    use crate::grammar::{CompileOptions, Grammar, Whitespace};
    use crate::tools::Tools;

    /// Every byte `stack` takes is in its `first_bytes`, where it has them.
    fn check_first_bytes(g: &GrammarInner, stack: &Stack, text: &str, at: usize) {
        let Some(set) = g.first_bytes(stack) else {
            return;
        };
        for b in 0..=255u8 {
            let mut out = Vec::new();
            advance(g, std::slice::from_ref(stack), b as Sym, &mut out);
            let listed = set[usize::from(b / 64)] >> (b % 64) & 1 == 1;
            assert!(
                out.is_empty() || listed,
                "byte {:?} taken but not in first_bytes, at {at} of {text:?}: {stack:?}",
                b as char
            );
        }
    }

    /// `first_bytes` is a superset of the bytes each stack takes, at every byte of outputs
    /// through objects (keys, gaps, values, extra keys, a union of objects) under each
    /// whitespace policy. (A byte missing from it would drop tokens from masks.)
    #[test]
    fn first_bytes_holds_every_byte_a_stack_takes() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "object", "properties": {"c": {"type": "string"}}},
                "list": {"type": "array", "items": {"anyOf": [
                    {"type": "object", "properties": {"k": {"const": 1}, "v": {"type": "string"}},
                     "required": ["k", "v"], "additionalProperties": false},
                    {"type": "object", "properties": {"k": {"const": 2}, "v": {"type": "number"}},
                     "required": ["k", "v"], "additionalProperties": false}
                ]}}
            },
            "required": ["a"]
        });
        let texts = [
            r#"{"a": 1, "b": {"c": "x", "extra": [1, {}]}, "list": [{"k": 1, "v": "s"}, {"v": 2.5, "k": 2}]}"#,
            "{\n  \"list\": [\n    {\n      \"k\": 2,\n      \"v\": 3\n    }\n  ],\n  \"a\": -4\n}",
            r#"{"a":1,"zz":null}"#,
        ];
        for ws in [Whitespace::Any, Whitespace::Tidy { indent: 2 }] {
            let opts = CompileOptions::default().whitespace(ws);
            let g = Grammar::from_json_schema(&schema, &opts).unwrap();
            for text in texts {
                walk_checking(&g.inner, text);
            }
        }
        let tools = Tools::from_json_str(
            r#"[{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                "properties": {"x": {"type": "integer"}}, "required": ["x"]}}},
               {"type": "function", "function": {"name": "g", "parameters": {"type": "object",
                "properties": {"x": {"type": "string"}}, "required": ["x"]}}}]"#,
        )
        .unwrap();
        let hermes = Dialect::by_name("hermes").unwrap();
        let g = hermes.compile(&tools, &DialectOptions::default()).unwrap();
        walk_checking(
            &g.inner,
            "Hi <tool_call>\n{\"name\": \"g\", \"arguments\": {\"x\": \"y\"}}\n</tool_call>",
        );
        let any_order = DialectOptions::default().name_first(false);
        let g = hermes.compile(&tools, &any_order).unwrap();
        walk_checking(
            &g.inner,
            "Hi <tool_call>\n{\"arguments\": {\"x\": \"y\"}, \"name\": \"g\"}\n</tool_call>",
        );
    }

    /// A union of objects of one shape matched as one frame until a value starts (merged)
    /// takes the same bytes, may end at the same places and has the same fewest symbols to an
    /// end as the same union matched one stack per alternative, along outputs that write keys
    /// in either order, empty objects, and random byte walks; and over a vocabulary, the same
    /// token masks with and without a token budget.
    #[test]
    fn merged_unions_match_like_their_alternatives() {
        use crate::automaton::complete::Completer;
        use serde_json::json;
        let call = |name: &str, args: serde_json::Value| {
            json!({"type": "object", "properties": {"name": {"const": name}, "arguments": args},
                   "required": ["name", "arguments"], "additionalProperties": false})
        };
        let calls = json!({"type": "array", "minItems": 1, "maxItems": 3, "items": {"anyOf": [
            call("f0", json!({"type": "object", "properties": {"x": {"type": "integer"}},
                              "required": ["x"], "additionalProperties": false})),
            call("f1", json!({"type": "object", "properties": {"x": {"type": "string", "maxLength": 3}},
                              "additionalProperties": false})),
            call("f22", json!({"type": "object", "properties": {"y": {"enum": [true, 5]}},
                               "required": ["y"], "additionalProperties": false})),
            call("f3", json!({"type": "object", "properties": {}, "additionalProperties": false})),
            call("f", json!({"type": "object", "properties": {"z": {"type": "array",
                             "items": {"type": "integer"}, "maxItems": 2}},
                             "additionalProperties": false}))
        ]}});
        let optional = json!({"anyOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "null"}},
             "additionalProperties": false},
            {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "null"}},
             "additionalProperties": false},
            {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"const": null}},
             "additionalProperties": false}
        ]});
        let texts: [&[&str]; 2] = [
            &[
                r#"[{"name": "f0", "arguments": {"x": 12}}]"#,
                r#"[{"arguments": {"y": true}, "name": "f22"}, {"name":"f3","arguments":{}}]"#,
                "[ {\n  \"name\" : \"f\", \"arguments\": {\"z\": [1, 2]}}]",
                r#"[{"arguments":{},"name":"f1"},{"arguments":{},"name":"f3"},{"name":"f","arguments":{}}]"#,
            ],
            &[
                r#"{}"#,
                r#"{"b": null, "a": "s"}"#,
                r#" {"a":true}"#,
                r#"{"a": -3, "b": null}"#,
            ],
        ];
        let vocab = pieces_vocab(
            &call_pieces(&["[{\"", "}]", "null", "\"a", "\"b\": ", "\n "]),
            None,
        );
        let mut rand = index_rng(0x2545_f491_4f6c_dd1d);
        for (schema, texts) in [calls, optional].iter().zip(texts) {
            for ws in [Whitespace::Any, Whitespace::Tidy { indent: 2 }] {
                let opts = CompileOptions::default().whitespace(ws);
                let merged = Grammar::from_json_schema(schema, &opts).unwrap();
                assert!(!merged.inner.merged.is_empty(), "no union merged");
                let mut plain = Grammar::from_json_schema(schema, &opts).unwrap();
                Arc::get_mut(&mut plain.inner).unwrap().merged_of.clear();
                let (gm, gp) = (&merged.inner, &plain.inner);
                let (cm, cp) = (Completer::new(gm.clone()), Completer::new(gp.clone()));
                let same = |sm: &[Stack], sp: &[Stack], at: &str| {
                    assert_eq!(
                        sm.iter().any(|s| gm.can_end(s)),
                        sp.iter().any(|s| gp.can_end(s)),
                        "may end after {at:?}"
                    );
                    assert_eq!(
                        cm.remaining_any(sm),
                        cp.remaining_any(sp),
                        "rest after {at:?}"
                    );
                    let mut taken = Vec::new();
                    for b in 0..=255u8 {
                        let (mut nm, mut np) = (Vec::new(), Vec::new());
                        advance(gm, sm, Sym::from(b), &mut nm);
                        advance(gp, sp, Sym::from(b), &mut np);
                        assert_eq!(nm.is_empty(), np.is_empty(), "{:?} after {at:?}", b as char);
                        if !np.is_empty() {
                            taken.push(b);
                        }
                    }
                    taken
                };
                let step = |states: &[Stack], g: &GrammarInner, b: u8| {
                    let mut next = Vec::new();
                    advance(g, states, Sym::from(b), &mut next);
                    next
                };
                for text in texts.iter() {
                    let (mut sm, mut sp) = (vec![gm.start_stack()], vec![gp.start_stack()]);
                    for (i, &b) in text.as_bytes().iter().enumerate() {
                        same(&sm, &sp, &text[..i]);
                        (sm, sp) = (step(&sm, gm, b), step(&sp, gp, b));
                        assert!(!sp.is_empty(), "{text:?} refused at {i}");
                    }
                    same(&sm, &sp, text);
                    assert!(sm.iter().any(|s| gm.can_end(s)), "{text:?} does not end");
                }
                for _ in 0..40 {
                    let (mut sm, mut sp) = (vec![gm.start_stack()], vec![gp.start_stack()]);
                    let mut text = Vec::new();
                    for _ in 0..120 {
                        let taken = same(&sm, &sp, &String::from_utf8_lossy(&text));
                        if taken.is_empty() {
                            break;
                        }
                        let b = taken[rand(taken.len())];
                        text.push(b);
                        (sm, sp) = (step(&sm, gm, b), step(&sp, gp, b));
                    }
                }
                let (am, ap) = (
                    TokenAutomaton::new(&merged, vocab.clone()).unwrap(),
                    TokenAutomaton::new(&plain, vocab.clone()).unwrap(),
                );
                same_masks_along_walks((&am, &ap), (30, 40, 24), &mut rand, "schema");
            }
        }
    }

    /// A dialect's union of calls (captures around objects of one shape) merged inside token
    /// walks gives the same token masks as the union walked one stack per call, with and
    /// without a token budget, the distinct-calls rule on.
    #[test]
    fn merged_call_unions_give_the_same_masks() {
        let tools = Tools::from_json_str(
            r#"[{"type": "function", "function": {"name": "f0", "parameters": {"type": "object",
                "properties": {"x": {"type": "integer"}}, "required": ["x"]}}},
               {"type": "function", "function": {"name": "f1", "parameters": {"type": "object",
                "properties": {"x": {"type": "string", "maxLength": 2}}}}},
               {"type": "function", "function": {"name": "f22", "parameters": {"type": "object",
                "properties": {}}}},
               {"type": "function", "function": {"name": "g", "parameters": {"type": "object",
                "properties": {"y": {"enum": [true, 5]}}, "required": ["y"]}}}]"#,
        )
        .unwrap();
        let vocab = pieces_vocab(
            &call_pieces(&[
                "<|python_tag|>",
                "<tool_call>",
                "<tool_call>\n{\"",
                "</tool_call>",
                "parameters",
                "}\n",
                "\"y",
                "\n",
                "{\"name\": \"",
                "{\"name\": \"f1\", \"arguments\": {",
                "{\"arguments\": {}, \"name",
                "<tool_call>\n{\"name\": \"f0\", \"arguments\": {\"x\": 1",
                "{\"parameters\": {\"y\": true}, \"name\": \"g\"}",
                "{\"name\": \"f1\", \"parameters\": {}}",
                "{\"parameters\": {\"x\": \"",
                "{\"arguments\": {\"",
            ]),
            Some(0),
        );
        let mut rand = index_rng(0x9e37_79b9_7f4a_7c15);
        // With the name key first (the default) and with the keys in any order.
        let orders = [true, false].map(|first| DialectOptions::default().name_first(first));
        for (name, opts) in ["hermes", "llama31_json"]
            .into_iter()
            .flat_map(|n| orders.iter().map(move |o| (n, o)))
        {
            let dialect = Dialect::by_name(name).unwrap();
            let merged = dialect.compile(&tools, opts).unwrap();
            assert!(
                merged.inner.merged.iter().any(|m| m.caps.is_some()),
                "{name}: no call union merged"
            );
            let mut plain = dialect.compile(&tools, opts).unwrap();
            Arc::get_mut(&mut plain.inner).unwrap().merged_of.clear();
            let (am, ap) = (
                TokenAutomaton::new(&merged, vocab.clone()).unwrap(),
                TokenAutomaton::new(&plain, vocab.clone()).unwrap(),
            );
            same_masks_along_walks((&am, &ap), (40, 50, 30), &mut rand, name);
            // A matcher keeps one stack per call; its masks are computed with each full set of
            // them as the merged frame (`merge_call_stacks`): the same masks as from the stacks
            // one by one, with and without a budget.
            let mut apart = dialect.compile(&tools, opts).unwrap();
            Arc::get_mut(&mut apart.inner).unwrap().merged_cap.clear();
            let aa = TokenAutomaton::new(&apart, vocab.clone()).unwrap();
            same_masks_along_walks((&am, &aa), (40, 50, 30), &mut rand, name);
            let g = &merged.inner;
            let mut states = vec![g.start_stack()];
            let prefix = if name == "hermes" {
                "<tool_call>\n{ "
            } else {
                "{ "
            };
            for &b in prefix.as_bytes() {
                let mut next = Vec::new();
                advance(g, &states, b as Sym, &mut next);
                states = next;
            }
            let m = g.merge_call_stacks(&states).expect("a full set of calls");
            assert!(
                m.len() + 3 <= states.len(),
                "{name}: {} stacks merged into {}",
                states.len(),
                m.len()
            );
            assert!(apart.inner.merge_call_stacks(&states).is_none());
        }
    }

    /// A gap's walk kept in the vocabulary's own caches serves every grammar with the same
    /// whitespace policy, whatever its compile caches hold, and no other: over one vocabulary,
    /// grammars under several policies (walked one after another, sharing the vocabulary) give
    /// the masks each gives alone on a vocabulary of its own, along a walk through gaps.
    #[test]
    fn gap_walks_kept_by_the_vocabulary_serve_only_their_policy() {
        use crate::cache::Caches;
        let vocab_of = || {
            pieces_vocab(
                &[
                    " ", "  ", "   ", "\n", "\n  ", "\n    ", " {", "{\n", "{\n  \"", " \"", "\t",
                    ": ", ",\n",
                ],
                None,
            )
        };
        let schema = serde_json::json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "integer"}}}}});
        let text: &[&[u8]] = &[
            b" ", b" ", b"{\n  \"", b"a", b"\"", b": ", b"{", b"\n    ", b"}",
        ];
        let policies = [
            (Whitespace::Any, 20),
            (Whitespace::Any, 2),
            (Whitespace::Tidy { indent: 2 }, 20),
            (Whitespace::Any, 0),
        ];
        let masks = |vocab: &Arc<Vocab>, ws: Whitespace, max: u16| {
            let mut opts = CompileOptions::default().whitespace(ws);
            opts.max_whitespace = max;
            opts.caches = Some(Caches::default());
            let g = Grammar::from_json_schema(&schema, &opts).unwrap();
            let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
            let mut m = a.matcher();
            let mut out = Vec::new();
            for piece in text {
                let mut mask = TokenMask::new(vocab.len());
                m.fill_mask(&mut mask);
                out.push(mask.words.clone());
                match vocab.token_id(piece) {
                    Some(t) if m.accept(t).is_ok() => {}
                    _ => break,
                }
            }
            out
        };
        let shared = vocab_of();
        for round in 0..2 {
            for &(ws, max) in &policies {
                let alone = masks(&vocab_of(), ws, max);
                let least = if max == 0 { 1 } else { 3 };
                assert!(
                    alone.len() >= least,
                    "{ws:?} max {max}: the walk stopped early"
                );
                assert_eq!(
                    masks(&shared, ws, max),
                    alone,
                    "round {round}: {ws:?} max {max}"
                );
            }
        }
        assert!(shared.caches().stats().entries > 0, "no gap walk kept");
        assert!(shared.caches().stats().hits > 0, "no gap walk found again");
    }

    /// A frame in a gap takes the tokens, may end at the trie nodes and gives each token the
    /// cost that a walk of the frame itself from the trie's root gives, though its tokens that
    /// close the gap at once are read from the frame with the gap closed (a walk shared by every
    /// length of the gap): at every gap of random token walks, under both whitespace policies,
    /// at the root, in objects and arrays.
    #[test]
    fn gap_frames_take_what_a_walk_of_the_frame_takes() {
        use std::collections::BTreeMap;
        let vocab = pieces_vocab(
            &[
                " ", "  ", "   ", "\n", "\n  ", "\n    ", " {", "{\n", "{\n  \"", " \"", "\t",
                ": ", ",\n", " \"a\"", "\"b\": ", " 1", "  }", "\n}", " ]", ", ", " [", "[\n    ",
                "  \"c", "\": {", "}\n", " 12, ",
            ],
            None,
        );
        let schema = serde_json::json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "integer"}}},
            "b": {"type": "array", "items": {"type": "integer"}, "maxItems": 4},
            "c": {"type": "string", "maxLength": 5}}, "required": ["a"]});
        let n = vocab.len();
        let ids = |set: &TokenSet| {
            let mut m = TokenMask::new(n);
            set.or_into(&mut m);
            m.iter().collect::<Vec<u32>>()
        };
        let least = |list: &mut dyn Iterator<Item = (u32, u32)>| {
            let mut m: BTreeMap<u32, u32> = BTreeMap::new();
            for (t, c) in list {
                let e = m.entry(t).or_insert(c);
                *e = (*e).min(c);
            }
            m
        };
        let mut rand = index_rng(0x2545_f491_4f6c_dd1d);
        let mut checked = 0;
        for ws in [Whitespace::Any, Whitespace::Tidy { indent: 2 }] {
            let opts = CompileOptions::default().whitespace(ws);
            let g = Grammar::from_json_schema(&schema, &opts).unwrap();
            let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
            let (gi, walker, comp) = (&g.inner, a.walker(), a.completer());
            for _ in 0..30 {
                let mut m = a.matcher();
                let mut states = vec![gi.start_stack()];
                let mut mask = TokenMask::new(n);
                for _ in 0..40 {
                    for s in &states {
                        let frame = s.last().unwrap();
                        if !matches!(gi.as_lexeme(frame), Some((_, _, Some(_)))) {
                            continue;
                        }
                        let local = a.local(frame);
                        let mut tokens = WalkTokens::default();
                        let mut exits = Vec::new();
                        if gi.is_complete(frame) {
                            exits.push(0);
                        }
                        walker.walk_stacks(
                            gi,
                            0,
                            vec![vec![frame.clone()]],
                            &mut tokens,
                            Some(&mut exits),
                        );
                        assert_eq!(
                            ids(&local.allowed),
                            ids(&tokens.finish(n)),
                            "{ws:?} {frame:?}"
                        );
                        let mut got = local.exits.clone();
                        got.sort_unstable();
                        got.dedup();
                        exits.sort_unstable();
                        exits.dedup();
                        assert_eq!(got, exits, "{ws:?} {frame:?}: exits");
                        let mut list = Vec::new();
                        walker.walk_costs(gi, comp, 0, vec![vec![frame.clone()]], &mut list);
                        let costs = a.local_costs(frame, &local);
                        let got = least(
                            &mut costs
                                .groups
                                .iter()
                                .flat_map(|(c, set)| ids(set).into_iter().map(move |t| (t, *c))),
                        );
                        assert_eq!(got, least(&mut list.into_iter()), "{ws:?} {frame:?}: costs");
                        checked += 1;
                    }
                    m.fill_mask(&mut mask);
                    let allowed: Vec<u32> = mask.iter().filter(|&t| !vocab.is_eos(t)).collect();
                    if allowed.is_empty() {
                        break;
                    }
                    let t = allowed[rand(allowed.len())];
                    m.accept(t).unwrap();
                    for &b in vocab.token_bytes(t).unwrap() {
                        let mut next = Vec::new();
                        advance(gi, &states, b as Sym, &mut next);
                        states = next;
                    }
                    assert!(!states.is_empty());
                }
            }
        }
        assert!(checked > 200, "only {checked} gap frames checked");
    }

    fn walk_checking(g: &GrammarInner, text: &str) {
        let mut states = vec![g.start_stack()];
        for (at, &b) in text.as_bytes().iter().enumerate() {
            for s in &states {
                check_first_bytes(g, s, text, at);
            }
            let mut next = Vec::new();
            advance(g, &states, b as Sym, &mut next);
            assert!(!next.is_empty(), "{text:?} refused at {at}");
            states = next;
        }
        for s in &states {
            check_first_bytes(g, s, text, text.len());
        }
    }
}
