"""The precision of each answering rule (rag/answering/rules.py) on the blind question sets.

    nice -n 10 .venv/bin/python scripts/rule_precision.py [--home /tmp/rag-relevance]
        [--sets seeds-a,seeds-b,scifact-c,pubmedqa-d,unseen,named-papers] [--json OUT]

For every fact and unanswerable question of evals/blind/ (and of the two measurement sets of
evals/unseen/, which are all held out) that is not a list, read as the
pipeline reads it (`Pipeline.read`), with the papers it names as the source chooser finds them
(the relevance decision's `named`): which rule, if any, finds its answer in a named paper. A
rule is right when the question is answerable, the paper it answers from is one that answers
it, and (but for the record's authors) a sentence it finds holds one of the question's facts.
Printed per rule and split (`fit`, `heldout`): how often it fired, how often it was right, and
the same for the questions where it decided the answer (the relevance models declined them).
A list question whose papers a list rule chose (rag/answering/listing.py) counts each paper it
listed: right when the paper belongs to the list.

The indexes are those of scripts/fit_relevance.py (the same --home; built there when missing).
Nothing is fitted here: the rules' conditions were written before these figures were taken,
and a rule whose held-out precision does not hold goes (docs/asking/decisions.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import fit_relevance as fr  # noqa: E402

from rag.corpus.text import short_label  # noqa: E402
from rag.eval.sets import load_set, resolve_refs  # noqa: E402
from rag.retrieve import Filters  # noqa: E402

INDEX = {"seeds-a": "default", "seeds-b": "default", "scifact-c": "scifact", "pubmedqa-d": "pubmedqa",
         "unseen": "default", "named-papers": "default"}
PATH = {"unseen": "evals/unseen/questions.yaml", "named-papers": "evals/unseen/named-papers.yaml"}


def measure(name: str, home: Path) -> list[dict[str, Any]]:
    """One row per question a rule fired on: set, split, rule, whether it decided, right."""
    from rag.answering import Pipeline
    from rag.answering.rules import first_found

    settings = fr.settings_for(INDEX[name], home, None)
    fr.ensure_index(settings)
    path = ROOT / PATH.get(name, f"evals/blind/{name}.yaml")
    questions = [q for q in load_set(path) if q.kind in ("fact", "unanswerable", "list")]
    rows = []
    with Pipeline(settings) as pipeline:
        refs = resolve_refs(questions, pipeline.retriever.papers(), path, settings.index)
        pipeline.refresh_names()
        for q in questions:
            text = pipeline.names.as_written(q.turns[0])
            asked = pipeline.read(q.turns[0], text, Filters())
            answers = {refs[r] for r in q.papers}
            if asked.list_question:
                rows += _listed(pipeline, asked, q, answers, name)
                continue
            decision = pipeline.chooser.decide(asked.standalone, None, False)
            papers = pipeline.retriever.snapshot().papers
            named = [papers[i] for i in decision.named if i in papers]
            found = first_found(asked, [(p, short_label(p.title, p.label)) for p in named])
            if found is None:
                continue
            right = q.kind == "fact" and found.papers[0].paper_id in answers and (
                found.rule.answer == "record" or any(
                    alt in sent for fact in q.facts for alt in fact.split("|") for sent in found.sentences))
            rows.append({"set": name, "split": q.split or "heldout", "id": q.id, "rule": found.rule.name,
                         "decided": not decision.answerable, "right": right})
    return rows


def _listed(pipeline: Any, asked: Any, q: Any, answers: set[str], name: str) -> list[dict[str, Any]]:
    """A list question a list rule (rag.answering.listing) chose the papers of: one row per
    paper it listed, right when the paper belongs to the list (its precision, paper by paper)."""
    selection = pipeline.chooser.choose(asked, 8, None)
    if not selection.rule:
        return []
    return [{"set": name, "split": q.split or "heldout", "id": q.id, "rule": f"list: {selection.rule}",
             "decided": True, "right": s.paper.paper_id in answers} for s in selection.sources] or [
        {"set": name, "split": q.split or "heldout", "id": q.id, "rule": f"list: {selection.rule}",
         "decided": True, "right": not answers}]  # declined: right when nothing belongs


def report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """rule -> split -> {fired, right, decided, decided_right}."""
    out: dict[str, Any] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    for r in rows:
        cell = out[r["rule"]][r["split"]]
        cell["fired"] += 1
        cell["right"] += r["right"]
        cell["decided"] += r["decided"]
        cell["decided_right"] += r["decided"] and r["right"]
    return json.loads(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, default=Path("/tmp/rag-relevance"))
    ap.add_argument("--sets", default=",".join(INDEX))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = [r for name in args.sets.split(",") for r in measure(name, args.home)]
    table = report(rows)
    print(f"{'rule':<12} {'split':<8} {'fired':>5} {'right':>5} {'precision':>9}   "
          f"{'decided':>7} {'right':>5}")
    for rule, splits in sorted(table.items()):
        for split, c in sorted(splits.items()):
            precision = c["right"] / c["fired"] if c["fired"] else float("nan")
            print(f"{rule:<12} {split:<8} {c['fired']:>5} {c['right']:>5} {precision:>9.3f}   "
                  f"{c['decided']:>7} {c['decided_right']:>5}")
    wrong = [r for r in rows if not r["right"]]
    print(f"\nwrong ({len(wrong)}): " + ", ".join(f"{r['set']}:{r['id']} ({r['rule']})" for r in wrong))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "table": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
