"""What /mcp sessions a client never closes cost `rag serve`, and that they end (not a test;
prints a table).

    .venv/bin/python benchmarks/mcp_sessions.py [--sessions 1000] [--idle 20]

A seeds/ index is built in a temporary RAG_HOME (not timed) and served by `rag serve` with
RAG_MCP_MAX_SESSIONS above --sessions and RAG_MCP_SESSION_IDLE_S=--idle. Then --sessions
clients each send `initialize` and leave without DELETE /mcp. Measured:

  server RSS              before, with every session open, and once they are idle
  per session             the RSS grown, over the sessions opened
  sessions still open     of the opened ones, those that answer a ping (not 404) after
                          --idle + 5 seconds without a request
  with the defaults       of --sessions + 50 opened against a server with the default
                          RAG_MCP_MAX_SESSIONS, how many are admitted (the rest: 503)
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from _bench import RAG, bench_env, load, rss_mb, run, serve, table, temp_home

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def open_sessions(url: str, n: int) -> list[str]:
    """Session ids of n sessions opened and left open ("" for one refused)."""
    def one(_: int) -> str:
        r = httpx.post(f"{url}/mcp", json=INITIALIZE, headers=HEADERS, timeout=120)
        return r.headers.get("mcp-session-id", "") if r.status_code == 200 else ""

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(one, range(n)))


def still_open(url: str, ids: list[str]) -> int:
    def alive(sid: str) -> bool:
        r = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                       headers={**HEADERS, "Mcp-Session-Id": sid}, timeout=120)
        return r.status_code != 404

    with ThreadPoolExecutor(16) as pool:
        return sum(pool.map(alive, ids))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--idle", type=float, default=20.0)
    args = ap.parse_args()
    rows: list[list[object]] = []
    with temp_home() as home:
        env = bench_env(home)
        run([RAG, "ingest", "-q", "seeds"], env)
        limits = {"RAG_MCP_MAX_SESSIONS": str(args.sessions * 2), "RAG_MCP_SESSION_IDLE_S": str(args.idle)}
        with serve(bench_env(home, **limits)) as srv:
            before = rss_mb(srv.pid)[0]
            ids = [i for i in open_sessions(srv.url, args.sessions) if i]
            opened = rss_mb(srv.pid)[0]
            time.sleep(args.idle + 5)
            left = still_open(srv.url, ids)
            after = rss_mb(srv.pid)[0]
        rows += [["server RSS before", f"{before:.0f} MB"],
                 [f"server RSS with {len(ids)} sessions open", f"{opened:.0f} MB"],
                 ["per session", f"{(opened - before) * 1024 / max(len(ids), 1):.0f} KB"],
                 [f"sessions still open {args.idle + 5:.0f} s after their last request", f"{left} of {len(ids)}"],
                 ["server RSS then", f"{after:.0f} MB"]]
        with serve(bench_env(home)) as srv:
            admitted = sum(1 for i in open_sessions(srv.url, args.sessions + 50) if i)
        rows.append([f"admitted of {args.sessions + 50} with the defaults", str(admitted)])
    print(f"/mcp sessions left open by their clients; {load()}\n")
    print(table(["what", "value"], rows))


if __name__ == "__main__":
    main()
