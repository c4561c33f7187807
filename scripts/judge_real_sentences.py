"""Score the citation-support judges on sentences a real model wrote through rag.

evals/realmodel/sentences.jsonl (scripts/collect_model_sentences.py) holds the sentences and
the abstracts they cite; evals/realmodel/labels.jsonl says of each, from reading those
abstracts, whether they support it. Both were committed before any judge was run on them.
This prints each judge's precision and recall of "supported" and its false-support rate (the
share of unsupported sentences it calls supported), overall, per temperature, and apart for
the sentences the model cited itself (the only ones rag can show as supported):

- the default judge (rag.judge.Judge, what every answer is checked with);
- the model judge (`--judge model`): SmolLM2-135M-Instruct under llama.cpp's server, as
  rag asks it (structured output).

Usage: .venv/bin/python scripts/judge_real_sentences.py [--no-model] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DIR = ROOT / "evals/realmodel"


def load() -> list[dict[str, Any]]:
    sentences = {}
    for line in (DIR / "sentences.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        sentences[row["id"]] = row
    rows = []
    for line in (DIR / "labels.jsonl").read_text(encoding="utf-8").splitlines():
        label = json.loads(line)
        rows.append({**sentences[label["id"]], "supported": bool(label["supported"])})
    return rows


def scores(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """(label, verdict) pairs -> precision, recall and false-support rate of "supported"."""
    tp = sum(lab and ver for lab, ver in pairs)
    fp = sum(ver and not lab for lab, ver in pairs)
    fn = sum(lab and not ver for lab, ver in pairs)
    neg = sum(not lab for lab, _ in pairs)
    return {"n": len(pairs), "supported": tp + fn, "unsupported": neg,
            "precision": round(tp / (tp + fp), 3) if tp + fp else None,
            "recall": round(tp / (tp + fn), 3) if tp + fn else None,
            "false_support": round(fp / neg, 3) if neg else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-model", action="store_true", help="score the default judge only")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()

    from rag.config import Settings
    from rag.embed import get_embedder
    from rag.judge import Judge, OllamaJudge
    from rag.llm.openai import OpenAICompatible

    rows = load()
    settings = Settings()
    embedder = get_embedder(settings.model_cache)
    judges: dict[str, Any] = {"default": Judge(embedder)}
    server = None
    if not args.no_model:
        from tests.llama_server import LlamaServer

        server = LlamaServer().start()
        judges["model"] = OllamaJudge(embedder, OpenAICompatible(f"{server.url}/v1", None))
    verdicts: dict[str, list[bool]] = defaultdict(list)
    try:
        for row in rows:
            records = [(c["header"], c["abstract"]) for c in row["cited"]]
            for name, judge in judges.items():
                verdicts[name].append(bool(judge.check(row["sentence"], records).supported))
    finally:
        if server is not None:
            server.stop()
    out: dict[str, Any] = {}
    for name, got in verdicts.items():
        pairs = [(r["supported"], v) for r, v in zip(rows, got, strict=True)]
        out[name] = {"all": scores(pairs)}
        for t in sorted({r["temperature"] for r in rows}):
            out[name][f"temperature {t:g}"] = scores(
                [p for p, r in zip(pairs, rows, strict=True) if r["temperature"] == t])
        # Only a sentence the model cited can be shown as supported (an uncited one is shown
        # as "no citation"); the others were paired with the top-ranked paper to test the
        # judge as if the model had cited it.
        for cited in (True, False):
            out[name][f"cited by the model: {cited}"] = scores(
                [p for p, r in zip(pairs, rows, strict=True) if r["cited_by_model"] is cited])
        wrong = [r["id"] for r, v in zip(rows, got, strict=True) if v and not r["supported"]]
        out[name]["called supported, labelled unsupported"] = wrong
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
