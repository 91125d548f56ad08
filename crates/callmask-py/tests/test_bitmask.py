"""callmask.bitmask: the engines' side of a mask (allocate, apply to logits) against the
definition of the shared layout (token t allowed iff bit t & 31 of word t >> 5 is set), on
numpy and, where torch is installed, on torch tensors (the device path: torch ops only)."""

import callmask
import numpy as np
import pytest
from callmask._callmask import (
    BitmaskError,
    accept_and_mask,
    accept_batch,
    apply_token_bitmask,
    mask_logits,
)
from callmask.bitmask import _apply_reference, bitmask_words


def reference_allowed(bitmask, width):
    out = np.zeros((bitmask.shape[0], width), dtype=bool)
    words = bitmask.astype(np.int64) & 0xFFFFFFFF
    for r in range(bitmask.shape[0]):
        for t in range(min(width, 32 * bitmask.shape[1])):
            out[r, t] = (words[r, t >> 5] >> (t & 31)) & 1
    return out


def random_bitmask(rng, rows, n_vocab):
    return rng.integers(
        -(2**31), 2**31, size=(rows, bitmask_words(n_vocab)), dtype=np.int64
    ).astype(np.int32)


def test_numpy_rows_indices_and_padding():
    rng = np.random.default_rng(0)
    bm = random_bitmask(rng, 3, 70)  # 3 words: 96 bits
    width = 100  # logits wider than the bitmask: tokens 96.. never allowed
    logits = rng.standard_normal((3, width)).astype(np.float32)
    out = callmask.apply_token_bitmask_inplace(logits.copy(), bm)
    assert (np.isfinite(out) == reference_allowed(bm, width)).all()
    assert not np.isfinite(out[:, 96:]).any()
    # indices: only rows 0 and 2, each with its own bitmask row
    part = callmask.apply_token_bitmask_inplace(logits.copy(), bm, [0, 2])
    assert (np.isfinite(part[[0, 2]]) == reference_allowed(bm, width)[[0, 2]]).all()
    assert np.isfinite(part[1]).all()
    # a compact bitmask: bitmask row k for logits row indices[k]
    compact = callmask.apply_token_bitmask_inplace(logits.copy(), bm[:1], [2], bitmask_rows=[0])
    assert (np.isfinite(compact[2]) == reference_allowed(bm[:1], width)[0]).all()
    one = callmask.apply_token_bitmask_inplace(logits[0].copy(), bm[0])
    assert (np.isfinite(one) == reference_allowed(bm[:1], width)[0]).all()


def test_bad_shapes_and_dtypes():
    logits = np.zeros((2, 64), dtype=np.float32)
    with pytest.raises(TypeError):
        callmask.apply_token_bitmask_inplace(logits, np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ValueError):
        callmask.apply_token_bitmask_inplace(logits, np.zeros((3, 2), dtype=np.int32))
    with pytest.raises(ValueError):
        callmask.apply_token_bitmask_inplace(np.zeros((1, 2, 3)), np.zeros((1, 1), dtype=np.int32))
    with pytest.raises(ValueError):
        callmask.apply_token_bitmask_inplace(
            logits, np.zeros((2, 2), dtype=np.int32), bitmask_rows=[0]
        )


def test_torch_matches_numpy_and_matchers_fill_allocated_masks(llama_vocab):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    bm = random_bitmask(rng, 4, 300)
    logits = rng.standard_normal((4, 320)).astype(np.float32)
    want = np.isfinite(callmask.apply_token_bitmask_inplace(logits.copy(), bm, [1, 3]))
    got = callmask.apply_token_bitmask_inplace(
        torch.from_numpy(logits.copy()), torch.from_numpy(bm), [1, 3]
    )
    assert (torch.isfinite(got).numpy() == want).all()
    if torch.cuda.is_available():  # the device path proper (not on CI's machines)
        dev = callmask.apply_token_bitmask_inplace(
            torch.from_numpy(logits.copy()).cuda(), torch.from_numpy(bm), [1, 3]
        )
        assert (torch.isfinite(dev).cpu().numpy() == want).all()
    # allocate_token_bitmask: all allowed, the shared layout; a matcher fills a row of it
    mask = callmask.allocate_token_bitmask(2, len(llama_vocab) + 100)
    assert mask.dtype == torch.int32 and tuple(mask.shape) == (
        2,
        bitmask_words(len(llama_vocab) + 100),
    )
    assert (mask == -1).all()
    g = callmask.Grammar.from_json_schema({"type": "integer"})
    m = callmask.TokenAutomaton(g, llama_vocab).matcher()
    m.fill_bitmask(mask, 1)
    scores = torch.zeros((2, len(llama_vocab) + 100))
    callmask.apply_token_bitmask_inplace(scores, mask)
    assert torch.isfinite(scores[0]).all()
    assert torch.nonzero(torch.isfinite(scores[1])).flatten().tolist() == m.allowed_tokens()


# -- the native apply (callmask's Rust writes the -inf) against the reference -------------------


def _cases(rng):
    """(rows, width, words, indices, bitmask_rows) covering widths below, at and past the
    bitmask's bits, all rows, index subsets and compact bitmasks."""
    for width in (1, 31, 32, 33, 100, 1000, 4097):
        for words in {max(1, width // 32), bitmask_words(width), bitmask_words(width) + 2}:
            rows = int(rng.integers(1, 7))
            yield rows, width, words, None, None
            k = int(rng.integers(0, rows + 1))
            idx = sorted(rng.choice(rows, size=k, replace=False).tolist())
            yield rows, width, words, idx, None
            yield rows, width, words, idx, rng.permutation(k).tolist()


def _bitmask(rng, rows, words):
    bm = rng.integers(-(2**31), 2**31, size=(rows, words), dtype=np.int64).astype(np.int32)
    bm[rng.random(rows) < 0.3] = 0  # whole rows forbidden
    bm[:, rng.random(words) < 0.2] = -1  # whole words allowed
    bm[:, rng.random(words) < 0.2] = 0  # whole words forbidden
    return bm


def test_native_numpy_matches_the_reference_on_random_masks():
    rng = np.random.default_rng(7)
    n = 0
    for rows, width, words, idx, bm_rows in _cases(rng):
        for dtype in (np.float32, np.float16):
            bm = _bitmask(rng, rows if bm_rows is None else max(1, len(bm_rows)), words)
            # rows further apart than the width: a slice of a wider array
            wide = rng.standard_normal((rows, width + 5)).astype(dtype)
            logits = wide[:, :width]
            want = _apply_reference(logits.copy(), bm, idx, bm_rows)
            got = wide.copy()
            callmask.apply_token_bitmask_inplace(got[:, :width], bm, idx, bitmask_rows=bm_rows)
            assert got.dtype == dtype
            np.testing.assert_array_equal(got[:, :width], want)
            np.testing.assert_array_equal(got[:, width:], wide[:, width:])  # untouched
            n += 1
    assert n > 80


def test_native_torch_dtypes_match_the_reference():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    for rows, width, words, idx, bm_rows in _cases(rng):
        bm = _bitmask(rng, rows if bm_rows is None else max(1, len(bm_rows)), words)
        base = torch.from_numpy(rng.standard_normal((rows, width)).astype(np.float32))
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            logits = base.to(dtype)
            want = _apply_reference(logits.clone(), torch.from_numpy(bm), idx, bm_rows)
            got = logits.clone()
            callmask.apply_token_bitmask_inplace(
                got, torch.from_numpy(bm), idx, bitmask_rows=bm_rows
            )
            assert got.dtype == dtype
            assert torch.equal(got, want), (rows, width, words, idx, bm_rows, dtype)


def test_native_apply_refuses_what_does_not_fit():
    logits = np.zeros((2, 64), dtype=np.float32)
    bm = np.zeros((2, 2), dtype=np.int32)
    for indices, rows in (([2], None), ([0], [2]), ([0, 0], None), ([0], [0, 1])):
        with pytest.raises((BitmaskError, ValueError)):
            apply_token_bitmask(logits, bm, indices, rows)
    assert (logits == 0).all()  # nothing written
    # logits and bitmask in the same memory
    shared = np.zeros(70, dtype=np.int32)
    with pytest.raises(BitmaskError, match="share memory"):
        apply_token_bitmask(
            shared[:64].view(np.float32).reshape(2, 32), shared[62:64].reshape(2, 1)
        )
    with pytest.raises(BitmaskError, match="dtype"):
        apply_token_bitmask(np.zeros((1, 32), dtype=np.float64), np.zeros((1, 1), dtype=np.int32))
    with pytest.raises(TypeError):
        apply_token_bitmask([0.0] * 32, np.zeros((1, 1), dtype=np.int32))


def test_mask_logits_fills_filters_ends_and_applies_in_one_call(llama_vocab):
    g = callmask.Grammar.from_json_schema({"type": "integer"})
    a = callmask.TokenAutomaton(g, llama_vocab)
    m = a.matcher()
    width = len(llama_vocab) + 40  # padded logits
    eos = [t for t in llama_vocab.eos_token_ids][:2]
    assert eos
    logits = np.zeros((3, width), dtype=np.float32)
    bm = np.zeros((2, bitmask_words(width)), dtype=np.int32)
    # row 2 follows the matcher, row 0 has none yet (only the end tokens), row 1 is untouched
    assert mask_logits([m, None], bm, logits, [2, 0], ends=eos)
    allowed = np.flatnonzero(np.isfinite(logits[2])).tolist()
    assert allowed == m.allowed_tokens()
    assert np.flatnonzero(np.isfinite(logits[0])).tolist() == sorted(eos)
    assert np.isfinite(logits[1]).all()
    # an end token the request does not stop on is cleared, unless the row would be empty
    assert m.accept_token(llama_vocab.tokenize("7")[0])
    logits[:] = 0
    mask_logits([m, None], bm, logits, [0, 1], ends=eos, forbidden=[[eos[0]], eos])
    assert eos[0] not in np.flatnonzero(np.isfinite(logits[0])).tolist()
    assert np.flatnonzero(np.isfinite(logits[1])).tolist() == sorted(eos)  # kept: may still end
    # without logits: only the bitmask
    assert not mask_logits([m], bm)
    with pytest.raises(ValueError, match="ends"):
        mask_logits([None], bm)
    with pytest.raises(ValueError, match="twice"):
        mask_logits([m, m], bm)


def test_accept_batch_feeds_rows_until_a_placeholder_or_a_refusal(llama_vocab):
    g = callmask.Grammar.from_json_schema({"type": "integer"})
    a = callmask.TokenAutomaton(g, llama_vocab)
    digit = llama_vocab.tokenize("4")[0]
    letter = llama_vocab.tokenize("x")[0]
    ms = [a.matcher() for _ in range(80)]  # past the parallel threshold (64 rows)
    lists = [[digit, digit], [digit, -1, digit], [letter], []] * 20
    out = accept_batch(ms, lists)
    assert out[:4] == [(2, None), (1, None), (0, out[2][1]), (0, None)]
    assert out[2][1] and "not allowed" in out[2][1]
    assert ms[0].accepted_tokens() == [digit, digit] and ms[2].accepted_tokens() == []
    assert ms[2].error() == out[2][1]
    eos = llama_vocab.eos_token_ids[0]
    done = a.matcher()
    assert accept_batch([done], [[digit, eos, letter, letter]]) == [(4, None)]  # past the end
    with pytest.raises(ValueError):
        accept_batch([done], [])


def test_accept_and_mask_is_accept_batch_then_mask_logits(llama_vocab):
    """The worker's one call: the same feeding as accept_batch and the same rows as mask_logits
    after it; a row that refused a token, ended or has no matcher gets exactly the end tokens."""
    g = callmask.Grammar.from_json_schema({"type": "integer", "maximum": 4000})
    a = callmask.TokenAutomaton(g, llama_vocab)
    eos = llama_vocab.eos_token_ids
    digit = llama_vocab.tokenize("4")[0]
    letter = llama_vocab.tokenize("x")[0]
    for n in (5, 80):  # below and past the parallel threshold (64 rows)
        lists = ([[digit, digit], [digit, -1, digit], [letter], [], [digit, eos[0]]] * 16)[:n]
        forbidden = [[eos[0]] if k % 2 else [] for k in range(n)]
        ours = [a.matcher() for _ in range(n)]
        ref = [a.matcher() for _ in range(n)]
        ours[3] = ref[3] = None
        words = callmask.bitmask_shape(len(llama_vocab), n)
        got_bm = np.zeros(words, dtype=np.int32)
        want_bm = np.zeros(words, dtype=np.int32)
        got = accept_and_mask(ours, lists, got_bm, ends=eos, forbidden=forbidden)
        want = accept_batch(ref, lists)
        assert got == want
        rows = [
            None if m is None or why is not None or m.is_terminated() else m
            for m, (_, why) in zip(ref, want)
        ]
        mask_logits(rows, want_bm, ends=eos, forbidden=forbidden)
        assert np.array_equal(got_bm, want_bm)
        assert [m and m.accepted_tokens() for m in ours] == [m and m.accepted_tokens() for m in ref]
        assert want[2][1] is not None  # the letter was refused: its row may only end
        ends_row = np.zeros(words[1], dtype=np.uint32)
        for t in eos:
            ends_row[t >> 5] |= np.uint32(1 << (t & 31))
        assert np.array_equal(got_bm[2].view(np.uint32), ends_row)
    with pytest.raises(ValueError, match="ends"):
        accept_and_mask([a.matcher()], [[digit]], np.zeros(words, dtype=np.int32), ends=[])
    with pytest.raises(ValueError, match="token lists"):
        accept_and_mask([a.matcher()], [], np.zeros(words, dtype=np.int32), ends=eos)


def test_the_engine_kernel_path_matches_the_reference():
    """The CUDA path's bookkeeping (a compact bitmask spread to its rows, logits wider than the
    bitmask) with XGrammar's kernel, run here on CPU tensors (its CPU backend): what a GPU
    machine runs with the CUDA kernel."""
    torch = pytest.importorskip("torch")
    xgrammar = pytest.importorskip("xgrammar")
    from callmask.bitmask import _apply_with_kernel

    rng = np.random.default_rng(9)
    for rows, width, words, idx, bm_rows in _cases(rng):
        bm = _bitmask(rng, rows if bm_rows is None else max(1, len(bm_rows)), words)
        logits = torch.from_numpy(rng.standard_normal((rows, width)).astype(np.float32))
        want = _apply_reference(logits.clone(), torch.from_numpy(bm), idx, bm_rows)
        got = _apply_with_kernel(
            xgrammar.apply_token_bitmask_inplace, logits.clone(), torch.from_numpy(bm), idx, bm_rows
        )
        assert torch.equal(got, want), (rows, width, words, idx, bm_rows)


def test_native_logits_says_which_logits_the_rust_apply_writes():
    from callmask.bitmask import native_logits

    bm = np.zeros((2, 2), dtype=np.int32)
    f32 = np.zeros((2, 64), dtype=np.float32)
    assert native_logits(f32, bm) is f32
    assert native_logits(np.zeros((2, 64), dtype=np.float16), bm) is not None
    assert native_logits(np.zeros((2, 64), dtype=np.float64), bm) is None  # numpy ops instead
    assert native_logits(np.zeros((64, 2), dtype=np.float32).T, bm) is None  # strided elements
    # llama-cpp-python's scores: the logit field of a record array (elements 12 bytes apart)
    rec = np.zeros(64, dtype=[("id", np.intc), ("logit", np.single), ("p", np.single)])
    assert native_logits(rec["logit"], bm[0]) is None
    callmask.apply_token_bitmask_inplace(rec["logit"], np.array([1, 0], dtype=np.int32))
    assert np.isfinite(rec["logit"]).sum() == 1 and (rec["id"] == 0).all()
    assert native_logits(f32, np.zeros((2, 4), dtype=np.int32)[:, ::2]) is None
    ro = np.zeros((2, 64), dtype=np.float32)
    ro.flags.writeable = False
    assert native_logits(ro, bm) is None
    # float64 logits still get the mask, through the reference path
    logits = np.zeros((2, 64), dtype=np.float64)
    bm[:] = [[1, 0], [0, -1]]
    callmask.apply_token_bitmask_inplace(logits, bm)
    assert np.isfinite(logits[0]).sum() == 1 and np.isfinite(logits[1]).sum() == 32
