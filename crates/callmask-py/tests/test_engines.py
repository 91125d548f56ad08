"""The SGLang adapter driven through the exact call sequence SGLang uses (copy, fill_vocab_mask
/ apply_vocab_mask, accept_token, rollback, is_terminated), over the real callmask package on
the Llama 3.1 vocabulary; without SGLang the adapter's base classes are plain objects with the
same methods. The vLLM adapters are tested in test_vllm.py."""

import json
from types import SimpleNamespace

import numpy as np
import pytest

import callmask
from callmask import sglang as cm_sglang
from callmask._common import apply_bitmask
from conftest import OUTPUTS, TOKENIZERS, load_tools

SPEC = {
    "dialect": "hermes",
    "tools": load_tools("weather.json"),
    "tool_choice": "required",
    "parallel_tool_calls": False,
}
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
PAD = 128  # models pad their logits beyond the tokenizer


def reference(vocab, spec):
    from callmask._common import grammar_from_spec

    return callmask.TokenAutomaton(grammar_from_spec(spec), vocab)


def valid_tokens(automaton, vocab, text):
    tokens = automaton.tokenize(text)
    m = automaton.matcher()
    assert m.accept_tokens(tokens)
    eos = next(t for t in vocab.eos_token_ids if m.is_allowed(t))
    return tokens + [eos]


def allowed_row(row, width):
    return np.flatnonzero(callmask.allowed_from_bitmask(row, width)).tolist()


def test_sglang_backend_sequence(llama_vocab):
    text = TOKENIZERS["llama3_1"].read_text()
    tokenizer = SimpleNamespace(to_str=lambda: text, eos_token_id=128009)  # tokenizers duck type
    width = len(llama_vocab) + PAD
    backend = cm_sglang._init(SimpleNamespace(), tokenizer, width, {128008})
    assert 128008 in backend.vocab.eos_token_ids  # the engine's EOS ids are added
    backend2 = cm_sglang._init(tokenizer=tokenizer, vocab_size=width, eos_token_ids=None)
    assert 128009 in backend2.vocab.eos_token_ids
    cached = backend.dispatch_structural_tag(json.dumps(SPEC))
    assert cached is not None
    assert backend.dispatch_json("{oops") is None
    assert backend.dispatch_json(json.dumps({"type": "string", "format": "phone"})) is None
    ref = reference(backend.vocab, SPEC)
    tokens = valid_tokens(ref, backend.vocab, (OUTPUTS / "hermes.txt").read_text().rstrip("\n"))

    g = cached.copy()  # SGLang copies the cached grammar per request
    other = cached.copy()
    words = (width + 31) // 32
    for pos, t in enumerate(tokens):
        assert not g.finished and not g.is_terminated()
        vocab_mask = np.full((2, words), -1, dtype=np.int32)
        g.fill_vocab_mask(vocab_mask, 1)
        logits = np.random.default_rng(pos).standard_normal((2, width)).astype(np.float32)
        g.apply_vocab_mask(logits, vocab_mask)
        assert np.isfinite(logits[0]).all()  # row 0 (all ones) untouched
        m = ref.matcher()
        assert m.accept_tokens(tokens[:pos])
        assert np.flatnonzero(np.isfinite(logits[1])).tolist() == m.allowed_tokens()
        # EAGLE-style speculation: two draft tokens accepted, then rolled back.
        if pos + 2 < len(tokens):
            g.accept_token(tokens[pos])
            g.accept_token(tokens[pos + 1])
            g.rollback(2)
        g.accept_token(t)
    assert g.is_terminated()
    with pytest.raises(callmask.ForbiddenTokenError):
        g.accept_token(tokens[0])
    assert other.matcher.accepted_tokens() == []  # copies are independent
