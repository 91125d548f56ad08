//! Token vocabularies: each token's bytes, which tokens are special, which end generation, and how
//! the model tokenizes text.
//!
//! A [`Vocab`] comes from one of three sources:
//! - [`Vocab::from_tokenizer_json`]: a Hugging Face `tokenizer.json` (byte-level BPE as in
//!   Llama 3 and Qwen, or SentencePiece-style with `▁` for space and `<0xNN>` byte fallback);
//! - [`Vocab::from_parts`]: explicit token bytes, for tests and custom tokenizers;
//! - [`Vocab::from_loaded`]: a table read by another tokenizer library, with that library as the
//!   [`Tokenize`] implementation (the `callmask-llama` crate loads GGUF files this way, so this
//!   crate needs no llama.cpp).
//!
//! Token bytes are *decoded* bytes: what the token contributes to the output text. Special
//! (control) tokens carry their text (e.g. `<|eot_id|>`) but never match plain text.

mod hf;
pub(crate) mod text_index;
pub(crate) mod trie;

use crate::cache::Caches;
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use trie::TokenTrie;

/// A token id as the model numbers it.
pub type TokenId = u32;

/// Texts of special tokens that end generation, recognised by name when the source (a
/// `tokenizer.json`) does not say which tokens end generation: Llama 3, ChatML (Qwen, Kimi,
/// Hermes), Gemma, Mistral, harmony (gpt-oss: `<|return|>`, `<|end|>`), DeepSeek V3/R1 and
/// Command R7B.
pub const EOG_TOKEN_NAMES: [&str; 12] = [
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<end_of_turn>",
    "<eos>",
    "</s>",
    "<|end|>",
    "<|return|>",
    "<｜end▁of▁sentence｜>",
    "<|END_OF_TURN_TOKEN|>",
];

/// Largest vocabulary accepted (ids must stay below this), a guard against absurd ids in
/// malformed files.
const MAX_VOCAB: usize = 1 << 24;

/// Where the tokenizer of a [`Vocab`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VocabSource {
    /// Built with [`Vocab::from_parts`]: no tokenizer, [`Vocab::tokenize`] fails.
    Parts,
    /// Loaded from a Hugging Face `tokenizer.json`, tokenized with the `tokenizers` crate.
    TokenizerJson,
    /// Loaded from a GGUF file, tokenized by llama.cpp (the `callmask-llama` crate).
    Gguf,
    /// Loaded by another tokenizer library through [`Vocab::from_loaded`].
    Other,
}

/// A tokenizer that turns plain text into token ids, kept inside a [`Vocab`] built with
/// [`Vocab::from_loaded`] (llama.cpp's, in `callmask-llama`; any other library's).
pub trait Tokenize: Send + Sync {
    /// Where this tokenizer comes from, reported by [`Vocab::source`].
    fn source(&self) -> VocabSource {
        VocabSource::Other
    }
    /// Tokenizes plain text: no BOS, special-token spellings not parsed. Errors are
    /// [`Error::Vocab`] with the library's message.
    fn tokenize(&self, text: &str) -> Result<Vec<TokenId>>;
}

/// The tokenizer kept inside a [`Vocab`] for [`Vocab::tokenize`].
enum Backend {
    /// No tokenizer.
    None,
    /// A Hugging Face tokenizer (boxed: it is large).
    Hf(Box<tokenizers::Tokenizer>),
    /// Another library's tokenizer.
    Loaded(Box<dyn Tokenize>),
}

/// A model's vocabulary: each token's bytes, which tokens are special, which end generation, and
/// (when loaded from a tokenizer) how the model tokenizes text.
///
/// Cheap to share: wrap it in an `Arc`; it is `Send + Sync`.
pub struct Vocab {
    /// All tokens' bytes, concatenated.
    bytes: Vec<u8>,
    /// Token `i` is `bytes[offsets[i]..offsets[i + 1]]`; `len() + 1` entries.
    offsets: Vec<u32>,
    /// Special (control) flag per token.
    special: Vec<bool>,
    /// End-of-generation tokens, ascending, no duplicates.
    eos: Vec<TokenId>,
    /// Special tokens by text (the lowest id wins when two share a text; empty texts left out).
    special_by_text: HashMap<Box<[u8]>, TokenId>,
    /// Non-special token ids sorted by (bytes, id), built on first use of [`Vocab::token_id`].
    sorted_normal: OnceLock<Vec<TokenId>>,
    /// Per byte: the [`TokenPrefix`] of the tokens that begin with it, and whether it is one.
    first_byte: OnceLock<Vec<(TokenPrefix, bool)>>,
    /// The tokenizer, if any.
    backend: Backend,
    /// Unique in the process: what caches key this vocabulary's walks by.
    id: u64,
    /// The token trie, built on first use.
    trie: OnceLock<Arc<TokenTrie>>,
    /// The caches automata over this vocabulary use when their grammar names none.
    caches: Caches,
}

/// The next [`Vocab::id`].
static NEXT_VOCAB_ID: AtomicU64 = AtomicU64::new(1);

impl fmt::Debug for Vocab {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vocab")
            .field("source", &self.source())
            .field("len", &self.len())
            .field("special", &self.special.iter().filter(|s| **s).count())
            .field("eos", &self.eos)
            .finish_non_exhaustive()
    }
}

impl Vocab {
    /// A vocabulary from explicit parts: each token's bytes, which are special, which end
    /// generation. Such a vocabulary has no tokenizer ([`Vocab::tokenize`] fails).
    ///
    /// Errors ([`Error::Vocab`]) when `tokens` and `special` differ in length, when there are
    /// 2^24 tokens or more, when an `eos` id is out of range, or when a non-special token has no
    /// bytes (it would match the empty string everywhere). Duplicate `eos` ids are merged.
    pub fn from_parts(tokens: Vec<Vec<u8>>, special: Vec<bool>, eos: Vec<TokenId>) -> Result<Self> {
        if tokens.len() != special.len() {
            return Err(Error::Vocab(format!(
                "{} tokens but {} special flags",
                tokens.len(),
                special.len()
            )));
        }
        if let Some(i) = (0..tokens.len()).find(|&i| !special[i] && tokens[i].is_empty()) {
            return Err(Error::Vocab(format!(
                "token {i} is not special but has no bytes"
            )));
        }
        Self::assemble(tokens, special, eos, Backend::None)
    }

    /// Loads a Hugging Face `tokenizer.json`.
    ///
    /// [`Error::Io`] when the file cannot be read; [`Error::Json`] when it is not JSON;
    /// [`Error::Vocab`] when it is JSON but not a tokenizer this crate understands.
    /// See [`Vocab::from_tokenizer_json_str`] for how tokens are read.
    pub fn from_tokenizer_json(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let raw = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let json = String::from_utf8(raw)
            .map_err(|e| Error::Vocab(format!("{}: not UTF-8: {e}", path.display())))?;
        Self::from_tokenizer_json_str(&json)
    }

    /// Loads a Hugging Face `tokenizer.json` from its text.
    ///
    /// - Byte-level BPE (a `ByteLevel` decoder or pre-tokenizer: GPT-2, Llama 3, Qwen): the GPT-2
    ///   byte-to-unicode mapping is undone, so `Ġthe` is ` the`.
    /// - SentencePiece-style (`Metaspace`, a `Replace` of `▁`, `ByteFallback`, or a Unigram
    ///   model): `▁` is a space, and with byte fallback `<0xNN>` is the byte `0xNN`.
    /// - Anything else (WordLevel, WordPiece...): the token's text as it is.
    ///
    /// The vocabulary size is the largest id in `model.vocab` and the added tokens, plus one.
    /// Ids present in neither (holes) become special tokens with no bytes: they can never be
    /// produced from text. Added tokens marked `"special": true` are special (their bytes are
    /// their text); other added tokens are normal tokens whose bytes are their content, as typed
    /// (no byte-level decoding). Added tokens get the ids the `tokenizers` crate gives them,
    /// which are the ids [`Vocab::tokenize`] returns: it renumbers (with only a warning) an added
    /// token whose `id` in the file disagrees with its own sequential assignment, as in a file
    /// with holes. The model's unknown token (`unk_token` / `unk_id`) is special too, and so is
    /// any normal token that decodes to no bytes.
    ///
    /// End-of-generation tokens are the special tokens named in [`EOG_TOKEN_NAMES`].
    ///
    /// Llama 3: a vocabulary of exactly 128,256 tokens whose ids 128000, 128001, 128006, 128007
    /// and 128009 are `<|begin_of_text|>`, `<|end_of_text|>`, `<|start_header_id|>`,
    /// `<|end_header_id|>` and `<|eot_id|>` gets the Llama 3.1 names for its reserved tokens:
    /// 128004 `<|finetune_right_pad_id|>`, 128008 `<|eom_id|>`, 128010 `<|python_tag|>`, and
    /// `<|reserved_special_token_N|>` renumbered as in Llama 3.1 (0-1 at 128002-3, 2 at 128005,
    /// 3-247 at 128011-128255). Only tokens currently named `<|reserved_special_token_K|>` are
    /// renamed, so a Llama 3.1 file is unchanged and custom names are kept.
    pub fn from_tokenizer_json_str(json: &str) -> Result<Self> {
        hf::load(json)
    }

    /// A vocabulary read by another tokenizer library: each token's decoded bytes (special
    /// tokens: their text), special flags, end-of-generation ids, and the library's tokenizer.
    ///
    /// The loader fix-ups of [`Vocab::from_tokenizer_json`] apply: normal tokens without bytes
    /// become special, and Llama 3.0 reserved names get their Llama 3.1 meaning. Errors as
    /// [`Vocab::from_parts`].
    pub fn from_loaded(
        mut tokens: Vec<Vec<u8>>,
        mut special: Vec<bool>,
        eos: Vec<TokenId>,
        tokenizer: Box<dyn Tokenize>,
    ) -> Result<Self> {
        if tokens.len() != special.len() {
            return Err(Error::Vocab(format!(
                "{} tokens but {} special flags",
                tokens.len(),
                special.len()
            )));
        }
        normalize_loaded(&mut tokens, &mut special);
        Self::assemble(tokens, special, eos, Backend::Loaded(tokenizer))
    }

    /// Builds the vocabulary, validating ids; `eos` is sorted and deduplicated.
    fn assemble(
        tokens: Vec<Vec<u8>>,
        special: Vec<bool>,
        mut eos: Vec<TokenId>,
        backend: Backend,
    ) -> Result<Self> {
        debug_assert_eq!(tokens.len(), special.len());
        let n = tokens.len();
        if n >= MAX_VOCAB {
            return Err(Error::Vocab(format!(
                "{n} tokens: more than the {MAX_VOCAB} supported"
            )));
        }
        if let Some(&bad) = eos.iter().find(|&&e| e as usize >= n) {
            return Err(Error::Vocab(format!(
                "end-of-generation token {bad} is outside the vocabulary of {n} tokens"
            )));
        }
        eos.sort_unstable();
        eos.dedup();
        let total: usize = tokens.iter().map(Vec::len).sum();
        if u32::try_from(total).is_err() {
            return Err(Error::Vocab(format!(
                "tokens hold {total} bytes in all: more than 4 GiB"
            )));
        }
        let mut bytes = Vec::with_capacity(total);
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0u32);
        let mut special_by_text = HashMap::new();
        for (i, t) in tokens.iter().enumerate() {
            bytes.extend_from_slice(t);
            offsets.push(bytes.len() as u32);
            if special[i] && !t.is_empty() {
                special_by_text
                    .entry(t.clone().into_boxed_slice())
                    .or_insert(i as TokenId);
            }
        }
        Ok(Vocab {
            bytes,
            offsets,
            special,
            eos,
            special_by_text,
            sorted_normal: OnceLock::new(),
            first_byte: OnceLock::new(),
            backend,
            id: NEXT_VOCAB_ID.fetch_add(1, Ordering::Relaxed),
            trie: OnceLock::new(),
            caches: Caches::default(),
        })
    }

    /// A number no other vocabulary of this process has: caches shared by several vocabularies
    /// key their entries by it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The caches that automata over this vocabulary use when their grammar was compiled
    /// without any ([`crate::CompileOptions::caches`]): made with the vocabulary, of
    /// [`crate::DEFAULT_CACHE_BYTES`]. Pass it to compiles (`CompileOptions::caches`) to share
    /// their lexemes too.
    pub fn caches(&self) -> &Caches {
        &self.caches
    }

    /// The token trie, built on first use and then shared.
    pub(crate) fn trie(&self) -> &Arc<TokenTrie> {
        self.trie.get_or_init(|| Arc::new(TokenTrie::new(self)))
    }

    /// Number of tokens (largest id plus one).
    pub fn len(&self) -> usize {
        self.special.len()
    }

    /// True for an empty vocabulary.
    pub fn is_empty(&self) -> bool {
        self.special.is_empty()
    }

    /// Where the tokenizer comes from.
    pub fn source(&self) -> VocabSource {
        match &self.backend {
            Backend::None => VocabSource::Parts,
            Backend::Hf(_) => VocabSource::TokenizerJson,
            Backend::Loaded(t) => t.source(),
        }
    }

    /// The bytes a token stands for (decoded: byte-level mapping undone, `▁` as a space,
    /// `<0xNN>` as that byte); for special tokens their text. `None` out of range.
    pub fn token_bytes(&self, id: TokenId) -> Option<&[u8]> {
        let i = id as usize;
        if i >= self.len() {
            return None;
        }
        let (a, b) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        Some(&self.bytes[a..b])
    }

    /// True for special (control) tokens, which never match plain text. False out of range.
    pub fn is_special(&self, id: TokenId) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }

    /// Tokens that end generation, ascending.
    pub fn eos_tokens(&self) -> &[TokenId] {
        &self.eos
    }

    /// True when `id` ends generation.
    pub fn is_eos(&self, id: TokenId) -> bool {
        self.eos.binary_search(&id).is_ok()
    }

    /// The same vocabulary with `extra` added to its end-of-generation tokens (a model's
    /// `generation_config.json` or tokenizer often names more than the tokenizer file marks, e.g.
    /// Llama 3.1 Instruct's `<|eot_id|>` and `<|eom_id|>`). [`Error::Vocab`] when an id is
    /// outside the vocabulary.
    pub fn with_eos_tokens(mut self, extra: &[TokenId]) -> Result<Self> {
        let n = self.len();
        if let Some(&bad) = extra.iter().find(|&&e| e as usize >= n) {
            return Err(Error::Vocab(format!(
                "end-of-generation token {bad} is outside the vocabulary of {n} tokens"
            )));
        }
        self.eos.extend_from_slice(extra);
        self.eos.sort_unstable();
        self.eos.dedup();
        Ok(self)
    }

    /// The same vocabulary with exactly `ids` as its end-of-generation tokens: for an engine
    /// that stops only on some of the tokens the tokenizer file marks (Qwen3's file marks
    /// `<|endoftext|>` too; a model whose generation config names only `<|im_end|>` is not
    /// stopped by it), so that a grammar ends only on a token the engine stops on.
    /// [`Error::Vocab`] when `ids` is empty or an id is outside the vocabulary.
    ///
    /// ```
    /// # use callmask::Vocab;
    /// let v = Vocab::from_parts(vec![b"a".to_vec(), b"<e1>".to_vec(), b"<e2>".to_vec()],
    ///                           vec![false, true, true], vec![1, 2])?;
    /// assert_eq!(v.with_only_eos_tokens(&[2])?.eos_tokens(), &[2]);
    /// # Ok::<(), callmask::Error>(())
    /// ```
    pub fn with_only_eos_tokens(mut self, ids: &[TokenId]) -> Result<Self> {
        if ids.is_empty() {
            return Err(Error::Vocab(
                "no end-of-generation token: a grammar could never end".into(),
            ));
        }
        self.eos.clear();
        self.with_eos_tokens(ids)
    }

    /// A special token by its text, e.g. `"<|python_tag|>"` (the lowest id if several share it).
    /// Only special tokens: a normal token with that text is found by [`Vocab::token_id`].
    pub fn special_token(&self, text: &str) -> Option<TokenId> {
        self.special_by_text.get(text.as_bytes()).copied()
    }

    /// The non-special token whose bytes are exactly `bytes` (the lowest id if several), e.g.
    /// Qwen3's `<tool_call>`, an added token that is not special. The first call builds a sorted
    /// index (a few milliseconds, 4 bytes per token).
    pub fn token_id(&self, bytes: &[u8]) -> Option<TokenId> {
        let sorted = self.sorted_normal();
        let start = sorted.partition_point(|&i| self.bytes_of(i) < bytes);
        sorted
            .get(start)
            .copied()
            .filter(|&i| self.bytes_of(i) == bytes)
    }

    /// Every non-special token, as a [`TokenPrefix`] that has matched no byte yet.
    pub(crate) fn all_tokens_prefix(&self) -> TokenPrefix {
        TokenPrefix {
            lo: 0,
            hi: self.sorted_normal().len() as u32,
            depth: 0,
        }
    }

    /// [`Vocab::extend_prefix`] of [`Vocab::all_tokens_prefix`], from a table built on first use.
    pub(crate) fn first_byte_prefix(&self, byte: u8) -> (TokenPrefix, bool) {
        self.first_byte.get_or_init(|| {
            (0..=255u8)
                .map(|b| self.extend_prefix(self.all_tokens_prefix(), b))
                .collect()
        })[byte as usize]
    }

    /// The non-special tokens of `p` whose next byte is `byte` (empty when none), and whether
    /// one of them is exactly the bytes matched with it: two binary searches within `p`.
    pub(crate) fn extend_prefix(&self, p: TokenPrefix, byte: u8) -> (TokenPrefix, bool) {
        let sorted = &self.sorted_normal()[p.lo as usize..p.hi as usize];
        let d = p.depth as usize;
        // Within `p` every token starts with the same `d` bytes; the ones of exactly `d` bytes
        // sort first, then by their byte at `d`.
        let below = |i: &TokenId, inclusive: bool| {
            let b = self.bytes_of(*i);
            b.len() <= d || if inclusive { b[d] <= byte } else { b[d] < byte }
        };
        let lo = sorted.partition_point(|i| below(i, false));
        let hi = sorted.partition_point(|i| below(i, true));
        let next = TokenPrefix {
            lo: p.lo + lo as u32,
            hi: p.lo + hi as u32,
            depth: p.depth + 1,
        };
        let exact = lo < hi && self.bytes_of(sorted[lo]).len() == d + 1;
        (next, exact)
    }

    /// The non-special tokens sorted by their bytes (then id), built on first use.
    fn sorted_normal(&self) -> &[TokenId] {
        self.sorted_normal.get_or_init(|| {
            let mut ids: Vec<TokenId> = (0..self.len() as TokenId)
                .filter(|&i| !self.special[i as usize])
                .collect();
            ids.sort_unstable_by(|&a, &b| self.bytes_of(a).cmp(self.bytes_of(b)).then(a.cmp(&b)));
            ids
        })
    }

    /// Calls `found(bytes, end)` for each non-special token that does not end generation and
    /// whose bytes a byte automaton walks from `start` without reaching `dead` (`step` is its
    /// transition function), `end` being the state after it. Tokens sharing a prefix share its
    /// steps, and a dead prefix skips every token that starts with it.
    pub(crate) fn token_walks(
        &self,
        start: u32,
        dead: u32,
        step: impl Fn(u32, u8) -> u32,
        mut found: impl FnMut(&[u8], u32),
    ) {
        let sorted = self.sorted_normal();
        // states[k]: the state after the first k bytes of `prev`.
        let mut states = vec![start];
        let mut prev: &[u8] = &[];
        let mut i = 0;
        while i < sorted.len() {
            let id = sorted[i];
            let b = self.bytes_of(id);
            let lcp = prev.iter().zip(b).take_while(|(x, y)| x == y).count();
            states.truncate(lcp + 1);
            prev = b;
            let mut died = false;
            while states.len() <= b.len() {
                let k = states.len() - 1;
                let next = step(states[k], b[k]);
                if next == dead {
                    // Skip every token that starts with the dead prefix.
                    let p = &b[..=k];
                    i += 1 + sorted[i + 1..].partition_point(|&t| self.bytes_of(t).starts_with(p));
                    died = true;
                    break;
                }
                states.push(next);
            }
            if died {
                continue;
            }
            if !b.is_empty() && !self.is_eos(id) {
                found(b, states[b.len()]);
            }
            i += 1;
        }
    }

    /// Calls `found(k)`, for `k` ascending, for each prefix `bytes[..k]` that is exactly a
    /// non-special token that does not end generation: the tokens a text may start with.
    pub(crate) fn token_prefixes(&self, bytes: &[u8], mut found: impl FnMut(usize)) {
        let sorted = self.sorted_normal();
        let mut lo = 0;
        for k in 1..=bytes.len() {
            let p = &bytes[..k];
            lo += sorted[lo..].partition_point(|&i| self.bytes_of(i) < p);
            let mut j = lo;
            // No token starts with `p`: none starts with a longer prefix either.
            match sorted.get(j) {
                Some(&i) if self.bytes_of(i).starts_with(p) => {}
                _ => return,
            }
            while let Some(&i) = sorted.get(j) {
                if self.bytes_of(i) != p {
                    break;
                }
                if !self.is_eos(i) {
                    found(k);
                    break;
                }
                j += 1;
            }
        }
    }

    /// Iterates over `(id, bytes)` of the special tokens.
    pub fn special_tokens(&self) -> impl Iterator<Item = (TokenId, &[u8])> + '_ {
        (0..self.len() as TokenId)
            .filter(|&i| self.special[i as usize])
            .map(|i| (i, self.bytes_of(i)))
    }

    /// Token bytes for an id known to be in range.
    fn bytes_of(&self, id: TokenId) -> &[u8] {
        let i = id as usize;
        &self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Tokenizes plain text as the model would: no BOS or other added tokens, and spellings of
    /// special tokens in the text (e.g. `<|eot_id|>`) are tokenized as ordinary text, never turned
    /// into the special token. (Non-special added tokens, such as Qwen3's `<tool_call>`, are
    /// matched, as the model's own tokenizer does.)
    ///
    /// [`Error::Vocab`] for a vocabulary built from parts (it has no tokenizer) or when the
    /// tokenizer fails.
    pub fn tokenize(&self, text: &str) -> Result<Vec<TokenId>> {
        match &self.backend {
            Backend::None => Err(Error::Vocab(
                "this vocabulary was built from parts and has no tokenizer".into(),
            )),
            Backend::Hf(tokenizer) => hf::tokenize(tokenizer, text),
            Backend::Loaded(t) => t.tokenize(text),
        }
    }

    /// The concatenated bytes of tokens (special tokens: their text); ids out of range are
    /// skipped.
    pub fn decode(&self, ids: &[TokenId]) -> Vec<u8> {
        let mut out = Vec::new();
        for &id in ids {
            if let Some(b) = self.token_bytes(id) {
                out.extend_from_slice(b);
            }
        }
        out
    }
}

/// Loader-side fix-ups shared by the `tokenizer.json` and GGUF loaders: normal tokens without
/// bytes become special, and Llama 3 vocabularies get the Llama 3.1 names.
fn normalize_loaded(tokens: &mut [Vec<u8>], special: &mut [bool]) {
    for (t, s) in tokens.iter().zip(special.iter_mut()) {
        if t.is_empty() {
            *s = true;
        }
    }
    apply_llama31_names(tokens, special);
}

/// The end-of-generation tokens of a vocabulary by name: special tokens named in
/// [`EOG_TOKEN_NAMES`].
fn eos_by_name(tokens: &[Vec<u8>], special: &[bool]) -> Vec<TokenId> {
    (0..tokens.len())
        .filter(|&i| special[i] && EOG_TOKEN_NAMES.iter().any(|n| n.as_bytes() == tokens[i]))
        .map(|i| i as TokenId)
        .collect()
}

/// Size of every Llama 3 family vocabulary.
const LLAMA3_VOCAB: usize = 128_256;

/// The Llama 3.1 name of special token `id` (128000..128256).
fn llama31_name(id: usize) -> String {
    match id {
        128_000 => "<|begin_of_text|>".into(),
        128_001 => "<|end_of_text|>".into(),
        128_002 => "<|reserved_special_token_0|>".into(),
        128_003 => "<|reserved_special_token_1|>".into(),
        128_004 => "<|finetune_right_pad_id|>".into(),
        128_005 => "<|reserved_special_token_2|>".into(),
        128_006 => "<|start_header_id|>".into(),
        128_007 => "<|end_header_id|>".into(),
        128_008 => "<|eom_id|>".into(),
        128_009 => "<|eot_id|>".into(),
        128_010 => "<|python_tag|>".into(),
        _ => format!("<|reserved_special_token_{}|>", id - 128_008),
    }
}

/// True for `<|reserved_special_token_K|>` with K a decimal number.
fn is_reserved_name(t: &[u8]) -> bool {
    t.strip_prefix(b"<|reserved_special_token_")
        .and_then(|r| r.strip_suffix(b"|>"))
        .is_some_and(|k| !k.is_empty() && k.iter().all(u8::is_ascii_digit))
}

/// Applies the Llama 3.1 special-token names to a Llama 3 family vocabulary (see
/// [`Vocab::from_tokenizer_json_str`]); leaves any other vocabulary alone.
fn apply_llama31_names(tokens: &mut [Vec<u8>], special: &[bool]) {
    if tokens.len() != LLAMA3_VOCAB {
        return;
    }
    let anchors: [(usize, &str); 5] = [
        (128_000, "<|begin_of_text|>"),
        (128_001, "<|end_of_text|>"),
        (128_006, "<|start_header_id|>"),
        (128_007, "<|end_header_id|>"),
        (128_009, "<|eot_id|>"),
    ];
    if !anchors
        .iter()
        .all(|&(id, name)| special[id] && tokens[id] == name.as_bytes())
    {
        return;
    }
    for (id, t) in tokens.iter_mut().enumerate().skip(128_002) {
        if special[id] && is_reserved_name(t) {
            *t = llama31_name(id).into_bytes();
        }
    }
}

/// The non-special tokens that begin with some bytes, as a range of the vocabulary's sorted
/// index ([`Vocab::extend_prefix`] narrows it by one byte): lets a caller follow every token
/// spelling of a growing byte string without looking each suffix up anew.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TokenPrefix {
    lo: u32,
    hi: u32,
    /// Bytes matched.
    depth: u32,
}

impl TokenPrefix {
    /// True when no token begins with the bytes matched.
    pub(crate) fn is_empty(&self) -> bool {
        self.lo >= self.hi
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn reserved_names() {
        assert!(is_reserved_name(b"<|reserved_special_token_12|>"));
        assert!(!is_reserved_name(b"<|reserved_special_token_|>"));
        assert!(!is_reserved_name(b"<|eot_id|>"));
        assert_eq!(llama31_name(128_011), "<|reserved_special_token_3|>");
        assert_eq!(llama31_name(128_255), "<|reserved_special_token_247|>");
    }

    /// Following a byte string with `extend_prefix` from every start finds exactly the
    /// suffixes `token_id` finds, and a start stays live exactly while some token begins there.
    #[test]
    fn prefix_ranges_agree_with_token_id() {
        let words: &[&[u8]] = &[
            b"a", b"ab", b"abc", b"b", b"bc", b"ca", b"cab", b"<e>", b"abd",
        ];
        let mut tokens: Vec<Vec<u8>> = words.iter().map(|w| w.to_vec()).collect();
        tokens.push(b"<eos>".to_vec());
        let mut special = vec![false; words.len()];
        special.push(true);
        let v = Vocab::from_parts(tokens, special, vec![words.len() as TokenId]).unwrap();
        let text = b"abcabdcab<e>x<eos>";
        let mut live: Vec<(usize, TokenPrefix)> = Vec::new();
        for (n, &byte) in text.iter().enumerate() {
            live.push((n, v.all_tokens_prefix()));
            let mut next = Vec::new();
            for (j, p) in live {
                let (q, exact) = v.extend_prefix(p, byte);
                let piece = &text[j..=n];
                assert_eq!(exact, v.token_id(piece).is_some(), "{:?}", piece);
                let begins = words.iter().any(|w| w.starts_with(piece));
                assert_eq!(!q.is_empty(), begins, "{:?}", piece);
                if !q.is_empty() {
                    next.push((j, q));
                }
            }
            live = next;
        }
    }
}
