"""Fit the prompt budget's numbers (rag/corpus/tokens.json) on two corpora, report them on
the third.

rag cannot ask Ollama how many tokens a prompt has (there is no tokenize endpoint), so it
estimates from characters. Each abstract is counted by two real tokenizers: SmolLM2's (a
49k-entry BPE, through llama.cpp's /tokenize; models with larger vocabularies, Llama 3's
128k, need fewer tokens) and MiniLM's WordPiece; the lower characters-per-token of the two is
kept, so the estimate errs towards more tokens.

- chars_per_token: the 2nd percentile over the fit abstracts: a prompt is estimated at
  len/chars_per_token tokens, more than it has for 98% of single abstracts, and a prompt of
  many abstracts averages out further.
- max_chars_per_token: the 99.9th percentile: a prompt has at least len/max tokens; a server
  that reports fewer read less than it was sent (it cut the prompt).
- long_abstract: the 90th percentile of abstract length in characters: longer ones are cut
  first when a prompt must shrink.

Usage: .venv/bin/python scripts/fit_prompt_budget.py [--write] [--per-corpus 600]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"
OUT = ROOT / "rag" / "corpus" / "tokens.json"
SEED = 47


def corpora(per_corpus: int) -> dict[str, list[str]]:
    from rag.corpus import read_file

    rng = random.Random(SEED)
    seeds = [p.abstract for f in sorted((ROOT / "seeds").iterdir()) for p in read_file(f).papers]
    lines = {name: (SHARED / f"benchmarks/{name}/corpus.jsonl").read_text().splitlines()
             for name in ("scifact", "pubmedqa")}
    sci = [json.loads(x)["text"] for x in lines["scifact"]]
    pub = [json.loads(x)["abstract"] for x in lines["pubmedqa"]]
    return {"seeds": seeds, "scifact": rng.sample(sci, min(per_corpus, len(sci))),
            "pubmedqa": rng.sample(pub, min(per_corpus, len(pub)))}


def ratios(texts: list[str], url: str) -> np.ndarray:
    from tokenizers import Tokenizer

    from rag.config import get_settings
    from rag.embed.onnx import tokenizer_path

    wordpiece = Tokenizer.from_file(str(tokenizer_path(get_settings().model_cache)))
    out = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for text in texts:
            bpe = len(client.post("/tokenize", json={"content": text}).json()["tokens"])
            wp = len(wordpiece.encode(text, add_special_tokens=False).ids)
            out.append(len(text) / max(bpe, wp, 1))
    return np.array(out)


def fit(r: np.ndarray, lengths: np.ndarray) -> dict[str, float]:
    return {"chars_per_token": round(float(np.percentile(r, 2)), 2),
            "max_chars_per_token": round(float(np.percentile(r, 99.9)), 2),
            "long_abstract": int(np.percentile(lengths, 90))}


def report(name: str, params: dict[str, float], r: np.ndarray) -> None:
    over = float(np.mean(r >= params["chars_per_token"]))  # estimate >= real tokens
    under = float(np.mean(r <= params["max_chars_per_token"]))  # lower bound holds
    print(f"  {name:9s} n={len(r):4d}  estimate covers {over:.3f}  lower bound holds {under:.3f}"
          f"  chars/token median {np.median(r):.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-corpus", type=int, default=600)
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = ap.parse_args()
    from tests.llama_server import LlamaServer

    texts = corpora(args.per_corpus)
    with LlamaServer() as server:
        r = {name: ratios(t, server.url) for name, t in texts.items()}
    lengths = {name: np.array([len(x) for x in t]) for name, t in texts.items()}
    names = list(r)
    print("leave one corpus out (fit on two, report on the third):")
    for left in names:
        fitted = [n for n in names if n != left]
        params = fit(np.concatenate([r[n] for n in fitted]), np.concatenate([lengths[n] for n in fitted]))
        print(f" fit on {'+'.join(fitted)}: {params}")
        for n in names:
            report(n + ("*" if n == left else ""), params, r[n])
    params = fit(np.concatenate([r["seeds"], r["scifact"]]),
                 np.concatenate([lengths["seeds"], lengths["scifact"]]))
    shipped = {**params, "fitted_on": "seeds + scifact", "held_out": "pubmedqa",
               "script": "scripts/fit_prompt_budget.py", "seed": SEED, "per_corpus": args.per_corpus}
    print("shipped:", json.dumps(shipped))
    if args.write:
        OUT.write_text(json.dumps(shipped, indent=2) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
