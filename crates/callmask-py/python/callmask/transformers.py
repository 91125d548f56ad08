"""callmask for transformers: a ``LogitsProcessor`` for ``model.generate``.

::

    from transformers import AutoTokenizer, AutoModelForCausalLM, LogitsProcessorList
    import callmask
    from callmask.transformers import CallmaskLogitsProcessor

    tok = AutoTokenizer.from_pretrained(path)
    vocab = callmask.Vocab.from_hf(tok)
    grammar = callmask.Grammar.from_dialect("hermes", tools, tool_choice="required")
    processor = CallmaskLogitsProcessor(callmask.TokenAutomaton(grammar, vocab), max_new_tokens=256)
    out = model.generate(**inputs, max_new_tokens=256,
                         logits_processor=LogitsProcessorList([processor]))
    text = tok.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
    message = grammar.parse(text)   # {"content", "reasoning_content", "tool_calls"}

One matcher per batch row, kept in step with the row's tokens rather than with the calls: each
call compares a row's generated tokens with what its matcher accepted, rolls back to their
common prefix and accepts the rest. So the processor follows what ``generate`` actually keeps:

- assisted generation (``assistant_model=``, ``prompt_lookup_num_tokens=``): the verifying model
  calls the processor on prefixes holding unverified draft tokens, then drops the rejected ones;
  the next call's tokens roll the matcher back to those kept. A draft token the grammar refuses
  is not an error there (pass ``speculative=True``, or it is assumed once a call has shown
  tokens being dropped): the row is left unmasked from that draft on, as its later positions
  are discarded with it.
- beam search (``num_beams > 1``): beams reorder rows between steps; a row whose tokens are no
  longer an extension of its matcher's is rolled back to their common prefix (or, beyond the
  matcher's rollback window, replayed from the start), so each beam is masked for its own tokens.
  Trade-off: reordering costs a rollback and replay per moved beam instead of a fork per beam.

Rows that finished (end-of-generation accepted) are left unmasked, as ``generate`` pads them.
``max_new_tokens`` (the ``generate`` call's) bounds every row: each allowed token keeps a
complete output, end-of-generation token included, within that many new tokens.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from ._callmask import ForbiddenTokenError, Matcher, TokenAutomaton, mask_logits
from ._common import apply_bitmask
from .bitmask import native_logits


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class CallmaskLogitsProcessor(LogitsProcessor):
    """Masks the scores of every row to the tokens its grammar allows next.

    ``max_new_tokens``: the ``generate`` call's (every row then ends complete within it).
    ``speculative``: the calls may carry unverified draft tokens (assisted generation): a
    refused one leaves its row unmasked instead of raising ``ForbiddenTokenError``. Assumed
    from the first call that drops tokens; set it for prompt-lookup decoding, whose first
    round can draft a refused token before any is dropped."""

    def __init__(
        self,
        automaton: TokenAutomaton,
        max_new_tokens: Optional[int] = None,
        *,
        speculative: bool = False,
    ):
        self.automaton = automaton
        self.max_new_tokens = max_new_tokens
        self.speculative = speculative
        self.matchers: List[Matcher] = []
        self.rollbacks = 0
        """Tokens undone so far (dropped drafts, reordered beams)."""
        self.refused_drafts = 0
        """Draft tokens the grammar refused (speculative calls)."""
        self._prompt_len: Optional[int] = None

    def reset(self) -> None:
        """Ready for a new ``generate`` call."""
        self.matchers = []
        self._prompt_len = None
        self.rollbacks = 0
        self.refused_drafts = 0

    def _new_matcher(self) -> Matcher:
        return self.automaton.matcher(max_tokens=self.max_new_tokens)

    def _sync(self, row: int, ids: List[int]) -> bool:
        """Brings row ``row``'s matcher to the tokens ``ids``; False when a (draft) token is
        refused, the matcher then at the longest accepted prefix."""
        m = self.matchers[row]
        accepted = m.accepted_tokens()
        keep = _common_prefix(accepted, ids)
        back = len(accepted) - keep
        if back:
            self.speculative = True
            self.rollbacks += back
            if back <= m.rollback_available():
                m.rollback(back)
            else:  # beyond the rollback window: replay from the start
                m = self.matchers[row] = self._new_matcher()
                keep = 0
        for i in range(keep, len(ids)):
            if m.is_terminated():
                break  # padding after the end
            if not m.accept_token(ids[i]):
                if not self.speculative:
                    raise ForbiddenTokenError(
                        f"row {row}: token {ids[i]} at position {i} refused ({m.error()}); "
                        "for assisted generation pass speculative=True"
                    )
                self.refused_drafts += 1
                return False
        return True

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        batch = input_ids.shape[0]
        if self._prompt_len is None:
            self._prompt_len = input_ids.shape[1]
            self.matchers = [self._new_matcher() for _ in range(batch)]
        elif batch != len(self.matchers):
            raise ValueError(
                f"CallmaskLogitsProcessor: {batch} rows after {len(self.matchers)}; one processor "
                "serves one generate() call (call reset() between calls)"
            )
        if input_ids.shape[1] < self._prompt_len:
            raise ValueError("CallmaskLogitsProcessor: input shorter than the prompt (reset()?)")
        ids = input_ids[:, self._prompt_len :].tolist()
        live: List[Optional[Matcher]] = []
        for row, row_ids in enumerate(ids):
            ok = self._sync(row, row_ids)
            m = self.matchers[row]
            live.append(m if ok and not m.is_terminated() else None)
        rows = [i for i, m in enumerate(live) if m is not None]
        if rows:
            bitmask = np.zeros((len(rows), (scores.shape[-1] + 31) // 32), dtype=np.int32)
            # One native call fills and applies on CPU logits; elsewhere the filled bitmask
            # goes to the logits' device.
            ms = [live[i] for i in rows]
            if not mask_logits(ms, bitmask, native_logits(scores, bitmask), rows):
                apply_bitmask(scores, bitmask, rows)
        return scores

    def output_tokens(self, row: int = 0) -> list:
        """The tokens row ``row`` generated (as accepted by its matcher)."""
        return self.matchers[row].accepted_tokens()
