"""Does a sentence address what the question asks? The answer-relevance check, beside the
support check (rag.judge): a sentence can be faithful to the abstract it cites and still answer
nothing ("What mAP do object detectors reach on COCO at 2x training schedules?" answered with
"... reducing training time by 2x"; "What license does the ByteScheduler repository use?" with the
repository's address).

It reads what the question asks for (`Asked`): its content words without the name of the paper
it is about, and the words that name the thing asked for (`focus`: "mAP", "license", "top-1
accuracy", "developers" in "How many developers ..."); whether it asks for a figure or for
names; then measures one sentence against it (`features`): how much of what is asked the
sentence says, the most specific asked word it and the whole record lack, the focus words it
holds, a figure or a name where one is asked, its similarity in meaning. A logistic regression
(`Model`, weights and bound in rag/relevance/addresses.json, written by
scripts/fit_addresses.py on the fit split of labelled questions; figures held out, and with one
corpus left out, in evals/README.md) weighs them into P(the sentence addresses the question).

    check = AnswerRelevance.load(relevance)        # RelevanceParamsError if the file is bad
    check.score(question, sentence, papers)         # P(addresses), None when not judged
    check.addresses(question, sentence, papers)     # the same against the fitted bound

Not judged (None): a question that asks nothing of a paper beyond naming it ("What is
GPipe?"), or asks for a field of its record (authors, ids, venue, date), which the record
answers, not a sentence.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag.corpus.paper import Paper
from rag.corpus.text import MAX_NAME, short_label
from rag.corpus.words import claim_of, content_words, names, numbers
from rag.relevance.features import RECORD_ASKS, URL, WANTS_NUMBER, Model, record_fields, terms

if TYPE_CHECKING:
    from rag.relevance import Relevance

FORMAT = 1
FEATURES = (
    "cos", "cov", "cov_doc", "miss_sent", "miss_doc", "focus", "focus_doc", "number_missing",
    "number_given", "name_missing", "name_given", "named", "position", "background",
    "names_unsaid", "names_absent", "numbers_absent",
)

# "What mAP do ...", "Which GPU model was ...", "What is the largest model size that ...": the
# words after the question word, up to the verb or preposition that starts what is said of them.
_WHAT = re.compile(
    r"(?:^|[:;,?(-]\s*|\band\s+)(?:so\s+)?(?:what|which)(?:'s|\s+(?:is|are|was|were))?\s+"
    r"(?:the\s+|a\s+|an\s+)?((?:(?!(?:do|does|did|is|are|was|were|can|could|has|have|had|will|would|"
    r"should|that|which|of|for|in|on|at|by|with|from|to|the|a|an|when|if|it|they)\b)[\w-]+\s*){1,4})",
    re.I)
_HOW = re.compile(r"\bhow (?:many|much)\s+((?:(?!(?:do|does|did|is|are|was|were|can|could|has|have|"
                  r"had|will|would|of|for|in|on|at|by|with|to|the)\b)[\w-]+\s*){1,3})", re.I)
# Nouns of a figure: a question for one of these asks for a number ("What mAP ...", "What
# top-1 accuracy ..."), as WANTS_NUMBER's "how much" does.
_QUANTITY = content_words(
    "accuracy speedup speed-up throughput latency rate rates score scores map miou f1 bleu auc "
    "error errors size sizes memory time cost costs gain gains improvement improvements reduction "
    "efficiency utilization utilisation percentage fraction share number count ratio precision "
    "recall perplexity loss overhead bandwidth energy power frames fps flops parameters price "
    "revenue dose duration incidence prevalence mortality risk odds")
# What a question for names asks for: "Which datasets ...", "What hardware platform ...".
_ENTITY = frozenset(["platform", "hardware", "library", "language", "framework", "model", "dataset", "benchmark", "device", "gpu", "cpu", "compiler", "tool", "baseline", "algorithm", "architecture", "method", "technique", "approach", "system", "optimizer", "metric", "format", "board", "accelerator", "kernel", "drug", "gene", "protein", "cell", "organism", "species"])
# Words of "how much", "how many" that content_words keeps
_HOW_WORDS = frozenset({"much", "mani"})
# A figure a sentence states: "2.5x", "30 frames", "0.9%"; not a descriptor ("32-bit",
# "3D", "2-way") or a year.
_DESCRIPTOR = re.compile(r"(?<![\w.])\d+(?:-?(?:bit|d|dimensional|way|stage|layer|core|level|fold-cv)\b|"
                         r"(?=\s*(?:19|20)\d\d\b))|(?<![\w.])(?:19|20)\d\d(?![\w.])", re.I)
# A count in words ("six advanced FL methods", "a dozen datasets")
_COUNT = re.compile(r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
                    r"hundreds?|thousands?|dozens?|millions?)\b", re.I)
# "Collaborative filtering (CF)": an abbreviation and the words it abbreviates
_DEFINED = re.compile(r"((?:[\w-]+\s+){1,5})\((\w[\w-]*)\)")
_FACTOR = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s*(?:x|×|times|-fold)(?!\w)", re.I)
# A sentence that sets the scene rather than reports: what is known, what others did, what is
# hard ("Collaborative filtering has been proven ...", "However, existing approaches ...").
_BACKGROUND = re.compile(r"^(?:however|recently|traditionally|typically|currently|nowadays|despite|although|"
                         r"while|with the|in recent|as)\b|\b(?:existing|previous|prior|conventional|"
                         r"traditional|state-of-the-art (?:methods|approaches|systems))\b.*\b(?:fail|suffer|"
                         r"overlook|ignore|limit|lack|cannot|struggle)|\b(?:has|have) been (?:proven|shown|"
                         r"widely|increasingly)|\bremains? (?:a |an )?(?:challeng|open|difficult|unclear)|"
                         r"\bis one of the\b", re.I)
_CALLED = re.compile(r"\b(?:called|named)\b", re.I)
# A question for the record's date or authors, which a sentence does not answer: "When was
# GPipe published?", "Who wrote GPipe?"; not RECORD_ASKS' any "when" or "who" ("What top-1
# accuracy does ResNet-50 reach when trained 3x longer?" asks the abstracts).
_RECORD_STRICT = {
    "date": re.compile(r"\b(?:what|which) year\b|\bdated?\b|\bwhen (?:was|were|did)\b.*\b(?:publish|"
                       r"appear|release|submit|post|creat|writ|present)", re.I),
    "authors": re.compile(r"\b(?:co-?)?authors?\b|\bauthored\b|\bwho (?:wrote|authored|created)\b|"
                          r"\bwritten by\b", re.I),
}
# Words a question and a sentence write differently for one thing ("How much faster ...?" and
# "a 2.5x speedup"; "licence" and "license"), as stems.
_SAME = {"faster": "speedup", "fast": "speedup", "quicker": "speedup", "speed": "speedup",
         "speed-up": "speedup", "acceler": "speedup", "licenc": "licens"}


def _stems(text: str) -> set[str]:
    return {_SAME.get(w, w) for w in content_words(text)}


@dataclass(frozen=True)
class Asked:
    """What a question asks, as the check reads it."""

    aspect: str  # the question without the name of the paper it asks about
    terms: frozenset[str]  # its content words, less the words that only ask
    focus: frozenset[str]  # the words naming what is asked for; empty when none is named
    wants_number: bool
    wants_name: bool
    named: bool  # it names the paper it asks about


def asked(question: str, subject_names: list[str]) -> Asked:
    """What `question` asks of a paper called by one of `subject_names` (if it names one)."""
    aspect, named = question, False
    for name in subject_names:
        if not 3 <= len(name) <= MAX_NAME:
            continue
        out = re.sub(rf"(?i)(?<![\w-]){re.escape(name)}(?:'s)?(?![\w-])", " ", aspect)
        named, aspect = named or out != aspect, out
    what = _WHAT.search(aspect)
    head = what or _HOW.search(aspect)
    focus = {_SAME.get(w, w) for w in terms(head.group(1))} if head else set()
    number = bool(WANTS_NUMBER.search(question)) or bool(focus & _QUANTITY)
    last = head.group(1).split()[-1].lower() if what and head else ""
    plural = last.endswith("s") and not last.endswith(("ss", "us", "is"))
    wants_name = bool(what and (plural or last.rstrip("s") in _ENTITY)) or bool(_CALLED.search(aspect))
    return Asked(aspect, frozenset(_SAME.get(w, w) for w in terms(aspect) - _HOW_WORDS),
                 frozenset(focus - _HOW_WORDS), number, wants_name and not number, named)


def features(a: Asked, sentence: str, cos: float, record: set[str], own_names: set[str],
             idf: Any, idf_max: float, position: float = math.nan, record_text: str = "") -> dict[str, float]:
    """The measurements of one sentence against what is asked (`cos`: the cosine of the
    question's aspect and the sentence; `record`: the stemmed words of the cited paper's title
    and abstract; `own_names`: the cited paper's names, lower-cased; `idf(term)`; `position`:
    where the sentence stands in its abstract, 0 first to 1 last, NaN if it is not one of its
    sentences; `record_text`: the paper's title and abstract, lower-cased)."""
    said = _stems(sentence) | ({"speedup"} if _FACTOR.search(sentence) else set())
    asked_terms = set(a.terms)
    total = sum(idf(t) for t in asked_terms)

    def share(have: set[str]) -> float:
        return sum(idf(t) for t in asked_terms & have) / total if total else math.nan

    def missing(have: set[str]) -> float:
        return max((idf(t) for t in asked_terms - have), default=0.0) / idf_max

    focus = (len(a.focus & said) / len(a.focus)) if a.focus else math.nan
    focus_doc = (len(a.focus & (record | said)) / len(a.focus)) if a.focus else math.nan
    # a figure beyond those the question gives ("... does it reach its 28.1x?" is not answered
    # by the sentence that states the 28.1x)
    given = numbers(a.aspect)
    number = bool(numbers(_DESCRIPTOR.sub(" ", URL.sub(" ", sentence))) - given) or bool(_COUNT.search(sentence))
    # names the sentence gives that the question does not: an answer to "Which datasets ...?"
    # (not an abbreviation it defines in passing, "Collaborative filtering (CF)")
    defined = {m.group(2).lower().rstrip("s") for m in _DEFINED.finditer(sentence)
               if content_words(m.group(1)) <= a.terms | content_words(a.aspect)}
    new_names = {n for n in names(sentence) if n not in own_names and n not in defined} - names(a.aspect)
    # The names the question gives ("COCO", "ResNet-50", "FlashAttention-2", "A100"): a question
    # about something the paper never names is not about this paper, whatever words it shares
    asked_names = names(a.aspect) - own_names
    lowered = sentence.lower()
    return {
        "names_unsaid": (sum(n not in lowered for n in asked_names) / len(asked_names)) if asked_names else 0.0,
        "names_absent": (sum(n not in lowered and n not in record_text for n in asked_names)
                         / len(asked_names)) if asked_names else 0.0,
        # ... and the figures it gives ("at 3 or 6 months", "24 hours after")
        "numbers_absent": (len(given - numbers(f"{sentence} {record_text}")) / len(given)) if given else 0.0,
        "cos": cos, "cov": share(said), "cov_doc": share(record | said),
        "miss_sent": missing(said), "miss_doc": missing(record | said),
        "focus": focus, "focus_doc": focus_doc,
        "number_missing": float(a.wants_number and not number),
        "number_given": float(a.wants_number and number),
        "name_missing": float(a.wants_name and not new_names),
        "name_given": float(a.wants_name and bool(new_names)),
        "named": float(a.named), "position": position,
        "background": float(bool(_BACKGROUND.search(sentence))),
    }


def asks_record(question: str, paper: Paper) -> bool:
    """Whether the question asks for a field of the paper's record that the record has."""
    fields = record_fields(paper)
    return any(_RECORD_STRICT.get(name, pattern).search(question) and bool(fields[name])
               for name, pattern in RECORD_ASKS.items())


def _unled(sentence: str, own: list[str]) -> str:
    """The sentence without the "GPipe: " lead an answer gives a quote of a paper it does not
    name, so that the sentence is read as its abstract writes it."""
    for name in own:
        if sentence.startswith(f"{name}: "):
            return sentence[len(name) + 2:]
    return sentence


def paper_names(paper: Paper) -> list[str]:
    """What a question may call a paper: its short name and its label."""
    return sorted({short_label(paper.title, paper.label), paper.label}, key=len, reverse=True)


def load_model(path: Path | None = None) -> Model:
    """The fitted model (rag/relevance/addresses.json unless `path`), checked."""
    from rag.relevance.fitted import read_fitted

    def check(data: dict[str, Any]) -> Model:
        model = Model.from_dict(data["model"])
        unknown = set(model.names) - set(FEATURES)
        if unknown:
            raise ValueError(f"unknown features {sorted(unknown)}")
        return model

    return read_fitted(path, "addresses.json", "the fitted answer-relevance check", "fit_addresses.py",
                       FORMAT, check)


class AnswerRelevance:
    """P(a sentence addresses the question), for the papers it cites."""

    def __init__(self, relevance: Relevance, model: Model) -> None:
        self.relevance = relevance
        self.model = model

    @classmethod
    def load(cls, relevance: Relevance, path: Path | None = None) -> AnswerRelevance:
        return cls(relevance, load_model(path))

    def rows(self, question: str, sentences: list[str], paper: Paper) -> list[dict[str, float]] | None:
        """Each sentence's features against the question, read as asked of `paper`; None when
        the question is not judged (see the module docstring)."""
        own = paper_names(paper)
        a = asked(question, own)
        if not a.terms or asks_record(question, paper):
            return None
        rel = self.relevance
        stats = rel.stats()
        sents, vecs = rel.judge.sentences(paper.abstract)
        record = {_SAME.get(w, w) for w in set().union(terms(paper.title or ""),
                                                       *rel._sentence_terms(paper.abstract, sents))}
        qvec = rel.retriever.embed_query(a.aspect)
        at = {s: i for i, s in enumerate(sents)}
        plain = [self.plain(s, paper) for s in sentences]
        new = [s for s in plain if s not in at]
        embedded = dict(zip(new, rel.judge.embedder.embed(new), strict=True)) if new else {}
        own_names = {n.lower() for n in own} | names(" ".join(own))
        last = max(1, len(sents) - 1)
        text = f"{paper.title or ''} {paper.abstract}".lower()
        return [features(a, s, float((vecs[at[s]] if s in at else embedded[s]) @ qvec), record,
                         own_names, stats.idf, stats.idf_max(), at[s] / last if s in at else math.nan, text)
                for s in plain]

    @staticmethod
    def plain(sentence: str, paper: Paper) -> str:
        """A unit of an answer as the abstract of `paper` would write it: without its citation
        markers, a list bullet, or the "GPipe: " lead of a quote of a paper it does not name."""
        return _unled(claim_of(sentence), paper_names(paper))

    def score(self, question: str, sentence: str, papers: list[Paper]) -> float | None:
        """P(the sentence addresses the question), the best over the papers it cites; None
        when not judged (no paper cited, or a question the check does not judge)."""
        best = None
        for paper in papers:
            rows = self.rows(question, [sentence], paper)
            if rows is not None:
                p = float(self.model.probabilities(rows)[0])
                best = p if best is None else max(best, p)
        return best

    def addresses(self, question: str, sentence: str, papers: list[Paper]) -> bool | None:
        p = self.score(question, sentence, papers)
        return None if p is None else p >= self.model.threshold
