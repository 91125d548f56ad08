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

from openai_e2e import chat_body, check_calls, plan, post_chat, report, standard

CHOICES = ("required", "named", "auto", "none")
BUDGETS = (48, 64, 100, 200)


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


def standard_tools(tools: list) -> list:
    """The tools with their parameters in standard JSON Schema types (the held-out-style sets
    use BFCL's type aliases such as ``dict``, which llama.cpp's own grammar builder refuses)."""
    out = []
    for t in tools:
        f = dict(t["function"])
        f["parameters"] = standard(f.get("parameters") or {"type": "object"})
        out.append({**t, "function": f})
    return out


def run(base: str, n: int, seed: int, label: str, timeout: float, std: bool = False) -> dict:
    counts: dict = {"valid": 0, "refused": 0, "cut": 0, "no_call": 0, "invalid": 0, "error": 0}
    t0 = time.time()
    for i, r in enumerate(plan(n, seed, choices=CHOICES, budgets=BUDGETS)):
        if std:
            r["tools"] = standard_tools(r["tools"])
        body = chat_body(r, seed + i)
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


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def post(base: str, path: str, body: dict) -> tuple:
    """(HTTP status, JSON body) of a POST."""
    req = urllib.request.Request(
        f"{base}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def callmask_checks(base: str) -> int:
    """The rest of the callmask server's contract: a ``%callmask`` JSON Schema grammar on
    ``/completion``, a chat request without tools left to llama.cpp, typed 400s for a bad tool
    schema and for a named tool that is not in the list, the dialect in ``/props``. Returns how
    many failed."""
    import jsonschema

    failed = 0

    def check(name: str, why: str | None) -> None:
        nonlocal failed
        failed += why is not None
        print(
            f"{'ok  ' if why is None else 'FAIL'} check {name}{'' if why is None else ' -> ' + why}"
        )

    grammar = "%callmask " + json.dumps({"json_schema": PERSON})
    code, data = post(
        base, "/completion", {"prompt": "A person as JSON:", "n_predict": 40, "grammar": grammar}
    )
    why = None
    if code != 200:
        why = f"HTTP {code}: {data}"
    elif data.get("stop_type") != "eos" or data.get("tokens_predicted", 99) > 40:
        why = f"stop_type {data.get('stop_type')}, {data.get('tokens_predicted')} tokens"
    else:
        try:
            jsonschema.validate(json.loads(data["content"]), PERSON)
        except (ValueError, jsonschema.ValidationError) as e:
            why = f"content {data['content']!r}: {e}"
    check("%callmask json_schema grammar on /completion", why)

    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    code, data = post(base, "/v1/chat/completions", body)
    msg = data.get("choices", [{}])[0].get("message", {}) if code == 200 else {}
    check(
        "chat without tools left to llama.cpp",
        None if code == 200 and not msg.get("tool_calls") else f"HTTP {code}: {data}",
    )

    bad = json.loads(json.dumps(WEATHER_TOOL))
    bad["function"]["parameters"]["properties"]["city"]["type"] = "strin"
    code, data = post(base, "/v1/chat/completions", dict(body, max_tokens=64, tools=[bad]))
    text = json.dumps(data)
    check(
        "invalid tool schema -> 400 naming it",
        None
        if code == 400 and "callmask (schema)" in text and "strin" in text
        else f"{code} {text[:200]}",
    )

    named = {"type": "function", "function": {"name": "no_such_tool"}}
    code, data = post(
        base,
        "/v1/chat/completions",
        dict(body, max_tokens=64, tools=[WEATHER_TOOL], tool_choice=named),
    )
    text = json.dumps(data)
    check(
        "named tool_choice not in tools -> 400",
        None if code == 400 and "no_such_tool" in text else f"{code} {text[:200]}",
    )

    with urllib.request.urlopen(f"{base}/props", timeout=30) as resp:
        props = json.loads(resp.read())
    dialect = props.get("callmask_dialect")
    check("/props names the dialect", None if dialect else f"callmask_dialect {dialect!r}")
    return failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base_url")
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label", default="llama-server")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--strict", action="store_true", help="fail unless every request is valid")
    ap.add_argument(
        "--callmask-checks",
        action="store_true",
        help="also check the callmask server's %%callmask grammars, errors and /props",
    )
    ap.add_argument(
        "--standard-types",
        action="store_true",
        help="send the tools' schemas with standard JSON Schema types instead of BFCL's aliases",
    )
    args = ap.parse_args()
    counts = run(
        args.base_url, args.requests, args.seed, args.label, args.timeout, args.standard_types
    )
    bad = counts["cut"] + counts["no_call"] + counts["invalid"] + counts["error"]
    if args.callmask_checks:
        bad += callmask_checks(args.base_url)
    return 1 if args.strict and bad else 0


if __name__ == "__main__":
    sys.exit(main())
