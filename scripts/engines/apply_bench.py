"""Applying token bitmasks to an engine's logits, every way callmask's adapters can, in one run:
callmask's native apply (Rust, in place), the torch ops it replaced (unpack to a boolean
vocabulary-wide tensor, ``masked_fill_``), XGrammar's CPU kernel (the one vLLM applies its own
structured outputs with), the SGLang backend's ``apply_vocab_mask``, and whole steps: the vLLM
processor's fill-and-apply call (``mask_logits``) against filling then applying with torch ops,
and the transformers processor's ``__call__``.

Logits are ``(batch, 151,936)`` (Qwen3's padded width) over the real Qwen3 vocabulary; bitmasks
random at two densities (1% of tokens allowed, as in a JSON structure, and 90%, as in a string)
for the kernels, real matchers' masks (hermes, 5 tools, required) for the steps. Median of
``--reps`` timings each, in microseconds.

    python apply_bench.py QWEN3_TOKENIZER_JSON [--batches 1,16,64,256] [--reps 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Callable

WIDTH = 151_936


def median_us(fn: Callable[[], Any], reps: int, setup: Callable[[], Any] = lambda: None) -> float:
    times = []
    for _ in range(reps):
        setup()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e6 * statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tokenizer")
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()

    import numpy as np
    import torch
    import xgrammar

    import callmask
    from callmask._callmask import fill_bitmasks, mask_logits
    from callmask.bitmask import _apply_reference, bitmask_words
    from callmask.sglang import CallmaskGrammarObject
    from callmask.transformers import CallmaskLogitsProcessor as HfProcessor

    vocab = callmask.Vocab.from_tokenizer_json(args.tokenizer)
    words = bitmask_words(len(vocab))
    rng = np.random.default_rng(0)
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["city"],
                },
            },
        }
        for i in range(5)
    ]
    g = callmask.Grammar.from_dialect("hermes", tools, tool_choice="required")
    automaton = callmask.TokenAutomaton(g, vocab)
    print(f"torch {torch.__version__}, xgrammar (vLLM's), vocabulary {len(vocab)}, width {WIDTH}")
    print()
    print(
        "| batch | dtype | allowed | callmask native µs | torch ops µs | XGrammar CPU kernel µs "
        "| SGLang apply_vocab_mask µs | native / XGrammar | native / torch ops |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for batch in [int(b) for b in args.batches.split(",")]:
        for dtype in (torch.float32, torch.bfloat16):
            for density in (0.01, 0.9):
                bits = rng.random((batch, words * 32)) < density
                bm_np = np.packbits(bits, axis=1, bitorder="little").view(np.int32).copy()
                bm = torch.from_numpy(bm_np)
                base = torch.randn(batch, WIDTH).to(dtype)
                logits = base.clone()

                def reset() -> None:
                    logits.copy_(base)

                native = median_us(
                    lambda: callmask.apply_token_bitmask_inplace(logits, bm), args.reps, reset
                )
                ops = median_us(lambda: _apply_reference(logits, bm, None, None), args.reps, reset)
                xgr = median_us(
                    lambda: xgrammar.apply_token_bitmask_inplace(
                        logits, bm, vocab_size=len(vocab), backend="cpu"
                    ),
                    args.reps,
                    reset,
                )
                sgl = median_us(
                    lambda: CallmaskGrammarObject.apply_vocab_mask(logits, bm), args.reps, reset
                )
                # the same result both ways
                a, b = base.clone(), base.clone()
                callmask.apply_token_bitmask_inplace(a, bm)
                _apply_reference(b, bm, None, None)
                assert torch.equal(a, b)
                print(
                    f"| {batch} | {str(dtype)[6:]} | {density:.0%} | {native:.0f} | {ops:.0f} "
                    f"| {xgr:.0f} | {sgl:.0f} "
                    f"| {native / xgr:.2f}x | {native / ops:.2f}x |",
                    flush=True,
                )
    print()
    print(
        "Whole steps on real masks (hermes, 5 tools, required; each row a few tokens into a call):"
    )
    print()
    print(
        "| batch | vLLM processor: mask_logits µs | fill_bitmasks + torch ops µs "
        "| transformers processor µs | ratio |"
    )
    print("|---:|---:|---:|---:|---:|")
    prefix = vocab.tokenize('<tool_call>\n{"name": "tool_3", "arguments": {"city": "')
    for batch in [int(b) for b in args.batches.split(",")]:
        ms = []
        for _ in range(batch):
            m = automaton.matcher()
            assert m.accept_tokens(prefix)
            ms.append(m)
        bm = np.zeros((batch, words), dtype=np.int32)
        logits = torch.randn(batch, WIDTH)
        rows = list(range(batch))
        one = median_us(lambda: mask_logits(ms, bm, logits, rows), args.reps)
        two = median_us(
            lambda: (
                fill_bitmasks(ms, bm),
                _apply_reference(logits, torch.from_numpy(bm), rows, rows),
            ),
            args.reps,
        )
        hf = HfProcessor(automaton)
        ids = torch.tensor([[1] + prefix] * batch)
        hf(ids[:, :1], torch.zeros(batch, WIDTH))  # the prompt: one token
        scores = torch.randn(batch, WIDTH)
        hf_us = median_us(lambda: hf(ids, scores), args.reps)
        print(f"| {batch} | {one:.0f} | {two:.0f} | {hf_us:.0f} | {one / two:.3f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
