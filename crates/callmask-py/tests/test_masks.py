"""Masks from Python equal the Rust matcher's, token by token, on the Llama 3.1 and Qwen3
vocabularies; the bitmask applied with the llguidance PyPI package's numpy helper (a different
implementation of the int32 layout) allows exactly the same tokens."""

import json
import subprocess

import numpy as np
import pytest

import callmask
from conftest import OUTPUTS, TOKENIZERS, load_tools

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "maxItems": 3},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
SCHEMA_TEXT = '{"city": "Oslo, Norway", "days": 3, "tags": ["cold", "snow"], "unit": "celsius"}'

SPECS = [
    ("schema", {"json_schema": SCHEMA}, SCHEMA_TEXT),
    (
        "hermes",
        {"dialect": "hermes", "tools": load_tools("weather.json"), "tool_choice": "auto"},
        (OUTPUTS / "hermes.txt").read_text().rstrip("\n"),
    ),
    (
        "functools",
        {"dialect": "functools", "tools": load_tools("weather.json"), "tool_choice": "auto"},
        (OUTPUTS / "functools.txt").read_text().rstrip("\n"),
    ),
    (
        "pythonic",
        {"dialect": "pythonic", "tools": load_tools("weather.json"), "tool_choice": "required"},
        (OUTPUTS / "pythonic.txt").read_text().rstrip("\n"),
    ),
]


def tokens_for(automaton, vocab, text, rng, walk):
    """The text's tokens then an end token, or (walk > 0) a random walk of allowed tokens after
    the first half of the text: exercises states no valid text visits."""
    tokens = automaton.tokenize(text)
    if walk:
        tokens = tokens[: len(tokens) // 2]
    m = automaton.matcher()
    assert m.accept_tokens(tokens), m.error()
    for _ in range(walk):
        allowed = m.allowed_tokens()
        if not allowed:
            break
        t = int(rng.choice(allowed))
        assert m.accept_token(t)
        tokens.append(t)
    if not walk:
        eos = [t for t in m.allowed_tokens() if t in set(vocab.eos_token_ids)]
        assert eos, "the text is a complete output: an end token is allowed"
        tokens.append(eos[0])
    return tokens


def python_masks(automaton, tokens, width):
    """Row i: the mask after tokens[:i], filled through numpy, one row per fill_bitmask call."""
    m = automaton.matcher()
    out = np.zeros((len(tokens) + 1, width), dtype=np.int32)
    for i in range(len(tokens) + 1):
        m.fill_bitmask(out, i)
        if i < len(tokens):
            assert m.accept_token(tokens[i]), m.error()
    return out


# pythonic needs Llama 3.1's <|python_tag|> special token: Llama only.
CASES = [
    (v, *s) for v in ["llama3_1", "qwen3"] for s in SPECS if v == "llama3_1" or s[0] != "pythonic"
]


@pytest.mark.parametrize("vocab_name,spec_name,spec,text", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
@pytest.mark.parametrize("walk", [0, 40])
def test_masks_equal_rust(vocab_name, spec_name, spec, text, walk, request, dump_masks, tmp_path):
    vocab = request.getfixturevalue("llama_vocab" if vocab_name == "llama3_1" else "qwen_vocab")
    from callmask._common import grammar_from_spec

    automaton = callmask.TokenAutomaton(grammar_from_spec(spec), vocab)
    rng = np.random.default_rng(len(text) + walk)
    tokens = tokens_for(automaton, vocab, text, rng, walk)
    assert len(tokens) > 5

    words = (len(vocab) + 31) // 32
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"tokenizer": str(TOKENIZERS[vocab_name]), "spec": spec, "tokens": tokens}))
    out = tmp_path / "masks.bin"
    subprocess.run([str(dump_masks), str(job), str(out)], check=True)
    rust = np.fromfile(out, dtype="<u4").reshape(len(tokens) + 1, words).view(np.int32)

    # A wider bitmask (padded logits): the extra words must come back zero.
    py = python_masks(automaton, tokens, words + 3)
    assert (py[:, words:] == 0).all()
    np.testing.assert_array_equal(py[:, :words], rust)
    # Not vacuous: the masks change along the sequence and allow something at first.
    assert len({r.tobytes() for r in rust}) > 2
    assert np.unpackbits(rust[0].view(np.uint8)).sum() > 0

    # The same rows through the batch API (rayon, GIL released), matchers at every prefix.
    matchers = []
    for i in range(len(tokens) + 1):
        m = automaton.matcher()
        assert m.accept_tokens(tokens[:i])
        matchers.append(m)
    batch = np.full((len(matchers), words), -1, dtype=np.int32)
    callmask.fill_bitmasks(matchers, batch)
    np.testing.assert_array_equal(batch, rust)

    # llguidance's numpy helper applies the same layout: exactly our allowed tokens survive.
    llg_numpy = pytest.importorskip("llguidance.numpy")
    for i in range(0, len(tokens) + 1, max(1, len(tokens) // 6)):
        logits = np.zeros((1, len(vocab)), dtype=np.float32)
        llg_numpy.apply_token_bitmask_inplace(logits, py[i : i + 1, :words])
        kept = np.flatnonzero(np.isfinite(logits[0]))
        m = automaton.matcher()
        assert m.accept_tokens(tokens[:i])
        assert kept.tolist() == m.allowed_tokens()


def test_torch_tensor_bitmask(llama_vocab):
    torch = pytest.importorskip("torch")
    g = callmask.Grammar.from_json_schema(SCHEMA)
    a = callmask.TokenAutomaton(g, llama_vocab)
    m = a.matcher()
    t = torch.zeros(callmask.bitmask_shape(len(llama_vocab), 2), dtype=torch.int32)
    m.fill_bitmask(t, 1)
    n = np.zeros(callmask.bitmask_shape(len(llama_vocab), 2), dtype=np.int32)
    m.fill_bitmask(n, 1)
    np.testing.assert_array_equal(t.numpy(), n)
    assert n[1].any() and not n[0].any()
    with pytest.raises(callmask.BitmaskError):
        m.fill_bitmask(t.to(torch.int64))
