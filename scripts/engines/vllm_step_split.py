"""Where callmask's time goes inside a vLLM step: one engine (in one process), batches run
unconstrained and through callmask's logits processor, interleaved, with the processor's parts
timed per step: ``update_state`` (before the forward pass: the batch's changes, handing the step
to the worker), the worker thread's feeding and filling (``worker_fill``, overlapping the forward
pass), what ``apply`` waits for it (``wait``), the native write of the logits (``apply_native``)
and ``apply`` in all. Prints each run and the medians of the output tokens/s.

    python vllm_step_split.py MODEL_DIR [--batch 16] [--tools 100] [--choice required]
        [--reps 4] [--max-tokens 64]

Run with ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (the processor must live in this process to be
timed); the OpenMP environment (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``) is the caller's, the
same for both ways.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vllm_bench import make_tools  # noqa: E402

PARTS: Dict[str, List[float]] = {}
"""Seconds and calls per timed part, since the last reset."""


def timed(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """``f``, its time added to ``PARTS[name]``."""

    def wrapper(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            part = PARTS.setdefault(name, [0.0, 0.0])
            part[0] += time.perf_counter() - t0
            part[1] += 1

    return wrapper


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--tools", type=int, default=100)
    ap.add_argument("--choice", default="required")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()

    from callmask.vllm import CallmaskLogitsProcessor
    from callmask.vllm import logits_processor as lp
    from vllm import LLM, SamplingParams

    lp._Prefill.wait = timed("wait", lp._Prefill.wait)  # type: ignore[method-assign]
    lp.apply_token_bitmask_inplace = timed("apply_native", lp.apply_token_bitmask_inplace)
    lp._feed_and_fill = timed("worker_fill", lp._feed_and_fill)
    cls: Any = CallmaskLogitsProcessor
    cls.apply = timed("apply", cls.apply)
    cls.update_state = timed("update_state", cls.update_state)
    llm = LLM(
        model=args.model,
        logits_processors=[CallmaskLogitsProcessor],
        max_model_len=1024,
        max_num_seqs=args.batch,
        max_num_batched_tokens=4096,
        enforce_eager=True,
        dtype="float32",
        seed=0,
    )
    prompt = "<|im_start|>user\nCall one of the tools.<|im_end|>\n<|im_start|>assistant\n"
    spec = json.dumps(
        {"dialect": "hermes", "tools": make_tools(args.tools, "s"), "tool_choice": args.choice}
    )

    def params(way: str, seed: int) -> Any:
        common: Dict[str, Any] = dict(max_tokens=args.max_tokens, temperature=1.0, seed=seed)
        if way == "unconstrained":
            return SamplingParams(ignore_eos=True, **common)
        return SamplingParams(extra_args={"callmask": spec}, **common)

    ways = ("unconstrained", "callmask")
    for way in ways:  # warm up: the engine, and the tool set's compile
        llm.generate(
            [prompt] * args.batch, [params(way, i) for i in range(args.batch)], use_tqdm=False
        )
    tok_s: Dict[str, List[float]] = {w: [] for w in ways}
    for rep in range(args.reps):
        for way in ways:
            PARTS.clear()
            seeds = [1000 * (rep + 1) + i for i in range(args.batch)]
            t0 = time.perf_counter()
            outs = llm.generate(
                [prompt] * args.batch, [params(way, s) for s in seeds], use_tqdm=False
            )
            wall = time.perf_counter() - t0
            tokens = sum(len(o.outputs[0].token_ids) for o in outs)
            tok_s[way].append(tokens / wall)
            steps = max(1.0, PARTS.get("apply", [0.0, 1.0])[1])
            parts = " ".join(f"{k} {v[0] * 1e3 / steps:.2f}" for k, v in PARTS.items())
            print(
                f"{way} rep {rep}: {tokens / wall:.0f} tok/s, {tokens} tokens in "
                f"{wall * 1e3:.0f} ms; ms/step: {parts}",
                flush=True,
            )
    for way, v in tok_s.items():
        print(f"{way}: median {statistics.median(v):.0f} tok/s of {[round(x) for x in v]}")
    ratio = statistics.median(tok_s["callmask"]) / statistics.median(tok_s["unconstrained"])
    print(f"callmask / unconstrained (medians): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
