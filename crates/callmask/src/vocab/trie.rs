//! The token trie: a vocabulary's non-special tokens as a byte trie in depth-first order, so a
//! subtree is a contiguous run of nodes and a dead prefix skips its whole subtree at once.
//!
//! The trie knows nothing of grammars. What walks it sees through the narrow
//! [`ByteRecognizer`] trait (a state machine over bytes: the lexeme automata implement it), or
//! reads the nodes directly (the mask layer's walks of grammar stacks, which need more than one
//! state per node). It is built once per vocabulary, on first use, and held by the [`Vocab`]
//! (see [`Vocab::trie`]), so every automaton over a vocabulary shares one; the walks' caches live
//! with their owner ([`crate::Caches`]), not here. The trie carries its text index
//! ([`TextIndex`]), built with it.
//!
//! Trade-offs: a node is 12 bytes packed (the next sibling's index, the token, depth, byte,
//! and whether more tokens share its bytes), about twice the vocabulary's bytes in nodes; tokens
//! longer than `u16::MAX` bytes are left out (no real vocabulary has one).

use super::text_index::{TextIndex, TrieNodes};
use super::{TokenId, Vocab};

/// No token ends at a trie node.
pub(crate) const NO_TOKEN: TokenId = TokenId::MAX;

/// One node of the token trie, packed so that a walk reads one small record per node.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TrieNode {
    /// One past the last node of this node's subtree.
    pub(crate) next: u32,
    /// The token ending here ([`NO_TOKEN`] if none); more in `TokenTrie::dups` if `dup`.
    pub(crate) tok: TokenId,
    pub(crate) depth: u16,
    /// Byte leading into this node (unused for the root).
    pub(crate) byte: u8,
    pub(crate) dup: bool,
}

/// The vocabulary as a byte trie in depth-first order.
#[derive(Debug)]
pub(crate) struct TokenTrie {
    /// Node 0 is the root.
    pub(crate) nodes: Vec<TrieNode>,
    /// Further tokens with the same bytes as a node's first one, sorted by node.
    pub(crate) dups: Vec<(u32, TokenId)>,
    /// The deepest node's depth.
    pub(crate) max_depth: usize,
    /// What free-text walks need, built with the trie.
    pub(crate) text: TextIndex,
}

/// A state machine over bytes, as the trie's walks see one: states are `u32`, state 0 rejects
/// everything.
pub(crate) trait ByteRecognizer {
    /// The state after `byte` from `state` (0: rejected).
    fn step(&self, state: u32, byte: u8) -> u32;
    /// Whether `state` accepts what led to it.
    fn is_accepting(&self, state: u32) -> bool;
}

impl TokenTrie {
    /// The trie of `vocab`'s non-special tokens.
    pub(crate) fn new(vocab: &Vocab) -> TokenTrie {
        let mut list: Vec<(&[u8], TokenId)> = (0..vocab.len() as TokenId)
            .filter(|&t| !vocab.is_special(t))
            .filter_map(|t| {
                vocab
                    .token_bytes(t)
                    // Tokens longer than a depth can count are never allowed (no such token
                    // exists in real vocabularies).
                    .filter(|b| !b.is_empty() && b.len() < u16::MAX as usize)
                    .map(|b| (b, t))
            })
            .collect();
        list.sort_unstable();
        let root = TrieNode {
            next: 0,
            tok: NO_TOKEN,
            depth: 0,
            byte: 0,
            dup: false,
        };
        let mut trie = TokenTrie {
            nodes: vec![root],
            dups: Vec::new(),
            max_depth: 0,
            text: TextIndex::default(),
        };
        let mut path: Vec<u32> = vec![0];
        let mut prev: &[u8] = &[];
        for (bytes, id) in list {
            let lcp = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            if lcp == bytes.len() && lcp == prev.len() {
                // Same bytes as the previous token.
                let n = *path.last().unwrap();
                trie.nodes[n as usize].dup = true;
                trie.dups.push((n, id));
                continue;
            }
            while path.len() > lcp + 1 {
                let n = path.pop().unwrap();
                trie.nodes[n as usize].next = trie.nodes.len() as u32;
            }
            for (d, &b) in bytes.iter().enumerate().skip(lcp) {
                trie.nodes.push(TrieNode {
                    next: 0,
                    tok: NO_TOKEN,
                    depth: (d + 1) as u16,
                    byte: b,
                    dup: false,
                });
                path.push(trie.nodes.len() as u32 - 1);
            }
            trie.max_depth = trie.max_depth.max(bytes.len());
            let last = *path.last().unwrap() as usize;
            trie.nodes[last].tok = id;
            prev = bytes;
        }
        while let Some(n) = path.pop() {
            trie.nodes[n as usize].next = trie.nodes.len() as u32;
        }
        trie.text = TextIndex::new(&trie);
        trie
    }

    /// Appends the tokens ending at `node`.
    #[inline]
    pub(crate) fn push_tokens(&self, node: usize, out: &mut Vec<TokenId>) {
        let n = &self.nodes[node];
        if n.tok != NO_TOKEN {
            out.push(n.tok);
            if n.dup {
                let first = self.dups.partition_point(|d| (d.0 as usize) < node);
                out.extend(
                    self.dups[first..]
                        .iter()
                        .take_while(|d| d.0 as usize == node)
                        .map(|d| d.1),
                );
            }
        }
    }

    #[inline]
    pub(crate) fn has_children(&self, node: usize) -> bool {
        self.nodes[node].next as usize > node + 1
    }

    /// Walks `rec` from `state` over the subtree below `from` (its own tokens excluded),
    /// node by node: appends the tokens it takes to `out`, and records as exits the nodes
    /// (`from` included) where it accepts and longer tokens go on.
    pub(crate) fn walk_recognizer<R: ByteRecognizer>(
        &self,
        from: usize,
        dfa: &R,
        state: u32,
        out: &mut Vec<TokenId>,
        exits: &mut Vec<u32>,
    ) {
        if dfa.is_accepting(state) && self.has_children(from) {
            exits.push(from as u32);
        }
        let base = self.nodes[from].depth as usize;
        let mut levels: Vec<u32> = vec![0; self.max_depth + 2 - base];
        levels[0] = state;
        let mut i = from + 1;
        let end = self.nodes[from].next as usize;
        while i < end {
            let n = self.nodes[i];
            let d = n.depth as usize - base;
            let s = dfa.step(levels[d - 1], n.byte);
            if s == 0 {
                i = n.next as usize;
                continue;
            }
            levels[d] = s;
            if n.tok != NO_TOKEN {
                if n.dup {
                    self.push_tokens(i, out);
                } else {
                    out.push(n.tok);
                }
            }
            if dfa.is_accepting(s) && n.next as usize > i + 1 {
                exits.push(i as u32);
            }
            i += 1;
        }
    }

    /// Walks `rec` from `state` over the subtree below `from` (its own tokens excluded) and
    /// calls `f` with each token it takes and the state after it.
    pub(crate) fn walk_recognizer_tokens<R: ByteRecognizer>(
        &self,
        from: usize,
        rec: &R,
        state: u32,
        mut f: impl FnMut(TokenId, u32),
    ) {
        let base = self.nodes[from].depth as usize;
        let mut levels: Vec<u32> = vec![0; self.max_depth + 2 - base];
        levels[0] = state;
        let mut i = from + 1;
        let end = self.nodes[from].next as usize;
        let mut toks = Vec::new();
        while i < end {
            let n = self.nodes[i];
            let d = n.depth as usize - base;
            let s = rec.step(levels[d - 1], n.byte);
            if s == 0 {
                i = n.next as usize;
                continue;
            }
            levels[d] = s;
            if n.tok != NO_TOKEN {
                toks.clear();
                self.push_tokens(i, &mut toks);
                toks.iter().for_each(|&t| f(t, s));
            }
            i += 1;
        }
    }
}

impl TrieNodes for TokenTrie {
    fn node_count(&self) -> usize {
        self.nodes.len()
    }

    fn max_depth(&self) -> usize {
        self.max_depth
    }

    fn node(&self, i: usize) -> (u16, u8, u32, bool) {
        let n = self.nodes[i];
        (n.depth, n.byte, n.next, n.tok != NO_TOKEN)
    }

    fn has_children(&self, i: usize) -> bool {
        TokenTrie::has_children(self, i)
    }

    fn push_tokens(&self, i: usize, out: &mut Vec<TokenId>) {
        TokenTrie::push_tokens(self, i, out)
    }
}
