"""End to end with llama-cpp-python (built from PyPI's sdist by scripts/python-setup.sh), the
default Gemma 3 270M GGUF and the callmask logits processor: every seed dialect, tool_choice
required, 10 prompts each (5 per tool set), greedy, at most 320 new tokens (as tests/generate.rs): every output must
finish, parse, and its arguments validate with jsonschema."""

import json
import os
import time

import pytest

import callmask
from conftest import load_tools, standard

llama_cpp = pytest.importorskip("llama_cpp")
jsonschema = pytest.importorskip("jsonschema")
import callmask.llama_cpp as cm  # noqa: E402

PROMPTS = [
    ("weather.json", "What's the weather like in San Francisco?"),
    ("weather.json", "Is it cold in Oslo right now? Answer in celsius."),
    ("weather.json", "Look up the user with id 7890; they asked for black."),
    ("weather.json", "What is NVIDIA's stock price?"),
    ("weather.json", "What time is it in UTC?"),
    ("mixed.json", "Book a flight from SFO to JFK for Ann, age 34."),
    ("mixed.json", "What's the weather in Berlin?"),
    ("mixed.json", "Price of MSFT please."),
    ("mixed.json", "Find user 555 with special note 'vip'."),
    ("mixed.json", "Get the stock price of GOOG."),
]
DIALECTS = ["empower", "functools", "pythonic", "inline"]
MAX_TOKENS = int(os.environ.get("CALLMASK_E2E_MAX_TOKENS", "320"))


@pytest.fixture(scope="module")
def llm(gguf_path):
    return llama_cpp.Llama(
        str(gguf_path), n_ctx=2048, n_threads=os.cpu_count(), seed=1, verbose=False
    )


@pytest.fixture(scope="module")
def vocab(llm):
    return cm.vocab_from_llama(llm)


def test_vocab_from_llama(vocab, llm):
    assert len(vocab) == llm.n_vocab() == 262144
    assert vocab.eos_token_ids and all(vocab.is_special(t) for t in vocab.eos_token_ids)
    # Token bytes agree with llama-cpp-python's own detokenizer on ordinary tokens.
    ids = llm.tokenize(b"Hello, world! 12 + 30 = 42", add_bos=False)
    assert b"".join(vocab.token_bytes(t) for t in ids) == b"Hello, world! 12 + 30 = 42"


def validate(tools, message):
    by_name = {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}
    assert message["tool_calls"], message
    for call in message["tool_calls"]:
        name = call["function"]["name"]
        assert name in by_name
        schema = standard(by_name[name])
        jsonschema.validate(
            json.loads(call["function"]["arguments"]),
            schema,
            format_checker=jsonschema.FormatChecker(),
        )


@pytest.mark.parametrize("dialect", DIALECTS)
def test_generate_tool_calls(llm, vocab, dialect):
    automata = {}
    stats = []
    for tools_file, message in PROMPTS:
        tools = load_tools(tools_file)
        if tools_file not in automata:
            grammar = callmask.Grammar.from_dialect(
                dialect,
                tools,
                tool_choice="required",
                parallel_tool_calls=False,
                max_text_chars=100,
                max_whitespace=2,
            )
            automata[tools_file] = (grammar, callmask.TokenAutomaton(grammar, vocab))
        grammar, automaton = automata[tools_file]
        prompt = callmask.render_prompt(
            dialect,
            tools,
            [{"role": "user", "content": message}],
            datetime="2024-09-24",
        )
        processor = cm.LogitsProcessor(automaton, max_tokens=MAX_TOKENS)
        start = time.perf_counter()
        out = llm.create_completion(
            prompt,
            max_tokens=MAX_TOKENS,
            temperature=0.0,
            logits_processor=llama_cpp.LogitsProcessorList([processor]),
        )
        elapsed = time.perf_counter() - start
        choice = out["choices"][0]
        assert choice["finish_reason"] == "stop", (dialect, message, choice["text"])
        # llama-cpp-python stops on the end token without showing it to the processor: the
        # processor allowed it, so the output could end there.
        assert processor.matcher.can_end()
        msg = cm.completion_message(grammar, out)
        validate(tools, msg)
        stats.append((out["usage"]["completion_tokens"], elapsed))
    tokens = sum(s[0] for s in stats)
    secs = sum(s[1] for s in stats)
    print(f"\n{dialect}: {len(stats)}/{len(PROMPTS)} valid, {tokens} tokens, {secs:.1f} s")
