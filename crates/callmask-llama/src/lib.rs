//! callmask on llama.cpp: GGUF vocabularies ([`GgufVocab::from_gguf`]), a constrained
//! `llama_sampler`, and generation with a GGUF model, one sequence or several in one batch.
//!
//! This is the only crate of the workspace with `unsafe` code besides the bindings; the core
//! `callmask` crate forbids it and needs no llama.cpp to build.
//!
//! [`ConstrainedSampler`] is a real llama.cpp sampler chain built through `llama-cpp-sys-2`: a
//! custom `llama_sampler` (this crate's vtable: `apply` masks the logits with a [`Matcher`],
//! `accept` advances it, `reset` rewinds it) followed by llama.cpp's own penalties, top-k,
//! top-p, min-p, temperature and `dist` (or `greedy`) samplers. The common case is cheap: each
//! token is first sampled *without* the mask; when the matcher allows that token (one
//! [`Matcher::is_allowed`] check) it is taken, and only otherwise is the chain run again with
//! the full mask. Both give the masked distribution: a token drawn from the unmasked one and
//! kept when allowed is, overall, drawn with probability proportional to its unmasked one.
//!
//! Every callback catches panics, so none crosses into llama.cpp, and reports them as errors on
//! the next call.
//!
//! ```no_run
//! use callmask::Vocab;
//! use callmask_llama::GgufVocab;
//! # fn main() -> callmask::Result<()> {
//! let vocab = Vocab::from_gguf("gemma-3-270m-q4_k_m.gguf")?;
//! assert!(vocab.len() > 0);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod gguf;

/// The workspace README's Rust examples, compiled as this crate's doctests (this crate sees
/// both `callmask` and `callmask_llama`, which the README uses), so that the README cannot
/// drift from the API: `cargo test -p callmask-llama --doc`. The pages of `docs/` with Rust
/// examples are compiled the same way, below.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// `docs/library.md`'s Rust examples, as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
pub struct LibraryDocDoctests;

/// `docs/dialects.md`'s Rust examples, as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/dialects.md")]
pub struct DialectsDocDoctests;

/// `docs/engines.md`'s Rust examples, as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/engines.md")]
pub struct EnginesDocDoctests;

/// `docs/structural-tags.md`'s Rust examples, as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/structural-tags.md")]
pub struct StructuralTagsDocDoctests;

pub use gguf::{llama_backend, vocab_from_llama_vocab};

use callmask::{Error, Matcher, Result, TokenAutomaton, TokenId, TokenMask, Vocab};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_sys_2 as sys;
use std::ffi::c_void;
use std::num::NonZeroU32;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// [`Vocab::from_gguf`]: the vocabulary of a GGUF model, read by llama.cpp.
pub trait GgufVocab: Sized {
    /// Loads the vocabulary of a GGUF model through llama.cpp (vocabulary only, no weights).
    ///
    /// Special tokens are llama.cpp's control, unknown and unused tokens (and any token that
    /// renders to no bytes); their bytes are their text. End-of-generation tokens are those
    /// llama.cpp reports as such (`llama_vocab_is_eog`). [`Error::Io`] when the file cannot be
    /// opened, [`Error::Vocab`] when llama.cpp cannot load it.
    fn from_gguf(path: impl AsRef<Path>) -> Result<Self>;
}

impl GgufVocab for Vocab {
    fn from_gguf(path: impl AsRef<Path>) -> Result<Self> {
        gguf::load(path.as_ref())
    }
}

/// How tokens are drawn (llama.cpp's samplers, after the mask).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SamplingParams {
    /// Temperature; `0` (or less) picks the most likely token (greedy).
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens (`0`: off).
    pub top_k: i32,
    /// Nucleus sampling (`1.0`: off).
    pub top_p: f32,
    /// Minimum probability relative to the most likely token (`0.0`: off).
    pub min_p: f32,
    /// Repetition penalty (`1.0`: off) over the last `repeat_last_n` tokens.
    pub repeat_penalty: f32,
    /// Window of the repetition penalty.
    pub repeat_last_n: i32,
    /// Seed of the random draw.
    pub seed: u32,
    /// Constrained only: draw first and check that one token, masking only when it is refused
    /// (`true`, the default); `false` masks every token (for comparison).
    pub check_first: bool,
    /// Constrained only: `max_tokens` is also the matcher's token budget (`true`, the default:
    /// the output ends complete within `max_tokens`); `false` only cuts the output at
    /// `max_tokens`, possibly mid-call (for comparison).
    pub token_budget: bool,
}

callmask::option_setters!(SamplingParams {
    temperature: f32,
    top_k: i32,
    top_p: f32,
    min_p: f32,
    repeat_penalty: f32,
    repeat_last_n: i32,
    seed: u32,
    check_first: bool,
    token_budget: bool
});

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            seed: 0,
            check_first: true,
            token_budget: true,
        }
    }
}

/// What a [`ConstrainedSampler`] did: how often the sampled token was allowed as drawn, and how
/// often a full mask was needed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SamplerStats {
    /// Tokens taken on the fast path (one `is_allowed` check, no mask).
    pub fast: u64,
    /// Tokens that needed the full mask.
    pub masked: u64,
    /// Tokens where the token budget steered: the model's unconstrained first choice was one
    /// the grammar allows but after which no complete output fits in the tokens left (counted
    /// on the fast path, [`SamplingParams::check_first`]).
    pub budget_steered: u64,
    /// Masks where the distinct-calls rule gave way ([`callmask::Matcher::distinct_gave_up`]):
    /// from the first, the output may repeat a call.
    pub distinct_gave_up: u64,
}

/// The state behind the custom `llama_sampler`: owned by it, freed by its `free` callback.
struct MaskState {
    matcher: Matcher,
    /// The matcher at the start, for `reset`.
    start: Matcher,
    mask: TokenMask,
    /// While true, `apply` leaves the logits alone (the fast path's first draw).
    bypass: bool,
    /// A failure inside a callback (a panic, a token the matcher refused), reported later.
    error: Option<String>,
}

unsafe extern "C" fn mask_name(_: *const sys::llama_sampler) -> *const std::os::raw::c_char {
    c"callmask".as_ptr()
}

/// The state of a callmask sampler.
///
/// # Safety
/// `smpl` must be a sampler made by [`ConstrainedSampler`] (its `ctx` a live `MaskState`), and no
/// other reference to that state may be in use.
unsafe fn state<'a>(smpl: *mut sys::llama_sampler) -> &'a mut MaskState {
    // SAFETY: per this function's contract, `ctx` points to a live, unaliased `MaskState`.
    unsafe { &mut *(*smpl).ctx.cast::<MaskState>() }
}

unsafe extern "C" fn mask_accept(smpl: *mut sys::llama_sampler, token: sys::llama_token) {
    // SAFETY: llama.cpp calls this with the sampler it was registered for (ours).
    let st = unsafe { state(smpl) };
    let r = catch_unwind(AssertUnwindSafe(|| {
        let t = TokenId::try_from(token).map_err(|_| format!("negative token id {token}"))?;
        st.matcher.accept(t).map_err(|e| e.to_string())
    }));
    match r {
        Ok(Ok(())) => {}
        Ok(Err(e)) => st.error = Some(e),
        Err(_) => st.error = Some("callmask panicked accepting a token".into()),
    }
}

unsafe extern "C" fn mask_apply(
    smpl: *mut sys::llama_sampler,
    cur_p: *mut sys::llama_token_data_array,
) {
    // SAFETY: llama.cpp calls this with the sampler it was registered for (ours).
    let st = unsafe { state(smpl) };
    if st.bypass {
        return;
    }
    // SAFETY: llama.cpp passes a valid array of `size` initialized entries, ours to modify.
    let data = unsafe { std::slice::from_raw_parts_mut((*cur_p).data, (*cur_p).size) };
    if let [one] = data {
        // One candidate: a caller checking a token drawn without the mask (llama.cpp's
        // `common_sampler` does, before resampling with it); a refusal is an answer, not a
        // failure.
        let allowed = catch_unwind(AssertUnwindSafe(|| {
            u32::try_from(one.id).is_ok_and(|t| st.matcher.is_allowed(t))
        }))
        .unwrap_or(false);
        if !allowed {
            one.logit = f32::NEG_INFINITY;
        }
        return;
    }
    let r = catch_unwind(AssertUnwindSafe(|| {
        st.matcher.fill_mask(&mut st.mask);
        let mut any = false;
        for item in data.iter_mut() {
            let allowed = u32::try_from(item.id).is_ok_and(|t| st.mask.is_allowed(t));
            if allowed {
                any = any || item.logit > f32::NEG_INFINITY;
            } else {
                item.logit = f32::NEG_INFINITY;
            }
        }
        any
    }));
    match r {
        Ok(true) => {}
        Ok(false) => st.error = Some("no allowed token has a finite logit".into()),
        Err(_) => {
            st.error = Some("callmask panicked computing a mask".into());
            data.iter_mut().for_each(|i| i.logit = f32::NEG_INFINITY);
        }
    }
}

unsafe extern "C" fn mask_reset(smpl: *mut sys::llama_sampler) {
    // SAFETY: llama.cpp calls this with the sampler it was registered for (ours).
    let st = unsafe { state(smpl) };
    st.matcher = st.start.clone();
    st.error = None;
}

unsafe extern "C" fn mask_clone(smpl: *const sys::llama_sampler) -> *mut sys::llama_sampler {
    // SAFETY: llama.cpp calls this with the sampler it was registered for (ours); only read.
    let st = unsafe { &*(*smpl).ctx.cast::<MaskState>() };
    let copy = Box::new(MaskState {
        matcher: st.matcher.clone(),
        start: st.start.clone(),
        mask: st.mask.clone(),
        bypass: st.bypass,
        error: st.error.clone(),
    });
    // SAFETY: the vtable is a static that lives forever; the state is a fresh box whose
    // ownership passes to the new sampler (freed by `mask_free`).
    unsafe { sys::llama_sampler_init(&raw mut MASK_SAMPLER, Box::into_raw(copy).cast::<c_void>()) }
}

unsafe extern "C" fn mask_free(smpl: *mut sys::llama_sampler) {
    // SAFETY: `ctx` was made by `Box::into_raw` of a `MaskState` and is freed only here, once.
    unsafe {
        let ctx = (*smpl).ctx.cast::<MaskState>();
        if !ctx.is_null() {
            drop(Box::from_raw(ctx));
        }
    }
}

/// The vtable of callmask's `llama_sampler`.
static mut MASK_SAMPLER: sys::llama_sampler_i = sys::llama_sampler_i {
    name: Some(mask_name),
    accept: Some(mask_accept),
    apply: Some(mask_apply),
    reset: Some(mask_reset),
    clone: Some(mask_clone),
    free: Some(mask_free),
    backend_init: None,
    backend_accept: None,
    backend_apply: None,
    backend_set_input: None,
    backend_reset: None,
    copy_state: None,
};

/// callmask's mask alone as a `llama_sampler` (the one [`ConstrainedSampler`] puts first in its
/// chain), for programs that build their own chain with `llama_sampler_chain_add` (the C API's
/// `callmask_llama_sampler_init`). `apply` sets the logits of forbidden tokens to `-inf`,
/// `accept` advances the matcher, `reset` rewinds it to `matcher`'s position, `clone` forks
/// it; failures inside callbacks are kept for [`mask_sampler_take_error`].
///
/// The caller owns the result: free it with `llama_sampler_free`, or hand it to a chain, which
/// then frees it.
pub fn mask_sampler_init(matcher: Matcher) -> Result<NonNull<sys::llama_sampler>> {
    let vocab_len = matcher.automaton().vocab().len();
    let st = Box::new(MaskState {
        start: matcher.clone(),
        matcher,
        mask: TokenMask::new(vocab_len),
        bypass: false,
        error: None,
    });
    let raw = Box::into_raw(st);
    // SAFETY: the vtable is a static that lives forever; the state's ownership passes to the new
    // sampler (freed by `mask_free`).
    let s = unsafe { sys::llama_sampler_init(&raw mut MASK_SAMPLER, raw.cast::<c_void>()) };
    NonNull::new(s).ok_or_else(|| {
        // SAFETY: llama.cpp did not take the state: it is still ours to free, once.
        drop(unsafe { Box::from_raw(raw) });
        Error::Vocab("llama.cpp could not create a sampler".into())
    })
}

/// True when `smpl` is a sampler made by [`mask_sampler_init`] (or cloned from one).
///
/// # Safety
/// `smpl` must be null or point to a live `llama_sampler`.
pub unsafe fn is_mask_sampler(smpl: *const sys::llama_sampler) -> bool {
    // SAFETY: a live sampler (this function's contract); only its vtable pointer is read.
    !smpl.is_null() && unsafe { std::ptr::eq((*smpl).iface, &raw const MASK_SAMPLER) }
}

/// The matcher inside a sampler made by [`mask_sampler_init`] (`None` for any other sampler).
///
/// # Safety
/// `smpl` must be null or point to a live `llama_sampler` that no one uses during the borrow.
pub unsafe fn mask_sampler_matcher<'a>(smpl: *const sys::llama_sampler) -> Option<&'a Matcher> {
    // SAFETY: checked to be ours, so `ctx` is a live `MaskState` (caller's contract: unused
    // elsewhere during the borrow).
    unsafe { is_mask_sampler(smpl).then(|| &(*(*smpl).ctx.cast::<MaskState>()).matcher) }
}

/// Takes the failure a callback of a [`mask_sampler_init`] sampler recorded (a token its
/// matcher refused, no allowed token with a finite logit, a caught panic), if any.
///
/// # Safety
/// `smpl` must be null or point to a live `llama_sampler` that no one uses during the call.
pub unsafe fn mask_sampler_take_error(smpl: *mut sys::llama_sampler) -> Option<String> {
    // SAFETY: checked to be ours, so `state` may be called (caller's contract: unaliased).
    unsafe {
        is_mask_sampler(smpl)
            .then(|| state(smpl).error.take())
            .flatten()
    }
}

/// Sets the token budget of a sampler made by [`mask_sampler_init`] (see
/// [`Matcher::set_token_budget`]), at its current position and for `reset` (the budget counts
/// from the start of the output after a reset). `None` when `smpl` is another kind of sampler;
/// the matcher's error (nothing changed) when the budget cannot hold.
///
/// # Safety
/// `smpl` must be null or point to a live `llama_sampler` that no one uses during the call.
pub unsafe fn mask_sampler_set_token_budget(
    smpl: *mut sys::llama_sampler,
    budget: Option<usize>,
) -> Option<Result<()>> {
    // SAFETY: a live sampler (caller's contract); `state` only once it is known to be ours.
    if !unsafe { is_mask_sampler(smpl) } {
        return None;
    }
    // SAFETY: ours and unaliased (caller's contract).
    let st = unsafe { state(smpl) };
    let mut start = st.start.clone();
    let mut now = st.matcher.clone();
    Some(
        start
            .set_token_budget(budget)
            .and_then(|()| now.set_token_budget(budget))
            .map(|()| {
                st.start = start;
                st.matcher = now;
            }),
    )
}

/// A llama.cpp sampler chain whose first sampler is callmask's mask (see the module docs).
pub struct ConstrainedSampler {
    chain: NonNull<sys::llama_sampler>,
    /// callmask's sampler inside `chain` (owned by the chain), if constrained.
    mask: Option<NonNull<sys::llama_sampler>>,
    scratch: Vec<sys::llama_token_data>,
    n_vocab: usize,
    stats: SamplerStats,
    check_first: bool,
}

// SAFETY: the chain and its samplers are owned by this value and only touched through `&mut
// self` (or in `drop`); the callmask state holds only `Send` data (matchers, masks, strings).
unsafe impl Send for ConstrainedSampler {}

impl Drop for ConstrainedSampler {
    fn drop(&mut self) {
        // SAFETY: the chain was made by `llama_sampler_chain_init` and is freed once, here; it
        // frees the samplers added to it, ours included.
        unsafe { sys::llama_sampler_free(self.chain.as_ptr()) }
    }
}

impl ConstrainedSampler {
    /// A chain masking with `matcher` (or, with `None`, an unconstrained chain) over a vocabulary
    /// of `n_vocab` tokens, then drawing as `params` says.
    pub fn new(matcher: Option<Matcher>, n_vocab: usize, params: &SamplingParams) -> Result<Self> {
        let n_vocab_i32 =
            i32::try_from(n_vocab).map_err(|_| Error::Vocab("vocabulary too large".into()))?;
        let fail = || Error::Vocab("llama.cpp could not create a sampler".into());
        // SAFETY: plain constructor calls; every pointer is checked, and each sampler added to
        // the chain is owned by the chain from then on.
        unsafe {
            let chain = NonNull::new(sys::llama_sampler_chain_init(
                sys::llama_sampler_chain_default_params(),
            ))
            .ok_or_else(fail)?;
            let mut this = ConstrainedSampler {
                chain,
                mask: None,
                scratch: Vec::with_capacity(n_vocab),
                n_vocab,
                stats: SamplerStats::default(),
                check_first: params.check_first,
            };
            let add = |s: *mut sys::llama_sampler| -> Result<()> {
                if s.is_null() {
                    return Err(fail());
                }
                sys::llama_sampler_chain_add(chain.as_ptr(), s);
                Ok(())
            };
            if let Some(m) = matcher {
                let s = mask_sampler_init(m)?;
                add(s.as_ptr())?;
                this.mask = Some(s);
            }
            if params.repeat_penalty != 1.0 {
                add(sys::llama_sampler_init_penalties(
                    n_vocab_i32,
                    params.repeat_last_n,
                    params.repeat_penalty,
                    0.0,
                    0.0,
                ))?;
            }
            if params.temperature <= 0.0 {
                add(sys::llama_sampler_init_greedy())?;
            } else {
                if params.top_k > 0 {
                    add(sys::llama_sampler_init_top_k(params.top_k))?;
                }
                if params.top_p < 1.0 {
                    add(sys::llama_sampler_init_top_p(params.top_p, 1))?;
                }
                if params.min_p > 0.0 {
                    add(sys::llama_sampler_init_min_p(params.min_p, 1))?;
                }
                add(sys::llama_sampler_init_temp(params.temperature))?;
                add(sys::llama_sampler_init_dist(params.seed))?;
            }
            Ok(this)
        }
    }

    /// The raw chain, for code that drives llama.cpp's C API itself (still owned by `self`).
    pub fn as_raw(&mut self) -> *mut sys::llama_sampler {
        self.chain.as_ptr()
    }

    fn state(&mut self) -> Option<&mut MaskState> {
        // SAFETY: `mask` is our sampler, alive as long as the chain; `&mut self` makes this the
        // only reference to its state.
        self.mask.map(|m| unsafe { state(m.as_ptr()) })
    }

    /// Fast path and mask counts so far.
    pub fn stats(&self) -> SamplerStats {
        self.stats
    }

    /// The matcher (`None` for an unconstrained chain).
    pub fn matcher(&mut self) -> Option<&Matcher> {
        self.state().map(|s| &s.matcher)
    }

    /// Runs the chain over `logits`; with `masked` false, callmask's sampler lets them through.
    fn draw(&mut self, logits: &[f32], masked: bool) -> Option<TokenId> {
        self.scratch.clear();
        self.scratch.extend(
            logits
                .iter()
                .enumerate()
                .map(|(i, &logit)| sys::llama_token_data {
                    id: i as sys::llama_token,
                    logit,
                    p: 0.0,
                }),
        );
        if let Some(st) = self.state() {
            st.bypass = !masked;
        }
        let mut arr = sys::llama_token_data_array {
            data: self.scratch.as_mut_ptr(),
            size: self.scratch.len(),
            selected: -1,
            sorted: false,
        };
        // SAFETY: `arr` points into `scratch`, initialized and exclusively ours for the call.
        unsafe { sys::llama_sampler_apply(self.chain.as_ptr(), &mut arr) };
        if let Some(st) = self.state() {
            st.bypass = false;
        }
        let i = usize::try_from(arr.selected).ok()?;
        // llama.cpp may have reordered the array; the entry, not the index, has the id.
        let t = self.scratch.get(i)?;
        (t.logit > f32::NEG_INFINITY || !masked)
            .then_some(t.id)
            .and_then(|id| TokenId::try_from(id).ok())
    }

    /// Picks the next token from a row of logits (one per vocabulary token), without accepting
    /// it: the fast path first (draw, then check that one token), the full mask if refused.
    pub fn sample_logits(&mut self, logits: &[f32]) -> Result<TokenId> {
        if logits.len() != self.n_vocab {
            return Err(Error::Vocab(format!(
                "{} logits for a vocabulary of {} tokens",
                logits.len(),
                self.n_vocab
            )));
        }
        if self.mask.is_none() {
            return self
                .draw(logits, false)
                .ok_or_else(|| Error::Vocab("the sampler selected no token".into()));
        }
        if self.check_first {
            if let Some(t) = self.draw(logits, false) {
                if self.state().is_some_and(|s| s.matcher.is_allowed(t)) {
                    self.stats.fast += 1;
                    return Ok(t);
                }
                if self
                    .state()
                    .is_some_and(|s| s.matcher.is_allowed_by_grammar(t))
                {
                    self.stats.budget_steered += 1;
                }
            }
        }
        self.stats.masked += 1;
        let t = self.draw(logits, true);
        if let Some(e) = self.state().and_then(|s| s.error.take()) {
            return Err(Error::Vocab(format!("constrained sampling failed: {e}")));
        }
        t.ok_or_else(|| Error::Vocab("no token is allowed here".into()))
    }

    /// Picks the next token for output `idx` of the last decode of `ctx`.
    pub fn sample(&mut self, ctx: &LlamaContext<'_>, idx: i32) -> Result<TokenId> {
        let logits = catch_unwind(AssertUnwindSafe(|| ctx.get_logits_ith(idx).to_vec()))
            .map_err(|_| Error::Vocab(format!("llama.cpp has no logits for output {idx}")))?;
        self.sample_logits(&logits)
    }

    /// Accepts the chosen token into every sampler of the chain (the matcher included).
    pub fn accept(&mut self, token: TokenId) -> Result<()> {
        let t = sys::llama_token::try_from(token).map_err(|_| Error::TokenOutOfVocabulary {
            token,
            vocab_size: self.n_vocab,
        })?;
        if token as usize >= self.n_vocab {
            return Err(Error::TokenOutOfVocabulary {
                token,
                vocab_size: self.n_vocab,
            });
        }
        // SAFETY: the chain is alive and exclusively ours.
        unsafe { sys::llama_sampler_accept(self.chain.as_ptr(), t) };
        if let Some(gave_up) = self.state().map(|s| s.matcher.distinct_gave_up()) {
            self.stats.distinct_gave_up = gave_up;
        }
        match self.state().and_then(|s| s.error.take()) {
            Some(e) => Err(Error::Vocab(format!("constrained sampling failed: {e}"))),
            None => Ok(()),
        }
    }

    /// Back to the start: the matcher rewound, penalties and RNG reset.
    pub fn reset(&mut self) {
        // SAFETY: the chain is alive and exclusively ours.
        unsafe { sys::llama_sampler_reset(self.chain.as_ptr()) };
        self.stats = SamplerStats::default();
    }

    /// True when the constrained output is complete and nothing may follow (or an
    /// end-of-generation token was accepted).
    pub fn is_finished(&mut self) -> bool {
        self.state().is_some_and(|s| s.matcher.is_finished())
    }
}

/// A GGUF model loaded for generation, with its vocabulary for masks.
pub struct Engine {
    model: LlamaModel,
    vocab: Arc<Vocab>,
    threads: i32,
}

/// One generated output.
#[derive(Debug, Clone, Default)]
pub struct Generation {
    /// The generated tokens (an end-of-generation token excluded).
    pub tokens: Vec<TokenId>,
    /// Their text (special tokens spelled out), decoded once from all their bytes, so that a
    /// character spelled over several tokens is whole (bytes that are not UTF-8 become U+FFFD).
    pub text: String,
    /// Ended by an end-of-generation token, or complete with nothing allowed after it.
    pub finished: bool,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Time decoding the prompt.
    pub prompt_time: Duration,
    /// Time generating (decode + sampling) after the prompt.
    pub gen_time: Duration,
    /// Fast path and mask counts (constrained only).
    pub stats: SamplerStats,
}

impl Generation {
    /// Generated tokens per second (after the prompt).
    pub fn tokens_per_second(&self) -> f64 {
        self.tokens.len() as f64 / self.gen_time.as_secs_f64().max(1e-9)
    }
}

impl Engine {
    /// Loads a GGUF model (and its vocabulary); llama.cpp runs on `threads` CPU threads (all
    /// available cores when `None`: llama.cpp's default of 4 crawls on 2 cores).
    pub fn load(path: impl AsRef<Path>, threads: Option<usize>) -> Result<Engine> {
        let path = path.as_ref();
        let vocab = Arc::new(Vocab::from_gguf(path)?);
        let backend = llama_backend()?;
        let params = LlamaModelParams::default();
        let model = catch_unwind(AssertUnwindSafe(|| {
            LlamaModel::load_from_file(backend, path, &params)
        }))
        .map_err(|_| Error::Vocab(format!("llama.cpp panicked loading {}", path.display())))?
        .map_err(|e| Error::Vocab(format!("llama.cpp cannot load {}: {e}", path.display())))?;
        let threads = threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
            .clamp(1, 256) as i32;
        Ok(Engine {
            model,
            vocab,
            threads,
        })
    }

    /// The model's vocabulary (the one masks are computed over).
    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }

    /// The model's beginning-of-sequence token text (for prompt templates).
    pub fn bos_text(&self) -> String {
        let bos = self.model.vocab().bos();
        self.vocab
            .token_bytes(bos.0 as TokenId)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }

    /// The text of the model's end-of-sequence token (for chat templates), empty if unknown.
    pub fn eos_text(&self) -> String {
        let eos = self.model.vocab().eos();
        self.vocab
            .token_bytes(eos.0 as TokenId)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }

    /// The model's own chat template (`tokenizer.chat_template` in the GGUF metadata), if it
    /// has one.
    pub fn chat_template(&self) -> Option<String> {
        let t = catch_unwind(AssertUnwindSafe(|| self.model.chat_template(None))).ok()?;
        t.ok()
            .and_then(|t| t.as_c_str().to_str().ok().map(str::to_owned))
            .filter(|t| !t.is_empty())
    }

    /// Tokenizes a rendered prompt: special-token spellings become special tokens; a BOS token
    /// is added unless the prompt starts with it.
    pub fn tokenize_prompt(&self, prompt: &str) -> Result<Vec<TokenId>> {
        let bos = self.bos_text();
        let add_bos = bos.is_empty() || !prompt.starts_with(&bos);
        let toks = catch_unwind(AssertUnwindSafe(|| {
            self.model
                .vocab()
                .tokenize(prompt.as_bytes(), add_bos, true)
        }))
        .map_err(|_| Error::Vocab("llama.cpp failed to tokenize the prompt".into()))?;
        Ok(toks.into_iter().map(|t| t.0 as TokenId).collect())
    }

    fn context(&self, n_ctx: usize, n_seq: usize) -> Result<LlamaContext<'_>> {
        let n_ctx = u32::try_from(n_ctx.max(64)).unwrap_or(u32::MAX);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(n_ctx.min(2048))
            .with_n_seq_max(n_seq as u32)
            .with_n_threads(self.threads)
            .with_n_threads_batch(self.threads);
        let backend = llama_backend()?;
        catch_unwind(AssertUnwindSafe(|| self.model.new_context(backend, params)))
            .map_err(|_| Error::Vocab("llama.cpp panicked creating a context".into()))?
            .map_err(|e| Error::Vocab(format!("llama.cpp cannot create a context: {e}")))
    }

    /// Generates one output for `prompt` (a rendered prompt), constrained by `automaton` when
    /// given, at most `max_tokens` tokens; `on_text` sees each token's bytes as they come.
    ///
    /// Constrained, `max_tokens` is also the matcher's token budget
    /// ([`callmask::Matcher::set_token_budget`], the end-of-generation token included; unless
    /// [`SamplingParams::token_budget`] is off): the output ends complete (with its
    /// end-of-generation token) within `max_tokens` sampled tokens, whatever the model
    /// prefers; [`callmask::Error::BudgetTooSmall`] when even the shortest complete output does
    /// not fit.
    pub fn generate(
        &self,
        prompt: &str,
        automaton: Option<&TokenAutomaton>,
        params: &SamplingParams,
        max_tokens: usize,
        on_text: &mut dyn FnMut(&[u8]),
    ) -> Result<Generation> {
        let mut out = self.generate_batch(
            &[prompt],
            automaton,
            std::slice::from_ref(params),
            max_tokens,
            &mut |_, b| on_text(b),
        )?;
        Ok(out.remove(0))
    }

    /// Generates one output per prompt, all sequences decoded together in one llama.cpp batch,
    /// each with its own matcher over the shared automaton (masks computed in parallel with
    /// rayon). `params[i]` applies to prompt `i` (or `params[0]` to all when it has one entry).
    pub fn generate_batch(
        &self,
        prompts: &[&str],
        automaton: Option<&TokenAutomaton>,
        params: &[SamplingParams],
        max_tokens: usize,
        on_text: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<Vec<Generation>> {
        use rayon::prelude::*;
        if prompts.is_empty() {
            return Ok(Vec::new());
        }
        if params.len() != 1 && params.len() != prompts.len() {
            return Err(Error::Vocab(
                "one sampling setting, or one per prompt".into(),
            ));
        }
        let n = prompts.len();
        let n_vocab = self.vocab.len();
        let mut samplers = Vec::with_capacity(n);
        let mut gens = vec![Generation::default(); n];
        let mut prompt_toks = Vec::with_capacity(n);
        for (i, p) in prompts.iter().enumerate() {
            let pr = &params[if params.len() == 1 { 0 } else { i }];
            let matcher = match automaton {
                Some(a) => {
                    let mut m = a.matcher();
                    if pr.token_budget {
                        m.set_token_budget(Some(max_tokens))?;
                    }
                    Some(m)
                }
                None => None,
            };
            samplers.push(ConstrainedSampler::new(matcher, n_vocab, pr)?);
            let toks = self.tokenize_prompt(p)?;
            gens[i].prompt_tokens = toks.len();
            prompt_toks.push(toks);
        }
        let longest = prompt_toks.iter().map(Vec::len).max().unwrap_or(0);
        let n_ctx = (longest + max_tokens + 8) * n;
        let mut ctx = self.context(n_ctx, n)?;
        let n_batch = ctx.n_batch() as usize;
        // The prompts, in chunks; the last token of each prompt asks for logits.
        let t0 = Instant::now();
        let mut batch = LlamaBatch::new(n_batch.max(n), n as i32);
        let mut pending: Vec<Option<TokenId>> = vec![None; n];
        for (s, toks) in prompt_toks.iter().enumerate() {
            for (k, chunk) in toks.chunks(n_batch).enumerate() {
                batch.clear();
                for (j, &t) in chunk.iter().enumerate() {
                    let pos = (k * n_batch + j) as i32;
                    let last = k * n_batch + j + 1 == toks.len();
                    batch
                        .add(LlamaToken(t as i32), pos, &[s as i32], last)
                        .map_err(|e| Error::Vocab(format!("llama.cpp batch: {e}")))?;
                }
                ctx.decode(&mut batch)
                    .map_err(|e| Error::Vocab(format!("llama.cpp decode: {e}")))?;
                // Sample the first token now, while these logits are the context's.
                if (k + 1) * n_batch >= toks.len() {
                    let logits = ctx.get_logits_ith(batch.n_tokens() - 1).to_vec();
                    pending[s] = Some(samplers[s].sample_logits(&logits)?);
                    gens[s].prompt_time = t0.elapsed();
                }
            }
            if toks.is_empty() {
                return Err(Error::Vocab("empty prompt".into()));
            }
        }
        let t_gen = Instant::now();
        let mut pos: Vec<usize> = prompt_toks.iter().map(Vec::len).collect();
        let mut out_bytes: Vec<Vec<u8>> = vec![Vec::new(); n];
        loop {
            // Accept the pending tokens; finished sequences drop out.
            batch.clear();
            let mut rows = Vec::new();
            for s in 0..n {
                let Some(t) = pending[s].take() else { continue };
                if self.vocab.is_eos(t) {
                    if automaton.is_none() || samplers[s].accept(t).is_ok() {
                        gens[s].finished = true;
                    }
                    continue;
                }
                samplers[s].accept(t)?;
                gens[s].tokens.push(t);
                let bytes = self.vocab.token_bytes(t).unwrap_or_default();
                on_text(s, bytes);
                // The text is decoded once at the end: a character may span tokens.
                out_bytes[s].extend_from_slice(bytes);
                if samplers[s].is_finished() {
                    gens[s].finished = true;
                    continue;
                }
                if gens[s].tokens.len() >= max_tokens {
                    continue;
                }
                batch
                    .add(LlamaToken(t as i32), pos[s] as i32, &[s as i32], true)
                    .map_err(|e| Error::Vocab(format!("llama.cpp batch: {e}")))?;
                pos[s] += 1;
                rows.push(s);
            }
            if rows.is_empty() {
                break;
            }
            ctx.decode(&mut batch)
                .map_err(|e| Error::Vocab(format!("llama.cpp decode: {e}")))?;
            let logits: Vec<Vec<f32>> = (0..rows.len())
                .map(|r| ctx.get_logits_ith(r as i32).to_vec())
                .collect();
            // Masks (the expensive part) in parallel, one sampler per sequence.
            let mut chosen: Vec<(usize, &mut ConstrainedSampler)> = samplers
                .iter_mut()
                .enumerate()
                .filter(|(s, _)| rows.contains(s))
                .collect();
            let picks: Vec<Result<(usize, TokenId)>> = chosen
                .par_iter_mut()
                .map(|(s, smp)| {
                    let r = rows.iter().position(|x| x == s).unwrap_or(0);
                    smp.sample_logits(&logits[r]).map(|t| (*s, t))
                })
                .collect();
            for p in picks {
                let (s, t) = p?;
                pending[s] = Some(t);
            }
        }
        let gen_time = t_gen.elapsed();
        for ((g, s), bytes) in gens.iter_mut().zip(&samplers).zip(&out_bytes) {
            g.text = String::from_utf8_lossy(bytes).into_owned();
            g.gen_time = gen_time;
            g.stats = s.stats();
        }
        Ok(gens)
    }
}
