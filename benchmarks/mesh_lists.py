"""How much of a MeSH list an abstract can show: PubMedQA's list questions ("Which studies are
about adenocarcinoma?") hold every paper NLM's indexers gave that heading, read from the full
article. This counts, per split, the members whose title and abstract share no word with the
heading (stemmed content words, as rag's coverage features read them), and what the plainest
reading, "every word of the heading is in the title or abstract", lists: its precision and
recall beside what `rag eval --set evals/pubmedqa/questions.yaml` reports. Prints a table; not a
test, and nothing is fitted on it.

    .venv/bin/python benchmarks/mesh_lists.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag.corpus.words import content_words  # noqa: E402

CORPUS = ROOT.parent / "shared" / "benchmarks" / "pubmedqa" / "corpus.jsonl"
SET = ROOT / "evals" / "pubmedqa" / "questions.yaml"
HEADING = re.compile(r"MeSH heading '(.+?)'")


def main() -> None:
    words = {}
    with CORPUS.open(encoding="utf-8") as fh:
        for line in fh:
            paper = json.loads(line)
            words[paper["id"]] = content_words(f"{paper.get('title') or ''} {paper['abstract']}")
    lists = [q for q in yaml.safe_load(SET.read_text(encoding="utf-8")) if q["kind"] == "list"]
    print("split     lists  members  no heading word  all heading words: precision  recall")
    for split in ("fit", "heldout"):
        part = [q for q in lists if q["split"] == split]
        members = silent = 0
        precision = recall = 0.0
        for q in part:
            relevant = {p.removeprefix("id:") for p in q["papers"]}
            named = HEADING.search(q["note"])
            if named is None:
                raise SystemExit(f"{SET}: list {q['id']} does not name its MeSH heading in its note")
            heading = content_words(named.group(1))
            members += len(relevant)
            silent += sum(not heading & words[p] for p in relevant)
            chosen = {p for p, w in words.items() if heading <= w}
            hit = len(chosen & relevant)
            precision += hit / len(chosen) if chosen else 1.0
            recall += hit / len(relevant)
        print(f"{split:8s}  {len(part):5d}  {members:7d}  {silent / members:15.3f}  "
              f"{precision / len(part):28.3f}  {recall / len(part):6.3f}")


if __name__ == "__main__":
    main()
