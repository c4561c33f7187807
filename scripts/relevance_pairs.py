"""Write (question, sentence) pairs to be labelled by hand: does the sentence address what
the question asks? (evals/relevance/README.md gives the label rules.)

    nice .venv/bin/python scripts/relevance_pairs.py --home H --out evals/relevance/pairs.jsonl
        [--set evals/questions.yaml --index default --sample N --seed 3] ...

For each fact and unanswerable question of a set (lists, metadata and follow-ups aside) the
pairs are the sentences a reader would be shown: those of the offline answer (`rag ask --llm
none`), else the two nearest passages of its abstention, and, for an answerable question, the
sentence of an answering paper that holds a fact (the one a right answer quotes), when the
answer did not quote it. Each pair keeps its question's split. `addresses` is written as null:
the labeller fills it in by reading question and sentence, before any check is run on them.
Appends to --out (a pair already there, same question and sentence, is not written again).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag.config import Settings  # noqa: E402
from rag.corpus.text import split_sentences  # noqa: E402
from rag.eval.metrics import normalise  # noqa: E402
from rag.eval.sets import load_set, resolve_refs  # noqa: E402

_MARKERS = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")


def plain(sentence: str, name: str) -> str:
    """The sentence as its abstract writes it: markers and the answerer's "Name: " lead off."""
    text = _MARKERS.sub("", sentence).strip()
    if name and text.startswith(f"{name}: "):
        text = text[len(name) + 2:]
    return text


def holds_fact(sentence: str, facts: list[str]) -> bool:
    s = normalise(sentence)
    return any(normalise(a) in s for f in facts for a in f.split("|") if a.strip())


def pairs_for(pipeline: Any, set_path: Path, sample: int, seed: int) -> list[dict[str, Any]]:
    from rag.question.patterns import is_list_question
    from rag.schema import AskOptions

    questions = [q for q in load_set(set_path) if q.kind in ("fact", "unanswerable")
                 and not is_list_question(q.turns[0])]
    if sample:
        questions = random.Random(seed).sample(questions, min(sample, len(questions)))
    papers = {p.paper_id: p for p in pipeline.retriever.papers()}
    refs = resolve_refs(questions, list(papers.values()), set_path, pipeline.settings.index)
    out = []
    for q in questions:
        question = q.turns[0]
        ans = pipeline.answer(question, AskOptions(llm="none"))
        shown: list[tuple[str, str, str]] = []  # (paper_id, sentence, how it is shown)
        if not ans.abstained:
            for s in ans.sentences:
                cited = [ans.sources[n - 1] for n in s.citations if 0 < n <= len(ans.sources)]
                if cited:
                    shown.append((cited[0].paper.paper_id, plain(s.text, cited[0].name), "answer"))
        else:
            shown += [(str(n["paper_id"]), str(n["quote"]), "nearest") for n in ans.nearest[:2]]
        for ref in q.papers:
            pid = refs[ref]
            gold = [s for s in split_sentences(papers[pid].abstract) if holds_fact(s, q.facts)]
            if gold and not any(holds_fact(s, q.facts) for _, s, _ in shown):
                shown.append((pid, gold[0], "gold"))
        for pid, sentence, how in shown:
            out.append({"set": set_path.relative_to(ROOT).as_posix(), "question_id": q.id,
                        "split": q.split, "kind": q.kind, "near_miss": q.near_miss,
                        "question": question, "paper": pid, "sentence": sentence, "shown": how,
                        "addresses": None})
        print(f"{q.id}: {len(shown)}", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--set", type=Path, action="append", required=True)
    ap.add_argument("--index", action="append", required=True, help="one per --set")
    ap.add_argument("--sample", type=int, action="append", help="questions drawn per --set (0: all)")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    from rag.answering import Pipeline

    have = set()
    if args.out.exists():
        for line in args.out.read_text(encoding="utf-8").splitlines():
            d = json.loads(line)
            have.add((d["question"], d["sentence"]))
    samples = args.sample or [0] * len(args.set)
    written = 0
    with args.out.open("a", encoding="utf-8") as fh:
        for set_path, index, sample in zip(args.set, args.index, samples, strict=True):
            settings = Settings(home=args.home, index=index, seeds=ROOT / "seeds", llm="none")
            with Pipeline(settings) as pipeline:
                for pair in pairs_for(pipeline, (ROOT / set_path).resolve(), sample, args.seed):
                    if (pair["question"], pair["sentence"]) in have:
                        continue
                    have.add((pair["question"], pair["sentence"]))
                    fh.write(json.dumps(pair, ensure_ascii=False) + "\n")
                    written += 1
    print(f"{args.out}: {written} pairs written", file=sys.stderr)


if __name__ == "__main__":
    main()
