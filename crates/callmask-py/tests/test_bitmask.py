"""callmask.bitmask: the engines' side of a mask (allocate, apply to logits) against the
definition of the shared layout (token t allowed iff bit t & 31 of word t >> 5 is set), on
numpy and, where torch is installed, on torch tensors (the device path: torch ops only)."""

import callmask
import numpy as np
import pytest
from callmask.bitmask import bitmask_words


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
