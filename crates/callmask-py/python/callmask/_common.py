"""Helpers shared by the engine adapters: request specs, automaton caching, mask application."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Mapping, Optional, Union

from ._callmask import Grammar, TokenAutomaton, ToolsError, Vocab
from .bitmask import apply_token_bitmask_inplace

Spec = Union[str, Mapping[str, Any]]
"""A request's constraint: ``{"dialect": NAME_OR_PATH, "tools": [...], "tool_choice": ...,
"parallel_tool_calls": bool, "reasoning": ..., "max_text_chars": int}``,
``{"json_schema": {...}}`` or ``{"structural_tag": {...}}`` (XGrammar's, both forms), plus
``"lenient": bool``, as a dict or JSON text."""

_DIALECT_KEYS = {
    "dialect",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
    "max_text_chars",
    "lenient",
}
_SCHEMA_KEYS = {"json_schema", "lenient"}
_TAG_KEYS = {"structural_tag", "lenient"}


def normalize_spec(spec: Spec) -> dict:
    """The spec as a dict, checked for its keys (``ToolsError`` when malformed)."""
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except ValueError as e:
            raise ToolsError(f"callmask spec is not JSON: {e}") from None
    if not isinstance(spec, Mapping):
        raise ToolsError("callmask spec must be an object")
    spec = dict(spec)
    if "json_schema" in spec:
        unknown = set(spec) - _SCHEMA_KEYS
    elif "structural_tag" in spec:
        unknown = set(spec) - _TAG_KEYS
    elif "dialect" in spec:
        if "tools" not in spec:
            raise ToolsError("callmask spec: a dialect needs `tools`")
        unknown = set(spec) - _DIALECT_KEYS
    else:
        raise ToolsError(
            "callmask spec needs `dialect` (with `tools`), `json_schema` or `structural_tag`"
        )
    if unknown:
        raise ToolsError(f"callmask spec: unknown keys {sorted(unknown)}")
    return spec


def spec_of_structural_tag(text: str) -> dict:
    """The spec of an engine's structural-tag request: a callmask spec given there as JSON
    text (``{"dialect": ...}`` or ``{"json_schema": ...}``), else XGrammar's structural tag
    (both forms) as ``{"structural_tag": tag}``."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ToolsError(f"structural tag is not JSON: {e}") from None
    if isinstance(data, Mapping) and ("dialect" in data or "json_schema" in data):
        return normalize_spec(data)
    return {"structural_tag": data}


def grammar_from_spec(spec: Spec, vocab: Optional[Vocab] = None) -> Grammar:
    """Compiles a request spec (see :data:`Spec`); ``vocab`` gives a structural tag the
    vocabulary's special tokens."""
    spec = normalize_spec(spec)
    lenient = bool(spec.get("lenient", False))
    if "json_schema" in spec:
        return Grammar.from_json_schema(spec["json_schema"], lenient=lenient)
    if "structural_tag" in spec:
        return Grammar.from_structural_tag(spec["structural_tag"], vocab, lenient=lenient)
    reasoning = spec.get("reasoning")
    if isinstance(reasoning, list):
        reasoning = tuple(reasoning)
    return Grammar.from_dialect(
        spec["dialect"],
        spec["tools"],
        tool_choice=spec.get("tool_choice", "auto"),
        parallel_tool_calls=bool(spec.get("parallel_tool_calls", True)),
        reasoning=reasoning,
        max_text_chars=spec.get("max_text_chars"),
        lenient=lenient,
    )


class AutomatonCache:
    """Automata by spec for one vocabulary (least recently used dropped beyond ``size``).
    Thread-safe; a spec asked for while it compiles waits for that compile instead of starting
    another (a batch of requests over a new tool set compiles it once)."""

    def __init__(self, vocab: Vocab, size: int = 64):
        self.vocab = vocab
        self.size = size
        self._lock = threading.Lock()
        self._cache: "OrderedDict[str, TokenAutomaton]" = OrderedDict()
        self._compiling: "dict[str, Future[TokenAutomaton]]" = {}

    def get(self, spec: Spec) -> TokenAutomaton:
        """The automaton of ``spec`` (compiled on first use; a compile error is raised to every
        caller that waited for it, and the next call tries again)."""
        key = json.dumps(normalize_spec(spec), sort_keys=True)
        with self._lock:
            a = self._cache.get(key)
            if a is not None:
                self._cache.move_to_end(key)
                return a
            pending = self._compiling.get(key)
            owner = pending is None
            if pending is None:
                pending = self._compiling[key] = Future()
        if not owner:
            return pending.result()
        try:
            a = TokenAutomaton(grammar_from_spec(spec, self.vocab), self.vocab)
        except BaseException as e:
            with self._lock:
                del self._compiling[key]
            pending.set_exception(e)
            raise
        with self._lock:
            del self._compiling[key]
            self._cache[key] = a
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        pending.set_result(a)
        return a


def apply_bitmask(logits: Any, bitmask: Any, rows: Optional[list] = None) -> Any:
    """Sets the logits of disallowed tokens to -inf, in place (see
    :func:`callmask.bitmask.apply_token_bitmask_inplace`): one bitmask row per logits row, or
    with ``rows`` bitmask row ``k`` for logits row ``rows[k]``. Returns ``logits``."""
    if rows is None:
        return apply_token_bitmask_inplace(logits, bitmask)
    return apply_token_bitmask_inplace(logits, bitmask, rows, bitmask_rows=range(len(rows)))
