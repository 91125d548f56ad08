//! GGUF vocabularies through llama.cpp (`llama-cpp-2`).

use callmask::vocab::{Tokenize, VocabSource};
use callmask::{Error, Result, TokenId, Vocab};
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token_type::LlamaTokenAttr;
use llama_cpp_2::LlamaCppError;
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

/// Reads every token's bytes, special flag and end-of-generation flag.
fn read_table(model: &LlamaModel) -> Result<Table> {
    let vocab = model.vocab();
    let n = usize::try_from(vocab.n_tokens())
        .map_err(|_| Error::Vocab(format!("llama.cpp reports {} tokens", vocab.n_tokens())))?;
    let mut tokens = Vec::with_capacity(n);
    let mut special = Vec::with_capacity(n);
    let mut eos = Vec::new();
    for i in 0..n {
        let t = LlamaToken::new(i as i32);
        let attr = vocab.attr(t);
        let is_special = vocab.is_control(t)
            || attr.contains(LlamaTokenAttr::Control)
            || attr.contains(LlamaTokenAttr::Unknown)
            || attr.contains(LlamaTokenAttr::Unused);
        // `special = true` renders control tokens as their text; normal tokens are decoded
        // (`▁` -> space, byte tokens -> the byte).
        tokens.push(vocab.token_to_piece(t, true, None));
        special.push(is_special);
        if vocab.is_eog(t) {
            eos.push(i as TokenId);
        }
    }
    Ok((tokens, special, eos))
}
