"""The citation-support judge: does the cited abstract support a sentence, contradict it, or
not say? `core` judges, `model` asks the answering model instead (`--judge model`); the words of
a claim it reads are rag.corpus.words'."""

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
    "Reading", "Support", "_sentence_cache", "check_claim", "decide", "parse_verdict",
]
