"""What the cross-encoder adds to a question, on this machine (not a test).

    nice -n 10 .venv/bin/python benchmarks/relevance_cost.py [--home DIR] [--repeat 5]

Builds (or reuses) an index of seeds/ under --home and answers fact and list questions from
evals/questions.yaml offline, warm (each question once before timing, so the model and the
index are loaded), twice per run: as `rag ask --llm none` answers them, and with the
cross-encoder's scores replaced by a constant (the same pipeline without its reading). The
difference is the cross-encoder's cost; targets: at most 0.3 s for a fact question and 1.5 s
for a list question. Prints medians per kind and the ratio to the run without it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bench import load, table, temp_home, verdict  # noqa: E402

TARGET = {"fact": 0.3, "list": 1.5}


class Unread:
    """Stands in for the cross-encoder: the same interface, a constant score, no work."""

    def score(self, query: str, texts: Any, max_tokens: int = 0) -> np.ndarray:
        return np.zeros(len(texts), dtype=np.float32)


def timed(pipeline: Any, questions: list[str], repeat: int) -> list[float]:
    out = []
    for q in questions:
        runs = []
        for _ in range(repeat):
            t = time.perf_counter()
            pipeline.answer(q)
            runs.append(time.perf_counter() - t)
        out.append(statistics.median(runs))
    return out


def main() -> None:
    from rag.answering import Pipeline
    from rag.config import Settings
    from rag.eval.sets import load_set
    from rag.ingest import ingest
    from rag.relevance.reranker import Reranker

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--per-kind", type=int, default=8)
    args = ap.parse_args()
    qs = load_set(ROOT / "evals" / "questions.yaml")
    asked = {kind: [q.turns[0] for q in qs if q.kind == kind][: args.per_kind] for kind in ("fact", "list")}
    with temp_home() as tmp:
        home = args.home or tmp
        settings = Settings(home=home, seeds=ROOT / "seeds", llm="none")
        ingest([ROOT / "seeds"], settings, show_progress=False)
        with Pipeline(settings) as p:
            rel = p.chooser.relevance
            for q in asked["fact"] + asked["list"]:
                p.answer(q)  # warm: model, index, statistics, sentence vectors
            real: Reranker = rel.reranker
            rows = []
            for kind, questions in asked.items():
                rel._reranker = real
                real._cache.clear()  # the timed run reads every pair again
                with_ce = timed(p, questions, args.repeat)
                rel._reranker = Unread()  # type: ignore[assignment]
                without = timed(p, questions, args.repeat)
                added = [a - b for a, b in zip(with_ce, without, strict=True)]
                rows.append([kind, len(questions), f"{statistics.median(without):.3f}",
                             f"{statistics.median(with_ce):.3f}", f"{statistics.median(added):.3f}",
                             f"{max(added):.3f}",
                             f"{statistics.median(with_ce) / statistics.median(without):.2f}",
                             verdict(statistics.median(added), TARGET[kind])])
            rel._reranker = real
    print(table(["question", "n", "without s", "with s", "added s (median)", "added s (max)",
                 "ratio", f"target (fact {TARGET['fact']} s, list {TARGET['list']} s)"], rows))
    print(load())


if __name__ == "__main__":
    main()
