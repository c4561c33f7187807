"""`rag eval`: run a question set through the same Pipeline.answer() as `rag ask`, score it.

Loads and validates a set (evals/README.md documents the format), resolves `seeds/FILE#N`
paper references against the index, answers every question (follow-ups with the earlier turns
as history), and scores retrieval, citations (validity, ALCE-style precision and recall with
the support judge), faithfulness, fact recall, list completeness and abstention. Thresholds
come from `thresholds.yaml` next to the set; a metric outside its bound makes run_cli return 5.
Thresholds and reports (JSON, Markdown with a metric-history chart): rag.evaluate_report.
"""

from __future__ import annotations

import math
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rag.corpus.paper import Paper
from rag.corpus.text import short_label
from rag.errors import InputError

KINDS = ("fact", "list", "metadata", "unanswerable", "followup")
FIELDS = ("id", "kind", "question", "turns", "papers", "facts", "near_miss", "note")
EXIT_BELOW = 5
# name -> "min" (higher is better) or "max" (lower is better); the order of the summary table.
METRICS: dict[str, str] = {
    "recall@1": "min", "recall@5": "min", "recall@10": "min", "mrr": "min", "ndcg@10": "min",
    "citation_validity": "min", "citation_recall": "min", "citation_precision": "min",
    "faithfulness": "min", "fact_recall": "min", "list_completeness": "min",
    "list_precision": "min", "abstention_accuracy": "min", "false_abstention_rate": "max",
}
_REF = re.compile(r"^([^#\s]+)#([1-9]\d*)$")
_ID = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")
_GROUP = re.compile(r"\[(\s*\d+(?:\s*,\s*\d+)*\s*)\]")
_DASHES = str.maketrans({c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2212"} | {"\u00d7": "x"})
HINT = "see the question-set format in evals/README.md"


@dataclass
class Question:
    id: str
    kind: str
    turns: list[str]  # the user turns; one for every kind but followup
    papers: list[str] = field(default_factory=list)  # refs: seeds/FILE#N
    facts: list[str] = field(default_factory=list)
    near_miss: bool = False
    note: str = ""


# -- loading and validating ---------------------------------------------------------------


def _bad(path: Path, qid: str, name: str, problem: str) -> InputError:
    return InputError(f"{path}: question {qid}: field `{name}` {problem}", HINT)


def _strings(value: Any, path: Path, qid: str, name: str, *, allow_empty: bool) -> list[str]:
    if not isinstance(value, list):
        raise _bad(path, qid, name, f"must be a list of strings, not {type(value).__name__}")
    for i, v in enumerate(value, 1):
        if not isinstance(v, str) or not v.strip():
            raise _bad(path, qid, name, f"item {i} must be a non-empty string, not {v!r}")
    if not value and not allow_empty:
        raise _bad(path, qid, name, "must not be empty")
    return [v.strip() for v in value]


def _question(item: Any, i: int, path: Path, seen: set[str]) -> Question:
    if not isinstance(item, dict):
        raise InputError(f"{path}: item {i} is a {type(item).__name__}, not a mapping", HINT)
    raw_id = item.get("id")
    qid = repr(raw_id) if isinstance(raw_id, str) else f"#{i} (no id)"
    if not isinstance(raw_id, str) or not _ID.match(raw_id):
        raise _bad(path, qid, "id", "must be a kebab-case string such as fact-skrull-speedup")
    if raw_id in seen:
        raise _bad(path, qid, "id", "is used by an earlier question too")
    seen.add(raw_id)
    unknown = sorted(set(item) - set(FIELDS))
    if unknown:
        raise _bad(path, qid, unknown[0], f"is not a known field (known: {', '.join(FIELDS)})")
    kind = item.get("kind")
    if kind not in KINDS:
        raise _bad(path, qid, "kind", f"is {kind!r}; expected one of {', '.join(KINDS)}")
    if kind == "followup":
        if "question" in item:
            raise _bad(path, qid, "question", "is not used by followup questions; use `turns`")
        turns = _strings(item.get("turns"), path, qid, "turns", allow_empty=False)
        if len(turns) < 2:
            raise _bad(path, qid, "turns", "needs at least two user turns")
    else:
        if "turns" in item:
            raise _bad(path, qid, "turns", f"is only for followup questions, not {kind}")
        text = item.get("question")
        if not isinstance(text, str) or not text.strip():
            raise _bad(path, qid, "question", "must be a non-empty string")
        turns = [text.strip()]
    if "papers" not in item:
        raise _bad(path, qid, "papers", "is missing ([] for unanswerable questions)")
    papers = _strings(item["papers"], path, qid, "papers", allow_empty=kind == "unanswerable")
    if kind == "unanswerable" and papers:
        raise _bad(path, qid, "papers", "must be [] for an unanswerable question")
    for ref in papers:
        if not _REF.match(ref):
            raise _bad(path, qid, "papers", f"has {ref!r}; expected seeds/FILE#POSITION")
    facts = _strings(item.get("facts", []), path, qid, "facts", allow_empty=True)
    for fact in facts:
        if any(not alt.strip() for alt in fact.split("|")):
            raise _bad(path, qid, "facts", f"has {fact!r} with an empty alternative")
    near_miss = item.get("near_miss", False)
    if not isinstance(near_miss, bool):
        raise _bad(path, qid, "near_miss", f"must be true or false, not {near_miss!r}")
    note = item.get("note", "")
    if not isinstance(note, str):
        raise _bad(path, qid, "note", "must be a string")
    return Question(raw_id, kind, turns, papers, facts, near_miss, note)


def load_set(path: Path) -> list[Question]:
    """The questions of a YAML set; InputError naming the question and field when malformed."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the question set ({exc.strerror})",
                         "pass --set PATH of a YAML question set, e.g. evals/questions.yaml") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise InputError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc})",
                         HINT) from None
    if not isinstance(data, list) or not data:
        raise InputError(f"{path}: a question set must be a non-empty YAML list of questions", HINT)
    seen: set[str] = set()
    return [_question(item, i, path, seen) for i, item in enumerate(data, 1)]


# -- papers: references, names ------------------------------------------------------------


def match_ref(ref: str, papers: Iterable[Paper]) -> Paper | None:
    """The paper `seeds/FILE#N` names: position N of the file whose path ends like FILE."""
    m = _REF.match(ref)
    if not m:
        return None
    want, pos = Path(m.group(1)).parts, int(m.group(2))
    fallback = None
    for p in papers:
        if p.position != pos or not p.source:
            continue
        parts = Path(p.source).parts
        if parts[-len(want):] == want:
            return p
        if parts[-1] == want[-1]:
            fallback = p  # the same file name in another directory
    return fallback


def resolve_refs(questions: list[Question], papers: list[Paper], path: Path,
                 index: str) -> dict[str, str]:
    """ref -> paper_id for every reference of the set; InputError for one not in the index."""
    out: dict[str, str] = {}
    for q in questions:
        for ref in q.papers:
            if ref not in out:
                paper = match_ref(ref, papers)
                if paper is None:
                    raise _bad(path, repr(q.id), "papers",
                               f"names {ref}, which is not in the index '{index}'")
                out[ref] = paper.paper_id
    return out


def seed_papers(seeds: Path) -> list[Paper]:
    """The papers of a seeds directory, parsed as ingest parses them (no index needed)."""
    from rag.corpus import expand_paths, merge_papers, read_file

    return merge_papers([p for f in expand_paths([seeds]) for p in read_file(f).papers])


def known_names(papers: Iterable[Paper]) -> set[str]:
    """System names of the corpus, as Pipeline._refresh_names builds them for the judge."""
    labels = (short_label(p.title, p.label) for p in papers)
    return {n.lower() for n in labels if len(n) <= 30}


# -- per-question scores ------------------------------------------------------------------


def normalise(text: str) -> str:
    """For fact matching: NFKC, lower case, × -> x, unicode dashes -> '-', spaces collapsed."""
    text = unicodedata.normalize("NFKC", text).lower().translate(_DASHES)
    return re.sub(r"\s+", " ", text)


def fact_found(fact: str, answer: str) -> bool:
    text = normalise(answer)
    return any(normalise(alt.strip()) in text for alt in fact.split("|"))


def retrieval_scores(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    first = next((i for i, pid in enumerate(ranked, 1) if pid in relevant), None)
    dcg = sum(1 / math.log2(i + 1) for i, pid in enumerate(ranked[:10], 1) if pid in relevant)
    idcg = sum(1 / math.log2(i + 1) for i in range(1, min(10, len(relevant)) + 1))
    out = {f"recall@{k}": len(set(ranked[:k]) & relevant) / len(relevant) for k in (1, 5, 10)}
    return {**out, "mrr": 1 / first if first else 0.0, "ndcg@10": dcg / idcg}


def citation_scores(ans: Any, checker: Any) -> dict[str, Any]:
    """ALCE-style citation recall and precision of one answer, judged by `checker`.

    Recall: share of claim sentences whose cited abstracts, taken together, support them (a
    sentence without citations counts as unsupported). Precision: share of citations that are
    part of a supporting set and either support their sentence alone or are needed (the other
    citations alone do not support it). "Together" = the cited records concatenated.
    """
    by_n = {s.n: s for s in ans.sources}
    cache: dict[tuple[str, tuple[int, ...]], bool] = {}

    def supported(text: str, ns: tuple[int, ...]) -> bool:
        if (text, ns) not in cache:
            srcs = [by_n[n] for n in ns]
            record = (" ".join(s.header() for s in srcs), " ".join(s.paper.abstract for s in srcs))
            cache[text, ns] = bool(checker.check(text, [record]).supported)
        return cache[text, ns]

    recall, precise, cites = [], 0, 0
    for sent in ans.sentences:
        ns = tuple(n for n in sent.citations if n in by_n)
        if not ns:
            recall.append(False)
            continue
        joint = supported(sent.text, ns)
        recall.append(joint)
        cites += len(ns)
        for n in ns:
            rest = tuple(m for m in ns if m != n)
            if joint and (len(ns) == 1 or supported(sent.text, (n,))
                          or not supported(sent.text, rest)):
                precise += 1
    return {"citation_recall": sum(recall) / len(recall) if recall else None,
            "citation_precision": precise / cites if cites else None}


def score_answer(q: Question, ans: Any, ranked: list[str], refs: dict[str, str],
                 checker: Any) -> dict[str, Any]:
    relevant = {refs[r] for r in q.papers}
    cited = [s.paper.paper_id for s in ans.sources]
    m: dict[str, Any] = dict.fromkeys(METRICS)
    if relevant:
        m.update(retrieval_scores(ranked, relevant))
    if ans.sentences:
        m["faithfulness"] = sum(s.supported for s in ans.sentences) / len(ans.sentences)
        m.update(citation_scores(ans, checker))
    markers = sum(len(g.split(",")) for g in _GROUP.findall(ans.answer)) if not ans.abstained else 0
    if markers + ans.dropped_citations:
        m["citation_validity"] = markers / (markers + ans.dropped_citations)
    if q.facts:
        m["fact_recall"] = sum(fact_found(f, ans.answer) for f in q.facts) / len(q.facts)
    if q.kind == "list":
        hit = len(set(cited) & relevant)
        m["list_completeness"] = hit / len(relevant)
        m["list_precision"] = hit / len(cited) if cited else None
    if q.kind == "unanswerable":
        m["abstention_accuracy"] = float(ans.abstained)
    else:
        m["false_abstention_rate"] = float(ans.abstained)
    return {
        "id": q.id, "kind": q.kind, "turns": q.turns, "near_miss": q.near_miss,
        "standalone_question": ans.standalone_question, "answer": ans.answer,
        "abstained": ans.abstained, "answerer": ans.answerer, "papers": sorted(relevant),
        "cited": cited, "retrieved": ranked[:10], "markers": markers,
        "dropped_citations": ans.dropped_citations,
        "missing_facts": [f for f in q.facts if not fact_found(f, ans.answer)],
        "sentences": [{"text": s.text, "citations": s.citations, "supported": s.supported,
                       "support": s.support, "reasons": s.reasons} for s in ans.sentences],
        "metrics": m, "ms": round(ans.timings_ms.get("total", 0.0), 1),
    }


def aggregate(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Mean of each metric over the questions it applies to; citation validity is pooled."""
    out: dict[str, dict[str, Any]] = {}
    for name in METRICS:
        vals = [r["metrics"][name] for r in rows if r["metrics"].get(name) is not None]
        out[name] = {"value": sum(vals) / len(vals) if vals else None, "n": len(vals)}
    markers = sum(r["markers"] for r in rows)
    dropped = sum(r["dropped_citations"] for r in rows)
    out["citation_validity"] = {"value": markers / (markers + dropped) if markers + dropped else None,
                                "n": markers + dropped}
    return out


# -- running ------------------------------------------------------------------------------


def run_set(pipeline: Any, questions: list[Question], refs: dict[str, str], *, llm: str,
            model: str | None, judge: str,
            progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Answer every question with Pipeline.answer() as `rag ask`/`rag chat` do, and score it."""
    from rag.judge import OllamaJudge
    from rag.schema import AskOptions

    pipeline.refresh_names()
    checker = pipeline.judge
    if judge == "ollama":
        checker = OllamaJudge(pipeline.retriever.embedder, pipeline.client(model))
        checker.known_names = set(pipeline.judge.known_names)
    options = AskOptions(llm=llm, model=model, judge=judge)  # type: ignore[arg-type]
    rows = []
    for i, q in enumerate(questions, 1):
        history: list[dict[str, str]] = []
        for turn in q.turns:
            ans = pipeline.answer(turn, options, history=history)
            history += [{"role": "user", "content": turn},
                        {"role": "assistant", "content": ans.answer}]
        ranked = [h.paper.paper_id for h in pipeline.retriever.search(ans.standalone_question, 50)]
        rows.append(score_answer(q, ans, ranked, refs, checker))
        if progress:
            progress(f"[{i}/{len(questions)}] {q.id}")
    return rows


def run_cli(settings: Any, *, set_path: Path, llm: str = "none", model: str | None = None,
            judge: str = "default", out: Path = Path("evals/reports")) -> int:
    """`rag eval`: 0 when every threshold holds, 5 when one does not (InputError: bad set)."""
    from rag.answering import Pipeline
    from rag.evaluate_report import check_thresholds, load_thresholds, summary_table, write_reports

    started = time.perf_counter()
    questions = load_set(set_path)
    thresholds_path = set_path.parent / "thresholds.yaml"
    thresholds = load_thresholds(thresholds_path, llm)
    pipeline = Pipeline(settings)
    refs = resolve_refs(questions, pipeline.retriever.papers(), set_path, settings.index)

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    with pipeline:
        rows = run_set(pipeline, questions, refs, llm=llm, model=model or settings.model,
                       judge=judge, progress=progress)
    metrics = aggregate(rows)
    failures = check_thresholds(metrics, thresholds)
    report = {
        "set": set_path.as_posix(), "set_name": f"{set_path.parent.name}-{set_path.stem}",
        "llm": llm, "model": (model or settings.model) if llm == "ollama" else None,
        "judge": judge, "index": settings.index, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "timestamp": time.time(),
        "seconds": round(time.perf_counter() - started, 1), "questions_n": len(rows),
        "metrics": metrics,
        "thresholds": {k: {"op": op, "bound": b} for k, (op, b) in thresholds.items()},
        "thresholds_file": thresholds_path.as_posix() if thresholds else None,
        "failures": failures, "questions": rows,
    }
    json_path, md_path = write_reports(report, out)
    print(summary_table(report))
    print(f"\nreports: {json_path} and {md_path}")
    if not thresholds:
        print(f"no thresholds for --llm {llm} in {thresholds_path}: nothing checked")
    if failures:
        print("\nBELOW THRESHOLD:\n" + "\n".join(f"  {f}" for f in failures))
        return EXIT_BELOW
    return 0
