"""Give every question of a YAML set a `split: fit|heldout` line (once; existing splits stay).

    .venv/bin/python scripts/split_questions.py [evals/questions.yaml] [--seed 12] [--heldout 0.5]
        [--redraw]

A seeded random draw stratified by kind (rag.eval.sets.assign_splits): half of each kind is
held out. The line is inserted after the item's `kind:` line, so comments and layout stay as
written. Fitting scripts use only `fit` questions; every figure is reported per split.

`--redraw`: draw every question's split afresh, replacing the `split:` lines there are (a set
whose writers marked every question `heldout`, as evals/blind/ were written). Its strata are
finer where the set says more: an unanswerable question's near miss or off-topic, and whether
a question names its paper, so that each half holds as many of each.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag.eval.sets import Question, assign_splits, load_set  # noqa: E402

_ITEM = re.compile(r"^- id:\s*(\S+)\s*$")
_KIND = re.compile(r"^\s+kind:\s*\S+\s*$")
_SPLIT = re.compile(r"^\s+split:\s*\S+\s*$")


def stratum(q: Question) -> str:
    """The kind, with the near miss or off-topic and whether it names its paper where said."""
    parts = [q.kind] + ["near-miss"] * q.near_miss + ["off-topic"] * q.off_topic
    return "-".join(parts + ([] if q.names_paper is None else ["named" if q.names_paper else "unnamed"]))


def add_splits(path: Path, seed: int, heldout: float, redraw: bool = False) -> int:
    questions = load_set(path)
    existing = {} if redraw else {q.id: q.split for q in questions if q.split}
    items = [(q.id, stratum(q) if redraw else q.kind) for q in questions]
    splits = assign_splits(items, existing, seed=seed, heldout=heldout)
    out, current, added = [], None, 0
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if redraw and _SPLIT.match(line):
            continue
        out.append(line)
        m = _ITEM.match(line)
        if m:
            current = m.group(1).strip("'\"")
        elif current and _KIND.match(line) and current not in existing:
            out.append(f"  split: {splits[current]}\n")
            added += 1
            current = None
    path.write_text("".join(out), encoding="utf-8")
    load_set(path)  # still valid
    return added


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", type=Path, default=ROOT / "evals" / "questions.yaml")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--heldout", type=float, default=0.5)
    ap.add_argument("--redraw", action="store_true", help="draw every split afresh (see above)")
    args = ap.parse_args()
    n = add_splits(args.path, args.seed, args.heldout, args.redraw)
    qs = load_set(args.path)
    for kind in sorted({q.kind for q in qs}):
        fit = sum(q.kind == kind and q.split == "fit" for q in qs)
        held = sum(q.kind == kind and q.split == "heldout" for q in qs)
        print(f"{kind:<14} fit {fit:>4}  heldout {held:>4}")
    print(f"{args.path}: {n} split line(s) added")


if __name__ == "__main__":
    main()
