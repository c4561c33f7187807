"""/health while citation exports run, and what one large export costs (not a test; prints a table).

    .venv/bin/python benchmarks/export_load.py [--papers 2000] [--clients 50] [--health 40]

A seeds/ index is built in a temporary RAG_HOME (not timed) and served in this process
(uvicorn on 127.0.0.1) with its paper list repeated to --papers records (distinct ids), so
that each GET /papers?format=bibtex writes a document of that size. Measured:

  one export alone        wall time of one GET /papers?format=bibtex (and ris, csl-json)
  /health, idle           p50 / max of --health sequential GET /health
  /health under exports   p50 / max of --health sequential GET /health while --clients
                          concurrent bibtex exports are in flight (started first, each
                          client exporting again until the /health probes are done)
  export under load       p50 of the exports' wall times in that run
"""

from __future__ import annotations

import argparse
import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import uvicorn
from _bench import ROOT, free_port, load, median, table, temp_home

from rag.answering import Pipeline
from rag.api.app import create_app
from rag.config import Settings
from rag.ingest import ingest
from rag.retrieve import Retriever


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--papers", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--health", type=int, default=40)
    args = ap.parse_args()

    with temp_home() as home:
        settings = Settings(home=home, seeds=ROOT / "seeds", llm="none")
        ingest([ROOT / "seeds"], settings, show_progress=False)
        retriever = Retriever(settings)
        seeds = retriever.papers()
        many = [dataclasses.replace(p, paper_id=f"{p.paper_id}-{i}")
                for i in range(args.papers // len(seeds) + 1) for p in seeds][: args.papers]
        retriever.papers = lambda: many  # type: ignore[method-assign]
        app = create_app(settings, pipeline=Pipeline(settings, retriever))
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                               limit_concurrency=1024))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        try:
            rows = measure(url, args)
        finally:
            server.should_exit = True
            thread.join(30)
    print(f"Exports of {args.papers} papers, {args.clients} concurrent clients; {load()}\n")
    print(table(["what", "p50 s", "max s"], rows))


def timed(client: httpx.Client, path: str, **params: str) -> float:
    start = time.perf_counter()
    r = client.get(path, params=params)
    r.raise_for_status()
    return time.perf_counter() - start


def measure(url: str, args: argparse.Namespace) -> list[list[object]]:
    rows: list[list[object]] = []
    with httpx.Client(base_url=url, timeout=600) as client:
        for fmt in ("bibtex", "ris", "csl-json"):
            t = timed(client, "/papers", format=fmt)
            rows.append([f"one {fmt} export alone", f"{t:.2f}", f"{t:.2f}"])
        idle = [timed(client, "/health") for _ in range(args.health)]
        rows.append(["/health, idle", f"{median(idle):.3f}", f"{max(idle):.3f}"])

        stop = threading.Event()
        export_times: list[float] = []

        def exporter() -> None:
            with httpx.Client(base_url=url, timeout=600) as own:
                while True:
                    export_times.append(timed(own, "/papers", format="bibtex"))
                    if stop.is_set():
                        return

        with ThreadPoolExecutor(args.clients) as pool:
            for _ in range(args.clients):
                pool.submit(exporter)
            time.sleep(1.0)  # let the exports queue up before probing
            busy = [timed(client, "/health") for _ in range(args.health)]
            stop.set()
        rows.append([f"/health under {args.clients} exports", f"{median(busy):.3f}", f"{max(busy):.3f}"])
        rows.append(["one bibtex export under that load", f"{median(export_times):.2f}",
                     f"{max(export_times):.2f}"])
    return rows


if __name__ == "__main__":
    main()
