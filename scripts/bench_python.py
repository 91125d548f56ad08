#!/usr/bin/env python3
"""Per-token cost from Python of filling the int32 bitmask (and accepting the token), callmask
vs llguidance (``LLMatcher`` + ``llguidance.numpy.fill_next_token_bitmask``) and, when it imports,
XGrammar (``GrammarMatcher.fill_next_token_bitmask`` into a numpy array), in one run on the same
schema, tokenizer and token sequence (a valid instance tokenized by the model's tokenizer,
then its end token). A benchmark, not a test.

    "$(scripts/python-setup.sh --print-python)" scripts/bench_python.py \
        [--tokenizer .cache/tokenizers/llama3_1-3.7.2/tokenizer.json] [--passes 20]

With XGrammar: install the callmask wheel and llguidance into XGrammar's venv
(scripts/setup-xgrammar.sh; torch/transformers replaced by the stand-ins of
scripts/bench_xgrammar.py) and run the script with that venv's python:

    py=$(scripts/setup-xgrammar.sh --print-python)
    "$py" -m pip install --no-deps target/wheels/callmask-*.whl llguidance==1.9.1
    "$py" scripts/bench_python.py

Prints a table: per-token fill_bitmask and fill+accept (median over passes of the mean over the
sequence, microseconds), and callmask's ratio to llguidance. The first pass of each engine (cold
caches) is reported separately.
"""

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

import numpy as np

import callmask

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = pathlib.Path(os.environ.get("CALLMASK_CACHE", ROOT / ".cache"))

SCHEMA = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "maxLength": 60},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "start": {"type": "string", "format": "date"},
        "include_hourly": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "coords": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
            "additionalProperties": False,
        },
    },
    "required": ["location", "days"],
    "additionalProperties": False,
}
INSTANCE = {
    "location": "San Francisco, CA",
    "unit": "fahrenheit",
    "days": 10,
    "start": "2025-03-01",
    "include_hourly": True,
    "tags": ["fog", "wind", "sunny afternoons"],
    "coords": {"lat": 37.7749, "lon": -122.4194},
}


def run_callmask(vocab, tokens, passes):
    grammar = callmask.Grammar.from_json_schema(SCHEMA)
    automaton = callmask.TokenAutomaton(grammar, vocab)
    bitmask = np.zeros(callmask.bitmask_shape(len(vocab)), dtype=np.int32)
    fills, totals = [], []
    for _ in range(passes):
        m = automaton.matcher()
        fill = 0.0
        t0 = time.perf_counter()
        for t in tokens:
            a = time.perf_counter()
            m.fill_bitmask(bitmask, 0)
            fill += time.perf_counter() - a
            if not m.accept_token(t):
                raise SystemExit(f"callmask refused token {t}: {m.error()}")
        totals.append((time.perf_counter() - t0) / len(tokens))
        fills.append(fill / len(tokens))
    return fills, totals


def run_llguidance(tokenizer_path, tokens, passes):
    import llguidance
    import llguidance.numpy as lnp

    tok = llguidance.LLTokenizer(tokenizer_path)
    grammar = llguidance.LLMatcher.grammar_from_json_schema(
        SCHEMA, defaults={"whitespace_flexible": True}
    )
    bitmask = lnp.allocate_token_bitmask(1, tok.vocab_size)
    fills, totals = [], []
    for _ in range(passes):
        m = llguidance.LLMatcher(tok, grammar)
        if m.is_error():
            raise SystemExit(f"llguidance: {m.get_error()}")
        fill = 0.0
        t0 = time.perf_counter()
        for t in tokens:
            a = time.perf_counter()
            lnp.fill_next_token_bitmask(m, bitmask, 0)
            fill += time.perf_counter() - a
            if not m.consume_token(t):
                raise SystemExit(f"llguidance refused token {t}: {m.get_error()}")
        totals.append((time.perf_counter() - t0) / len(tokens))
        fills.append(fill / len(tokens))
    return fills, totals


def run_xgrammar(vocab, tokens, passes):
    sys.path.insert(0, str(ROOT / "scripts"))
    import bench_xgrammar  # installs the torch/transformers stand-ins, imports xgrammar

    xgr = bench_xgrammar.xgr
    encoded = [b"" if vocab.is_special(i) else vocab.token_bytes(i) for i in range(len(vocab))]
    info = xgr.TokenizerInfo(
        encoded, xgr.VocabType.RAW, vocab_size=len(encoded), stop_token_ids=vocab.eos_token_ids
    )
    compiled = xgr.GrammarCompiler(info, max_threads=1).compile_json_schema(
        json.dumps(SCHEMA), any_whitespace=True
    )
    bitmask = np.zeros(callmask.bitmask_shape(len(vocab)), dtype=np.int32)
    fills, totals = [], []
    for _ in range(passes):
        m = xgr.GrammarMatcher(compiled)
        fill = 0.0
        t0 = time.perf_counter()
        for t in tokens:
            a = time.perf_counter()
            m.fill_next_token_bitmask(bitmask, 0)
            fill += time.perf_counter() - a
            if not m.accept_token(t):
                raise SystemExit(f"xgrammar refused token {t}")
        totals.append((time.perf_counter() - t0) / len(tokens))
        fills.append(fill / len(tokens))
    return fills, totals, f"xgrammar {bench_xgrammar.XGR_VERSION}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default=str(CACHE / "tokenizers/llama3_1-3.7.2/tokenizer.json"))
    ap.add_argument("--passes", type=int, default=20)
    args = ap.parse_args()
    tokenizer_json = pathlib.Path(args.tokenizer).read_text()
    vocab = callmask.Vocab.from_tokenizer_json_str(tokenizer_json)
    text = json.dumps(INSTANCE)
    automaton = callmask.TokenAutomaton(callmask.Grammar.from_json_schema(SCHEMA), vocab)
    tokens = automaton.tokenize(text)
    m = automaton.matcher()
    assert m.accept_tokens(tokens), m.error()
    tokens.append(next(t for t in vocab.eos_token_ids if m.is_allowed(t)))

    results = {
        "callmask": run_callmask(vocab, tokens, args.passes + 1),
        "llguidance": run_llguidance(args.tokenizer, tokens, args.passes + 1),
    }
    try:
        fills, totals, version = run_xgrammar(vocab, tokens, args.passes + 1)
        results["xgrammar"] = (fills, totals)
        print(version)
    except ImportError as e:
        print(f"xgrammar: not installed in this venv ({e}); see the docstring")
    print(f"schema: {len(json.dumps(SCHEMA))} bytes; sequence: {len(tokens)} tokens "
          f"({len(text)} bytes + end); vocabulary: {len(vocab)} tokens; passes: {args.passes}")
    print(f"{'engine':<12} {'fill (us/token)':>16} {'fill+accept':>12} {'first pass fill':>16}")
    rows = {}
    for name, (fills, totals) in results.items():
        fill = statistics.median(fills[1:]) * 1e6
        total = statistics.median(totals[1:]) * 1e6
        rows[name] = (fill, total)
        print(f"{name:<12} {fill:>16.2f} {total:>12.2f} {fills[0] * 1e6:>16.2f}")
    c = rows["callmask"]
    for peer in [r for r in rows if r != "callmask"]:
        p = rows[peer]
        print(f"ratio callmask/{peer}: fill {c[0] / p[0]:.3f}, fill+accept {c[1] / p[1]:.3f}")


if __name__ == "__main__":
    main()
