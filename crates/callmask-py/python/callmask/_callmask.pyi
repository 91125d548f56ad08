"""Type stubs of the native module ``callmask._callmask`` (re-exported by ``callmask``)."""

from os import PathLike
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

HAS_LLAMA: bool
"""True when built with the ``llama`` feature (``Vocab.from_gguf`` available)."""

class CallmaskError(Exception):
    """Base class of every error callmask raises; the message is the Rust error's."""

    fault: str
    """``"request"``: the request's own fault (a server answers HTTP 400); ``"internal"``: the
    server's (HTTP 500)."""
    param: Optional[str]
    """The part of the request the error is about (``tools[f].parameters#/properties/a``,
    ``tools``, ``max_tokens``), or None."""

class InvalidSchemaError(CallmaskError):
    """Invalid JSON Schema or JSON, unresolvable ``$ref``, invalid pattern."""

class UnsupportedKeywordError(InvalidSchemaError):
    """A keyword callmask cannot enforce exactly (``lenient=True`` drops it)."""

class LimitExceededError(CallmaskError):
    """A compile limit (size, states, memory, time) was exceeded."""

class ForbiddenTokenError(CallmaskError):
    """A token the grammar does not allow here, or outside the vocabulary."""

class BitmaskError(CallmaskError):
    """The bitmask has the wrong dtype, shape, layout or size."""

class RollbackError(CallmaskError):
    """More tokens to roll back than can be undone."""

class ToolsError(CallmaskError):
    """Invalid OpenAI tools or tool_choice."""

class DialectError(CallmaskError):
    """Unknown or invalid dialect, unwritable tool, or a missing special token."""

class ParseError(CallmaskError):
    """The text is not an output of the grammar."""

class VocabError(CallmaskError):
    """The vocabulary cannot be read or is invalid."""

class BudgetError(CallmaskError):
    """The token budget is too small for the shortest complete output, or cannot be guaranteed
    with this vocabulary."""

_Json = Union[str, Mapping[str, Any], Sequence[Any]]
_Path = Union[str, "PathLike[str]"]

DEFAULT_CACHE_BYTES: int

class Caches:
    """Compiled lexemes and token walks kept across requests: bounded in bytes, LRU-evicted."""

    def __init__(self, max_bytes: int = ...) -> None: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    def stats(self) -> Dict[str, int]:
        """``entries``, ``bytes``, ``max_bytes``, ``hits``, ``misses``, ``evictions``."""
    def clear(self) -> None: ...

class Vocab:
    """A model's vocabulary: token bytes, special tokens, end-of-generation tokens."""

    @staticmethod
    def from_tokenizer_json(
        path: _Path, eos_token_ids: Optional[Sequence[int]] = None, *, eos_only: bool = False
    ) -> "Vocab":
        """Loads a Hugging Face ``tokenizer.json``; ``eos_token_ids`` adds end-of-generation ids
        (``eos_only``: replaces the file's)."""
    @staticmethod
    def from_tokenizer_json_str(
        json: str, eos_token_ids: Optional[Sequence[int]] = None, *, eos_only: bool = False
    ) -> "Vocab":
        """Loads a Hugging Face tokenizer from the text of its ``tokenizer.json``."""
    @staticmethod
    def from_hf(
        tokenizer: Any, eos_token_ids: Optional[Sequence[int]] = None, *, eos_only: bool = False
    ) -> "Vocab":
        """From a transformers fast tokenizer or a ``tokenizers.Tokenizer`` (its EOS ids too;
        ``eos_only``: only those and ``eos_token_ids``, the ones an engine stops on)."""
    @staticmethod
    def from_parts(
        tokens: Sequence[bytes],
        special: Optional[Sequence[bool]] = None,
        eos_token_ids: Sequence[int] = ...,
    ) -> "Vocab":
        """From each token's bytes, special flags and end-of-generation ids (no tokenizer)."""
    @staticmethod
    def from_gguf(path: _Path, eos_token_ids: Optional[Sequence[int]] = None) -> "Vocab":
        """From a GGUF model through llama.cpp (builds with the ``llama`` feature only)."""
    def __len__(self) -> int: ...
    @property
    def caches(self) -> Caches:
        """The vocabulary's own caches (pass them to the ``Grammar.from_*`` compiles)."""
    @property
    def eos_token_ids(self) -> list[int]:
        """End-of-generation token ids, ascending."""
    def token_bytes(self, id: int) -> Optional[bytes]:
        """The bytes of a token (a special token's: its text)."""
    def is_special(self, id: int) -> bool:
        """True for a special (control) token."""
    def special_token(self, text: str) -> Optional[int]:
        """The id of the special token with this text."""
    def tokenize(self, text: str) -> list[int]:
        """Tokenizes plain text as the model would (no BOS)."""

class Grammar:
    """A compiled JSON Schema or tool-call dialect; immutable and thread-safe."""

    @staticmethod
    def from_json_schema(
        schema: _Json, *, caches: Optional[Caches] = None, **options: Any
    ) -> "Grammar":
        """Compiles a JSON Schema (dict or JSON text). ``options``: ``CompileOptions``' fields
        (``lenient``, ``format_annotation``, ``ijson_numbers``, ``max_whitespace``,
        ``whitespace``, ``max_depth``, ``max_compile_time``, ...; docs/library.md)."""
    @staticmethod
    def from_dialect(
        name_or_path: str,
        tools: _Json,
        tool_choice: Union[str, Mapping[str, Any], None] = None,
        parallel_tool_calls: Optional[bool] = None,
        reasoning: Union[None, bool, Tuple[str, str]] = None,
        *,
        caches: Optional[Caches] = None,
        **options: Any,
    ) -> "Grammar":
        """Compiles a tool-call dialect (built-in name or file path) with OpenAI tools.
        ``options``: ``DialectOptions``' fields (``max_text_chars``, ``distinct_calls``,
        ``strict_arguments``, ``name_first``, ...) and ``CompileOptions``' (docs/library.md)."""
    @staticmethod
    def from_structural_tag(
        tag: _Json,
        vocab: Optional[Vocab] = None,
        *,
        caches: Optional[Caches] = None,
        **options: Any,
    ) -> "Grammar":
        """Compiles XGrammar's structural tag (both forms); ``vocab`` for its special tokens
        (and its caches); ``options`` as in ``from_json_schema``."""
    @staticmethod
    def detect_dialect(chat_template: Optional[str], vocab: Vocab) -> str:
        """The built-in dialect of a model's chat template (``DialectError`` if none)."""
    @staticmethod
    def derive_dialect(
        chat_template: str, vocab: Optional[Vocab] = None
    ) -> Tuple[str, str]:
        """A dialect file derived from a chat template: ``(text, summary)``
        (``DialectError`` when no layout callmask knows fits the template)."""
    @staticmethod
    def builtin_dialects() -> list[str]:
        """The built-in dialect names."""
    def parse(self, text: str, *, recover: bool = False) -> dict[str, Any]:
        """``{"content", "reasoning_content", "tool_calls"}`` in OpenAI's shape."""
    def check(self, text: str) -> Optional[str]:
        """None when the grammar accepts the whole text, else the rejection message."""
    @property
    def dropped_keywords(self) -> list[str]:
        """Keywords dropped in lenient mode."""
    @property
    def functions(self) -> list[str]:
        """The functions the grammar can call."""

class TokenAutomaton:
    """A grammar bound to a vocabulary; its mask caches are shared by its matchers."""

    def __init__(self, grammar: Grammar, vocab: Vocab) -> None: ...
    def matcher(
        self, max_rollback: Optional[int] = None, max_tokens: Optional[int] = None
    ) -> "Matcher":
        """A matcher at the start of an output."""
    def tokenize(self, text: str) -> list[int]:
        """Tokenizes as the model would, the grammar's special tokens included."""
    @property
    def vocab_size(self) -> int:
        """Number of tokens of the vocabulary."""

class Matcher:
    """One sequence's position in the grammar."""

    def fill_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Writes row ``index`` of an int32 ``(batch, ceil(n_vocab/32))`` numpy array or torch CPU tensor."""
    def allowed_tokens(self) -> list[int]:
        """The allowed next token ids."""
    def is_allowed(self, token: int) -> bool:
        """True when ``token`` may come next."""
    def accept_token(self, token: int) -> bool:
        """Accepts a token; False (nothing changed, see ``error()``) when refused."""
    def accept_tokens(self, tokens: Sequence[int]) -> bool:
        """Accepts all tokens, or none (False)."""
    def consume_token(self, token: int) -> None:
        """Accepts a token or raises ``ForbiddenTokenError``."""
    def validate_tokens(self, tokens: Sequence[int]) -> int:
        """Length of the longest accepted prefix; no state change."""
    def rollback(self, n: int) -> None:
        """Undoes the last ``n`` tokens (``RollbackError`` beyond)."""
    def fork(self) -> "Matcher":
        """An independent copy."""
    def reset(self) -> None:
        """Back to the start (with the matcher's token budget again)."""
    def set_token_budget(self, tokens_left: Optional[int]) -> None:
        """Tokens left for this output, end-of-generation token included; None: no budget."""
    def tokens_left(self) -> Optional[int]:
        """Tokens left under the budget (None without one)."""
    def is_terminated(self) -> bool:
        """True once an end-of-generation token was accepted."""
    def is_finished(self) -> bool:
        """True when only an end-of-generation token may follow (or one was accepted)."""
    def can_end(self) -> bool:
        """True when end-of-generation tokens are allowed."""
    def error(self) -> Optional[str]:
        """Why the last refused token was refused."""
    def accepted_tokens(self) -> list[int]:
        """The tokens accepted so far."""
    def rollback_available(self) -> int:
        """How many tokens ``rollback`` can undo."""
    @property
    def vocab_size(self) -> int:
        """Number of tokens of the vocabulary."""

def fill_bitmasks(matchers: Iterable[Optional[Matcher]], bitmask: Any) -> None:
    """Fills row i for matchers[i], GIL released (the calling thread for 100 µs, then in
    parallel)."""

def apply_token_bitmask(
    logits: Any,
    bitmask: Any,
    indices: Optional[Sequence[int]] = None,
    bitmask_rows: Optional[Sequence[int]] = None,
) -> None:
    """Forbidden logits to -inf in place on CPU logits (torch float32/bfloat16/float16, numpy
    float32/float16), GIL released."""

def mask_logits(
    matchers: Iterable[Optional[Matcher]],
    bitmask: Any,
    logits: Any = None,
    rows: Optional[Sequence[int]] = None,
    *,
    ends: Optional[Sequence[int]] = None,
    forbidden: Optional[Sequence[Sequence[int]]] = None,
) -> bool:
    """One step's masks: fills the rows, filters end tokens, writes CPU logits; True when the
    logits were written."""

def accept_batch(
    matchers: Iterable[Optional[Matcher]], tokens: Sequence[Sequence[int]]
) -> list[Tuple[int, Optional[str]]]:
    """Feeds each row its tokens at once; per row (tokens fed, why the next was refused)."""

def accept_and_mask(
    matchers: Iterable[Optional[Matcher]],
    tokens: Sequence[Sequence[int]],
    bitmask: Any,
    *,
    ends: Sequence[int],
    forbidden: Optional[Sequence[Sequence[int]]] = None,
) -> list[Tuple[int, Optional[str]]]:
    """``accept_batch`` then ``mask_logits`` (no logits) in one GIL-free call; a row that
    refused a token or ended gets exactly ``ends``."""

def bitmask_shape(vocab_size: int, batch: int = 1) -> Tuple[int, int]:
    """``(batch, ceil(vocab_size / 32))``."""

class StreamParser:
    """Incremental parser yielding OpenAI streaming deltas."""

    def __init__(self, grammar: Grammar, vocab: Optional[Vocab] = None) -> None: ...
    def push(self, text: str) -> list[dict[str, Any]]:
        """Feeds text; returns the deltas now certain."""
    def push_token(self, token: int) -> list[dict[str, Any]]:
        """Feeds one token id (needs ``vocab``)."""
    def finish(self) -> list[dict[str, Any]]:
        """Ends the output; ``ParseError`` when incomplete."""

def render_prompt(
    dialect: str,
    tools: _Json,
    messages: _Json,
    *,
    template: Optional[str] = None,
    datetime: Optional[str] = None,
    bos_token: str = "",
    add_generation_prompt: bool = True,
) -> str:
    """The prompt a dialect's model expects for these messages and tools."""
