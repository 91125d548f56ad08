//! The llama.cpp functions of the C ABI, in the build that bundles llama.cpp (the default
//! feature `bundled-llama`: llama-cpp-sys-2's llama.cpp is linked into the library). A program
//! that brings its own llama.cpp builds the library without that feature and compiles
//! `crates/callmask-c/llama/callmask_llama.cpp` against its own `llama.h` instead: that file
//! defines the same functions (same header, same behaviour) on top of the generic matcher API,
//! so no llama.cpp symbol is defined twice and the sampler's `llama_sampler_i` is the host's.

use super::*;
use llama_cpp_sys_2 as sys;

/// A vocabulary read from a llama.cpp model's `llama_vocab` (from `llama_model_get_vocab`): the
/// token table callmask's GGUF loader reads, copied, so the model may be freed afterwards. No
/// tokenizer. Convert once per model and share the result.
///
/// # Safety
/// `vocab` NULL or a live `llama_vocab` of the llama.cpp this library was built with
/// (see `docs/embedding.md`); `out` writable.
#[no_mangle]
pub unsafe extern "C" fn callmask_vocab_from_llama_vocab(
    vocab: *const sys::llama_vocab,
    out: *mut *mut CallmaskVocab,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        let out = unsafe { out_ptr(out, "out") }?;
        if vocab.is_null() {
            return Err(null("vocab"));
        }
        // SAFETY: a live `llama_vocab` (caller's contract).
        vocab_out(out, unsafe {
            callmask_llama::vocab_from_llama_vocab(vocab)
        }?);
        Ok(())
    })
}

/// A llama.cpp sampler (`struct llama_sampler *`) that masks the logits with `grammar` over
/// `vocab` (the model's: [`callmask_vocab_from_llama_vocab`], or any callmask vocabulary with the
/// model's token ids). Put it first in a chain with `llama_sampler_chain_add` (the chain then
/// owns it), followed by temperature, top-k/top-p, `dist`...: `apply` sets forbidden tokens'
/// logits to `-inf` (ids beyond the vocabulary, such as padding, included), `accept` advances
/// the matcher (`llama_sampler_sample` calls it), `reset` rewinds to the start, `clone` forks.
/// NULL on failure (the message in [`callmask_last_error`]).
///
/// Its `llama_sampler_i` matches the `llama.h` of the llama.cpp bundled in this library (see
/// `docs/embedding.md`).
///
/// # Safety
/// `grammar`, `vocab` live.
#[no_mangle]
pub unsafe extern "C" fn callmask_llama_sampler_init(
    grammar: *const CallmaskGrammar,
    vocab: *const CallmaskVocab,
) -> *mut sys::llama_sampler {
    guard_value(ptr::null_mut(), || {
        // SAFETY: caller's contract.
        let (g, v) = unsafe { (get(grammar, "grammar")?, get(vocab, "vocab")?) };
        let matcher = g.automaton(&v.vocab)?.matcher();
        Ok(callmask_llama::mask_sampler_init(matcher)?.as_ptr())
    })
}

/// As [`callmask_llama_sampler_init`], reading the vocabulary from a `llama_vocab` on each call
/// (it costs a pass over the token table and a new mask cache: a server should convert once per
/// model with [`callmask_vocab_from_llama_vocab`] instead).
///
/// # Safety
/// `vocab` NULL or a live `llama_vocab`; `grammar` live.
#[no_mangle]
pub unsafe extern "C" fn callmask_llama_sampler_init_llama_vocab(
    vocab: *const sys::llama_vocab,
    grammar: *const CallmaskGrammar,
) -> *mut sys::llama_sampler {
    guard_value(ptr::null_mut(), || {
        // SAFETY: caller's contract.
        let g = unsafe { get(grammar, "grammar") }?;
        if vocab.is_null() {
            return Err(null("vocab"));
        }
        // SAFETY: a live `llama_vocab` (caller's contract).
        let v = Arc::new(unsafe { callmask_llama::vocab_from_llama_vocab(vocab) }?);
        let matcher = TokenAutomaton::new(&g.grammar, v)?.matcher();
        Ok(callmask_llama::mask_sampler_init(matcher)?.as_ptr())
    })
}

/// The matcher of a callmask sampler, or a failure for NULL or another kind of sampler.
///
/// # Safety
/// `smpl` NULL or a live `llama_sampler`, not used elsewhere during the borrow.
unsafe fn sampler_matcher<'a>(smpl: *const sys::llama_sampler) -> Res<&'a Matcher> {
    if smpl.is_null() {
        return Err(null("sampler"));
    }
    // SAFETY: caller's contract.
    unsafe { callmask_llama::mask_sampler_matcher(smpl) }.ok_or_else(|| {
        Failure::new(
            CallmaskStatus::InvalidArgument,
            "not a sampler made by callmask_llama_sampler_init",
        )
    })
}

/// True when the callmask sampler's output is complete and nothing may follow (or an
/// end-of-generation token was accepted); false otherwise, for NULL, or another sampler.
///
/// # Safety
/// `smpl` NULL or a live `llama_sampler` not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn callmask_llama_sampler_is_finished(
    smpl: *const sys::llama_sampler,
) -> bool {
    // SAFETY: caller's contract.
    guard_value(
        false,
        || Ok(unsafe { sampler_matcher(smpl) }?.is_finished()),
    )
}

/// True when the callmask sampler's output may end here; false otherwise, for NULL, or another
/// sampler.
///
/// # Safety
/// `smpl` NULL or a live `llama_sampler` not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn callmask_llama_sampler_can_end(smpl: *const sys::llama_sampler) -> bool {
    // SAFETY: caller's contract.
    guard_value(false, || Ok(unsafe { sampler_matcher(smpl) }?.can_end()))
}

/// Reports (and clears) a failure inside the callmask sampler's callbacks, which llama.cpp gives
/// no way to return: a token its matcher refused in `accept`, no allowed token with a finite
/// logit in `apply`, a caught panic. `CALLMASK_STATUS_OK` when none; `CALLMASK_STATUS_SAMPLER`
/// with the message in [`callmask_last_error`]. Call it after each `llama_sampler_sample`.
///
/// # Safety
/// `smpl` NULL or a live `llama_sampler` not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn callmask_llama_sampler_check(
    smpl: *mut sys::llama_sampler,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        unsafe { sampler_matcher(smpl) }?;
        // SAFETY: checked to be ours; unaliased (caller's contract).
        match unsafe { callmask_llama::mask_sampler_take_error(smpl) } {
            None => Ok(()),
            Some(e) => Err(Failure::new(CallmaskStatus::Sampler, e)),
        }
    })
}

/// Gives the callmask sampler a token budget: `max_tokens` tokens (the end-of-generation token
/// included) from the start of the output, which every output then finishes within (see
/// `callmask_matcher_set_token_budget`); negative: no budget. Call it before the first token;
/// `reset` keeps it. `CALLMASK_STATUS_BUDGET` (nothing changed) when no complete output fits.
///
/// # Safety
/// `smpl` NULL or a live `llama_sampler` not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn callmask_llama_sampler_set_token_budget(
    smpl: *mut sys::llama_sampler,
    max_tokens: i64,
) -> CallmaskStatus {
    guard(None, || {
        // SAFETY: caller's contract.
        unsafe { sampler_matcher(smpl) }?;
        let budget = usize::try_from(max_tokens).ok();
        // SAFETY: checked to be ours; unaliased (caller's contract).
        match unsafe { callmask_llama::mask_sampler_set_token_budget(smpl, budget) } {
            None => Err(null("sampler")),
            Some(r) => Ok(r?),
        }
    })
}
