"""The vLLM adapter driven through the exact call sequences vLLM uses (v1 scheduler: fill row,
accept draft token, fill next row, ..., roll back; validate_tokens for drafts; accept_tokens
after sampling; the logits-processor batch updates), over the real callmask package on the
Llama 3.1 vocabulary. vLLM does not install here: without it the adapter's base classes are
plain objects with the same methods. The SGLang adapter's tests are in test_sglang.py."""

import json
from types import SimpleNamespace

import numpy as np
import pytest

import callmask
from callmask import vllm as cm_vllm
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


def test_vllm_structured_output_grammar_scheduler_sequence(llama_vocab):
    width = len(llama_vocab) + PAD
    backend = cm_vllm.CallmaskBackend(None, None, width, vocab=llama_vocab)
    kind = SimpleNamespace(name="STRUCTURAL_TAG")
    g = backend.compile_grammar(kind, json.dumps(SPEC))
    ref = reference(llama_vocab, SPEC)
    tokens = valid_tokens(ref, llama_vocab, (OUTPUTS / "hermes.txt").read_text().rstrip("\n"))
    words = (width + 31) // 32
    pos = 0
    k = 3
    while not g.is_terminated():
        # The drafter proposes k tokens, the last one wrong: validate_tokens trims it.
        draft = tokens[pos : pos + k]
        m = ref.matcher()
        assert m.accept_tokens(tokens[: pos + len(draft)])
        allowed = set(m.allowed_tokens())
        bad = next(t for t in range(len(llama_vocab)) if t not in allowed)
        draft = draft + [bad]
        kept = g.validate_tokens(draft)
        assert kept == draft[: len(kept)] and bad not in kept
        assert len(kept) == min(k, len(tokens) - pos)
        # Scheduler: one bitmask row per position, each draft token accepted temporarily.
        bitmask = np.full((len(kept) + 1, words), -1, dtype=np.int32)
        advanced = 0
        for i, t in enumerate(kept + [None]):
            g.fill_bitmask(bitmask, i)
            m = ref.matcher()
            assert m.accept_tokens(tokens[: pos + i])
            assert allowed_row(bitmask[i], width) == m.allowed_tokens()
            assert not bitmask[i, len(llama_vocab) // 32 + 1 :].any()  # padding never allowed
            if t is not None and not g.is_terminated():
                assert g.accept_tokens("req-0", [t])
                advanced += 1
        g.rollback(advanced)
        assert g.num_processed_tokens == pos
        # The model then samples: here all drafts accepted plus one bonus token.
        sampled = tokens[pos : pos + len(kept) + 1]
        assert g.accept_tokens("req-0", sampled)
        pos += len(sampled)
        assert g.num_processed_tokens == pos
    assert pos == len(tokens)
    assert not g.accept_tokens("req-0", [tokens[0]])  # nothing after the end
    g.reset()
    assert not g.is_terminated() and g.validate_tokens(tokens) == tokens

    j = backend.compile_grammar(SimpleNamespace(name="JSON"), json.dumps(SCHEMA))
    assert j.accept_tokens("req-1", llama_vocab.tokenize('{"n": 12}'))
    assert not j.accept_tokens("req-1", llama_vocab.tokenize('"'))
    with pytest.raises(ValueError):
        backend.compile_grammar(SimpleNamespace(name="REGEX"), "a+")


class Direction:
    def __init__(self, name):
        self.name = name


def test_vllm_logits_processor_batch(llama_vocab):
    config = SimpleNamespace(
        model_config=SimpleNamespace(tokenizer=str(TOKENIZERS["llama3_1"].parent), model="m")
    )
    with pytest.raises(ValueError):
        cm_vllm.CallmaskLogitsProcessor.validate_params(
            SimpleNamespace(extra_args={"callmask": {"dialect": "hermes"}})
        )
    with pytest.raises(ValueError):
        cm_vllm.CallmaskLogitsProcessor.validate_params(
            SimpleNamespace(extra_args={"callmask": {"json_schema": {"$recursiveRef": "#"}}})
        )
    proc = cm_vllm.CallmaskLogitsProcessor(config, None, False)
    assert not proc.is_argmax_invariant()
    width = len(llama_vocab) + PAD
    hermes = reference(llama_vocab, SPEC)
    schema = reference(llama_vocab, {"json_schema": SCHEMA})
    seqs = {
        "a": valid_tokens(hermes, llama_vocab, (OUTPUTS / "hermes.txt").read_text().rstrip("\n")),
        "c": valid_tokens(schema, llama_vocab, '{"n": 7}'),
    }
    outs = {"a": [], "b": [], "c": []}
    params = {
        "a": SimpleNamespace(extra_args={"callmask": json.dumps(SPEC)}),  # vllm_xargs style
        "b": SimpleNamespace(extra_args=None),
        "c": SimpleNamespace(extra_args={"callmask": {"json_schema": SCHEMA}}),
    }
    where = {"a": 0, "b": 1, "c": 2}
    added = [(i, params[r], [1, 2, 3], outs[r]) for r, i in where.items()]
    update = SimpleNamespace(batch_size=3, removed=[], added=added, moved=[])
    step = 0
    while any(len(outs[r]) < len(seqs[r]) for r in seqs):
        if step == 3:  # vLLM condenses / reorders its persistent batch: swap rows 0 and 2
            update = SimpleNamespace(batch_size=3, removed=[], added=[], moved=[(0, 2, Direction("SWAP"))])
            where["a"], where["c"] = 2, 0
        if step == 5:  # request b finishes and leaves
            update = SimpleNamespace(batch_size=2, removed=[where["b"]], added=[], moved=[])
            del where["b"]
        proc.update_state(update)
        update = None
        logits = np.zeros((3, width), dtype=np.float32)
        proc.apply(logits)
        for r, i in where.items():
            finite = np.flatnonzero(np.isfinite(logits[i])).tolist()
            if r == "b":
                assert len(finite) == width  # unconstrained request untouched
                outs[r].append(5)
                continue
            if len(outs[r]) >= len(seqs[r]):
                continue  # finished: vLLM stops sampling it
            m = (hermes if r == "a" else schema).matcher()
            assert m.accept_tokens(outs[r])
            assert finite == m.allowed_tokens()
            assert seqs[r][len(outs[r])] in finite
            outs[r].append(seqs[r][len(outs[r])])  # vLLM appends to the live list
        step += 1
    assert step > 5
    proc.update_state(None)
    assert all(row.matcher.is_terminated() for row in proc.rows.values())
