"""llama-cpp-python: the logits processor failing closed (draft-model calls, refused tokens:
llama-cpp-python swallows exceptions raised in its sampler callback, so the processor must end
the generation itself), and ``create_chat_completion`` with tools end to end on Gemma 3 270M
(rendered prompt, constrained output, OpenAI-shaped reply), refusing a ``draft_model``."""

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest

import callmask
import callmask.llama_cpp as cm
from callmask._common import grammar_from_spec
from conftest import OUTPUTS, hermes_spec, load_tools

TOOLS = load_tools("weather.json")
SPEC = hermes_spec()
PROMPT = [1, 2, 3]


@pytest.fixture(scope="module")
def automaton(llama_vocab):
    return callmask.TokenAutomaton(grammar_from_spec(SPEC), llama_vocab)


def step(proc, generated, width):
    scores = np.zeros(width, dtype=np.float32)
    return np.flatnonzero(np.isfinite(proc(np.array(PROMPT + generated), scores))).tolist()


def test_processor_fails_closed_on_drafts(automaton, llama_vocab):
    tokens = automaton.tokenize((OUTPUTS / "hermes.txt").read_text().rstrip("\n"))
    width = len(llama_vocab) + 64
    eos = llama_vocab.eos_token_ids
    proc = cm.LogitsProcessor(automaton, eos_token_ids=eos)
    for i in range(3):
        ref = automaton.matcher()
        assert ref.accept_tokens(tokens[:i])
        assert step(proc, tokens[:i], width) == ref.allowed_tokens()
        assert proc.error is None
    # llama-cpp-python with a draft model: the same call length again (drafts evaluated).
    assert step(proc, tokens[:3] + tokens[3:5], width) == eos
    assert "draft model" in proc.error
    assert step(proc, tokens[:6], width) == eos  # stays closed
    proc.reset()
    assert proc.error is None and step(proc, [], width) == automaton.matcher().allowed_tokens()


def test_processor_fails_closed_on_refused_token(automaton, llama_vocab):
    width = len(llama_vocab)
    proc = cm.LogitsProcessor(automaton, eos_token_ids=llama_vocab.eos_token_ids)
    allowed = step(proc, [], width)
    bad = next(t for t in range(width) if t not in allowed)
    assert step(proc, [bad], width) == llama_vocab.eos_token_ids
    assert "refused" in proc.error
    # Without end ids the logits are left alone (nothing better to do), the error recorded.
    proc = cm.LogitsProcessor(automaton)
    step(proc, [], width)
    assert len(step(proc, [bad], width)) == width and proc.error


@pytest.fixture(scope="module")
def llm(gguf_path):
    llama_cpp = pytest.importorskip("llama_cpp")
    return llama_cpp.Llama(
        str(gguf_path), n_ctx=2048, n_threads=os.cpu_count(), seed=1, verbose=False
    )


def test_create_chat_completion(llm):
    jsonschema = pytest.importorskip("jsonschema")
    from conftest import standard

    messages = [{"role": "user", "content": "What's the weather like in Oslo?"}]
    reply = cm.create_chat_completion(
        llm,
        messages,
        TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        dialect="hermes",
        max_tokens=120,
        temperature=0,
    )
    assert reply["object"] == "chat.completion"
    [choice] = reply["choices"]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["role"] == "assistant"
    [call] = message["tool_calls"]
    spec = next(t["function"] for t in TOOLS if t["function"]["name"] == call["function"]["name"])
    no_args = {"type": "object", "properties": {}, "additionalProperties": False}
    jsonschema.validate(
        json.loads(call["function"]["arguments"]), standard(spec.get("parameters", no_args))
    )
    assert reply["usage"]["completion_tokens"] <= 120
    print(f"\n{message}")


def test_create_chat_completion_derives_the_dialect_of_an_unknown_template(
    llm, tmp_path, monkeypatch, caplog
):
    """A chat template no built-in dialect detects (``<fn_call>NAME\n{args}</fn_call>``): the
    dialect is derived from it (logged), and the reply is a valid call in that layout."""
    jsonschema = pytest.importorskip("jsonschema")
    from conftest import standard

    monkeypatch.setenv("CALLMASK_DERIVED_DIR", str(tmp_path))
    template = (Path(__file__).parent / "data" / "fn_call_template.jinja").read_text()
    with caplog.at_level(logging.WARNING, logger="callmask.llama_cpp"):
        reply = cm.create_chat_completion(
            llm,
            [{"role": "user", "content": "What's the weather like in Oslo?"}],
            TOOLS,
            tool_choice="required",
            chat_template=template,
            max_tokens=120,
            temperature=0,
        )
    assert "using a dialect derived from it" in caplog.text
    assert any(tmp_path.iterdir())
    calls = reply["choices"][0]["message"]["tool_calls"]
    assert calls and reply["usage"]["completion_tokens"] <= 120
    for call in calls:
        spec = next(
            t["function"] for t in TOOLS if t["function"]["name"] == call["function"]["name"]
        )
        jsonschema.validate(
            json.loads(call["function"]["arguments"]), standard(spec.get("parameters", {}))
        )


def test_create_chat_completion_refuses_draft_model(llm, monkeypatch):
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    monkeypatch.setattr(llm, "draft_model", LlamaPromptLookupDecoding(num_pred_tokens=2))
    with pytest.raises(ValueError, match="draft_model"):
        cm.create_chat_completion(llm, [{"role": "user", "content": "hi"}], TOOLS, dialect="hermes")
    with pytest.raises(TypeError, match="logits_processor"):
        monkeypatch.setattr(llm, "draft_model", None)
        cm.create_chat_completion(llm, [], TOOLS, dialect="hermes", logits_processor=[])
