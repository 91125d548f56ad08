"""llama.cpp's ``llama-server`` over the OpenAI protocol: the same tool requests against the
server with callmask (``scripts/llama-server.sh``) and, for comparison, the unpatched one.

Each request is an OpenAI chat completion with tools (``tool_choice`` required, named in the
object form, auto or none; ``parallel_tool_calls`` on or off; streamed or not; ``max_tokens``
from 48 up). It passes when the server answers it, the response ends by itself
(``finish_reason`` ``tool_calls`` where a call is required, ``stop`` or ``tool_calls`` for auto,
``stop`` for none) within ``max_tokens`` completion tokens, and its ``tool_calls`` are what the
request allows, with arguments valid against the tool's JSON Schema.

    python llama_server_e2e.py BASE_URL [--requests 24] [--seed 0] [--label NAME] [--strict]

A request whose ``max_tokens`` is below the shortest output the constraint allows is answered
by the callmask server with HTTP 400 naming both numbers (no engine can fit a call there); it
counts as ``refused``, apart from the valid ones and the errors.

Prints one line per request, then a ``SUMMARY`` line with the counts (valid, refused, cut at
max_tokens, no call where one is required, invalid calls, errors); with ``--strict`` exits
non-zero when any request is cut, lacks a required call, is invalid or fails otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request

from openai_e2e import check_calls, collect_stream, plan, report

CHOICES = ("required", "named", "auto", "none")
BUDGETS = (48, 64, 100, 200)


def post_chat(base: str, body: dict, timeout: float) -> tuple:
    """The message, finish reason and completion tokens of one chat request (streamed or not)."""
    req = urllib.request.Request(
        f"{base}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read().decode()
    if body["stream"]:
        return collect_stream(raw)
    data = json.loads(raw)
    choice = data["choices"][0]
    return choice["message"], choice["finish_reason"], data["usage"]["completion_tokens"]


def verdict(r: dict, message: dict, finish: str, used: int | None) -> tuple:
    """(kind, why): kind is ``valid``, ``cut`` (stopped by max_tokens), ``no_call`` or
    ``invalid``; why is None when valid."""
    calls = message.get("tool_calls") or []
    choice = r["tool_choice"]
    if finish == "length":
        return "cut", f"stopped at max_tokens ({used} tokens) without ending"
    if used is None or used > r["max_tokens"]:
        return "invalid", f"{used} tokens > max_tokens {r['max_tokens']}"
    required = choice == "required" or isinstance(choice, dict)
    if required and not calls:
        return "no_call", "no call although tool_choice requires one"
    want = {"tool_calls"} if calls else {"stop"}  # llama.cpp: tool_calls whenever a call was made
    if finish not in want:
        return "invalid", f"finish_reason {finish} with {len(calls)} calls"
    why = check_calls(r, calls)
    return ("valid", None) if why is None else ("invalid", why)


def run(base: str, n: int, seed: int, label: str, timeout: float) -> dict:
    counts = {"valid": 0, "refused": 0, "cut": 0, "no_call": 0, "invalid": 0, "error": 0}
    t0 = time.time()
    for i, r in enumerate(plan(n, seed, choices=CHOICES, budgets=BUDGETS)):
        body = {
            "messages": [{"role": "user", "content": r["message"]}],
            "tools": r["tools"],
            "tool_choice": r["tool_choice"],
            "parallel_tool_calls": r["parallel_tool_calls"],
            "max_tokens": r["max_tokens"],
            "temperature": 1.0,
            "seed": seed + i,
            "stream": r["stream"],
        }
        if r["stream"]:
            body["stream_options"] = {"include_usage": True}
        try:
            message, finish, used = post_chat(base, body, timeout)
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            if e.code == 400 and "callmask (budget)" in detail and "too small" in detail:
                counts["refused"] += 1
                try:
                    message = json.loads(detail)["error"]["message"]
                except (ValueError, KeyError, TypeError):
                    message = detail[:300]
                print(
                    f"refused {label} #{i:02d} max_tokens={r['max_tokens']}: {message}", flush=True
                )
                continue
            counts["error"] += 1
            report(label, i, r, None, None, f"HTTP {e.code}: {detail[:300]}", "")
            continue
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            counts["error"] += 1
            report(label, i, r, None, None, f"no answer: {e}", "")
            continue
        kind, why = verdict(r, message, finish, used)
        counts[kind] += 1
        report(label, i, r, used, finish, why, json.dumps(message)[:300])
    counts["requests"] = n
    counts["seconds"] = round(time.time() - t0, 1)
    print(
        f"SUMMARY {label}: {n} requests, {counts['valid']} valid, {counts['refused']} refused "
        f"(max_tokens below the shortest call), {counts['cut']} cut at "
        f"max_tokens, {counts['no_call']} without a required call, {counts['invalid']} invalid, "
        f"{counts['error']} errors ({counts['seconds']} s)",
        flush=True,
    )
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base_url")
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label", default="llama-server")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--strict", action="store_true", help="fail unless every request is valid")
    args = ap.parse_args()
    counts = run(args.base_url, args.requests, args.seed, args.label, args.timeout)
    bad = counts["cut"] + counts["no_call"] + counts["invalid"] + counts["error"]
    return 1 if args.strict and bad else 0


if __name__ == "__main__":
    sys.exit(main())
