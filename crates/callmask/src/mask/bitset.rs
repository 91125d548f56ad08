//! Token sets: [`TokenMask`], one bit per token id (what a matcher fills), and the compact
//! sets a walk's result is kept in.
//!
//! Trade-offs: a cached set is a sorted id list when it holds fewer than one id per two 64-bit
//! words of the vocabulary, else a bitmap, so a string value's few hundred tokens stay small and
//! a free-text walk's whole vocabulary is one `or` per word.

use crate::error::{Error, Result};
use crate::vocab::TokenId;

/// A set of allowed tokens, one bit per token id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenMask {
    pub(super) words: Vec<u64>,
    len: usize,
}

impl TokenMask {
    /// An empty mask for a vocabulary of `len` tokens.
    pub fn new(len: usize) -> Self {
        TokenMask {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// Number of token ids the mask covers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a mask over an empty vocabulary.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when `token` is allowed.
    #[inline]
    pub fn is_allowed(&self, token: TokenId) -> bool {
        let t = token as usize;
        t < self.len && self.words[t / 64] >> (t % 64) & 1 == 1
    }

    /// Number of allowed tokens.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The allowed token ids, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = TokenId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros();
                w &= w - 1;
                Some((i * 64) as TokenId + b)
            })
        })
    }

    /// The bits, 64 tokens a word, token `t` at bit `t % 64` of word `t / 64`.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Writes the mask in the layout vLLM, SGLang, llguidance and XGrammar share: 32 tokens a
    /// word, token `t` allowed iff bit `t % 32` of `out[t / 32]` is set. `out` may be longer than
    /// `ceil(len / 32)` words (a model's logits are often wider than its tokenizer): the extra
    /// tokens are padding and are written as not allowed.
    ///
    /// [`Error::BitmaskSize`] (nothing written) when `out` has fewer than `ceil(len / 32)` words.
    pub fn write_u32_words(&self, out: &mut [u32]) -> Result<()> {
        let need = self.len.div_ceil(32);
        if out.len() < need {
            return Err(Error::BitmaskSize {
                words: out.len(),
                needed: need,
            });
        }
        for (i, o) in out.iter_mut().enumerate() {
            let w = self.words.get(i / 2).copied().unwrap_or(0);
            *o = if i % 2 == 0 {
                w as u32
            } else {
                (w >> 32) as u32
            };
        }
        Ok(())
    }

    pub(super) fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    #[inline]
    pub(super) fn set(&mut self, token: TokenId) {
        let t = token as usize;
        self.words[t / 64] |= 1 << (t % 64);
    }
}

/// A set of token ids kept in a cache: sorted ids, or a bitmap of the whole vocabulary.
#[derive(Debug)]
pub(super) enum TokenSet {
    /// A few ids.
    Sparse(Vec<TokenId>),
    /// One bit per token id.
    Dense(Vec<u64>),
}

/// A [`TokenSet`] being gathered: its ids while they are few (a state's cost groups mostly
/// hold a handful of tokens each, where a bitmap of the vocabulary is tens of kilobytes to
/// zero, fill and keep), then a bitmap.
#[derive(Debug)]
pub(super) enum TokenSetBuilder {
    /// The ids so far (unsorted, possibly repeated).
    Ids(Vec<TokenId>),
    /// One bit per token id.
    Words(Vec<u64>),
}

impl Default for TokenSetBuilder {
    fn default() -> Self {
        TokenSetBuilder::Ids(Vec::new())
    }
}

impl TokenSetBuilder {
    /// Turns the ids into a bitmap of `words` words.
    fn densify(&mut self, words: usize) {
        if let TokenSetBuilder::Ids(ids) = self {
            let mut w = vec![0u64; words];
            for &t in ids.iter() {
                w[t as usize / 64] |= 1 << (t % 64);
            }
            *self = TokenSetBuilder::Words(w);
        }
    }

    /// Adds `token` (a vocabulary of `words` bitmap words).
    pub(super) fn add(&mut self, token: TokenId, words: usize) {
        match self {
            TokenSetBuilder::Ids(ids) => {
                ids.push(token);
                if ids.len() * 2 >= words {
                    self.densify(words);
                }
            }
            TokenSetBuilder::Words(w) => w[token as usize / 64] |= 1 << (token % 64),
        }
    }

    /// Adds every token of `set` (a vocabulary of `words` bitmap words).
    pub(super) fn add_set(&mut self, set: &TokenSet, words: usize) {
        match set {
            TokenSet::Sparse(ids) => ids.iter().for_each(|&t| self.add(t, words)),
            TokenSet::Dense(d) => {
                self.densify(words);
                if let TokenSetBuilder::Words(w) = self {
                    w.iter_mut().zip(d).for_each(|(a, b)| *a |= b);
                }
            }
        }
    }

    /// The set gathered: sorted distinct ids, or the bitmap.
    pub(super) fn finish(self) -> TokenSet {
        match self {
            TokenSetBuilder::Ids(mut ids) => {
                ids.sort_unstable();
                ids.dedup();
                TokenSet::Sparse(ids)
            }
            TokenSetBuilder::Words(w) => TokenSet::Dense(w),
        }
    }
}

impl TokenSet {
    pub(super) fn new(ids: Vec<TokenId>, vocab_len: usize) -> TokenSet {
        let words = vocab_len.div_ceil(64);
        if ids.len() * 2 < words {
            TokenSet::Sparse(ids)
        } else {
            let mut w = vec![0u64; words];
            for t in ids {
                w[t as usize / 64] |= 1 << (t % 64);
            }
            TokenSet::Dense(w)
        }
    }

    /// True when the set holds no token.
    pub(super) fn is_empty(&self) -> bool {
        match self {
            TokenSet::Sparse(ids) => ids.is_empty(),
            TokenSet::Dense(words) => words.iter().all(|&w| w == 0),
        }
    }

    pub(super) fn or_into(&self, mask: &mut TokenMask) {
        match self {
            TokenSet::Sparse(ids) => ids.iter().for_each(|&t| mask.set(t)),
            TokenSet::Dense(w) => mask.words.iter_mut().zip(w).for_each(|(a, b)| *a |= b),
        }
    }

    pub(super) fn bytes(&self) -> usize {
        match self {
            TokenSet::Sparse(v) => v.len() * 4,
            TokenSet::Dense(w) => w.len() * 8,
        }
    }

    /// The ids, sorted.
    #[cfg(test)]
    pub(super) fn sorted_ids(&self) -> Vec<TokenId> {
        let mut ids = match self {
            TokenSet::Sparse(ids) => ids.clone(),
            TokenSet::Dense(w) => (0..w.len() * 64)
                .filter(|&t| w[t / 64] >> (t % 64) & 1 == 1)
                .map(|t| t as TokenId)
                .collect(),
        };
        ids.sort_unstable();
        ids
    }
}

/// The tokens a walk finds: ids one at a time from the trie, and whole sets from shared walks,
/// a dense one OR-ed into a bitmap (a free-text walk below one first byte can hold tens of
/// thousands of tokens: a few thousand word operations, not a copy of its list and one write
/// per id).
#[derive(Debug, Default)]
pub(super) struct WalkTokens {
    /// The ids found one at a time (unsorted, possibly repeated).
    pub(super) ids: Vec<TokenId>,
    /// The dense sets added, OR-ed (empty until the first).
    words: Vec<u64>,
}

impl WalkTokens {
    /// Adds every token of `set` (a few ids into the bitmap once there is one).
    pub(super) fn add_set(&mut self, set: &TokenSet) {
        match set {
            TokenSet::Sparse(ids) if self.words.is_empty() => self.ids.extend_from_slice(ids),
            TokenSet::Sparse(ids) => {
                for &t in ids {
                    self.words[t as usize / 64] |= 1 << (t % 64);
                }
            }
            TokenSet::Dense(d) if self.words.is_empty() => self.words.extend_from_slice(d),
            TokenSet::Dense(d) => self.words.iter_mut().zip(d).for_each(|(a, b)| *a |= b),
        }
    }

    /// The tokens found, as a set over a vocabulary of `vocab_len` tokens.
    pub(super) fn finish(self, vocab_len: usize) -> TokenSet {
        if self.words.is_empty() {
            return TokenSet::new(self.ids, vocab_len);
        }
        let mut w = self.words;
        for t in self.ids {
            w[t as usize / 64] |= 1 << (t % 64);
        }
        TokenSet::Dense(w)
    }

    /// Sets the tokens found in `mask`.
    pub(super) fn or_into(&self, mask: &mut TokenMask) {
        self.ids.iter().for_each(|&t| mask.set(t));
        mask.words
            .iter_mut()
            .zip(&self.words)
            .for_each(|(a, b)| *a |= b);
    }
}
