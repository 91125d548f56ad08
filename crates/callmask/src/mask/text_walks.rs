//! Free-text walks: the vocabulary's text index (`crate::vocab::text_index`) spares free-text
//! lexemes (`@text`, `@text_without(...)`) their whole-vocabulary walk.
//!
//! A dialect whose output may start with text (tool_choice `auto`, functools, pythonic, inline)
//! takes almost every token at its start, so the walk of its text lexeme visits every node of
//! the token trie, and the nodes where the text may end are almost all of them too. Both depend
//! on the grammar only through its markers: text is valid UTF-8 holding none of them. So the
//! trie carries, built once with it (part of loading a vocabulary, like the trie), three lists
//! in node order: the nodes that end a token, the nodes at a character boundary with children,
//! and per byte the nodes whose parent is at a boundary; and per node the characters begun
//! from the root. A text walk then copies slices of these lists and cuts out the subtrees below
//! each place a marker completes, found by descending the marker's bytes from the (few) nodes
//! that hold its first byte; the exits' children are read for the bytes the continuation takes
//! only. The result is exactly that of [`Walker::walk_lex`] (a test compares them on every
//! first-byte subtree of a random vocabulary and of Llama 3.1's).
//!
//! Trade-offs: the index costs up to 14 bytes per trie node and one pass over the trie when a
//! vocabulary is loaded, for every vocabulary, used or not by a text-first dialect; in return a
//! text-first grammar's first mask, with every cache cold, no longer walks the whole trie.
//!
//! Text of at most N characters ([`Dfa::text_without`] with a maximum, as a dialect's text before
//! a required call) filters the same lists by the characters each node begins from the root.
//! The shortcut applies to an automaton marked by [`Dfa::text_without`] in its start state, at
//! the root or one byte below it, and to a state that behaves as such a one
//! ([`Dfa::with_text_states`]: a dialect's `@text_matching("(?:[^{\s](?s:.)*)?")` after its
//! first character); every other walk takes the general path.

use super::bitset::TokenSet;
use super::walks::{ExitChildren, Range, SubWalk, TextChildren, Walker};
use crate::grammar::dfa::Dfa;
use crate::vocab::text_index::{begins_char, LONG_CHARS};

/// The indices of the entries of a node-ordered `list` inside `(lo, hi)` (`lo` itself
/// excluded).
fn within(list: &[u32], lo: usize, hi: usize) -> std::ops::Range<usize> {
    let a = list.partition_point(|&v| v as usize <= lo);
    let b = list.partition_point(|&v| (v as usize) < hi);
    a..b.max(a)
}

/// The entries of a node-ordered `list` inside `(lo, hi)` (`lo` itself excluded).
fn slice_within(list: &[u32], lo: usize, hi: usize) -> &[u32] {
    &list[within(list, lo, hi)]
}

/// Calls `f` with each maximal run of indices of a node-ordered `list` whose nodes are
/// outside the sorted, disjoint `cuts` (`strict`: a node equal to a cut's first node is kept,
/// so a cut removes the children of its subtree, not the subtree's root).
fn runs_outside(
    list: &[u32],
    cuts: &[Range],
    strict: bool,
    mut f: impl FnMut(std::ops::Range<usize>),
) {
    let mut start = 0;
    for &(lo, hi) in cuts {
        let a = list.partition_point(|&v| v < lo || (strict && v == lo));
        let b = list.partition_point(|&v| v < hi);
        if a > start {
            f(start..a);
        }
        start = start.max(b);
    }
    if start < list.len() {
        f(start..list.len());
    }
}

/// Calls `f` with the runs of indices into a node-ordered `list`, within `range` (a
/// [`within`] range), of the nodes outside `cuts` (not strict) that fit the character bound
/// `cap`. `long` lists (sorted) the indices of `list`'s nodes of more than [`LONG_CHARS`]
/// characters: under a bound of at least that many, only those are tested.
fn kept_runs(
    list: &[u32],
    range: std::ops::Range<usize>,
    long: &[u32],
    cuts: &[Range],
    fits: impl Fn(u32) -> bool,
    cap: u16,
    mut f: impl FnMut(std::ops::Range<usize>),
) {
    runs_outside(&list[range.clone()], cuts, false, |r| {
        let r = range.start + r.start..range.start + r.end;
        let mut start = r.start;
        let mut split = |j: usize| {
            if !fits(list[j]) {
                if j > start {
                    f(start..j);
                }
                start = j + 1;
            }
        };
        if cap >= LONG_CHARS {
            let a = long.partition_point(|&j| (j as usize) < r.start);
            long[a..]
                .iter()
                .map(|&j| j as usize)
                .take_while(|&j| j < r.end)
                .for_each(&mut split);
        } else {
            r.clone().for_each(&mut split);
        }
        if start < r.end {
            f(start..r.end);
        }
    });
}

/// Calls `f` with each node of a node-ordered `list` outside the sorted, disjoint `cuts` (see
/// [`runs_outside`]).
fn outside(list: &[u32], cuts: &[Range], strict: bool, mut f: impl FnMut(u32)) {
    runs_outside(list, cuts, strict, |r| list[r].iter().for_each(|&v| f(v)));
}

impl Walker<'_> {
    /// [`Walker::walk_lex`] from `state` below `from` through the text index, where it
    /// applies (see the module documentation): `None` where it does not. The exits' children
    /// are read from the index when asked for ([`Walker::text_children`]).
    pub(super) fn walk_text(&self, from: usize, dfa: &Dfa, state: u32) -> Option<SubWalk> {
        let (dfa, state) = dfa.text_view(state)?;
        let spec = dfa.text_spec()?;
        let markers = &spec.markers;
        // A bounded text's state between characters, no marker begun, `r` characters left:
        // from the root, the walk of its start with the bound `r` (one state per character
        // written, each a whole-vocabulary walk otherwise).
        let (state, max_chars) = match dfa.text_chars_left(state) {
            Some(r) if self.trie.nodes[from].depth == 0 => (dfa.start(), Some(r)),
            _ => (state, spec.max_chars),
        };
        // Characters are counted from the root; no path holds u16::MAX of them.
        let cap = max_chars.map_or(u16::MAX, |m| m.min(u16::MAX as u64) as u16);
        let fresh = match self.trie.nodes[from].depth {
            0 => state == dfa.start(),
            1 => state == dfa.next(dfa.start(), self.trie.nodes[from].byte),
            _ => false,
        };
        if !fresh || state == Dfa::DEAD {
            return None;
        }
        let x = &self.trie.text;
        let fits = |v: u32| x.chars[v as usize] <= cap;
        let end = self.trie.nodes[from].next as usize;
        // Subtrees below a node where a marker completes: every occurrence of a marker starts at
        // a node with its first byte whose parent is at a character boundary (a marker is UTF-8).
        let mut cuts: Vec<Range> = Vec::new();
        for m in markers {
            let (first, rest) = m.split_first()?;
            let list = &x.by_byte[*first as usize];
            let a = list.partition_point(|&v| (v as usize) < from);
            let b = list.partition_point(|&v| (v as usize) < end);
            for &v in &list[a..b.max(a)] {
                if let Some(z) = self.descend(v as usize, rest) {
                    cuts.push((z as u32, self.trie.nodes[z].next));
                }
            }
        }
        cuts.sort_unstable();
        // Subtrees nest or are disjoint: keep the outermost.
        let mut outer: Vec<Range> = Vec::with_capacity(cuts.len());
        for c in cuts {
            if outer.last().is_none_or(|l| c.0 >= l.1) {
                outer.push(c);
            }
        }
        let cuts = outer;
        // Runs of nodes outside the cuts and within the bound, copied as slices.
        let nodes = within(&x.token_nodes, from, end);
        let mut ids = Vec::with_capacity(x.tokens_of(nodes.clone()).len());
        kept_runs(
            &x.token_nodes,
            nodes,
            &x.long_tokens,
            &cuts,
            fits,
            cap,
            |r| ids.extend_from_slice(x.tokens_of(r)),
        );
        // `from` is never inside a cut: its state is live.
        let from_exit = dfa.is_accepting(state) && self.trie.has_children(from);
        let inner = within(&x.inner, from, end);
        let mut exits = Vec::with_capacity(inner.len() + 1);
        if from_exit {
            exits.push(from as u32);
        }
        kept_runs(&x.inner, inner, &x.long_inner, &cuts, fits, cap, |r| {
            exits.extend_from_slice(&x.inner[r])
        });
        Some(SubWalk {
            tokens: TokenSet::new(ids, self.vocab_len),
            exits,
            children: ExitChildren::Text(TextChildren {
                from: from as u32,
                end: end as u32,
                cuts,
                from_exit,
                cap,
            }),
        })
    }

    /// The children of a text walk's exits whose byte is `byte`, appended to `out`.
    pub(super) fn text_children(&self, t: &TextChildren, byte: u8, out: &mut Vec<u32>) {
        let (from, end) = (t.from as usize, t.end as usize);
        let list = slice_within(&self.trie.text.by_byte[byte as usize], from, end);
        let child_depth = self.trie.nodes[from].depth + 1;
        let parent_chars = |v: u32| {
            let c = self.trie.text.chars[v as usize];
            c.saturating_sub(u16::from(
                begins_char(self.trie.nodes[v as usize].byte) && c < u16::MAX,
            ))
        };
        outside(list, &t.cuts, true, |v| {
            if (t.from_exit || self.trie.nodes[v as usize].depth != child_depth)
                && parent_chars(v) <= t.cap
            {
                out.push(v)
            }
        });
    }

    /// The node reached from `node` by `bytes`, if the trie has it.
    fn descend(&self, mut node: usize, bytes: &[u8]) -> Option<usize> {
        for &b in bytes {
            let end = self.trie.nodes[node].next as usize;
            let mut c = node + 1;
            loop {
                if c >= end {
                    return None;
                }
                if self.trie.nodes[c].byte == b {
                    break;
                }
                c = self.trie.nodes[c].next as usize;
            }
            node = c;
        }
        Some(node)
    }
}

#[cfg(test)]
mod tests {
    use crate::cache::Caches;
    use crate::grammar::dfa::Dfa;
    use crate::mask::walks::{ExitChildren, SubWalk, Walker};
    use crate::vocab::trie::TokenTrie;
    use crate::vocab::Vocab;

    /// The indexed walk equals the node-by-node one (tokens, exits, exits' children by byte)
    /// below the root and every first-byte node, for several marker sets, on a vocabulary of
    /// random tokens made of marker pieces, multi-byte characters and broken UTF-8, and on
    /// Llama 3.1's where the cache has it.
    #[test]
    fn indexed_text_walks_equal_general_walks() {
        let pieces: &[&[u8]] = &[
            b"<",
            b"tool",
            b"_call",
            b">",
            b"<tool_call>",
            b"a",
            b" ",
            b"\n",
            "é".as_bytes(),
            "€".as_bytes(),
            &[0xe2, 0x82],
            &[0xac],
            &[0xff],
            b"functools",
            b"[",
            b"<|",
            b"|>",
            b"<<",
            b"t",
        ];
        let mut rand = crate::mask::walks::tests::index_rng(0x9e37_79b9_7f4a_7c15);
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for _ in 0..3000 {
            let mut t = Vec::new();
            for _ in 0..1 + rand(4) {
                t.extend_from_slice(pieces[rand(pieces.len())]);
            }
            tokens.push(t);
        }
        let n = tokens.len();
        let synthetic = Vocab::from_parts(tokens, vec![false; n], vec![]).unwrap();
        let mut vocabs = vec![synthetic];
        let cache = std::env::var_os("CALLMASK_CACHE")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../../.cache").into());
        let llama = cache.join("tokenizers/llama3_1-3.7.2/tokenizer.json");
        if let Ok(v) = Vocab::from_tokenizer_json(&llama) {
            vocabs.push(v);
        }
        let sets: &[&[&str]] = &[
            &[],
            &["<tool_call>"],
            &["<", "<<"],
            &["functools["],
            &["<|python_tag|>", "<tool_call>", "é"],
            &["\\n"],
        ];
        for vocab in &vocabs {
            let trie = TokenTrie::new(vocab);
            let caches = Caches::new(0);
            let walker = Walker {
                trie: &trie,
                caches: &caches,
                vocab: vocab.id(),
                vocab_len: vocab.len(),
            };
            let bounds = [None, Some(0), Some(1), Some(3), Some(20), Some(100)];
            let mut mid_text = 0;
            for (markers, max) in sets.iter().flat_map(|m| bounds.map(|b| (m, b))) {
                let dfa = Dfa::text_without(markers, max, 100_000).unwrap();
                let mut froms = vec![(0usize, dfa.start())];
                let mut c = 1;
                while c < trie.nodes.len() {
                    froms.push((c, dfa.next(dfa.start(), trie.nodes[c].byte)));
                    c = trie.nodes[c].next as usize;
                }
                let mut fast_paths = 0;
                for (from, state) in froms {
                    if state == Dfa::DEAD {
                        assert!(walker.walk_text(from, &dfa, state).is_none());
                        continue;
                    }
                    let fast = walker.walk_text(from, &dfa, state).expect("applies");
                    let slow = walker.sub_walk_general(from, &dfa, state);
                    let (a, b) = (fast.tokens.sorted_ids(), slow.tokens.sorted_ids());
                    assert_eq!(a, b, "{markers:?} {max:?} below node {from}");
                    assert_eq!(
                        fast.exits, slow.exits,
                        "{markers:?} {max:?} below node {from}"
                    );
                    for byte in 0..256 {
                        let part = |w: &SubWalk| {
                            let mut v = match &w.children {
                                ExitChildren::Sorted { children, starts } => children
                                    [starts[byte] as usize..starts[byte + 1] as usize]
                                    .to_vec(),
                                ExitChildren::Text(t) => {
                                    let mut v = Vec::new();
                                    walker.text_children(t, byte as u8, &mut v);
                                    v
                                }
                            };
                            v.sort_unstable();
                            v
                        };
                        assert_eq!(
                            part(&fast),
                            part(&slow),
                            "{markers:?} {max:?} {from} byte {byte}"
                        );
                    }
                    fast_paths += 1;
                }
                // From the root, the states after characters that begin no marker (plain
                // letters, a multi-byte character): the start's walk with the bound left.
                for prefix in ["a", "at", "é", "aé t", "tool"] {
                    let mut s = dfa.start();
                    for &b in prefix.as_bytes() {
                        s = dfa.next(s, b);
                    }
                    if s == Dfa::DEAD || dfa.text_chars_left(s).is_none() {
                        continue;
                    }
                    let fast = walker.walk_text(0, &dfa, s).expect("applies");
                    let slow = walker.sub_walk_general(0, &dfa, s);
                    let (a, b) = (fast.tokens.sorted_ids(), slow.tokens.sorted_ids());
                    assert_eq!(a, b, "{markers:?} {max:?} after {prefix:?}");
                    assert_eq!(
                        fast.exits, slow.exits,
                        "{markers:?} {max:?} after {prefix:?}"
                    );
                    for byte in 0..=255u8 {
                        let mut v = Vec::new();
                        if let ExitChildren::Text(t) = &fast.children {
                            walker.text_children(t, byte, &mut v);
                        }
                        v.sort_unstable();
                        let w = match &slow.children {
                            ExitChildren::Sorted { children, starts } => {
                                children[starts[byte as usize] as usize
                                    ..starts[byte as usize + 1] as usize]
                                    .to_vec()
                            }
                            ExitChildren::Text(_) => unreachable!("a general walk"),
                        };
                        let mut w = w;
                        w.sort_unstable();
                        assert_eq!(v, w, "{markers:?} {max:?} after {prefix:?} byte {byte}");
                    }
                    mid_text += 1;
                }
                let least = if max == Some(0) { 1 } else { 100 };
                assert!(fast_paths >= least, "{markers:?} {max:?}: {fast_paths}");
                // Not a fresh text state: the general walk.
                let deep = dfa.next(dfa.next(dfa.start(), b'a'), b'<');
                if deep != Dfa::DEAD && deep != dfa.next(dfa.start(), b'<') {
                    assert!(walker.walk_text(1, &dfa, deep).is_none());
                }
            }
            assert!(mid_text > 20, "mid-text states walked: {mid_text}");
            // A dialect's text-like regex: its states after the first character are text.
            let like = Dfa::from_regex("(?:[^{\\s](?s:.)*)?", 10_000)
                .unwrap()
                .with_text_states();
            let mut fast_paths = 0;
            let mut c = 1;
            while c < trie.nodes.len() {
                let state = like.next(like.start(), trie.nodes[c].byte);
                if let Some(fast) = walker.walk_text(c, &like, state) {
                    let slow = walker.sub_walk_general(c, &like, state);
                    let (a, b) = (fast.tokens.sorted_ids(), slow.tokens.sorted_ids());
                    assert_eq!(a, b, "text-like below node {c}");
                    assert_eq!(fast.exits, slow.exits, "text-like below node {c}");
                    fast_paths += 1;
                }
                c = trie.nodes[c].next as usize;
            }
            assert!(fast_paths > 100, "text-like: {fast_paths}");
            assert!(walker.walk_text(0, &like, like.start()).is_none());
        }
    }
}
