"""Token counts for the history budget of an export.

An export row holds its target turn whole and as many of the turns before it as fit in a
budget of tokens (``history_tokens``, :data:`DEFAULT_HISTORY_TOKENS` by default); the oldest
turns are trimmed first. Tokens are counted without downloading anything:

- by default with :func:`estimate_tokens`, **one token per 3 bytes of UTF-8, rounded up**.
  Byte-level BPE tokenizers of current chat models give about 4 bytes a token on English
  prose and 3 to 3.5 on code, JSON, terminal screens and accessibility trees, so the estimate
  errs on the high side: a row's real history is at most about the budget, usually less;
- or, given the path of a local ``tokenizer.json`` (the file Hugging Face tokenizers are
  saved as), with that tokenizer through the ``tokenizers`` package
  (:func:`tokenizer_counter`): the exact count of the model it belongs to.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from worldtrace.schemas.errors import ConfigError

DEFAULT_HISTORY_TOKENS = 16_384
"""Default budget for a row's history: 16,384 tokens (by :func:`estimate_tokens`), so that a
row with its system prompt and target fits a 32k-token context in all but the largest states."""

BYTES_PER_TOKEN = 3
"""The estimate's ratio: one token per this many bytes of UTF-8 (rounded up)."""

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text."""


def estimate_tokens(text: str) -> int:
    """Estimate the tokens of ``text``: its UTF-8 bytes divided by 3, rounded up."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def tokenizer_counter(path: Path) -> TokenCounter:
    """Return a counter using the local tokenizer file at ``path`` (a ``tokenizer.json``).

    Special tokens are not added: the count is the text's own. Raises
    :class:`~worldtrace.schemas.errors.ConfigError` naming the file when it cannot be read as
    a tokenizer.
    """
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as error:  # tokenizers raises a bare Exception for a bad file
        raise ConfigError(
            f"cannot load the tokenizer {path} (give a tokenizer.json file): {error}"
        ) from None

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count
