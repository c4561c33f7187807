"""The citation-support judge: does the cited abstract support this sentence?

No language model: it combines the best embedding similarity between the sentence and the
abstract's sentences, the share of the sentence's content words found in the abstract, and
hard checks that every number and every system-like name in the sentence occurs in the
abstract. Shared by the answer pipeline and the evals. Known blind spot: a negated or
reversed claim can score high; a polarity check (negation cues, opposite directions) catches
the plain cases (5 of 13 in evals/judge_cases.jsonl).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from rag.corpus.text import split_sentences
from rag.corpus.tokens import at_most
from rag.embed import Embedder

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

_MARKER = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
_NUMBER = re.compile(r"(?<![A-Za-z\d.])(\d+(?:[.,]\d+)*)(?![A-WYZa-wyz\d])")
_NAME = re.compile(r"\b([A-Z][\w²³\-]*[A-Z0-9²][\w²³\-]*)\b")
_WORD = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_NEGATION = re.compile(r"\b(not|no|never|cannot|neither|nor|without|fails?|unable)\b|n't\b", re.I)
_STOP = frozenset(
    ["the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "with", "by", "from", "as", "at", "is", "are", "was", "were", "be", "been", "being", "this", "that", "these", "those", "it", "its", "their", "they", "them", "we", "our", "us", "which", "who", "whom", "what", "when", "where", "how", "than", "then", "also", "such", "can", "could", "may", "might", "will", "would", "should", "into", "over", "under", "more", "most", "less", "very", "both", "each", "other", "using", "used", "use", "based", "via", "paper", "papers", "work", "works", "propose", "proposes", "proposed", "present", "presents", "introduce", "introduces", "show", "shows", "shown", "approach", "method", "system", "systems", "new", "novel"]
)


@lru_cache(maxsize=1)
def _stemmer():  # type: ignore[no-untyped-def]
    import Stemmer

    return Stemmer.Stemmer("english")


def content_words(text: str) -> set[str]:
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2]
    return set(_stemmer().stemWords(words))


def numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


_NOT_SYSTEM_NAMES = {"doi", "arxiv", "mlsys", "acm", "ieee"}


def names(text: str) -> set[str]:
    return {n.lower().rstrip("s") for n in _NAME.findall(text)} - _NOT_SYSTEM_NAMES


# Opposite directions, as stems: a claim saying one where the sentence it matches says the
# other ("Skrull is slower" against "Skrull outperforms DeepSpeed") reverses that sentence.
_OPPOSITES = [
    ({"faster", "outperform", "speedup", "acceler"}, {"slower", "underperform", "slowdown"}),
    ({"improv", "better"}, {"degrad", "wors", "hurt"}),
    ({"increas", "grow", "higher", "more"}, {"decreas", "reduc", "lower", "less", "fewer", "shrink"}),
    ({"constant", "maintain", "preserv"}, {"grow", "increas", "degrad", "drop"}),
]


def polarity_conflict(claim: str, evidence: Sequence[str], negated: Sequence[str] = ()) -> str:
    """Why the claim reverses every one of its evidence sentences, or "".

    Written by hand (no library here does claim/evidence polarity without a model): the
    embedding and word overlap of "X never drops tokens" and "X drops tokens" are nearly equal.
    A negation ("not", "never", "without", ...) in the claim and in no sentence that shares its
    words, or opposite directions ("slower" against "outperforms", "increases" against
    "reduces") in every evidence sentence, reverse it. One evidence sentence that agrees is
    enough to pass, and a negated claim passes when any abstract sentence sharing its words
    (`negated`) negates too, which keeps paraphrases of several sentences at once from being
    flagged.
    """
    # Only this direction: an affirmative claim against negated evidence ("X drops tokens",
    # "X never drops tokens") flagged as many SciFact SUPPORT pairs as CONTRADICT ones.
    if (_NEGATION.search(claim) and not negated and evidence
            and not any(_NEGATION.search(s) for s in evidence)):
        return "negation not in the abstract"
    mine = _stems(claim)
    for up, down in _OPPOSITES:
        for said, other in ((up, down), (down, up)):
            if _has(mine, said) and evidence and all(
                    _has(_stems(s), other) and not _has(_stems(s), said) for s in evidence):
                return "direction opposite to the abstract"
    return ""


def _stems(text: str) -> list[str]:
    return _stemmer().stemWords(_WORD.findall(text.lower()))  # type: ignore[no-any-return]


def _has(stems: list[str], prefixes: set[str]) -> bool:
    return any(s.startswith(p) for s in stems for p in prefixes)


def strip_markers(text: str) -> str:
    return _MARKER.sub("", text).strip()


def claim_of(sentence: str) -> str:
    """What is judged of a sentence: its words without citation markers or a list bullet."""
    return strip_markers(sentence).lstrip("-*• ").strip()


_sentence_cache: dict[str, tuple[list[str], np.ndarray]] = {}
_cache_lock = threading.Lock()
_primed: set[str] = set()  # abstracts whose vectors in the cache came from the store (prime)


@dataclass
class Support:
    supported: bool
    score: float
    quote: str = ""
    source: int | None = None  # index into the abstracts checked
    reasons: list[str] = field(default_factory=list)


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
        # with ("MegaBlocks is by Trevor Gale ..."): a list line starts with the paper's title,
        # which alone would make the header the closest.
        settled = bool(n_own) and (max(shared) >= 2 or not words & content_words(title) - content_words(abstract))
        if settled:
            best = int(np.argmax(sims[:n_own]))
        elif n_own < len(sents):
            best = n_own + int(np.argmax(sims[n_own:]))
        return Support(not reasons, round(score, 4), sents[best], None, reasons), settled

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
        return max(results, key=lambda s: (s.supported, s.score))


# What the model judge must answer: Ollama constrains the reply to this JSON schema
# (structured output), so nothing is parsed out of free text.
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"supported": {"type": "boolean"}, "quote": {"type": "string"}},
    "required": ["supported", "quote"],
}


_CLAIM_WORD = re.compile(r"[^\W\d_]{2,}")


def parse_verdict(reply: str) -> tuple[bool, str] | None:
    """(supported, quote) from the model's JSON reply; None when it is not that JSON."""
    import json

    try:
        data = json.loads(reply)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("supported"), bool):
        return None
    return data["supported"], str(data.get("quote") or "")


class OllamaJudge(Judge):
    """Claim-by-claim verdicts from the answering model (`--judge model`; Ollama or an
    OpenAI-compatible server), as structured output: {"supported": bool, "quote": str}. Each
    (claim, abstract) pair is asked once per judge: the answer's check and the eval's
    citation scores share the verdict."""

    name = "model"
    MEMO = 20000  # verdicts kept; a long eval run asks far fewer

    def __init__(self, embedder: Embedder, llm: object) -> None:
        super().__init__(embedder)
        from rag.prompts import templates

        self.llm = llm
        self.template = templates()["judge"]
        self.asked = 0  # requests sent to the model
        self._verdicts: dict[tuple[str, str, str], tuple[bool, str] | None] = {}
        self._memo_lock = threading.Lock()

    def _verdict(self, claim: str, title: str, abstract: str) -> tuple[bool, str] | None:
        from rag.prompts import fence

        key = (claim, title, abstract)
        with self._memo_lock:
            if key in self._verdicts:
                return self._verdicts[key]
        # Fenced as in the answer prompt: an abstract cannot close its <source> block.
        prompt = self.template.render(abstract=fence(f"{title}\n{abstract}".strip()),
                                      claim=fence(claim))
        # A verdict's quote is a sentence of the record: its reply has no more tokens than the
        # record and the JSON around it (a small model otherwise may write until the timeout).
        room = at_most(f'{{"supported": false, "quote": "{title}\n{abstract}"}}')
        reply = self.llm.complete([{"role": "user", "content": prompt}],  # type: ignore[attr-defined]
                                  format=VERDICT_SCHEMA, max_tokens=room)
        verdict = parse_verdict(reply)
        with self._memo_lock:
            self.asked += 1
            if len(self._verdicts) >= self.MEMO:
                self._verdicts.clear()
            self._verdicts[key] = verdict
        return verdict

    def check(self, sentence: str, abstracts: list[tuple[str, str]]) -> Support:
        base = super().check(sentence, abstracts)  # for the quote and a score
        claim = claim_of(sentence)
        if not claim or not _CLAIM_WORD.search(claim):
            return base  # nothing to ask about: no model is asked to judge an empty claim
        unreadable = unquoted = False
        for i, (title, abstract) in enumerate(abstracts):
            verdict = self._verdict(claim, title, abstract)
            if verdict is None:
                unreadable = True
                continue
            if verdict[0]:
                # A "supported" counts only with its evidence: a small model says yes with the
                # prompt's placeholder for a quote, or with words the abstract does not hold.
                quote = verdict[1].strip()
                if _quoted(quote, f"{title}\n{abstract}"):
                    return Support(True, base.score, quote, i, [])
                unquoted = True
        reason = "the model's verdict was not the JSON asked for" if unreadable else \
            "the model called it supported but quoted nothing the abstract says" if unquoted else \
            "the model judged it unsupported"
        return Support(False, base.score, base.quote, base.source, [reason])


def _quoted(quote: str, text: str) -> bool:
    """The quote, a few words at least, is in the text (case and spacing aside)."""
    squash = lambda t: " ".join(t.lower().split())  # noqa: E731
    return len(quote.split()) >= 3 and squash(quote).strip(" .\"'") in squash(text)
