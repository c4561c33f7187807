"""Cold-start wall time of `rag ask` / `rag search` in fresh processes, against baselines
measured in the same run. Prints medians of several runs; not a test.

    .venv/bin/python benchmarks/cold_start.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
Q = "which systems target long-sequence training?"


def timed(cmd: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=ROOT, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="rag-bench-"))
    env = {**os.environ, "RAG_HOME": str(home), "OLLAMA_HOST": "http://127.0.0.1:9"}
    try:
        subprocess.run([str(BIN / "rag"), "ingest", "-q"], env=env, cwd=ROOT, check=True,
                       capture_output=True)
        py = str(BIN / "python")
        floor = (
            "import onnxruntime, tokenizers;"
            "from rag.embed import get_embedder; from rag.config import get_settings;"
            "s = get_settings(); get_embedder(s.model_cache).embed(['q'])"
        )
        rows = [
            ("python -c 'import sentence_transformers' (naive stack)",
             timed([py, "-c", "import sentence_transformers"], env, args.runs)),
            ("floor: start + ONNX model load + one query embedding",
             timed([py, "-c", floor], env, args.runs)),
            ("rag search --json Q", timed([str(BIN / "rag"), "search", Q, "--json"], env, args.runs)),
            ("rag ask --llm none --json Q",
             timed([str(BIN / "rag"), "ask", Q, "--llm", "none", "--json"], env, args.runs)),
        ]
        port = free_port()
        server = subprocess.Popen([str(BIN / "rag"), "serve", "--port", str(port)], env=env,
                                  cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.3)
            remote = {**env, "RAG_SERVER_URL": url}
            rows.append(("RAG_SERVER_URL=… rag ask --llm none --json Q (thin client)",
                         timed([str(BIN / "rag"), "ask", Q, "--llm", "none", "--json"], remote, args.runs)))
        finally:
            server.terminate()
            server.wait(timeout=30)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    naive = rows[0][1]
    print(f"median of {args.runs} fresh processes each, seeds/ index built, {os.cpu_count()} cores")
    print(f"{'command':<62} {'median s':>9} {'x naive':>8}")
    for name, secs in rows:
        print(f"{name:<62} {secs:>9.2f} {secs / naive:>8.2f}")


if __name__ == "__main__":
    main()
