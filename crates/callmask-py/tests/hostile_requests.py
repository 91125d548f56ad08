"""Hostile OpenAI chat requests with tools: each is the request's own fault, and a server with
callmask must refuse it at admission with HTTP 400 whose message names the cause (and, where
the server passes it on, ``param`` naming the tool and schema path).

Shared by ``test_vllm.py`` (through vLLM's tool parser and logits processor, in process) and
``scripts/engines/openai_load.py`` (over HTTP, vLLM's OpenAI server and llama-server).
"""

from __future__ import annotations

from typing import Any, Optional


def one_tool(a: Any, name: str = "f") -> list:
    """One OpenAI tool ``name`` whose one required parameter ``a`` has the schema ``a``."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": "a tool",
                "parameters": {"type": "object", "properties": {"a": a}, "required": ["a"]},
            },
        }
    ]


def nested(depth: int) -> dict:
    """A string parameter nested ``depth`` objects deep."""
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


PARAM_A = "tools[f].parameters#/properties/a"


def case(
    name: str,
    tools: list,
    says: list,
    param: Optional[str],
    tool_choice: Any = "auto",
    max_tokens: int = 64,
) -> dict:
    return {
        "name": name,
        "tools": tools,
        "tool_choice": tool_choice,
        "max_tokens": max_tokens,
        "says": says,
        "param": param,
    }


HOSTILE = [
    case("unknown type", one_tool({"type": "strng"}), ["strng"], PARAM_A),
    case("missing $ref", one_tool({"$ref": "#/$defs/missing"}), ["#/$defs/missing"], PARAM_A),
    case(
        "malformed pattern",
        one_tool({"type": "string", "pattern": "([a-z"}),
        ['"([a-z"', "unclosed character class"],
        PARAM_A,
    ),
    case(
        "lookahead",
        one_tool({"type": "string", "pattern": "^(?=.*[0-9]).{8,}$"}),
        ["lookaround is not supported", "(?="],
        PARAM_A,
    ),
    case(
        "huge repetition",
        one_tool({"type": "string", "pattern": "^(a|b|c){1,100000}$"}),
        ["states in one lexeme automaton", "max_lexeme_states"],
        PARAM_A,
    ),
    case(
        "300 objects deep",
        one_tool(nested(300)),
        ["JSON nesting depth"],
        "tools",
    ),
    case(
        "required, max_tokens 2",
        one_tool({"type": "string"}),
        ["budget of 2 tokens is too small", "needs"],
        "max_tokens",
        tool_choice="required",
        max_tokens=2,
    ),
    case(
        "named, max_tokens 3",
        one_tool({"type": "integer"}),
        ["budget of 3 tokens is too small"],
        "max_tokens",
        tool_choice={"type": "function", "function": {"name": "f"}},
        max_tokens=3,
    ),
    case(
        "unsupported keyword",
        one_tool({"type": "object", "$recursiveRef": "#"}),
        ["$recursiveRef"],
        PARAM_A,
    ),
]
"""The hostile requests: ``tools``, ``tool_choice``, ``max_tokens``, what the refusal's
message must contain (``says``) and the ``param`` it names."""


def big_enum(n: int = 5000, tag: str = "") -> list:
    """A valid but costly tool: one parameter with an ``n``-value enum (``tag`` makes each
    tool set distinct, so no compile cache serves it)."""
    return one_tool({"type": "string", "enum": [f"{tag}{i:04d}" for i in range(n)]}, "pick")


def many_tools(n: int = 300, tag: str = "") -> list:
    """A valid but costly tool set: ``n`` tools with a few parameters each."""
    return [
        {
            "type": "function",
            "function": {
                "name": f"tool_{tag}{i}",
                "description": f"tool number {i}",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer", "minimum": 0},
                        "label": {"type": "string", "maxLength": 20},
                        "mode": {"enum": ["a", "b", "c"]},
                    },
                    "required": ["id"],
                },
            },
        }
        for i in range(n)
    ]
