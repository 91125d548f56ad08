"""callmask for SGLang: a grammar backend registered as ``"callmask"``.

Installing callmask is enough: SGLang runs the ``sglang.srt.plugins`` entry points (this
module's :func:`register`) in every process before it parses its arguments and again in each
scheduler process, so ::

    python -m sglang.launch_server --model-path MODEL --grammar-backend callmask \\
        --tool-call-parser qwen25 [--reasoning-parser qwen3]

works as with the built-in backends. :func:`register` adds ``callmask`` to SGLang's
``--grammar-backend`` choices (``add_grammar_backend_choices``), registers the backend factory
(``register_grammar_backend``) and hooks the request's token budget in (below).

Requests (``sampling_params``):

- ``json_schema``: a JSON Schema (``"$$ANY$$"``, SGLang's ``json_object``, is any JSON value);
- ``structural_tag``: an XGrammar structural tag, both the ``{"type": "structural_tag",
  "format": ...}`` form and the legacy ``{"structures": [...], "triggers": [...]}`` form that
  SGLang's ``FunctionCallParser`` sends for tools (compiled by
  :meth:`callmask.Grammar.from_structural_tag` with the model's vocabulary, so special-token
  delimiters are matched as the tokens); or a callmask spec (``{"dialect": "hermes", "tools":
  [...], "tool_choice": "required"}``) for a whole tool-call dialect;
- ``regex`` and ``ebnf``: refused through SGLang's invalid-grammar path (the request is aborted
  with the reason), never run unconstrained.

How it fits SGLang's contracts (``sglang/srt/constrained/base_grammar_backend.py``):

- A refused token raises :class:`TokenRejectedError`, a ``ValueError`` (what the scheduler
  catches to abort only that request) that is also a :class:`callmask.CallmaskError`.
- Backends from the registry are not wrapped by SGLang for reasoning models; the factory wraps
  ours in SGLang's own ``ReasonerGrammarBackend`` when ``--reasoning-parser`` is set, as
  ``create_grammar_backend`` does for the built-in ones: the reasoning is not masked and the
  grammar starts after the think-end token.
- Token budget: the backend never sees a request, so :func:`register` adds an ``AFTER`` hook
  (SGLang's ``HookRegistry``) on ``GrammarManager._apply_request_reasoning_config``, which SGLang
  calls for every request once its grammar is ready. The hook gives the request's
  ``max_new_tokens`` (minus the tokens already generated) to the matcher, so every allowed token
  keeps a complete output within the budget. Behind a reasoning wrapper the budget is applied
  when the grammar starts (after the reasoning, whose tokens count against the budget). A
  budget too small for any complete output aborts the request with the reason (or, behind a
  reasoning wrapper, is dropped with a warning). Trade-off: the hook depends on a private
  method's name; when it is missing the backend works without budgets.
- Masks: int32 CPU tensors (pinned for CUDA) filled by the matchers (a batch of plain callmask
  rows in one call with the GIL released), moved with ``non_blocking`` and applied on the
  logits' device with :func:`callmask.bitmask.apply_token_bitmask_inplace` (torch ops, no
  Triton). ``set_token_filter`` is supported, so ``--enable-strict-thinking`` works.
- No jump-forward (``try_jump_forward`` returns None).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, List, Optional, Sequence

from ._callmask import (
    CallmaskError,
    ForbiddenTokenError,
    Grammar,
    Matcher,
    TokenAutomaton,
    Vocab,
    fill_bitmasks,
)
from ._common import AutomatonCache, normalize_spec
from .bitmask import allocate_token_bitmask, apply_token_bitmask_inplace

logger = logging.getLogger(__name__)

BACKEND_NAME = "callmask"
"""The name for ``--grammar-backend``."""

_HOOK_TARGET = (
    "sglang.srt.constrained.grammar_manager.GrammarManager._apply_request_reasoning_config"
)

try:  # SGLang present: its base classes, so isinstance checks and defaults hold
    from sglang.srt.constrained import base_grammar_backend as _base

    _BaseObject: Any = _base.BaseGrammarObject
    _BaseBackend: Any = _base.BaseGrammarBackend
    _Invalid: Any = _base.InvalidGrammarObject
except ImportError:  # SGLang absent: stand-ins with the same interface, for tests

    class _BaseObject:  # type: ignore[no-redef]
        def __init__(self) -> None:
            self._finished = False
            self.grammar_stats = None
            self.current_token: Optional[int] = None

        @property
        def finished(self) -> bool:
            return self._finished

        @finished.setter
        def finished(self, finished: bool) -> None:
            self._finished = finished

    class _BaseBackend:  # type: ignore[no-redef]
        def __init__(self) -> None:
            self.cache: dict = {}

    class _Invalid(_BaseObject):  # type: ignore[no-redef]
        def __init__(self, error_message: str = "Unknown grammar error") -> None:
            super().__init__()
            self.error_message = error_message


class TokenRejectedError(ForbiddenTokenError, ValueError):
    """A sampled token the grammar refuses: a ``ValueError`` for SGLang's scheduler (which aborts
    the request) and a :class:`callmask.ForbiddenTokenError`."""


class CallmaskGrammarObject(_BaseObject):
    """One request's grammar state in SGLang (a callmask :class:`~callmask.Matcher`)."""

    def __init__(self, automaton: TokenAutomaton, key: str = "", matcher: Optional[Matcher] = None):
        super().__init__()
        self.automaton = automaton
        self.key = key
        self.matcher = matcher if matcher is not None else automaton.matcher()
        self._pending_budget: Optional[int] = None
        self._generated: Optional[Callable[[], int]] = None

    # --- token budget -------------------------------------------------------------------

    def set_request_budget(self, max_new_tokens: int, generated: Callable[[], int]) -> None:
        """Applies the budget when the grammar starts: ``max_new_tokens`` minus ``generated()``
        (the request's output tokens so far, reasoning included) tokens left, end-of-generation
        token included."""
        self._pending_budget = int(max_new_tokens)
        self._generated = generated

    def apply_budget(self) -> Optional[str]:
        """Applies a pending budget now (None, or why it cannot hold: it is then dropped)."""
        if self._pending_budget is None or self._generated is None:
            return None
        left = max(self._pending_budget - self._generated(), 0)
        self._pending_budget = None
        try:
            self.matcher.set_token_budget(left)
        except CallmaskError as e:
            return f"callmask: max_new_tokens leaves {left} tokens for the output: {e}"
        return None

    def _start(self) -> None:
        if self._pending_budget is not None and not self.matcher.accepted_tokens():
            reason = self.apply_budget()
            if reason is not None:
                logger.warning("%s (generating without a budget)", reason)

    # --- BaseGrammarObject ----------------------------------------------------------------

    def accept_token(self, token: int) -> None:
        """Accepts the sampled token; :class:`TokenRejectedError` (a ``ValueError``) if the
        grammar refuses it. Tokens after the end are ignored, as XGrammar's backend does."""
        if self.matcher.is_terminated():
            return
        self._start()
        self.current_token = token
        if not self.matcher.accept_token(int(token)):
            raise TokenRejectedError(
                f"callmask: token {token} not allowed after {len(self.matcher.accepted_tokens())} "
                f"tokens: {self.matcher.error()}"
            )

    def rollback(self, k: int) -> None:
        """Undoes the last ``k`` tokens (speculative decoding)."""
        if k > 0:
            self.matcher.rollback(k)

    def is_terminated(self) -> bool:
        """True once the end-of-generation token was accepted."""
        return self.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        """See :meth:`CallmaskGrammarBackend.allocate_vocab_mask`."""
        return CallmaskGrammarBackend.allocate_vocab_mask(vocab_size, batch_size, device)

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        """Writes row ``idx`` of the CPU mask."""
        self._start()
        self.matcher.fill_bitmask(vocab_mask, idx)

    @staticmethod
    def fill_vocab_mask_batched(entries: Sequence[Any], vocab_mask: Any) -> None:
        """Fills the listed rows (``GrammarRow(row, grammar)``): plain callmask rows in one
        parallel call, others (reasoning wrappers) one by one; unlisted rows are untouched."""
        rows: List[Optional[Matcher]] = []
        for entry in entries:
            g = entry.grammar
            if type(g) is CallmaskGrammarObject:
                g._start()
                rows.extend([None] * (entry.row + 1 - len(rows)))
                rows[entry.row] = g.matcher
            else:
                g.fill_vocab_mask(vocab_mask, entry.row)
        if rows:
            fill_bitmasks(rows, vocab_mask)

    @staticmethod
    def reset_vocab_mask(vocab_mask: Any) -> None:
        """All tokens allowed again."""
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
        """The mask on the logits' device."""
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        """Forbidden tokens' logits to -inf, in place, on the logits' device."""
        apply_token_bitmask_inplace(logits, vocab_mask)

    def copy(self) -> "CallmaskGrammarObject":
        """A fresh object at the start of an output (SGLang copies cached grammars per request);
        the compiled automaton is shared."""
        return CallmaskGrammarObject(self.automaton, self.key)

    def try_jump_forward(self, tokenizer: Any) -> None:
        """No jump-forward."""
        return None

    def jump_forward_str_state(self, helper: Any) -> tuple:
        """Unused (no jump-forward)."""
        return "", -1

    def jump_and_retokenize(
        self, old_output_ids: Any, new_output_ids: Any, next_state: int
    ) -> None:
        """Unused (no jump-forward)."""

    def __repr__(self) -> str:
        return f"CallmaskGrammarObject({self.key[:80]!r}, {len(self.matcher.accepted_tokens())} tokens)"


def _fill_missing_schemas(node: Any) -> None:
    """A structural tag's missing schemas (``None``) as ``{}`` (any JSON), as SGLang's
    XGrammar backend reads them."""
    if isinstance(node, dict):
        for key in ("schema", "json_schema"):
            if key in node and node[key] is None:
                node[key] = {}
        for value in node.values():
            _fill_missing_schemas(value)
    elif isinstance(node, list):
        for value in node:
            _fill_missing_schemas(value)


class CallmaskGrammarBackend(_BaseBackend):
    """SGLang's grammar backend over callmask (one vocabulary per model)."""

    def __init__(
        self,
        tokenizer: Any,
        vocab_size: int,
        eos_token_ids: Any = None,
        vocab: Optional[Vocab] = None,
    ):
        super().__init__()
        eos = sorted(int(t) for t in (eos_token_ids or ()))
        if vocab is None:
            # The end tokens are those SGLang stops on (the model's eos ids it passes, the
            # tokenizer's eos_token_id and additional stop ids), not every token the tokenizer
            # file marks: a grammar must never end on a token the engine does not stop at.
            extra = getattr(tokenizer, "additional_stop_token_ids", None) or ()
            stops = eos + sorted(int(t) for t in extra)
            vocab = Vocab.from_hf(tokenizer, eos_token_ids=stops, eos_only=bool(eos))
        self.vocab = vocab
        self.vocab_size = vocab_size
        self.automata = AutomatonCache(self.vocab)

    def _invalid(self, kind: str, key_string: str, error: Any) -> Any:
        logger.error("callmask: invalid %s %.200r: %s", kind, key_string, error)
        return _Invalid(f"{error}")

    def dispatch_json(self, key_string: str) -> Any:
        """A JSON Schema request (``$$ANY$$``: any JSON value)."""
        try:
            schema = {} if key_string == "$$ANY$$" else json.loads(key_string)
            return CallmaskGrammarObject(self.automata.get({"json_schema": schema}), key_string)
        except (CallmaskError, ValueError) as e:
            return self._invalid("json_schema", key_string, e)

    def dispatch_structural_tag(self, key_string: str) -> Any:
        """An XGrammar structural tag (either form) or a callmask spec."""
        try:
            tag = json.loads(key_string)
            if isinstance(tag, dict) and ("dialect" in tag or "json_schema" in tag):
                automaton = self.automata.get(normalize_spec(tag))
            else:
                _fill_missing_schemas(tag)
                grammar = Grammar.from_structural_tag(tag, self.vocab)
                automaton = TokenAutomaton(grammar, self.vocab)
            return CallmaskGrammarObject(automaton, key_string)
        except (CallmaskError, ValueError) as e:
            return self._invalid("structural_tag", key_string, e)

    def dispatch_regex(self, key_string: str) -> Any:
        """Refused: callmask compiles JSON Schemas, structural tags and dialects."""
        return self._invalid(
            "regex", key_string, "the callmask grammar backend does not support regex constraints"
        )

    def dispatch_ebnf(self, key_string: str) -> Any:
        """Refused: callmask compiles JSON Schemas, structural tags and dialects."""
        return self._invalid(
            "ebnf", key_string, "the callmask grammar backend does not support EBNF grammars"
        )

    @staticmethod
    def allocate_vocab_mask(vocab_size: int, batch_size: int, device: Any) -> Any:
        """An int32 CPU tensor ``(batch_size, ceil(vocab_size / 32))``, all allowed, pinned
        when the logits live on a CUDA device (for a non-blocking copy)."""
        import torch

        pin = str(device).startswith("cuda") and torch.cuda.is_available()
        return allocate_token_bitmask(batch_size, vocab_size, pin_memory=pin)

    # SGLang calls these on the backend or on a grammar object: the same functions.
    move_vocab_mask = staticmethod(CallmaskGrammarObject.move_vocab_mask)
    apply_vocab_mask = staticmethod(CallmaskGrammarObject.apply_vocab_mask)

    @property
    def is_support_token_filter(self) -> bool:
        """True: :meth:`set_token_filter` works (strict thinking)."""
        return True

    @staticmethod
    def set_token_filter(
        vocab_mask: Any,
        token_ids: Sequence[int],
        batch_idx: int,
        is_allowed: bool = True,
        reset_vocab_mask: bool = True,
    ) -> None:
        """Row ``batch_idx``: with ``is_allowed`` allows ``token_ids`` (only them when
        ``reset_vocab_mask``), else forbids them (all others allowed when ``reset_vocab_mask``)."""
        row = vocab_mask[batch_idx]
        if reset_vocab_mask:
            row.fill_(0 if is_allowed else -1)
        words: dict = {}
        for t in token_ids:
            words[t >> 5] = words.get(t >> 5, 0) | (1 << (t & 31))
        for w, bits in words.items():
            value = int(row[w]) & 0xFFFFFFFF
            value = value | bits if is_allowed else value & ~bits
            row[w] = value - (1 << 32) if value >= 1 << 31 else value


def _wrap_reasoning(backend: CallmaskGrammarBackend, tokenizer: Any) -> Any:
    """The backend inside SGLang's ``ReasonerGrammarBackend`` when the server has a reasoning
    parser, as ``create_grammar_backend`` does for the built-in backends."""
    try:
        from sglang.srt.runtime_context import get_serving

        serving = get_serving()
    except Exception:  # an SGLang without a runtime context, or none published (tests)
        return backend
    parser_name = getattr(serving, "reasoning_parser", None)
    if not parser_name:
        return backend
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    parser = ReasoningParser(model_type=parser_name, stream_reasoning=False, tokenizer=tokenizer)
    try:
        return ReasonerGrammarBackend(
            backend,
            parser,
            tokenizer,
            enable_strict_thinking=bool(getattr(serving, "enable_strict_thinking", False)),
        )
    except ValueError as e:
        # SGLang wraps only when the think-end token encodes; otherwise it runs unwrapped.
        if getattr(serving, "enable_strict_thinking", False):
            raise
        logger.warning("callmask: reasoning parser %r not applied: %s", parser_name, e)
        return backend


def _init(*args: Any, **kwargs: Any) -> Any:
    """SGLang's backend factory, called as ``(server_args, tokenizer, vocab_size,
    eos_token_ids)`` (or with those keywords)."""
    if args:
        _server_args, tokenizer, vocab_size, *rest = args
        eos = rest[0] if rest else kwargs.get("eos_token_ids")
    else:
        tokenizer, vocab_size = kwargs["tokenizer"], kwargs["vocab_size"]
        eos = kwargs.get("eos_token_ids")
    return _wrap_reasoning(CallmaskGrammarBackend(tokenizer, vocab_size, eos), tokenizer)


def callmask_grammar(grammar: Any) -> Optional[CallmaskGrammarObject]:
    """The callmask object of a request's grammar (itself, or inside a reasoning wrapper)."""
    if isinstance(grammar, CallmaskGrammarObject):
        return grammar
    inner = getattr(grammar, "grammar", None)
    return inner if isinstance(inner, CallmaskGrammarObject) else None


def apply_request_budget(req: Any) -> None:
    """Gives a request's ``max_new_tokens`` to its callmask grammar (what the hook does; a
    no-op for other grammars). A budget too small for the grammar aborts the request."""
    obj = callmask_grammar(getattr(req, "grammar", None))
    limit = getattr(getattr(req, "sampling_params", None), "max_new_tokens", None)
    if obj is None or limit is None:
        return
    obj.set_request_budget(limit, lambda: len(req.output_ids))
    if obj is req.grammar:  # no reasoning before it: the grammar starts now
        reason = obj.apply_budget()
        if reason is not None:
            req.set_finish_with_abort(reason)


def _budget_hook(result: Any, _manager: Any, req: Any, *args: Any, **kwargs: Any) -> Any:
    apply_request_budget(req)
    return result


def register() -> None:
    """The ``sglang.srt.plugins`` entry point: ``callmask`` as a ``--grammar-backend`` choice,
    its factory, and the token-budget hook. Idempotent."""
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend

    try:
        from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices

        if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
            add_grammar_backend_choices([BACKEND_NAME])
    except ImportError:  # older SGLang: no choice list to extend
        pass
    register_grammar_backend(BACKEND_NAME, _init)
    try:
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType
    except ImportError:
        logger.warning("callmask: this SGLang has no plugin hooks; max_new_tokens not enforced")
        return
    hooks = HookRegistry._hooks.get(_HOOK_TARGET, [])
    if not any(h is _budget_hook for _, h, _ in hooks):
        HookRegistry.register(_HOOK_TARGET, _budget_hook, HookType.AFTER)
