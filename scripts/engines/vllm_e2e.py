"""callmask inside a real vLLM engine: offline (``LLM``) and over the OpenAI protocol
(``vllm serve``), every constrained request checked.

Each request must end by itself (``finish_reason`` ``stop``, or ``tool_calls`` in the server)
within its ``max_tokens``, and its output must parse (callmask's grammar, and in the server
vLLM's own response) into calls whose arguments validate against the tool's JSON Schema, with
at least one call where ``tool_choice`` requires it and only the named function where it names
one. The model is small and random, so whatever it would write, the constraint decides.

    python vllm_e2e.py offline MODEL_DIR [--requests 24] [--seed 0]
    python vllm_e2e.py serve   BASE_URL  [--requests 16] [--seed 0]

Prints one line per request and a closing ``N passed, N failed`` line; exits non-zero on any
failure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from openai_e2e import chat_body, check_calls, plan, post_chat, report


def offline(model: str, n: int, seed: int) -> list:
    import callmask
    from callmask.vllm import CallmaskLogitsProcessor
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    tok = AutoTokenizer.from_pretrained(model)
    vocab = callmask.Vocab.from_hf(tok)
    dialect = callmask.Grammar.detect_dialect(tok.chat_template, vocab)
    print(f"offline: dialect {dialect} (detected from the chat template)", flush=True)
    t0 = time.time()
    llm = LLM(
        model=model,
        logits_processors=[CallmaskLogitsProcessor],
        gpu_memory_utilization=0.3,
        max_model_len=2048,
        max_num_seqs=8,
        enforce_eager=True,
        dtype="float32",
        seed=seed,
    )
    print(f"offline: engine up in {time.time() - t0:.0f} s", flush=True)
    reqs = plan(n, seed)
    prompts, params = [], []
    for i, r in enumerate(reqs):
        spec = {
            "dialect": dialect,
            "tools": r["tools"],
            "tool_choice": r["tool_choice"],
            "parallel_tool_calls": r["parallel_tool_calls"],
        }
        prompts.append(
            tok.apply_chat_template(
                [{"role": "user", "content": r["message"]}],
                tools=r["tools"],
                add_generation_prompt=True,
                tokenize=False,
            )
        )
        params.append(
            SamplingParams(
                max_tokens=r["max_tokens"],
                temperature=1.0,
                seed=seed + i,
                skip_special_tokens=False,
                extra_args={"callmask": spec},
            )
        )
    # One unconstrained request rides along: it must be left alone (it runs to its length).
    prompts.append("Hello")
    params.append(SamplingParams(max_tokens=12, temperature=1.0, seed=seed, ignore_eos=True))
    t0 = time.time()
    outs = llm.generate(prompts, params)
    print(f"offline: {len(outs)} requests in {time.time() - t0:.1f} s", flush=True)
    results = []
    for i, (r, o) in enumerate(zip(reqs, outs)):
        out = o.outputs[0]
        g = callmask.Grammar.from_dialect(
            dialect,
            r["tools"],
            tool_choice=r["tool_choice"],
            parallel_tool_calls=r["parallel_tool_calls"],
        )
        why = None
        if out.finish_reason != "stop":
            why = f"finish_reason {out.finish_reason}"
        elif len(out.token_ids) > r["max_tokens"]:
            why = f"{len(out.token_ids)} tokens > max_tokens {r['max_tokens']}"
        else:
            try:
                calls = g.parse(out.text)["tool_calls"]
                why = check_calls(r, calls)
            except callmask.CallmaskError as e:
                why = f"does not parse: {e}"
        results.append(
            report("offline", i, r, len(out.token_ids), out.finish_reason, why, out.text)
        )
    free = outs[-1].outputs[0]
    why = (
        None
        if free.finish_reason == "length" and len(free.token_ids) == 12
        else "unconstrained request was changed"
    )
    results.append(
        report(
            "offline",
            len(reqs),
            {"tool_choice": "-", "max_tokens": 12},
            len(free.token_ids),
            free.finish_reason,
            why,
            free.text,
        )
    )
    return results


def serve(base: str, n: int, seed: int) -> list:
    import urllib.request

    model = json.loads(urllib.request.urlopen(f"{base}/v1/models").read())["data"][0]["id"]
    results = []
    for i, r in enumerate(plan(n, seed)):
        body = dict(chat_body(r, seed + i), model=model)
        message, finish, used = post_chat(base, body, 600)
        calls = message.get("tool_calls") or []
        want = {"stop"} if isinstance(r["tool_choice"], dict) else {"stop", "tool_calls"}
        why = None
        if finish not in want:
            why = f"finish_reason {finish}"
        elif used is None or used > r["max_tokens"]:
            why = f"{used} tokens > max_tokens {r['max_tokens']}"
        elif (
            calls
            and r["tool_choice"] != "named"
            and not isinstance(r["tool_choice"], dict)
            and finish != "tool_calls"
        ):
            why = f"calls but finish_reason {finish}"
        else:
            why = check_calls(r, calls)
        results.append(report("serve", i, r, used, finish, why, json.dumps(message)[:300]))
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["offline", "serve"])
    ap.add_argument("target")
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    run = offline if args.mode == "offline" else serve
    results = run(args.target, args.requests, args.seed)
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
