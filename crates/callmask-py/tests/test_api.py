"""The Python API on the Llama 3.1 vocabulary: errors as typed exceptions, parsing, streaming,
rollback / fork / reset / validate, bitmask checks."""

import json

import numpy as np
import pytest

import callmask
from conftest import OUTPUTS, TOKENIZERS, load_tools

WEATHER = load_tools("weather.json")


def automaton(vocab, **kw):
    g = callmask.Grammar.from_dialect("hermes", WEATHER, **kw)
    return g, callmask.TokenAutomaton(g, vocab)


def test_errors_are_typed():
    with pytest.raises(callmask.UnsupportedKeywordError, match="uniqueItems"):
        callmask.Grammar.from_json_schema({"type": "array", "uniqueItems": True})
    g = callmask.Grammar.from_json_schema({"type": "array", "uniqueItems": True}, lenient=True)
    assert g.dropped_keywords
    with pytest.raises(callmask.InvalidSchemaError):
        callmask.Grammar.from_json_schema({"type": "no-such-type"})
    with pytest.raises(callmask.InvalidSchemaError):
        callmask.Grammar.from_json_schema("{not json")
    with pytest.raises(callmask.InvalidSchemaError):
        callmask.Grammar.from_json_schema({"$ref": "#/$defs/missing"})
    with pytest.raises(callmask.DialectError):
        callmask.Grammar.from_dialect("no-such-dialect", WEATHER)
    with pytest.raises(callmask.ToolsError):
        callmask.Grammar.from_dialect("hermes", [{"type": "function"}])
    with pytest.raises(callmask.ToolsError):
        callmask.Grammar.from_dialect("hermes", WEATHER, tool_choice={"type": "function"})
    with pytest.raises(callmask.VocabError):
        callmask.Vocab.from_tokenizer_json("/nonexistent/tokenizer.json")
    with pytest.raises(callmask.VocabError):
        callmask.Vocab.from_parts([b"a"], [False], [7])
    with pytest.raises(callmask.ToolsError, match="no_such_option"):
        callmask.Grammar.from_json_schema({}, no_such_option=1)
    assert issubclass(callmask.UnsupportedKeywordError, callmask.CallmaskError)


def test_format_annotation():
    """`format` is asserted by default (an unknown one is refused by name) and ignored with
    `format_annotation=True`, in both constructors."""
    schema = {"type": "string", "format": "phone"}
    with pytest.raises(callmask.UnsupportedKeywordError, match="format"):
        callmask.Grammar.from_json_schema(schema)
    g = callmask.Grammar.from_json_schema(schema, format_annotation=True)
    assert g.check('"not an address"') is None
    assert g.check("12") is not None
    strict = callmask.Grammar.from_json_schema({"type": "string", "format": "email"})
    assert strict.check('"not an address"') is not None
    tools = [
        {
            "type": "function",
            "function": {
                "name": "mail",
                "parameters": {
                    "type": "object",
                    "properties": {"to": {"type": "string", "format": "phone"}},
                },
            },
        }
    ]
    with pytest.raises(callmask.UnsupportedKeywordError, match="format"):
        callmask.Grammar.from_dialect("hermes", tools)
    assert callmask.Grammar.from_dialect("hermes", tools, format_annotation=True)


def test_ijson_numbers():
    """Numbers every JSON parser reads exactly by default (integers within 2^53 - 1, at most
    15 significant digits); `ijson_numbers=False` allows every number JSON spells."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}}
    exact = callmask.Grammar.from_json_schema(schema)
    plain = callmask.Grammar.from_json_schema(schema, ijson_numbers=False)
    for text, by_default in [
        ('{"n": 9007199254740991}', True),
        ('{"n": 4444444444444444444}', False),
        ('{"x": 0.1234567890123456}', False),
        ('{"x": 0.123456789012345}', True),
    ]:
        assert (exact.check(text) is None) == by_default, text
        assert plain.check(text) is None, text
    assert exact.check('{"x": -0}') is not None
    tools = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    call = '<tool_call>\n{"name": "f", "arguments": {"n": 4444444444444444444}}\n</tool_call>'
    required = callmask.Grammar.from_dialect("hermes", tools, tool_choice="required")
    assert required.check(call) is not None
    plain_required = callmask.Grammar.from_dialect(
        "hermes", tools, tool_choice="required", ijson_numbers=False
    )
    assert plain_required.check(call) is None


def test_caches_are_owned_sized_and_shared(llama_vocab):
    """Compiles keep lexemes in the caches they are given (a vocabulary's own, or one of the
    caller's; none is kept across compiles otherwise), and automata their walks; a small cache
    stays within its size and gives the same masks."""
    schema = {"type": "object", "properties": {"e": {"type": "string", "format": "email"}}}
    own = callmask.Caches(64 << 20)
    assert own.bytes == 0 and own.max_bytes == 64 << 20
    g = callmask.Grammar.from_json_schema(schema, caches=own)
    assert own.stats()["entries"] > 0
    hits = own.stats()["hits"]
    callmask.Grammar.from_json_schema(schema, caches=own)
    assert own.stats()["hits"] > hits
    assert not hasattr(callmask.Caches, "default")  # no process-wide cache
    vocab_caches = llama_vocab.caches
    assert vocab_caches.max_bytes == callmask.DEFAULT_CACHE_BYTES
    before = vocab_caches.stats()["misses"]
    callmask.Grammar.from_json_schema({"type": "string", "maxLength": 7}, caches=vocab_caches)
    assert llama_vocab.caches.stats()["misses"] > before  # the same caches, not a copy
    tiny = callmask.Caches(1 << 16)
    small = callmask.Grammar.from_json_schema(schema, caches=tiny)
    text = '{"e": "a.b@example.com"}'
    masks = []
    for grammar in (g, small):
        m = callmask.TokenAutomaton(grammar, llama_vocab).matcher()
        row = []
        for t in llama_vocab.tokenize(text):
            row.append(m.allowed_tokens())
            assert m.accept_token(t)
        masks.append(row)
    assert masks[0] == masks[1]
    assert tiny.bytes <= tiny.max_bytes
    tiny.clear()
    assert tiny.bytes == 0 and tiny.stats()["entries"] == 0
    with pytest.raises(TypeError):
        callmask.Grammar.from_json_schema(schema, caches="no")


def test_options_are_the_options_types_fields():
    """Every compile option is a keyword named as its field in callmask's options types (one
    set of names with the C API, the engine specs and the CLI's --options); the older keyword
    names still work; an unknown option or a wrong value is refused by name."""
    schema = {"type": "object", "properties": {"n": {"type": "number"}}}
    compact = callmask.Grammar.from_json_schema(schema, max_whitespace=0, max_compile_time=2.5)
    assert compact.check('{"n":1}') is None and compact.check('{"n": 1}') is not None
    old = callmask.Grammar.from_json_schema(schema, max_whitespace=0, max_compile_secs=2)
    assert old.check('{"n": 1}') is not None
    wide = callmask.Grammar.from_json_schema(schema, whitespace="any", ijson_numbers=False)
    assert wide.check('{"n":\n\n 12345678901234567}') is None
    indented = callmask.Grammar.from_json_schema(schema, whitespace={"tidy": {"indent": 1}})
    assert indented.check('{\n "n": 1\n}') is None
    assert indented.check('{\n    "n": 1\n}') is not None
    g = callmask.Grammar.from_dialect(
        "hermes",
        WEATHER,
        "required",
        False,
        None,
        max_text_chars=5,
        strict_arguments=False,
        distinct_calls=False,
        lenient=True,
        max_depth=8,
    )
    assert g.functions
    one = callmask.Grammar.from_dialect("hermes", WEATHER, parallel_calls=False)
    assert one.functions
    for bad in (
        {"max_dept": 3},
        {"max_whitespace": "wide"},
        {"whitespace": "loose"},
        {"tool_choice": ""},
        {"reasoning": ("", "x")},
        {"parallel_calls": True, "parallel_tool_calls": False},
    ):
        with pytest.raises(callmask.ToolsError):
            callmask.Grammar.from_dialect("hermes", WEATHER, **bad)
    with pytest.raises(callmask.ToolsError, match="max_dept"):
        callmask.Grammar.from_json_schema(schema, max_dept=3)
    with pytest.raises(callmask.ToolsError, match="tool_choice"):
        callmask.Grammar.from_json_schema(schema, tool_choice="auto")


def test_parse_and_stream(llama_vocab):
    g, a = automaton(llama_vocab)
    text = (OUTPUTS / "hermes.txt").read_text()
    msg = g.parse(text)
    assert msg["content"] is None and msg["reasoning_content"] is None
    [call] = msg["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "get_current_weather"
    assert json.loads(call["function"]["arguments"]) == {"location": "Oslo", "unit": "celsius"}
    with pytest.raises(callmask.ParseError):
        g.parse('<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>')
    assert g.check(text) is None
    assert "ends before" in g.check("<tool_call>\n{")  # a prefix is not a complete output
    assert "get_current_weather" in g.functions

    # The recovering parse: a missing closing marker and trailing junk are reported, the calls
    # the text holds are kept, and an output the grammar accepts recovers nothing.
    assert g.parse(text, recover=True)["recovered"] == []
    unclosed = text.rstrip().removesuffix("</tool_call>") + "\nThat is all."
    with pytest.raises(callmask.ParseError):
        g.parse(unclosed)
    rec = g.parse(unclosed, recover=True)
    assert [c["function"]["name"] for c in rec["tool_calls"]] == ["get_current_weather"]
    assert rec["recovered"] and rec["recovered"][0]["kind"] in (
        "inserted",
        "closed",
        "skipped",
        "text_around",
    )
    assert rec["content"] == "That is all."  # the text after the call, whole

    # Streaming token by token: the deltas reassemble into the parsed message.
    sp = callmask.StreamParser(g, llama_vocab)
    deltas = []
    for t in a.tokenize(text.rstrip("\n")):
        deltas += sp.push_token(t)
    deltas += sp.finish()
    starts = [
        d["tool_calls"][0] for d in deltas if "tool_calls" in d and "id" in d["tool_calls"][0]
    ]
    assert [s["function"]["name"] for s in starts] == ["get_current_weather"]
    args = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas if "tool_calls" in d)
    assert json.loads(args) == json.loads(call["function"]["arguments"])
    with pytest.raises(callmask.ParseError):
        callmask.StreamParser(g).push('<tool_call>\n{"name": "nope"')


def test_matcher_lifecycle(llama_vocab):
    g, a = automaton(llama_vocab, tool_choice="required", parallel_tool_calls=False)
    text = (OUTPUTS / "hermes.txt").read_text().rstrip("\n")
    tokens = a.tokenize(text)
    m = a.matcher()
    assert not m.can_end()
    assert m.validate_tokens(tokens + [tokens[0]]) == len(tokens)
    assert m.accepted_tokens() == []  # validate changes nothing
    # A forbidden token: False, unchanged, error() says why; consume_token raises.
    bad = llama_vocab.eos_token_ids[0]  # tool_choice required: no end before a call
    assert not m.accept_token(bad) and "not allowed" in m.error()
    with pytest.raises(callmask.ForbiddenTokenError):
        m.consume_token(bad)
    with pytest.raises(callmask.ForbiddenTokenError):
        m.consume_token(10**7)
    assert not m.accept_tokens(tokens[:3] + [bad]) and m.accepted_tokens() == []
    assert m.accept_tokens(tokens[:5])
    f = m.fork()
    before = m.allowed_tokens()
    assert m.accept_tokens(tokens[5:])
    assert m.can_end() and m.is_finished() and not m.is_terminated()
    eos = llama_vocab.eos_token_ids
    assert set(eos) & set(m.allowed_tokens())
    assert m.accept_token(next(t for t in eos if m.is_allowed(t)))
    assert m.is_terminated()
    assert not m.allowed_tokens()
    assert f.allowed_tokens() == before  # the fork did not move
    m.rollback(len(tokens) - 5 + 1)
    assert m.allowed_tokens() == before and not m.is_terminated()
    with pytest.raises(callmask.RollbackError):
        m.rollback(6)
    m.reset()
    assert m.accepted_tokens() == [] and m.error() is None
    small = a.matcher(max_rollback=2)
    assert small.accept_tokens(tokens[:4]) and small.rollback_available() == 2


def test_bitmask_checks(llama_vocab):
    _, a = automaton(llama_vocab)
    m = a.matcher()
    words = (len(llama_vocab) + 31) // 32
    with pytest.raises(callmask.BitmaskError):
        m.fill_bitmask(np.zeros((1, words), dtype=np.int64))
    with pytest.raises(callmask.BitmaskError):
        m.fill_bitmask(np.zeros((1, words - 1), dtype=np.int32))
    with pytest.raises(callmask.BitmaskError):
        m.fill_bitmask(np.zeros((2, words), dtype=np.int32), index=2)
    ro = np.zeros((1, words), dtype=np.int32)
    ro.flags.writeable = False
    with pytest.raises(callmask.BitmaskError):
        m.fill_bitmask(ro)
    with pytest.raises(callmask.BitmaskError):
        m.fill_bitmask(np.zeros((words, 2), dtype=np.int32).T)
    with pytest.raises(callmask.BitmaskError):
        m.fill_bitmask(np.zeros((1, 1, words), dtype=np.int32))
    with pytest.raises(TypeError):
        m.fill_bitmask([0] * words)
    with pytest.raises(callmask.BitmaskError):
        callmask.fill_bitmasks([m, a.matcher()], np.zeros((1, words), dtype=np.int32))
    with pytest.raises(ValueError):
        callmask.fill_bitmasks([m, m], np.zeros((2, words), dtype=np.int32))
    # 1-D row, and a strided view of rows of a bigger array (contiguous rows still work).
    row = np.zeros(words, dtype=np.int32)
    m.fill_bitmask(row)
    big = np.zeros((4, words), dtype=np.int32)
    m.fill_bitmask(big[2:3])
    np.testing.assert_array_equal(big[2], row)
    assert not big[[0, 1, 3]].any()
    allowed = callmask.allowed_from_bitmask(row, len(llama_vocab))
    assert np.flatnonzero(allowed).tolist() == m.allowed_tokens()


def test_vocab(llama_vocab):
    assert len(llama_vocab) == 128256
    assert llama_vocab.special_token("<|python_tag|>") == 128010
    assert llama_vocab.token_bytes(128010) == b"<|python_tag|>"
    assert llama_vocab.is_special(128010) and not llama_vocab.is_special(1000)
    v = callmask.Vocab.from_tokenizer_json(TOKENIZERS["llama3_1"], eos_token_ids=[128008])
    assert 128008 in v.eos_token_ids and set(llama_vocab.eos_token_ids) <= set(v.eos_token_ids)
    tokenizers = pytest.importorskip("tokenizers")
    v2 = callmask.Vocab.from_hf(tokenizers.Tokenizer.from_file(str(TOKENIZERS["qwen3"])))
    assert len(v2) > 150000


def test_render_prompt():
    p = callmask.render_prompt(
        "pythonic",
        WEATHER,
        [{"role": "user", "content": "Weather in Oslo?"}],
        datetime="2024-09-24",
    )
    assert "get_current_weather" in p and "Weather in Oslo?" in p


def test_token_budget_ends_every_output_within_max_tokens(llama_vocab):
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    }
    a = callmask.TokenAutomaton(callmask.Grammar.from_json_schema(schema), llama_vocab)
    with pytest.raises(callmask.CallmaskError, match="budget"):
        a.matcher(max_tokens=3)
    words = callmask.bitmask_shape(len(llama_vocab))[-1]
    for budget in (40, 64):
        m = a.matcher(max_tokens=budget)
        assert m.tokens_left() == budget
        out = []
        row = np.zeros(words, dtype=np.int32)
        # Always take the highest allowed token id: a "model" that never tries to finish.
        while not m.is_terminated():
            m.fill_bitmask(row)
            bits = np.unpackbits(row.view(np.uint8), bitorder="little")
            tok = int(np.nonzero(bits)[0][-1])
            assert m.accept_token(tok), m.error()
            out.append(tok)
            assert len(out) <= budget
        assert out[-1] in llama_vocab.eos_token_ids
        text = b"".join(llama_vocab.token_bytes(t) for t in out[:-1]).decode()
        value = json.loads(text)
        assert isinstance(value["city"], str) and isinstance(value["days"], int)
        m.reset()
        assert m.tokens_left() == budget


def test_spec_key_is_one_key_per_spec_and_parses_a_text_once(monkeypatch):
    """A spec's key is the same as a dict or as JSON text, keys in any order; a text seen before
    is not parsed again; a malformed one is refused every time (never remembered); the texts
    remembered are bounded."""
    from callmask import _common

    parsed = []
    real = _common.normalize_spec
    monkeypatch.setattr(_common, "normalize_spec", lambda s: parsed.append(s) or real(s))
    monkeypatch.setattr(_common, "_SPEC_KEYS", _common._SpecTextKeys(size=2))
    spec = {"dialect": "hermes", "tools": [], "tool_choice": "auto"}
    text = json.dumps(spec)
    reordered = json.dumps(dict(reversed(list(spec.items()))))
    key = _common.spec_key(spec)
    assert _common.spec_key(text) == key and _common.spec_key(reordered) == key
    assert _common.spec_key({**spec, "tool_choice": "required"}) != key
    parsed.clear()
    for _ in range(3):
        assert _common.spec_key(text) == key
    assert parsed == []
    for _ in range(2):
        with pytest.raises(callmask.ToolsError):
            _common.spec_key('{"dialect": "hermes"}')
    assert len(parsed) == 2
    _common.spec_key(json.dumps({"json_schema": {"type": "integer"}}))
    _common.spec_key(reordered)
    parsed.clear()
    _common.spec_key(text)  # dropped: two texts were seen since
    assert len(parsed) == 1


def test_automaton_cache_compiles_a_spec_once_for_concurrent_callers(qwen_vocab, monkeypatch):
    """Requests over a new tool set arriving together wait for one compile; a failed compile
    reaches every waiter and the next call tries again."""
    import threading
    import time

    from callmask import _common

    built = []
    real = _common.TokenAutomaton

    def slow(grammar, vocab):
        built.append(1)
        time.sleep(0.2)
        return real(grammar, vocab)

    monkeypatch.setattr(_common, "TokenAutomaton", slow)
    cache = _common.AutomatonCache(qwen_vocab)
    spec = {"json_schema": {"type": "integer"}}
    got = []
    threads = [threading.Thread(target=lambda: got.append(cache.get(spec))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and len(got) == 6 and all(a is got[0] for a in got)
    assert cache.get(spec) is got[0] and len(built) == 1

    def failing(grammar, vocab):
        built.append(1)
        time.sleep(0.2)
        raise RuntimeError("boom")

    monkeypatch.setattr(_common, "TokenAutomaton", failing)
    errors = []

    def get_other():
        try:
            cache.get({"json_schema": {"type": "string"}})
        except RuntimeError as e:
            errors.append(e)

    threads = [threading.Thread(target=get_other) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 3 and len(built) == 2
    monkeypatch.setattr(_common, "TokenAutomaton", real)
    assert cache.get({"json_schema": {"type": "string"}}) is not None  # tried again
