"""The SGLang backend against the real SGLang package (skipped without it; scripts/sglang-check.sh
installs SGLang into its own venv and runs this file): SGLang's own argument parser accepting
``--grammar-backend callmask`` once the plugin entry point ran (and refusing it without),
``create_grammar_backend`` building our backend (wrapped in SGLang's ``ReasonerGrammarBackend``
with a reasoning parser), SGLang's ``FunctionCallParser`` producing the structural tag for a
tools request (legacy and ``format`` forms), compiled through the backend's futures and cache as
``GrammarManager`` does, masks applied on torch logits, the output parsed back by SGLang's
parser, a refused token turned into a request abort by SGLang's own
``_accept_grammar_tokens``, reasoning left unmasked, and ``max_new_tokens`` applied by the
plugin's hook on ``GrammarManager``. Needs a model directory for ServerArgs
(``CALLMASK_SGLANG_MODEL``: config + Llama 3.1 tokenizer, made by scripts/sglang-check.sh)."""

import json
import os
import pathlib
import subprocess
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("sglang.srt.constrained.base_grammar_backend")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from sglang.srt.plugins import load_plugins  # noqa: E402

load_plugins()  # what launch_server, Engine and each scheduler process do first

from sglang.srt.constrained.base_grammar_backend import (  # noqa: E402
    GrammarRow,
    InvalidGrammarObject,
    create_grammar_backend,
)
from sglang.srt.constrained.grammar_manager import GrammarManager  # noqa: E402
from sglang.srt.constrained.reasoner_grammar_backend import (  # noqa: E402
    ReasonerGrammarBackend,
    ReasonerGrammarObject,
)
from sglang.srt.entrypoints.openai.protocol import Tool, ToolChoice  # noqa: E402
from sglang.srt.function_call.function_call_parser import FunctionCallParser  # noqa: E402
from sglang.srt.managers.scheduler_components.batch_result_processor import (  # noqa: E402
    SchedulerBatchResultProcessor,
)
from sglang.srt.runtime_context import publish  # noqa: E402
from sglang.srt.server_args import prepare_server_args  # noqa: E402

from callmask import sglang as cm  # noqa: E402
from conftest import TOKENIZERS, load_tools  # noqa: E402

MODEL = pathlib.Path(os.environ.get("CALLMASK_SGLANG_MODEL", ""))
TOOLS = load_tools("weather.json")


@pytest.fixture(scope="module")
def model_dir():
    if not (MODEL / "config.json").exists():
        pytest.fail("CALLMASK_SGLANG_MODEL must name a model directory (scripts/sglang-check.sh)")
    return MODEL


def server_backend(model_dir, tokenizer, *extra):
    """The backend SGLang's scheduler would create for this command line."""
    args = prepare_server_args(
        ["--model-path", str(model_dir), "--device", "cpu", "--grammar-backend", "callmask", *extra]
    )
    publish(args, role="scheduler")
    vocab_size = len(tokenizer) + 64  # padded logits
    eos = {tokenizer.convert_tokens_to_ids(t) for t in ("<|eot_id|>", "<|im_end|>")} - {None}
    return create_grammar_backend(args, tokenizer, vocab_size, eos, think_end_ids=None), vocab_size


def compile_like_grammar_manager(backend, key, require_reasoning=False):
    """GrammarManager's path: cache miss -> future -> result -> cache a copy; a second request
    hits the cache and gets a copy."""
    value, hit = backend.get_cached_or_future_value(key, require_reasoning)
    assert not hit
    grammar = value.result()
    backend.set_cache(key, grammar.copy())
    again, hit = backend.get_cached_or_future_value(key, require_reasoning)
    assert hit and again is not grammar
    return grammar


def strict_tools():
    tools = [Tool(**t) for t in TOOLS]
    return [
        t.model_copy(update={"function": t.function.model_copy(update={"strict": True})})
        for t in tools
    ]


def decode_loop(grammar, tokenizer, vocab_size, tokens, constrained=None):
    """The scheduler's steps for one request: allocate, batched fill (row 1 of 2), move, apply on
    torch logits, sample the scripted token (it must be allowed), accept; returns the rows that
    were masked."""
    masked = []
    for t in tokens:
        assert not grammar.is_terminated()
        vocab_mask = grammar.allocate_vocab_mask(vocab_size, 2, "cpu")
        type(grammar).fill_vocab_mask_batched([GrammarRow(1, grammar)], vocab_mask)
        vocab_mask = grammar.move_vocab_mask(vocab_mask, torch.device("cpu"))
        logits = torch.randn((2, vocab_size))
        grammar.apply_vocab_mask(logits=logits, vocab_mask=vocab_mask)
        assert torch.isfinite(logits[0]).all()
        assert torch.isfinite(logits[1, t]), f"token {t} ({tokenizer.decode([t])!r}) masked"
        masked.append(not torch.isfinite(logits[1]).all().item())
        grammar.accept_token(t)
    return masked


def test_cli_choice_comes_from_the_plugin(model_dir):
    code = (
        "from sglang.srt.plugins import load_plugins; load_plugins()\n"
        "from sglang.srt.server_args import prepare_server_args\n"
        f"a = prepare_server_args(['--model-path', {str(model_dir)!r}, '--grammar-backend', 'callmask'])\n"
        "print('BACKEND', a.grammar_backend)\n"
    )
    env = dict(os.environ)
    ok = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "BACKEND callmask" in ok.stdout, ok.stderr[-2000:]
    env["SGLANG_PLUGINS"] = "not-callmask"  # SGLang's plugin whitelist: ours not loaded
    refused = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert refused.returncode != 0 and "invalid choice: 'callmask'" in refused.stderr


@pytest.mark.parametrize("parser", ["llama3", "gpt-oss"])
def test_function_call_parser_tag(model_dir, parser):
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    backend, vocab_size = server_backend(model_dir, tokenizer, "--tool-call-parser", parser)
    assert isinstance(backend, cm.CallmaskGrammarBackend)
    fcp = FunctionCallParser(strict_tools(), parser)
    kind, tag = fcp.get_structure_constraint("required")
    assert kind == "structural_tag"
    key_string = json.dumps(tag.model_dump(by_alias=True) if hasattr(tag, "model_dump") else tag)
    assert ("structures" in key_string) == (parser == "llama3")  # both forms covered
    grammar = compile_like_grammar_manager(backend, ("structural_tag", key_string))
    assert isinstance(grammar, cm.CallmaskGrammarObject)
    if parser == "llama3":
        text = '<|python_tag|>{"name":"get_current_weather", "arguments":{"location": "Oslo"}}'
    else:
        text = (
            "<|channel|>commentary to=functions.get_current_weather<|constrain|>json<|message|>"
            '{"location": "Oslo"}<|call|>'
        )
    tokens = tokenizer.encode(text, add_special_tokens=False)
    probe = grammar.matcher.fork()
    assert probe.accept_tokens(tokens), probe.error()
    eos = next(t for t in backend.vocab.eos_token_ids if probe.is_allowed(t))
    masked = decode_loop(grammar, tokenizer, vocab_size, tokens + [eos])
    assert all(masked)
    assert grammar.is_terminated()
    if parser == "llama3":  # SGLang's own parser reads the output back (gpt-oss's needs the
        # harmony message framing around it, which is the chat template's, not the grammar's)
        normal, calls = fcp.parse_non_stream(text)
        assert [c.name for c in calls] == ["get_current_weather"]
        assert json.loads(calls[0].parameters) == {"location": "Oslo"}

    # A schema-breaking argument: refused, and SGLang's scheduler code turns the ValueError into
    # an abort of this request only.
    g = backend.get_cached_or_future_value(("structural_tag", key_string), False)[0]
    bad = tokenizer.encode(text.replace('"location"', '"city"'), add_special_tokens=False)
    req = SimpleNamespace(rid="r1", grammar=g, to_finish=None)
    kept = SchedulerBatchResultProcessor._accept_grammar_tokens(None, req, bad)
    assert len(kept) < len(bad)
    assert req.to_finish is not None and "Grammar accept_token failed" in str(
        req.to_finish.to_json()
    )


def test_invalid_requests_abort(model_dir):
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    backend, _ = server_backend(model_dir, tokenizer)
    for key in [("regex", "[a-z]+"), ("ebnf", 'root ::= "a"'), ("json", "{oops")]:
        g = backend.get_cached_or_future_value(key, False)[0].result()
        assert isinstance(g, InvalidGrammarObject) and g.error_message, key
    named = FunctionCallParser(strict_tools(), "qwen3_coder").get_structure_constraint(
        ToolChoice(type="function", function={"name": "get_current_weather"})
    )
    g = backend.dispatch_structural_tag(json.dumps(named[1].model_dump(by_alias=True)))
    assert isinstance(g, InvalidGrammarObject) and "qwen_xml" in g.error_message


def test_reasoning_and_budget(model_dir, tmp_path):
    # A Qwen3 model dir: the Llama config with Qwen3's tokenizer (reasoning parser qwen3).
    qwen = tmp_path / "qwen"
    qwen.mkdir()
    (qwen / "config.json").write_text((model_dir / "config.json").read_text())
    for f in TOKENIZERS["qwen3"].parent.iterdir():
        (qwen / f.name).write_bytes(f.read_bytes())
    tokenizer = transformers.AutoTokenizer.from_pretrained(qwen)
    backend, vocab_size = server_backend(
        qwen, tokenizer, "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen"
    )
    assert isinstance(backend, ReasonerGrammarBackend)
    assert isinstance(backend.grammar_backend, cm.CallmaskGrammarBackend)
    fcp = FunctionCallParser(strict_tools(), "qwen")
    _, tag = fcp.get_structure_constraint("required")
    key = ("structural_tag", json.dumps(tag.model_dump(by_alias=True)))
    grammar = compile_like_grammar_manager(backend, key, require_reasoning=True)
    assert isinstance(grammar, ReasonerGrammarObject) and isinstance(
        grammar.grammar, cm.CallmaskGrammarObject
    )

    # The plugin's hook on GrammarManager gives the request's max_new_tokens to the matcher.
    budget = 200
    req = SimpleNamespace(
        rid="r2",
        grammar=grammar,
        sampling_params=SimpleNamespace(max_new_tokens=budget, custom_params=None),
        output_ids=[],
        to_finish=None,
    )
    manager = GrammarManager.__new__(GrammarManager)  # only what the method reads
    manager.scheduler = SimpleNamespace(model_config=SimpleNamespace())
    GrammarManager._apply_request_reasoning_config(manager, req)
    assert grammar.grammar._pending_budget == budget

    think = tokenizer.encode(
        "<think>\nThe user wants the weather.\n</think>", add_special_tokens=False
    )
    call = tokenizer.encode(
        '<tool_call>\n{"name":"get_current_weather", "arguments":{"location": "Oslo"}}\n</tool_call>',
        add_special_tokens=False,
    )
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    tokens = think + call + [eos]
    masked = []
    for t in tokens:
        masked += decode_loop(grammar, tokenizer, vocab_size, [t])
        req.output_ids.append(t)
    # Reasoning unmasked up to and including the think-end token; the call masked.
    assert not any(masked[: len(think)]) and all(masked[len(think) :]), masked
    assert grammar.is_terminated()
    inner = grammar.grammar.matcher
    assert inner.tokens_left() == budget - len(tokens)  # the reasoning counted against it

    # A plain request whose max_new_tokens cannot fit a call is aborted by the hook.
    plain_backend, _ = server_backend(
        model_dir, transformers.AutoTokenizer.from_pretrained(model_dir)
    )
    g = plain_backend.dispatch_structural_tag(
        json.dumps(
            FunctionCallParser(strict_tools(), "llama3")
            .get_structure_constraint("required")[1]
            .model_dump(by_alias=True)
        )
    )
    aborted = []
    small = SimpleNamespace(
        grammar=g,
        sampling_params=SimpleNamespace(max_new_tokens=4, custom_params=None),
        output_ids=[],
        set_finish_with_abort=aborted.append,
    )
    GrammarManager._apply_request_reasoning_config(manager, small)
    assert aborted and "max_new_tokens" in aborted[0]
