//! The token trie's text index: what free-text walks need of a vocabulary, built with its trie.
//!
//! Text (valid UTF-8 holding none of a grammar's markers) takes almost every token, so a walk of
//! a text lexeme would visit almost every node of the trie. The index lists, in node order, the
//! nodes that end a token, the nodes at a character boundary with children, and per byte the
//! nodes whose parent is at a boundary; and per node the characters begun from the root. The
//! mask layer's text walks (`mask/text_walks.rs`) copy slices of these lists instead of walking.
//! The index knows no grammar: it depends on UTF-8 alone.
//!
//! Trade-offs: up to 14 bytes per trie node, 8 per token, and one pass over the trie when a
//! vocabulary's trie is built, for every vocabulary, used or not by a text-first dialect.

use super::TokenId;

/// What the index reads of a token trie (implemented by `trie::TokenTrie`, which builds the
/// index with itself; the trait keeps this module below the trie's).
pub(crate) trait TrieNodes {
    /// Number of nodes (node 0 is the root).
    fn node_count(&self) -> usize;
    /// The longest token's length in bytes.
    fn max_depth(&self) -> usize;
    /// Node `i`'s depth, the byte into it, the node after its subtree, and whether a token ends
    /// there.
    fn node(&self, i: usize) -> (u16, u8, u32, bool);
    /// True when node `i` has children.
    fn has_children(&self, i: usize) -> bool;
    /// Appends the tokens that end at node `i`.
    fn push_tokens(&self, i: usize, out: &mut Vec<TokenId>);
}

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct TextIndex {
    /// Nodes ending a token whose bytes are a valid UTF-8 prefix.
    pub(crate) token_nodes: Vec<u32>,
    /// The token ids of `token_nodes` in order (a node may end several tokens), so that a
    /// walk copies a run of nodes' tokens as one slice.
    pub(crate) token_ids: Vec<u32>,
    /// Where each of `token_nodes`' ids begin in `token_ids`, and `token_ids.len()` last.
    pub(crate) token_starts: Vec<u32>,
    /// Nodes at a character boundary (the root excluded) with children.
    pub(crate) inner: Vec<u32>,
    /// Per byte: the nodes with that byte whose parent (the root included) is at a boundary.
    pub(crate) by_byte: Vec<Vec<u32>>,
    /// Per node: the characters begun from the root (bytes that are not UTF-8 continuation
    /// bytes), saturating; set wherever the parent is a valid prefix.
    pub(crate) chars: Vec<u16>,
    /// The indices in `token_nodes` of the nodes of more than [`LONG_CHARS`] characters, so
    /// that a walk of text of at least that many characters tests these only.
    pub(crate) long_tokens: Vec<u32>,
    /// The same for `inner`.
    pub(crate) long_inner: Vec<u32>,
}

/// Characters past which a node is listed as long (`TextIndex::long_tokens`).
pub(crate) const LONG_CHARS: u16 = 16;

/// True for a byte that begins a character (ASCII or a lead byte; not `0x80..=0xBF`).
pub(crate) fn begins_char(b: u8) -> bool {
    !(0x80..=0xbf).contains(&b)
}

/// Where the bytes from the root to a node stand as UTF-8.
#[derive(Clone, Copy)]
enum Utf8Prefix {
    /// Not a prefix of valid UTF-8.
    Invalid,
    /// Valid, the last character begun after this depth (equal to the depth: at a boundary).
    Valid { boundary: usize },
}

impl TextIndex {
    /// Builds the index of `trie`, one pass over its nodes.
    pub(crate) fn new(trie: &impl TrieNodes) -> TextIndex {
        let n = trie.node_count();
        let mut x = TextIndex {
            token_nodes: Vec::new(),
            token_ids: Vec::new(),
            token_starts: Vec::new(),
            inner: Vec::new(),
            by_byte: vec![Vec::new(); 256],
            chars: vec![0; n],
            long_tokens: Vec::new(),
            long_inner: Vec::new(),
        };
        // Per depth: the bytes from the root, where they stand, and the characters begun.
        let mut path = vec![0u8; trie.max_depth() + 2];
        let mut prefix = vec![Utf8Prefix::Valid { boundary: 0 }; trie.max_depth() + 2];
        let mut counts = vec![0u16; trie.max_depth() + 2];
        let mut i = 1;
        while i < n {
            let (depth, byte, next, token) = trie.node(i);
            let d = depth as usize;
            x.chars[i] = counts[d - 1].saturating_add(u16::from(begins_char(byte)));
            counts[d] = x.chars[i];
            let Utf8Prefix::Valid { boundary } = prefix[d - 1] else {
                unreachable!("a subtree below an invalid prefix is skipped")
            };
            if boundary == d - 1 {
                // Listed whatever the byte: what follows the text decides.
                x.by_byte[byte as usize].push(i as u32);
            }
            path[d] = byte;
            prefix[d] = match std::str::from_utf8(&path[boundary + 1..=d]) {
                Ok(_) => Utf8Prefix::Valid { boundary: d },
                // The last character is begun and not finished.
                Err(e) if e.error_len().is_none() => Utf8Prefix::Valid { boundary },
                Err(_) => Utf8Prefix::Invalid,
            };
            let Utf8Prefix::Valid { boundary } = prefix[d] else {
                i = next as usize;
                continue;
            };
            let long = x.chars[i] > LONG_CHARS;
            if token {
                if long {
                    x.long_tokens.push(x.token_nodes.len() as u32);
                }
                x.token_nodes.push(i as u32);
                x.token_starts.push(x.token_ids.len() as u32);
                trie.push_tokens(i, &mut x.token_ids);
            }
            if boundary == d && trie.has_children(i) {
                if long {
                    x.long_inner.push(x.inner.len() as u32);
                }
                x.inner.push(i as u32);
            }
            i += 1;
        }
        x.token_starts.push(x.token_ids.len() as u32);
        x
    }

    /// The token ids of `token_nodes[nodes]`.
    pub(crate) fn tokens_of(&self, nodes: std::ops::Range<usize>) -> &[u32] {
        &self.token_ids
            [self.token_starts[nodes.start] as usize..self.token_starts[nodes.end] as usize]
    }
}
