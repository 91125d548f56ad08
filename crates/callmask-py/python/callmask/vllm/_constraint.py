"""One constrained vLLM request inside the worker: its matcher, compiled off the step loop, the
output tokens fed to it so far, and whether it failed.

Both logits-processor interfaces (V1 and the V2 model runner) keep one of these per request.
The grammar is compiled on a worker thread as soon as vLLM adds the request (before the forward
pass), and awaited only when its first mask is needed (after the forward pass), so compiling
overlaps the model's work; callmask releases the GIL while compiling.

A request never takes the engine down: a token the grammar refuses (another processor forced
it, or the engine sampled from a row with no finite logit), a budget below the shortest
complete output, or a compile error marks the request *failed*: its rows then allow only the
end-of-generation tokens, so the request ends at once (its text fails to parse as calls, which
the tool parser reports as plain content), and the reason is logged once. Placeholder tokens
(negative ids: vLLM's async scheduling writes -1 until the sampled token is known) are never fed:
feeding stops at the first one and resumes there at the next step.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import List, Optional, Sequence, Tuple

from .._callmask import Matcher, accept_batch


class VllmLog:
    """callmask's log records inside vLLM: to the ``callmask.vllm`` logger (the caller's own
    handlers, tests) and, where vLLM is installed, to ``vllm.callmask`` as well, since vLLM's
    processes print only the records of their ``vllm`` logger tree (a ``callmask.vllm`` record
    never reached vLLM's server log)."""

    def __init__(self) -> None:
        self.own = logging.getLogger("callmask.vllm")
        self.server: Optional[logging.Logger] = None
        try:  # pragma: no cover - depends on vLLM being installed
            from vllm.logger import init_logger

            self.server = init_logger("vllm.callmask")
        except Exception:
            pass

    def warning(self, msg: str, *args: object) -> None:
        self.own.warning(msg, *args)
        if self.server is not None:
            self.server.warning(msg, *args)

    def error(self, msg: str, *args: object) -> None:
        self.own.error(msg, *args)
        if self.server is not None:
            self.server.error(msg, *args)


logger = VllmLog()


class Constraint:
    """The callmask state of one request (see the module doc)."""

    __slots__ = ("_future", "_matcher", "fed", "failure", "request", "forbidden_ends")

    def __init__(
        self, future: "Future[Matcher]", request: str = "", forbidden_ends: Sequence[int] = ()
    ):
        self._future = future
        # The vocabulary's end-of-generation tokens this request does not stop on (vLLM stops
        # on its eos_token_id and stop_token_ids only): never allowed.
        self.forbidden_ends = list(forbidden_ends)
        self._matcher: Optional[Matcher] = None
        self.fed = 0
        self.failure: Optional[str] = None
        self.request = request

    def matcher(self) -> Optional[Matcher]:
        """The matcher (waiting for the compile if needed); None once the request failed."""
        if self._matcher is None and self.failure is None:
            try:
                self._matcher = self._future.result()
            except Exception as e:  # compile errors, budget below the shortest output
                self.fail(f"could not start: {e}")
        return None if self.failure is not None else self._matcher

    def ready(self) -> bool:
        """True when the compile has ended (so :meth:`matcher` does not wait)."""
        return self._matcher is not None or self.failure is not None or self._future.done()

    def fail(self, why: str) -> None:
        """Marks the request failed (its rows allow only end-of-generation from now on)."""
        if self.failure is None:
            self.failure = why
            logger.error("callmask: request %s ends early: %s", self.request or "?", why)

    def feed(self, output_ids: Sequence[int]) -> None:
        """Feeds the request's whole output list from where the last feed stopped."""
        self.feed_new(output_ids[self.fed :])

    def feed_new(self, tokens: Sequence[int]) -> None:
        """Feeds output tokens that follow the ones fed so far, stopping at the first
        placeholder (a negative id)."""
        m = self.matcher()
        if m is None:
            return
        for t in tokens:
            t = int(t)
            if t < 0:
                return
            if m.is_terminated():
                # The engine went on past the end (it stops on the end token itself, so this is a
                # token it appended regardless, e.g. ignore_eos): nothing more to constrain.
                self.fed += 1
                continue
            if not m.accept_token(t):
                self.fail(f"token {t} at output position {self.fed} refused ({m.error()})")
                return
            self.fed += 1

    def is_done(self) -> bool:
        """True when the request needs no mask (its output ended)."""
        m = self._matcher
        return m is not None and self.failure is None and m.is_terminated()


def feed_all(constraints: Sequence[Constraint], tokens: Sequence[Sequence[int]]) -> None:
    """Feeds ``tokens[k]`` (output tokens following the ones fed so far) to ``constraints[k]``
    for every request at once: one native call (:func:`callmask._callmask.accept_batch`), with
    :meth:`Constraint.feed_new`'s rules (placeholders stop a row, a refused token fails it)."""
    live: List[Constraint] = []
    matchers: List[Matcher] = []
    lists: List[Sequence[int]] = []
    for c, t in zip(constraints, tokens):
        m = c.matcher()
        if m is not None and len(t) > 0:
            live.append(c)
            matchers.append(m)
            lists.append(t)
    if not live:
        return
    record_fed(live, lists, accept_batch(matchers, lists))


def record_fed(
    constraints: Sequence[Constraint],
    tokens: Sequence[Sequence[int]],
    results: Sequence[Tuple[int, Optional[str]]],
) -> None:
    """Records a batched feed (:func:`callmask._callmask.accept_batch`'s or
    ``accept_and_mask``'s result per row): each request's tokens fed, and its failure where a
    token was refused."""
    for c, t, (fed, why) in zip(constraints, tokens, results):
        c.fed += fed
        if why is not None:
            c.fail(f"token {t[fed]} at output position {c.fed} refused ({why})")
