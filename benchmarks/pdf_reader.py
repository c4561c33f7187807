"""The PDF reader (rag.corpus.pdf) on a folder of real papers' PDFs: for each, the time, the
title, the abstract's length and whether title, abstract start and abstract end match
benchmarks/pdf_expected.json (written by hand-checking the reader's output against each
paper, 17 open-access papers of the paper-qa repository's test and LitQA folders, which are
not redistributed here); then the totals. Not a test.

    .venv/bin/python benchmarks/pdf_reader.py FOLDER [--expected FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag.corpus.pdf import read_pdf  # noqa: E402
from rag.errors import ParseError  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--expected", type=Path, default=ROOT / "benchmarks" / "pdf_expected.json")
    args = ap.parse_args()
    expected = json.loads(args.expected.read_text(encoding="utf-8")) if args.expected.exists() else {}
    scores = {"title": 0, "starts": 0, "ends": 0}
    files = sorted(args.folder.glob("*.pdf"))
    seconds = 0.0
    for f in files:
        started = time.perf_counter()
        try:
            (paper,) = read_pdf(f, f.name)
        except ParseError as exc:
            print(f"{f.name[:40]:40}  not read: {exc.message}")
            continue
        took = time.perf_counter() - started
        seconds += took
        want = expected.get(f.name, {})
        got = {"title": paper.title == want.get("title"),
               "starts": paper.abstract.startswith(want.get("starts", "\0")),
               "ends": paper.abstract.endswith(want.get("ends", "\0"))}
        for k, ok in got.items():
            scores[k] += ok
        marks = " ".join(k if ok else f"NOT-{k}" for k, ok in got.items()) if want else "(no expectation)"
        print(f"{f.name[:40]:40} {took:5.2f} s {len(paper.abstract.split()):4} words  {marks}  {paper.title}")
    n = sum(1 for f in files if f.name in expected)
    print(f"\n{len(files)} PDFs, {seconds / max(len(files), 1):.2f} s each on average; of {n} with expectations: "
          + ", ".join(f"{k} {v}/{n}" for k, v in scores.items()))


if __name__ == "__main__":
    main()
