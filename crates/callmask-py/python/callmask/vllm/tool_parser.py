"""callmask as a vLLM tool parser: an ordinary OpenAI chat request with ``tools`` and
``tool_choice`` is constrained by the model's dialect and answered with ``tool_calls``.

::

    vllm serve MODEL \\
        --logits-processors callmask.vllm:CallmaskLogitsProcessor \\
        --tool-parser-plugin "$(python -m callmask.vllm --plugin-path)" \\
        --tool-call-parser callmask --enable-auto-tool-choice

``--tool-call-parser callmask`` detects the dialect from the model's chat template
(:meth:`callmask.Grammar.detect_dialect`); where no built-in dialect matches, it derives one
from the template (:meth:`callmask.Grammar.derive_dialect`), writes it to a file under
``CALLMASK_DERIVED_DIR`` (default: a ``callmask-derived`` folder in the system's temporary
folder) and says so in vLLM's log. ``callmask_<dialect>`` (e.g. ``callmask_hermes``) names the
dialect, and so does the ``CALLMASK_DIALECT`` environment variable (a name or a file path).

What it does per request (vLLM's ``ToolParser`` plugin interface,
``vllm/tool_parsers/abstract_tool_parser.py``):

- ``adjust_request``: for a request with tools and ``tool_choice`` auto, required or named
  (string or object form), puts the callmask spec (dialect, tools, tool_choice,
  ``parallel_tool_calls``) into the request's ``vllm_xargs``, which vLLM hands to the logits
  processor as ``SamplingParams.extra_args``; keeps special tokens in the text (dialect markers
  may be special tokens). It adds **no** structured-output constraint of vLLM's own: the class
  says ``supports_required_and_named = False``, so vLLM neither adds its JSON-array constraint
  for required/named (which would fight the dialect) nor parses the output as that JSON, and
  sends every tool choice through this parser's extraction. ``tool_choice: "none"`` is left
  unconstrained, as vLLM does.
- ``extract_tool_calls``: the whole output parsed by the same grammar (``Grammar.parse``);
  an output that is not one (a request that was not constrained, or failed) is read by the
  recovering parse (``recover=True``), and what that cannot read comes back as plain content.
- ``extract_tool_calls_streaming``: callmask's incremental parser: content, then each call's
  name and argument deltas as soon as they are certain; whatever the stream parser still
  withholds when the output ends is flushed through vLLM's ``get_remaining_unstreamed_args``.

Trade-off: the parser compiles the request's grammar (without a vocabulary: the text-level
grammar, a fraction of a millisecond to milliseconds) in the API server process, once per
request, in addition to the engine's token-level compile.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional, Sequence

from .._callmask import CallmaskError, DialectError, Grammar, StreamParser, Vocab
from .._common import AutomatonCache, check_budget, grammar_from_spec
from .._common import derived_dialect_file as _derived_dialect_file
from ._constraint import logger
from ._spec import COMPILE_CACHES, EXTRA_ARGS_KEY, client_error

try:  # pragma: no cover - depends on vLLM being installed
    from vllm.entrypoints.generate.base.protocol import (
        DeltaFunctionCall,
        DeltaMessage,
        DeltaToolCall,
        ExtractedToolCallInformation,
        FunctionCall,
        ToolCall,
    )
    from vllm.tool_parsers.abstract_tool_parser import ToolParser, ToolParserManager

    HAS_VLLM = True
except Exception:  # vLLM absent: the module still imports (documentation, tests)
    ToolParser = object  # type: ignore[assignment,misc,no-redef]
    ToolParserManager = None  # type: ignore[assignment,misc]
    HAS_VLLM = False

PARSER_NAME = "callmask"
"""The tool-call parser name that detects the dialect from the chat template."""

_DETECTED: dict = {}


def _dump(obj: Any) -> Any:
    """A pydantic model (vLLM's request fields) as plain JSON data."""
    if hasattr(obj, "model_dump"):
        return obj.model_dump(exclude_none=True)
    return obj


def request_tool_choice(request: Any) -> Any:
    """The request's ``tool_choice`` as callmask takes it: ``"auto"``, ``"required"``,
    ``"none"``, or ``{"type": "function", "function": {"name": ...}}``."""
    tc = getattr(request, "tool_choice", None)
    if tc is None:
        return "auto"
    if isinstance(tc, str):
        return tc
    data = _dump(tc)
    name = (data.get("function") or {}).get("name") or data.get("name")
    if not name:
        raise ValueError(f"callmask: unsupported tool_choice {data!r}")
    return {"type": "function", "function": {"name": name}}


def detect_dialect(tokenizer: Any) -> str:
    """The dialect of the served model: ``CALLMASK_DIALECT``, else detected from the
    tokenizer's chat template (memoized per tokenizer)."""
    named = os.environ.get("CALLMASK_DIALECT")
    if named:
        return named
    key = id(tokenizer)
    found = _DETECTED.get(key)
    if found is None:
        template = getattr(tokenizer, "chat_template", None)
        if isinstance(template, dict):  # several named templates: the tool-use one first
            template = template.get("tool_use") or template.get("default")
        vocab = Vocab.from_hf(tokenizer)
        try:
            found = Grammar.detect_dialect(template, vocab)
        except DialectError as detect_error:
            if not template:
                raise
            found = derived_dialect_file(template, vocab, detect_error)
        _DETECTED[key] = found
    return found


def derived_dialect_file(template: str, vocab: Vocab, detect_error: Exception) -> str:
    """The path of a dialect file derived from ``template``
    (:func:`callmask._common.derived_dialect_file`), logged to vLLM's log and callmask's."""
    path, note = _derived_dialect_file(template, vocab, detect_error)
    logger.warning("%s", note)
    return path


ADMISSION_AUTOMATA: dict = {}
"""Per served tokenizer (by id), the :class:`callmask._common.AutomatonCache` that the
admission check of ``required`` and named requests compiles into."""


def admission_automata(tokenizer: Any) -> AutomatonCache:
    """The admission check's automaton cache for ``tokenizer`` (its vocabulary read once)."""
    key = id(tokenizer)
    cache = ADMISSION_AUTOMATA.get(key)
    if cache is None:
        cache = AutomatonCache(Vocab.from_hf(tokenizer), size=32, caches=COMPILE_CACHES)
        ADMISSION_AUTOMATA[key] = cache
    return cache


class CallmaskToolParser(ToolParser):  # type: ignore[misc,valid-type]
    """vLLM tool parser over callmask (see the module doc). ``dialect`` None: detected."""

    dialect: Optional[str] = None
    supports_required_and_named = False
    structural_tag_model = None

    def __init__(self, tokenizer: Any, tools: Optional[list] = None, *args: Any, **kwargs: Any):
        if HAS_VLLM:
            super().__init__(tokenizer, tools)
        else:  # the attributes vLLM's base class keeps
            self.model_tokenizer = tokenizer
            self.prev_tool_call_arr: list = []
            self.streamed_args_for_tool: list = []
            self.current_tool_id = -1
        self._dialect = self.dialect or detect_dialect(tokenizer)
        self._grammar: Optional[Grammar] = None
        self._stream: Optional[StreamParser] = None
        self._stream_failed = False

    # -- the request -------------------------------------------------------------------------

    def spec_for(self, request: Any) -> Optional[dict]:
        """The callmask spec of a chat request, or None when it is left unconstrained (no
        tools, or ``tool_choice: "none"``)."""
        tools = getattr(request, "tools", None)
        if not tools:
            return None
        choice = request_tool_choice(request)
        if choice == "none":
            return None
        parallel = getattr(request, "parallel_tool_calls", None)
        return {
            "dialect": self._dialect,
            "tools": [_dump(t) for t in tools],
            "tool_choice": choice,
            "parallel_tool_calls": True if parallel is None else bool(parallel),
        }

    def adjust_request(self, request: Any) -> Any:
        """Constrains a tool request with callmask (see the module doc). Refuses, with HTTP 400
        naming the cause (:func:`callmask.vllm._spec.client_error`), tools that do not compile
        and a ``required`` or named ``tool_choice`` whose ``max_tokens`` is below the tokens of
        the shortest call (:meth:`admission_check`)."""
        try:
            spec = self.spec_for(request)
            if spec is None:
                return request
            self._grammar = grammar_from_spec(spec, caches=COMPILE_CACHES)
            self.admission_check(spec, request)
        except Exception as e:
            raise client_error(e) from e
        xargs = dict(getattr(request, "vllm_xargs", None) or {})
        xargs[EXTRA_ARGS_KEY] = json.dumps(spec)
        request.vllm_xargs = xargs
        if hasattr(request, "skip_special_tokens"):
            request.skip_special_tokens = False
        return request

    def admission_check(self, spec: dict, request: Any) -> None:
        """``BudgetError`` when the request demands a call (``tool_choice`` required or named)
        and its ``max_tokens`` (or ``max_completion_tokens``) leaves no room for the shortest
        one, end-of-generation token included: vLLM would otherwise answer HTTP 200 with no
        call. Compiles the tool set over the served vocabulary in this process (cached by
        spec, :data:`ADMISSION_AUTOMATA`); requests without a budget or with ``auto`` are not
        compiled here."""
        if spec["tool_choice"] == "auto":
            return
        budget = getattr(request, "max_completion_tokens", None)
        if budget is None:
            budget = getattr(request, "max_tokens", None)
        if budget is None:
            return
        check_budget(admission_automata(self.model_tokenizer).get(spec), budget)

    def _grammar_for(self, request: Any) -> Optional[Grammar]:
        if self._grammar is None:
            spec = self.spec_for(request)
            if spec is not None:
                self._grammar = grammar_from_spec(spec, caches=COMPILE_CACHES)
        return self._grammar

    # -- whole outputs -----------------------------------------------------------------------

    def extract_tool_calls(self, model_output: str, request: Any) -> Any:
        """The calls of a whole output. An output the request's grammar refuses (one that was
        not constrained) is read by the recovering parse, as ``callmask parse --recover`` reads
        it: what it cannot read is plain content."""
        grammar = self._grammar_for(request)
        message = None
        if grammar is not None:
            try:
                message = grammar.parse(model_output)
            except CallmaskError:
                try:
                    message = grammar.parse(model_output, recover=True)
                except CallmaskError:
                    message = None
        if not message or not message["tool_calls"]:
            content = message["content"] if message else model_output
            return ExtractedToolCallInformation(tools_called=False, tool_calls=[], content=content)
        calls = [
            ToolCall(
                id=c["id"],
                function=FunctionCall(
                    name=c["function"]["name"], arguments=c["function"]["arguments"]
                ),
            )
            for c in message["tool_calls"]
        ]
        return ExtractedToolCallInformation(
            tools_called=True, tool_calls=calls, content=message["content"]
        )

    # -- streaming ---------------------------------------------------------------------------

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> Any:
        """One streamed chunk: the content and call deltas now certain (None if nothing)."""
        grammar = self._grammar_for(request)
        if grammar is None or self._stream_failed:
            return DeltaMessage(content=delta_text) if delta_text else None
        if self._stream is None:
            self._stream = StreamParser(grammar)
        try:
            deltas = self._stream.push(delta_text)
        except CallmaskError:
            # Not an output of the grammar (the request failed): the rest streams as content.
            self._stream_failed = True
            return DeltaMessage(content=delta_text) if delta_text else None
        self._note_complete(grammar, current_text)
        return self._message(deltas)

    def _message(self, deltas: list) -> Any:
        content: list = []
        calls: list = []
        for d in deltas:
            if "content" in d:
                content.append(d["content"])
            elif "reasoning_content" in d:
                content.append(d["reasoning_content"])  # vLLM's reasoning parser owns reasoning
            for c in d.get("tool_calls", []):
                calls.append(self._call_delta(c))
        if not content and not calls:
            return None
        return DeltaMessage(content="".join(content) or None, tool_calls=calls)

    def _call_delta(self, c: dict) -> Any:
        index = c["index"]
        f = c.get("function", {})
        while len(self.prev_tool_call_arr) <= index:
            self.prev_tool_call_arr.append({"name": None, "arguments": ""})
            self.streamed_args_for_tool.append("")
        if "name" in f:
            self.prev_tool_call_arr[index]["name"] = f["name"]
            self.current_tool_id = index
        args = f.get("arguments") or ""
        self.streamed_args_for_tool[index] += args
        if len(self.prev_tool_call_arr[index]["arguments"]) < len(
            self.streamed_args_for_tool[index]
        ):
            self.prev_tool_call_arr[index]["arguments"] = self.streamed_args_for_tool[index]
        return DeltaToolCall(
            index=index,
            id=c.get("id"),
            type=c.get("type"),
            function=DeltaFunctionCall(name=f.get("name"), arguments=args),
        )

    def _note_complete(self, grammar: Grammar, text: str) -> None:
        """Where the text so far is a complete output, records each call's whole arguments, so
        that vLLM flushes what the stream parser still withholds when the output ends."""
        if grammar.check(text) is not None:
            return
        try:
            calls = grammar.parse(text)["tool_calls"]
        except CallmaskError:
            return
        for i, c in enumerate(calls[: len(self.prev_tool_call_arr)]):
            self.prev_tool_call_arr[i]["arguments"] = c["function"]["arguments"]


def _dialect_parser(name: str) -> type:
    cls = type(
        f"CallmaskToolParser_{name}",
        (CallmaskToolParser,),
        {"dialect": name, "__doc__": f"callmask's tool parser for the {name} dialect."},
    )
    return cls


def register() -> list:
    """Registers ``callmask`` and ``callmask_<dialect>`` for every built-in dialect with vLLM's
    ``ToolParserManager``; returns the names."""
    if ToolParserManager is None:
        raise ImportError("callmask.vllm.register: vLLM is not installed")
    names = [PARSER_NAME]
    ToolParserManager.register_module(PARSER_NAME, force=True, module=CallmaskToolParser)
    for d in Grammar.builtin_dialects():
        name = f"{PARSER_NAME}_{d}"
        ToolParserManager.register_module(name, force=True, module=_dialect_parser(d))
        names.append(name)
    return names
