"""What the claim verifier costs: per (claim, abstract) pair, per answer of k=8 sources, per
43-claim list answer. On seeds/, with the claims of evals/judge_cases.jsonl paraphrased or not.

    .venv/bin/python benchmarks/verifier_cost.py [--repeat 3]

Prints the median milliseconds of:
- `pair`: rag.verify alone, one claim against one abstract's candidate passages (what the
  issue's "10 ms per claim-source pair" bounds), after the judge has picked them;
- `judge`: a whole Judge.check of one cited sentence (embedding the claim, the passages, the
  verifier, the hard checks);
- `answer k=8`: an uncited sentence checked against all 8 sources (attribution's worst case);
- `list 43`: 43 list lines, each checked against its paper (the extractive list answer's
  lines are the abstracts' own words: the verbatim path).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._bench import load  # noqa: E402


def ms(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from rag.config import Settings
    from rag.corpus.words import content_words
    from rag.embed import get_embedder
    from rag.eval.report import load_judge_cases
    from rag.eval.sets import match_ref, seed_papers
    from rag.judge import Judge
    from rag.schema import Source
    from rag.verify import _verifiers

    settings = Settings()
    embedder = get_embedder(settings.model_cache, settings.embed_threads)
    papers = seed_papers(ROOT / "seeds")
    cases = [c for c in load_judge_cases(ROOT / "evals/judge_cases.jsonl") if c["kind"] != "quote"]
    pairs = [(c["sentence"], match_ref(c["paper"], papers)) for c in cases]
    pairs = [(s, p) for s, p in pairs if p is not None]
    judge = Judge(embedder)
    judge.check(pairs[0][0], [("", pairs[0][1].abstract)])  # load the verifier
    verifier = judge.verifier()

    def fresh() -> None:  # each figure without the memo of verdicts already read
        verifier._memo.clear()

    passages = []
    for claim, paper in pairs:
        sents, vecs = judge.sentences(paper.abstract)
        sims = vecs @ embedder.embed([claim])[0]
        top = list(sims.argsort()[::-1][:3])
        shared = [len(content_words(claim) & content_words(x)) for x in sents]
        picks = list(dict.fromkeys([*top, max(range(len(sents)), key=lambda i: shared[i])]))
        passages.append([(claim, sents[i]) for i in picks] + [(claim, " ".join(sents[i] for i in sorted(top[:2])))])

    def pair_all() -> None:
        fresh()
        for batch in passages:
            verifier.probabilities(batch)

    def judge_all() -> None:
        fresh()
        for claim, paper in pairs:
            judge.check(claim + " [1]", [(Source(1, paper, 0.0).header(), paper.abstract)])

    eight = papers[:8]

    def answer_k8() -> None:
        fresh()
        for claim, _ in pairs[:20]:
            judge.check(claim, [(Source(i, p, 0.0).header(), p.abstract) for i, p in enumerate(eight, 1)])

    from rag.corpus.text import short_label, split_sentences

    lines = [(f"{short_label(p.title, p.label)}: {split_sentences(p.abstract)[0]} [1]", p) for p in papers[:43]]

    def list_43() -> None:
        fresh()
        for line, p in lines:
            judge.check(line, [(Source(1, p, 0.0).header(), p.abstract)])

    per_pair = ms(pair_all, args.repeat) / len(passages)
    per_judge = ms(judge_all, args.repeat) / len(pairs)
    per_k8 = ms(answer_k8, args.repeat) / 20
    per_list = ms(list_43, args.repeat)
    print(f"verifier per claim-abstract pair (5 passages): {per_pair:.1f} ms  (n={len(passages)})")
    print(f"judge per cited sentence (all checks):        {per_judge:.1f} ms")
    print(f"one uncited sentence against k=8 sources:     {per_k8:.1f} ms")
    print(f"a 43-line list answer (verbatim lines):       {per_list:.1f} ms")
    print(load())
    _verifiers.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
