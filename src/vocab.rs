//! Token vocabularies: each token's bytes, which tokens are special, which end generation, and how
//! the model tokenizes text. (Being written: see the helper task.)

use crate::error::Result;
use std::path::Path;

/// A token id as the model numbers it.
pub type TokenId = u32;

/// A model's vocabulary.
#[derive(Debug)]
pub struct Vocab {
    tokens: Vec<Vec<u8>>,
    special: Vec<bool>,
    eos: Vec<TokenId>,
}

impl Vocab {
    /// A vocabulary from explicit parts: each token's bytes, which are special, which end generation.
    pub fn from_parts(tokens: Vec<Vec<u8>>, special: Vec<bool>, eos: Vec<TokenId>) -> Result<Self> {
        Ok(Vocab { tokens, special, eos })
    }
    /// Loads a Hugging Face `tokenizer.json`.
    pub fn from_tokenizer_json(_path: impl AsRef<Path>) -> Result<Self> {
        unimplemented!()
    }
    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }
    /// True for an empty vocabulary.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
    /// The bytes a token stands for (its text for special tokens), or `None` out of range.
    pub fn token_bytes(&self, id: TokenId) -> Option<&[u8]> {
        self.tokens.get(id as usize).map(|t| t.as_slice())
    }
    /// True for special (control) tokens, which never match plain text.
    pub fn is_special(&self, id: TokenId) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }
    /// Tokens that end generation.
    pub fn eos_tokens(&self) -> &[TokenId] {
        &self.eos
    }
}
