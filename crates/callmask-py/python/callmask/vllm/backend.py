"""callmask as vLLM's ``StructuredOutputGrammar`` / ``StructuredOutputBackend``
(``vllm/v1/structured_output/backend_types.py``: ``accept_tokens``, ``validate_tokens``,
``rollback``, ``fill_bitmask``, ``is_terminated``, ``reset``).

vLLM has no registry for third-party structured-output backends (its manager picks among its
own by name), so these classes are not installed into vLLM automatically; they follow the exact
call sequence of vLLM's scheduler (fill a row, accept each draft token temporarily, fill the
next row, roll back) and can be wired in by a fork or a future registry. For a stock vLLM, use
:class:`callmask.vllm.CallmaskLogitsProcessor` and the tool parser.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from .._callmask import Matcher, Vocab
from .._common import AutomatonCache, spec_of_structural_tag
from ._spec import COMPILE_CACHES

try:  # pragma: no cover
    from vllm.v1.structured_output.backend_types import StructuredOutputBackend as _VllmBackend
    from vllm.v1.structured_output.backend_types import StructuredOutputGrammar as _VllmGrammar
except Exception:
    _VllmBackend = object  # type: ignore[assignment,misc]
    _VllmGrammar = object  # type: ignore[assignment,misc]


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

    def __init__(
        self, vllm_config: Any, tokenizer: Any, vocab_size: int, vocab: Optional[Vocab] = None
    ):
        self.vllm_config = vllm_config
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.vocab = vocab if vocab is not None else Vocab.from_hf(tokenizer)
        self.automata = AutomatonCache(self.vocab, caches=COMPILE_CACHES)

    def compile_grammar(
        self, request_type: Any, grammar_spec: str, stop_token_ids: Optional[set] = None
    ) -> CallmaskGrammar:
        """A fresh grammar object for one request: ``JSON`` is a JSON Schema;
        ``STRUCTURAL_TAG`` an XGrammar structural tag or a callmask spec (JSON text);
        ``GRAMMAR`` a callmask spec. Others (regex, choice, EBNF) raise ``ValueError``.
        ``stop_token_ids`` (newer vLLM passes them) is not used: the vocabulary's end tokens
        end the output."""
        kind = getattr(request_type, "name", str(request_type)).upper()
        spec: Any
        if kind == "JSON":
            spec = {"json_schema": json.loads(grammar_spec)}
        elif kind == "STRUCTURAL_TAG":
            spec = spec_of_structural_tag(grammar_spec)
        elif kind == "GRAMMAR":
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
