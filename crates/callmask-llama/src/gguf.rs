//! GGUF vocabularies through llama.cpp (`llama-cpp-2`).

use callmask::vocab::{Tokenize, VocabSource};
use callmask::{Error, Result, TokenId, Vocab};
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::LlamaCppError;
use llama_cpp_sys_2 as sys;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::OnceLock;

/// The process-wide llama.cpp backend, initialised on first use (llama.cpp's logging is routed to
/// `tracing`, so it is silent unless the application installs a subscriber).
///
/// Use this rather than `LlamaBackend::init()`, which fails when called twice in one process. If
/// the application initialised the backend itself before, that initialisation is reused.
pub fn llama_backend() -> Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            catch_unwind(|| {
                llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
                match LlamaBackend::init() {
                    Ok(b) => Ok(b),
                    // Someone else initialised it: it is initialised, which is all a
                    // `LlamaBackend` value attests. Ours lives in a static and is never dropped.
                    Err(LlamaCppError::BackendAlreadyInitialized) => Ok(LlamaBackend {}),
                    Err(e) => Err(format!("cannot initialise llama.cpp: {e}")),
                }
            })
            .unwrap_or_else(|_| Err("llama.cpp panicked while initialising".into()))
        })
        .as_ref()
        .map_err(|e| Error::Vocab(e.clone()))
}

/// A llama.cpp model loaded vocabulary-only, kept for tokenizing.
pub(crate) struct GgufModel {
    model: LlamaModel,
}

impl Tokenize for GgufModel {
    fn source(&self) -> VocabSource {
        VocabSource::Gguf
    }

    /// Tokenizes plain text: no BOS, special-token spellings not parsed.
    fn tokenize(&self, text: &str) -> Result<Vec<TokenId>> {
        let tokens = catch_unwind(AssertUnwindSafe(|| {
            self.model.vocab().tokenize(text.as_bytes(), false, false)
        }))
        .map_err(|_| Error::Vocab("llama.cpp tokenization failed (text too long?)".into()))?;
        tokens
            .into_iter()
            .map(|t| {
                TokenId::try_from(t.0)
                    .map_err(|_| Error::Vocab(format!("llama.cpp returned token id {}", t.0)))
            })
            .collect()
    }
}

/// Loads a GGUF file's vocabulary.
pub(crate) fn load(path: &Path) -> Result<Vocab> {
    // llama.cpp only says "null result" on failure; check readability first for a useful error.
    std::fs::File::open(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let backend = llama_backend()?;
    let params = LlamaModelParams::default().with_vocab_only(true);
    let model = catch_unwind(AssertUnwindSafe(|| {
        LlamaModel::load_from_file(backend, path, &params)
    }))
    .map_err(|_| Error::Vocab(format!("llama.cpp panicked loading {}", path.display())))?
    .map_err(|e| Error::Vocab(format!("llama.cpp cannot load {}: {e}", path.display())))?;
    let table = catch_unwind(AssertUnwindSafe(|| read_table(&model)))
        .map_err(|_| Error::Vocab(format!("llama.cpp panicked reading {}", path.display())))??;
    let (tokens, special, eos) = table;
    Vocab::from_loaded(tokens, special, eos, Box::new(GgufModel { model }))
}

/// Token table read from llama.cpp: bytes, special flags, end-of-generation ids.
type Table = (Vec<Vec<u8>>, Vec<bool>, Vec<TokenId>);

/// What llama.cpp says of one token: its bytes (special tokens: their text), its attribute bits
/// (`llama_token_attr`), whether it is a control token, whether it ends generation.
struct TokenInfo {
    piece: Vec<u8>,
    attr: u32,
    control: bool,
    eog: bool,
}

/// Builds the table from llama.cpp's answers for each token id: special tokens are control,
/// unknown and unused tokens; end-of-generation tokens are those llama.cpp says end it.
fn table_from(n: usize, info: impl Fn(i32) -> TokenInfo) -> Table {
    let special_bits = sys::LLAMA_TOKEN_ATTR_CONTROL
        | sys::LLAMA_TOKEN_ATTR_UNKNOWN
        | sys::LLAMA_TOKEN_ATTR_UNUSED;
    let mut tokens = Vec::with_capacity(n);
    let mut special = Vec::with_capacity(n);
    let mut eos = Vec::new();
    for i in 0..n {
        let t = info(i as i32);
        special.push(t.control || t.attr & special_bits != 0);
        tokens.push(t.piece);
        if t.eog {
            eos.push(i as TokenId);
        }
    }
    (tokens, special, eos)
}

/// Reads every token's bytes, special flag and end-of-generation flag.
fn read_table(model: &LlamaModel) -> Result<Table> {
    let vocab = model.vocab();
    let n = usize::try_from(vocab.n_tokens())
        .map_err(|_| Error::Vocab(format!("llama.cpp reports {} tokens", vocab.n_tokens())))?;
    Ok(table_from(n, |i| {
        let t = LlamaToken::new(i);
        TokenInfo {
            // `special = true` renders control tokens as their text; normal tokens are decoded
            // (`▁` -> space, byte tokens -> the byte).
            piece: vocab.token_to_piece(t, true, None),
            attr: vocab.attr(t).bits(),
            control: vocab.is_control(t),
            eog: vocab.is_eog(t),
        }
    }))
}

/// The tokenizer of a vocabulary read from a bare `llama_vocab` pointer: none (the pointer
/// belongs to the caller's model, which may be freed before the vocabulary).
struct NoTokenizer;

impl Tokenize for NoTokenizer {
    fn tokenize(&self, _text: &str) -> Result<Vec<TokenId>> {
        Err(Error::Vocab(
            "a vocabulary read from a llama_vocab pointer has no tokenizer".into(),
        ))
    }
}

/// A vocabulary read from a `llama_vocab` that the caller loaded (a C program's model): the same
/// token table as [`crate::GgufVocab::from_gguf`] reads, without a tokenizer
/// ([`Vocab::tokenize`] fails). The vocabulary copies what it needs: the model may be freed
/// afterwards.
///
/// # Safety
/// `vocab` must be null or point to a live `llama_vocab` (from `llama_model_get_vocab`) that no
/// one frees during the call.
pub unsafe fn vocab_from_llama_vocab(vocab: *const sys::llama_vocab) -> Result<Vocab> {
    if vocab.is_null() {
        return Err(Error::Vocab("null llama_vocab".into()));
    }
    // SAFETY: `vocab` is live for the call (this function's contract).
    let n = unsafe { sys::llama_vocab_n_tokens(vocab) };
    let n =
        usize::try_from(n).map_err(|_| Error::Vocab(format!("llama.cpp reports {n} tokens")))?;
    let table = catch_unwind(AssertUnwindSafe(|| {
        table_from(n, |i| {
            // SAFETY: `vocab` is live and `i` is a token id below `n_tokens`.
            unsafe {
                TokenInfo {
                    piece: piece(vocab, i),
                    attr: sys::llama_vocab_get_attr(vocab, i),
                    control: sys::llama_vocab_is_control(vocab, i),
                    eog: sys::llama_vocab_is_eog(vocab, i),
                }
            }
        })
    }))
    .map_err(|_| Error::Vocab("panicked reading a llama_vocab".into()))?;
    let (tokens, special, eos) = table;
    Vocab::from_loaded(tokens, special, eos, Box::new(NoTokenizer))
}

/// Token `i`'s bytes as `llama_token_to_piece` renders it (special tokens as their text).
///
/// # Safety
/// `vocab` must point to a live `llama_vocab`.
unsafe fn piece(vocab: *const sys::llama_vocab, i: i32) -> Vec<u8> {
    let mut buf = vec![0u8; 32];
    for _ in 0..2 {
        // SAFETY: `buf` is writable for `buf.len()` bytes; `vocab` is live (caller's contract).
        let r = unsafe {
            sys::llama_token_to_piece(vocab, i, buf.as_mut_ptr().cast(), buf.len() as i32, 0, true)
        };
        if r >= 0 {
            buf.truncate(r as usize);
            return buf;
        }
        buf.resize(r.unsigned_abs() as usize, 0);
    }
    Vec::new()
}
