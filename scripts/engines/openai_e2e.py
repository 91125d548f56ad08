"""What the engine end-to-end scripts share: the request plan (tool sets, ``tool_choice``,
``parallel_tool_calls``, budgets, streaming), the checks of an OpenAI chat response's calls
against the tools' JSON Schemas, the accumulation of a streamed response, and the report line.

Used by ``vllm_e2e.py`` and ``llama_server_e2e.py``.
"""

from __future__ import annotations

import json
import pathlib
import random
import sys
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOLS = ROOT / "examples" / "tools"
sys.path.insert(0, str(ROOT / "crates" / "callmask-py" / "tests"))
from conftest import standard  # the tools' type aliases as JSON Schema types

BUDGETS = [40, 64, 100, 200]
MESSAGES = [
    "What's the weather in Paris, in celsius?",
    "Book me a flight to Tokyo and remind me tomorrow.",
    "How much is AAPL trading at?",
    "Tell me a joke, and the time in UTC.",
]
TOOL_SETS = ["weather.json", "travel.json", "mixed.json"]


def load_tools(name: str) -> list:
    data = json.loads((TOOLS / name).read_text())
    return data["tools"] if isinstance(data, dict) else data


def schema_of(tools: list, name: str) -> dict:
    for t in tools:
        f = t.get("function", t)
        if f["name"] == name:
            return f.get("parameters") or {"type": "object", "properties": {}}
    raise KeyError(name)


def plan(
    n: int,
    seed: int,
    choices: tuple = ("required", "named", "auto", "required"),
    budgets: tuple = tuple(BUDGETS),
) -> list:
    """``n`` requests cycling through tool sets, tool choices (``"named"``: OpenAI's object form
    naming a random tool of the set) and budgets; every other one streamed."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        tools = load_tools(TOOL_SETS[i % len(TOOL_SETS)])
        choice: Any = choices[i % len(choices)]
        if choice == "named":
            f = tools[rng.randrange(len(tools))].get("function")
            choice = {"type": "function", "function": {"name": f["name"]}}
        out.append(
            {
                "tools": tools,
                "tool_choice": choice,
                "parallel_tool_calls": i % 3 != 2,
                "max_tokens": budgets[i % len(budgets)],
                "message": MESSAGES[i % len(MESSAGES)],
                "stream": i % 2 == 1,
            }
        )
    return out


def chat_body(r: dict, seed: int) -> dict:
    """The OpenAI chat request of a planned request ``r`` (sampling seed ``seed``)."""
    body = {
        "messages": [{"role": "user", "content": r["message"]}],
        "tools": r["tools"],
        "tool_choice": r["tool_choice"],
        "parallel_tool_calls": r["parallel_tool_calls"],
        "max_tokens": r["max_tokens"],
        "temperature": 1.0,
        "seed": seed,
        "stream": r["stream"],
    }
    if r["stream"]:
        body["stream_options"] = {"include_usage": True}
    return body


def post_chat(base: str, body: dict, timeout: float) -> tuple:
    """The message, finish reason and completion tokens of one chat request (streamed or not)."""
    import urllib.request

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


def check_calls(req: dict, calls: list) -> str | None:
    """None when the calls are what the request allows (a call where tool_choice demands one,
    only the named function, one call without parallel calls, no call repeated: callmask ends
    the list where one would repeat, arguments valid against the schema), else why not."""
    import jsonschema

    choice = req["tool_choice"]
    if (choice == "required" or isinstance(choice, dict)) and not calls:
        return "no call although tool_choice requires one"
    if choice == "none" and calls:
        return f"{len(calls)} calls with tool_choice none"
    if not req["parallel_tool_calls"] and len(calls) > 1:
        return f"{len(calls)} calls with parallel_tool_calls false"
    seen = []
    for c in calls:
        try:
            key = (c["function"]["name"], json.loads(c["function"]["arguments"]))
        except ValueError:
            key = (c["function"]["name"], c["function"]["arguments"])
        if key in seen:
            return f"a repeated call of {key[0]} (callmask's default ends the list there)"
        seen.append(key)
    for c in calls:
        name = c["function"]["name"]
        if isinstance(choice, dict) and name != choice["function"]["name"]:
            return f"called {name}, not the named {choice['function']['name']}"
        try:
            args = json.loads(c["function"]["arguments"])
            jsonschema.validate(args, standard(schema_of(req["tools"], name)))
        except (ValueError, KeyError, jsonschema.ValidationError) as e:
            return f"{name}: arguments invalid: {e}"
    return None


def collect_stream(raw: str) -> tuple:
    """The message, finish reason and completion tokens of an SSE chat stream (deltas
    accumulated as OpenAI's clients do)."""
    content: list = []
    calls: dict = {}
    finish, used = None, None
    for line in raw.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("usage"):
            used = chunk["usage"]["completion_tokens"]
        for ch in chunk.get("choices", []):
            d = ch.get("delta", {})
            if d.get("content"):
                content.append(d["content"])
            for tc in d.get("tool_calls") or []:
                c = calls.setdefault(
                    tc["index"], {"id": None, "function": {"name": "", "arguments": ""}}
                )
                c["id"] = c["id"] or tc.get("id")
                f = tc.get("function") or {}
                c["function"]["name"] += f.get("name") or ""
                c["function"]["arguments"] += f.get("arguments") or ""
            finish = ch.get("finish_reason") or finish
    message = {"content": "".join(content) or None, "tool_calls": [calls[k] for k in sorted(calls)]}
    return message, finish, used


def report(mode: str, i: int, r: dict, used: Any, finish: Any, why: str | None, text: str) -> bool:
    choice = r["tool_choice"]
    choice = choice["function"]["name"] if isinstance(choice, dict) else choice
    status = "ok  " if why is None else "FAIL"
    print(
        f"{status} {mode} #{i:02d} tool_choice={choice:<22} max_tokens={r['max_tokens']:<4} "
        f"used={used} finish={finish}{'' if why is None else '  -> ' + why}",
        flush=True,
    )
    if why is not None:
        print(f"     output: {text[:400]!r}", flush=True)
    return why is None
