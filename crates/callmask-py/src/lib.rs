//! `callmask._callmask`: the native part of the Python package `callmask` (pyo3, abi3: one
//! wheel for every CPython >= 3.9). The Python package (`python/callmask/`) re-exports these
//! classes and adds the engine adapters.
//!
//! Bitmasks are written in place, by pointer, into the int32 LSB-first `(batch, ceil(n_vocab /
//! 32))` layout that vLLM, SGLang, llguidance and XGrammar share: any object with numpy's
//! `__array_interface__` (numpy arrays) or a torch CPU tensor. The dtype (4-byte integers),
//! shape, contiguity, alignment and writability are checked before any write, and the GIL is
//! released while the masks are computed. Every `callmask::Error` becomes a subclass of
//! `CallmaskError` carrying the Rust error's message; pyo3 turns a panic into a Python exception,
//! so none crosses into the interpreter.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

use std::sync::Arc;

use callmask::parse::{Event, StreamParser};
use callmask::{
    Caches, CompileOptions, Dialect, DialectOptions, Error, Grammar, Matcher, StructuralTagOptions,
    TokenAutomaton, TokenId, TokenMask, Tools, Vocab,
};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use serde_json::Value;

mod step;

create_exception!(
    _callmask,
    CallmaskError,
    PyException,
    "Base class of every error callmask raises; the message is the Rust error's."
);
create_exception!(
    _callmask,
    InvalidSchemaError,
    CallmaskError,
    "The schema is not valid JSON Schema or JSON (also unresolvable `$ref`s and invalid patterns)."
);
create_exception!(
    _callmask,
    UnsupportedKeywordError,
    InvalidSchemaError,
    "The schema uses a keyword callmask cannot enforce exactly (`lenient=True` drops it)."
);
create_exception!(
    _callmask,
    LimitExceededError,
    CallmaskError,
    "A compile limit (size, states, memory, time) was exceeded."
);
create_exception!(
    _callmask,
    ForbiddenTokenError,
    CallmaskError,
    "A token the grammar does not allow here, or outside the vocabulary."
);
create_exception!(
    _callmask,
    BitmaskError,
    CallmaskError,
    "The bitmask has the wrong dtype, shape, layout or size."
);
create_exception!(
    _callmask,
    RollbackError,
    CallmaskError,
    "More tokens to roll back than were accepted (or than the rollback window keeps)."
);
create_exception!(
    _callmask,
    ToolsError,
    CallmaskError,
    "The tools are not valid OpenAI tools, or the options (tool_choice, ...) are not valid."
);
create_exception!(
    _callmask,
    DialectError,
    CallmaskError,
    "The dialect is unknown or invalid, cannot write a tool, or needs a missing special token."
);
create_exception!(
    _callmask,
    ParseError,
    CallmaskError,
    "The text is not an output of the grammar; the message gives the byte offset and reason."
);
create_exception!(
    _callmask,
    VocabError,
    CallmaskError,
    "The vocabulary (tokenizer file, GGUF, token table) cannot be read or is invalid."
);

create_exception!(
    _callmask,
    BudgetError,
    CallmaskError,
    "The token budget (`max_tokens`) is too small for the shortest complete output, or cannot be guaranteed with this vocabulary."
);

/// The Python exception for a callmask error, with two attributes a server answers it by:
/// ``fault`` (``"request"``: the request's own fault, HTTP 400; ``"internal"``: HTTP 500) and
/// ``param`` (the part of the request it is about, e.g. ``tools[f].parameters#/properties/a``,
/// or None).
fn err(e: Error) -> PyErr {
    let fault = match e.fault() {
        callmask::Fault::Request => "request",
        _ => "internal",
    };
    let param = e.param();
    let py_err = exception_for(e);
    Python::attach(|py| {
        let value = py_err.value(py);
        // Setting attributes on a fresh exception object cannot fail but for memory; the
        // exception is raised either way.
        let _ = value.setattr("fault", fault);
        let _ = value.setattr("param", param);
    });
    py_err
}

fn exception_for(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::UnsupportedKeyword { .. } => UnsupportedKeywordError::new_err(msg),
        Error::InvalidSchema { .. }
        | Error::UnresolvedRef { .. }
        | Error::InvalidPattern { .. }
        | Error::Json(_) => InvalidSchemaError::new_err(msg),
        Error::LimitExceeded { .. } => LimitExceededError::new_err(msg),
        Error::TokenForbidden { .. }
        | Error::TokenOutOfVocabulary { .. }
        | Error::OverBudget { .. } => ForbiddenTokenError::new_err(msg),
        Error::BitmaskSize { .. } | Error::LogitsShape { .. } => BitmaskError::new_err(msg),
        Error::Rollback { .. } => RollbackError::new_err(msg),
        Error::InvalidTools(_) | Error::InvalidOptions(_) => ToolsError::new_err(msg),
        Error::Dialect { .. }
        | Error::Unrepresentable { .. }
        | Error::MissingSpecialToken(_)
        | Error::StructuralTag { .. }
        | Error::UnsupportedFormat { .. } => DialectError::new_err(msg),
        Error::Parse(_) => ParseError::new_err(msg),
        Error::Vocab(_) | Error::Io { .. } | Error::Fetch(_) => VocabError::new_err(msg),
        Error::BudgetTooSmall { .. } | Error::BudgetUnsupported { .. } => BudgetError::new_err(msg),
        _ => CallmaskError::new_err(msg),
    }
}

/// A Python object as JSON: a `str` is parsed as JSON text, anything else goes through
/// `json.dumps` (dicts, lists, numbers, ...).
fn json_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    let text: String = if let Ok(s) = obj.cast::<PyString>() {
        s.to_cow()?.into_owned()
    } else {
        let dumps = obj.py().import("json")?.getattr("dumps")?;
        dumps.call1((obj,))?.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "{what}: expected JSON text or a JSON-serializable object"
            ))
        })?
    };
    callmask::parse_json(&text).map_err(err)
}

// ---------------------------------------------------------------------------------------------
// Caches

/// Where compiled lexemes and token walks are kept across requests: bounded in bytes, least
/// recently used entries evicted first, shared across threads. Pass one to the `Grammar.from_*`
/// compiles (`caches=`), e.g. a vocabulary's own (`Vocab.caches`), to keep compiled lexemes for
/// later compiles; without one a compile shares its lexemes only within itself. Automata keep
/// their walks in their grammar's caches, else in their vocabulary's.
#[pyclass(module = "callmask._callmask", name = "Caches", frozen)]
struct PyCaches {
    c: Caches,
}

#[pymethods]
impl PyCaches {
    /// An empty cache of at most `max_bytes` (estimated; 0 caches nothing).
    #[new]
    #[pyo3(signature = (max_bytes=callmask::DEFAULT_CACHE_BYTES))]
    fn new(max_bytes: usize) -> Self {
        PyCaches {
            c: Caches::new(max_bytes),
        }
    }

    /// The size limit in bytes.
    #[getter]
    fn max_bytes(&self) -> usize {
        self.c.max_bytes()
    }

    /// Estimated bytes held now.
    #[getter]
    fn bytes(&self) -> usize {
        self.c.bytes()
    }

    /// `{"entries", "bytes", "max_bytes", "hits", "misses", "evictions"}`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.c.stats();
        let d = PyDict::new(py);
        d.set_item("entries", st.entries)?;
        d.set_item("bytes", st.bytes)?;
        d.set_item("max_bytes", st.max_bytes)?;
        d.set_item("hits", st.hits)?;
        d.set_item("misses", st.misses)?;
        d.set_item("evictions", st.evictions)?;
        Ok(d)
    }

    /// Drops every entry.
    fn clear(&self) {
        self.c.clear();
    }

    fn __repr__(&self) -> String {
        let st = self.c.stats();
        format!(
            "Caches(max_bytes={}, bytes={}, entries={})",
            st.max_bytes, st.bytes, st.entries
        )
    }
}

// Vocab

/// A model's vocabulary: each token's bytes, which tokens are special, which end generation.
/// Load it once per model and share it between grammars (it is immutable and thread-safe).
#[pyclass(module = "callmask._callmask", name = "Vocab", frozen)]
struct PyVocab {
    v: Arc<Vocab>,
}

impl PyVocab {
    /// `extra_eos` added to the vocabulary's end tokens, or with `eos_only` in their place.
    fn new(v: Vocab, extra_eos: Option<Vec<TokenId>>, eos_only: bool) -> PyResult<Self> {
        let e = extra_eos.unwrap_or_default();
        let v = if eos_only {
            v.with_only_eos_tokens(&e).map_err(err)?
        } else if e.is_empty() {
            v
        } else {
            v.with_eos_tokens(&e).map_err(err)?
        };
        Ok(PyVocab { v: Arc::new(v) })
    }
}

#[pymethods]
impl PyVocab {
    /// Loads a Hugging Face `tokenizer.json`; `eos_token_ids` adds end-of-generation tokens to
    /// the ones the file names (`eos_only=True`: replaces them, for an engine that stops only
    /// on those).
    #[staticmethod]
    #[pyo3(signature = (path, eos_token_ids=None, *, eos_only=false))]
    fn from_tokenizer_json(
        py: Python<'_>,
        path: std::path::PathBuf,
        eos_token_ids: Option<Vec<TokenId>>,
        eos_only: bool,
    ) -> PyResult<Self> {
        let v = py
            .detach(|| Vocab::from_tokenizer_json(&path))
            .map_err(err)?;
        Self::new(v, eos_token_ids, eos_only)
    }

    /// Loads a Hugging Face tokenizer from the text of its `tokenizer.json`.
    #[staticmethod]
    #[pyo3(signature = (json, eos_token_ids=None, *, eos_only=false))]
    fn from_tokenizer_json_str(
        py: Python<'_>,
        json: &str,
        eos_token_ids: Option<Vec<TokenId>>,
        eos_only: bool,
    ) -> PyResult<Self> {
        let json = json.to_owned();
        let v = py
            .detach(|| Vocab::from_tokenizer_json_str(&json))
            .map_err(err)?;
        Self::new(v, eos_token_ids, eos_only)
    }

    /// The vocabulary of a transformers tokenizer (`PreTrainedTokenizerFast`, e.g. from
    /// `AutoTokenizer.from_pretrained`) or a `tokenizers.Tokenizer`: its special tokens, and as
    /// end-of-generation tokens the ones the tokenizer file names, the tokenizer's
    /// `eos_token_id`, and `eos_token_ids` (e.g. the model's `generation_config.eos_token_id`).
    /// `eos_only=True`: the end tokens are only the tokenizer's `eos_token_id` and
    /// `eos_token_ids` (those an engine stops on), not the others the tokenizer file marks.
    #[staticmethod]
    #[pyo3(signature = (tokenizer, eos_token_ids=None, *, eos_only=false))]
    fn from_hf(
        py: Python<'_>,
        tokenizer: &Bound<'_, PyAny>,
        eos_token_ids: Option<Vec<TokenId>>,
        eos_only: bool,
    ) -> PyResult<Self> {
        let backend = if tokenizer.hasattr("backend_tokenizer")? {
            tokenizer.getattr("backend_tokenizer")?
        } else {
            tokenizer.clone()
        };
        if !backend.hasattr("to_str")? {
            return Err(PyTypeError::new_err(
                "Vocab.from_hf: expected a fast tokenizer (transformers PreTrainedTokenizerFast \
                 or tokenizers.Tokenizer); slow tokenizers have no tokenizer.json",
            ));
        }
        let json: String = backend.call_method0("to_str")?.extract()?;
        let mut eos = eos_token_ids.unwrap_or_default();
        if let Ok(id) = tokenizer.getattr("eos_token_id") {
            if let Ok(i) = id.extract::<TokenId>() {
                eos.push(i);
            } else if let Ok(ids) = id.extract::<Vec<TokenId>>() {
                eos.extend(ids);
            }
        }
        let v = py
            .detach(|| Vocab::from_tokenizer_json_str(&json))
            .map_err(err)?;
        Self::new(v, Some(eos), eos_only)
    }

    /// A vocabulary from explicit parts, e.g. read from another library's tokenizer: each
    /// token's bytes (special tokens: their text), special flags (default: none), and the
    /// end-of-generation ids. A normal token with no bytes is made special (it could never be
    /// produced from text). Such a vocabulary has no tokenizer.
    #[staticmethod]
    #[pyo3(signature = (tokens, special=None, eos_token_ids=Vec::new()))]
    fn from_parts(
        tokens: Vec<Vec<u8>>,
        special: Option<Vec<bool>>,
        eos_token_ids: Vec<TokenId>,
    ) -> PyResult<Self> {
        let mut special = special.unwrap_or_else(|| vec![false; tokens.len()]);
        if special.len() == tokens.len() {
            for (s, t) in special.iter_mut().zip(&tokens) {
                *s |= t.is_empty();
            }
        }
        let v = Vocab::from_parts(tokens, special, eos_token_ids).map_err(err)?;
        Ok(PyVocab { v: Arc::new(v) })
    }

    /// Loads the vocabulary of a GGUF model through llama.cpp (only in builds with the `llama`
    /// feature of the `callmask-py` crate).
    #[staticmethod]
    #[pyo3(signature = (path, eos_token_ids=None))]
    fn from_gguf(
        py: Python<'_>,
        path: std::path::PathBuf,
        eos_token_ids: Option<Vec<TokenId>>,
    ) -> PyResult<Self> {
        #[cfg(feature = "llama")]
        {
            use callmask_llama::GgufVocab;
            let v = py.detach(|| Vocab::from_gguf(&path)).map_err(err)?;
            Self::new(v, eos_token_ids, false)
        }
        #[cfg(not(feature = "llama"))]
        {
            let _ = (py, path, eos_token_ids);
            Err(VocabError::new_err(
                "Vocab.from_gguf: this build of callmask has no llama.cpp (build the callmask-py \
                 crate with the `llama` feature); with llama-cpp-python use \
                 callmask.llama_cpp.vocab_from_llama(llm)",
            ))
        }
    }

    /// Number of tokens (largest id plus one). A model's logits (and so the bitmask) may be
    /// wider: the extra ids are padding and never allowed.
    fn __len__(&self) -> usize {
        self.v.len()
    }

    /// The vocabulary's own caches: where automata over it keep their token walks when their
    /// grammar has no caches; pass them to the `Grammar.from_*` compiles (`caches=`) to keep
    /// compiled lexemes there too (an engine's cache per model).
    #[getter]
    fn caches(&self) -> PyCaches {
        PyCaches {
            c: self.v.caches().clone(),
        }
    }

    /// End-of-generation token ids, ascending.
    #[getter]
    fn eos_token_ids(&self) -> Vec<TokenId> {
        self.v.eos_tokens().to_vec()
    }

    /// The bytes of token `id` (a special token's: its text), or None outside the vocabulary.
    fn token_bytes<'py>(&self, py: Python<'py>, id: TokenId) -> Option<Bound<'py, PyBytes>> {
        self.v.token_bytes(id).map(|b| PyBytes::new(py, b))
    }

    /// True when token `id` is special (control) token.
    fn is_special(&self, id: TokenId) -> bool {
        self.v.is_special(id)
    }

    /// The id of the special token with this text, e.g. `"<|python_tag|>"`, or None.
    fn special_token(&self, text: &str) -> Option<TokenId> {
        self.v.special_token(text)
    }

    /// Tokenizes plain text as the model would (no BOS); a `VocabError` for a vocabulary built
    /// without a tokenizer.
    fn tokenize(&self, py: Python<'_>, text: &str) -> PyResult<Vec<TokenId>> {
        py.detach(|| self.v.tokenize(text)).map_err(err)
    }

    fn __repr__(&self) -> String {
        format!(
            "Vocab(len={}, eos_token_ids={:?})",
            self.v.len(),
            self.v.eos_tokens()
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Grammar

/// A compiled grammar: a JSON Schema, or a tool-call dialect with its tools. Immutable and
/// thread-safe; bind it to a vocabulary with `TokenAutomaton(grammar, vocab)`.
#[pyclass(module = "callmask._callmask", name = "Grammar", frozen)]
struct PyGrammar {
    g: Grammar,
}

/// The keyword options of a `Grammar.from_*` compile as one JSON object (for
/// [`CompileOptions::from_json`] / [`DialectOptions::from_json`]): the keywords named as the
/// options type's fields; a keyword given `None` keeps its default.
fn options_json(options: Option<&Bound<'_, PyDict>>) -> PyResult<serde_json::Map<String, Value>> {
    let mut out = serde_json::Map::new();
    let Some(options) = options else {
        return Ok(out);
    };
    for (k, v) in options.iter() {
        if v.is_none() {
            continue;
        }
        let k: String = k.extract()?;
        let what = format!("option {k}");
        let v = if v.is_instance_of::<PyString>() {
            Value::String(v.extract()?)
        } else {
            json_arg(&v, &what)?
        };
        out.insert(k, v);
    }
    Ok(out)
}

/// The caches a compile keeps its lexemes in: the ones given, else `vocab`'s own, else none
/// (the compile's own).
fn compile_caches(caches: Option<&PyCaches>, vocab: Option<&PyVocab>) -> Option<Caches> {
    caches
        .map(|c| c.c.clone())
        .or_else(|| vocab.map(|v| v.v.caches().clone()))
}

#[pymethods]
impl PyGrammar {
    /// Compiles a JSON Schema (a dict, or JSON text) for a single JSON value. The keyword
    /// `options` are `CompileOptions`' fields (docs/library.md lists them), e.g.
    /// `lenient=True` drops keywords callmask cannot enforce (listed in `dropped_keywords`)
    /// instead of raising `UnsupportedKeywordError`; `format_annotation=True` treats `format` as
    /// an annotation; `ijson_numbers=False` allows every number JSON spells; `max_whitespace`,
    /// `max_depth`, `max_compile_time` (seconds), ...; an unknown one raises `ToolsError`.
    /// `caches`: where compiled lexemes are kept for later compiles (none: this compile's own).
    #[staticmethod]
    #[pyo3(signature = (schema, *, caches=None, **options))]
    fn from_json_schema(
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        caches: Option<PyRef<'_, PyCaches>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let schema = json_arg(schema, "schema")?;
        let mut o =
            CompileOptions::from_json(&Value::Object(options_json(options)?)).map_err(err)?;
        o.caches = compile_caches(caches.as_deref(), None);
        let g = py
            .detach(|| Grammar::from_json_schema(&schema, &o))
            .map_err(err)?;
        Ok(PyGrammar { g })
    }

    /// Compiles a tool-call dialect (a built-in name such as `"hermes"` or `"pythonic"`, or the
    /// path of a dialect file) with OpenAI `tools` (a list, or JSON text). The keyword `options`
    /// are `DialectOptions`' fields and `CompileOptions`' (docs/library.md lists them):
    /// `tool_choice`: `"auto"`, `"required"`, `"none"`, a function name or OpenAI's
    /// `{"type": "function", "function": {"name": ...}}`; `parallel_tool_calls=False` (or
    /// `parallel_calls`) allows exactly one call; `reasoning`: True for a `<think>...</think>`
    /// block first, or a `(start, end)` pair; `max_text_chars` bounds each stretch of free text;
    /// `distinct_calls`: what a call that repeats an earlier one (same function, equal
    /// arguments) does: `"end"` (the default: it ends the calls, and the parsers leave it out),
    /// `"bend"` (it is steered to a different call) or `"allow"` (also `False`); `name_first=False` takes a JSON call's keys in any order (parsing unconstrained
    /// outputs); `strict_arguments`, and the compile options of `from_json_schema`.
    #[staticmethod]
    #[pyo3(signature = (name_or_path, tools, tool_choice=None, parallel_tool_calls=None, reasoning=None, *, caches=None, **options))]
    #[allow(clippy::too_many_arguments)]
    fn from_dialect(
        py: Python<'_>,
        name_or_path: &str,
        tools: &Bound<'_, PyAny>,
        tool_choice: Option<&Bound<'_, PyAny>>,
        parallel_tool_calls: Option<bool>,
        reasoning: Option<&Bound<'_, PyAny>>,
        caches: Option<PyRef<'_, PyCaches>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let tools = Tools::from_openai_value(json_arg(tools, "tools")?).map_err(err)?;
        let all = PyDict::new(py);
        if let Some(options) = options {
            all.update(options.as_mapping())?;
        }
        for (name, value) in [("tool_choice", tool_choice), ("reasoning", reasoning)] {
            if let Some(v) = value {
                all.set_item(name, v)?;
            }
        }
        if let Some(p) = parallel_tool_calls {
            all.set_item("parallel_tool_calls", p)?;
        }
        let mut o =
            DialectOptions::from_json(&Value::Object(options_json(Some(&all))?)).map_err(err)?;
        o.compile.caches = compile_caches(caches.as_deref(), None);
        let name = name_or_path.to_owned();
        let g = py
            .detach(|| Dialect::load(&name)?.compile(&tools, &o))
            .map_err(err)?;
        Ok(PyGrammar { g })
    }

    /// Compiles XGrammar's structural tag (`{"type": "structural_tag", "format": {...}}`, or
    /// the older `{"structures": [...], "triggers": [...]}` form vLLM and SGLang send for
    /// tools; a dict or JSON text). With `vocab`, a literal that contains the text of one of its
    /// special tokens matches there that token or its plain spelling (as XGrammar matches
    /// tokens by their text), and compiled lexemes are kept in the vocabulary's caches unless
    /// `caches` is given. Formats callmask cannot enforce exactly are refused by name
    /// (`DialectError`). The keyword `options` are those of `from_json_schema`.
    #[staticmethod]
    #[pyo3(signature = (tag, vocab=None, *, caches=None, **options))]
    fn from_structural_tag(
        py: Python<'_>,
        tag: &Bound<'_, PyAny>,
        vocab: Option<&PyVocab>,
        caches: Option<PyRef<'_, PyCaches>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let tag = json_arg(tag, "tag")?;
        let mut o = match vocab {
            Some(v) => StructuralTagOptions::for_vocab(&v.v),
            None => StructuralTagOptions::default(),
        };
        o.compile =
            CompileOptions::from_json(&Value::Object(options_json(options)?)).map_err(err)?;
        o.compile.caches = compile_caches(caches.as_deref(), vocab);
        let g = py
            .detach(|| Grammar::from_structural_tag(&tag, &o))
            .map_err(err)?;
        Ok(PyGrammar { g })
    }

    /// The built-in dialect a model writes its calls in, told from its chat template (e.g. a
    /// tokenizer's `chat_template`) and its vocabulary; `DialectError` when the template names
    /// no known format (give the dialect then).
    #[staticmethod]
    #[pyo3(signature = (chat_template, vocab))]
    fn detect_dialect(chat_template: Option<&str>, vocab: &PyVocab) -> PyResult<&'static str> {
        Dialect::detect(chat_template, &vocab.v).map_err(err)
    }

    /// A dialect file derived from a chat template (for a model no built-in dialect matches):
    /// `(text, summary)`, the file in the language of the built-in grammars and one line saying
    /// what was read from the template; `DialectError` naming what the template writes when
    /// no layout callmask knows fits it. With `vocab`, markers that are its special tokens are
    /// written as such.
    #[staticmethod]
    #[pyo3(signature = (chat_template, vocab=None))]
    fn derive_dialect(chat_template: &str, vocab: Option<&PyVocab>) -> PyResult<(String, String)> {
        let d = callmask::derive_dialect(chat_template, vocab.map(|v| &*v.v)).map_err(err)?;
        Ok((d.text().to_owned(), d.summary().to_owned()))
    }

    /// The names of the built-in dialects.
    #[staticmethod]
    fn builtin_dialects() -> Vec<&'static str> {
        Dialect::builtin_names()
    }

    /// Parses a whole output into OpenAI's message shape: `{"content": str | None,
    /// "reasoning_content": str | None, "tool_calls": [{"id", "type": "function", "function":
    /// {"name", "arguments": JSON text}}]}`; `ParseError` when the text is not an output of the
    /// grammar. With `recover=True`, reads what it can of an output the grammar refuses (an
    /// unconstrained model's), as the peers' tool parsers do, and lists what it assumed or
    /// skipped under `"recovered"` (`[{"kind": "closed", "appended"} | {"kind": "inserted",
    /// "offset", "text"} | {"kind": "skipped", "offset", "text", "reason"} | {"kind":
    /// "text_around", "offset", "text"} | {"kind": "decoded", "offset", "text"} | {"kind":
    /// "retagged", "offset", "text", "read_as"} | {"kind": "restarted", "offset"} | {"kind":
    /// "python_literal", "offset", "text"} | {"kind": "unescaped"}]`); no call is returned that the text does not hold.
    #[pyo3(signature = (text, *, recover=false))]
    fn parse<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        recover: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let p = py
            .detach(|| {
                if recover {
                    self.g.parse_recovering(text)
                } else {
                    self.g.parse(text)
                }
            })
            .map_err(err)?;
        let d = PyDict::new(py);
        if p.text.is_empty() {
            d.set_item("content", py.None())?;
        } else {
            d.set_item("content", &p.text)?;
        }
        d.set_item("reasoning_content", p.reasoning.as_deref())?;
        let calls = PyList::empty(py);
        for c in &p.tool_calls {
            calls.append(call_dict(py, c)?)?;
        }
        d.set_item("tool_calls", calls)?;
        if recover {
            let recovered = serde_json::to_string(&p.recovered).map_err(|e| {
                pyo3::exceptions::PyValueError::new_err(format!("cannot write the result: {e}"))
            })?;
            let json = py.import("json")?;
            d.set_item("recovered", json.call_method1("loads", (recovered,))?)?;
        }
        Ok(d)
    }

    /// Checks a whole text at the byte level: None when the grammar accepts it, else the
    /// rejection (byte offset and reason) as a message.
    fn check(&self, text: &str) -> Option<String> {
        self.g
            .check_bytes(text.as_bytes())
            .err()
            .map(|r| r.to_string())
    }

    /// The keywords `lenient=True` dropped.
    #[getter]
    fn dropped_keywords(&self) -> Vec<String> {
        self.g.dropped_keywords().to_vec()
    }

    /// The functions the grammar can call (empty for a JSON Schema).
    #[getter]
    fn functions(&self) -> Vec<String> {
        self.g.functions().to_vec()
    }
}

fn call_dict<'py>(py: Python<'py>, c: &callmask::ToolCall) -> PyResult<Bound<'py, PyDict>> {
    let f = PyDict::new(py);
    f.set_item("name", &c.function.name)?;
    f.set_item("arguments", &c.function.arguments)?;
    let d = PyDict::new(py);
    d.set_item("id", &c.id)?;
    d.set_item("type", &c.kind)?;
    d.set_item("function", f)?;
    Ok(d)
}

// ---------------------------------------------------------------------------------------------
// TokenAutomaton, Matcher

/// A grammar bound to a vocabulary: the token-level automaton whose mask caches every matcher
/// made from it shares. Build one per (grammar, vocabulary), then one `Matcher` per sequence.
#[pyclass(module = "callmask._callmask", name = "TokenAutomaton", frozen)]
struct PyAutomaton {
    a: TokenAutomaton,
    vocab: Arc<Vocab>,
}

#[pymethods]
impl PyAutomaton {
    #[new]
    fn new(py: Python<'_>, grammar: &PyGrammar, vocab: &PyVocab) -> PyResult<Self> {
        let v = vocab.v.clone();
        let a = py
            .detach(|| TokenAutomaton::new(&grammar.g, v.clone()))
            .map_err(err)?;
        Ok(PyAutomaton { a, vocab: v })
    }

    /// A matcher at the start of an output. `max_rollback`: how many tokens `rollback` can undo
    /// (default 1024). `max_tokens`: the request's token budget, end-of-generation token
    /// included: every token the matcher allows keeps a complete output within it (see
    /// `Matcher.set_token_budget`); `None` for no budget.
    #[pyo3(signature = (max_rollback=None, max_tokens=None))]
    fn matcher(
        &self,
        max_rollback: Option<usize>,
        max_tokens: Option<usize>,
    ) -> PyResult<PyMatcher> {
        PyMatcher::new(&self.a, max_rollback, max_tokens)
    }

    /// Tokenizes `text` as the model would, the grammar's special tokens spelled in it (e.g.
    /// `<|python_tag|>`) becoming special tokens.
    fn tokenize(&self, py: Python<'_>, text: &str) -> PyResult<Vec<TokenId>> {
        py.detach(|| self.a.tokenize(text)).map_err(err)
    }

    /// Number of tokens of the vocabulary.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab.len()
    }
}

/// One sequence's position in the grammar. Per token: `fill_bitmask`, then `accept_token`.
/// `fork()` copies it (cheap), `rollback(n)` undoes tokens (speculative decoding).
#[pyclass(module = "callmask._callmask", name = "Matcher")]
struct PyMatcher {
    m: Matcher,
    max_rollback: Option<usize>,
    /// The token budget `reset` starts again with.
    max_tokens: Option<usize>,
    scratch: TokenMask,
    error: Option<String>,
}

impl PyMatcher {
    fn new(
        a: &TokenAutomaton,
        max_rollback: Option<usize>,
        max_tokens: Option<usize>,
    ) -> PyResult<Self> {
        let mut m = a.matcher();
        if let Some(n) = max_rollback {
            m.set_max_rollback(n);
        }
        m.set_token_budget(max_tokens).map_err(err)?;
        Ok(PyMatcher {
            m,
            max_rollback,
            max_tokens,
            scratch: TokenMask::new(0),
            error: None,
        })
    }
}

/// A writable int32 bitmask found behind a Python object: `rows` rows of `row_words` words.
struct MaskBuf {
    /// Address of the first word (kept as an integer so that it can cross `detach`).
    addr: usize,
    rows: usize,
    row_words: usize,
}

/// What numpy's `__array_interface__` says of an array, checked to be writable.
struct ArrayInterface {
    /// The type string as given (`"<i4"`).
    typestr: String,
    /// The type code in native byte order (`"i4"`), `None` for the other byte order.
    dtype: Option<String>,
    shape: Vec<usize>,
    addr: usize,
    /// Strides in bytes (`None`: C-contiguous).
    strides: Option<Vec<isize>>,
}

impl ArrayInterface {
    /// `None` when `obj` has no `__array_interface__`; errors name `what` (a malformed
    /// interface, a read-only array).
    fn read(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<ArrayInterface>> {
        let Ok(ai) = obj.getattr("__array_interface__") else {
            return Ok(None);
        };
        let bad = |m: String| BitmaskError::new_err(format!("{what}: {m}"));
        let ai = ai
            .cast_into::<PyDict>()
            .map_err(|_| bad("__array_interface__ is not a dict".into()))?;
        let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
            ai.get_item(k)?
                .ok_or_else(|| bad(format!("__array_interface__ has no {k:?}")))
        };
        let typestr: String = get("typestr")?.extract()?;
        let (native, foreign) = if cfg!(target_endian = "little") {
            ('<', '>')
        } else {
            ('>', '<')
        };
        let dtype = (!typestr.starts_with(foreign))
            .then(|| typestr.trim_start_matches(['|', '=', native]).to_string());
        let shape: Vec<usize> = get("shape")?.extract()?;
        let (addr, readonly): (usize, bool) = get("data")?
            .extract()
            .map_err(|_| bad("the array's data is not a (pointer, readonly) pair".into()))?;
        if readonly {
            return Err(bad("the array is read-only".into()));
        }
        let strides = match ai.get_item("strides")? {
            Some(s) if !s.is_none() => Some(s.extract::<Vec<isize>>()?),
            _ => None,
        };
        Ok(Some(ArrayInterface {
            typestr,
            dtype,
            shape,
            addr,
            strides,
        }))
    }
}

impl MaskBuf {
    /// Inspects `obj`: a numpy array (any object with `__array_interface__`) or a torch CPU
    /// tensor, 1-D (one row) or 2-D, 4-byte integers, C-contiguous, aligned and writable.
    fn of(obj: &Bound<'_, PyAny>) -> PyResult<MaskBuf> {
        let bad = |m: String| BitmaskError::new_err(format!("bitmask: {m}"));
        let (addr, shape) = if let Some(ai) = ArrayInterface::read(obj, "bitmask")? {
            if !matches!(ai.dtype.as_deref(), Some("i4" | "u4")) {
                return Err(bad(format!(
                    "dtype must be int32 (native byte order), not {:?}",
                    ai.typestr
                )));
            }
            let ArrayInterface {
                addr,
                shape,
                strides,
                ..
            } = ai;
            if let Some(strides) = strides {
                let mut want = vec![4isize; shape.len()];
                for i in (0..shape.len().saturating_sub(1)).rev() {
                    want[i] = want[i + 1] * shape[i + 1] as isize;
                }
                let live = |i: usize| shape[i] > 1;
                if (0..shape.len()).any(|i| live(i) && strides.get(i) != Some(&want[i])) {
                    return Err(bad("the array must be C-contiguous".into()));
                }
            }
            (addr, shape)
        } else if obj.hasattr("data_ptr")? && obj.hasattr("is_contiguous")? {
            // A torch tensor: checked through its own methods.
            let dtype = obj.getattr("dtype")?.str()?.to_string();
            if dtype != "torch.int32" {
                return Err(bad(format!("dtype must be torch.int32, not {dtype}")));
            }
            let device = obj.getattr("device")?.getattr("type")?.str()?.to_string();
            if device != "cpu" {
                return Err(bad(format!(
                    "the tensor must be on the CPU, not {device} (fill a CPU tensor, then copy it)"
                )));
            }
            if !obj.call_method0("is_contiguous")?.extract::<bool>()? {
                return Err(bad("the tensor must be contiguous".into()));
            }
            let shape: Vec<usize> = obj.getattr("shape")?.extract()?;
            let addr: usize = obj.call_method0("data_ptr")?.extract()?;
            (addr, shape)
        } else {
            return Err(PyTypeError::new_err(format!(
                "bitmask: expected a numpy int32 array or a torch int32 CPU tensor, not {}",
                obj.get_type().name()?
            )));
        };
        let (rows, row_words) = match shape[..] {
            [w] => (1, w),
            [r, w] => (r, w),
            _ => {
                return Err(bad(format!(
                    "expected shape (batch, words) or (words,), not {shape:?}"
                )))
            }
        };
        if rows
            .checked_mul(row_words)
            .is_none_or(|n| n > isize::MAX as usize / 4)
        {
            return Err(bad(format!("shape {shape:?} is too large")));
        }
        if rows * row_words > 0 && (addr == 0 || addr % std::mem::align_of::<u32>() != 0) {
            return Err(bad("the data pointer is null or not 4-byte aligned".into()));
        }
        Ok(MaskBuf {
            addr,
            rows,
            row_words,
        })
    }

    /// The words of the whole buffer.
    ///
    /// # Safety
    ///
    /// `self` must describe a live, writable, 4-byte aligned allocation of `rows * row_words`
    /// `u32`s (as checked by [`MaskBuf::of`]) that nothing else accesses for the returned
    /// lifetime; the Python object owning it must be kept alive meanwhile.
    unsafe fn words<'a>(&self) -> &'a mut [u32] {
        if self.rows * self.row_words == 0 {
            return &mut [];
        }
        // SAFETY: the caller guarantees what `from_raw_parts_mut` needs: a non-null, aligned
        // pointer to `rows * row_words` initialized, writable u32s (int32 and uint32 share size
        // and alignment, and every bit pattern is valid for both), no larger than isize::MAX
        // bytes (checked in `of`), not aliased for the lifetime.
        unsafe { std::slice::from_raw_parts_mut(self.addr as *mut u32, self.rows * self.row_words) }
    }
}

#[pymethods]
impl PyMatcher {
    /// Writes the tokens allowed next into row `index` of `bitmask` (int32, shape `(batch,
    /// words)` or `(words,)`, `words >= ceil(len(vocab) / 32)`; token `t` allowed iff bit `t % 32`
    /// of word `t // 32` is set; padding ids beyond the vocabulary are written as not allowed).
    /// A numpy array or a torch CPU tensor, written in place with the GIL released.
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_bitmask(
        &mut self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        index: usize,
    ) -> PyResult<()> {
        let buf = MaskBuf::of(bitmask)?;
        if index >= buf.rows {
            return Err(BitmaskError::new_err(format!(
                "bitmask: row {index} out of range for {} rows",
                buf.rows
            )));
        }
        let m = &mut self.m;
        let scratch = &mut self.scratch;
        py.detach(|| {
            // SAFETY: `MaskBuf::of` checked the buffer (dtype, size, contiguity, alignment,
            // writability); `bitmask` is borrowed for this whole call, so its memory stays alive;
            // the slice is used only inside this closure.
            let all = unsafe { buf.words() };
            let row = &mut all[index * buf.row_words..(index + 1) * buf.row_words];
            m.fill_u32_words(row, scratch)
        })
        .map_err(err)
    }

    /// The allowed next token ids, ascending (a list: for tests and inspection; engines use
    /// `fill_bitmask`).
    fn allowed_tokens(&mut self, py: Python<'_>) -> Vec<TokenId> {
        let m = &mut self.m;
        let scratch = &mut self.scratch;
        py.detach(|| {
            m.fill_mask(scratch);
            scratch.iter().collect()
        })
    }

    /// True when `token` may come next (one token checked: cheaper than a mask).
    fn is_allowed(&self, token: TokenId) -> bool {
        self.m.is_allowed(token)
    }

    /// Accepts `token`: True, or False (nothing changed, `error()` says why) when the grammar
    /// does not allow it here.
    fn accept_token(&mut self, token: TokenId) -> bool {
        match self.m.accept(token) {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e.to_string());
                false
            }
        }
    }

    /// Accepts all of `tokens` (True), or none of them (False, `error()` says which was
    /// refused).
    fn accept_tokens(&mut self, tokens: Vec<TokenId>) -> bool {
        let ok = self.m.validate_tokens(&tokens);
        if ok < tokens.len() {
            let mut probe = self.m.clone();
            probe.set_max_rollback(0);
            for &t in &tokens[..ok] {
                let _ = probe.accept(t);
            }
            let why = probe.accept(tokens[ok]).err().map(|e| e.to_string());
            self.error = Some(format!(
                "token #{ok} of {}: {}",
                tokens.len(),
                why.unwrap_or_else(|| "refused".into())
            ));
            return false;
        }
        for &t in &tokens {
            if let Err(e) = self.m.accept(t) {
                self.error = Some(e.to_string());
                return false;
            }
        }
        true
    }

    /// Accepts `token` or raises `ForbiddenTokenError` (nothing changed).
    fn consume_token(&mut self, token: TokenId) -> PyResult<()> {
        self.m.accept(token).map_err(err)
    }

    /// How many of `tokens`, from the first, would be accepted one after the other (the longest
    /// accepted prefix); the matcher does not change.
    fn validate_tokens(&self, py: Python<'_>, tokens: Vec<TokenId>) -> usize {
        py.detach(|| self.m.validate_tokens(&tokens))
    }

    /// Undoes the last `n` accepted tokens; `RollbackError` (nothing changed) beyond the
    /// accepted ones or the rollback window.
    fn rollback(&mut self, n: usize) -> PyResult<()> {
        self.m.rollback(n).map_err(err)
    }

    /// An independent copy at the same position (e.g. for beam search or n > 1 sampling).
    fn fork(&self) -> PyMatcher {
        PyMatcher {
            m: self.m.clone(),
            max_rollback: self.max_rollback,
            max_tokens: self.max_tokens,
            scratch: TokenMask::new(0),
            error: self.error.clone(),
        }
    }

    /// Back to the start of an output (and no error), with the matcher's token budget again.
    fn reset(&mut self) -> PyResult<()> {
        let mut m = self.m.automaton().matcher();
        if let Some(n) = self.max_rollback {
            m.set_max_rollback(n);
        }
        m.set_token_budget(self.max_tokens).map_err(err)?;
        self.m = m;
        self.error = None;
        Ok(())
    }

    /// Sets the tokens left for this output (end-of-generation token included), from now on:
    /// a token is then allowed only if a complete output still fits. `None` removes the budget.
    /// Raises `CallmaskError` when the budget is below the shortest complete output from here,
    /// or when the vocabulary lacks a single-byte token for some byte.
    #[pyo3(signature = (tokens_left))]
    fn set_token_budget(&mut self, tokens_left: Option<usize>) -> PyResult<()> {
        self.m.set_token_budget(tokens_left).map_err(err)
    }

    /// The tokens left under the budget (`None` without one).
    fn tokens_left(&self) -> Option<usize> {
        self.m.tokens_left()
    }

    /// True once an end-of-generation token was accepted (the engines' meaning: vLLM, SGLang
    /// and XGrammar stop masking a terminated sequence). See also `is_finished`.
    fn is_terminated(&self) -> bool {
        terminated(&self.m)
    }

    /// True when the output is complete and nothing but an end-of-generation token may follow
    /// (or one was accepted).
    fn is_finished(&self) -> bool {
        self.m.is_finished()
    }

    /// True when the output may end here (end-of-generation tokens are allowed).
    fn can_end(&self) -> bool {
        self.m.can_end()
    }

    /// Why the last refused `accept_token`/`accept_tokens` was refused, or None.
    fn error(&self) -> Option<String> {
        self.error.clone()
    }

    /// The tokens accepted so far.
    fn accepted_tokens(&self) -> Vec<TokenId> {
        self.m.accepted_tokens().to_vec()
    }

    /// How many tokens `rollback` can undo now.
    fn rollback_available(&self) -> usize {
        self.m.rollback_available()
    }

    /// Number of tokens of the vocabulary (the bitmask may be wider).
    #[getter]
    fn vocab_size(&self) -> usize {
        self.m.automaton().vocab().len()
    }
}

/// True once `m` accepted an end-of-generation token (see `Matcher.is_terminated`).
fn terminated(m: &Matcher) -> bool {
    let vocab = m.automaton().vocab();
    m.is_finished() && m.accepted_tokens().last().is_some_and(|&t| vocab.is_eos(t))
}

/// Fills row `i` of `bitmask` for `matchers[i]` with the GIL released (rows on the calling
/// thread for 100 µs, the rest in parallel: `callmask::mask::fill_u32_rows`); a `None` entry
/// leaves its row untouched. `bitmask` as for `Matcher.fill_bitmask`, with at least
/// `len(matchers)` rows. A matcher may appear only once.
#[pyfunction]
fn fill_bitmasks(
    py: Python<'_>,
    matchers: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let buf = MaskBuf::of(bitmask)?;
    let mut refs: Vec<Option<PyRefMut<'_, PyMatcher>>> = Vec::new();
    for m in matchers.try_iter()? {
        let m = m?;
        if m.is_none() {
            refs.push(None);
        } else {
            let m = m.cast_into::<PyMatcher>().map_err(|_| {
                PyTypeError::new_err("fill_bitmasks: expected a sequence of Matcher or None")
            })?;
            let r = m.try_borrow_mut().map_err(|_| {
                PyValueError::new_err("fill_bitmasks: a matcher appears twice (or is in use)")
            })?;
            refs.push(Some(r));
        }
    }
    if refs.len() > buf.rows {
        return Err(BitmaskError::new_err(format!(
            "bitmask: {} matchers but only {} rows",
            refs.len(),
            buf.rows
        )));
    }
    let mut ms: Vec<Option<&mut Matcher>> = refs
        .iter_mut()
        .map(|r| r.as_mut().map(|r| &mut r.m))
        .collect();
    py.detach(|| {
        // SAFETY: as in `Matcher.fill_bitmask`: checked by `MaskBuf::of`, and `bitmask` is
        // borrowed for this whole call; the slice does not outlive the closure.
        let all = unsafe { buf.words() };
        callmask::mask::fill_u32_rows(&mut ms, all, buf.row_words)
    })
    .map_err(err)
}

/// The shape `(batch, ceil(vocab_size / 32))` of a bitmask for `vocab_size` logits.
#[pyfunction]
#[pyo3(signature = (vocab_size, batch=1))]
fn bitmask_shape(vocab_size: usize, batch: usize) -> (usize, usize) {
    (batch, vocab_size.div_ceil(32))
}

// ---------------------------------------------------------------------------------------------
// StreamParser

/// Parses an output incrementally, fed text or token ids, returning deltas in OpenAI's
/// streaming shape as soon as they are certain: `{"content": ...}`, `{"reasoning_content":
/// ...}`, `{"tool_calls": [{"index", "id", "type", "function": {"name", "arguments": ""}}]}` when
/// a call starts, then `{"tool_calls": [{"index", "function": {"arguments": delta}}]}`. The
/// streamed id is `call_<index>`; the ids some models write (Mistral, Kimi K2, Command R7B) come
/// back from the whole-output parse.
#[pyclass(module = "callmask._callmask", name = "StreamParser")]
struct PyStreamParser {
    p: StreamParser,
    vocab: Option<Arc<Vocab>>,
}

fn deltas<'py>(py: Python<'py>, events: Vec<Event>) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for e in events {
        let d = PyDict::new(py);
        match e {
            Event::Text(t) => d.set_item("content", t)?,
            Event::Reasoning(t) => d.set_item("reasoning_content", t)?,
            Event::CallStart { index, id, name } => {
                let f = PyDict::new(py);
                f.set_item("name", name)?;
                f.set_item("arguments", "")?;
                let c = PyDict::new(py);
                c.set_item("index", index)?;
                c.set_item("id", id)?;
                c.set_item("type", "function")?;
                c.set_item("function", f)?;
                d.set_item("tool_calls", PyList::new(py, [c])?)?;
            }
            Event::Arguments { index, delta } => {
                let f = PyDict::new(py);
                f.set_item("arguments", delta)?;
                let c = PyDict::new(py);
                c.set_item("index", index)?;
                c.set_item("function", f)?;
                d.set_item("tool_calls", PyList::new(py, [c])?)?;
            }
            // OpenAI delta accumulators concatenate string fields, `id` included: a second id
            // delta would corrupt the first. The streamed id stays `call_N` (as vLLM's streaming
            // parsers send their own ids); the whole-output parse returns the model's id.
            Event::CallId { .. } => continue,
            Event::CallEnd { .. } => continue,
            #[allow(unreachable_patterns)]
            _ => continue,
        }
        out.append(d)?;
    }
    Ok(out)
}

#[pymethods]
impl PyStreamParser {
    /// A parser at the start of an output of `grammar`; `vocab` is needed for `push_token`.
    #[new]
    #[pyo3(signature = (grammar, vocab=None))]
    fn new(grammar: &PyGrammar, vocab: Option<&PyVocab>) -> Self {
        PyStreamParser {
            p: StreamParser::new(&grammar.g),
            vocab: vocab.map(|v| v.v.clone()),
        }
    }

    /// Feeds more text; returns the deltas now certain. `ParseError` once the text leaves the
    /// grammar.
    fn push<'py>(&mut self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyList>> {
        let ev = self.p.push(text).map_err(err)?;
        deltas(py, ev)
    }

    /// Feeds one generated token (its bytes; special tokens as the grammar reads them).
    fn push_token<'py>(&mut self, py: Python<'py>, token: TokenId) -> PyResult<Bound<'py, PyList>> {
        let Some(v) = &self.vocab else {
            return Err(PyValueError::new_err(
                "StreamParser.push_token: construct the parser with a vocab",
            ));
        };
        let ev = self.p.push_token(v, token).map_err(err)?;
        deltas(py, ev)
    }

    /// Ends the output: the remaining deltas; `ParseError` when the output is incomplete.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let ev = self.p.finish().map_err(err)?;
        deltas(py, ev)
    }
}

/// Renders the prompt a dialect's model expects (`grammars/DIALECT.jinja`), or a Jinja template
/// given with `template=`, for OpenAI `messages` and `tools` (lists, or JSON text).
#[pyfunction]
#[pyo3(signature = (dialect, tools, messages, *, template=None, datetime=None, bos_token=String::new(), add_generation_prompt=true))]
#[allow(clippy::too_many_arguments)]
fn render_prompt(
    dialect: &str,
    tools: &Bound<'_, PyAny>,
    messages: &Bound<'_, PyAny>,
    template: Option<String>,
    datetime: Option<String>,
    bos_token: String,
    add_generation_prompt: bool,
) -> PyResult<String> {
    let tools = Tools::from_openai_value(json_arg(tools, "tools")?).map_err(err)?;
    let messages =
        callmask::Message::list_from_json(&json_arg(messages, "messages")?).map_err(err)?;
    let template = match template {
        Some(t) => t,
        None => callmask::prompt::builtin_template(dialect)
            .ok_or_else(|| {
                DialectError::new_err(format!(
                    "no built-in prompt template for dialect {dialect:?}; pass template="
                ))
            })?
            .to_owned(),
    };
    let mut o = callmask::PromptOptions::default();
    o.datetime = datetime;
    o.bos_token = bos_token;
    o.add_generation_prompt = add_generation_prompt;
    callmask::render(&template, &messages, &tools, &o).map_err(err)
}

/// The native module.
#[pymodule]
fn _callmask(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyCaches>()?;
    m.add_class::<PyVocab>()?;
    m.add("DEFAULT_CACHE_BYTES", callmask::DEFAULT_CACHE_BYTES)?;
    m.add_class::<PyGrammar>()?;
    m.add_class::<PyAutomaton>()?;
    m.add_class::<PyMatcher>()?;
    m.add_class::<PyStreamParser>()?;
    m.add_function(wrap_pyfunction!(fill_bitmasks, m)?)?;
    m.add_function(wrap_pyfunction!(bitmask_shape, m)?)?;
    m.add_function(wrap_pyfunction!(step::apply_token_bitmask, m)?)?;
    m.add_function(wrap_pyfunction!(step::mask_logits, m)?)?;
    m.add_function(wrap_pyfunction!(step::accept_batch, m)?)?;
    m.add_function(wrap_pyfunction!(step::accept_and_mask, m)?)?;
    m.add_function(wrap_pyfunction!(render_prompt, m)?)?;
    m.add("CallmaskError", py.get_type::<CallmaskError>())?;
    m.add("InvalidSchemaError", py.get_type::<InvalidSchemaError>())?;
    m.add(
        "UnsupportedKeywordError",
        py.get_type::<UnsupportedKeywordError>(),
    )?;
    m.add("LimitExceededError", py.get_type::<LimitExceededError>())?;
    m.add("ForbiddenTokenError", py.get_type::<ForbiddenTokenError>())?;
    m.add("BitmaskError", py.get_type::<BitmaskError>())?;
    m.add("RollbackError", py.get_type::<RollbackError>())?;
    m.add("ToolsError", py.get_type::<ToolsError>())?;
    m.add("DialectError", py.get_type::<DialectError>())?;
    m.add("ParseError", py.get_type::<ParseError>())?;
    m.add("VocabError", py.get_type::<VocabError>())?;
    m.add("BudgetError", py.get_type::<BudgetError>())?;
    m.add("HAS_LLAMA", cfg!(feature = "llama"))?;
    Ok(())
}
