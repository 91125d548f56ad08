"""transformers ``generate`` with a tiny randomly initialised Llama whose tokenizer is the real
Llama 3.1 ``tokenizer.json`` wrapped in ``PreTrainedTokenizerFast``: with the callmask logits
processor every finished output parses and its arguments validate, although the weights are
random. Needs torch and transformers (not in CI: scripts/python-transformers.sh runs it)."""

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
jsonschema = pytest.importorskip("jsonschema")

import callmask  # noqa: E402
from callmask.transformers import CallmaskLogitsProcessor  # noqa: E402
from conftest import TOKENIZERS, load_tools, standard, tiny_llama  # noqa: E402


def test_generate_with_random_llama():
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(TOKENIZERS["llama3_1"]), eos_token="<|eot_id|>", pad_token="<|eot_id|>"
    )
    tok.padding_side = "left"
    vocab = callmask.Vocab.from_hf(tok)
    assert tok.eos_token_id in vocab.eos_token_ids
    model = tiny_llama(len(vocab) + 64, tok.eos_token_id)  # padded logits
    tools = load_tools("weather.json")
    grammar = callmask.Grammar.from_dialect(
        "hermes", tools, tool_choice="required", parallel_tool_calls=False, max_whitespace=1
    )
    automaton = callmask.TokenAutomaton(grammar, vocab)
    prompts = ["Weather in Oslo?", "Stock price of NVDA?", "Who is user 7?", "Time in UTC?"]
    inputs = tok(prompts, return_tensors="pt", padding=True)
    finished = 0
    for seed in range(3):
        proc = CallmaskLogitsProcessor(automaton, max_new_tokens=160)
        torch.manual_seed(seed)
        out = model.generate(
            **inputs,
            logits_processor=transformers.LogitsProcessorList([proc]),
            do_sample=True,
            max_new_tokens=160,
        )
        for row in range(len(prompts)):
            new = out[row, inputs["input_ids"].shape[1] :].tolist()
            # The budget (max_new_tokens) makes every row end with a complete call and an end
            # token, although random weights would ramble on in strings. The matcher may end on
            # any of the vocabulary's end tokens (`<|end_of_text|>` too); generate() stops only on
            # the configured one, so look for the first end token of either kind.
            ends = [i for i, t in enumerate(new) if t in vocab.eos_token_ids]
            assert ends, f"row {row} did not finish: {tok.decode(new)!r}"
            text = tok.decode(new[: ends[0]], skip_special_tokens=False)
            msg = grammar.parse(text)
            [call] = msg["tool_calls"]
            spec = next(t["function"] for t in tools if t["function"]["name"] == call["function"]["name"])
            no_args = {"type": "object", "properties": {}, "additionalProperties": False}
            jsonschema.validate(json.loads(call["function"]["arguments"]), standard(spec.get("parameters", no_args)))
            finished += 1
            print(f"\n{text!r}")
    assert finished == 3 * len(prompts)
