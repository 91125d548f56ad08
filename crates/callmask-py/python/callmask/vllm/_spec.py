"""Where a vLLM request carries its callmask spec: ``SamplingParams.extra_args["callmask"]``
(a dict, or JSON text as the OpenAI server's flat ``vllm_xargs`` values are)."""

from __future__ import annotations

from typing import Any, Optional

from .._callmask import Caches
from .._common import Spec, error_param, is_request_fault, normalize_spec

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


def client_error(e: BaseException) -> Exception:
    """The exception vLLM's OpenAI server answers with HTTP 400 for a callmask error that is
    the request's own fault (:func:`callmask._common.is_request_fault`): vLLM's
    ``VLLMValidationError`` with ``param`` naming the tool and schema path (a ``ValueError``
    where vLLM has no such class), its message callmask's. Other errors are returned as they
    are (HTTP 500: the server's own fault)."""
    if not is_request_fault(e):
        return e  # type: ignore[return-value]
    message = f"callmask: {e}"
    try:  # pragma: no cover - depends on vLLM being installed
        from vllm.exceptions import VLLMValidationError

        return VLLMValidationError(message, parameter=error_param(e))
    except ImportError:
        return ValueError(message)
