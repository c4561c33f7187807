"""Collect sentences a real model wrote through rag, for labelling (evals/realmodel/).

SmolLM2-135M-Instruct under llama.cpp's own server (tests/llama_server.py) answers the fact
and list questions of evals/questions.yaml (both splits: the labels fit nothing of the
answering model) through `--llm openai`, at several k and temperatures; every claim sentence it wrote is kept with the abstracts it cites, or, for a
sentence that cites nothing (a 135M model cites rarely), with the abstract of the paper
ranked first for the question (source 1 of its prompt): a (sentence, abstract) pair for the
judge either way, `cited_by_model` telling which. No judge verdict is written: the sentences are labelled by reading the cited abstracts
before any judge is scored on them (scripts/judge_real_sentences.py).

With `--backend ollama` the model is reached through the Ollama-protocol test server relaying
to the same llama.cpp server (tests/ollama_relay.py), as `rag ask --llm ollama` would reach
Ollama; each row says which backend wrote it, and whether rag added its citation.

Usage: .venv/bin/python scripts/collect_model_sentences.py --home DIR [--out FILE] [--want 240]
           [--backend openai|ollama] [--seed 47]
(DIR: a rag home whose default index holds seeds/; it is built there if empty.)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SEED = 47
KS = (1, 2, 3)  # prompts of 400 to 1,200 tokens: a 2-core machine reads them in seconds
TEMPERATURES = (0.0, 0.7)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=ROOT / "evals/realmodel/sentences.jsonl")
    ap.add_argument("--want", type=int, default=240, help="stop after this many sentences")
    ap.add_argument("--done", nargs="*", default=[], help="question ids to skip when going on")
    ap.add_argument("--backend", choices=("openai", "ollama"), default="openai")
    ap.add_argument("--seed", type=int, default=SEED, help="the order the questions are asked in")
    ap.add_argument("--id-prefix", default="s", help="row ids: PREFIX001, ...")
    ap.add_argument("--shift", type=int, default=0,
                    help="another pass over the questions, each at the next k and temperature")
    args = ap.parse_args()

    import yaml

    from rag.answering.pipeline import Pipeline
    from rag.config import Settings
    from rag.ingest import ingest
    from rag.schema import AskOptions, Source
    from tests.llama_server import LlamaServer

    questions = [q for q in yaml.safe_load((ROOT / "evals/questions.yaml").read_text())
                 if q["kind"] in ("fact", "list")]
    random.Random(args.seed).shuffle(questions)
    # each question once, k and temperature in turn
    runs = [(q, KS[(i + args.shift) % len(KS)],
             TEMPERATURES[(i // len(KS) + args.shift) % len(TEMPERATURES)])
            for i, q in enumerate(questions)]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    rows = []
    if args.out.exists():  # go on from a run that stopped: its sentences stay, its questions done
        rows = [json.loads(x) for x in args.out.read_text(encoding="utf-8").splitlines() if x]
        seen = {(r["sentence"], tuple(c["paper_id"] for c in r["cited"])) for r in rows}
        done = set(args.done) if args.shift else {r["question_id"] for r in rows} | set(args.done)
        runs = [r for r in runs if r[0]["id"] not in done]
    from tests.ollama_server import OllamaTestServer

    with LlamaServer(lifetime=12 * 3600) as server, \
            OllamaTestServer(models=("smollm2:135m",), relay=server.url) as relay:
        base = Settings(home=args.home, seeds=ROOT / "seeds", llm="openai",
                        openai_base_url=f"{server.url}/v1", num_predict=128) \
            if args.backend == "openai" else \
            Settings(home=args.home, seeds=ROOT / "seeds", llm="ollama", ollama_host=relay.url,
                     model="smollm2:135m", num_predict=128)
        if not (args.home / "chroma").exists():
            ingest([ROOT / "seeds"], base, show_progress=False)
        pipelines = {t: Pipeline(base.model_copy(update={"temperature": t})) for t in TEMPERATURES}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        out = args.out.open("a", encoding="utf-8")  # written as it comes: a long run keeps its part
        try:
            for q, k, t in runs:
                ans = pipelines[t].answer(q["question"], AskOptions(k=k))
                by_n = {s.n: s for s in ans.sources}
                top = None
                # what the model wrote: not the papers rag lists after it from their abstracts
                written = ans.answer.split("Also matching:")[0]
                for s in ans.sentences:
                    if s.text not in written:
                        continue
                    cited = [by_n[n] for n in s.citations if n in by_n]
                    if not cited and not s.meta:
                        if top is None:
                            hit = pipelines[t].retriever.search(q["question"], 1)[0]
                            top = Source(1, hit.paper, hit.relevance)
                        cited = [top]
                    key = (s.text, tuple(c.paper.paper_id for c in cited))
                    if not cited or key in seen:
                        continue
                    seen.add(key)
                    rows.append({
                        "id": f"{args.id_prefix}{len(rows) + 1:03d}", "question_id": q["id"],
                        "question": q["question"], "backend": args.backend, "k": k,
                        "temperature": t, "sentence": s.text,
                        "cited_by_model": bool(s.citations) and not s.attributed,
                        "attributed": s.attributed,
                        "cited": [{"n": c.n, "paper_id": c.paper.paper_id, "name": c.name,
                                   "header": c.header(), "abstract": c.paper.abstract}
                                  for c in cited]})
                    out.write(json.dumps(rows[-1], ensure_ascii=False) + "\n")
                    out.flush()
                print(f"{len(rows)} sentences ({q['id']}, k={k}, t={t})", file=sys.stderr)
                if len(rows) >= args.want:
                    break
        finally:
            out.close()
            for p in pipelines.values():
                p.close()
    print(f"wrote {len(rows)} sentences to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
