"""The citation-support judge: does the cited abstract support this sentence, contradict it,
or not say?

Three verdicts (rag.verify's labels). A sentence the abstract holds word for word is
supported. Otherwise the claim verifier (rag.verify, a cross-encoder trained for this) reads
the claim against the abstract's sentences closest to it and decides: contradicted when one
of them contradicts it, supported when one supports it and hard checks pass (every number and
every system-like name of the sentence occurs in the record, no negation or direction the
abstract reverses), not supported otherwise. A sentence about the record's header (its title,
authors, ids) is judged as before the verifier: the embedding similarity to the record's
sentences and the share of its content words the record holds, with the same hard checks.
Shared by the answer pipeline, `rag check` and the evals.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np

from rag.corpus.text import split_sentences
from rag.corpus.words import (
    _NEGATION,
    _squash,
    claim_of,
    content_words,
    names,
    numbers,
    polarity_conflict,
    unlabelled,
    verbatim,
)
from rag.embed import Embedder, tokenizer_path
from rag.verify import CONTRADICTED, NOT_SUPPORTED, SUPPORTED, Params, get_verifier, params

# Calibrated on SciFact training claims (Wadden et al. 2020; `python
# benchmarks/judge_calibration.py`): W_SIM = 0.6 maximises ROC AUC over W_SIM in 0..1 (with
# W_OVERLAP = 1 - W_SIM); THRESHOLD maximises Youden's J there (0.59; max-F1 would be 0.48).
# On evals/judge_cases.jsonl every threshold in 0.12-0.68 gives the same precision/recall,
# so it keeps recall 1.0 there (see evals/README.md).
THRESHOLD = 0.59
W_SIM, W_OVERLAP = 0.6, 0.4
# The share of a claim's content words (stemmed) its cited record must have. A model's
# paraphrase that adds a detail or misspells a name can score as high as a faithful one while
# bringing words of its own, but so does a faithful paraphrase: scripts/fit_judge_overlap.py
# fits the bound on judge_cases, half the real model's sentences and half of SciFact (mean of
# recall minus false support) and finds none worth its cost (0: off). Holding false support at
# 5% on the real sentences would need 0.925 and lose 85% of SciFact's supported claims
# (evals/realmodel/README.md).
MIN_OVERLAP = 0.0

_sentence_cache: dict[str, tuple[list[str], np.ndarray]] = {}
_cache_lock = threading.Lock()
_primed: set[str] = set()  # abstracts whose vectors in the cache came from the store (prime)


@dataclass(frozen=True)
class Reading:
    """The verifier's view of a claim against one abstract: the best P(supported) and the
    passage it came from, the best P(contradicted) and its passage."""

    p_support: float
    p_contradict: float
    support_quote: str
    contradict_quote: str
    verbatim: bool = False
    closest: str = ""  # the sentence closest in meaning: the quote when similarity decides


def decide(r: Reading, hard: list[str], p: Params, similar: bool = False) -> Support:
    """The verdict from a reading, the hard checks' reasons, whether the similarity judge
    passes the claim (`similar`) and the fitted thresholds."""
    if r.verbatim:
        return Support(True, 1.0, r.support_quote, None, [], SUPPORTED)
    if r.p_contradict >= p.contradict and r.p_contradict > r.p_support:
        return Support(False, round(r.p_support, 4), r.contradict_quote, None,
                       [f"the abstract contradicts it ({r.p_contradict:.2f})"], CONTRADICTED)
    by_model = r.p_support >= p.support
    said = by_model or (p.similarity and similar)
    vetoed = r.p_contradict >= p.veto
    if said and not vetoed and not hard:
        quote = r.support_quote if by_model or not r.closest else r.closest
        return Support(True, round(r.p_support, 4), quote, None, [], SUPPORTED)
    reasons = list(hard)
    if vetoed:
        reasons.append(f"the abstract may say otherwise ({r.p_contradict:.2f})")
    if not said:
        reasons.append(f"no sentence of the abstract says it ({r.p_support:.2f} below {p.support:.2f})")
    return Support(False, round(r.p_support, 4), r.support_quote, None, reasons, NOT_SUPPORTED)


@dataclass
class Support:
    supported: bool
    score: float
    quote: str = ""
    source: int | None = None  # index into the abstracts checked
    reasons: list[str] = field(default_factory=list)
    # supported, contradicted or not_supported; contradicted: `quote` is the sentence that
    # contradicts it. Defaults to what `supported` says.
    verdict: str = ""

    def __post_init__(self) -> None:
        if not self.verdict:
            self.verdict = SUPPORTED if self.supported else NOT_SUPPORTED
        self.supported = self.verdict == SUPPORTED


_RANK = {SUPPORTED: 2, CONTRADICTED: 1, NOT_SUPPORTED: 0}


class Judge:
    """Scores (sentence, abstract) pairs; caches abstract sentence embeddings."""

    name = "default"

    def __init__(self, embedder: Embedder, threshold: float = THRESHOLD,
                 known_names: set[str] | None = None, min_overlap: float = MIN_OVERLAP) -> None:
        self.embedder = embedder
        self.threshold = threshold
        self.min_overlap = min_overlap
        # Names of the corpus's systems: one of them in a sentence must be in the cited abstract.
        self.known_names: Collection[str] = {n.lower() for n in known_names or () if len(n) >= 3}
        # Without the claim verifier: the similarity and overlap score decides (what the
        # calibration of THRESHOLD sweeps; benchmarks/judge_calibration.py).
        self.verifier_off = False

    def sentences(self, abstract: str) -> tuple[list[str], np.ndarray]:
        """An abstract's sentences and their vectors (cached for the whole process)."""
        with _cache_lock:
            hit = _sentence_cache.get(abstract)
        if hit is None:
            sents = split_sentences(abstract) or [abstract]
            hit = (sents, self.embedder.embed(sents))
            with _cache_lock:
                if len(_sentence_cache) > 20000:
                    _sentence_cache.clear()
                    _primed.clear()
                _sentence_cache[abstract] = hit
        return hit

    def prime(self, abstract: str, sents: list[str], vectors: np.ndarray) -> None:
        """Seed the cache with sentences embedded at ingest time."""
        if len(sents) == len(vectors) and sents:
            with _cache_lock:
                _sentence_cache[abstract] = (sents, vectors)
                _primed.add(abstract)

    def primed(self, abstract: str) -> bool:
        """Whether the cache holds this abstract's sentences as the store gave them."""
        with _cache_lock:
            return abstract in _primed and abstract in _sentence_cache

    def score_one(self, claim: str, vector: np.ndarray, abstract: str, title: str = "",
                  whole: bool = False) -> Support:
        """The claim against one record: its abstract's sentences, and its header's (title,
        authors, ids) when the abstract alone does not settle it. The header is embedded only
        then (it is not stored with the index: a list answer's 43 headers took 3 s at 20,000
        papers); the verdict is the same either way, as the header can only add to the score.
        `whole`: the score of abstract and header together always (what calibration sweeps)."""
        if title and not whole:
            own, settled = self._score(claim, vector, abstract, title, header=False)
            if own.supported and settled:
                return own
        return self._score(claim, vector, abstract, title, header=bool(title))[0]

    def _score(self, claim: str, vector: np.ndarray, abstract: str, title: str,
               header: bool) -> tuple[Support, bool]:
        """The support, and whether its quote is from the abstract whatever the header says."""
        sents, vecs = self.sentences(abstract)
        n_own = len(sents)
        if header:  # the cited record's header (title, authors, ids) can support a sentence too
            head_sents, head_vecs = self.sentences(title)
            sents, vecs = sents + head_sents, np.vstack([vecs, head_vecs])
        sims = vecs @ vector
        best = int(np.argmax(sims))
        sim = float(sims[best])
        text = unicodedata.normalize("NFKC", f"{title} {abstract}")
        claim = unicodedata.normalize("NFKC", claim)
        lowered = text.lower()
        words, record = content_words(claim), content_words(text)
        overlap = len(words & record) / len(words) if words else 0.0
        score = W_SIM * sim + W_OVERLAP * overlap
        reasons = []
        missing_numbers = numbers(claim) - numbers(text)
        if missing_numbers:
            reasons.append("number not in abstract: " + ", ".join(sorted(missing_numbers)))
        claim_lower = claim.lower()
        # The index's names (rag.answering.names.NameSet) are looked up in the claim, not each
        # tested against it: a regex per name cost a list answer seconds at 100,000 abstracts,
        # a substring test per name still 5 ms a sentence. A plain set is tested, substring first.
        found_in = getattr(self.known_names, "found_in", None)
        known = found_in(claim_lower) if found_in else {
            n for n in self.known_names
            if n in claim_lower and re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", claim_lower)}
        missing_names = {n for n in names(claim) if n not in lowered} | {
            n for n in known if n not in lowered}
        if missing_names:
            reasons.append("name not in abstract: " + ", ".join(sorted(missing_names)))
        if words and self.min_overlap and overlap < self.min_overlap:
            reasons.append("words not in the abstract: " + ", ".join(sorted(words - record)[:5]))
        # The claim's evidence: the abstract sentence closest to it in meaning and those sharing
        # the most of its words (not the header, which states no findings).
        shared = [len(words & content_words(x)) for x in sents[:n_own]]
        evidence = {sents[int(np.argmax(sims[:n_own]))]} | {
            x for x, n in zip(sents[:n_own], shared, strict=True) if n == max(shared) and n >= 2}
        negated = [x for x, n in zip(sents[:n_own], shared, strict=True) if n >= 2 and _NEGATION.search(x)]
        flipped = polarity_conflict(claim, sorted(evidence), negated)
        if flipped:
            reasons.append(flipped)
        if score < self.threshold:
            reasons.append(f"score {score:.2f} below {self.threshold:.2f}")
        # The quote is the abstract sentence closest in meaning (what the chat page highlights
        # in the abstract); the header only for a claim no abstract sentence shares two words
        # with ("X is by A. Author ..."): a list line starts with the paper's title,
        # which alone would make the header the closest.
        settled = bool(n_own) and (max(shared) >= 2 or not words & content_words(title) - content_words(abstract))
        if settled:
            best = int(np.argmax(sims[:n_own]))
        elif n_own < len(sents):
            best = n_own + int(np.argmax(sims[n_own:]))
        if not settled or self.verifier_off:
            return Support(not reasons, round(score, 4), sents[best], None, reasons), settled
        # The abstract settles it: the verifier decides, with the hard checks (numbers, names,
        # polarity) still able to refuse support; the similarity score no longer does.
        hard = [r for r in reasons if not r.startswith("score ")]
        similar = score >= self.threshold
        return self._verify(claim, title, abstract, sents[:n_own], sims[:n_own], shared, hard, similar), True

    def _verify(self, claim: str, title: str, abstract: str, sents: list[str], sims: np.ndarray,
                shared: list[int], hard: list[str], similar: bool = False) -> Support:
        reading = self.reading(claim, title, abstract, sents, sims, shared)
        return decide(reading, hard, params(), similar)

    def reading(self, claim: str, title: str, abstract: str, sents: list[str], sims: np.ndarray,
                shared: list[int]) -> Reading:
        """What the verifier makes of the claim against the abstract's likeliest passages."""
        own = unlabelled(claim, title)
        if verbatim(own, abstract):
            said = _squash(own)
            return Reading(1.0, 0.0, next((x for x in sents if said in _squash(x)),
                                          sents[int(np.argmax(sims))]), "", True)
        # The passages read: the three sentences closest in meaning, the one sharing the most
        # words, and the two closest together in the abstract's order (a claim may join them).
        top = [int(i) for i in np.argsort(-sims)[:3]]
        picks = list(dict.fromkeys([*top, int(np.argmax(shared))]))
        passages = [sents[i] for i in picks]
        if len(top) >= 2:
            passages.append(" ".join(sents[i] for i in sorted(top[:2])))
        probs = self.verifier().probabilities([(own, p) for p in passages])
        sup, con = int(np.argmax(probs[:, 0])), int(np.argmax(probs[:, 1]))
        return Reading(float(probs[sup, 0]), float(probs[con, 1]), passages[sup], passages[con],
                       closest=sents[top[0]])

    def verifier(self):  # type: ignore[no-untyped-def]
        """The claim verifier, loaded on first use (it reads the embedding model's tokenizer)."""
        return get_verifier(tokenizer_path(self.embedder.cache_dir), getattr(self.embedder, "threads", 0))

    def sentence_matrix(self, abstracts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Every sentence vector of the abstracts stacked, and where each abstract's begin (for
        `nearest`): built once per answer, not per sentence."""
        parts = [self.sentences(a)[1] for a in abstracts]
        starts = np.cumsum([0] + [len(x) for x in parts[:-1]]).astype(np.int64)
        return np.vstack(parts), starts

    def nearest(self, sentence: str, matrix: tuple[np.ndarray, np.ndarray]) -> np.ndarray | None:
        """Each abstract's closest-sentence cosine to the sentence's claim (`sentence_matrix`'s
        abstracts, in order; nothing is verified); None for a sentence that claims nothing."""
        claim = claim_of(sentence)
        if not claim:
            return None
        vecs, starts = matrix
        return np.maximum.reduceat(vecs @ self.embedder.embed([claim])[0], starts)

    def check(self, sentence: str, abstracts: list[tuple[str, str]]) -> Support:
        """Best support for the sentence among its cited (title, abstract) pairs."""
        claim = claim_of(sentence)
        if not abstracts or not claim:
            return Support(False, 0.0, reasons=["no citation"])
        vector = self.embedder.embed([claim])[0]
        results = []
        for i, (title, abstract) in enumerate(abstracts):
            s = self.score_one(claim, vector, abstract, title)
            s.source = i
            results.append(s)
        return max(results, key=lambda s: (_RANK[s.verdict], s.score))


def check_claim(claim: str, abstract: str, title: str = "") -> Support:
    """`rag.check`: one claim against one abstract (and its title), with the settings' model."""
    from rag.config import get_settings
    from rag.embed import model_for

    if not isinstance(claim, str) or not isinstance(abstract, str):
        raise TypeError("rag.check takes the claim and the abstract as strings")
    return Judge(model_for(get_settings())).check(claim, [(title.strip(), abstract)])
