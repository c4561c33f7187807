"""The measurements a relevance decision is made from, and the fitted models that weigh them.

Per candidate paper: dense cosine (best chunk, best sentence), the same relative to the best
candidate and to this index's normal (rag.relevance.stats), BM25 relative to the best BM25
score, the ranks in each ranking and their disagreement, IDF-weighted coverage of the
question's content words by the best sentence and by the whole record, whether the question
names the paper (its name, or its record's fields: rag.retrieve.metadata). Per sentence: cosine,
coverage, a number where the question asks for one, and where in the abstract it stands.

`Model` is a logistic regression (weights in rag/relevance/params.json, written by
scripts/fit_relevance.py); predicting is a dot product, so numpy is all it needs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag.corpus.paper import Paper
from rag.corpus.words import content_words
from rag.relevance.stats import IndexStats
from rag.retrieve import metadata as metadata_match

# Words that say what kind of answer is wanted, not what it is about.
ASKING = content_words(
    "which what who whom whose when where why how does do did is are was were can could should "
    "papers paper systems system works work methods method approaches approach frameworks "
    "framework abstracts abstract studies study tools techniques ones any there list name find "
    "show give me tell about report reports describe explain target targets use uses using "
    "propose proposes proposed present presents introduce introduces stand stands mean means "
    "acronym abbreviation called")
# A sentence that states the paper's own contribution, rather than background or a case study.
CONTRIBUTION = re.compile(r"\b(?:we|this (?:paper|work|study)|our (?:work|approach|method|system)) "
                          r"(?:propose|present|introduce|design|develop|build|describe|investigate|"
                          r"address|aim|study|examine|evaluate|explore)|\bobjective\b|\baim of\b", re.I)
# What a question may ask of a paper's record rather than its abstract, and the fields that
# answer it.
RECORD_ASKS = {
    "authors": re.compile(r"\b(who|authors?|authored|wrote|written by|co-?authors?)\b", re.I),
    "arxiv_id": re.compile(r"\barxiv(?: id| identifier| number)?\b", re.I),
    "doi": re.compile(r"\bdoi\b", re.I),
    "venue": re.compile(r"\b(venue|published|conference|journal|accepted|appeared|workshop)\b", re.I),
    "date": re.compile(r"\b(when|what year|which year|dated?|created)\b", re.I),
}
WANTS_NUMBER = re.compile(
    r"\bhow (?:much|many|fast|large|big|long|well|often)\b|\bby how\b|\bwhat (?:percentage|"
    r"fraction|share|number|proportion|rate|ratio|speed-?up|size)\b|\bspeed-?ups?\b", re.I)
_NUMBER = re.compile(r"\d")
URL = re.compile(r"\S*(?:https?://|www\.|github\.com)\S*")

PAPER_FEATURES = (
    "cos_chunk", "cos_sent", "z_bg", "z_top", "z_self", "rel_best", "rel_best_z", "cos_mean3",
    "cos_mean", "contrib_cos", "term_frac", "cov_doc", "cov_sent", "cov_best", "bm25_rel",
    "log_rank", "log_rank_dense", "log_rank_bm25", "rank_disagree", "named", "meta", "unknown",
    "hub",
)
QUESTION_FEATURES = (
    "p_top", "p_second", "z_top_best", "z_self_best", "gap", "cov_aspect", "cov_aspect_doc",
    "miss_max", "cos_aspect", "named", "meta", "record", "unknown", "wants_number",
    "number_in_best", "is_list",
)
SENTENCE_FEATURES = (
    "cos", "rel_best", "cov", "cov_rel", "number_match", "number_missing", "position", "is_last",
    "is_first",
)


def terms(text: str) -> set[str]:
    """Stemmed content words of a question or text, without the words that only ask."""
    return content_words(text) - ASKING


def coverage(asked: set[str], have: set[str], stats: IndexStats) -> float:
    """IDF-weighted share of the asked terms found in `have`."""
    total = sum(stats.idf(t) for t in asked)
    return sum(stats.idf(t) for t in asked & have) / total if total else 0.0


def unknown_share(asked: set[str], stats: IndexStats) -> float:
    """IDF-weighted share of the asked terms that no paper of the index contains."""
    total = sum(stats.idf(t) for t in asked)
    return sum(stats.idf(t) for t in asked if t not in stats.df) / total if total else 0.0


def record_fields(paper: Paper) -> dict[str, Any]:
    """What the paper's record holds for each field RECORD_ASKS names (empty: nothing)."""
    return {"authors": paper.authors, "arxiv_id": paper.arxiv_id, "doi": paper.doi,
            "venue": paper.venue or paper.journal_ref or metadata_match.venue_note(paper),
            "date": paper.date or paper.year}


def record_answers(question: str, paper: Paper) -> float:
    """1 when the question asks for a field of the paper's record (authors, arXiv id, DOI,
    venue, date) that the record has: the answer is in the record, not the abstract."""
    fields = record_fields(paper)
    return float(any(pattern.search(question) and fields[name] for name, pattern in RECORD_ASKS.items()))


def missing_max(asked: set[str], have: set[str], stats: IndexStats) -> float:
    """The most specific asked term the text lacks, as a share of the largest IDF possible."""
    return max((stats.idf(t) for t in asked - have), default=0.0) / stats.idf_max()


def has_number(sentence: str) -> bool:
    return bool(_NUMBER.search(URL.sub("", sentence)))


def logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


@dataclass(frozen=True)
class Model:
    """Logistic regression over named features, standardised as when it was fitted."""

    names: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    bias: float
    threshold: float  # decision bound on the probability, fitted on the fit split
    # The answer model's lower bound, fitted by scripts/fit_relevance.py and no longer
    # deciding anything: with a model, every question goes to the model (Relevance.decide).
    # Read and checked so that params.json keeps one format. The same as `threshold` when not fitted.
    decline: float

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Model:
        names = tuple(str(n) for n in d["names"])
        mean, scale, coef = (np.asarray(d[k], dtype=np.float64) for k in ("mean", "scale", "coef"))
        if not names or any(a.shape != (len(names),) for a in (mean, scale, coef)):
            raise ValueError("mean, scale and coef must have one value per feature name")
        bias, threshold = float(d["bias"]), float(d["threshold"])
        decline = float(d.get("decline", threshold))
        # A NaN weight would make every probability NaN, and every comparison with a bound
        # false: every question declined without a word. Refuse the file instead.
        if not all(np.isfinite(a).all() for a in (mean, scale, coef)) or not math.isfinite(bias):
            raise ValueError("a weight is not a finite number")
        if (scale <= 0).any():
            raise ValueError("a feature scale is not positive")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold {threshold} is not a probability")
        if not 0.0 <= decline <= threshold:
            raise ValueError(f"decline {decline} is not a probability at most the threshold")
        return cls(names, mean, scale, coef, bias, threshold, decline)

    def standardised(self, x: np.ndarray) -> np.ndarray:
        """(x - mean) / scale, with a feature this index cannot measure (NaN: a second
        candidate in an index of one paper, what is normal in an index too small to tell)
        counted as its fitted mean, so it weighs neither way. Left as measured, such a value
        (the logit of a probability of 0) decided alone, and an index of one paper declined
        what its abstract plainly says."""
        return np.where(np.isnan(x), 0.0, (x - self.mean) / self.scale)  # type: ignore[no-any-return]

    def probability(self, features: dict[str, float]) -> float:
        x = np.array([features[n] for n in self.names], dtype=np.float64)
        z = float(self.standardised(x) @ self.coef + self.bias)
        return 1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0)))

    def probabilities(self, rows: list[dict[str, float]]) -> np.ndarray:
        if not rows:
            return np.zeros(0)
        x = np.array([[r[n] for n in self.names] for r in rows], dtype=np.float64)
        z = self.standardised(x) @ self.coef + self.bias
        return 1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0)))


def sentence_rows(asked: set[str], sims: np.ndarray, sent_terms: list[set[str]],
                  sents: list[str], wants_number: bool, stats: IndexStats) -> list[dict[str, float]]:
    """The features of each sentence of one abstract for one question."""
    covs = [coverage(asked, t, stats) for t in sent_terms]
    best_cos, best_cov = float(sims.max()), max(covs)
    n = len(sents)
    rows = []
    for i, (sent, sim, cov) in enumerate(zip(sents, sims.tolist(), covs, strict=True)):
        number = has_number(sent)
        rows.append({
            "cos": sim, "rel_best": sim - best_cos, "cov": cov, "cov_rel": cov - best_cov,
            "number_match": float(wants_number and number),
            "number_missing": float(wants_number and not number),
            "position": i / max(1, n - 1), "is_last": float(i == n - 1 and n > 1),
            "is_first": float(i == 0),
        })
    return rows
