"""Give every question of a YAML set a `split: fit|heldout` line (once; existing splits stay).

    .venv/bin/python scripts/split_questions.py [evals/questions.yaml] [--seed 12] [--heldout 0.5]

A seeded random draw stratified by kind (rag.eval.sets.assign_splits): half of each kind is
held out. The line is inserted after the item's `kind:` line, so comments and layout stay as
written. Fitting scripts use only `fit` questions; every figure is reported per split.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag.eval.sets import assign_splits, load_set  # noqa: E402

_ITEM = re.compile(r"^- id:\s*(\S+)\s*$")
_KIND = re.compile(r"^\s+kind:\s*\S+\s*$")


def add_splits(path: Path, seed: int, heldout: float) -> int:
    questions = load_set(path)
    existing = {q.id: q.split for q in questions if q.split}
    splits = assign_splits([(q.id, q.kind) for q in questions], existing, seed=seed, heldout=heldout)
    out, current, added = [], None, 0
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
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
    args = ap.parse_args()
    n = add_splits(args.path, args.seed, args.heldout)
    qs = load_set(args.path)
    for kind in sorted({q.kind for q in qs}):
        fit = sum(q.kind == kind and q.split == "fit" for q in qs)
        held = sum(q.kind == kind and q.split == "heldout" for q in qs)
        print(f"{kind:<14} fit {fit:>4}  heldout {held:>4}")
    print(f"{args.path}: {n} split line(s) added")


if __name__ == "__main__":
    main()
