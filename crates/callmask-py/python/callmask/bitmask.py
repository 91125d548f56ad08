"""Token bitmasks on the engine's side: allocating them and applying them to logits.

The layout is the one vLLM, SGLang, llguidance and XGrammar share: int32 words, shape
``(batch, ceil(n_vocab / 32))``, token ``t`` allowed iff ``(row[t >> 5] >> (t & 31)) & 1``.
Matchers fill rows of a CPU array (numpy, or a torch CPU tensor) by pointer. Applying a bitmask
happens where the logits are:

- logits on the CPU (torch float32, bfloat16, float16; numpy float32, float16): callmask's Rust
  writes the -inf in place (:func:`callmask._callmask.apply_token_bitmask`, GIL released, rows
  in parallel past a size), with no vocabulary-wide temporary; engine adapters fill and apply in
  one call (:func:`callmask._callmask.mask_logits`);
- logits on a GPU: the engine's fused kernel where one is installed (XGrammar's
  ``apply_token_bitmask_inplace``, which vLLM and SGLang ship), else torch ops that unpack the
  words on the device (a ``(rows, words, 32)`` temporary);
- anything else (float64, other array types): numpy or torch ops.

The logits may be wider than the bitmask covers (a model pads its vocabulary): tokens past the
bitmask's ``32 * words`` are never allowed.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

__all__ = [
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_words",
    "bool_mask",
]


def bitmask_words(n_vocab: int) -> int:
    """Words per bitmask row for a vocabulary (or logits width) of ``n_vocab``."""
    if n_vocab < 0:
        raise ValueError(f"n_vocab must be >= 0, not {n_vocab}")
    return (n_vocab + 31) // 32


def allocate_token_bitmask(batch: int, n_vocab: int, *, pin_memory: bool = False) -> Any:
    """An int32 torch CPU tensor ``(batch, ceil(n_vocab / 32))``, all tokens allowed (-1), for
    matchers to fill (``Matcher.fill_bitmask(bitmask, row)``); ``pin_memory`` for fast copies
    to a CUDA device."""
    import torch

    if batch < 0:
        raise ValueError(f"batch must be >= 0, not {batch}")
    out = torch.full((batch, bitmask_words(n_vocab)), -1, dtype=torch.int32)
    return out.pin_memory() if pin_memory else out


_SHIFTS: dict = {}


def _shifts(device: Any) -> Any:
    import torch

    s = _SHIFTS.get(device)
    if s is None:
        s = torch.arange(32, dtype=torch.int32, device=device)
        _SHIFTS[device] = s
    return s


def _allowed_torch(bitmask: Any, width: int) -> Any:
    """Boolean ``(rows, width)`` on the bitmask's device."""
    import torch

    words = bitmask.shape[-1]
    bits = (bitmask.unsqueeze(-1) >> _shifts(bitmask.device)) & 1
    allowed = bits.reshape(bitmask.shape[0], words * 32).bool()
    if words * 32 >= width:
        return allowed[:, :width]
    pad = torch.zeros(
        (bitmask.shape[0], width - words * 32), dtype=torch.bool, device=bitmask.device
    )
    return torch.cat([allowed, pad], dim=1)


def bool_mask(bitmask: Any, width: int) -> Any:
    """Boolean allowed-token array(s) of width ``width`` from an int32 bitmask, as numpy (a torch
    tensor is read on the CPU)."""
    import numpy as np

    if not isinstance(bitmask, np.ndarray):
        bitmask = bitmask.cpu().numpy()
    bits = np.unpackbits(np.ascontiguousarray(bitmask).view(np.uint8), axis=-1, bitorder="little")
    out = np.zeros(bits.shape[:-1] + (width,), dtype=bool)
    n = min(width, bits.shape[-1])
    out[..., :n] = bits[..., :n].astype(bool)
    return out


def _check(logits: Any, bitmask: Any) -> None:
    if len(logits.shape) not in (1, 2) or len(bitmask.shape) not in (1, 2):
        raise ValueError(
            f"apply_token_bitmask_inplace: logits and bitmask must be 1-D or 2-D, not "
            f"{tuple(logits.shape)} and {tuple(bitmask.shape)}"
        )
    if str(bitmask.dtype) not in ("int32", "torch.int32"):
        raise TypeError(f"apply_token_bitmask_inplace: bitmask must be int32, not {bitmask.dtype}")


_NATIVE_TORCH = ("torch.float32", "torch.bfloat16", "torch.float16")
_NATIVE_NUMPY = ("float32", "float16")


def _native_ok(logits: Any, bitmask: Any) -> bool:
    """True when the Rust apply takes these buffers as they are (CPU, a supported dtype,
    elements contiguous within a row, a contiguous CPU int32 bitmask)."""
    import numpy as np

    if isinstance(logits, np.ndarray):
        if str(logits.dtype) not in _NATIVE_NUMPY or not logits.flags.writeable:
            return False
        if logits.ndim in (1, 2) and logits.shape[-1] > 1 and logits.strides[-1] != logits.itemsize:
            return False  # elements apart (a record array's field, a transposed view)
    elif hasattr(logits, "data_ptr"):
        if logits.device.type != "cpu" or str(logits.dtype) not in _NATIVE_TORCH:
            return False
        if logits.dim() in (1, 2) and logits.shape[-1] > 1 and logits.stride(-1) != 1:
            return False
        if logits.dim() == 2 and logits.shape[0] > 1 and logits.stride(0) < logits.shape[1]:
            return False
    else:
        return False
    if isinstance(bitmask, np.ndarray):
        return bool(bitmask.flags.c_contiguous and bitmask.flags.writeable)
    return bool(
        hasattr(bitmask, "data_ptr")
        and bitmask.device.type == "cpu"
        and bitmask.is_contiguous()
        and not getattr(bitmask, "requires_grad", False)
    )


def native_logits(logits: Any, bitmask: Any) -> Optional[Any]:
    """``logits`` when callmask's Rust writes them in place (see :func:`_native_ok`), else None:
    what an adapter passes to :func:`callmask.mask_logits`, applying the bitmask itself (with
    :func:`apply_token_bitmask_inplace`) when None."""
    return logits if _native_ok(logits, bitmask) else None


def _cuda_kernel() -> Any:
    """XGrammar's fused ``apply_token_bitmask_inplace`` (CUDA/Triton), or None."""
    global _KERNEL
    if _KERNEL is _UNSET:
        try:
            from xgrammar import apply_token_bitmask_inplace as kernel  # type: ignore

            _KERNEL = kernel
        except Exception:
            _KERNEL = None
    return _KERNEL


_UNSET: Any = object()
_KERNEL: Any = _UNSET


def apply_token_bitmask_inplace(
    logits: Any,
    bitmask: Any,
    indices: Optional[Sequence[int]] = None,
    *,
    bitmask_rows: Optional[Sequence[int]] = None,
) -> Any:
    """Sets the logits of forbidden tokens to -inf, in place, and returns ``logits``.

    ``logits``: a torch tensor on any device or a numpy array, ``(rows, vocab)`` or
    ``(vocab,)``. ``bitmask``: int32 ``(rows, words)`` (torch, any device, or numpy). Without
    ``indices`` every logits row takes the bitmask row of the same number; with ``indices`` only
    those logits rows are masked, each with the bitmask row of the same number (XGrammar's
    convention), or with ``bitmask_rows[k]`` for ``indices[k]`` when given (a compact bitmask
    holding only the constrained rows). CPU logits are written by callmask's Rust, CUDA logits
    by the engine's fused kernel when installed (see the module doc).
    """
    _check(logits, bitmask)
    if indices is None and bitmask_rows is not None:
        raise ValueError("apply_token_bitmask_inplace: bitmask_rows needs indices")
    if _native_ok(logits, bitmask):
        from ._callmask import BitmaskError, apply_token_bitmask

        try:
            apply_token_bitmask(
                logits,
                bitmask,
                None if indices is None else [int(i) for i in indices],
                None if bitmask_rows is None else [int(i) for i in bitmask_rows],
            )
        except BitmaskError as e:  # shapes that do not fit: nothing was written
            raise ValueError(f"apply_token_bitmask_inplace: {e}") from None
        return logits
    if getattr(getattr(logits, "device", None), "type", "cpu") == "cuda":
        kernel = _cuda_kernel()
        if kernel is not None and str(logits.dtype) in _NATIVE_TORCH:
            return _apply_with_kernel(kernel, logits, bitmask, indices, bitmask_rows)
    return _apply_reference(logits, bitmask, indices, bitmask_rows)


def _apply_with_kernel(
    kernel: Any,
    logits: Any,
    bitmask: Any,
    indices: Optional[Sequence[int]],
    bitmask_rows: Optional[Sequence[int]],
) -> Any:
    """The engine's fused kernel on the logits' device; a compact bitmask is first spread to
    the logits rows it names (XGrammar's kernel reads bitmask row ``i`` for logits row ``i``)."""
    import numpy as np
    import torch

    if indices is not None and len(indices) == 0:
        return logits
    squeeze = len(logits.shape) == 1
    view = logits.unsqueeze(0) if squeeze else logits
    if isinstance(bitmask, np.ndarray):
        bitmask = torch.from_numpy(np.ascontiguousarray(bitmask))
    bm = bitmask if bitmask.dim() == 2 else bitmask.unsqueeze(0)
    if indices is not None and bitmask_rows is not None:
        full = torch.full((view.shape[0], bm.shape[1]), -1, dtype=torch.int32)
        full[torch.as_tensor(list(indices), dtype=torch.long)] = bm.cpu()[
            torch.as_tensor(list(bitmask_rows), dtype=torch.long)
        ]
        bm = full
    elif indices is None and bm.shape[0] != view.shape[0]:
        raise ValueError(
            f"apply_token_bitmask_inplace: {bm.shape[0]} bitmask rows for "
            f"{view.shape[0]} logits rows"
        )
    bm = bm.to(view.device, non_blocking=True)
    width = view.shape[-1]
    if bm.shape[1] * 32 < width:  # logits wider than the bitmask: the rest is forbidden
        rows = list(range(view.shape[0])) if indices is None else list(indices)
        view[rows, bm.shape[1] * 32 :] = float("-inf")
    kernel(
        view,
        bm,
        vocab_size=min(width, bm.shape[1] * 32),
        indices=None if indices is None else list(indices),
    )
    return logits


def _apply_reference(
    logits: Any,
    bitmask: Any,
    indices: Optional[Sequence[int]],
    bitmask_rows: Optional[Sequence[int]],
) -> Any:
    """The apply in numpy or torch ops (any dtype, any device): the reference the native
    apply is tested against."""
    squeeze = len(logits.shape) == 1
    width = logits.shape[-1]
    import numpy as np

    if isinstance(logits, np.ndarray):
        view = logits[None, :] if squeeze else logits
        bm = bitmask if len(bitmask.shape) == 2 else bitmask[None, :]
        allowed = bool_mask(bm, width)
        if indices is None:
            if allowed.shape[0] != view.shape[0]:
                raise ValueError(
                    f"apply_token_bitmask_inplace: {allowed.shape[0]} bitmask rows for "
                    f"{view.shape[0]} logits rows"
                )
            view[~allowed] = -np.inf
        else:
            src = list(bitmask_rows) if bitmask_rows is not None else list(indices)
            for r, k in zip(indices, src):
                view[r][~allowed[k]] = -np.inf
        return logits

    import torch

    view = logits.unsqueeze(0) if squeeze else logits
    if isinstance(bitmask, np.ndarray):
        bitmask = torch.from_numpy(np.ascontiguousarray(bitmask))
    bm = bitmask if bitmask.dim() == 2 else bitmask.unsqueeze(0)
    bm = bm.to(view.device, non_blocking=True)
    if indices is None:
        if bm.shape[0] != view.shape[0]:
            raise ValueError(
                f"apply_token_bitmask_inplace: {bm.shape[0]} bitmask rows for "
                f"{view.shape[0]} logits rows"
            )
        view.masked_fill_(~_allowed_torch(bm, width), float("-inf"))
        return logits
    idx = torch.as_tensor(list(indices), dtype=torch.long, device=view.device)
    bm_idx = (
        idx
        if bitmask_rows is None
        else torch.as_tensor(list(bitmask_rows), dtype=torch.long, device=view.device)
    )
    if idx.numel() == 0:
        return logits
    forbid = ~_allowed_torch(bm.index_select(0, bm_idx), width)
    sub = view.index_select(0, idx).masked_fill_(forbid, float("-inf"))
    view.index_copy_(0, idx, sub)
    return logits
