"""The SGLang backend driven the way SGLang's scheduler drives a grammar (cached object copied
per request, fill_vocab_mask / fill_vocab_mask_batched, apply_vocab_mask, accept_token, EAGLE
draft accept + rollback, is_terminated), over the real callmask package on the Llama 3.1
vocabulary. Without SGLang the adapter's base classes are stand-ins with the same interface;
scripts/sglang-check.sh runs this file again with the real SGLang package (and
test_sglang_real.py for SGLang's own parser, registry, FunctionCallParser and reasoning
wrapper)."""

import json
from collections import namedtuple
from types import SimpleNamespace

import numpy as np
import pytest

import callmask
from callmask import sglang as cm
from callmask._common import grammar_from_spec
from conftest import OUTPUTS, TOKENIZERS, hermes_spec, load_tools

TOOLS = load_tools("weather.json")
SPEC = hermes_spec()
PAD = 128  # models pad their logits beyond the tokenizer
GrammarRow = namedtuple("GrammarRow", "row grammar")  # SGLang's batched-fill entry


def legacy_tag(names):
    """The legacy structural tag SGLang's FunctionCallParser builds for Qwen 2.5 / Hermes."""
    tools = {t["function"]["name"]: t["function"] for t in TOOLS}
    return {
        "type": "structural_tag",
        "structures": [
            {
                "begin": f'<tool_call>\n{{"name": "{n}", "arguments": ',
                "schema": tools[n].get("parameters") or {},
                "end": "}\n</tool_call>",
            }
            for n in names
        ],
        "triggers": ["<tool_call>"],
        "at_least_one": True,
    }


@pytest.fixture(scope="module")
def backend():
    text = TOKENIZERS["llama3_1"].read_text()
    tokenizer = SimpleNamespace(to_str=lambda: text, eos_token_id=128009)  # tokenizers duck type
    return cm._init(SimpleNamespace(), tokenizer, 128256 + PAD, {128008})


def output_tokens(backend, grammar_obj, text):
    """``text`` tokenized, plus an end token the grammar accepts there."""
    m = grammar_obj.automaton.matcher()
    tokens = grammar_obj.automaton.tokenize(text)
    assert m.accept_tokens(tokens), m.error()
    return tokens + [next(t for t in backend.vocab.eos_token_ids if m.is_allowed(t))]


def allowed(vocab_mask, row, width):
    return np.flatnonzero(callmask.allowed_from_bitmask(vocab_mask[row], width)).tolist()


def drive(backend, cached, tokens):
    """The scheduler loop for one request: per step a fresh 2-row mask (row 0 another request,
    never touched), fill + apply, an EAGLE-style two-token draft accepted and rolled back, then
    the sampled token. Checks every mask against an independent matcher."""
    g = cached.copy()
    width = backend.vocab_size
    words = (width + 31) // 32
    ref = g.automaton.matcher()
    for pos, t in enumerate(tokens):
        assert not g.finished and not g.is_terminated()
        vocab_mask = np.full((2, words), -1, dtype=np.int32)
        g.fill_vocab_mask(vocab_mask, 1)
        logits = np.random.default_rng(pos).standard_normal((2, width)).astype(np.float32)
        g.apply_vocab_mask(logits, vocab_mask)
        assert np.isfinite(logits[0]).all()
        assert np.flatnonzero(np.isfinite(logits[1])).tolist() == ref.allowed_tokens()
        if pos + 2 < len(tokens):
            g.accept_token(tokens[pos])
            g.accept_token(tokens[pos + 1])
            g.rollback(2)
        g.accept_token(t)
        assert ref.accept_token(t)
    assert g.is_terminated()
    g.accept_token(tokens[0])  # after the end: ignored, as SGLang's XGrammar backend does
    return g


def test_dialect_spec_through_structural_tag(backend):
    cached = backend.dispatch_structural_tag(json.dumps(SPEC))
    assert isinstance(cached, cm.CallmaskGrammarObject)
    tokens = output_tokens(backend, cached, (OUTPUTS / "hermes.txt").read_text().rstrip("\n"))
    other = cached.copy()
    g = drive(backend, cached, tokens)
    assert g.matcher.accepted_tokens() == tokens
    assert other.matcher.accepted_tokens() == []  # copies are independent
    assert cached.matcher.accepted_tokens() == []


def test_legacy_structural_tag(backend):
    cached = backend.dispatch_structural_tag(
        json.dumps(legacy_tag(["get_current_weather", "get_time_utc"]))
    )
    assert isinstance(cached, cm.CallmaskGrammarObject), getattr(cached, "error_message", None)
    text = '<tool_call>\n{"name": "get_current_weather", "arguments": {"location": "Oslo"}}\n</tool_call>'
    drive(backend, cached, output_tokens(backend, cached, text))
    # The schema is enforced: an unknown argument is refused somewhere along the way.
    bad = (
        '<tool_call>\n{"name": "get_current_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    )
    g = cached.copy()
    with pytest.raises(ValueError):
        for t in g.automaton.tokenize(bad):
            g.accept_token(t)


def test_refused_token_is_a_value_error(backend):
    g = backend.dispatch_structural_tag(json.dumps(SPEC)).copy()
    first = g.matcher.allowed_tokens()
    bad = next(t for t in range(1000) if t not in first)
    with pytest.raises(ValueError) as e:  # what SGLang's scheduler catches
        g.accept_token(bad)
    assert isinstance(e.value, callmask.CallmaskError)
    assert isinstance(e.value, callmask.ForbiddenTokenError)
    assert g.matcher.accepted_tokens() == []  # unchanged: the request is aborted cleanly
    g.accept_token(first[0])
    assert g.matcher.accepted_tokens() == [first[0]]


def test_json_schema_and_refusals(backend):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    g = backend.dispatch_json(json.dumps(schema)).copy()
    drive(backend, g, output_tokens(backend, g, '{"n": 42}'))
    anything = backend.dispatch_json("$$ANY$$")  # SGLang's json_object
    assert anything.automaton.matcher().accept_tokens(anything.automaton.tokenize("[1, 2]"))
    for kind, result in [
        ("json", backend.dispatch_json("{oops")),
        ("regex", backend.dispatch_regex("[a-z]+")),
        ("ebnf", backend.dispatch_ebnf('root ::= "a"')),
        ("structural_tag", backend.dispatch_structural_tag('{"dialect": "nope", "tools": []}')),
        (
            "structural_tag",
            backend.dispatch_structural_tag(
                '{"type": "structural_tag", "format": {"type": "nope"}}'
            ),
        ),
    ]:
        assert type(result) is cm._Invalid, kind  # SGLang's InvalidGrammarObject: request aborted
        assert result.error_message and result.error_message != "Unknown grammar error", kind
    assert "regex" in backend.dispatch_regex("x").error_message


def test_fill_vocab_mask_batched(backend):
    cached = backend.dispatch_structural_tag(json.dumps(SPEC))
    tokens = output_tokens(backend, cached, (OUTPUTS / "hermes.txt").read_text().rstrip("\n"))
    a, b, c = cached.copy(), cached.copy(), cached.copy()
    for t in tokens[:3]:
        a.accept_token(t)
    for t in tokens[:7]:
        b.accept_token(t)

    class Wrapped:  # a grammar of another kind (e.g. SGLang's reasoning wrapper)
        def __init__(self, inner):
            self.inner = inner

        def fill_vocab_mask(self, vocab_mask, idx):
            self.inner.fill_vocab_mask(vocab_mask, idx)

    words = (backend.vocab_size + 31) // 32
    vocab_mask = np.full((5, words), -1, dtype=np.int32)
    entries = [GrammarRow(3, a), GrammarRow(0, b), GrammarRow(4, Wrapped(c))]
    cm.CallmaskGrammarObject.fill_vocab_mask_batched(entries, vocab_mask)
    w = backend.vocab_size
    assert (vocab_mask[1] == -1).all() and (vocab_mask[2] == -1).all()  # unlisted rows untouched
    assert allowed(vocab_mask, 3, w) == a.matcher.allowed_tokens()
    assert allowed(vocab_mask, 0, w) == b.matcher.allowed_tokens()
    assert allowed(vocab_mask, 4, w) == c.matcher.allowed_tokens()
    assert a.matcher.allowed_tokens() != b.matcher.allowed_tokens()


def fake_req(grammar, max_new_tokens, output_ids=()):
    req = SimpleNamespace(
        grammar=grammar,
        sampling_params=SimpleNamespace(max_new_tokens=max_new_tokens),
        output_ids=list(output_ids),
        aborted=None,
    )
    req.set_finish_with_abort = lambda msg: setattr(req, "aborted", msg)
    return req


def test_max_new_tokens_budget(backend):
    """The hook's work: the request's max_new_tokens bounds the output; sampling greedily on
    random logits (which would ramble in strings) still ends complete within it."""
    cached = backend.dispatch_structural_tag(json.dumps(SPEC))
    budget = 40
    req = fake_req(cached.copy(), budget)
    cm.apply_request_budget(req)
    assert req.aborted is None
    g = req.grammar
    words = (backend.vocab_size + 31) // 32
    rng = np.random.default_rng(7)
    for _ in range(budget):
        vocab_mask = np.full((1, words), -1, dtype=np.int32)
        g.fill_vocab_mask(vocab_mask, 0)
        logits = rng.standard_normal((1, backend.vocab_size)).astype(np.float32)
        logits[0, backend.vocab.tokenize(' "')] += 50  # push towards long strings
        g.apply_vocab_mask(logits, vocab_mask)
        t = int(np.argmax(logits[0]))
        req.output_ids.append(t)
        g.accept_token(t)
        if g.is_terminated():
            break
    assert g.is_terminated(), len(req.output_ids)
    assert len(req.output_ids) <= budget
    out = b"".join(backend.vocab.token_bytes(t) for t in req.output_ids[:-1]).decode()
    [call] = grammar_from_spec(SPEC).parse(out)["tool_calls"]
    assert call["function"]["name"] in {t["function"]["name"] for t in TOOLS}

    # Too small for any complete call: the request is aborted with the reason.
    small = fake_req(cached.copy(), 3)
    cm.apply_request_budget(small)
    assert small.aborted and "max_new_tokens" in small.aborted

    # Behind a reasoning wrapper the budget starts with the grammar, less the reasoning tokens.
    inner = cached.copy()
    wrapped = fake_req(SimpleNamespace(grammar=inner), budget)
    cm.apply_request_budget(wrapped)
    assert inner.matcher.tokens_left() is None  # not yet: the reasoning comes first
    wrapped.output_ids.extend(range(10))  # ten reasoning tokens
    inner.fill_vocab_mask(np.zeros((1, words), dtype=np.int32), 0)
    assert inner.matcher.tokens_left() == budget - 10

    # Other grammars and requests without a limit are left alone.
    cm.apply_request_budget(fake_req(None, 10))
    plain = cached.copy()
    cm.apply_request_budget(fake_req(plain, None))
    assert plain.matcher.tokens_left() is None


def test_torch_masks_and_token_filter(backend):
    torch = pytest.importorskip("torch")
    cached = backend.dispatch_structural_tag(json.dumps(SPEC))
    g = cached.copy()
    w = backend.vocab_size
    vocab_mask = cm.CallmaskGrammarBackend.allocate_vocab_mask(w, 3, "cpu")
    assert vocab_mask.dtype == torch.int32 and vocab_mask.shape == (3, (w + 31) // 32)
    assert (vocab_mask == -1).all()
    g.fill_vocab_mask(vocab_mask, 2)
    moved = g.move_vocab_mask(vocab_mask, torch.device("cpu"))
    logits = torch.zeros((3, w))
    g.apply_vocab_mask(logits, moved)
    assert torch.isfinite(logits[0]).all() and torch.isfinite(logits[1]).all()
    assert torch.isfinite(logits[2]).nonzero().flatten().tolist() == g.matcher.allowed_tokens()
    # Speculative decoding fills rows of a slice of a bigger mask (one slice per request).
    big = cm.CallmaskGrammarBackend.allocate_vocab_mask(w, 6, "cpu")
    g.fill_vocab_mask(big[3:6], 1)
    assert allowed(big.numpy(), 4, w) == g.matcher.allowed_tokens()
    assert (big[[0, 1, 2, 3, 5]] == -1).all()
    # Strict thinking's filter: allow only some ids, or forbid some (bit 31 included).
    assert backend.is_support_token_filter
    cm.CallmaskGrammarBackend.set_token_filter(vocab_mask, [31, 63, 5], 0, is_allowed=True)
    assert allowed(vocab_mask.numpy(), 0, w) == [5, 31, 63]
    cm.CallmaskGrammarBackend.set_token_filter(vocab_mask, [31, 7], 1, is_allowed=False)
    assert allowed(vocab_mask.numpy(), 1, w) == [t for t in range(w) if t not in (7, 31)]
    before = allowed(vocab_mask.numpy(), 2, w)
    cm.CallmaskGrammarBackend.set_token_filter(
        vocab_mask, [before[0]], 2, False, reset_vocab_mask=False
    )
    assert allowed(vocab_mask.numpy(), 2, w) == before[1:]


def test_end_tokens_are_the_engines_stops(backend):
    """SGLang stops on the eos ids it passes and on the tokenizer's eos_token_id: those, and
    only those, may end an output. Llama 3.1's tokenizer file also marks other end tokens."""
    assert backend.vocab.eos_token_ids == [128008, 128009]
    plain = callmask.Vocab.from_tokenizer_json(TOKENIZERS["llama3_1"])
    assert set(plain.eos_token_ids) - {128008, 128009}
    with pytest.raises(callmask.VocabError):
        callmask.Vocab.from_tokenizer_json(TOKENIZERS["llama3_1"], [], eos_only=True)
