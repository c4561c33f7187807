"""Parse time of the worst inputs the abstract readers have met: a 30,000-character line (too
long: an error) and the longest allowed abstract made of capitals, which label detection once
took minutes over. Prints the median wall time of several runs; not a test (the test checks
what is parsed, tests/test_parsers.py).

    .venv/bin/python benchmarks/parse_worst_case.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rag.corpus import read_file

CASES = {
    "30,000-character line": "Abstract:We propose " + "A" * 30_000 + ".\nAbstract:We propose Foo, a tool.\n",
    "longest allowed abstract, capitals": "Abstract:We propose " + "A-" * 9_000 + " " + "B" * 1_000 + ".\n",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("| input | median parse time |\n|---|---|")
        for name, text in CASES.items():
            path = Path(tmp) / "dump.txt"
            path.write_text(text, encoding="utf-8")
            times = []
            for _ in range(args.runs):
                started = time.perf_counter()
                read_file(path)
                times.append(time.perf_counter() - started)
            print(f"| {name} | {statistics.median(times) * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
