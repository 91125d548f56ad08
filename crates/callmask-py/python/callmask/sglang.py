"""callmask for SGLang: a grammar backend (``BaseGrammarBackend`` / ``BaseGrammarObject`` of
``python/sglang/srt/constrained/base_grammar_backend.py``) registered as ``"callmask"`` with
``register_grammar_backend`` through the package's ``sglang.srt.plugins`` entry point::

    python -m sglang.launch_server --model-path MODEL --grammar-backend callmask

Requests: ``json_schema`` is a JSON Schema; ``structural_tag`` carrying a callmask spec
(``{"dialect": "hermes", "tools": [...], "tool_choice": "required"}``) is a tool-call dialect.
The model's end-of-generation ids that SGLang passes are added to the vocabulary's.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from ._callmask import CallmaskError, Matcher, TokenAutomaton, Vocab
from ._common import AutomatonCache, apply_bitmask, normalize_spec

try:  # pragma: no cover - depends on SGLang being installed
    from sglang.srt.constrained import base_grammar_backend as _base

    _BaseObject = _base.BaseGrammarObject
    _BaseBackend = _base.BaseGrammarBackend
    _INVALID = getattr(_base, "INVALID_GRAMMAR_OBJ", None)
except Exception:  # SGLang absent: plain classes with the same methods
    _base = None

    class _BaseObject:  # type: ignore[no-redef]
        def __init__(self):
            self._finished = False

        @property
        def finished(self):
            return self._finished

        @finished.setter
        def finished(self, finished):
            self._finished = finished

    class _BaseBackend:  # type: ignore[no-redef]
        def __init__(self):
            self.cache = {}

    _INVALID = None


class CallmaskGrammarObject(_BaseObject):
    """One request's grammar state in SGLang."""

    def __init__(self, automaton: TokenAutomaton, matcher: Optional[Matcher] = None):
        super().__init__()
        self.automaton = automaton
        self.matcher = matcher if matcher is not None else automaton.matcher()

    def accept_token(self, token: int) -> None:
        """Accepts the sampled token (``ForbiddenTokenError`` if the grammar refuses it)."""
        self.matcher.consume_token(token)

    def rollback(self, k: int) -> None:
        """Undoes the last ``k`` tokens (speculative decoding)."""
        self.matcher.rollback(k)

    def is_terminated(self) -> bool:
        """True once the output ended."""
        return self.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        """An int32 CPU tensor ``(batch_size, ceil(vocab_size / 32))``, all allowed."""
        import torch

        return torch.full((batch_size, (vocab_size + 31) // 32), -1, dtype=torch.int32)

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        """Fills row ``idx``."""
        self.matcher.fill_bitmask(vocab_mask, idx)

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
        """The mask on the logits' device."""
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        """Forbidden tokens' logits to -inf, in place."""
        apply_bitmask(logits, vocab_mask)

    def copy(self) -> "CallmaskGrammarObject":
        """A fresh object at the start of an output (SGLang copies cached grammars per request)."""
        return CallmaskGrammarObject(self.automaton)

    def try_jump_forward(self, tokenizer: Any) -> None:
        """No jump-forward."""
        return None

    def jump_forward_str_state(self, helper: Any):
        """Unused (no jump-forward)."""
        return "", -1

    def jump_and_retokenize(self, old_output_ids: Any, new_output_ids: Any, next_state: int) -> None:
        """Unused (no jump-forward)."""


class CallmaskGrammarBackend(_BaseBackend):
    """SGLang's grammar backend over callmask."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None, vocab: Optional[Vocab] = None):
        super().__init__()
        eos = sorted(int(t) for t in (eos_token_ids or ()))
        self.vocab = vocab if vocab is not None else Vocab.from_hf(tokenizer, eos_token_ids=eos)
        self.vocab_size = vocab_size
        self.automata = AutomatonCache(self.vocab)

    def _compile(self, spec: Any) -> Any:
        try:
            return CallmaskGrammarObject(self.automata.get(spec))
        except CallmaskError:
            return _INVALID

    def dispatch_json(self, key_string: str) -> Any:
        """A JSON Schema request."""
        try:
            schema = json.loads(key_string)
        except ValueError:
            return _INVALID
        return self._compile({"json_schema": schema})

    def dispatch_structural_tag(self, key_string: str) -> Any:
        """A callmask dialect spec (JSON text)."""
        try:
            spec = normalize_spec(key_string)
        except CallmaskError:
            return _INVALID
        return self._compile(spec)


def _init(*args: Any, **kwargs: Any) -> CallmaskGrammarBackend:
    """SGLang's backend factory; SGLang versions call it as ``(server_args, tokenizer,
    vocab_size, eos_token_ids)`` or with keyword arguments."""
    if args:
        _server_args, tokenizer, vocab_size, *rest = args
        eos = rest[0] if rest else kwargs.get("eos_token_ids")
    else:
        tokenizer, vocab_size = kwargs["tokenizer"], kwargs["vocab_size"]
        eos = kwargs.get("eos_token_ids")
    return CallmaskGrammarBackend(tokenizer, vocab_size, eos)


def register() -> None:
    """Registers the ``"callmask"`` grammar backend with SGLang (the plugin entry point)."""
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend

    register_grammar_backend("callmask", _init)
