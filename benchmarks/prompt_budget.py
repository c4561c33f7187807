"""What the prompt budget does with many sources and a small context, on a real model.

Starts llama.cpp's server with SmolLM2-135M-Instruct (tests/llama_server.py; needs
`scripts/setup --dev`) and the Ollama-protocol relay in front of it, indexes seeds/ in a
temporary home, and asks a list question through the relay (`--llm ollama`):

- `-k 50` at the model's own context (8192), and
- `-k 8` and `-k 50` at `RAG_NUM_CTX=2048` (Ollama's default context),

printing, per case, the sources retrieved and given to the model, the prompt's estimated
tokens against its budget, the tokens the server says it read, the answer's finish reason,
the seconds, and rag's notices. Before the budget (main 545fc5b), `-k 50` built a 7,000-token
prompt that took 150 s to read and ended in a timeout, and at 2048 a 3,018-token prompt was
cut by the server with nothing said.

Usage: .venv/bin/python benchmarks/prompt_budget.py [--question Q]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUESTION = "Which papers use GPUs?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--question", default=QUESTION)
    args = ap.parse_args()
    from rag.answering.pipeline import Pipeline
    from rag.config import Settings
    from rag.ingest import ingest
    from rag.schema import AskOptions
    from tests.llama_server import LlamaServer, available
    from tests.ollama_server import OllamaTestServer

    why = available()
    if why:
        print(f"no real model: {why}")
        return 2
    with tempfile.TemporaryDirectory() as tmp, LlamaServer() as llama, \
            OllamaTestServer(models=("smollm2:135m",), relay=llama.url) as relay:
        base = Settings(home=Path(tmp), seeds=ROOT / "seeds", llm="ollama", model="smollm2:135m",
                        ollama_host=relay.url)
        ingest([ROOT / "seeds"], base, show_progress=False)
        print(f"question: {args.question!r}; SmolLM2-135M-Instruct through the Ollama-protocol relay\n")
        print("| case | papers cited | sources left out / cut | prompt tokens (estimated) | read by the server "
              "| answer budget | finish | seconds | notices |")
        print("|---|---|---|---|---|---|---|---|---|")
        for k, num_ctx in ((50, 8192), (8, 2048), (50, 2048)):
            with Pipeline(base.model_copy(update={"num_ctx": num_ctx})) as p:
                t0 = time.perf_counter()
                ans = p.answer(args.question, AskOptions(k=k))
                seconds = time.perf_counter() - t0
            b = ans.budget or {}
            print(f"| -k {k}, num_ctx {num_ctx} | {len(ans.sources)} | {b.get('left_out', '?')} / "
                  f"{b.get('cut', '?')} | {b.get('prompt_tokens', '?')} | "
                  f"{(ans.usage or {}).get('prompt_tokens', '?')} | {b.get('max_tokens', '?')} | "
                  f"{ans.finish_reason} | {seconds:.1f} | {'; '.join(ans.notices) or '-'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
