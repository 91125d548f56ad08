"""callmask's CUDA path, checked and measured in one run (``scripts/gpu-check.sh`` carries it to a
GPU machine; ``--dry-run`` runs the same steps on the CPU at small sizes).

1. **correctness**: ``callmask.bitmask.apply_token_bitmask_inplace`` on the device, through
   XGrammar's fused kernel where it is installed and through callmask's own torch-ops fallback,
   against a CPU reference (numpy unpacking of the bitmask): float32, bfloat16 and float16
   logits; full bitmasks, compact ones with row indices, logits wider than the vocabulary;
2. **the apply alone** at batches 1 to 4,096 over Qwen3's padded vocabulary (151,936), each
   path, median of repeated runs timed on the device (CUDA events), beside XGrammar's published
   figures (~5.5 µs at batch 1, ~250 µs at batch 4,096 over 128k tokens);
3. **generation**: a random-weight model of Qwen3's shape (the real Qwen3 vocabulary, a few
   layers; bfloat16 on a GPU) under transformers' ``generate`` at batches 1, 16, 64 and 256:
   unconstrained, and callmask's processor (hermes over 5 and 100 tools, ``required`` and
   ``auto``), and XGrammar's transformers processor (``xgrammar.contrib.hf``) with its own
   tool-calling preset for Qwen3 (``get_model_structural_tag("qwen_3", ...)``, the nearest
   equivalent grammar) where XGrammar is installed: time per output token, the processor's share
   of the step, and the first batch of a tool set never seen (compile and first mask included).

Writes one JSON file (``--out``) and prints a line per measure; exits non-zero when a
correctness check fails.

    python gpu_check.py --tokenizer QWEN3_TOKENIZER_JSON --out results.json [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from vllm_bench import make_tools  # noqa: E402  (no vLLM import at its top)

# -- 1. correctness ----------------------------------------------------------------------------


def reference(
    logits: Any, bitmask: Any, indices: Optional[List[int]], rows: Optional[List[int]]
) -> Any:
    """The masked logits computed on the CPU with numpy (the bitmask unpacked bit by bit)."""
    import numpy as np
    import torch

    out = logits.detach().to("cpu", torch.float32).numpy().copy()
    words = bitmask.detach().cpu().numpy().astype(np.int64) & 0xFFFFFFFF
    width = out.shape[-1]
    bits = ((words[:, :, None] >> np.arange(32)[None, None, :]) & 1).reshape(words.shape[0], -1)
    allowed = np.zeros((words.shape[0], width), dtype=bool)
    n = min(width, bits.shape[1])
    allowed[:, :n] = bits[:, :n] == 1
    targets = range(out.shape[0]) if indices is None else indices
    for k, r in enumerate(targets):
        b = r if rows is None else rows[k]
        out[r][~allowed[b]] = -np.inf
    return out


def check_apply(device: str, dry: bool) -> List[dict]:
    import torch

    import callmask.bitmask as cb

    results = []
    vocab = 1000 if dry else 151_669
    width = vocab + 11 if dry else 151_936  # logits padded past the vocabulary
    paths: Dict[str, Any] = {"default": cb._cuda_kernel()}
    kernel = paths["default"]
    saved = cb._KERNEL
    ways = [("xgrammar kernel", kernel)] if kernel is not None else []
    ways.append(("callmask torch ops", None))
    gen = torch.Generator().manual_seed(0)
    for way, k in ways:
        cb._KERNEL = k
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            for shape in ("full", "compact", "indices"):
                rows = 7
                logits = torch.randn(rows, width, generator=gen).to(dtype)
                words = (vocab + 31) // 32
                bitmask = torch.randint(
                    -(2**31), 2**31 - 1, (rows, words), generator=gen, dtype=torch.int64
                ).to(torch.int32)
                indices = None if shape == "full" else [0, 2, 5]
                brows = [1, 0, 2] if shape == "compact" else None
                want = reference(logits, bitmask, indices, brows)
                got = logits.to(device)
                if device != "cpu":
                    cb.apply_token_bitmask_inplace(
                        got, bitmask.to(device), indices, bitmask_rows=brows
                    )
                else:
                    cb.apply_token_bitmask_inplace(got, bitmask, indices, bitmask_rows=brows)
                got = got.to("cpu", torch.float32).numpy()
                import numpy as np

                same = bool(np.array_equal(np.isneginf(got), np.isneginf(want))) and bool(
                    np.allclose(np.where(np.isinf(want), 0, got), np.where(np.isinf(want), 0, want))
                )
                results.append({"way": way, "dtype": str(dtype), "shape": shape, "ok": same})
    cb._KERNEL = saved
    return results


# -- 2. the apply alone ------------------------------------------------------------------------


def time_device(fn: Callable[[], Any], device: str, reps: int) -> float:
    """Median seconds of ``fn`` on ``device`` (CUDA events on a GPU)."""
    import torch

    fn()
    times = []
    for _ in range(reps):
        if device == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) / 1000)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_apply(device: str, dry: bool) -> List[dict]:
    import torch

    import callmask.bitmask as cb

    width = 4096 if dry else 151_936
    batches = [1, 16] if dry else [1, 16, 64, 256, 1024, 4096]
    saved = cb._KERNEL
    kernel = cb._cuda_kernel()
    ways = ([("xgrammar kernel", kernel)] if kernel is not None else []) + [("callmask", None)]
    out = []
    for way, k in ways:
        cb._KERNEL = k
        for batch in batches:
            logits = torch.randn(batch, width, device=device, dtype=torch.float32)
            bitmask = torch.full((batch, (width + 31) // 32), -1, dtype=torch.int32)
            bitmask[:, ::3] = 0
            bm = bitmask.to(device)
            s = time_device(
                lambda: cb.apply_token_bitmask_inplace(logits, bm), device, 5 if dry else 50
            )
            out.append({"way": way, "batch": batch, "width": width, "us": round(s * 1e6, 2)})
            print(f"apply {way:<20} batch {batch:>5}: {s * 1e6:9.1f} us", flush=True)
    cb._KERNEL = saved
    return out


# -- 3. generation -----------------------------------------------------------------------------


class Timed:
    """Wraps a logits processor, summing the seconds spent in it (synchronized on a GPU)."""

    def __init__(self, inner: Any, device: str):
        self.inner = inner
        self.device = device
        self.seconds = 0.0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = self.inner(input_ids, scores)
        if self.device == "cuda":
            torch.cuda.synchronize()
        self.seconds += time.perf_counter() - t0
        return out


def bench_generate(device: str, dry: bool, tokenizer_json: str) -> List[dict]:
    import torch
    from transformers import (
        LogitsProcessorList,
        PreTrainedTokenizerFast,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    import callmask
    from callmask.transformers import CallmaskLogitsProcessor

    tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer_json)
    vocab = callmask.Vocab.from_tokenizer_json(tokenizer_json, eos_token_ids=[151645])
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    cfg = Qwen3Config(
        vocab_size=151_936,
        hidden_size=64 if dry else 1024,
        intermediate_size=128 if dry else 3072,
        num_hidden_layers=1 if dry else 4,
        num_attention_heads=2 if dry else 16,
        num_key_value_heads=1 if dry else 8,
        head_dim=32 if dry else 128,
        max_position_embeddings=4096,
        eos_token_id=151645,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    prompt = tok(
        "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n<|im_start|>assistant\n"
    )["input_ids"]
    batches = [1, 2] if dry else [1, 16, 64, 256]
    new_tokens = 64 if dry else 96
    engines = ["callmask"] + (["xgrammar"] if _importable("xgrammar") else [])
    configs = [("unconstrained", 0, None, None)] + [
        (f"{engine} hermes {n} tools {choice}", n, choice, engine)
        for n in ((5,) if dry else (5, 100))
        for choice in ("required", "auto")
        for engine in engines
    ]
    xgr_compiler: Any = None
    if "xgrammar" in engines:
        import xgrammar as xgr

        xgr_info = xgr.TokenizerInfo.from_huggingface(
            tok, vocab_size=151_936, stop_token_ids=[151645]
        )
        # One compiler for the run, as an engine keeps one: a tool set seen before is a hit.
        xgr_compiler = xgr.GrammarCompiler(xgr_info)
    out = []
    for batch in batches:
        ids = torch.tensor([prompt] * batch, device=device)
        for label, n_tools, choice, engine in configs:
            for first in (True, False):
                if n_tools == 0 and first:
                    continue
                tag = (
                    f"t{batch}{n_tools}{choice}{int(time.time() * 1000) % 100000}"
                    if first
                    else "shared"
                )
                procs = LogitsProcessorList()
                timed = None
                t0 = time.perf_counter()
                if n_tools and engine == "callmask":
                    grammar = callmask.Grammar.from_dialect(
                        "hermes",
                        make_tools(n_tools, tag),
                        tool_choice=choice,
                        parallel_tool_calls=False,
                    )
                    automaton = callmask.TokenAutomaton(grammar, vocab)
                    timed = Timed(CallmaskLogitsProcessor(automaton, new_tokens), device)
                    procs.append(timed)
                elif n_tools:
                    import xgrammar as xgr
                    from xgrammar.contrib.hf import LogitsProcessor as XgrProcessor

                    preset = xgr.get_model_structural_tag(
                        "qwen_3",
                        tools=make_tools(n_tools, tag),
                        tool_choice=choice,
                        reasoning="disabled",
                        parallel_tool_calls=False,
                    )
                    compiled = xgr_compiler.compile_structural_tag(preset)
                    timed = Timed(XgrProcessor(compiled), device)
                    procs.append(timed)
                if device == "cuda":
                    torch.cuda.synchronize()
                with torch.no_grad():
                    gen = model.generate(
                        ids,
                        attention_mask=torch.ones_like(ids),
                        max_new_tokens=new_tokens,
                        do_sample=True,
                        temperature=1.0,
                        logits_processor=procs,
                        pad_token_id=151643,
                        eos_token_id=151645,
                    )
                if device == "cuda":
                    torch.cuda.synchronize()
                wall = time.perf_counter() - t0
                produced = int((gen[:, len(prompt) :] != 151643).sum())
                row = {
                    "batch": batch,
                    "config": label,
                    "tool_set": "never seen" if first else "seen",
                    "seconds": round(wall, 4),
                    "output_tokens": produced,
                    "ms_per_output_token": round(1000 * wall / max(1, produced), 4),
                    "steps": gen.shape[1] - len(prompt),
                    "processor_share": None if timed is None else round(timed.seconds / wall, 4),
                }
                out.append(row)
                print(
                    f"generate batch {batch:>3} {label:<44} {row['tool_set']:<10} "
                    f"{row['ms_per_output_token']:8.3f} ms/token  processor "
                    f"{'-' if timed is None else f'{100 * timed.seconds / wall:.1f}%'}",
                    flush=True,
                )
    return out


def _importable(module: str) -> bool:
    """Whether ``module`` imports here (a peer missing on the device is skipped, not fatal)."""
    try:
        __import__(module)
        return True
    except Exception as e:
        print(f"{module} not importable ({e}): its rows are skipped", flush=True)
        return False


def _version(dist: str) -> Optional[str]:
    """The installed version of distribution ``dist``, or None."""
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True, help="Qwen3's tokenizer.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--dry-run", action="store_true", help="CPU, small sizes")
    ap.add_argument("--skip-generate", action="store_true")
    args = ap.parse_args()
    import torch

    device = "cpu" if args.dry_run or not torch.cuda.is_available() else "cuda"
    results: Dict[str, Any] = {
        "device": (
            torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or "cpu"
        ),
        "dry_run": args.dry_run,
        "torch": torch.__version__,
        "callmask": _version("callmask"),
    }
    results["xgrammar"] = _version("xgrammar")
    print(json.dumps(results), flush=True)
    t0 = time.perf_counter()
    results["correctness"] = check_apply(device, args.dry_run)
    bad = [r for r in results["correctness"] if not r["ok"]]
    print(
        f"correctness: {len(results['correctness']) - len(bad)} of {len(results['correctness'])} ok",
        flush=True,
    )
    results["apply"] = bench_apply(device, args.dry_run)
    if not args.skip_generate:
        results["generate"] = bench_generate(device, args.dry_run, args.tokenizer)
    results["seconds"] = round(time.perf_counter() - t0, 1)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    for r in bad:
        print(f"FAIL apply {r}", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
