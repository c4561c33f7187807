"""Question sets: load and validate a YAML set, resolve its paper references.

The format is documented in evals/README.md. A paper is named either `FILE#N` (the N-th
paper of a file whose path ends like FILE, e.g. `seeds/000_1d593446947ebb0f.txt#1`) or
`id:PAPER_ID` (the paper with that id, e.g. `id:pubmed:10808977` in a JSON Lines corpus).
`split` (`fit` or `heldout`) says whether a question may be used to fit a parameter; scripts
never fit on `heldout` and every figure is reported per split.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rag.corpus.paper import Paper
from rag.corpus.text import short_label
from rag.errors import InputError

KINDS = ("fact", "list", "metadata", "unanswerable", "followup")
SPLITS = ("fit", "heldout")
FIELDS = ("id", "kind", "question", "turns", "papers", "facts", "near_miss", "split", "note",
          "answer_sentence", "off_topic", "names_paper")
_REF = re.compile(r"^([^#\s]+)#([1-9]\d*)$")
_REF_ID = re.compile(r"^id:(\S+)$")
_ID = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")
HINT = "see the question-set format in evals/README.md"


@dataclass
class Question:
    id: str
    kind: str
    turns: list[str]  # the user turns; one for every kind but followup
    papers: list[str] = field(default_factory=list)  # refs: seeds/FILE#N or id:PAPER_ID
    facts: list[str] = field(default_factory=list)
    near_miss: bool = False
    note: str = ""
    split: str = ""  # fit | heldout | "" (a set without splits)
    line: int = 0  # the line of its `papers` in its file, for resolve_refs's errors
    answer_sentence: str = ""  # fact: the abstract's sentence that answers it, verbatim
    off_topic: bool = False  # unanswerable: about nothing in the corpus
    names_paper: bool | None = None  # the question names the paper or study (None: not said)


class _FieldError(Exception):
    """A bad field of one question; load_set names the file and the field's line."""

    def __init__(self, qid: str, name: str, problem: str) -> None:
        super().__init__(f"question {qid}: field `{name}` {problem}")
        self.name = name


def _lines(text: str) -> list[dict[str, int]]:
    """For each item of a YAML list: {"": the item's line, FIELD: that field's line}."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    out = []
    for item in root.value if isinstance(root, yaml.SequenceNode) else []:
        lines = {"": item.start_mark.line + 1}
        if isinstance(item, yaml.MappingNode):
            lines |= {str(key.value): key.start_mark.line + 1 for key, _ in item.value}
        out.append(lines)
    return out


def _strings(value: Any, qid: str, name: str, *, allow_empty: bool) -> list[str]:
    if not isinstance(value, list):
        raise _FieldError(qid, name, f"must be a list of strings, not {type(value).__name__}")
    for i, v in enumerate(value, 1):
        if not isinstance(v, str) or not v.strip():
            raise _FieldError(qid, name, f"item {i} must be a non-empty string, not {v!r}")
    if not value and not allow_empty:
        raise _FieldError(qid, name, "must not be empty")
    return [v.strip() for v in value]


def _turns(item: dict[str, Any], kind: str, qid: str) -> list[str]:
    if kind == "followup":
        if "question" in item:
            raise _FieldError(qid, "question", "is not used by followup questions; use `turns`")
        turns = _strings(item.get("turns"), qid, "turns", allow_empty=False)
        if len(turns) < 2:
            raise _FieldError(qid, "turns", "needs at least two user turns")
        return turns
    if "turns" in item:
        raise _FieldError(qid, "turns", f"is only for followup questions, not {kind}")
    text = item.get("question")
    if not isinstance(text, str) or not text.strip():
        raise _FieldError(qid, "question", "must be a non-empty string")
    return [text.strip()]


def _question(item: dict[str, Any], i: int, seen: set[str]) -> Question:
    raw_id = item.get("id")
    qid = repr(raw_id) if isinstance(raw_id, str) else f"#{i} (no id)"
    if not isinstance(raw_id, str) or not _ID.match(raw_id):
        raise _FieldError(qid, "id", "must be a kebab-case string such as fact-skrull-speedup")
    if raw_id in seen:
        raise _FieldError(qid, "id", "is used by an earlier question too")
    seen.add(raw_id)
    unknown = sorted(set(item) - set(FIELDS))
    if unknown:
        raise _FieldError(qid, unknown[0], f"is not a known field (known: {', '.join(FIELDS)})")
    kind = item.get("kind")
    if kind not in KINDS:
        raise _FieldError(qid, "kind", f"is {kind!r}; expected one of {', '.join(KINDS)}")
    turns = _turns(item, kind, qid)
    if "papers" not in item:
        raise _FieldError(qid, "papers", "is missing ([] for unanswerable questions)")
    papers = _strings(item["papers"], qid, "papers", allow_empty=kind == "unanswerable")
    if kind == "unanswerable" and papers:
        raise _FieldError(qid, "papers", "must be [] for an unanswerable question")
    for ref in papers:
        if not (_REF.match(ref) or _REF_ID.match(ref)):
            raise _FieldError(qid, "papers", f"has {ref!r}; expected seeds/FILE#POSITION or id:PAPER_ID")
    facts = _strings(item.get("facts", []), qid, "facts", allow_empty=True)
    for fact in facts:
        if any(not alt.strip() for alt in fact.split("|")):
            raise _FieldError(qid, "facts", f"has {fact!r} with an empty alternative")
    flags = {}
    for name in ("near_miss", "off_topic", "names_paper"):
        flags[name] = item.get(name, False if name != "names_paper" else None)
        if name in item and not isinstance(flags[name], bool):
            raise _FieldError(qid, name, f"must be true or false, not {flags[name]!r}")
    for name in ("near_miss", "off_topic"):
        if flags[name] and kind != "unanswerable":
            raise _FieldError(qid, name, f"is only for unanswerable questions, not {kind}")
    answer = item.get("answer_sentence", "")
    if not isinstance(answer, str) or ("answer_sentence" in item and not answer.strip()):
        raise _FieldError(qid, "answer_sentence", "must be the answering sentence, a non-empty string")
    note = item.get("note", "")
    if not isinstance(note, str):
        raise _FieldError(qid, "note", "must be a string")
    split = item.get("split", "")
    if split not in (*SPLITS, ""):
        raise _FieldError(qid, "split", f"is {split!r}; expected fit or heldout")
    return Question(raw_id, kind, turns, papers, facts, bool(flags["near_miss"]), note, split,
                    answer_sentence=answer.strip(), off_topic=bool(flags["off_topic"]),
                    names_paper=flags["names_paper"])


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
    lines = _lines(text)
    questions = []
    for i, (item, at) in enumerate(zip(data, lines, strict=True), 1):
        if not isinstance(item, dict):
            raise InputError(f"{path}:{at['']}: item {i} is a {type(item).__name__}, not a mapping", HINT)
        try:
            question = _question(item, i, seen)
        except _FieldError as exc:
            raise InputError(f"{path}:{at.get(exc.name) or at['']}: {exc}", HINT) from None
        question.line = at.get("papers") or at[""]
        questions.append(question)
    return questions


def match_ref(ref: str, papers: Iterable[Paper]) -> Paper | None:
    """The paper a reference names: `id:PAPER_ID`, or `FILE#N`, position N of the file whose
    path ends like FILE."""
    by_id = _REF_ID.match(ref)
    if by_id:
        return next((p for p in papers if p.paper_id == by_id.group(1)), None)
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
    ids = {p.paper_id: p for p in papers}
    out: dict[str, str] = {}
    for q in questions:
        for ref in q.papers:
            if ref in out:
                continue
            by_id = _REF_ID.match(ref)
            paper = ids.get(by_id.group(1)) if by_id else match_ref(ref, papers)
            if paper is None:
                raise InputError(f"{path}:{q.line}: question {q.id!r}: field `papers` names {ref}, which is "
                                 f"not in the index '{index}' ({len(papers)} papers)",
                                 "run the set against the index that holds its corpus (`rag eval --index "
                                 "NAME`), or fix the reference (evals/README.md)")
            out[ref] = paper.paper_id
    return out


def seed_papers(seeds: Path) -> list[Paper]:
    """The papers of a seeds directory, parsed as ingest parses them (no index needed)."""
    from rag.corpus import expand_paths, merge_papers, read_file

    return merge_papers([p for f in expand_paths([seeds]) for p in read_file(f).papers])


def known_names(papers: Iterable[Paper]) -> set[str]:
    """System names of the corpus, as the pipeline's CorpusNames builds them for the judge."""
    labels = (short_label(p.title, p.label) for p in papers)
    return {n.lower() for n in labels if len(n) <= 30}


def assign_splits(items: list[tuple[str, str]], existing: dict[str, str], *, seed: int = 12,
                  heldout: float = 0.5) -> dict[str, str]:
    """A split for every (id, kind) that has none yet: a seeded random draw, stratified by
    kind, that keeps each kind's held-out share at `heldout`. Existing splits never change,
    so questions added later cannot move a held-out question into the fitting part."""
    import random

    out = dict(existing)
    for kind in sorted({k for _, k in items}):
        ids = [i for i, k in items if k == kind]
        new = sorted(i for i in ids if i not in existing)
        random.Random(f"{seed}-{kind}").shuffle(new)
        held = sum(existing.get(i) == "heldout" for i in ids)
        want = min(len(new), max(0, round(len(ids) * heldout) - held))
        for n, qid in enumerate(new):
            out[qid] = "heldout" if n < want else "fit"
    return out
