"""callmask.vllm driven through vLLM's exact call sequences, over the real callmask package and
the Qwen3 vocabulary (<tool_call> is one token there, as in the real model):

- the logits processor on the V1 interface (batch updates removed/added/moved, update_state then
  apply, vLLM appending to the live output lists, async scheduling's -1 placeholders) with the
  request's max_tokens as budget: random sampling from the allowed tokens must still end every
  request by itself within max_tokens, with schema-valid calls;
- the V2 model runner's interface (add_request, apply with a LogitsContext, the token history in
  the runner's tensors, draft rows under speculative decoding), where torch is installed;
- failures that must not take the engine down (a refused token, a budget too small);
- the tool parser (adjust_request, extract_tool_calls, streaming) where vLLM is installed;
- the StructuredOutputGrammar scheduler sequence (fill, accept drafts, roll back).
In CI (no vLLM, no torch) the adapters' base classes are plain objects; scripts/vllm-e2e.sh runs
this file again inside the real vLLM venv and then the real engine."""

import json
import logging
import random
from pathlib import Path
from types import SimpleNamespace

import callmask
import numpy as np
import pytest
from callmask import vllm as cm_vllm
from callmask._common import grammar_from_spec
from conftest import OUTPUTS, TOKENIZERS, hermes_spec, load_tools, standard

PAD = 128  # models pad their logits beyond the tokenizer
IM_END = 151645  # Qwen3's <|im_end|>; <|endoftext|> is 151643


def spec(tool_choice="required", parallel=True, tools="weather.json"):
    return hermes_spec(tool_choice, parallel, tools)


def config(max_model_len=None, speculative=None, tokenizer="qwen3"):
    return SimpleNamespace(
        # The fields of vLLM's ModelConfig that its tokenizer loader reads.
        model_config=SimpleNamespace(
            tokenizer=str(TOKENIZERS[tokenizer].parent),
            model="m",
            max_model_len=max_model_len,
            skip_tokenizer_init=False,
            runner_type="generate",
            tokenizer_mode="auto",
            tokenizer_revision=None,
            trust_remote_code=False,
        ),
        speculative_config=speculative,
    )


def params(s, max_tokens, **kw):
    return SimpleNamespace(
        extra_args=None if s is None else {"callmask": s}, max_tokens=max_tokens, **kw
    )


def text_of(vocab, tokens):
    return b"".join(vocab.token_bytes(t) for t in tokens).decode("utf-8")


def check_output(vocab, s, tokens, budget):
    """The output ends with an end-of-generation token within the budget and parses into
    schema-valid calls that the spec allows."""
    import jsonschema

    assert 0 < len(tokens) <= budget, (len(tokens), budget)
    assert tokens[-1] in vocab.eos_token_ids
    message = grammar_from_spec(s).parse(text_of(vocab, tokens[:-1]))
    calls = message["tool_calls"]
    if s["tool_choice"] != "auto":
        assert calls
    if not s["parallel_tool_calls"]:
        assert len(calls) <= 1
    schemas = {t["function"]["name"]: t["function"].get("parameters", {}) for t in s["tools"]}
    for c in calls:
        jsonschema.validate(
            json.loads(c["function"]["arguments"]), standard(schemas[c["function"]["name"]])
        )
    return message


class Direction:
    def __init__(self, name):
        self.name = name


def sample(rng, row):
    finite = np.flatnonzero(np.isfinite(row))
    assert len(finite) > 0, "a row with no allowed token"
    return int(finite[rng.randrange(len(finite))])


def test_v1_budget_ends_every_request(qwen_vocab):
    """16 requests, random tokens among the allowed ones, budgets 30..200: each ends by itself
    (end-of-generation sampled) within max_tokens, with valid calls. Placeholders (-1) appear in
    the live lists and are repaired before the mask is needed, as vLLM does for a processor
    whose needs_output_token_ids() is True."""
    proc = cm_vllm.CallmaskLogitsProcessor(config(max_model_len=4096), None, False)
    assert proc.needs_output_token_ids() and not proc.is_argmax_invariant()
    width = len(qwen_vocab) + PAD
    rng = random.Random(7)
    budgets = [30, 40, 64, 100, 150, 200, 48, 80]
    choices = [
        "required",
        "auto",
        {"type": "function", "function": {"name": "get_user_info"}},
        "required",
    ]
    pending = []
    for i in range(16):
        s = spec(choices[i % 4], parallel=i % 3 != 0, tools=["weather.json", "travel.json"][i % 2])
        pending.append((s, budgets[i % len(budgets)]))
    slots = {}  # batch index -> (spec, budget, live output list)
    finished = []
    steps = 0
    while pending or slots:
        added, removed = [], []
        for index in [
            i for i, (_, _, out) in slots.items() if out and out[-1] in qwen_vocab.eos_token_ids
        ]:
            finished.append(slots.pop(index))
            removed.append(index)
        for index in range(4):  # a batch of 4 slots, refilled as requests end
            if index not in slots and pending:
                s, budget = pending.pop(0)
                out = []
                slots[index] = (s, budget, out)
                # vLLM stops this model on <|im_end|> only: <|endoftext|>, an end token of the
                # tokenizer too, must never be allowed (vLLM would not stop there).
                added.append(
                    (
                        index,
                        params(s, budget, eos_token_id=IM_END, stop_token_ids=[]),
                        [1, 2, 3],
                        out,
                    )
                )
        proc.update_state(
            SimpleNamespace(batch_size=len(slots), removed=removed, added=added, moved=[])
            if added or removed
            else None
        )
        if not slots:
            break
        logits = np.zeros((4, width), dtype=np.float32)
        proc.apply(logits)
        for index, (s, budget, out) in slots.items():
            assert len(out) < budget, "sampling past the budget"
            t = sample(rng, logits[index])
            if steps % 3 == 0:
                out.append(-1)  # async scheduling: a placeholder first ...
                proc.update_state(None)  # ... never fed
                out[-1] = t  # ... then repaired
            else:
                out.append(t)
        steps += 1
        assert steps < 2000
    assert len(finished) == 16
    assert all(out[-1] == IM_END for _, _, out in finished)
    called = 0
    assert 151643 in qwen_vocab.eos_token_ids
    for s, budget, out in finished:
        called += bool(check_output(qwen_vocab, s, out, budget)["tool_calls"])
    assert called >= 12  # every required/named one at least


def test_v1_batch_moves_and_untouched_rows(qwen_vocab):
    proc = cm_vllm.CallmaskLogitsProcessor(config(), None, False)
    width = len(qwen_vocab) + PAD
    s = spec(parallel=False)
    hermes = callmask.TokenAutomaton(grammar_from_spec(s), qwen_vocab)
    text = (OUTPUTS / "hermes.txt").read_text().rstrip("\n")
    seq = hermes.tokenize(text)
    m = hermes.matcher()
    assert m.accept_tokens(seq)
    seq.append(next(t for t in qwen_vocab.eos_token_ids if m.is_allowed(t)))
    outs = {"a": [], "b": []}
    where = {"a": 0, "b": 1}
    update = SimpleNamespace(
        batch_size=2,
        removed=[],
        added=[
            (0, params(json.dumps(s), 512), None, outs["a"]),
            (1, params(None, 16), None, outs["b"]),
        ],
        moved=[],
    )
    for step in range(len(seq)):
        if step == 3:  # vLLM condenses / reorders its persistent batch: swap rows 0 and 1
            update = SimpleNamespace(
                batch_size=2, removed=[], added=[], moved=[(0, 1, Direction("SWAP"))]
            )
            where = {"a": 1, "b": 0}
        if step == 6:  # b leaves; a moves down to row 0
            update = SimpleNamespace(
                batch_size=1, removed=[0], added=[], moved=[(1, 0, Direction("UNIDIRECTIONAL"))]
            )
            where = {"a": 0}
        proc.update_state(update)
        update = None
        logits = np.zeros((2, width), dtype=np.float32)
        proc.apply(logits)
        if "b" in where:
            assert np.isfinite(logits[where["b"]]).all()  # the unconstrained request is untouched
            outs["b"].append(5)
        ref = hermes.matcher()
        assert ref.accept_tokens(outs["a"])
        assert np.flatnonzero(np.isfinite(logits[where["a"]])).tolist() == ref.allowed_tokens()
        assert not np.isfinite(logits[where["a"], len(qwen_vocab) :]).any()  # padding never allowed
        outs["a"].append(seq[step])
    proc.update_state(None)
    proc.apply(np.zeros((1, width), dtype=np.float32))  # the step's feeding is done by then
    assert all(c.is_done() for c in proc.rows.values())
    # Every mask after the first step (the logits' width unknown before it) was filled during
    # the forward pass, from update_state, and matched the reference above.
    assert proc.overlapped_rows == len(seq) - 1 == proc.masked_rows - 1


def test_v1_overlapped_masks_equal_the_masks_filled_in_apply(qwen_vocab):
    """The same random run with and without overlap_masks: the same logits at every step, the
    overlapped run filling most rows before apply (rows with a placeholder pending or a compile
    unfinished are filled in apply)."""
    width = len(qwen_vocab) + PAD
    runs = []
    for overlap in (True, False):
        proc = cm_vllm.CallmaskLogitsProcessor(config(max_model_len=4096), None, False)
        proc.overlap_masks = overlap
        rng = random.Random(11)
        outs = {i: [] for i in range(3)}
        added = [
            (i, params(spec(["required", "auto", "required"][i]), 48), [1], outs[i])
            for i in range(3)
        ]
        proc.update_state(SimpleNamespace(batch_size=3, removed=[], added=added, moved=[]))
        steps = []
        for step in range(40):
            logits = np.zeros((3, width), dtype=np.float32)
            proc.apply(logits)
            steps.append(np.isfinite(logits))
            for i, out in outs.items():
                if not (out and out[-1] in qwen_vocab.eos_token_ids):
                    out.append(sample(rng, logits[i]))
            if step % 5 == 4:
                last = outs[0].pop()
                outs[0].append(-1)  # a placeholder at update_state: row 0 is filled in apply
                proc.update_state(None)
                outs[0][-1] = last
            else:
                proc.update_state(None)
        runs.append((steps, proc.overlapped_rows, proc.masked_rows))
    (on, overlapped, masked), (off, none, masked_off) = runs
    assert all((a == b).all() for a, b in zip(on, off))
    assert none == 0 and masked == masked_off
    assert masked // 2 < overlapped < masked


def test_v1_a_failed_overlapped_fill_is_done_in_apply(qwen_vocab, monkeypatch, caplog):
    """The worker feeds the step's tokens, then its fill fails: apply logs it, feeds nothing
    twice and fills the row itself, the same mask as the reference matcher's."""
    from callmask.vllm import logits_processor as lp

    proc = cm_vllm.CallmaskLogitsProcessor(config(), None, False)
    width = len(qwen_vocab) + PAD
    s = spec(parallel=False)
    hermes = callmask.TokenAutomaton(grammar_from_spec(s), qwen_vocab)
    seq = hermes.tokenize((OUTPUTS / "hermes.txt").read_text().rstrip("\n"))[:12]
    feed_and_fill = lp._feed_and_fill

    def fails_after_feeding(constraints, tokens, *rest):
        feed_and_fill(constraints, tokens, *rest)
        raise RuntimeError("fill failed")

    out: list = []
    update = SimpleNamespace(
        batch_size=1, removed=[], added=[(0, params(json.dumps(s), 512), None, out)], moved=[]
    )
    for step, token in enumerate(seq):
        if step == 4:
            monkeypatch.setattr(lp, "_feed_and_fill", fails_after_feeding)
        proc.update_state(update)
        update = None
        logits = np.zeros((1, width), dtype=np.float32)
        proc.apply(logits)
        ref = hermes.matcher()
        assert ref.accept_tokens(out)
        assert np.flatnonzero(np.isfinite(logits[0])).tolist() == ref.allowed_tokens()
        out.append(token)
    assert proc.rows[0].fed == len(seq) - 1 and proc.rows[0].failure is None
    assert 0 < proc.overlapped_rows < proc.masked_rows == len(seq)
    assert "the overlapped fill failed" in caplog.text


def test_v1_failures_end_the_request_not_the_engine(qwen_vocab, caplog):
    proc = cm_vllm.CallmaskLogitsProcessor(config(), None, False)
    width = len(qwen_vocab) + PAD
    bad, tiny = [], []
    proc.update_state(
        SimpleNamespace(
            batch_size=2,
            removed=[],
            added=[(0, params(spec(), 256), None, bad), (1, params(spec(), 3), None, tiny)],
            moved=[],
        )
    )
    logits = np.zeros((2, width), dtype=np.float32)
    proc.apply(logits)  # the 3-token budget cannot hold a call: that request ends at once
    eos_only = sorted(qwen_vocab.eos_token_ids)
    assert np.flatnonzero(np.isfinite(logits[1])).tolist() == eos_only
    assert np.isfinite(logits[0]).sum() > 1
    forbidden = int(np.flatnonzero(~np.isfinite(logits[0, : len(qwen_vocab)]))[0])
    bad.append(forbidden)  # another stage forced a token the grammar refuses
    proc.update_state(None)
    logits = np.zeros((2, width), dtype=np.float32)
    proc.apply(logits)
    assert np.flatnonzero(np.isfinite(logits[0])).tolist() == eos_only
    assert "refused" in caplog.text and "could not start" in caplog.text


def test_validate_params_and_spec_decoding():
    v = cm_vllm.CallmaskLogitsProcessor.validate_params
    v(params(None, 10))
    v(params(spec(), 10))
    for bad in (
        params({"dialect": "hermes"}, 10),  # no tools
        params({"json_schema": {"$recursiveRef": "#"}}, 10),
        params({"dialect": "no-such-dialect", "tools": []}, 10),
        params(spec(), 10, min_tokens=5),
    ):
        with pytest.raises((ValueError, _client_error_class()), match="callmask"):
            v(bad)
    with pytest.raises(ValueError, match="speculative decoding"):
        cm_vllm.CallmaskLogitsProcessor(config(speculative=object()), None, False)


def test_validate_params_compiles_a_tool_set_once(monkeypatch):
    """A batch of requests over one tool set is validated by one compile; a new tool set, and a
    bad one after a good one, still compile (and fail) on their own."""
    from callmask.vllm import logits_processor as lp

    compiled = []
    real = lp.grammar_from_spec
    monkeypatch.setattr(
        lp, "grammar_from_spec", lambda s, **kw: compiled.append(s) or real(s, **kw)
    )
    monkeypatch.setattr(lp, "_VALIDATED", lp._SpecKeys(size=2))
    v = cm_vllm.CallmaskLogitsProcessor.validate_params
    for _ in range(5):
        v(params(spec(), 10))
    assert len(compiled) == 1
    v(params(spec(tool_choice="auto"), 10))
    assert len(compiled) == 2
    bad = {"dialect": "hermes", "tools": [{"type": "function", "function": {"name": 3}}]}
    for _ in range(2):
        with pytest.raises((ValueError, _client_error_class()), match="callmask"):
            v(params(bad, 10))
    assert len(compiled) == 4  # refused specs are never remembered
    v(params({"json_schema": {"type": "integer"}}, 10))  # the LRU drops the oldest beyond 2
    v(params(spec(), 10))
    assert len(compiled) == 6


def test_v2_interface_with_drafts(qwen_vocab):
    """The V2 model runner's call sequence: add_request per slot, the committed tokens in the
    runner's token history, one logits row per draft position under speculative decoding."""
    torch = pytest.importorskip("torch")
    max_reqs, max_len = 4, 512

    class Staged:  # the runner's StagedWriteTensor / UvaBackedTensor, as read by processors
        def __init__(self, t):
            self.gpu = t
            self.np = t.numpy()

    all_ids = torch.zeros((max_reqs, max_len), dtype=torch.int32)
    prompt_len = Staged(torch.zeros(max_reqs, dtype=torch.int32))
    total_len = Staged(torch.zeros(max_reqs, dtype=torch.int32))
    states = SimpleNamespace(
        device=torch.device("cpu"),
        max_num_reqs=max_reqs,
        vocab_size=len(qwen_vocab) + PAD,
        all_token_ids=Staged(all_ids),
        prompt_len=prompt_len,
        total_len=total_len,
    )
    proc = cm_vllm.CallmaskLogitsProcessor(config(max_model_len=4096), states)
    s = spec(parallel=False)
    slot = 2
    prompt_len.np[slot] = 5
    total_len.np[slot] = 5
    assert proc.add_request(slot, params(s, 200))
    assert not proc.add_request(0, params(None, 200))
    hermes = callmask.TokenAutomaton(grammar_from_spec(s), qwen_vocab)
    seq = hermes.tokenize((OUTPUTS / "hermes.txt").read_text().rstrip("\n"))
    width = len(qwen_vocab) + PAD
    pos = 0
    while pos < len(seq) - 3:
        # Rows: request 0 (unconstrained, 1 row), then request in `slot` with 3 draft tokens.
        drafts = seq[pos : pos + 3]
        last = seq[pos - 1] if pos else 0
        ctx = SimpleNamespace(
            idx_mapping_np=np.array([0, slot]),
            expanded_idx_mapping=torch.tensor([0, slot, slot, slot, slot]),
            expanded_local_pos=torch.tensor([0, 0, 1, 2, 3]),
            input_ids=torch.tensor([9, last] + drafts),
        )
        logits = torch.zeros((5, width))
        proc.apply(logits, ctx)
        assert torch.isfinite(logits[0]).all()
        for j in range(4):
            ref = hermes.matcher()
            assert ref.accept_tokens(seq[: pos + j])
            got = torch.nonzero(torch.isfinite(logits[1 + j])).flatten().tolist()
            assert got == ref.allowed_tokens(), j
        # The rejection sampler keeps two drafts and a bonus token: commit three tokens.
        k = 3
        all_ids[slot, int(total_len.np[slot]) : int(total_len.np[slot]) + k] = torch.tensor(
            seq[pos : pos + k]
        )
        total_len.np[slot] += k
        pos += k


def test_structured_output_grammar_scheduler_sequence(qwen_vocab):
    width = len(qwen_vocab) + PAD
    backend = cm_vllm.CallmaskBackend(None, None, width, vocab=qwen_vocab)
    s = spec(parallel=False)
    g = backend.compile_grammar(SimpleNamespace(name="STRUCTURAL_TAG"), json.dumps(s))
    ref = callmask.TokenAutomaton(grammar_from_spec(s), qwen_vocab)
    tokens = ref.tokenize((OUTPUTS / "hermes.txt").read_text().rstrip("\n"))
    m = ref.matcher()
    assert m.accept_tokens(tokens)
    tokens.append(next(t for t in qwen_vocab.eos_token_ids if m.is_allowed(t)))
    words = (width + 31) // 32
    pos = 0
    while not g.is_terminated():
        draft = tokens[pos : pos + 3]
        after = ref.matcher()
        assert after.accept_tokens(tokens[: pos + len(draft)])
        allowed = set(after.allowed_tokens())
        bad = next(t for t in range(len(qwen_vocab)) if t not in allowed)
        kept = g.validate_tokens(draft + [bad])
        assert kept == draft
        bitmask = np.full((len(kept) + 1, words), -1, dtype=np.int32)
        advanced = 0
        for i, t in enumerate(kept + [None]):
            g.fill_bitmask(bitmask, i)
            r = ref.matcher()
            assert r.accept_tokens(tokens[: pos + i])
            allowed = np.flatnonzero(callmask.allowed_from_bitmask(bitmask[i], width)).tolist()
            assert allowed == r.allowed_tokens()
            if t is not None and not g.is_terminated():
                assert g.accept_tokens("req", [t])
                advanced += 1
        g.rollback(advanced)
        sampled = tokens[pos : pos + len(kept) + 1]
        assert g.accept_tokens("req", sampled)
        pos += len(sampled)
    assert pos == len(tokens)
    with pytest.raises(ValueError):
        backend.compile_grammar(SimpleNamespace(name="REGEX"), "a+")


def test_tool_parser_openai_requests(qwen_vocab):
    """adjust_request puts the spec where the logits processor reads it and adds no JSON
    constraint of vLLM's own; whole and streamed outputs come back as tool_calls."""
    pytest.importorskip("vllm")
    from transformers import PreTrainedTokenizerFast
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.tool_parsers.abstract_tool_parser import ToolParserManager

    names = cm_vllm.register()
    assert "callmask" in names and "callmask_hermes" in names
    assert ToolParserManager.get_tool_parser("callmask_qwen3") is not None
    tok = PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZERS["qwen3"]))
    tok.chat_template = json.loads(
        (TOKENIZERS["qwen3"].parent / "tokenizer_config.json").read_text()
    )["chat_template"]
    tools = load_tools("weather.json")
    for choice in (
        "required",
        "auto",
        {"type": "function", "function": {"name": "get_current_weather"}},
    ):
        req = ChatCompletionRequest(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=tools,
            tool_choice=choice,
            parallel_tool_calls=False,
            max_tokens=100,
        )
        parser = ToolParserManager.get_tool_parser("callmask")(tok, req.tools)
        assert parser._dialect == "qwen3"  # detected from Qwen3's chat template
        req = parser.adjust_request(req)
        assert req.structured_outputs is None and req.response_format is None
        sent = json.loads(req.vllm_xargs["callmask"])
        assert sent["dialect"] == "qwen3" and sent["parallel_tool_calls"] is False
        cm_vllm.CallmaskLogitsProcessor.validate_params(req.to_sampling_params(100, {}))
        assert req.to_sampling_params(100, {}).extra_args["callmask"] == req.vllm_xargs["callmask"]
        out = '<tool_call>\n{"name": "get_current_weather", "arguments": {"location": "Paris", "unit": "celsius"}}\n</tool_call>'
        info = parser.extract_tool_calls(out, req)
        assert info.tools_called and info.tool_calls[0].function.name == "get_current_weather"
        assert json.loads(info.tool_calls[0].function.arguments) == {
            "location": "Paris",
            "unit": "celsius",
        }
        # Streamed in pieces of 3 characters: the deltas add up to the same call.
        stream = ToolParserManager.get_tool_parser("callmask")(tok, req.tools)
        stream.adjust_request(req)
        name, args, prev = "", "", ""
        for i in range(0, len(out), 3):
            cur = out[: i + 3]
            d = stream.extract_tool_calls_streaming(prev, cur, cur[len(prev) :], [], [], [], req)
            prev = cur
            for c in d.tool_calls if d else []:
                name += c.function.name or ""
                args += c.function.arguments or ""
        args += stream.get_remaining_unstreamed_args()
        assert name == "get_current_weather" and json.loads(args) == {
            "location": "Paris",
            "unit": "celsius",
        }
    none = ChatCompletionRequest(
        model="m", messages=[{"role": "user", "content": "hi"}], tools=tools, tool_choice="none"
    )
    assert parser.adjust_request(none).vllm_xargs is None
    text = parser.extract_tool_calls("not a call", req)
    assert not text.tools_called and text.content == "not a call"
    # An output the grammar refuses (one not constrained) is read as `parse --recover` reads it:
    # the call of an unknown function is skipped, the good one after it kept.
    bad = '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>\n' + out
    info = parser.extract_tool_calls(bad, req)
    assert info.tools_called and [c.function.name for c in info.tool_calls] == [
        "get_current_weather"
    ]


def test_backend_structural_tags(qwen_vocab):
    """A STRUCTURAL_TAG request may be XGrammar's structural tag (what vLLM builds for tool
    calling) or a callmask spec; regex and choice requests are refused, never unconstrained."""
    root = OUTPUTS.parent / "structural_tags"
    tag = (root / "hermes_required.json").read_text()
    backend = cm_vllm.CallmaskBackend(None, None, len(qwen_vocab) + PAD, vocab=qwen_vocab)
    g = backend.compile_grammar(SimpleNamespace(name="STRUCTURAL_TAG"), tag)
    call = '<tool_call>\n{"name": "get_current_weather", "arguments": {"location": "Oslo"}}\n</tool_call>'
    assert g.accept_tokens("r", qwen_vocab.tokenize(call))
    assert not g.accept_tokens("r", qwen_vocab.tokenize("x"))
    s = backend.compile_grammar(SimpleNamespace(name="STRUCTURAL_TAG"), json.dumps(spec()))
    assert s.validate_tokens(qwen_vocab.tokenize(call)) == qwen_vocab.tokenize(call)
    for kind in ("REGEX", "CHOICE"):
        with pytest.raises(ValueError, match="unsupported"):
            backend.compile_grammar(SimpleNamespace(name=kind), "a+")
    with pytest.raises(callmask.CallmaskError):
        backend.compile_grammar(
            SimpleNamespace(name="STRUCTURAL_TAG"),
            '{"type": "structural_tag", "format": {"type": "grammar", "grammar": "root ::= \\"a\\""}}',
        )


def _client_error_class():
    try:
        from vllm.exceptions import VLLMValidationError

        return VLLMValidationError
    except ImportError:
        return ValueError


def test_hostile_requests_are_refused_at_admission_naming_the_cause(qwen_vocab, monkeypatch):
    """Every hostile request of hostile_requests.py is refused by the tool parser's
    adjust_request with the exception vLLM's server answers HTTP 400 (VLLMValidationError with
    ``param``; ValueError without vLLM), its message naming the cause; never a 200 with no call
    for ``required`` under a too-small budget."""
    from hostile_requests import HOSTILE

    from callmask._common import AutomatonCache
    from callmask.vllm import tool_parser as tp

    tokenizer = object()  # the admission check's vocabulary is given below, not read from it
    monkeypatch.setitem(tp.ADMISSION_AUTOMATA, id(tokenizer), AutomatonCache(qwen_vocab))
    cls = tp._dialect_parser("hermes")
    want = _client_error_class()
    for c in HOSTILE:
        req = SimpleNamespace(
            tools=c["tools"],
            tool_choice=c["tool_choice"],
            parallel_tool_calls=None,
            max_tokens=c["max_tokens"],
            max_completion_tokens=None,
            vllm_xargs=None,
        )
        with pytest.raises(want) as err:
            cls(tokenizer, c["tools"]).adjust_request(req)
        text = str(err.value)
        for s in c["says"]:
            assert s in text, (c["name"], text)
        assert "(?s:." not in text and "recursion limit" not in text, (c["name"], text)
        if hasattr(err.value, "parameter"):
            assert err.value.parameter == c["param"], (c["name"], err.value.parameter)
        assert req.vllm_xargs is None, c["name"]  # nothing reaches the engine
    # The same tools with a budget that fits, and auto with the tiny one, are admitted.
    ok = SimpleNamespace(
        tools=load_tools("weather.json"),
        tool_choice="required",
        parallel_tool_calls=None,
        max_tokens=200,
        max_completion_tokens=None,
        vllm_xargs=None,
    )
    cls(tokenizer, ok.tools).adjust_request(ok)
    assert "callmask" in ok.vllm_xargs
    auto = SimpleNamespace(
        **{**vars(ok), "tool_choice": "auto", "max_tokens": 2, "vllm_xargs": None}
    )
    cls(tokenizer, auto.tools).adjust_request(auto)
    assert "callmask" in auto.vllm_xargs


def test_errors_carry_their_fault_and_param():
    """Compile errors say whose fault they are and what part of the request they are about;
    validate_params answers the request's faults as client errors."""
    from hostile_requests import one_tool

    with pytest.raises(callmask.InvalidSchemaError) as err:
        callmask.Grammar.from_dialect("hermes", one_tool({"type": "strng"}))
    assert err.value.fault == "request"
    assert err.value.param == "tools[f].parameters#/properties/a"
    with pytest.raises(callmask.VocabError) as err:
        callmask.Vocab.from_tokenizer_json("/no/such/tokenizer.json")
    assert err.value.fault == "internal" and err.value.param is None
    bad = params({"dialect": "hermes", "tools": one_tool({"type": "strng"})}, 10)
    with pytest.raises(_client_error_class(), match="strng"):
        cm_vllm.CallmaskLogitsProcessor.validate_params(bad)


DERIVED_TEMPLATE = Path(__file__).parent / "data" / "fn_call_template.jinja"
"""A chat template written for these tests, in a layout no built-in dialect detects."""


def run_alone(proc, vocab, s, budget, rng):
    """One request through the V1 logits processor, sampling at random among the allowed
    tokens until it ends; its tokens."""
    width = len(vocab) + PAD
    out: list = []
    added = [(0, params(s, budget, eos_token_id=IM_END, stop_token_ids=[]), [1, 2, 3], out)]
    proc.update_state(SimpleNamespace(batch_size=1, removed=[], added=added, moved=[]))
    while not out or out[-1] != IM_END:
        assert len(out) < budget, "sampling past the budget"
        logits = np.zeros((1, width), dtype=np.float32)
        proc.apply(logits)
        out.append(sample(rng, logits[0]))
        proc.update_state(None)
    proc.update_state(SimpleNamespace(batch_size=0, removed=[0], added=[], moved=[]))
    return out


def served_with_derived_dialect(vocab, dialect):
    """Required, named and auto requests with the dialect (a derived file's path) through the
    logits processor: each ends within its budget with calls valid for the tools."""
    proc = cm_vllm.CallmaskLogitsProcessor(config(max_model_len=4096), None, False)
    rng = random.Random(11)
    called = 0
    named = {"type": "function", "function": {"name": "get_user_info"}}
    for choice, tools in [
        ("required", "weather.json"),
        ("required", "travel.json"),
        (named, "weather.json"),
        ("auto", "weather.json"),
        ("auto", "travel.json"),
    ]:
        s = {
            "dialect": dialect,
            "tools": load_tools(tools),
            "tool_choice": choice,
            "parallel_tool_calls": True,
        }
        out = run_alone(proc, vocab, s, 120, rng)
        called += bool(check_output(vocab, s, out, 120)["tool_calls"])
    assert called >= 3


def test_a_template_no_dialect_matches_is_served_with_a_derived_dialect(
    qwen_vocab, tmp_path, monkeypatch, caplog
):
    """No built-in dialect detects the template: the tool parser's fallback derives one,
    writes it under CALLMASK_DERIVED_DIR and logs it, and the logits processor serves it."""
    monkeypatch.setenv("CALLMASK_DERIVED_DIR", str(tmp_path))
    template = DERIVED_TEMPLATE.read_text()
    with pytest.raises(callmask.DialectError) as detect:
        callmask.Grammar.detect_dialect(template, qwen_vocab)
    with caplog.at_level(logging.WARNING, logger="callmask.vllm"):
        path = cm_vllm.tool_parser.derived_dialect_file(template, qwen_vocab, detect.value)
    assert Path(path).parent == tmp_path and "<fn_call>" in Path(path).read_text()
    assert "using a dialect derived from it" in caplog.text and path in caplog.text
    served_with_derived_dialect(qwen_vocab, path)
    # A template in no layout callmask knows: both reasons, as a DialectError.
    odd = "{% for m in messages %}{% for c in m.tool_calls %}CALL {{ c.function.name }} WITH "
    odd += "{% for k, v in c.function.arguments.items() %}{{ k }} IS {{ v }}; {% endfor %}"
    odd += "{% endfor %}{{ m.content }}{% endfor %}"
    with pytest.raises(callmask.DialectError, match="no dialect derives from it"):
        cm_vllm.tool_parser.derived_dialect_file(odd, qwen_vocab, detect.value)


def test_tool_parser_derives_the_dialect_of_an_unknown_template(qwen_vocab, tmp_path, monkeypatch):
    """vLLM's tool parser on a tokenizer whose chat template no built-in dialect matches: the
    parser's dialect is the derived file, and a call in the template's layout comes back as
    tool_calls."""
    pytest.importorskip("vllm")
    from transformers import PreTrainedTokenizerFast
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.tool_parsers.abstract_tool_parser import ToolParserManager

    monkeypatch.setenv("CALLMASK_DERIVED_DIR", str(tmp_path))
    monkeypatch.delenv("CALLMASK_DIALECT", raising=False)
    cm_vllm.register()
    tok = PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZERS["qwen3"]))
    tok.chat_template = DERIVED_TEMPLATE.read_text()
    req = ChatCompletionRequest(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        tools=load_tools("weather.json"),
        tool_choice="required",
        max_tokens=100,
    )
    parser = ToolParserManager.get_tool_parser("callmask")(tok, req.tools)
    assert Path(parser._dialect).parent == tmp_path
    req = parser.adjust_request(req)
    assert json.loads(req.vllm_xargs["callmask"])["dialect"] == parser._dialect
    out = '<fn_call>get_current_weather\n{"location": "Paris", "unit": "celsius"}</fn_call>'
    info = parser.extract_tool_calls(out, req)
    assert info.tools_called and info.tool_calls[0].function.name == "get_current_weather"
    assert json.loads(info.tool_calls[0].function.arguments) == {
        "location": "Paris",
        "unit": "celsius",
    }
