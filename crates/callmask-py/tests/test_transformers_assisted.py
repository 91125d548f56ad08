"""The transformers logits processor under assisted generation and beam search: first the exact
call sequences ``generate`` makes (verification calls on prefixes holding unverified drafts,
rejected drafts dropped; beams reordered between steps), checked mask by mask against an
independent matcher; then real ``generate`` calls with ``assistant_model=`` and ``num_beams=``
on tiny random Llamas over the Llama 3.1 tokenizer. Needs torch and transformers (skipped
without them; scripts/python-transformers.sh and scripts/sglang-check.sh run it)."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import callmask  # noqa: E402
from callmask._common import grammar_from_spec  # noqa: E402
from callmask.transformers import CallmaskLogitsProcessor  # noqa: E402
from conftest import OUTPUTS, TOKENIZERS, load_tools, tiny_llama  # noqa: E402

SPEC = {
    "dialect": "hermes",
    "tools": load_tools("weather.json"),
    "tool_choice": "required",
    "parallel_tool_calls": False,
}
PROMPT = [128000, 9906, 11, 1917]  # "<|begin_of_text|>Hello, world"
WIDTH = 128256 + 64


@pytest.fixture(scope="module")
def setup(llama_vocab):
    automaton = callmask.TokenAutomaton(grammar_from_spec(SPEC), llama_vocab)
    m = automaton.matcher()
    tokens = automaton.tokenize((OUTPUTS / "hermes.txt").read_text().rstrip("\n"))
    assert m.accept_tokens(tokens)
    tokens.append(next(t for t in llama_vocab.eos_token_ids if m.is_allowed(t)))
    return automaton, tokens


def call(proc, rows):
    """One processor call on ``rows`` (prompt + generated ids each); the finite columns."""
    ids = torch.tensor([PROMPT + r for r in rows])
    scores = proc(ids, torch.zeros((len(rows), WIDTH)))
    return [torch.isfinite(s).nonzero().flatten().tolist() for s in scores]


def expected(automaton, generated):
    """The columns the processor leaves finite after ``generated``: the allowed tokens, or all
    once the output ended (generate pads finished rows)."""
    m = automaton.matcher()
    assert m.accept_tokens(generated)
    return list(range(WIDTH)) if m.is_terminated() else m.allowed_tokens()


def test_assisted_generation_sequence(setup):
    automaton, tokens = setup
    proc = CallmaskLogitsProcessor(automaton, max_new_tokens=len(tokens) + 4)
    kept = []
    rng = np.random.default_rng(0)
    rounds = 0
    while len(kept) < len(tokens):
        # The assistant drafts with the same processor (valid drafts)...
        k = min(4, len(tokens) - len(kept))
        for i in range(k):
            [row] = call(proc, [tokens[: len(kept) + i]])
            assert row == expected(automaton, tokens[: len(kept) + i])
        drafts = list(tokens[len(kept) : len(kept) + k])
        # ...one of which may be replaced by a token the grammar refuses (an unconstrained
        # drafter, or prompt lookup): the verifying model's calls carry it.
        bad = int(rng.integers(0, k)) if rounds % 2 else None
        if bad is not None:
            allowed_here = expected(automaton, kept + drafts[:bad])
            drafts[bad] = next(t for t in range(100, 1000) if t not in allowed_here)
        for i in range(k + 1):
            [row] = call(proc, [kept + drafts[:i]])
            if bad is None or i <= bad:
                assert row == expected(automaton, kept + drafts[:i])
            else:  # past the refused draft: discarded by generate, left unmasked
                assert len(row) == WIDTH
        # The target model keeps the drafts before the first wrong one, plus its own token.
        n = k if bad is None else bad
        kept = kept + drafts[:n]
        if len(kept) < len(tokens):
            kept.append(tokens[len(kept)])
        rounds += 1
    [row] = call(proc, [kept])
    assert row == expected(automaton, kept) == list(range(WIDTH))  # finished: unmasked
    assert proc.output_tokens() == tokens
    assert proc.matchers[0].is_terminated()
    assert proc.rollbacks > 0 and proc.refused_drafts > 0


def test_refused_token_without_speculation_raises(setup):
    automaton, tokens = setup
    proc = CallmaskLogitsProcessor(automaton)
    call(proc, [[]])
    call(proc, [tokens[:1]])
    bad = next(t for t in range(100, 1000) if t not in expected(automaton, tokens[:1]))
    with pytest.raises(callmask.ForbiddenTokenError, match="speculative=True"):
        call(proc, [tokens[:1] + [bad]])
    proc = CallmaskLogitsProcessor(automaton, speculative=True)  # prompt lookup's first round
    call(proc, [[]])
    [row] = call(proc, [[bad]])
    assert len(row) == WIDTH and proc.refused_drafts == 1


def test_beam_reordering(setup):
    automaton, tokens = setup
    other = automaton.tokenize(
        '<tool_call>\n{"name": "get_time_utc", "arguments": {}}\n</tool_call>'
    )
    proc = CallmaskLogitsProcessor(automaton, max_new_tokens=64)
    beams = [tokens, other]
    for step in range(12):
        rows = [beams[0][:step], beams[1][:step]]
        if step % 3 == 2:  # beam search reorders (and duplicates) rows between steps
            rows = [rows[1], rows[1]]
        masks = call(proc, rows)
        for r, mask in zip(rows, masks):
            assert mask == expected(automaton, r)
    with pytest.raises(ValueError, match="rows"):
        call(proc, [tokens[:12]])  # a different batch: a new generate() needs reset()


def random_llama(tok, seed):
    return tiny_llama(WIDTH, tok.eos_token_id, seed)


@pytest.mark.parametrize("mode", ["assistant", "beams", "prompt_lookup"])
def test_generate(setup, mode):
    automaton, _ = setup
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(TOKENIZERS["llama3_1"]), eos_token="<|eot_id|>", pad_token="<|eot_id|>"
    )
    model = random_llama(tok, 0)
    inputs = tok(["Weather in Oslo?"], return_tensors="pt")
    budget = 60
    proc = CallmaskLogitsProcessor(automaton, max_new_tokens=budget, speculative=mode != "beams")
    kwargs = {
        "assistant": {"assistant_model": random_llama(tok, 1), "do_sample": False},
        "beams": {"num_beams": 3, "do_sample": False},
        "prompt_lookup": {"prompt_lookup_num_tokens": 3, "do_sample": False},
    }[mode]
    out = model.generate(
        **inputs,
        logits_processor=transformers.LogitsProcessorList([proc]),
        max_new_tokens=budget,
        **kwargs,
    )
    new = out[0, inputs["input_ids"].shape[1] :].tolist()
    eos = [i for i, t in enumerate(new) if t in automaton_eos(tok)]
    assert eos, tok.decode(new)
    text = tok.decode(new[: eos[0]])
    [tool_call] = grammar_from_spec(SPEC).parse(text)["tool_calls"]
    json.loads(tool_call["function"]["arguments"])
    if mode == "beams":
        assert proc.rollbacks > 0  # beams were reordered and followed
    print(f"\n{mode}: {len(new)} tokens, {proc.rollbacks} rolled back, {text!r}")


def automaton_eos(tok):
    return set(callmask.Vocab.from_hf(tok).eos_token_ids)
