"""Helpers shared by the engine adapters: request specs, automaton caching, mask application."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Mapping, Optional, Union

from ._callmask import (
    CallmaskError,
    Caches,
    DialectError,
    Grammar,
    TokenAutomaton,
    ToolsError,
    Vocab,
)
from .bitmask import apply_token_bitmask_inplace

Spec = Union[str, Mapping[str, Any]]
"""A request's constraint: ``{"dialect": NAME_OR_PATH, "tools": [...]}``,
``{"json_schema": {...}}`` or ``{"structural_tag": {...}}`` (XGrammar's, both forms), as a dict
or JSON text, plus the options of that compile by their names in callmask's options types
(``DialectOptions`` with a dialect: ``tool_choice``, ``parallel_tool_calls``, ``reasoning``,
``max_text_chars``, ...; ``CompileOptions`` always: ``lenient``, ``max_whitespace``, ...; see
docs/library.md). The compile checks the options: an unknown one is a ``ToolsError``."""

_GRAMMAR_KEYS = ("dialect", "json_schema", "structural_tag")


def dialect_of_template(chat_template: Optional[str], vocab: Vocab) -> tuple:
    """The dialect of a model's chat template, as ``(name_or_path, note)``: the built-in one
    detection finds (``note`` None), else the path of a dialect file derived from the template
    (:func:`derived_dialect_file`) and a line saying so, for the adapter's log. ``DialectError``
    with both reasons when neither works."""
    try:
        return Grammar.detect_dialect(chat_template, vocab), None
    except DialectError as detect_error:
        if not chat_template:
            raise
        return derived_dialect_file(chat_template, vocab, detect_error)


def derived_dialect_file(template: str, vocab: Optional[Vocab], detect_error: Exception) -> tuple:
    """``(path, note)``: a dialect file derived from ``template``, written once per template
    under ``CALLMASK_DERIVED_DIR`` (default: ``callmask-derived`` in the temporary folder), and
    a line saying so; ``DialectError`` with both reasons when no layout callmask knows fits."""
    try:
        text, summary = Grammar.derive_dialect(template, vocab)
    except DialectError as e:
        raise DialectError(f"{detect_error}; and no dialect derives from it: {e}") from e
    folder = os.environ.get("CALLMASK_DERIVED_DIR") or os.path.join(
        tempfile.gettempdir(), "callmask-derived"
    )
    os.makedirs(folder, exist_ok=True)
    digest = hashlib.sha256(template.encode()).hexdigest()[:16]
    path = os.path.join(folder, f"derived-{digest}.gbnf")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    note = (
        f"callmask: no built-in dialect matches the chat template ({detect_error}); using a "
        f"dialect derived from it: {summary}; written to {path}"
    )
    return path, note


def normalize_spec(spec: Spec) -> dict:
    """The spec as a dict, checked for its shape (``ToolsError`` when malformed; its options
    are checked by the compile)."""
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except ValueError as e:
            raise ToolsError(f"callmask spec is not JSON: {e}") from None
    if not isinstance(spec, Mapping):
        raise ToolsError("callmask spec must be an object")
    spec = dict(spec)
    given = [k for k in _GRAMMAR_KEYS if k in spec]
    if len(given) != 1:
        raise ToolsError(
            "callmask spec needs one of `dialect` (with `tools`), `json_schema` or "
            f"`structural_tag`, not {given or 'none'}"
        )
    if given[0] == "dialect":
        if "tools" not in spec:
            raise ToolsError("callmask spec: a dialect needs `tools`")
    elif "tools" in spec:
        raise ToolsError(f"callmask spec: `tools` belongs with `dialect`, not `{given[0]}`")
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


def is_request_fault(e: BaseException) -> bool:
    """True when ``e`` is a callmask error that is the request's own fault (its ``fault`` is
    ``"request"``: a server answers HTTP 400; errors raised here in Python about a malformed
    spec are too), False for the server's own faults and for every other exception."""
    return isinstance(e, CallmaskError) and getattr(e, "fault", "request") == "request"


def error_param(e: BaseException) -> Optional[str]:
    """The part of the request a callmask error is about (``tools[f].parameters#/...``,
    ``tools``, ``max_tokens``), or None."""
    return getattr(e, "param", None)


def check_budget(automaton: TokenAutomaton, max_tokens: Optional[int]) -> None:
    """Admission check of a request's token budget: ``BudgetError`` (naming the budget and the
    tokens the shortest complete output needs) when no complete output fits in ``max_tokens``
    (end-of-generation token included), e.g. ``tool_choice: "required"`` with ``max_tokens: 2``.
    None: no budget, nothing to check."""
    if max_tokens is not None:
        automaton.matcher(max_tokens=int(max_tokens))


def grammar_from_spec(
    spec: Spec, vocab: Optional[Vocab] = None, caches: Optional[Caches] = None
) -> Grammar:
    """Compiles a request spec (see :data:`Spec`); ``vocab`` gives a structural tag the
    vocabulary's special tokens; compiled lexemes are kept in ``caches``, else in the
    vocabulary's."""
    options = normalize_spec(spec)
    if caches is None and vocab is not None:
        caches = vocab.caches
    if "json_schema" in options:
        return Grammar.from_json_schema(options.pop("json_schema"), caches=caches, **options)
    if "structural_tag" in options:
        tag = options.pop("structural_tag")
        return Grammar.from_structural_tag(tag, vocab, caches=caches, **options)
    name, tools = options.pop("dialect"), options.pop("tools")
    return Grammar.from_dialect(name, tools, caches=caches, **options)


class _SpecTextKeys:
    """Canonical keys of specs given as JSON text, by their text (least recently used dropped
    beyond ``size``): a server sees the same tool set's text on every request of a conversation,
    and parsing and re-serializing a hundred tools costs more than a step's mask."""

    def __init__(self, size: int = 256):
        self.size = size
        self._lock = threading.Lock()
        self._keys: "OrderedDict[Union[str, bytes], str]" = OrderedDict()

    def key(self, spec: Spec) -> str:
        """The canonical key of ``spec`` (its normalized JSON, keys sorted); ``ToolsError`` when
        it is malformed."""
        if not isinstance(spec, (str, bytes)):
            return json.dumps(normalize_spec(spec), sort_keys=True)
        with self._lock:
            key = self._keys.get(spec)
            if key is not None:
                self._keys.move_to_end(spec)
                return key
        key = json.dumps(normalize_spec(spec), sort_keys=True)
        with self._lock:
            self._keys[spec] = key
            while len(self._keys) > self.size:
                self._keys.popitem(last=False)
        return key


_SPEC_KEYS = _SpecTextKeys()


def spec_key(spec: Spec) -> str:
    """The canonical key of a request spec: equal for equal specs however they are written (a
    dict or JSON text, keys in any order); a spec's text seen before is not parsed again.
    ``ToolsError`` when the spec is malformed."""
    return _SPEC_KEYS.key(spec)


class AutomatonCache:
    """Automata by spec for one vocabulary (least recently used dropped beyond ``size``).
    Thread-safe; a spec asked for while it compiles waits for that compile instead of starting
    another (a batch of requests over a new tool set compiles it once). Compiles keep their
    lexemes in ``caches``, else in the vocabulary's."""

    def __init__(self, vocab: Vocab, size: int = 64, caches: Optional[Caches] = None):
        self.vocab = vocab
        self.caches = caches
        self.size = size
        self._lock = threading.Lock()
        self._cache: "OrderedDict[str, TokenAutomaton]" = OrderedDict()
        self._compiling: "dict[str, Future[TokenAutomaton]]" = {}

    def get(self, spec: Spec) -> TokenAutomaton:
        """The automaton of ``spec`` (compiled on first use; a compile error is raised to every
        caller that waited for it, and the next call tries again)."""
        key = spec_key(spec)
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
            a = TokenAutomaton(grammar_from_spec(spec, self.vocab, self.caches), self.vocab)
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
