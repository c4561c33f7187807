"""How well P(answerable) tells answerable questions from unanswerable ones, whatever the bound:
the ROC AUC of the shipped answer model's probability, and of each of its features alone, over
the fact and unanswerable questions of a question set. Prints a table; not a test.

    RAG_HOME=H .venv/bin/rag ingest seeds/
    RAG_HOME=H .venv/bin/python benchmarks/answerable_auc.py [--set evals/unseen/named-papers.yaml]

Each question is measured as the pipeline's own decision measures it (`SourceChooser.candidates`,
then `Relevance.measure`: retrieval, the paper models, the question's features), as `rag ask` does.
A feature the index cannot measure (NaN) counts as the set's mean of it. AUC 0.5 is chance; a
feature under 0.5 ranks the wrong way.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag.answering.pipeline import Pipeline  # noqa: E402
from rag.question.patterns import is_list_question  # noqa: E402
from rag.config import Settings  # noqa: E402
from rag.eval.sets import load_set  # noqa: E402


def auc(pos: list[float], neg: list[float]) -> float:
    """P(a random positive scores above a random negative), ties counting half."""
    return sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", type=Path, default=ROOT / "evals" / "unseen" / "named-papers.yaml")
    args = ap.parse_args()
    pipeline = Pipeline(Settings())
    rel = pipeline.chooser.relevance
    rows, answerable = [], []
    for q in load_set(args.set):
        if q.kind not in ("fact", "unanswerable"):
            continue
        list_q = is_list_question(q.turns[0])
        topic, hits = pipeline.chooser.candidates(q.turns[0], None, list_q)
        if not hits:
            continue
        row = rel.measure(q.turns[0], hits, list_question=list_q, topic=topic)[0]
        row["P(answerable)"] = rel.models["answer"].probability(row)
        rows.append(row)
        answerable.append(q.kind == "fact")
    n_pos = sum(answerable)
    print(f"{args.set}: {n_pos} fact, {len(rows) - n_pos} unanswerable questions")
    print(f"{'signal':<16} {'ROC AUC':>7}")
    for name in ["P(answerable)", *rel.models["answer"].names]:
        values = [r[name] for r in rows]
        seen = [v for v in values if not math.isnan(v)]
        fill = sum(seen) / len(seen) if seen else 0.0
        values = [fill if math.isnan(v) else v for v in values]
        pos = [v for v, a in zip(values, answerable, strict=True) if a]
        neg = [v for v, a in zip(values, answerable, strict=True) if not a]
        print(f"{name:<16} {auc(pos, neg):7.3f}")


if __name__ == "__main__":
    main()
