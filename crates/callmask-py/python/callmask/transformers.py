"""callmask for transformers: a ``LogitsProcessor`` for ``model.generate``.

::

    from transformers import AutoTokenizer, AutoModelForCausalLM, LogitsProcessorList
    import callmask
    from callmask.transformers import CallmaskLogitsProcessor

    tok = AutoTokenizer.from_pretrained(path)
    vocab = callmask.Vocab.from_hf(tok)
    grammar = callmask.Grammar.from_dialect("hermes", tools, tool_choice="required")
    processor = CallmaskLogitsProcessor(callmask.TokenAutomaton(grammar, vocab))
    out = model.generate(**inputs, logits_processor=LogitsProcessorList([processor]))
    text = tok.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
    message = grammar.parse(text)   # {"content", "reasoning_content", "tool_calls"}

One matcher per batch row (beam search is not supported: beams reorder rows); rows that
finished (end-of-generation accepted) are left unmasked, as ``generate`` pads them anyway.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from transformers import LogitsProcessor

from ._callmask import TokenAutomaton, fill_bitmasks
from ._common import apply_bitmask


class CallmaskLogitsProcessor(LogitsProcessor):
    """Masks the scores of every row to the tokens its grammar allows next. ``max_new_tokens``:
    the ``generate`` call's; with it, every row ends with a complete output (end-of-generation
    token included) within that many new tokens."""

    def __init__(self, automaton: TokenAutomaton, max_new_tokens: Optional[int] = None):
        self.automaton = automaton
        self.max_new_tokens = max_new_tokens
        self.matchers: list = []
        self._prompt_len: Optional[int] = None

    def reset(self) -> None:
        """Ready for a new ``generate`` call."""
        self.matchers = []
        self._prompt_len = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        batch = input_ids.shape[0]
        if self._prompt_len is None:
            self._prompt_len = input_ids.shape[1]
            self.matchers = [
                self.automaton.matcher(max_tokens=self.max_new_tokens) for _ in range(batch)
            ]
        ids = input_ids[:, self._prompt_len :].tolist()
        live = []
        for m, row in zip(self.matchers, ids):
            if not m.is_terminated():
                for t in row[len(m.accepted_tokens()) :]:
                    m.consume_token(t)
            live.append(None if m.is_terminated() else m)
        rows = [i for i, m in enumerate(live) if m is not None]
        if rows:
            bitmask = np.zeros((len(rows), (scores.shape[-1] + 31) // 32), dtype=np.int32)
            fill_bitmasks([live[i] for i in rows], bitmask)
            apply_bitmask(scores, bitmask, rows)
        return scores

    def output_tokens(self, row: int = 0) -> list:
        """The tokens row ``row`` generated (as accepted by its matcher)."""
        return self.matchers[row].accepted_tokens()
