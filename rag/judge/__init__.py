"""The citation-support judge: does the cited abstract support a sentence, contradict it, or
not say? `core` judges, `model` asks the answering model instead (`--judge model`), `claims`
reads a claim's words."""

from rag.judge.claims import (
    claim_of,
    content_words,
    names,
    numbers,
    polarity_conflict,
    strip_markers,
    unlabelled,
    verbatim,
)
from rag.judge.core import (
    MIN_OVERLAP,
    THRESHOLD,
    W_OVERLAP,
    W_SIM,
    Judge,
    Reading,
    Support,
    _sentence_cache,
    check_claim,
    decide,
)
from rag.judge.model import VERDICT_SCHEMA, OllamaJudge, parse_verdict

__all__ = [
    "MIN_OVERLAP", "THRESHOLD", "VERDICT_SCHEMA", "W_OVERLAP", "W_SIM", "Judge", "OllamaJudge",
    "Reading", "Support", "_sentence_cache", "check_claim", "claim_of", "content_words", "decide",
    "names", "numbers", "parse_verdict", "polarity_conflict", "strip_markers", "unlabelled", "verbatim",
]
