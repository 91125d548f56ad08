"""What callmask costs inside a real vLLM engine: output tokens/s of one engine serving the same
batches three ways in the same run, unconstrained (``ignore_eos``), vLLM's own structured
outputs (XGrammar, a JSON Schema for one call) and callmask's logits processor (a tool-call
dialect), with the processor's share of each step and the stall of a tool set never seen.

All three ways go through one ``LLM`` built with callmask's processor (a request without a
callmask spec costs it nothing: ``apply`` returns before any work), so they share the model, the
scheduler and the machine's state. Each configuration runs ``--reps`` times, interleaved across
the ways, and the best run is kept. "fresh" batches use a tool set no earlier request used
(new function names: nothing cached by callmask or by vLLM's grammar cache); "repeated" batches
reuse the tool set of the fresh batch before them with other seeds, so other outputs: the tool
set is compiled, but the masks along the fresh batch's own outputs are not replayed (a server
sees the same tools again with other conversations, not the same sampled tokens).

    python vllm_bench.py MODEL_DIR [--plan "5:required:1,16,64,256;100:auto:16,64"]
        [--max-tokens 64] [--reps 2] [--json OUT.json]
    python vllm_bench.py --render A.json [B.json ...]     (the table of earlier runs)

A plan is ``TOOLS:CHOICE:BATCHES`` entries separated by ``;``. Prints a Markdown table (one
row per configuration) and writes the measures as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Dict, List


def make_tools(n: int, tag: str) -> List[dict]:
    """``n`` OpenAI tools whose names carry ``tag`` (a new tag: a tool set never seen)."""
    out = []
    for i in range(n):
        out.append(
            {
                "type": "function",
                "function": {
                    "name": f"{tag}_tool_{i}",
                    "description": f"Tool {i}.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string", "maxLength": 40},
                            "days": {"type": "integer", "minimum": 1, "maximum": 14},
                            "units": {"enum": ["metric", "imperial"]},
                        },
                        "required": ["city", "days"],
                        "additionalProperties": False,
                    },
                },
            }
        )
    return out


def call_schema(tools: List[dict]) -> dict:
    """One call as a JSON Schema (vLLM + XGrammar's way): ``{"name", "arguments"}`` of any tool."""
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "name": {"const": t["function"]["name"]},
                    "arguments": t["function"]["parameters"],
                },
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for t in tools
        ]
    }


class StepTimer:
    """Wraps the processor's methods: time spent in them, calls, and the longest call."""

    def __init__(self, cls: Any):
        self.total = 0.0
        self.calls = 0
        self.longest = 0.0
        for name in ("apply", "update_state"):
            orig = getattr(cls, name)

            def timed(this: Any, *a: Any, __orig: Any = orig, __name: str = name, **k: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return __orig(this, *a, **k)
                finally:
                    dt = time.perf_counter() - t0
                    self.total += dt
                    if __name == "apply":
                        self.calls += 1
                    self.longest = max(self.longest, dt)

            setattr(cls, name, timed)

    def reset(self) -> None:
        self.total, self.calls, self.longest = 0.0, 0, 0.0


SPEC_OPTIONS: Dict[str, Any] = {}
"""More options of callmask's spec for every request (``--spec-options``)."""

DEFAULT_PLAN = "5:required:1,16,64,256;100:required:16,64;5:auto:16,64;100:auto:16,64"


def render(results: List[dict]) -> None:
    """The Markdown table of ``results`` (rows as ``main`` measures them)."""
    unconstrained = {
        r["batch"]: r["unconstrained/repeated"] for r in results if "unconstrained/repeated" in r
    }
    print(
        "| tools | choice | batch | unconstrained tok/s | vLLM+XGrammar tok/s (fresh) "
        "| callmask tok/s (fresh) | callmask / XGrammar | callmask / unconstrained "
        "| callmask ms/step (share) | cold longest step ms |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        u = r.get("unconstrained/repeated") or unconstrained.get(r["batch"])
        x, xf = r.get("xgrammar/repeated"), r.get("xgrammar/fresh")
        c, cf = r.get("callmask/repeated"), r.get("callmask/fresh")
        if not (u and x and c and xf and cf):
            continue
        print(
            f"| {r['tools']} | {r['choice']} | {r['batch']} | {u['tok_s']:.0f} "
            f"| {x['tok_s']:.0f} ({xf['tok_s']:.0f}) | {c['tok_s']:.0f} ({cf['tok_s']:.0f}) "
            f"| {c['tok_s'] / x['tok_s']:.2f}x | {c['tok_s'] / u['tok_s']:.2f}x "
            f"| {c['proc_ms_per_step']:.2f} ({100 * c['proc_share']:.0f}%) "
            f"| {cf['longest_ms']:.1f} |"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--plan", default=DEFAULT_PLAN)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--spec-options",
        default="{}",
        help="more options of callmask's spec, JSON (e.g. '{\"distinct_calls\": false}')",
    )
    ap.add_argument(
        "--no-overlap",
        action="store_true",
        help="fill callmask's masks in apply, not during the forward pass (overlap_masks = False)",
    )
    ap.add_argument("--render", nargs="+", default=None, metavar="JSON")
    args = ap.parse_args()
    SPEC_OPTIONS.update(json.loads(args.spec_options))
    if args.render:
        rows: List[dict] = []
        for path in args.render:
            with open(path) as f:
                data = json.load(f)
            if isinstance(data, dict):  # {"meta": ..., "rows": [...]}
                meta = data.get("meta", {})
                print(
                    f"Measured by `vllm_bench.py --plan \"{meta.get('plan')}\" --reps "
                    f"{meta.get('reps')} --max-tokens {meta.get('max_tokens')}` on "
                    f"{meta.get('date')}, commit {meta.get('commit')}.\n"
                )
                data = data.get("rows", [])
            rows.extend(data)
        render(rows)
        return 0
    if not args.model:
        ap.error("MODEL_DIR is needed (or --render)")
    plan = []
    for entry in args.plan.split(";"):
        n_tools, choice, batches_text = entry.split(":")
        plan.append((int(n_tools), choice, [int(b) for b in batches_text.split(",")]))
    batches = [b for _, _, bs in plan for b in bs]

    from callmask.vllm import CallmaskLogitsProcessor
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    CallmaskLogitsProcessor.overlap_masks = not args.no_overlap
    timer = StepTimer(CallmaskLogitsProcessor)
    t0 = time.time()
    llm = LLM(
        model=args.model,
        logits_processors=[CallmaskLogitsProcessor],
        max_model_len=1024,
        max_num_seqs=max(batches),
        max_num_batched_tokens=max(4096, 16 * max(batches)),
        enforce_eager=True,
        dtype="float32",
        seed=0,
        structured_outputs_config={"backend": "xgrammar"},
    )
    print(f"engine up in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    prompt = "<|im_start|>user\nCall one of the tools.<|im_end|>\n<|im_start|>assistant\n"

    def params(way: str, tools: List[dict], choice: str, seed: int) -> Any:
        common: Dict[str, Any] = dict(max_tokens=args.max_tokens, temperature=1.0, seed=seed)
        if way == "unconstrained":
            return SamplingParams(ignore_eos=True, **common)
        if way == "xgrammar":
            return SamplingParams(
                structured_outputs=StructuredOutputsParams(json=call_schema(tools)), **common
            )
        spec = {"dialect": "hermes", "tools": tools, "tool_choice": choice, **SPEC_OPTIONS}
        # As JSON text, the way callmask's tool parser sends it (a dict is deep-copied and
        # walked by vLLM on admission: 2.9 ms a request for 100 tools).
        return SamplingParams(extra_args={"callmask": json.dumps(spec)}, **common)

    def run(way: str, batch: int, tools: List[dict], choice: str, seed0: int = 0) -> dict:
        ps = [params(way, tools, choice, seed0 + i) for i in range(batch)]
        timer.reset()
        t = time.perf_counter()
        outs = llm.generate([prompt] * batch, ps, use_tqdm=False)
        wall = time.perf_counter() - t
        tokens = sum(len(o.outputs[0].token_ids) for o in outs)
        return {
            "tokens": tokens,
            "wall_s": wall,
            "tok_s": tokens / wall,
            "proc_ms_per_step": 1000 * timer.total / max(1, timer.calls),
            "proc_share": timer.total / wall,
            "longest_ms": 1000 * timer.longest,
        }

    run("unconstrained", 4, [], "required")  # warm the engine up
    results = []
    tag_n = 0
    for n_tools, choice, plan_batches in plan:
        for batch in plan_batches:
            run("unconstrained", batch, [], "required")  # this batch size's first steps
            best: Dict[str, dict] = {}
            for rep in range(args.reps):
                tag_n += 1
                tools = make_tools(n_tools, f"t{tag_n}")
                for way in ("unconstrained", "xgrammar", "callmask"):
                    for phase in ("fresh", "repeated"):
                        if way == "unconstrained" and phase == "fresh":
                            continue  # no tool set: nothing is fresh
                        seed0 = batch if phase == "repeated" else 0
                        r = run(way, batch, tools, choice, seed0)
                        key = f"{way}/{phase}"
                        if key not in best or r["tok_s"] > best[key]["tok_s"]:
                            best[key] = r
            row = {"tools": n_tools, "choice": choice, "batch": batch, **best}
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    render(results)
    if args.json:
        import datetime
        import subprocess

        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        meta = {
            "plan": args.plan,
            "reps": args.reps,
            "max_tokens": args.max_tokens,
            "date": datetime.date.today().isoformat(),
            "commit": commit,
        }
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
