//! callmask's C ABI. The header is `include/callmask.h`, generated from this file with cbindgen
//! (`CALLMASK_BLESS=1 cargo test --release -p callmask-c --test header` rewrites it; the test
//! fails when the checked-in header is stale).
//!
//! Conventions, for every function:
//! - Handles are opaque pointers made by a `callmask_*_new`/`_from_*`/`_compile*` function and
//!   freed by the matching `callmask_*_free` (which accepts NULL). Each handle owns what it needs:
//!   they may be freed in any order (a matcher keeps its grammar and vocabulary alive).
//! - Functions that can fail return a [`CallmaskStatus`] (`CALLMASK_STATUS_OK` is 0) and write
//!   their result through an out-pointer (set to NULL first, so it is NULL on failure). Functions
//!   returning a `bool` or a size return `false`/0 on failure.
//! - Every failure also stores its message in a **thread-local last error**, read with
//!   [`callmask_last_error`] (valid until the next failure on the same thread). Failures on a
//!   matcher or a stream parser are also kept on that handle ([`callmask_matcher_last_error`],
//!   [`callmask_stream_parser_last_error`]), for servers that move a sequence between threads.
//! - No panic crosses the boundary: every entry point catches panics
//!   (`CALLMASK_STATUS_PANIC`) and NULL pointers (`CALLMASK_STATUS_NULL_ARGUMENT`).
//! - Threads: vocabularies and grammars are immutable and may be used from any number of threads
//!   at once (one compiled grammar serves every sequence); a matcher or a stream parser is used
//!   by one thread at a time.
//! - Strings in are NUL-terminated UTF-8 unless a length is given; strings out (`char **`) are
//!   NUL-terminated UTF-8 owned by the caller, freed with [`callmask_string_free`].
//!
//! Bitmasks use the layout of vLLM, SGLang, llguidance, XGrammar and callmask's Python package:
//! 32-bit words, token `t` allowed iff `(mask[t / 32] >> (t % 32)) & 1`.

#![warn(missing_docs)]

use callmask::parse::{Event, StreamParser};
use callmask::{
    Caches, CompileOptions, Dialect, DialectOptions, Error, Grammar, Matcher, TokenAutomaton,
    TokenMask, Tools, Vocab,
};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::{Arc, Mutex};

/// What a call returned: `CALLMASK_STATUS_OK` (0) or the kind of failure; the message is in
/// [`callmask_last_error`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallmaskStatus {
    /// Success.
    Ok = 0,
    /// A required pointer argument was NULL.
    NullArgument = 1,
    /// An argument is unusable (not UTF-8, inconsistent sizes, a handle of the wrong kind).
    InvalidArgument = 2,
    /// Input that should be JSON is not.
    Json = 3,
    /// An options object with an unknown field or a wrongly typed value.
    InvalidOptions = 4,
    /// A malformed tools list.
    InvalidTools = 5,
    /// An unknown dialect, a dialect file that does not parse, or a name it cannot write.
    Dialect = 6,
    /// An invalid JSON Schema, an unsupported keyword, an unresolved `$ref`, a bad pattern.
    Schema = 7,
    /// A configured limit (size, depth, states, memory, time) was exceeded.
    Limit = 8,
    /// A vocabulary that cannot be loaded or used.
    Vocab = 9,
    /// The grammar needs a special token the vocabulary lacks.
    MissingSpecialToken = 10,
    /// The token is not allowed at this point.
    TokenForbidden = 11,
    /// The token id is outside the vocabulary.
    TokenOutOfVocabulary = 12,
    /// More tokens rolled back than can be undone.
    Rollback = 13,
    /// A bitmask buffer too small for the vocabulary.
    BitmaskSize = 14,
    /// Output text the grammar rejects (or an incomplete one at the end).
    Parse = 15,
    /// A file that cannot be read.
    Io = 16,
    /// A llama.cpp sampler callback failed (see [`callmask_llama_sampler_check`]).
    Sampler = 17,
    /// callmask panicked (a bug); the call had no effect or left the handle in an unknown state.
    Panic = 18,
    /// Any other failure.
    Other = 19,
    /// Not in this build of the library (e.g. reading a GGUF file in a build without the
    /// bundled llama.cpp).
    Unsupported = 20,
    /// A token budget that no complete output fits in, or that this vocabulary cannot keep
    /// (see [`callmask_matcher_set_token_budget`]).
    Budget = 21,
}

/// A failure on its way to the caller.
struct Failure {
    status: CallmaskStatus,
    message: String,
}

impl Failure {
    fn new(status: CallmaskStatus, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        use CallmaskStatus as S;
        let status = match &e {
            Error::Json(_) => S::Json,
            Error::InvalidOptions(_) => S::InvalidOptions,
            Error::InvalidTools(_) => S::InvalidTools,
            Error::Dialect { .. }
            | Error::Unrepresentable { .. }
            | Error::StructuralTag { .. }
            | Error::UnsupportedFormat { .. } => S::Dialect,
            Error::InvalidSchema { .. }
            | Error::UnsupportedKeyword { .. }
            | Error::UnresolvedRef { .. }
            | Error::InvalidPattern { .. } => S::Schema,
            Error::LimitExceeded { .. } => S::Limit,
            Error::Vocab(_) => S::Vocab,
            Error::MissingSpecialToken(_) => S::MissingSpecialToken,
            Error::TokenForbidden { .. } => S::TokenForbidden,
            Error::TokenOutOfVocabulary { .. } => S::TokenOutOfVocabulary,
            Error::Rollback { .. } => S::Rollback,
            Error::BitmaskSize { .. } => S::BitmaskSize,
            Error::Parse(_) => S::Parse,
            Error::Io { .. } => S::Io,
            Error::BudgetTooSmall { .. } | Error::BudgetUnsupported { .. } => S::Budget,
            _ => S::Other,
        };
        Failure::new(status, e.to_string())
    }
}

type Res<T> = Result<T, Failure>;

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// A C string of `message` (NUL bytes, which C cannot carry, written as `\0`).
fn c_message(message: &str) -> CString {
    CString::new(message.replace('\0', "\\0")).unwrap_or_default()
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!("callmask panicked (a bug, please report it): {what}")
}

/// Runs `f`, catching panics; a failure is recorded as the thread's last error and, when `slot`
/// is given, on that handle too.
fn guard(slot: Option<&mut Option<CString>>, f: impl FnOnce() -> Res<()>) -> CallmaskStatus {
    let failure = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return CallmaskStatus::Ok,
        Ok(Err(failure)) => failure,
        Err(payload) => Failure::new(CallmaskStatus::Panic, panic_message(&*payload)),
    };
    record(slot, &failure);
    failure.status
}

fn record(slot: Option<&mut Option<CString>>, failure: &Failure) {
    let msg = c_message(&failure.message);
    if let Some(slot) = slot {
        *slot = Some(msg.clone());
    }
    LAST_ERROR.with(|l| *l.borrow_mut() = Some(msg));
}

/// Like [`guard`] for functions that return a value (`fallback` on failure).
fn guard_value<T>(fallback: T, f: impl FnOnce() -> Res<T>) -> T {
    let mut out = None;
    let status = guard(None, || {
        out = Some(f()?);
        Ok(())
    });
    match (status, out) {
        (CallmaskStatus::Ok, Some(v)) => v,
        _ => fallback,
    }
}

fn null(what: &str) -> Failure {
    Failure::new(CallmaskStatus::NullArgument, format!("{what} is NULL"))
}

/// `&*p`, or a NULL-argument failure.
///
/// # Safety
/// `p` must be NULL or valid for reads as a `T` for `'a`.
unsafe fn get<'a, T>(p: *const T, what: &str) -> Res<&'a T> {
    // SAFETY: caller's contract.
    unsafe { p.as_ref() }.ok_or_else(|| null(what))
}

/// `&mut *p`, or a NULL-argument failure.
///
/// # Safety
/// `p` must be NULL or valid for reads and writes as a `T`, unaliased, for `'a`.
unsafe fn get_mut<'a, T>(p: *mut T, what: &str) -> Res<&'a mut T> {
    // SAFETY: caller's contract.
    unsafe { p.as_mut() }.ok_or_else(|| null(what))
}

/// A NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string live for `'a`.
unsafe fn text_arg<'a>(p: *const c_char, what: &str) -> Res<&'a str> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: non-null and NUL-terminated (caller's contract).
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|e| {
        Failure::new(
            CallmaskStatus::InvalidArgument,
            format!("{what} is not UTF-8: {e}"),
        )
    })
}

/// A `(pointer, length)` array argument; NULL is allowed with length 0.
///
/// # Safety
/// `p` must be NULL or valid for reads of `len` `T`s for `'a`.
unsafe fn slice_arg<'a, T>(p: *const T, len: usize, what: &str) -> Res<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: non-null, `len` readable elements (caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A `(pointer, length)` UTF-8 text argument.
///
/// # Safety
/// As [`slice_arg`].
unsafe fn str_arg<'a>(p: *const c_char, len: usize, what: &str) -> Res<&'a str> {
    // SAFETY: caller's contract.
    let bytes = unsafe { slice_arg(p.cast::<u8>(), len, what) }?;
    std::str::from_utf8(bytes).map_err(|e| {
        Failure::new(
            CallmaskStatus::InvalidArgument,
            format!("{what} is not UTF-8: {e}"),
        )
    })
}

/// A JSON argument (NULL or `""`: JSON `null`).
///
/// # Safety
/// As [`text_arg`].
unsafe fn json_arg(p: *const c_char, what: &str) -> Res<Value> {
    if p.is_null() {
        return Ok(Value::Null);
    }
    // SAFETY: caller's contract.
    let s = unsafe { text_arg(p, what) }?;
    if s.trim().is_empty() {
        return Ok(Value::Null);
    }
    callmask::parse_json(s).map_err(|e| match e {
        Error::Json(e) => Failure::new(CallmaskStatus::Json, format!("{what}: invalid JSON: {e}")),
        other => {
            let f = Failure::from(other);
            Failure::new(f.status, format!("{what}: {}", f.message))
        }
    })
}

/// Clears an out-pointer (so that it is NULL on failure) and returns it.
///
/// # Safety
/// `out` must be NULL or valid for writing a pointer.
unsafe fn out_ptr<'a, T>(out: *mut *mut T, what: &str) -> Res<&'a mut *mut T> {
    // SAFETY: caller's contract.
    let o = unsafe { get_mut(out, what) }?;
    *o = ptr::null_mut();
    Ok(o)
}

/// A string handed to the caller (freed with [`callmask_string_free`]).
fn c_string_out(s: String) -> *mut c_char {
    c_message(&s).into_raw()
}

fn boxed<T>(v: T) -> *mut T {
    Box::into_raw(Box::new(v))
}

// ---------------------------------------------------------------------------------------------
// Errors and strings

/// callmask's version, e.g. `"0.1.0"` (a static string).
#[no_mangle]
pub extern "C" fn callmask_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The message of the last failure on this thread, or NULL if none yet. Owned by callmask:
/// valid until the next failure on this thread.
#[no_mangle]
pub extern "C" fn callmask_last_error() -> *const c_char {
    catch_unwind(|| LAST_ERROR.with(|l| l.borrow().as_ref().map_or(ptr::null(), |s| s.as_ptr())))
        .unwrap_or(ptr::null())
}

/// Records a failure as this thread's last error ([`callmask_last_error`]) and returns `status`:
/// for code built on this API that reports failures the same way, such as
/// `llama/callmask_llama.cpp` (NULL `message`: the status's name).
///
/// # Safety
/// `message` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn callmask_record_error(
    status: CallmaskStatus,
    message: *const c_char,
) -> CallmaskStatus {
    let text = if message.is_null() {
        None
    } else {
        // SAFETY: NUL-terminated (caller's contract).
        Some(
            unsafe { CStr::from_ptr(message) }
                .to_string_lossy()
                .into_owned(),
        )
    };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let name = || {
            // SAFETY: a static NUL-terminated string.
            unsafe { CStr::from_ptr(callmask_status_name(status)) }
                .to_string_lossy()
                .into_owned()
        };
        record(None, &Failure::new(status, text.unwrap_or_else(name)));
    }));
    status
}

/// The name of a status, e.g. `"token_forbidden"` (a static string).
#[no_mangle]
pub extern "C" fn callmask_status_name(status: CallmaskStatus) -> *const c_char {
    use CallmaskStatus as S;
    let s: &'static CStr = match status {
        S::Ok => c"ok",
        S::NullArgument => c"null_argument",
        S::InvalidArgument => c"invalid_argument",
        S::Json => c"json",
        S::InvalidOptions => c"invalid_options",
        S::InvalidTools => c"invalid_tools",
        S::Dialect => c"dialect",
        S::Schema => c"schema",
        S::Limit => c"limit",
        S::Vocab => c"vocab",
        S::MissingSpecialToken => c"missing_special_token",
        S::TokenForbidden => c"token_forbidden",
        S::TokenOutOfVocabulary => c"token_out_of_vocabulary",
        S::Rollback => c"rollback",
        S::BitmaskSize => c"bitmask_size",
        S::Parse => c"parse",
        S::Io => c"io",
        S::Sampler => c"sampler",
        S::Panic => c"panic",
        S::Other => c"other",
        S::Unsupported => c"unsupported",
        S::Budget => c"budget",
    };
    s.as_ptr()
}

/// True when a status is the request's own fault (a server answers it with HTTP 400: bad JSON,
/// tools, options, dialect or schema, a limit the request's tools exceed, a budget too small
/// for the output it demands); false for success and for the server's own faults (HTTP 500).
#[no_mangle]
pub extern "C" fn callmask_status_is_request_fault(status: CallmaskStatus) -> bool {
    use CallmaskStatus as S;
    matches!(
        status,
        S::Json
            | S::InvalidOptions
            | S::InvalidTools
            | S::Dialect
            | S::Schema
            | S::Limit
            | S::Budget
    )
}

/// Frees a string callmask returned through a `char **` (NULL is ignored).
///
/// # Safety
/// `s` must be NULL or a string from callmask not freed before.
#[no_mangle]
pub unsafe extern "C" fn callmask_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: made by `CString::into_raw` in `c_string_out`, freed once (caller's contract).
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { CString::from_raw(s) })));
    }
}

// ---------------------------------------------------------------------------------------------
// Caches

/// Where compiled lexemes and token walks are kept across compiles and requests: bounded in
/// bytes, least recently used entries evicted first, shared across threads. Made by
/// [`callmask_caches_new`] (the caller's own) or [`callmask_vocab_caches`] (a vocabulary's own,
/// where automata over it keep their walks); given to the `callmask_grammar_from_*` compiles;
/// freed with [`callmask_caches_free`] (what was compiled into it keeps it alive).
pub struct CallmaskCaches {
    caches: Caches,
}

/// The default size of a vocabulary's caches, and a good one for [`callmask_caches_new`]
/// (256 MiB).
pub const CALLMASK_DEFAULT_CACHE_BYTES: usize = 268_435_456;
const _: () = assert!(CALLMASK_DEFAULT_CACHE_BYTES == callmask::DEFAULT_CACHE_BYTES);

/// A snapshot of the compile caches' use ([`callmask_caches_stats`]).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct CallmaskCacheStats {
    /// Entries held.
    pub entries: usize,
    /// Estimated bytes held.
    pub bytes: usize,
    /// The size limit in bytes.
    pub max_bytes: usize,
    /// Lookups that found their entry.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Entries dropped to make room.
    pub evictions: u64,
}

/// New empty caches of at most `max_bytes` (estimated; 0 caches nothing), written to `*out`.
///
/// # Safety
/// `out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_caches_new(
    max_bytes: usize,
    out: *mut *mut CallmaskCaches,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let out = unsafe { out_ptr(out, "out") }?;
        *out = boxed(CallmaskCaches {
            caches: Caches::new(max_bytes),
        });
        Ok(())
    })
}

/// Frees caches made by [`callmask_caches_new`] or [`callmask_vocab_caches`] (NULL: nothing);
/// grammars compiled into them keep them alive.
///
/// # Safety
/// `caches` from this API, freed once.
#[no_mangle]
pub unsafe extern "C" fn callmask_caches_free(caches: *mut CallmaskCaches) {
    if !caches.is_null() {
        // SAFETY: made by `boxed`, freed once (caller's contract).
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(caches) })));
    }
}

/// Writes the caches' entries, bytes, limit and counters to `out`.
///
/// # Safety
/// `caches` from this API (NULL: `CALLMASK_STATUS_NULL_ARGUMENT`); `out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_caches_stats(
    caches: *const CallmaskCaches,
    out: *mut CallmaskCacheStats,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract: NULL (refused) or valid.
        let (caches, out) = unsafe { (get(caches, "caches")?, get_mut(out, "out")?) };
        let st = caches.caches.stats();
        *out = CallmaskCacheStats {
            entries: st.entries,
            bytes: st.bytes,
            max_bytes: st.max_bytes,
            hits: st.hits,
            misses: st.misses,
            evictions: st.evictions,
        };
        Ok(())
    })
}

/// Empties the caches (a later compile or first mask is then cold).
///
/// # Safety
/// `caches` from this API (NULL: `CALLMASK_STATUS_NULL_ARGUMENT`).
#[no_mangle]
pub unsafe extern "C" fn callmask_caches_clear(caches: *const CallmaskCaches) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract: NULL (refused) or valid.
        unsafe { get(caches, "caches") }?.caches.clear();
        Ok(())
    })
}

/// The caches a compile keeps its lexemes in: `caches`, or none (the compile's own) for NULL.
///
/// # Safety
/// `caches` NULL or from this API.
unsafe fn compile_caches(caches: *const CallmaskCaches) -> Option<Caches> {
    // SAFETY: caller's contract.
    unsafe { caches.as_ref() }.map(|c| c.caches.clone())
}

// ---------------------------------------------------------------------------------------------
// Vocabularies

/// A model's vocabulary: each token's bytes, special tokens, end-of-generation tokens.
/// Immutable; share it across threads.
pub struct CallmaskVocab {
    vocab: Arc<Vocab>,
}

fn vocab_out(out: &mut *mut CallmaskVocab, v: Vocab) {
    *out = boxed(CallmaskVocab { vocab: Arc::new(v) });
}

/// Loads a Hugging Face `tokenizer.json` file.
///
/// # Safety
/// `path` a NUL-terminated string; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_from_tokenizer_json_file(
    path: *const c_char,
    out: *mut *mut CallmaskVocab,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (out, path) = unsafe { (out_ptr(out, "out")?, text_arg(path, "path")?) };
        vocab_out(out, Vocab::from_tokenizer_json(path)?);
        Ok(())
    })
}

/// Loads a Hugging Face `tokenizer.json` from its bytes (`len` bytes at `json`).
///
/// # Safety
/// `json` readable for `len` bytes; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_from_tokenizer_json(
    json: *const c_char,
    len: usize,
    out: *mut *mut CallmaskVocab,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (out, text) = unsafe { (out_ptr(out, "out")?, str_arg(json, len, "json")?) };
        vocab_out(out, Vocab::from_tokenizer_json_str(text)?);
        Ok(())
    })
}

/// Loads the vocabulary of a GGUF model file (through the llama.cpp bundled in this library;
/// `CALLMASK_STATUS_UNSUPPORTED` in a build without it: read the model with your llama.cpp and use
/// `callmask_vocab_from_llama_vocab`).
///
/// # Safety
/// `path` a NUL-terminated string; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_from_gguf(
    path: *const c_char,
    out: *mut *mut CallmaskVocab,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (out, path) = unsafe { (out_ptr(out, "out")?, text_arg(path, "path")?) };
        vocab_out(out, gguf_vocab(path)?);
        Ok(())
    })
}

/// A vocabulary from an engine's own token table: `n_tokens` tokens whose bytes (decoded: what
/// each token adds to the output; special tokens: their text) are concatenated in
/// `token_bytes`, token `i` taking `token_lens[i]` bytes; the ids of the special (control)
/// tokens; the ids of the end-of-generation tokens. Such a vocabulary has no tokenizer.
///
/// # Safety
/// Each array readable for its length (NULL allowed for an empty one); `out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_from_tokens(
    n_tokens: usize,
    token_lens: *const u32,
    token_bytes: *const u8,
    special_ids: *const u32,
    n_special: usize,
    eos_ids: *const u32,
    n_eos: usize,
    out: *mut *mut CallmaskVocab,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let out = unsafe { out_ptr(out, "out") }?;
        // SAFETY: caller's contract.
        let lens = unsafe { slice_arg(token_lens, n_tokens, "token_lens") }?;
        let total = lens
            .iter()
            .try_fold(0usize, |a, &l| a.checked_add(l as usize));
        let total = total
            .ok_or_else(|| Failure::new(CallmaskStatus::InvalidArgument, "token_lens overflow"))?;
        // SAFETY: caller's contract: `token_bytes` holds the sum of `token_lens` bytes.
        let bytes = unsafe { slice_arg(token_bytes, total, "token_bytes") }?;
        // SAFETY: caller's contract.
        let specials = unsafe { slice_arg(special_ids, n_special, "special_ids") }?;
        // SAFETY: caller's contract.
        let eos = unsafe { slice_arg(eos_ids, n_eos, "eos_ids") }?;
        let mut tokens = Vec::with_capacity(n_tokens);
        let mut at = 0;
        for &l in lens {
            tokens.push(bytes[at..at + l as usize].to_vec());
            at += l as usize;
        }
        vocab_out(out, vocab_from_table(tokens, specials, eos)?);
        Ok(())
    })
}

/// A token's bytes for [`callmask_vocab_from_token_callback`]: writes up to `cap` bytes of token
/// `token` to `buf` and returns how many it wrote, or, when `cap` is too small, minus the length
/// it needs (the convention of llama.cpp's `llama_token_to_piece`); any other negative value is
/// a failure.
pub type CallmaskTokenBytesFn = Option<
    unsafe extern "C" fn(user_data: *mut c_void, token: u32, buf: *mut u8, cap: usize) -> i64,
>;

/// A vocabulary read through a callback, for engines whose token table is behind a tokenizer
/// object (llama.cpp's `llama_token_to_piece`, a Python tokenizer...): `token_bytes(user_data, i,
/// buf, cap)` is called once (twice where the first buffer is too small) for each `i` below
/// `n_tokens`, on this thread, before this function returns; special (control) tokens and
/// end-of-generation tokens as in [`callmask_vocab_from_tokens`]. No tokenizer.
///
/// # Safety
/// `token_bytes` safe to call with `user_data` as described; the id arrays readable for their
/// lengths (NULL allowed for an empty one); `out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_from_token_callback(
    n_tokens: usize,
    token_bytes: CallmaskTokenBytesFn,
    user_data: *mut c_void,
    special_ids: *const u32,
    n_special: usize,
    eos_ids: *const u32,
    n_eos: usize,
    out: *mut *mut CallmaskVocab,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let out = unsafe { out_ptr(out, "out") }?;
        let f = token_bytes.ok_or_else(|| null("token_bytes"))?;
        let id = |i: usize| {
            u32::try_from(i)
                .map_err(|_| Failure::new(CallmaskStatus::InvalidArgument, "more than 2^32 tokens"))
        };
        let mut tokens = Vec::with_capacity(n_tokens);
        let mut buf = vec![0u8; 64];
        for i in 0..n_tokens {
            let t = id(i)?;
            // SAFETY: `buf` is writable for its length; the callback's contract is the caller's.
            let mut n = unsafe { f(user_data, t, buf.as_mut_ptr(), buf.len()) };
            if n < 0 && n.unsigned_abs() as usize > buf.len() && n.unsigned_abs() <= 1 << 20 {
                buf.resize(n.unsigned_abs() as usize, 0);
                // SAFETY: as above, with the larger buffer.
                n = unsafe { f(user_data, t, buf.as_mut_ptr(), buf.len()) };
            }
            let len = usize::try_from(n).ok().filter(|&l| l <= buf.len());
            let len = len.ok_or_else(|| {
                Failure::new(
                    CallmaskStatus::Vocab,
                    format!("token_bytes failed for token {t} (returned {n})"),
                )
            })?;
            tokens.push(buf[..len].to_vec());
        }
        // SAFETY: caller's contract.
        let specials = unsafe { slice_arg(special_ids, n_special, "special_ids") }?;
        // SAFETY: caller's contract.
        let eos = unsafe { slice_arg(eos_ids, n_eos, "eos_ids") }?;
        vocab_out(out, vocab_from_table(tokens, specials, eos)?);
        Ok(())
    })
}

/// A vocabulary from token bytes and the ids of its special and end-of-generation tokens.
fn vocab_from_table(tokens: Vec<Vec<u8>>, specials: &[u32], eos: &[u32]) -> Res<Vocab> {
    let n_tokens = tokens.len();
    let mut special = vec![false; n_tokens];
    for &s in specials {
        *special.get_mut(s as usize).ok_or_else(|| {
            Failure::new(
                CallmaskStatus::Vocab,
                format!("special token {s} is outside the vocabulary of {n_tokens} tokens"),
            )
        })? = true;
    }
    Ok(Vocab::from_parts(tokens, special, eos.to_vec())?)
}

/// Number of tokens (largest id + 1); 0 when `vocab` is NULL.
///
/// # Safety
/// `vocab` NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_size(vocab: *const CallmaskVocab) -> usize {
    // SAFETY: caller's contract.
    guard_value(0, || Ok(unsafe { get(vocab, "vocab") }?.vocab.len()))
}

/// 32-bit words in one bitmask row for this vocabulary: `ceil(size / 32)` (0 when NULL). A
/// row may be longer (a model's logits are often wider than its vocabulary): the extra words
/// are written as zeros.
///
/// # Safety
/// `vocab` NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_mask_words(vocab: *const CallmaskVocab) -> usize {
    // SAFETY: caller's contract.
    guard_value(0, || {
        Ok(unsafe { get(vocab, "vocab") }?.vocab.len().div_ceil(32))
    })
}

/// Token `token`'s bytes: `*bytes` (owned by the vocabulary, valid while it lives; not
/// NUL-terminated) and `*len`.
///
/// # Safety
/// `vocab` a live vocabulary; `bytes`, `len` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_token_bytes(
    vocab: *const CallmaskVocab,
    token: u32,
    bytes: *mut *const u8,
    len: *mut usize,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (v, bytes, len) = unsafe {
            (
                get(vocab, "vocab")?,
                get_mut(bytes, "bytes")?,
                get_mut(len, "len")?,
            )
        };
        let b = v
            .vocab
            .token_bytes(token)
            .ok_or(Error::TokenOutOfVocabulary {
                token,
                vocab_size: v.vocab.len(),
            })?;
        *bytes = b.as_ptr();
        *len = b.len();
        Ok(())
    })
}

/// True when `token` is a special (control) token; false when not, or out of range, or NULL.
///
/// # Safety
/// `vocab` NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_is_special(
    vocab: *const CallmaskVocab,
    token: u32,
) -> bool {
    // SAFETY: caller's contract.
    guard_value(false, || {
        Ok(unsafe { get(vocab, "vocab") }?.vocab.is_special(token))
    })
}

/// The end-of-generation token ids, ascending: `*ids` (owned by the vocabulary) and `*n`.
///
/// # Safety
/// `vocab` a live vocabulary; `ids`, `n` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_eos_tokens(
    vocab: *const CallmaskVocab,
    ids: *mut *const u32,
    n: *mut usize,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (v, ids, n) = unsafe { (get(vocab, "vocab")?, get_mut(ids, "ids")?, get_mut(n, "n")?) };
        let e = v.vocab.eos_tokens();
        *ids = e.as_ptr();
        *n = e.len();
        Ok(())
    })
}

/// Frees a vocabulary (NULL is ignored). Matchers and samplers made with it keep their own
/// reference.
///
/// # Safety
/// `vocab` NULL or a vocabulary not freed before.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_free(vocab: *mut CallmaskVocab) {
    if !vocab.is_null() {
        // SAFETY: made by `boxed`, freed once (caller's contract).
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(vocab) })));
    }
}

/// A vocabulary's own caches (where automata over it keep their token walks when their grammar
/// has none), written to `*out` as a new handle on them: give it to the compiles of requests for
/// this model, free it with [`callmask_caches_free`].
///
/// # Safety
/// `vocab` from this API; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_caches(
    vocab: *const CallmaskVocab,
    out: *mut *mut CallmaskCaches,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let out = unsafe { out_ptr(out, "out") }?;
        // SAFETY: caller's contract: NULL (refused) or valid.
        let vocab = unsafe { get(vocab, "vocab") }?;
        *out = boxed(CallmaskCaches {
            caches: vocab.vocab.caches().clone(),
        });
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Grammars

/// Most vocabularies whose token automata a grammar keeps (mask caches shared by all the
/// matchers of one vocabulary).
const AUTOMATA_PER_GRAMMAR: usize = 8;

/// A compiled grammar (a dialect with its tools, or a JSON Schema). Immutable and shareable
/// across threads: one per tool set serves every sequence. It keeps, per vocabulary it is used
/// with, the token automaton whose mask caches all matchers share.
pub struct CallmaskGrammar {
    grammar: Grammar,
    automata: Mutex<Vec<TokenAutomaton>>,
}

impl CallmaskGrammar {
    fn new(grammar: Grammar) -> CallmaskGrammar {
        CallmaskGrammar {
            grammar,
            automata: Mutex::new(Vec::new()),
        }
    }

    /// The grammar bound to `vocab` (made on first use, then shared).
    fn automaton(&self, vocab: &Arc<Vocab>) -> Res<TokenAutomaton> {
        let mut list = self.automata.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = list.iter().find(|a| Arc::ptr_eq(a.vocab(), vocab)) {
            return Ok(a.clone());
        }
        let a = TokenAutomaton::new(&self.grammar, vocab.clone())?;
        if list.len() >= AUTOMATA_PER_GRAMMAR {
            list.remove(0);
        }
        list.push(a.clone());
        Ok(a)
    }
}

fn compile_dialect(
    dialect: Dialect,
    tools_json: *const c_char,
    options_json: *const c_char,
    caches: *const CallmaskCaches,
    out: *mut *mut CallmaskGrammar,
) -> Res<()> {
    // SAFETY: the exported callers pass their callers' pointers, under the same contract.
    let (out, tools, options) = unsafe {
        (
            out_ptr(out, "out")?,
            json_arg(tools_json, "tools_json")?,
            json_arg(options_json, "options_json")?,
        )
    };
    if tools.is_null() {
        return Err(null("tools_json"));
    }
    let tools = Tools::from_openai_value(tools)?;
    let mut options = DialectOptions::from_json(&options)?;
    // SAFETY: the exported callers pass their callers' pointer, under the same contract.
    options.compile.caches = unsafe { compile_caches(caches) };
    *out = boxed(CallmaskGrammar::new(dialect.compile(&tools, &options)?));
    Ok(())
}

/// Compiles a built-in dialect (any name `callmask dialects` lists: `empower`, `functools`,
/// `pythonic`, `inline`, `hermes`, `llama31_json`, `qwen3`, `mistral`, `gpt_oss`, ...) for a
/// tool set: `tools_json` is an OpenAI `tools` list (or an object with a
/// `tools` list); `options_json` is NULL (defaults) or an object of `DialectOptions`' fields
/// (`tool_choice`: `"auto"`, `"required"`, `"none"`, a function name or OpenAI's object;
/// `parallel_calls`, `reasoning`, `max_text_chars`, `strict_arguments`, `distinct_calls`,
/// `name_first`) with
/// the compile options of [`callmask_grammar_from_json_schema`] beside them (or under
/// `compile`); see docs/library.md, "Options". Unknown fields are
/// `CALLMASK_STATUS_INVALID_OPTIONS`. `caches`: where compiled lexemes are kept for later
/// compiles (e.g. the model's vocabulary's, [`callmask_vocab_caches`]); NULL: this compile's own.
///
/// # Safety
/// Strings NUL-terminated (`options_json` may be NULL); `caches` NULL or from this API; `out`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_grammar_from_dialect(
    dialect: *const c_char,
    tools_json: *const c_char,
    options_json: *const c_char,
    caches: *const CallmaskCaches,
    out: *mut *mut CallmaskGrammar,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let name = unsafe { text_arg(dialect, "dialect") };
        if name.is_err() {
            // SAFETY: caller's contract (clear `out` even when the name is unusable).
            unsafe { out_ptr(out, "out") }?;
        }
        compile_dialect(
            Dialect::by_name(name?)?,
            tools_json,
            options_json,
            caches,
            out,
        )
    })
}

/// As [`callmask_grammar_from_dialect`], with the text of a dialect grammar file (the format of
/// callmask's `grammars/README.md`) instead of a built-in name.
///
/// # Safety
/// Strings NUL-terminated (`options_json` may be NULL); `caches` NULL or from this API; `out`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_grammar_from_dialect_text(
    dialect_text: *const c_char,
    tools_json: *const c_char,
    options_json: *const c_char,
    caches: *const CallmaskCaches,
    out: *mut *mut CallmaskGrammar,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let text = unsafe { text_arg(dialect_text, "dialect_text") };
        if text.is_err() {
            // SAFETY: caller's contract.
            unsafe { out_ptr(out, "out") }?;
        }
        compile_dialect(
            Dialect::parse("custom", text?)?,
            tools_json,
            options_json,
            caches,
            out,
        )
    })
}

/// Compiles a JSON Schema (draft 2020-12 or 7) for a single JSON value. `options_json` is NULL
/// (defaults) or an object of `CompileOptions`' fields: `lenient`, `format_annotation`,
/// `ijson_numbers`, `max_whitespace`, `whitespace`, `max_depth`, `max_compile_time` (seconds),
/// `max_memory` (bytes), ... (docs/library.md, "Options"). `caches` as in
/// [`callmask_grammar_from_dialect`].
///
/// # Safety
/// Strings NUL-terminated (`options_json` may be NULL); `caches` NULL or from this API; `out`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_grammar_from_json_schema(
    schema_json: *const c_char,
    options_json: *const c_char,
    caches: *const CallmaskCaches,
    out: *mut *mut CallmaskGrammar,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (out, schema, options) = unsafe {
            (
                out_ptr(out, "out")?,
                json_arg(schema_json, "schema_json")?,
                json_arg(options_json, "options_json")?,
            )
        };
        if schema.is_null() {
            return Err(null("schema_json"));
        }
        let mut options = CompileOptions::from_json(&options)?;
        // SAFETY: caller's contract.
        options.caches = unsafe { compile_caches(caches) };
        *out = boxed(CallmaskGrammar::new(Grammar::from_json_schema(
            &schema, &options,
        )?));
        Ok(())
    })
}

/// Parses a whole output (`len` bytes of UTF-8 at `text`) into
/// `{"text": ..., "reasoning": ... (when there is one), "tool_calls": [{"id", "type",
/// "function": {"name", "arguments"}}]}` (OpenAI's shape; `arguments` a JSON string), written
/// to `*json_out` (free with [`callmask_string_free`]). `CALLMASK_STATUS_PARSE` with the byte
/// offset and reason when the grammar rejects the text.
///
/// # Safety
/// `grammar` live; `text` readable for `len` bytes; `json_out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_grammar_parse(
    grammar: *const CallmaskGrammar,
    text: *const c_char,
    len: usize,
    json_out: *mut *mut c_char,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (out, g, text) = unsafe {
            (
                out_ptr(json_out, "json_out")?,
                get(grammar, "grammar")?,
                str_arg(text, len, "text")?,
            )
        };
        let parsed = g.grammar.parse(text)?;
        let s = serde_json::to_string(&parsed)
            .map_err(|e| Failure::new(CallmaskStatus::Other, e.to_string()))?;
        *out = c_string_out(s);
        Ok(())
    })
}

/// Frees a grammar (NULL is ignored). Matchers, parsers and samplers made from it keep their own
/// reference.
///
/// # Safety
/// `grammar` NULL or a grammar not freed before.
#[no_mangle]
pub unsafe extern "C" fn callmask_grammar_free(grammar: *mut CallmaskGrammar) {
    if !grammar.is_null() {
        // SAFETY: made by `boxed`, freed once (caller's contract).
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(grammar) })));
    }
}

/// The built-in dialect a model writes its tool calls in, told from its chat template (NULL or
/// `""`: none; the template of a GGUF's `tokenizer.chat_template` or a `tokenizer_config.json`)
/// and its vocabulary (see `Dialect::detect`): `*name` (free it with [`callmask_string_free`]),
/// a name [`callmask_grammar_from_dialect`] takes. `CALLMASK_STATUS_DIALECT` when the template
/// shows no format callmask knows (give the dialect then).
///
/// # Safety
/// `chat_template` NULL or NUL-terminated; `vocab` live; `name` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_dialect_detect(
    chat_template: *const c_char,
    vocab: *const CallmaskVocab,
    name: *mut *mut c_char,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (out, v) = unsafe { (out_ptr(name, "name")?, get(vocab, "vocab")?) };
        let template = if chat_template.is_null() {
            None
        } else {
            // SAFETY: NUL-terminated (caller's contract).
            Some(unsafe { text_arg(chat_template, "chat_template") }?)
        };
        let found = Dialect::detect(template.filter(|t| !t.is_empty()), &v.vocab)?;
        *out = c_string_out(found.to_string());
        Ok(())
    })
}

/// A dialect file derived from a chat template, for a model no built-in dialect matches
/// (`callmask dialects --from-template`): `*text` (freed with [`callmask_string_free`]) is the
/// file, for [`callmask_grammar_from_dialect_text`]. With `vocab` (NULL: none), markers that
/// are its special tokens are written as such. `CALLMASK_STATUS_DIALECT` (the message says
/// what the template writes) when no layout callmask knows fits the template.
///
/// # Safety
/// `chat_template` NUL-terminated; `vocab` NULL or live; `text` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_dialect_derive(
    chat_template: *const c_char,
    vocab: *const CallmaskVocab,
    text: *mut *mut c_char,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (out, template) = unsafe {
            (
                out_ptr(text, "text")?,
                text_arg(chat_template, "chat_template")?,
            )
        };
        // SAFETY: NULL or live (caller's contract).
        let v = unsafe { vocab.as_ref() };
        let derived = callmask::derive_dialect(template, v.map(|v| &*v.vocab))?;
        *out = c_string_out(derived.text().to_owned());
        Ok(())
    })
}

/// The tools as a prompt's system message for a chat template that shows none (Gemma 3's): each
/// tool's JSON and, with a built-in `dialect` (NULL: none), an example call written in it, as
/// `callmask generate` adds it. `*text` is freed with [`callmask_string_free`]. Also
/// [`callmask_template_uses_tools`] tells whether a template needs it.
///
/// # Safety
/// `dialect` NULL or NUL-terminated; `tools_json` NUL-terminated; `text` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_tools_instructions(
    dialect: *const c_char,
    tools_json: *const c_char,
    text: *mut *mut c_char,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (out, tools) = unsafe { (out_ptr(text, "text")?, json_arg(tools_json, "tools_json")?) };
        if tools.is_null() {
            return Err(null("tools_json"));
        }
        let writer = if dialect.is_null() {
            None
        } else {
            // SAFETY: NUL-terminated (caller's contract).
            let name = unsafe { text_arg(dialect, "dialect") }?;
            Some(callmask::prompt::builtin_writer(name).ok_or_else(|| {
                Failure::new(
                    CallmaskStatus::Dialect,
                    format!("no built-in call writer for dialect {name:?}"),
                )
            })?)
        };
        let tools = Tools::from_openai_value(tools)?;
        *out = c_string_out(callmask::prompt::tools_instructions(&tools, writer)?);
        Ok(())
    })
}

/// True when a chat template renders the tools it is given (false: give the model
/// [`callmask_tools_instructions`] in a system message); false for NULL.
///
/// # Safety
/// `chat_template` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn callmask_template_uses_tools(chat_template: *const c_char) -> bool {
    guard_value(false, || {
        // SAFETY: NUL-terminated (caller's contract).
        let t = unsafe { text_arg(chat_template, "chat_template") }?;
        Ok(callmask::prompt::template_uses_tools(t))
    })
}

// ---------------------------------------------------------------------------------------------
// Matchers

/// One sequence's position in a grammar over a vocabulary: masks, accepted tokens, rollback.
/// Used by one thread at a time.
pub struct CallmaskMatcher {
    matcher: Matcher,
    scratch: TokenMask,
    error: Option<CString>,
}

/// Runs a matcher operation, recording a failure on the matcher too.
///
/// # Safety
/// `m` NULL or a live matcher, unaliased for the call.
unsafe fn with_matcher(
    m: *mut CallmaskMatcher,
    f: impl FnOnce(&mut CallmaskMatcher) -> Res<()>,
) -> CallmaskStatus {
    // SAFETY: caller's contract.
    match unsafe { m.as_mut() } {
        None => guard(None, || Err(null("matcher"))),
        Some(m) => {
            let mut slot = m.error.take();
            let status = guard(Some(&mut slot), || f(m));
            m.error = slot;
            status
        }
    }
}

/// A matcher at the start of an output of `grammar` over `vocab`. The grammar's token automaton
/// for this vocabulary (its mask caches) is made on first use and shared by every matcher.
/// `CALLMASK_STATUS_MISSING_SPECIAL_TOKEN` when the grammar needs a special token the
/// vocabulary lacks.
///
/// # Safety
/// `grammar`, `vocab` live; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_new(
    grammar: *const CallmaskGrammar,
    vocab: *const CallmaskVocab,
    out: *mut *mut CallmaskMatcher,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (out, g, v) = unsafe {
            (
                out_ptr(out, "out")?,
                get(grammar, "grammar")?,
                get(vocab, "vocab")?,
            )
        };
        let matcher = g.automaton(&v.vocab)?.matcher();
        *out = boxed(CallmaskMatcher {
            matcher,
            scratch: TokenMask::new(0),
            error: None,
        });
        Ok(())
    })
}

/// A copy of `matcher` at the same position (a fork: the two go on independently).
///
/// # Safety
/// `matcher` live; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_clone(
    matcher: *const CallmaskMatcher,
    out: *mut *mut CallmaskMatcher,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (out, m) = unsafe { (out_ptr(out, "out")?, get(matcher, "matcher")?) };
        *out = boxed(CallmaskMatcher {
            matcher: m.matcher.clone(),
            scratch: TokenMask::new(0),
            error: None,
        });
        Ok(())
    })
}

/// Back to the start of an output (accepted tokens and rollback history dropped).
///
/// # Safety
/// `matcher` live, unaliased.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_reset(matcher: *mut CallmaskMatcher) -> CallmaskStatus {
    // SAFETY: caller's contract.
    unsafe {
        with_matcher(matcher, |m| {
            m.matcher = m.matcher.automaton().matcher();
            Ok(())
        })
    }
}

/// Writes the tokens allowed next into `bitmask` (`n_words` 32-bit words, at least
/// [`callmask_vocab_mask_words`]; extra words are zeroed): end-of-generation tokens only where
/// the output may end, nothing once finished. `CALLMASK_STATUS_BITMASK_SIZE` (nothing written)
/// when `n_words` is too small.
///
/// # Safety
/// `matcher` live, unaliased; `bitmask` writable for `n_words` words.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_fill_mask(
    matcher: *mut CallmaskMatcher,
    bitmask: *mut u32,
    n_words: usize,
) -> CallmaskStatus {
    // SAFETY: caller's contract.
    unsafe {
        with_matcher(matcher, |m| {
            if bitmask.is_null() {
                return Err(null("bitmask"));
            }
            // SAFETY: writable for `n_words` words (caller's contract).
            let out = std::slice::from_raw_parts_mut(bitmask, n_words);
            m.matcher.fill_u32_words(out, &mut m.scratch)?;
            Ok(())
        })
    }
}

/// Fills one bitmask row per matcher (rows on the calling thread for 100 µs, the rest in
/// parallel on a thread pool): row `i` is
/// `rows[i * row_words .. (i + 1) * row_words]`; a NULL matcher leaves its row untouched. The
/// matchers must be distinct (`CALLMASK_STATUS_INVALID_ARGUMENT` otherwise).
///
/// # Safety
/// `matchers` readable for `n` pointers, each NULL or a live matcher not used elsewhere during
/// the call; `rows` writable for `n * row_words` words.
#[no_mangle]
pub unsafe extern "C" fn callmask_fill_masks(
    matchers: *const *mut CallmaskMatcher,
    n: usize,
    rows: *mut u32,
    row_words: usize,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let list = unsafe { slice_arg(matchers, n, "matchers") }?;
        let mut seen: Vec<usize> = list
            .iter()
            .filter(|p| !p.is_null())
            .map(|p| *p as usize)
            .collect();
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return Err(Failure::new(
                CallmaskStatus::InvalidArgument,
                "the same matcher appears twice",
            ));
        }
        let words = n.checked_mul(row_words).ok_or_else(|| {
            Failure::new(CallmaskStatus::InvalidArgument, "n * row_words overflows")
        })?;
        if rows.is_null() && words > 0 {
            return Err(null("rows"));
        }
        // SAFETY: distinct live matchers (checked distinct above; live per the contract).
        let mut ms: Vec<Option<&mut Matcher>> = list
            .iter()
            .map(|&p| unsafe { p.as_mut() }.map(|m| &mut m.matcher))
            .collect();
        let rows: &mut [u32] = if words == 0 {
            &mut []
        } else {
            // SAFETY: writable for `n * row_words` words (caller's contract).
            unsafe { std::slice::from_raw_parts_mut(rows, words) }
        };
        callmask::mask::fill_u32_rows(&mut ms, rows, row_words)?;
        Ok(())
    })
}

/// Accepts one token. `CALLMASK_STATUS_TOKEN_FORBIDDEN` / `_TOKEN_OUT_OF_VOCABULARY` (the
/// matcher unchanged) when it is not allowed.
///
/// # Safety
/// `matcher` live, unaliased.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_accept_token(
    matcher: *mut CallmaskMatcher,
    token: u32,
) -> CallmaskStatus {
    // SAFETY: caller's contract.
    unsafe { with_matcher(matcher, |m| Ok(m.matcher.accept(token)?)) }
}

/// Accepts `n` tokens in order, stopping at the first one refused: `*n_accepted` (may be NULL)
/// says how many were accepted (they stay accepted; [`callmask_matcher_rollback`] undoes them).
///
/// # Safety
/// `matcher` live, unaliased; `tokens` readable for `n`; `n_accepted` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_accept_tokens(
    matcher: *mut CallmaskMatcher,
    tokens: *const u32,
    n: usize,
    n_accepted: *mut usize,
) -> CallmaskStatus {
    // SAFETY: caller's contract.
    let mut count = unsafe { n_accepted.as_mut() };
    if let Some(c) = count.as_deref_mut() {
        *c = 0;
    }
    // SAFETY: caller's contract.
    unsafe {
        with_matcher(matcher, |m| {
            let ts = slice_arg(tokens, n, "tokens")?;
            for &t in ts {
                m.matcher.accept(t)?;
                if let Some(c) = count.as_deref_mut() {
                    *c += 1;
                }
            }
            Ok(())
        })
    }
}

/// How many of `tokens`, from the first, would be accepted one after the other (the longest
/// accepted prefix), in `*n_valid`, without changing the matcher (speculative decoding).
///
/// # Safety
/// `matcher` live; `tokens` readable for `n`; `n_valid` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_validate_tokens(
    matcher: *mut CallmaskMatcher,
    tokens: *const u32,
    n: usize,
    n_valid: *mut usize,
) -> CallmaskStatus {
    // SAFETY: caller's contract.
    unsafe {
        with_matcher(matcher, |m| {
            let out = get_mut(n_valid, "n_valid")?;
            let ts = slice_arg(tokens, n, "tokens")?;
            *out = m.matcher.validate_tokens(ts);
            Ok(())
        })
    }
}

/// True when `token` may come next (cheaper than a mask); false when not, or on NULL.
///
/// # Safety
/// `matcher` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_is_allowed(
    matcher: *const CallmaskMatcher,
    token: u32,
) -> bool {
    // SAFETY: caller's contract.
    guard_value(false, || {
        Ok(unsafe { get(matcher, "matcher") }?
            .matcher
            .is_allowed(token))
    })
}

/// Undoes the last `n` accepted tokens (at most the last 1024). `CALLMASK_STATUS_ROLLBACK`
/// (nothing undone) beyond.
///
/// # Safety
/// `matcher` live, unaliased.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_rollback(
    matcher: *mut CallmaskMatcher,
    n: usize,
) -> CallmaskStatus {
    // SAFETY: caller's contract.
    unsafe { with_matcher(matcher, |m| Ok(m.matcher.rollback(n)?)) }
}

/// Gives the matcher a token budget: every output then finishes within `max_tokens` more tokens,
/// its end-of-generation token included (the mask keeps only tokens after which a complete
/// output still fits; it never dead-ends). Negative: no budget. `CALLMASK_STATUS_BUDGET`
/// (nothing changed) when the shortest complete output from here needs more, or when the
/// vocabulary lacks a single-byte token for some byte (the budget cannot count then).
///
/// # Safety
/// `matcher` live, unaliased.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_set_token_budget(
    matcher: *mut CallmaskMatcher,
    max_tokens: i64,
) -> CallmaskStatus {
    let budget = usize::try_from(max_tokens).ok();
    // SAFETY: caller's contract.
    unsafe { with_matcher(matcher, |m| Ok(m.matcher.set_token_budget(budget)?)) }
}

/// Tokens left in the matcher's budget (end-of-generation token included), or -1 when it has no
/// budget (or `matcher` is NULL).
///
/// # Safety
/// `matcher` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_tokens_left(matcher: *const CallmaskMatcher) -> i64 {
    // SAFETY: caller's contract.
    guard_value(-1, || {
        let left = unsafe { get(matcher, "matcher") }?.matcher.tokens_left();
        Ok(left.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX)))
    })
}

/// True when the output may end here (end-of-generation tokens are allowed); false on NULL.
///
/// # Safety
/// `matcher` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_can_end(matcher: *const CallmaskMatcher) -> bool {
    // SAFETY: caller's contract.
    guard_value(false, || {
        Ok(unsafe { get(matcher, "matcher") }?.matcher.can_end())
    })
}

/// True once an end-of-generation token was accepted, or when nothing else may follow; false
/// on NULL.
///
/// # Safety
/// `matcher` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_is_finished(matcher: *const CallmaskMatcher) -> bool {
    // SAFETY: caller's contract.
    guard_value(false, || {
        Ok(unsafe { get(matcher, "matcher") }?.matcher.is_finished())
    })
}

/// The message of the last failed call on this matcher, or NULL. Owned by the matcher: valid
/// until its next failure or its free.
///
/// # Safety
/// `matcher` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_last_error(
    matcher: *const CallmaskMatcher,
) -> *const c_char {
    // SAFETY: caller's contract.
    match unsafe { matcher.as_ref() } {
        Some(m) => m.error.as_ref().map_or(ptr::null(), |e| e.as_ptr()),
        None => ptr::null(),
    }
}

/// Frees a matcher (NULL is ignored).
///
/// # Safety
/// `matcher` NULL or a matcher not freed before.
#[no_mangle]
pub unsafe extern "C" fn callmask_matcher_free(matcher: *mut CallmaskMatcher) {
    if !matcher.is_null() {
        // SAFETY: made by `boxed`, freed once (caller's contract).
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(matcher) })));
    }
}

// ---------------------------------------------------------------------------------------------
// Streaming parser

/// Parses an output as it is generated, fed tokens or text, reporting events as soon as they
/// are certain. Used by one thread at a time.
pub struct CallmaskStreamParser {
    parser: StreamParser,
    error: Option<CString>,
}

/// Events as a JSON array: `{"type": "text", "text"}`, `{"type": "reasoning", "text"}`,
/// `{"type": "call_start", "index", "id", "name"}`, `{"type": "arguments", "index", "delta"}`
/// (the deltas of a call concatenate to its arguments JSON), `{"type": "call_id", "index", "id"}`
/// (the id the model wrote, replacing `call_<index>`), `{"type": "call_end", "index"}`.
fn events_json(events: &[Event]) -> String {
    let list: Vec<Value> = events
        .iter()
        .map(|e| match e {
            Event::Text(t) => json!({"type": "text", "text": t}),
            Event::Reasoning(t) => json!({"type": "reasoning", "text": t}),
            Event::CallStart { index, id, name } => {
                json!({"type": "call_start", "index": index, "id": id, "name": name})
            }
            Event::Arguments { index, delta } => {
                json!({"type": "arguments", "index": index, "delta": delta})
            }
            Event::CallId { index, id } => json!({"type": "call_id", "index": index, "id": id}),
            Event::CallEnd { index } => json!({"type": "call_end", "index": index}),
        })
        .collect();
    Value::Array(list).to_string()
}

/// Runs a stream parser operation and writes its events to `out`.
///
/// # Safety
/// `p` NULL or a live parser, unaliased; `out` NULL or writable.
unsafe fn with_parser(
    p: *mut CallmaskStreamParser,
    out: *mut *mut c_char,
    f: impl FnOnce(&mut StreamParser) -> Res<Vec<Event>>,
) -> CallmaskStatus {
    // SAFETY: caller's contract.
    match unsafe { p.as_mut() } {
        None => guard(None, || {
            // SAFETY: caller's contract.
            unsafe { out_ptr(out, "events_json") }?;
            Err(null("parser"))
        }),
        Some(p) => {
            let mut slot = p.error.take();
            let status = guard(Some(&mut slot), || {
                // SAFETY: caller's contract.
                let out = unsafe { out_ptr(out, "events_json") }?;
                let events = f(&mut p.parser)?;
                *out = c_string_out(events_json(&events));
                Ok(())
            });
            p.error = slot;
            status
        }
    }
}

/// A streaming parser at the start of an output of `grammar`.
///
/// # Safety
/// `grammar` live; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_stream_parser_new(
    grammar: *const CallmaskGrammar,
    out: *mut *mut CallmaskStreamParser,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let (out, g) = unsafe { (out_ptr(out, "out")?, get(grammar, "grammar")?) };
        *out = boxed(CallmaskStreamParser {
            parser: StreamParser::new(&g.grammar),
            error: None,
        });
        Ok(())
    })
}

/// Feeds `len` bytes of output text; the events now certain go to `*events_json` as a JSON array
/// (`[{"type": "text"|"reasoning", "text"}, {"type": "call_start", "index", "id", "name"},
/// {"type": "arguments", "index", "delta"}, {"type": "call_id", "index", "id"},
/// {"type": "call_end", "index"}]`; free it with
/// [`callmask_string_free`]). `CALLMASK_STATUS_PARSE` when the text is rejected.
///
/// # Safety
/// `parser` live, unaliased; `text` readable for `len` bytes; `events_json` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_stream_parser_push_text(
    parser: *mut CallmaskStreamParser,
    text: *const c_char,
    len: usize,
    events_json: *mut *mut c_char,
) -> CallmaskStatus {
    // SAFETY: caller's contract.
    unsafe {
        with_parser(parser, events_json, |p| {
            let t = str_arg(text, len, "text")?;
            Ok(p.push(t)?)
        })
    }
}

/// Feeds one token of `vocab` (end-of-generation tokens are ignored: call
/// [`callmask_stream_parser_finish`]); events as [`callmask_stream_parser_push_text`].
///
/// # Safety
/// `parser` live, unaliased; `vocab` live; `events_json` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_stream_parser_push_token(
    parser: *mut CallmaskStreamParser,
    vocab: *const CallmaskVocab,
    token: u32,
    events_json: *mut *mut c_char,
) -> CallmaskStatus {
    // SAFETY: caller's contract.
    unsafe {
        with_parser(parser, events_json, |p| {
            let v = get(vocab, "vocab")?;
            Ok(p.push_token(&v.vocab, token)?)
        })
    }
}

/// Ends the output: the remaining events, or `CALLMASK_STATUS_PARSE` when it is incomplete.
///
/// # Safety
/// `parser` live, unaliased; `events_json` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_stream_parser_finish(
    parser: *mut CallmaskStreamParser,
    events_json: *mut *mut c_char,
) -> CallmaskStatus {
    // SAFETY: caller's contract.
    unsafe { with_parser(parser, events_json, |p| Ok(p.finish()?)) }
}

/// The message of the last failed call on this parser, or NULL (valid until its next failure
/// or its free).
///
/// # Safety
/// `parser` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn callmask_stream_parser_last_error(
    parser: *const CallmaskStreamParser,
) -> *const c_char {
    // SAFETY: caller's contract.
    match unsafe { parser.as_ref() } {
        Some(p) => p.error.as_ref().map_or(ptr::null(), |e| e.as_ptr()),
        None => ptr::null(),
    }
}

/// Frees a stream parser (NULL is ignored).
///
/// # Safety
/// `parser` NULL or a parser not freed before.
#[no_mangle]
pub unsafe extern "C" fn callmask_stream_parser_free(parser: *mut CallmaskStreamParser) {
    if !parser.is_null() {
        // SAFETY: made by `boxed`, freed once (caller's contract).
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(parser) })));
    }
}

/// A GGUF file's vocabulary, read by the bundled llama.cpp.
#[cfg(feature = "bundled-llama")]
fn gguf_vocab(path: &str) -> Res<Vocab> {
    use callmask_llama::GgufVocab;
    Ok(Vocab::from_gguf(path)?)
}

/// Without a bundled llama.cpp there is nothing to read a GGUF file with.
#[cfg(not(feature = "bundled-llama"))]
fn gguf_vocab(path: &str) -> Res<Vocab> {
    Err(Failure::new(
        CallmaskStatus::Unsupported,
        format!(
            "cannot read {path}: this libcallmask_c was built without the bundled llama.cpp \
             (load the model with your llama.cpp and call callmask_vocab_from_llama_vocab)"
        ),
    ))
}

#[cfg(feature = "bundled-llama")]
mod llama;
