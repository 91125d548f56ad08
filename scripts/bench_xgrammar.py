#!/usr/bin/env python3
"""XGrammar as a benchmark peer of callmask: same vocabulary, same schemas, same token paths.

Run with the venv made by scripts/setup-xgrammar.sh:

    py=$(scripts/setup-xgrammar.sh --print-python)
    "$py" scripts/bench_xgrammar.py cases.json [--samples] [--allowed] > xgrammar.json
    "$py" scripts/bench_xgrammar.py --self-check

Input (written by the Rust side, or by scripts/xgrammar_input_from_hf.py):

    {"vocab": {"tokens_hex": [...], "eos": [ids], "special": [ids]}
              | {"file": "vocab.json"},          # same object in a file (relative: to this input)
     "cases": [{"name": "weather/llama", "schema": {...}, "tokens": [ids], "reps": 5,
                "input": "<the request's JSON text>"},
               {"name": "tools_5/hermes/auto", "structural_tag": {"model": "qwen_3",
                "tool_choice": "auto"}, "input": "<tools JSON text>", "tokens": [ids]}]}

A case with "structural_tag" compiles XGrammar's own tool-calling preset,
xgrammar.get_model_structural_tag(model, tools, tool_choice, reasoning="disabled") (a
`triggered_tags` structural tag: free text, then calls opened by the trigger), over the tools of
"input" (bare OpenAI functions, wrapped as {"type": "function", "function": f}).

Output on stdout, one JSON object:

    {"engine": "xgrammar", "version": "0.2.8", "settings": {...},
     "vocab": {"size", "eos", "special", "build_ms"},
     "cases": [{"name", "reps", "tokens", "compile_ms": {"cold", "median", "reps"},
                "first_mask_us", "first_mask_cold_us", "new_request_ms",
                "mask_us": {"p50", "p99", "max", "mean", "n"}, "mask_step_min_us": {same keys},
                "mask_step_min_samples_us": [µs per step],
                "accept_us": {same keys},
                "tokens_accepted", "can_end", "terminated"} | {"name", "error", ...}]}

What is measured (wall clock, time.perf_counter_ns, one Python call around each C++ call):
- compile_ms: GrammarCompiler.compile_json_schema on a fresh compiler with its cache disabled
  (cache_enabled=False), once per rep; "cold" is the first rep of the case, "median" over all.
  Reps stop early once the case's compiles took more than --compile-budget-s (default 30 s;
  compile_ms.reps says how many ran). The vocabulary (TokenizerInfo) is built once and shared,
  as callmask shares its Vocab; its build time is vocab.build_ms.
- first_mask_us: GrammarMatcher creation + the first fill_next_token_bitmask, median over reps
  (first_mask_cold_us: the first rep's).
- new_request_ms: a new request, timed from its JSON text ("input": the schema, or the tools)
  to the first mask: json.loads (tools) + get_model_structural_tag (tools) + compile on a fresh
  compiler with its cache disabled + GrammarMatcher + the first fill_next_token_bitmask,
  median over reps (capped by --compile-budget-s like compile_ms). Where one compile alone
  took longer than --compile-budget-s, the request is not run again: new_request_ms is then the
  sum of its parts (structural tag from the text + median compile + median first mask) and
  "new_request_derived" is true.
- mask_us: every fill_next_token_bitmask along `tokens` (before each token and once after the
  last, so n = reps * (len(tokens) + 1)); accept_us: every accept_token. With --samples the raw
  per-call samples (µs) are included too, rep after rep.
- mask_step_min_us: the same statistics over each step's fastest rep (n = len(tokens) + 1);
  mask_step_min_samples_us: those per-step minima, step by step (the suite splits them by
  where in the output each step is).
  On a shared, loaded machine single samples catch preemptions (a 4 ms scheduler tick shows up
  as mask_us.max); a step slow in every rep is slow for real, so this is the robust figure.
Checks (outside the timed calls): each token is set in the mask filled before it and accepted;
after the last token the mask allows an EOS id and accept_token(eos) terminates the matcher.
A failing case is reported as {"name", "error"} and the run goes on.

Settings chosen to match callmask's semantics (flags change them; all are echoed in "settings"):
- strict_mode=False: additionalProperties / extra array items follow the schema (JSON Schema
  semantics, as callmask); strict_mode=True would forbid unlisted properties everywhere.
- any_whitespace=True with max_whitespace_cnt=20: whitespace allowed between JSON tokens, at
  most 20 bytes per gap (callmask's CompileOptions::max_whitespace default). --max-whitespace 0
  means compact JSON: any_whitespace=False with separators (",", ":").
- any_order=False (XGrammar's default, the fully validating mode): properties in the schema's
  declared order with required ones checked. callmask accepts listed properties in any order
  (each once, required present); XGrammar's any_order=True would accept any order but checks
  neither required keys nor duplicates, so it is offered as --any-order only. Instances given to
  this script must list properties in declared order unless --any-order.
- One thread: GrammarCompiler(max_threads=1). GrammarMatcher has no thread setting.
- Vocabulary: VocabType.RAW from the raw bytes of every token; ids in "special" that are not EOS
  are given as empty byte strings, which XGrammar treats as special (never allowed by a grammar);
  stop_token_ids = "eos" (XGrammar's stop tokens, allowed where the grammar can end).

torch / transformers: xgrammar's Python wrappers import both at import time (dtype constants,
annotations, the Hugging Face helpers) but the compiler and matcher are C++ and take any DLPack
array, here a numpy int32 bitmask. PyPI's Linux torch is the multi-GB CUDA build, so the venv
leaves both out and this script registers inert stand-in modules for them before importing
xgrammar, only when the real ones are not importable. Nothing measured goes through them.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.metadata
import json
import math
import os
import statistics
import sys
import time
import types


def _install_stand_ins() -> list[str]:
    """Registers inert `torch` / `transformers` modules when the real ones are absent."""

    class _Absent:
        """Placeholder type: usable in annotations and as a base class; using it raises."""

        def __init__(self, *args, **kwargs):
            pass

        def __getattr__(self, name):
            raise RuntimeError("torch/transformers stand-in: not installed in this venv")

    def make(name: str) -> types.ModuleType:
        mod = types.ModuleType(name)
        mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
        mod.__getattr__ = lambda attr: _Absent  # type: ignore[attr-defined]
        mod.__version__ = "0+stand-in"
        return mod

    installed = []
    for name in ("torch", "transformers"):
        try:
            __import__(name)
        except ImportError:
            sys.modules[name] = make(name)
            installed.append(name)
    return installed


import numpy as np  # noqa: E402
import tvm_ffi  # noqa: E402,F401  (first, so that it sees the real torch or none at all)

STAND_INS = _install_stand_ins()

import xgrammar as xgr  # noqa: E402

XGR_VERSION = importlib.metadata.version("xgrammar")


def now_ns() -> int:
    return time.perf_counter_ns()


def stats_us(samples_ns: list[int]) -> dict:
    """p50/p99 (nearest rank), max, mean in µs."""
    if not samples_ns:
        return {"p50": None, "p99": None, "max": None, "mean": None, "n": 0}
    s = sorted(samples_ns)
    n = len(s)

    def rank(q: float) -> float:
        return s[min(n - 1, max(0, math.ceil(q * n) - 1))] / 1e3

    return {
        "p50": rank(0.50),
        "p99": rank(0.99),
        "max": s[-1] / 1e3,
        "mean": sum(s) / n / 1e3,
        "n": n,
    }


def step_min_ns(samples_ns: list[int], steps: int) -> list[int]:
    """Per step of the token path, the fastest of its reps (every rep walks the same path)."""
    reps = len(samples_ns) // steps
    return [min(samples_ns[r * steps + i] for r in range(reps)) for i in range(steps)]


def load_vocab(spec: dict, base_dir: str) -> dict:
    if "file" in spec:
        path = spec["file"]
        if not os.path.isabs(path) and not os.path.exists(path):
            path = os.path.join(base_dir, path)
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    return spec


def build_tokenizer_info(vocab: dict):
    """TokenizerInfo over exactly our token bytes (RAW), our EOS ids and our special ids."""
    eos = [int(i) for i in vocab.get("eos", [])]
    special = set(int(i) for i in vocab.get("special", [])) - set(eos)
    encoded = [bytes.fromhex(h) for h in vocab["tokens_hex"]]
    for i in special:
        if 0 <= i < len(encoded):
            encoded[i] = b""  # XGrammar's marker for a special (non-text) token
    t0 = now_ns()
    info = xgr.TokenizerInfo(
        encoded, xgr.VocabType.RAW, vocab_size=len(encoded), stop_token_ids=eos
    )
    build_ms = (now_ns() - t0) / 1e6
    return info, eos, build_ms


def bit_set(bitmask: np.ndarray, token: int) -> bool:
    word = int(bitmask[0, token >> 5]) & 0xFFFFFFFF
    return bool((word >> (token & 31)) & 1)


def allowed_count(bitmask: np.ndarray, vocab_size: int) -> int:
    bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")[:vocab_size]
    return int(bits.sum())


def compile_kwargs(args) -> dict:
    kw = {"strict_mode": args.strict, "any_order": args.any_order}
    if args.max_whitespace == 0:
        kw.update(any_whitespace=False, separators=(",", ":"))
    elif args.max_whitespace < 0:
        kw.update(any_whitespace=True)
    else:
        kw.update(any_whitespace=True, max_whitespace_cnt=args.max_whitespace)
    return kw


def structural_tag(spec: dict, tools_text: str, args):
    """XGrammar's tool-calling preset for the tools in `tools_text` (JSON)."""
    tools = [{"type": "function", "function": f} for f in json.loads(tools_text)]
    kw = {}
    if args.max_whitespace > 0:
        kw["max_whitespace_cnt"] = args.max_whitespace
    return xgr.get_model_structural_tag(
        spec["model"], tools=tools, tool_choice=spec.get("tool_choice", "auto"),
        reasoning="disabled", **kw)


def run_case(case: dict, info, eos: list[int], vocab_size: int, args) -> dict:
    name = case.get("name", "?")
    reps = max(1, int(case.get("reps", args.reps)))
    tag_spec = case.get("structural_tag")
    if tag_spec is not None:
        # Built outside the timed compile (callmask's compile starts from parsed tools too);
        # new_request_ms below times it from the JSON text.
        source = structural_tag(tag_spec, case["input"], args)
    else:
        schema = case["schema"]
        source = schema if isinstance(schema, str) else json.dumps(schema)
    request_text = case.get("input", source if tag_spec is None else None)
    tokens = [int(t) for t in case.get("tokens", [])]
    kw = compile_kwargs(args)

    def compile_with(compiler, src):
        if tag_spec is not None:
            return compiler.compile_structural_tag(src)
        return compiler.compile_json_schema(src, **kw)

    compile_ns = []
    compiled = None
    for _ in range(reps):
        if compile_ns and sum(compile_ns) / 1e9 > args.compile_budget_s:
            break  # slow compiles: fewer reps, count reported in compile_ms.reps
        compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        t0 = now_ns()
        compiled = compile_with(compiler, source)
        compile_ns.append(now_ns() - t0)
        del compiler

    words = math.ceil(vocab_size / 32)
    bitmask = np.full((1, words), -1, dtype=np.int32)

    # A new request: JSON text in, first mask out. Where one compile alone took longer than the
    # compile budget, it is not run again: the request's parts are added up instead (the
    # structural tag built from the text + the median compile + the median first mask below;
    # "new_request_derived": true).
    new_request_ns = []
    derived = compile_ns[0] / 1e9 > args.compile_budget_s
    tag_ns = []
    if derived and tag_spec is not None:
        for _ in range(reps):
            t0 = now_ns()
            structural_tag(tag_spec, request_text, args)
            tag_ns.append(now_ns() - t0)
    for _ in range(0 if derived else reps):
        if new_request_ns and sum(new_request_ns) / 1e9 > args.compile_budget_s:
            break
        compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        t0 = now_ns()
        if tag_spec is not None:
            src = structural_tag(tag_spec, request_text, args)
        else:
            src = request_text
        m = xgr.GrammarMatcher(compile_with(compiler, src))
        m.fill_next_token_bitmask(bitmask)
        new_request_ns.append(now_ns() - t0)
        del m, compiler
    first_ns, mask_ns, accept_ns = [], [], []
    allowed = []
    accepted = 0
    can_end = terminated = False
    for rep in range(reps):
        t0 = now_ns()
        matcher = xgr.GrammarMatcher(compiled)
        matcher.fill_next_token_bitmask(bitmask)
        t1 = now_ns()
        first_ns.append(t1 - t0)
        # The first mask is filled again (filling does not change the matcher) so that every
        # mask_us sample, first one included, is the same bare fill_next_token_bitmask call.
        step = 0
        accepted = 0
        while True:
            t0 = now_ns()
            matcher.fill_next_token_bitmask(bitmask)
            mask_ns.append(now_ns() - t0)
            if args.allowed and rep == 0:
                allowed.append(allowed_count(bitmask, vocab_size))
            if step == len(tokens):
                break
            tok = tokens[step]
            if not bit_set(bitmask, tok):
                return {"name": name, "error": f"token {tok} at step {step} not in mask",
                        "tokens_accepted": accepted}
            t0 = now_ns()
            ok = matcher.accept_token(tok)
            accept_ns.append(now_ns() - t0)
            if not ok:
                return {"name": name, "error": f"token {tok} at step {step} rejected",
                        "tokens_accepted": accepted}
            accepted += 1
            step += 1
        can_end = any(bit_set(bitmask, e) for e in eos) if eos else matcher.is_completed()
        if eos:
            end = next((e for e in eos if bit_set(bitmask, e)), eos[0])
            terminated = bool(matcher.accept_token(end)) and matcher.is_terminated()
        else:
            terminated = matcher.is_completed()
        if not (can_end and terminated):
            return {"name": name, "error": "matcher cannot end after the last token",
                    "tokens_accepted": accepted, "can_end": can_end, "terminated": terminated}

    out = {
        "name": name,
        "reps": reps,
        "tokens": len(tokens),
        "compile_ms": {
            "cold": compile_ns[0] / 1e6,
            "median": statistics.median(compile_ns) / 1e6,
            "reps": len(compile_ns),
        },
        "first_mask_us": statistics.median(first_ns) / 1e3,
        "first_mask_cold_us": first_ns[0] / 1e3,
        "new_request_ms": (
            statistics.median(new_request_ns) / 1e6 if not derived else
            (statistics.median(tag_ns) if tag_ns else 0) / 1e6
            + statistics.median(compile_ns) / 1e6 + statistics.median(first_ns) / 1e6),
        "new_request_derived": derived,
        "mask_us": stats_us(mask_ns),
        "mask_step_min_us": stats_us(step_min_ns(mask_ns, len(tokens) + 1)),
        "mask_step_min_samples_us": [x / 1e3 for x in step_min_ns(mask_ns, len(tokens) + 1)],
        "accept_us": stats_us(accept_ns),
        "tokens_accepted": accepted,
        "can_end": can_end,
        "terminated": terminated,
    }
    if args.samples:
        out["mask_samples_us"] = [x / 1e3 for x in mask_ns]
        out["accept_samples_us"] = [x / 1e3 for x in accept_ns]
    if args.allowed:
        out["allowed"] = allowed
    return out


def self_check() -> int:
    """Import, build a tiny RAW vocabulary, compile, mask, accept, terminate."""
    vocab = {"tokens_hex": [b.hex() for b in [b"{", b"}", b" ", b'"a"', b":", b"1", b"<eos>"]],
             "eos": [6], "special": []}
    info, eos, _ = build_tokenizer_info(vocab)
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    compiled = compiler.compile_json_schema(
        json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
        strict_mode=False, any_whitespace=True, max_whitespace_cnt=20)
    m = xgr.GrammarMatcher(compiled)
    bm = np.full((1, 1), -1, dtype=np.int32)
    for t in [0, 3, 4, 5, 1]:
        m.fill_next_token_bitmask(bm)
        if not bit_set(bm, t) or not m.accept_token(t):
            print(f"self-check: token {t} refused", file=sys.stderr)
            return 1
    m.fill_next_token_bitmask(bm)
    if not bit_set(bm, 6) or not m.accept_token(6) or not m.is_terminated():
        print("self-check: cannot terminate", file=sys.stderr)
        return 1
    print(f"self-check: xgrammar {XGR_VERSION} ok (stand-ins: {STAND_INS or 'none'})",
          file=sys.stderr)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("input", nargs="?", help="cases JSON (see module doc)")
    p.add_argument("--self-check", action="store_true", help="smoke test the install and exit")
    p.add_argument("--reps", type=int, default=5, help="reps for cases without 'reps'")
    p.add_argument("--compile-budget-s", type=float, default=30.0,
                   help="no further compile reps once a case's compiles took this long")
    p.add_argument("--max-whitespace", type=int, default=20,
                   help="most whitespace bytes per gap (0: compact JSON, -1: unbounded)")
    p.add_argument("--strict", action="store_true",
                   help="XGrammar strict_mode (forbid unlisted properties/items)")
    p.add_argument("--any-order", action="store_true", help="XGrammar any_order=True")
    p.add_argument("--samples", action="store_true", help="include raw per-call samples (µs)")
    p.add_argument("--allowed", action="store_true",
                   help="include the allowed-token count of each mask (first rep)")
    args = p.parse_args()
    if args.self_check:
        return self_check()
    if not args.input:
        p.error("input required")

    with open(args.input, encoding="utf-8") as f:
        data = json.load(f)
    vocab = load_vocab(data["vocab"], os.path.dirname(os.path.abspath(args.input)))
    info, eos, build_ms = build_tokenizer_info(vocab)
    vocab_size = len(vocab["tokens_hex"])

    cases = []
    for case in data.get("cases", []):
        try:
            cases.append(run_case(case, info, eos, vocab_size, args))
        except Exception as e:  # report per case, keep going
            cases.append({"name": case.get("name", "?"), "error": f"{type(e).__name__}: {e}"})
        print(f"xgrammar: {cases[-1]['name']}: "
              + (cases[-1].get("error") or "ok"), file=sys.stderr)

    kw = compile_kwargs(args)
    if "separators" in kw:
        kw["separators"] = list(kw["separators"])
    out = {
        "engine": "xgrammar",
        "version": XGR_VERSION,
        "settings": {
            "compile": kw,
            "max_threads": 1,
            "cache_enabled": False,
            "compile_budget_s": args.compile_budget_s,
            "vocab_type": "RAW",
            "bitmask": "numpy int32 (1, ceil(V/32))",
            "stand_ins": STAND_INS,
            "python": sys.version.split()[0],
        },
        "vocab": {"size": vocab_size, "eos": eos, "special": len(vocab.get("special", [])),
                  "build_ms": build_ms},
        "cases": cases,
    }
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
