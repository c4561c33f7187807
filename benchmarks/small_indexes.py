"""Small indexes: do indexes of 1, 5 and 20 seed papers answer what the same papers answer
inside seeds/? Prints a table; not a test (tests/test_small_indexes.py asserts the same on
the held-out questions).

    .venv/bin/python benchmarks/small_indexes.py [--sizes 1,5,20] [--seed 5]   # ~1 min, 2 cores

Every fact, metadata and unanswerable question of evals/questions.yaml with at most one paper
is asked offline (`--llm none`) of the seeds/ index, then of smaller indexes cut from it (a
copy with the other papers deleted, so every vector is the same): for size 1, each question's
own paper alone; for sizes 5 and 20, the 60 papers shuffled (seeded) into groups, each
question asked of the group holding its paper, and the unanswerable ones of every group of 20
and of every third group of 5. Counted per size and split: of the answerable questions
seeds/ answers, how many the small index answers too; of the unanswerable ones seeds/
declines, how many it declines too.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUESTIONS = ROOT / "evals" / "questions.yaml"


def questions(splits: set[str]) -> list[Any]:
    from rag.eval.sets import load_set

    return [q for q in load_set(QUESTIONS) if q.kind in ("fact", "metadata", "unanswerable")
            and len(q.papers) <= 1 and q.split in splits]


def answers(settings: Any, asked: list[Any]) -> dict[str, bool]:
    """Question id -> whether the index of `settings` answers it offline (does not abstain)."""
    from rag.answering import Pipeline
    from rag.schema import AskOptions

    opts = AskOptions(llm="none")
    with Pipeline(settings) as pipeline:
        return {q.id: not pipeline.answer(q.turns[-1], opts).abstained for q in asked}


@contextmanager
def subset(settings: Any, keep: set[str], where: Path) -> Iterator[Any]:
    """Settings for a copy of the index of `settings` holding only the papers `keep`."""
    from rag.store import Store

    home = Path(tempfile.mkdtemp(dir=where))
    try:
        shutil.copytree(settings.home, home / "rag", ignore=shutil.ignore_patterns("cache"))
        small = settings.model_copy(update={"home": home / "rag"})
        store = Store(small)
        store.write([], delete_papers=[p.paper_id for p in store.papers() if p.paper_id not in keep])
        store.close()
        yield small
    finally:
        shutil.rmtree(home, ignore_errors=True)


def groups(paper_ids: list[str], size: int, asked: list[Any], refs: dict[str, str],
           seed: int) -> list[tuple[list[str], list[Any]]]:
    """(papers of a small index, the questions asked of it) for indexes of `size` papers."""
    own = [q for q in asked if q.papers]
    if size == 1:
        by_paper: dict[str, list[Any]] = defaultdict(list)
        for q in own:
            by_paper[refs[q.papers[0]]].append(q)
        return [([pid], qs) for pid, qs in by_paper.items()]
    order = sorted(paper_ids)
    random.Random(seed).shuffle(order)
    unanswerable = [q for q in asked if not q.papers]
    out = []
    for k, start in enumerate(range(0, len(order), size)):
        part = order[start:start + size]
        qs = [q for q in own if refs[q.papers[0]] in part]
        if size >= 20 or k % 3 == 0:
            qs += unanswerable
        out.append((part, qs))
    return out


def compare(settings: Any, asked: list[Any], sizes: list[int], seed: int,
            where: Path) -> dict[int, dict[str, list[tuple[Any, bool, bool]]]]:
    """size -> split -> (question, answered in seeds/, answered in the small index), per ask."""
    from rag.eval.sets import resolve_refs
    from rag.store import Store

    store = Store(settings)
    papers = store.papers()
    store.close()
    refs = resolve_refs(asked, papers, QUESTIONS, settings.index)
    full = answers(settings, asked)
    out: dict[int, dict[str, list[tuple[Any, bool, bool]]]] = {}
    for size in sizes:
        rows: dict[str, list[tuple[Any, bool, bool]]] = defaultdict(list)
        for part, qs in groups([p.paper_id for p in papers], size, asked, refs, seed):
            with subset(settings, set(part), where) as small:
                got = answers(small, qs)
            for q in qs:
                rows[q.split].append((q, full[q.id], got[q.id]))
        out[size] = rows
    return out


def kept(rows: list[tuple[Any, bool, bool]]) -> tuple[tuple[int, int], tuple[int, int]]:
    """((answerable answered in both, answered in seeds/), (unanswerable declined in both,
    declined in seeds/))."""
    ans = [(f, g) for q, f, g in rows if q.papers and f]
    una = [(f, g) for q, f, g in rows if not q.papers and not f]
    return (sum(g for _, g in ans), len(ans)), (sum(not g for _, g in una), len(una))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,5,20")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    from _bench import table, temp_home

    from rag.config import Settings
    from rag.ingest import ingest

    with temp_home("rag-small-") as where:
        settings = Settings(home=where / "seeds", seeds=ROOT / "seeds", llm="none")
        ingest([ROOT / "seeds"], settings, show_progress=False)
        result = compare(settings, questions({"fit", "heldout"}), [int(s) for s in args.sizes.split(",")],
                         args.seed, where)
    lines = []
    for size, by_split in result.items():
        for split in ("fit", "heldout"):
            (a, an), (u, un) = kept(by_split[split])
            changed = [q.id for q, f, g in by_split[split] if f != g]
            lines.append([size, split, f"{a}/{an} = {a / max(an, 1):.3f}", f"{u}/{un} = {u / max(un, 1):.3f}",
                          ", ".join(sorted(set(changed))[:6]) + (" ..." if len(set(changed)) > 6 else "")])
    print(table(["papers", "split", "answerable: answered here too", "unanswerable: declined here too",
                 "questions that changed"], lines))


if __name__ == "__main__":
    main()
