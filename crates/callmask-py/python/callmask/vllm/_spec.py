"""Where a vLLM request carries its callmask spec: ``SamplingParams.extra_args["callmask"]``
(a dict, or JSON text as the OpenAI server's flat ``vllm_xargs`` values are)."""

from __future__ import annotations

from typing import Any, Optional

from .._callmask import Caches
from .._common import Spec, normalize_spec

COMPILE_CACHES = Caches()
"""Where this vLLM's callmask compiles keep their lexemes: the tool parser and
``validate_params`` (API server) and the logits processor (engine) compile into it, so a spec
compiled once is compiled again from its cached lexemes where they share a process."""

EXTRA_ARGS_KEY = "callmask"
"""The key of a request's callmask spec in ``SamplingParams.extra_args``."""


def request_spec(params: Any) -> Optional[dict]:
    """The request's spec (checked), or None for a request callmask leaves alone."""
    spec = given_spec(params)
    return None if spec is None else normalize_spec(spec)


def given_spec(params: Any) -> Optional[Spec]:
    """The request's spec as given (a dict or JSON text, not checked yet: the adapters key their
    caches by it through :func:`callmask._common.spec_key`, which checks it), or None."""
    extra = getattr(params, "extra_args", None) or {}
    return extra.get(EXTRA_ARGS_KEY)
