"""Shared fixtures: the real tokenizers and the GGUF fetched by scripts/fetch-data.sh, and the
Rust reference binary (examples/dump_masks.rs) built by scripts/python-test.sh."""

import os
import pathlib

import pytest

import callmask

ROOT = pathlib.Path(__file__).resolve().parents[3]
CACHE = pathlib.Path(os.environ.get("CALLMASK_CACHE", ROOT / ".cache"))
TOKENIZERS = {
    "llama3_1": CACHE / "tokenizers" / "llama3_1-3.7.2" / "tokenizer.json",
    "qwen3": CACHE / "tokenizers" / "qwen3-3.7.2" / "tokenizer.json",
}
GGUF = CACHE / "gemma-1.0.0" / "gemma-3-270m-q4_k_m.gguf"
TOOLS = ROOT / "examples" / "tools"
OUTPUTS = ROOT / "examples" / "outputs"


def _need(path):
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/fetch-data.sh")
    return path


@pytest.fixture(scope="session")
def llama_vocab():
    return callmask.Vocab.from_tokenizer_json(_need(TOKENIZERS["llama3_1"]))


@pytest.fixture(scope="session")
def qwen_vocab():
    return callmask.Vocab.from_tokenizer_json(_need(TOKENIZERS["qwen3"]))


@pytest.fixture(scope="session")
def dump_masks():
    exe = pathlib.Path(
        os.environ.get(
            "CALLMASK_DUMP_MASKS", ROOT / "target" / "release" / "examples" / "dump_masks"
        )
    )
    if not exe.exists():
        pytest.fail(f"{exe} is missing: cargo build --release -p callmask-py --example dump_masks")
    return exe


@pytest.fixture(scope="session")
def gguf_path():
    return _need(GGUF)


def load_tools(name):
    import json

    return json.loads((TOOLS / name).read_text())


ALIASES = {"dict": "object", "float": "number", "tuple": "array"}


def standard(schema):
    """The tools' type aliases (`dict`, `float`, `tuple`, `any`, which callmask accepts) as
    standard JSON Schema types, for the jsonschema package."""
    if isinstance(schema, list):
        return [standard(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: standard(v) for k, v in schema.items()}
    t = out.get("type")
    if isinstance(t, str):
        if t == "any":
            del out["type"]
        else:
            out["type"] = ALIASES.get(t, t)
    elif isinstance(t, list):
        out["type"] = [ALIASES.get(x, x) for x in t]
    return out


def hermes_spec(tool_choice="required", parallel=False, tools="weather.json"):
    """The callmask spec most engine tests drive: the hermes dialect over an example tool set."""
    return {
        "dialect": "hermes",
        "tools": load_tools(tools),
        "tool_choice": tool_choice,
        "parallel_tool_calls": parallel,
    }


def tiny_llama(vocab_size, eos_token_id, seed=0):
    """A 1-layer random-weight Llama (transformers; needs torch) with padded logits."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        eos_token_id=eos_token_id,
        pad_token_id=eos_token_id,
    )
    return transformers.LlamaForCausalLM(config).eval()
