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

The vocabulary comes from llama.cpp itself through llama-cpp-python's low-level API (each
token's piece with special tokens rendered, its attributes, ``llama_vocab_is_eog``), which is
what the model samples from: no GGUF parsing of our own and no extra build dependency.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional

import numpy as np

from ._callmask import TokenAutomaton, Vocab
from ._common import bool_mask


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
    end-of-generation token included), so the output ends valid however the model samples."""

    def __init__(self, automaton: TokenAutomaton, max_tokens: Optional[int] = None):
        self.automaton = automaton
        self.matcher = automaton.matcher(max_tokens=max_tokens)
        self._prompt_len: Optional[int] = None
        self._bitmask: Optional[np.ndarray] = None

    def reset(self) -> None:
        """Ready for a new generation."""
        self.matcher.reset()
        self._prompt_len = None

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if self._prompt_len is None:
            self._prompt_len = len(input_ids)
        new = input_ids[self._prompt_len + len(self.matcher.accepted_tokens()) :]
        for t in new:
            self.matcher.consume_token(int(t))
        width = scores.shape[-1]
        if self._bitmask is None or self._bitmask.shape[-1] * 32 < width:
            self._bitmask = np.zeros((1, (width + 31) // 32), dtype=np.int32)
        self.matcher.fill_bitmask(self._bitmask, 0)
        scores[~bool_mask(self._bitmask, width)[0]] = -np.inf
        return scores


def completion_message(grammar: Any, completion: dict) -> dict:
    """The OpenAI message (``content``, ``reasoning_content``, ``tool_calls``) of a
    ``create_completion`` result's first choice."""
    return grammar.parse(completion["choices"][0]["text"])
