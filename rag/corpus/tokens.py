"""Tokens from characters, for servers that give no tokenizer (Ollama has no such endpoint):
the ratios fitted by scripts/fit_prompt_budget.py (tokens.json: fitted on seeds/ and SciFact,
checked on PubMedQA), erring towards more tokens."""

from __future__ import annotations

import json
import math
from importlib import resources

_FIT = json.loads(resources.files("rag.corpus").joinpath("tokens.json").read_text())
CHARS_PER_TOKEN: float = _FIT["chars_per_token"]  # a text has fewer tokens than len / this
MAX_CHARS_PER_TOKEN: float = _FIT["max_chars_per_token"]  # ... and more than len / this
LONG_ABSTRACT: int = _FIT["long_abstract"]  # characters; longer abstracts are cut first


def at_most(text: str) -> int:
    """The tokens `text` has at most."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)
