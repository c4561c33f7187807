"""/health while citation exports run, and what one large export costs (not a test; prints a table).

    .venv/bin/python benchmarks/export_load.py [--papers 2000] [--clients 50] [--health 40] [--apart]

A seeds/ index is built in a temporary RAG_HOME (not timed) and served in this process
(uvicorn on 127.0.0.1) with its paper list repeated to --papers records (distinct ids), so
that each GET /papers?format=bibtex writes a document of that size. Measured:

  one export alone        wall time of one GET /papers?format=bibtex (and ris, csl-json)
  /health, idle           p50 / max of --health sequential GET /health
  /health under exports   p50 / max of --health sequential GET /health while --clients
                          concurrent bibtex exports are in flight (started first, each
                          client exporting again until the /health probes are done)
  export under load       p50 of the exports' wall times in that run

The exporting clients are threads of this process, beside the server: their own Python work
(50 httpx clients reading 2,000-paper documents) contends for the server's interpreter lock,
which a real client in another process does not. --apart runs them in a process of their own:
what the server alone makes /health wait.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
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
    ap.add_argument("--apart", action="store_true", help="Export from a process of their own.")
    ap.add_argument("--drive", metavar="URL", help=argparse.SUPPRESS)  # that process
    args = ap.parse_args()
    if args.drive:
        drive(args.drive, args.clients)
        return

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
    where = "in a process of their own" if args.apart else "in the server's process"
    print(f"Exports of {args.papers} papers, {args.clients} concurrent clients {where}; {load()}\n")
    print(table(["what", "p50 s", "max s"], rows))


def timed(client: httpx.Client, path: str, **params: str) -> float:
    start = time.perf_counter()
    r = client.get(path, params=params)
    r.raise_for_status()
    return time.perf_counter() - start


def exporter(url: str, stop: threading.Event, times: list[float]) -> None:
    """Export again and again until stopped (the last export is finished first)."""
    with httpx.Client(base_url=url, timeout=600) as own:
        while True:
            times.append(timed(own, "/papers", format="bibtex"))
            if stop.is_set():
                return


def drive(url: str, clients: int) -> None:
    """--apart's process: the exporting clients until a line on stdin; their times on stdout."""
    stop = threading.Event()
    times: list[float] = []
    with ThreadPoolExecutor(clients) as pool:
        for _ in range(clients):
            pool.submit(exporter, url, stop, times)
        sys.stdin.readline()
        stop.set()
    print(json.dumps(times))


def measure(url: str, args: argparse.Namespace) -> list[list[object]]:
    rows: list[list[object]] = []
    with httpx.Client(base_url=url, timeout=600) as client:
        for fmt in ("bibtex", "ris", "csl-json"):
            t = timed(client, "/papers", format=fmt)
            rows.append([f"one {fmt} export alone", f"{t:.2f}", f"{t:.2f}"])
        idle = [timed(client, "/health") for _ in range(args.health)]
        rows.append(["/health, idle", f"{median(idle):.3f}", f"{max(idle):.3f}"])

        if args.apart:
            exporters = subprocess.Popen([sys.executable, __file__, "--drive", url, "--clients",
                                          str(args.clients)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True)
            time.sleep(3.0)  # the process starts, then its exports queue up
            busy = [timed(client, "/health") for _ in range(args.health)]
            export_times = json.loads(exporters.communicate("stop\n", timeout=3600)[0])
        else:
            stop = threading.Event()
            export_times = []
            with ThreadPoolExecutor(args.clients) as pool:
                for _ in range(args.clients):
                    pool.submit(exporter, url, stop, export_times)
                time.sleep(1.0)  # let the exports queue up before probing
                busy = [timed(client, "/health") for _ in range(args.health)]
                stop.set()
        rows.append([f"/health under {args.clients} exports", f"{median(busy):.3f}", f"{max(busy):.3f}"])
        rows.append(["one bibtex export under that load", f"{median(export_times):.2f}",
                     f"{max(export_times):.2f}"])
    return rows


if __name__ == "__main__":
    main()
