"""callmask for llama-cpp-python: a vocabulary read from a loaded ``Llama``, a
``logits_processor`` for ``Llama.create_completion`` / ``__call__`` / ``create_chat_completion``,
and the output turned into OpenAI ``tool_calls``.

::

    from llama_cpp import Llama, LogitsProcessorList
    import callmask, callmask.llama_cpp as cm

    llm = Llama("gemma-3-270m-q4_k_m.gguf", n_ctx=2048, verbose=False)
    vocab = cm.vocab_from_llama(llm)                       # once per model
    grammar = callmask.Grammar.from_dialect("hermes", tools, tool_choice="required")
    automaton = callmask.TokenAutomaton(grammar, vocab)    # once per tool set
    out = llm(prompt, max_tokens=128, temperature=0,
              logits_processor=LogitsProcessorList([cm.LogitsProcessor(automaton)]))
    message = grammar.parse(out["choices"][0]["text"])    # {"content", "tool_calls", ...}

Tool calls through a chat API: :func:`create_chat_completion` renders the prompt for the tools,
constrains the output to the model's tool-call dialect and returns llama-cpp-python's
``create_chat_completion`` reply shape with OpenAI ``tool_calls``::

    reply = cm.create_chat_completion(llm, messages, tools, tool_choice="required", max_tokens=256)
    reply["choices"][0]["message"]["tool_calls"]

Draft models (``Llama(draft_model=...)``) are refused: llama-cpp-python hands a logits processor
every evaluated token, unverified drafts included, without saying which position it samples, so
no processor can know the prefix to mask for (the processor raises ``ValueError`` when calls
show drafts, and :func:`create_chat_completion` refuses such a ``Llama`` up front).

The vocabulary comes from llama.cpp itself through llama-cpp-python's low-level API (each
token's piece with special tokens rendered, its attributes, ``llama_vocab_is_eog``), which is
what the model samples from: no GGUF parsing of our own and no extra build dependency.
"""

from __future__ import annotations

import ctypes
import logging
import time
import weakref
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from ._callmask import Grammar, TokenAutomaton, Vocab, mask_logits, render_prompt
from ._common import dialect_of_template
from .bitmask import apply_token_bitmask_inplace, native_logits

logger = logging.getLogger("callmask.llama_cpp")


def vocab_from_llama(llm: Any) -> Vocab:
    """The vocabulary of a loaded ``llama_cpp.Llama``: each token's bytes (special tokens: their
    text), special = llama.cpp's control, unknown and unused tokens, end-of-generation tokens =
    ``llama_vocab_is_eog``."""
    import llama_cpp as lc

    vocab = lc.llama_model_get_vocab(llm.model)
    n = lc.llama_vocab_n_tokens(vocab)
    special_attrs = (
        lc.LLAMA_TOKEN_ATTR_CONTROL | lc.LLAMA_TOKEN_ATTR_UNKNOWN | lc.LLAMA_TOKEN_ATTR_UNUSED
    )
    buf = ctypes.create_string_buffer(256)
    tokens, special, eos = [], [], []
    for t in range(n):
        k = lc.llama_token_to_piece(vocab, t, buf, len(buf), 0, True)
        if k < 0:
            buf = ctypes.create_string_buffer(-k)
            k = lc.llama_token_to_piece(vocab, t, buf, len(buf), 0, True)
        tokens.append(buf.raw[: max(k, 0)])
        attr = lc.llama_vocab_get_attr(vocab, t)
        special.append(bool(lc.llama_vocab_is_control(vocab, t)) or bool(attr & special_attrs))
        if lc.llama_vocab_is_eog(vocab, t):
            eos.append(t)
    return Vocab.from_parts(tokens, special, eos)


class LogitsProcessor:
    """A llama-cpp-python ``logits_processor``: masks every forbidden token's logit to -inf.

    Called as ``processor(input_ids, scores)`` with the prompt and the tokens generated so far;
    the first call's ``input_ids`` are taken as the prompt. One processor per generation (or
    call :meth:`reset` between generations). ``max_tokens``: the generation's ``max_tokens``;
    with it, every token allowed keeps a complete output within that many tokens (the
    end-of-generation token included), so the output ends valid however the model samples.

    Fails closed: llama-cpp-python calls processors from a ctypes callback, where an exception
    is printed and ignored (the logits would go out unmasked), so on a refused token or on
    calls that show draft tokens (``Llama(draft_model=...)``) the processor records the reason
    in :attr:`error` and allows only ``eos_token_ids`` from then on (given; else the logits
    are left as they are); check ``error`` after the generation (:func:`create_chat_completion`
    raises it)."""

    def __init__(
        self,
        automaton: TokenAutomaton,
        max_tokens: Optional[int] = None,
        eos_token_ids: Sequence[int] = (),
    ):
        self.automaton = automaton
        self.eos_token_ids = [int(t) for t in eos_token_ids]
        self.matcher = automaton.matcher(max_tokens=max_tokens)
        self.error: Optional[str] = None
        """Why the processor stopped constraining (None while all is well)."""
        self._prompt_len: Optional[int] = None
        self._last_len: Optional[int] = None
        self._bitmask: Optional[np.ndarray] = None

    def reset(self) -> None:
        """Ready for a new generation."""
        self.matcher.reset()
        self.error = None
        self._prompt_len = None
        self._last_len = None

    def _check(self, input_ids: np.ndarray) -> Optional[str]:
        if self._prompt_len is None:
            self._prompt_len = len(input_ids)
        elif self._last_len is None or len(input_ids) != self._last_len + 1:
            return (
                f"called with {len(input_ids)} tokens after {self._last_len}: a draft model "
                "(speculative decoding) is not supported, as llama-cpp-python passes a "
                "processor the unverified drafts without the position it samples (or the "
                "processor was reused across generations without reset())"
            )
        self._last_len = len(input_ids)
        new = input_ids[self._prompt_len + len(self.matcher.accepted_tokens()) :]
        for t in new:
            if not self.matcher.accept_token(int(t)):
                return f"token {int(t)} refused: {self.matcher.error()}"
        return None

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if self.error is None:
            reason = self._check(input_ids)
            if reason is not None:
                self.error = f"callmask LogitsProcessor: {reason}"
        if self.error is not None:  # fail closed: only the end of generation
            eos = [t for t in self.eos_token_ids if t < scores.shape[-1]]
            if eos:
                keep = scores[eos].copy()
                scores[:] = -np.inf
                scores[eos] = keep
            return scores
        width = scores.shape[-1]
        if self._bitmask is None or self._bitmask.shape[-1] * 32 < width:
            self._bitmask = np.zeros((1, (width + 31) // 32), dtype=np.int32)
        if mask_logits([self.matcher], self._bitmask, native_logits(scores, self._bitmask)):
            return scores  # filled and applied in one native call
        self.matcher.fill_bitmask(self._bitmask, 0)
        return apply_token_bitmask_inplace(scores, self._bitmask[0])


def completion_message(grammar: Any, completion: dict) -> dict:
    """The OpenAI message (``content``, ``reasoning_content``, ``tool_calls``) of a
    ``create_completion`` result's first choice."""
    return grammar.parse(completion["choices"][0]["text"])


_VOCABS: "weakref.WeakKeyDictionary[Any, Vocab]" = weakref.WeakKeyDictionary()


def _vocab(llm: Any) -> Vocab:
    """The vocabulary of ``llm``, read once per ``Llama``."""
    try:
        v = _VOCABS.get(llm)
    except TypeError:  # not weak-referenceable
        return vocab_from_llama(llm)
    if v is None:
        v = _VOCABS[llm] = vocab_from_llama(llm)
    return v


def create_chat_completion(
    llm: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    *,
    tool_choice: Union[str, Mapping[str, Any]] = "auto",
    parallel_tool_calls: bool = True,
    dialect: Optional[str] = None,
    chat_template: Optional[str] = None,
    max_tokens: int = 512,
    vocab: Optional[Vocab] = None,
    **completion_kwargs: Any,
) -> dict:
    """A chat completion whose tool calls are constrained to ``tools``: the reply of
    ``Llama.create_chat_completion`` (``choices[0].message`` with ``content`` and OpenAI
    ``tool_calls``, ``finish_reason`` ``"tool_calls"`` when it called one, ``usage``).

    The prompt is ``chat_template`` (default: the GGUF's ``tokenizer.chat_template``, else the
    dialect's own) rendered with the messages and tools; ``dialect`` defaults to the one
    detected from that template (``DialectError`` when none fits: pass ``dialect=``). The output
    follows the dialect, ends within ``max_tokens`` (end-of-generation token included), and is
    parsed into the message. ``completion_kwargs`` go to ``Llama.create_completion``
    (``temperature``, ``seed``...; not ``logits_processor``, ``grammar`` or ``stream``).
    Trade-off: one call compiles the grammar for the tools (cached only by the caller keeping
    a :class:`~callmask.TokenAutomaton`; use :class:`LogitsProcessor` directly for that)."""
    if getattr(llm, "draft_model", None) is not None:
        raise ValueError(
            "callmask: a Llama with a draft_model is not supported (llama-cpp-python passes "
            "logits processors unverified draft tokens); load the model without draft_model"
        )
    for key in ("logits_processor", "grammar", "stream"):
        if key in completion_kwargs:
            raise TypeError(f"create_chat_completion: `{key}` is set by callmask")
    vocab = vocab if vocab is not None else _vocab(llm)
    if chat_template is None:
        chat_template = (getattr(llm, "metadata", None) or {}).get("tokenizer.chat_template")
    if dialect is None:
        dialect, note = dialect_of_template(chat_template, vocab)
        if note:
            logger.warning("%s", note)
    prompt = render_prompt(dialect, list(tools), list(messages), template=chat_template)
    grammar = Grammar.from_dialect(
        dialect,
        list(tools),
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls,
        caches=vocab.caches,
    )
    processor = LogitsProcessor(
        TokenAutomaton(grammar, vocab), max_tokens=max_tokens, eos_token_ids=vocab.eos_token_ids
    )
    import llama_cpp as lc

    out = llm.create_completion(
        prompt,
        max_tokens=max_tokens,
        logits_processor=lc.LogitsProcessorList([processor]),
        **completion_kwargs,
    )
    if processor.error is not None:
        raise ValueError(processor.error)
    choice = out["choices"][0]
    parsed = grammar.parse(choice["text"])
    message: dict = {"role": "assistant", "content": parsed.get("content")}
    if parsed.get("reasoning_content"):
        message["reasoning_content"] = parsed["reasoning_content"]
    calls = parsed.get("tool_calls") or []
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chat" + str(out.get("id", "")),
        "object": "chat.completion",
        "created": out.get("created", int(time.time())),
        "model": out.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else choice.get("finish_reason"),
            }
        ],
        "usage": out.get("usage"),
    }
