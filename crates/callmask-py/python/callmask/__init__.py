"""callmask: token masks that make an LLM's tool calls (and JSON) impossible to get wrong.

Once per model, a :class:`Vocab`; once per tool set or schema, a :class:`Grammar` and its
:class:`TokenAutomaton`; per sequence a :class:`Matcher`; per token ``fill_bitmask`` then
``accept_token``. After generation, ``grammar.parse(text)`` (or a :class:`StreamParser`) gives
OpenAI-shaped ``tool_calls``.

>>> import callmask, numpy as np
>>> vocab = callmask.Vocab.from_parts([b"{", b"}", b'"a"', b":", b"1", b"<eos>"],
...                                   [False] * 5 + [True], [5])
>>> schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
>>> grammar = callmask.Grammar.from_json_schema(schema, max_whitespace=0)
>>> matcher = callmask.TokenAutomaton(grammar, vocab).matcher()
>>> bitmask = np.zeros(callmask.bitmask_shape(len(vocab)), dtype=np.int32)
>>> for token in [0, 2, 3, 4, 1, 5]:
...     matcher.fill_bitmask(bitmask)
...     assert (bitmask[0, token // 32] >> (token % 32)) & 1
...     assert matcher.accept_token(token)
>>> matcher.is_terminated()
True

Engines apply masks with :func:`allocate_token_bitmask` and :func:`apply_token_bitmask_inplace`
(torch tensors on their own device, or numpy). Adapters: :mod:`callmask.transformers`, :mod:`callmask.llama_cpp`, :mod:`callmask.vllm`,
:mod:`callmask.sglang` (each imports its engine only when used).
"""

from ._callmask import (
    DEFAULT_CACHE_BYTES,
    HAS_LLAMA,
    BitmaskError,
    BudgetError,
    Caches,
    CallmaskError,
    DialectError,
    ForbiddenTokenError,
    Grammar,
    InvalidSchemaError,
    LimitExceededError,
    Matcher,
    ParseError,
    RollbackError,
    StreamParser,
    TokenAutomaton,
    ToolsError,
    UnsupportedKeywordError,
    Vocab,
    VocabError,
    accept_and_mask,
    accept_batch,
    bitmask_shape,
    fill_bitmasks,
    mask_logits,
    render_prompt,
)
from .bitmask import allocate_token_bitmask, apply_token_bitmask_inplace

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "HAS_LLAMA",
    "BitmaskError",
    "BudgetError",
    "Caches",
    "CallmaskError",
    "DialectError",
    "ForbiddenTokenError",
    "Grammar",
    "InvalidSchemaError",
    "LimitExceededError",
    "Matcher",
    "ParseError",
    "RollbackError",
    "StreamParser",
    "TokenAutomaton",
    "ToolsError",
    "UnsupportedKeywordError",
    "Vocab",
    "VocabError",
    "accept_and_mask",
    "accept_batch",
    "bitmask_shape",
    "fill_bitmasks",
    "mask_logits",
    "render_prompt",
    "allowed_from_bitmask",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
]


def allowed_from_bitmask(bitmask, vocab_size):
    """The allowed-token boolean vector(s) of an int32 bitmask (numpy), ``[..., :vocab_size]``.

    For engines that apply masks as booleans (``logits[~allowed] = -inf``).
    """
    import numpy as np

    bits = np.unpackbits(np.ascontiguousarray(bitmask).view(np.uint8), axis=-1, bitorder="little")
    return bits[..., :vocab_size].astype(bool)
