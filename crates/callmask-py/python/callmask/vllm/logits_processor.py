"""callmask as a vLLM logits processor, on both of vLLM's model-runner interfaces.

One class, :class:`CallmaskLogitsProcessor`, implements the V1 interface
(``vllm/v1/sample/logits_processor/interface.py``: ``update_state(batch_update)`` then
``apply(logits)``) and the V2 model runner's (``vllm/v1/worker/gpu/sample/logits_processor/``:
``add_request(slot, params)`` then ``apply(logits, ctx)``), so the same
``--logits-processors callmask.vllm:CallmaskLogitsProcessor`` works whichever runner vLLM picks.
Which interface an instance serves is decided by its constructor's arguments.

Per request (``SamplingParams.extra_args["callmask"]``, set by callmask's tool parser for
OpenAI tool requests, or by hand / ``vllm_xargs``):

- the request's ``max_tokens`` (capped by the context left after the prompt) is the matcher's
  token budget, end-of-generation token included: every token allowed keeps a complete output
  within it, so every constrained request ends by itself with ``finish_reason: "stop"``;
- ``min_tokens`` is refused at admission (the grammar decides where an output may end; vLLM's
  own min-tokens stage would forbid the end token where it is the only one allowed);
- with async scheduling, output lists carry ``-1`` placeholders until repaired: the processor
  asks for repaired lists (``needs_output_token_ids``) and never feeds a placeholder;
- one native call per step masks every constrained row (:func:`callmask._callmask.mask_logits`:
  the rows' bitmasks filled in parallel, end tokens filtered, and CPU logits written in place,
  GIL released); CUDA logits take the filled bitmask through the engine's fused kernel
  (:func:`callmask.bitmask.apply_token_bitmask_inplace`); one more feeds the step's sampled
  tokens to every row (:func:`callmask._callmask.accept_batch`);
- V1 overlaps the grammar's work with the forward pass, as vLLM does for its own structured
  outputs: ``update_state`` (called before the forward pass) hands the new tokens to a worker
  thread that feeds them and fills the step's bitmasks in one native call
  (:func:`callmask._callmask.accept_and_mask`: the GIL taken once, released while it works, as
  the forward pass's thread holds it between torch calls); ``apply`` waits for it
  and only writes the logits. Rows the worker could not take (a compile not finished, an output
  token not known yet under async scheduling) are fed and filled in ``apply``;
  ``overlap_masks = False`` does all of it there. The V2 runner calls nothing before the
  forward pass: it feeds and fills in ``apply``;
- compiles: a request's grammar compiles on a worker thread from the moment vLLM adds it
  (before the forward pass), its start state's first mask computed there too, so the step's
  mask call finds it ready unless the compile outlasts the forward pass; only a tool set never
  seen compiles (the automata are cached by spec), and the step waits for that remainder only
  (measured by ``scripts/vllm-bench.sh`` as the cold batch's stall).
- speculative decoding: vLLM's V1 runner refuses custom logits processors with it (so does
  this class, with a message); on the V2 runner each draft row is masked for the state after
  the drafts before it (rows are re-derived every step, so rejected drafts need no rollback).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Optional

import numpy as np

from .._callmask import Vocab, accept_and_mask, mask_logits
from .._common import AutomatonCache, grammar_from_spec, spec_key
from ..bitmask import apply_token_bitmask_inplace, bitmask_words, native_logits
from ._constraint import Constraint, feed_all, logger, record_fed
from ._spec import COMPILE_CACHES, client_error, given_spec

try:  # pragma: no cover - depends on vLLM being installed
    from vllm.v1.sample.logits_processor import LogitsProcessor as _V1
except Exception:  # vLLM absent: plain classes with the same methods
    _V1 = object  # type: ignore[assignment,misc]
try:  # pragma: no cover
    from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsProcessor as _V2
except Exception:
    _V2 = object  # type: ignore[assignment,misc]

_BASES = tuple(b for b in dict.fromkeys((_V1, _V2)) if b is not object) or (object,)

SPEC_DECODING_REFUSED = (
    "callmask: vLLM's V1 model runner does not run custom logits processors with speculative "
    "decoding; use the V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1) or turn speculative "
    "decoding off"
)


def vocab_for_model(vllm_config: Any) -> Vocab:
    """The vocabulary of the served model: vLLM's own tokenizer for the model config when vLLM
    is installed, else the ``tokenizer.json`` of the config's tokenizer directory. The model's
    end-of-generation ids (``generation_config.json``) are added."""
    model_config = vllm_config.model_config
    eos = _generation_eos(model_config)
    tokenizer = None
    try:  # pragma: no cover - needs vLLM
        from vllm.tokenizers.registry import cached_tokenizer_from_config

        tokenizer = cached_tokenizer_from_config(model_config)
    except ImportError:
        try:
            from vllm.transformers_utils.tokenizer import cached_tokenizer_from_config as old

            tokenizer = old(model_config)
        except ImportError:
            pass
    if getattr(model_config, "skip_tokenizer_init", False):
        raise ValueError(
            "callmask: the model runs without a tokenizer (skip_tokenizer_init); callmask needs its vocabulary"
        )
    if tokenizer is not None:
        return Vocab.from_hf(tokenizer, eos_token_ids=eos)
    path = getattr(model_config, "tokenizer", None) or model_config.model
    return Vocab.from_tokenizer_json(os.path.join(path, "tokenizer.json"), eos_token_ids=eos)


def _generation_eos(model_config: Any) -> list:
    try:
        cfg = model_config.try_get_generation_config() or {}
    except Exception:
        return []
    eos = cfg.get("eos_token_id") if isinstance(cfg, dict) else None
    if eos is None:
        return []
    return [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]


def request_stop_tokens(params: Any) -> set:
    """The token ids vLLM stops this request on: its ``eos_token_id`` (unset with
    ``ignore_eos``) and its ``stop_token_ids`` (which vLLM extends with the model's other
    generation-config end ids). Empty when the engine filled in neither."""
    out = set(getattr(params, "stop_token_ids", None) or ())
    eos = getattr(params, "eos_token_id", None)
    if eos is not None:
        out.add(int(eos))
    return out


class _SpecKeys:
    """The specs whose grammar compiled, least recently used dropped beyond ``size``: a batch
    of requests over one tool set is validated by one compile, not one each."""

    def __init__(self, size: int = 256):
        self.size = size
        self._lock = threading.Lock()
        self._keys: "OrderedDict[str, None]" = OrderedDict()

    def seen(self, key: str) -> bool:
        """True when ``key`` compiled before (and still is remembered)."""
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return True
            return False

    def add(self, key: str) -> None:
        """Remembers that ``key`` compiled."""
        with self._lock:
            self._keys[key] = None
            while len(self._keys) > self.size:
                self._keys.popitem(last=False)


_VALIDATED = _SpecKeys()


class _Prefill:
    """A step's tokens being fed and bitmasks filled on the worker thread while the model runs:
    row ``k`` of ``bitmask`` for batch index ``rows[k]``, request ``constraints[k]``; ``fed``,
    once done, each request's tokens fed after its feeding."""

    __slots__ = ("future", "bitmask", "rows", "constraints", "fed", "width")

    def __init__(
        self, future: "Future[Any]", bitmask: np.ndarray, rows: list, constraints: list, width: int
    ):
        self.future = future
        self.bitmask = bitmask
        self.rows = rows
        self.constraints = constraints
        self.fed: list = []
        self.width = width

    def wait(self) -> bool:
        """Waits for the worker; False when it failed (logged; its rows are then fed from where
        it stopped and filled in ``apply``)."""
        try:
            self.fed = self.future.result()
            return True
        except Exception as e:
            logger.warning("callmask: the overlapped fill failed (%s); filling in apply", e)
            return False


def _feed_and_fill(
    constraints: list, tokens: list, bitmask: np.ndarray, ends: list, forbidden: Optional[list]
) -> list:
    """The worker's part of a V1 step: feeds ``tokens[k]`` to ``constraints[k]``, fills bitmask
    row ``k`` for it (end tokens only where it failed, nothing needed where it ended); returns
    each request's tokens fed."""
    fed = accept_and_mask(
        [c.matcher() for c in constraints], tokens, bitmask, ends=ends, forbidden=forbidden
    )
    record_fed(constraints, tokens, fed)
    return [c.fed for c in constraints]


class CallmaskLogitsProcessor(*_BASES):  # type: ignore[misc]
    """A vLLM logits processor constraining the requests that carry a callmask spec (V1 and V2
    model runners; see the module doc). Requests without one are left untouched."""

    overlap_masks: bool = True
    """V1: fill the step's bitmasks on a worker thread from ``update_state``, during the forward
    pass (see the module doc); False: in ``apply``."""

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Refuses at admission (HTTP 400 in the OpenAI server, ``param`` naming the tool and
        schema path: :func:`callmask.vllm._spec.client_error`) a malformed spec, a grammar that
        does not compile, and ``min_tokens`` on a constrained request. callmask's own faults
        stay what they are (HTTP 500)."""
        spec = given_spec(sampling_params)
        if spec is None:
            return
        if (getattr(sampling_params, "min_tokens", 0) or 0) > 0:
            raise ValueError(
                "callmask: min_tokens is not supported on a callmask-constrained request (the "
                "grammar decides where the output may end)"
            )
        try:
            key = spec_key(spec)
            if not _VALIDATED.seen(key):
                grammar_from_spec(spec, caches=COMPILE_CACHES)
                _VALIDATED.add(key)
        except Exception as e:
            raise client_error(e) from e

    def __init__(self, vllm_config: Any, device_or_states: Any = None, is_pin_memory: bool = False):
        # V2 passes a LogitsProcRequestState (it has the token history); V1 a device.
        self._v2 = hasattr(device_or_states, "all_token_ids")
        self.req_states = device_or_states if self._v2 else None
        if not self._v2 and getattr(vllm_config, "speculative_config", None):
            raise ValueError(SPEC_DECODING_REFUSED)
        self.vocab = vocab_for_model(vllm_config)
        self.automata = AutomatonCache(self.vocab, caches=COMPILE_CACHES)
        model_config = getattr(vllm_config, "model_config", None)
        self.max_model_len = getattr(model_config, "max_model_len", None)
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="callmask-compile")
        self.rows: dict = {}  # V1: batch index -> Constraint; V2: request slot -> Constraint
        self._outputs: dict = {}  # V1: batch index -> vLLM's live output list
        self._bitmask: Optional[np.ndarray] = None
        self._eos_row: Optional[np.ndarray] = None
        # V1's overlapped masks: one worker, the step in flight, the logits' last width.
        self._fill_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="callmask-mask")
        self._prefill: Optional[_Prefill] = None
        self._width: Optional[int] = None
        self.overlapped_rows = 0
        """Rows whose bitmask was filled during the forward pass (V1), since construction."""
        self.masked_rows = 0
        """Rows masked, since construction."""

    # -- shared ----------------------------------------------------------------------------

    def is_argmax_invariant(self) -> bool:
        """False: the mask changes which token is most likely."""
        return False

    def needs_output_token_ids(self) -> bool:
        """True: the processor reads each request's output tokens (vLLM then repairs async
        scheduling's placeholders before calling it)."""
        return True

    def _start(
        self, params: Any, prompt_len: Optional[int], request: str = ""
    ) -> Optional[Constraint]:
        spec = given_spec(params)
        if spec is None:
            return None
        budget = getattr(params, "max_tokens", None)
        if self.max_model_len is not None and prompt_len is not None:
            left = self.max_model_len - prompt_len
            budget = left if budget is None else min(budget, left)

        stoppers = request_stop_tokens(params)
        ends = self.vocab.eos_token_ids
        forbidden = [t for t in ends if t not in stoppers] if stoppers else []

        def compile_matcher() -> Any:
            if len(forbidden) == len(ends):
                raise ValueError(
                    f"none of the vocabulary's end-of-generation tokens {ends} stops this request "
                    f"(its stop tokens: {sorted(stoppers)})"
                )
            m = self.automata.get(spec).matcher(max_tokens=budget)
            m.fill_bitmask(np.zeros(bitmask_words(len(self.vocab)), dtype=np.int32))
            return m  # its first mask computed here, off the step (the automaton caches it)

        future: "Future[Any]" = self._pool.submit(compile_matcher)
        return Constraint(future, request, forbidden)

    def _buffer(self, rows: int, width: int) -> np.ndarray:
        """A reused int32 numpy bitmask of at least ``rows`` rows for logits ``width`` wide
        (copied to the logits' device when applied; numpy memory is shared with torch)."""
        words = bitmask_words(width)
        b = self._bitmask
        if b is None or b.shape[0] < rows or b.shape[1] != words:
            b = np.zeros((max(rows, 8), words), dtype=np.int32)
            self._bitmask = b
            row = np.zeros(words, dtype=np.uint32)
            for t in self.vocab.eos_token_ids:
                if t < words * 32:
                    row[t >> 5] |= np.uint32(1 << (t & 31))
            self._eos_row = row.view(np.int32)
        return b

    def _start_prefill(self) -> None:
        """V1, before the forward pass: feeds the new output tokens and fills the bitmasks on
        the worker thread, for the rows whose request is compiled and whose new tokens are all
        known; feeds the others' known tokens here (their masks are filled in ``apply``)."""
        width = self._width
        rows: list = []
        constraints: list = []
        tokens: list = []
        here: list = []  # (constraint, new tokens) fed on this thread
        for index in sorted(self.rows):
            c = self.rows[index]
            if not c.ready():
                continue  # its compile is not awaited here
            new = list(self._outputs[index][c.fed :])
            if not self.overlap_masks or width is None or c.is_done() or any(t < 0 for t in new):
                if new:
                    here.append((c, new))
                continue
            rows.append(index)
            constraints.append(c)
            tokens.append(new)
        if here:
            feed_all([c for c, _ in here], [t for _, t in here])
        if not rows or width is None:
            return
        # Its own array, not the reused buffer: apply may fill other rows there meanwhile.
        bitmask = np.empty((len(rows), bitmask_words(width)), dtype=np.int32)
        forbidden = [c.forbidden_ends for c in constraints]
        future = self._fill_pool.submit(
            _feed_and_fill,
            constraints,
            tokens,
            bitmask,
            self.vocab.eos_token_ids,
            forbidden if any(forbidden) else None,
        )
        self._prefill = _Prefill(future, bitmask, rows, constraints, width)

    def _take_prefill(self) -> Optional[_Prefill]:
        """Waits for the fill in flight, if any, and hands it over (None when it failed)."""
        pre, self._prefill = self._prefill, None
        if pre is None or not pre.wait():
            return None
        return pre

    def _mask_rows(self, logits: Any, rows: list, matchers: list, constraints: list) -> Any:
        """Masks logits rows ``rows``; ``matchers[k]`` for ``rows[k]`` (None: end-of-generation
        only), less the end tokens ``constraints[k]`` does not stop on: one native call (CPU
        logits written there; others through the engine's kernel)."""
        buf = self._buffer(len(rows), logits.shape[-1])[: len(rows)]
        forbidden = [c.forbidden_ends for c in constraints]
        written = mask_logits(
            matchers,
            buf,
            native_logits(logits, buf),
            rows,
            ends=self.vocab.eos_token_ids,
            forbidden=forbidden if any(forbidden) else None,
        )
        if written:
            return logits
        return apply_token_bitmask_inplace(logits, buf, rows, bitmask_rows=range(len(rows)))

    # -- V1 ----------------------------------------------------------------------------------

    def update_state(self, batch_update: Any) -> None:
        """V1: applies removed, added, moved requests (in that order), then starts feeding each
        constrained request's new output tokens to its matcher and filling the step's bitmasks
        on the worker thread (see ``overlap_masks``)."""
        self._take_prefill()  # a fill not applied (no apply since): done before feeding again
        if batch_update is not None:
            for index in batch_update.removed:
                self.rows.pop(index, None)
                self._outputs.pop(index, None)
            for index, params, prompt_ids, output_ids in batch_update.added:
                prompt_len = len(prompt_ids) if prompt_ids is not None else None
                c = self._start(params, prompt_len)
                if c is None:
                    self.rows.pop(index, None)
                    self._outputs.pop(index, None)
                else:
                    self.rows[index] = c
                    self._outputs[index] = output_ids
            for a, b, direction in batch_update.moved:
                swap = getattr(direction, "name", str(direction)) == "SWAP"
                for table in (self.rows, self._outputs):
                    va, vb = table.pop(a, None), table.pop(b, None)
                    if va is not None:
                        table[b] = va
                    if swap and vb is not None:
                        table[a] = vb
        self._start_prefill()

    def _apply_v1(self, logits: Any) -> Any:
        self._width = int(logits.shape[-1])
        pre = self._take_prefill()
        if pre is not None and pre.width != self._width:
            pre = None
        rows: list = []
        matchers: list = []
        constraints: list = []
        pending = [(c, self._outputs[i]) for i, c in self.rows.items()]
        pending = [(c, out) for c, out in pending if len(out) > c.fed]
        if pending:
            feed_all([c for c, _ in pending], [out[c.fed :] for c, out in pending])
        filled = {}  # batch index -> row of pre.bitmask, where that fill still holds
        if pre is not None:
            for k, (index, req, fed) in enumerate(zip(pre.rows, pre.constraints, pre.fed)):
                if req.fed == fed and not req.is_done() and self.rows.get(index) is req:
                    filled[index] = k
        for index in sorted(self.rows):
            c = self.rows[index]
            if c.is_done() or index in filled:
                continue
            rows.append(index)
            matchers.append(c.matcher())
            constraints.append(c)
        self.overlapped_rows += len(filled)
        self.masked_rows += len(filled) + len(rows)
        if filled and pre is not None:
            overlapped = sorted(filled)
            apply_token_bitmask_inplace(
                logits, pre.bitmask, overlapped, bitmask_rows=[filled[i] for i in overlapped]
            )
        if not rows:
            return logits
        return self._mask_rows(logits, rows, matchers, constraints)

    # -- V2 ----------------------------------------------------------------------------------

    def _states(self) -> Any:
        if self.req_states is None:
            raise RuntimeError("callmask: a V2 call on a processor built for vLLM's V1 runner")
        return self.req_states

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        """V2: starts the request in slot ``req_idx`` (compiling off the step loop); True when
        callmask constrains it."""
        rs = self._states()
        prompt_len = int(rs.prompt_len.np[req_idx])
        c = self._start(sampling_params, prompt_len)
        if c is None:
            self.rows.pop(req_idx, None)
            return False
        self.rows[req_idx] = c
        return True

    def _committed(self, slots: list) -> dict:
        """V2: each slot's committed output tokens not fed yet, read from the model runner's
        token history (one device-to-host copy per step)."""
        import torch

        rs = self._states()
        idx = torch.as_tensor(slots, dtype=torch.long, device=rs.all_token_ids.gpu.device)
        total = rs.total_len.gpu.index_select(0, idx).cpu().tolist()
        out = {}
        for slot, end in zip(slots, total):
            start = int(rs.prompt_len.np[slot]) + self.rows[slot].fed
            if end > start:
                out[slot] = rs.all_token_ids.gpu[slot, start:end].cpu().tolist()
            else:
                out[slot] = []
        return out

    def _apply_v2(self, logits: Any, ctx: Any) -> Any:
        slots_np = ctx.idx_mapping_np
        live = sorted({int(s) for s in slots_np if int(s) in self.rows})
        if not live:
            return logits
        committed = [(self.rows[slot], t) for slot, t in self._committed(live).items() if t]
        if committed:
            feed_all([c for c, _ in committed], [t for _, t in committed])
        n_rows = logits.shape[0]
        if n_rows == len(slots_np):  # one row per request: no drafts
            row_slots = [int(s) for s in slots_np]
            local = [0] * n_rows
            inputs = None
        else:
            row_slots = ctx.expanded_idx_mapping.cpu().tolist()
            local = ctx.expanded_local_pos.cpu().tolist()
            inputs = ctx.input_ids.cpu().tolist()
        rows: list = []
        matchers: list = []
        constraints: list = []
        for r, slot in enumerate(row_slots):
            c = self.rows.get(slot)
            if c is None or c.is_done():
                continue
            m = c.matcher()
            if m is not None and local[r] > 0:
                m = m.fork()
                drafts = inputs[r - local[r] + 1 : r + 1] if inputs is not None else []
                if not m.accept_tokens(drafts):
                    m = None  # the draft is rejected at an earlier row: this row is discarded
            rows.append(r)
            matchers.append(m)
            constraints.append(c)
        if not rows:
            return logits
        return self._mask_rows(logits, rows, matchers, constraints)

    # -- both --------------------------------------------------------------------------------

    def apply(self, logits: Any, ctx: Any = None) -> Any:
        """Masks the rows of constrained requests (forbidden tokens to -inf), in place, on the
        logits' device; returns ``logits``."""
        if self._v2:
            return self._apply_v2(logits, ctx)
        return self._apply_v1(logits)
