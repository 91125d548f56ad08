"""callmask for vLLM (v1 engine; written against vLLM 0.10-0.11's interfaces:
``vllm/v1/sample/logits_processor/interface.py`` and
``vllm/v1/structured_output/backend_types.py``).

**Logits processor** (vLLM's public extension point)::

    vllm serve MODEL --logits-processors callmask.vllm:CallmaskLogitsProcessor

and per request, in ``SamplingParams.extra_args`` (the OpenAI server's ``vllm_xargs``; a JSON
string is accepted there, as ``vllm_xargs`` values are flat)::

    SamplingParams(max_tokens=256, extra_args={"callmask": {
        "dialect": "hermes", "tools": tools, "tool_choice": "required"}})
    # or {"callmask": {"json_schema": {...}}}

Requests without ``"callmask"`` are left alone. The vocabulary is read from the model's
tokenizer (vLLM's tokenizer when vLLM is importable, else ``tokenizer.json`` in the tokenizer
directory); automata are cached per spec.

**Structured-output grammar**: :class:`CallmaskGrammar` / :class:`CallmaskBackend` implement
``StructuredOutputGrammar`` / ``StructuredOutputBackend`` (``accept_tokens``,
``validate_tokens``, ``rollback``, ``fill_bitmask``, ``is_terminated``, ``reset``). vLLM has no
registry for third-party structured-output backends (its manager picks among its own by name),
so these classes are not installed into vLLM automatically; they follow the exact call sequence
of vLLM's scheduler (fill a row, accept each draft token temporarily, fill the next row, roll
back) and can be wired in by a fork or a future registry.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from ._callmask import Grammar, Matcher, TokenAutomaton, Vocab, fill_bitmasks
from ._common import AutomatonCache, apply_bitmask, grammar_from_spec, normalize_spec

try:  # pragma: no cover - depends on vLLM being installed
    from vllm.v1.sample.logits_processor import LogitsProcessor as _VllmLogitsProcessor
except Exception:  # vLLM absent: plain classes with the same methods
    _VllmLogitsProcessor = object
try:  # pragma: no cover
    from vllm.v1.structured_output.backend_types import (
        StructuredOutputBackend as _VllmBackend,
        StructuredOutputGrammar as _VllmGrammar,
        StructuredOutputOptions as _Options,
    )
except Exception:
    _VllmBackend = object
    _VllmGrammar = object
    _Options = None

EXTRA_ARGS_KEY = "callmask"
"""The key of a request's callmask spec in ``SamplingParams.extra_args``."""


def _spec_of(params: Any) -> Optional[dict]:
    extra = getattr(params, "extra_args", None) or {}
    spec = extra.get(EXTRA_ARGS_KEY)
    return None if spec is None else normalize_spec(spec)


def vocab_for_model(vllm_config: Any) -> Vocab:
    """The vocabulary of the served model: vLLM's own tokenizer when vLLM is installed, else
    the ``tokenizer.json`` of the model config's tokenizer directory."""
    model_config = vllm_config.model_config
    try:  # pragma: no cover - needs vLLM
        from vllm.transformers_utils.tokenizer import cached_tokenizer_from_config

        return Vocab.from_hf(cached_tokenizer_from_config(model_config))
    except ImportError:
        path = getattr(model_config, "tokenizer", None) or model_config.model
        return Vocab.from_tokenizer_json(os.path.join(path, "tokenizer.json"))


class _Row:
    __slots__ = ("matcher", "output_ids")

    def __init__(self, matcher: Matcher, output_ids: list):
        self.matcher = matcher
        self.output_ids = output_ids  # vLLM's live list of the request's output tokens


class CallmaskLogitsProcessor(_VllmLogitsProcessor):
    """A vLLM v1 logits processor constraining requests that carry a callmask spec."""

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Rejects a malformed spec (and an uncompilable grammar) with ValueError."""
        try:
            spec = _spec_of(sampling_params)
            if spec is not None:
                grammar_from_spec(spec)
        except Exception as e:
            raise ValueError(f"callmask: {e}") from e

    def __init__(self, vllm_config: Any, device: Any = None, is_pin_memory: bool = False):
        self.vocab = vocab_for_model(vllm_config)
        self.automata = AutomatonCache(self.vocab)
        self.rows: dict = {}

    def is_argmax_invariant(self) -> bool:
        """False: the mask changes which token is most likely."""
        return False

    def update_state(self, batch_update: Any) -> None:
        """Applies removed, added, moved requests (in that order), then feeds each constrained
        request's new output tokens to its matcher."""
        if batch_update is not None:
            for index in batch_update.removed:
                self.rows.pop(index, None)
            for index, params, _prompt_ids, output_ids in batch_update.added:
                spec = _spec_of(params)
                if spec is None:
                    self.rows.pop(index, None)
                else:
                    self.rows[index] = _Row(self.automata.get(spec).matcher(), output_ids)
            for a, b, direction in batch_update.moved:
                ra, rb = self.rows.pop(a, None), self.rows.pop(b, None)
                if ra is not None:
                    self.rows[b] = ra
                if rb is not None and getattr(direction, "name", str(direction)) == "SWAP":
                    self.rows[a] = rb
        for row in self.rows.values():
            m = row.matcher
            for t in row.output_ids[len(m.accepted_tokens()) :]:
                if m.is_terminated():
                    break
                m.consume_token(t)

    def apply(self, logits: Any) -> Any:
        """Masks the rows of constrained requests (forbidden tokens to -inf), in place."""
        rows = sorted(i for i, r in self.rows.items() if not r.matcher.is_terminated())
        if not rows:
            return logits
        import numpy as np

        bitmask = np.zeros((len(rows), (logits.shape[-1] + 31) // 32), dtype=np.int32)
        fill_bitmasks([self.rows[i].matcher for i in rows], bitmask)
        return apply_bitmask(logits, bitmask, rows)


class CallmaskGrammar(_VllmGrammar):
    """vLLM's ``StructuredOutputGrammar`` over a callmask matcher."""

    def __init__(self, matcher: Matcher):
        self.matcher = matcher
        self.num_processed_tokens = 0

    def accept_tokens(self, request_id: str, tokens: list) -> bool:
        """Accepts all tokens (True) or none (False)."""
        if self.matcher.is_terminated():
            return False
        if not self.matcher.accept_tokens(tokens):
            return False
        self.num_processed_tokens += len(tokens)
        return True

    def validate_tokens(self, tokens: list) -> list:
        """The longest accepted prefix of ``tokens``; no state change."""
        return list(tokens[: self.matcher.validate_tokens(tokens)])

    def rollback(self, num_tokens: int) -> None:
        """Undoes the last ``num_tokens`` tokens."""
        self.matcher.rollback(num_tokens)
        self.num_processed_tokens -= num_tokens

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        """Fills row ``idx`` of the int32 bitmask (a torch CPU tensor in vLLM)."""
        self.matcher.fill_bitmask(bitmask, idx)

    def is_terminated(self) -> bool:
        """True once the output ended."""
        return self.matcher.is_terminated()

    def reset(self) -> None:
        """Back to the start."""
        self.matcher.reset()
        self.num_processed_tokens = 0

    def find_jump_string(self) -> Optional[str]:
        """No jump-forward (older vLLM versions ask for it)."""
        return None


class CallmaskBackend(_VllmBackend):
    """vLLM's ``StructuredOutputBackend``: JSON requests are JSON Schemas; ``GRAMMAR`` and
    ``STRUCTURAL_TAG`` requests carry a callmask spec (JSON text)."""

    def __init__(self, vllm_config: Any, tokenizer: Any, vocab_size: int, vocab: Optional[Vocab] = None):
        self.vllm_config = vllm_config
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.vocab = vocab if vocab is not None else Vocab.from_hf(tokenizer)
        self.automata = AutomatonCache(self.vocab)

    def compile_grammar(self, request_type: Any, grammar_spec: str) -> CallmaskGrammar:
        """A fresh grammar object for one request."""
        kind = getattr(request_type, "name", str(request_type)).upper()
        if kind == "JSON":
            spec = {"json_schema": json.loads(grammar_spec)}
        elif kind in ("GRAMMAR", "STRUCTURAL_TAG"):
            spec = grammar_spec
        else:
            raise ValueError(f"callmask: unsupported structured output type {kind}")
        return CallmaskGrammar(self.automata.get(spec).matcher())

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        """An int32 CPU tensor of shape ``(max_num_seqs, ceil(vocab_size / 32))``, all allowed."""
        import torch

        return torch.full((max_num_seqs, (self.vocab_size + 31) // 32), -1, dtype=torch.int32)

    def destroy(self) -> None:
        """Nothing to free."""


__all__ = [
    "CallmaskLogitsProcessor",
    "CallmaskGrammar",
    "CallmaskBackend",
    "EXTRA_ARGS_KEY",
    "vocab_for_model",
    "Grammar",
    "TokenAutomaton",
]
