"""Latency of rag's MCP face (not a test; prints a table).

    .venv/bin/python benchmarks/mcp_latency.py [--n 30]

A seeds/ index is built in a temporary RAG_HOME (not timed). Then, through the MCP SDK's own
client, after one warm-up call each:

  ask via stdio     `rag mcp` as a subprocess: an offline `ask` of a fact question, median and
                    p95 of --n calls (questions rotate over the fact questions below)
  ask via HTTP      the same calls to /mcp of `rag serve`, and POST /ask of the same server
                    for comparison (the HTTP API's own cost for the same work)
  watch: new file   `rag mcp --watch DIR`: from writing a new file into DIR until get_paper
                    finds its paper (polled every 50 ms), median of 5
  watch: deleted    from deleting that file until get_paper no longer finds it, median of 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from _bench import RAG, ROOT, bench_env, load, median, pct, run, serve, table, temp_home

QUESTIONS = [
    "How much faster is Skrull than DeepSpeed?",
    "What throughput improvement does DynaPipe report?",
    "How does DeepSpeed-Ulysses partition sequences?",
]
TARGET_S = 1.0  # the bound set for a warm offline ask through stdio


async def timed_asks(client: Any, n: int) -> list[float]:
    await client.call_tool("ask", {"question": QUESTIONS[0]})  # warm-up
    out = []
    for i in range(n):
        start = time.perf_counter()
        result = await client.call_tool("ask", {"question": QUESTIONS[i % len(QUESTIONS)]})
        out.append(time.perf_counter() - start)
        assert not result.is_error, result.content[0].text
    return out


def stdio(home: Path, n: int, *args: str) -> Any:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=RAG, args=["mcp", "--llm", "none", *args],
                                   env=bench_env(home), cwd=str(ROOT))
    return Client(params)


def ask_stdio(home: Path, n: int) -> list[float]:
    async def main() -> list[float]:
        async with stdio(home, n) as client:
            return await timed_asks(client, n)

    return anyio.run(main)


def ask_http(home: Path, n: int) -> tuple[list[float], list[float]]:
    from mcp import Client

    with serve(bench_env(home, RAG_LLM="none")) as srv:
        async def main() -> list[float]:
            async with Client(f"{srv.url}/mcp") as client:
                return await timed_asks(client, n)

        mcp_times = anyio.run(main)
        api_times = []
        with httpx.Client(timeout=60) as http:
            http.post(f"{srv.url}/ask", json={"question": QUESTIONS[0], "llm": "none"})
            for i in range(n):
                start = time.perf_counter()
                http.post(f"{srv.url}/ask", json={"question": QUESTIONS[i % len(QUESTIONS)],
                                                  "llm": "none"}).raise_for_status()
                api_times.append(time.perf_counter() - start)
    return mcp_times, api_times


def watch_latency(home: Path, folder: Path, rounds: int = 5) -> tuple[list[float], list[float]]:
    async def present(client: Any, pid: str) -> bool:
        return not (await client.call_tool("get_paper", {"paper_id": pid})).is_error

    async def until(client: Any, pid: str, wanted: bool) -> float:
        start = time.perf_counter()
        while await present(client, pid) != wanted:
            if time.perf_counter() - start > 60:
                raise SystemExit(f"watch: {pid} not {'in' if wanted else 'out of'} the index in 60 s")
            await anyio.sleep(0.05)
        return time.perf_counter() - start

    async def main() -> tuple[list[float], list[float]]:
        added, removed = [], []
        async with stdio(home, 0, "--watch", str(folder)) as client:
            for i in range(rounds):
                pid, path = f"bench-watch-{i}", folder / f"paper-{i}.jsonl"
                path.write_text(json.dumps({"id": pid, "title": f"Benchpaper {i}", "abstract": (
                    f"Benchpaper {i} measures how quickly a watched folder reaches the index. "
                    "It writes one abstract and waits.")}) + "\n")
                added.append(await until(client, pid, True))
                path.unlink()
                removed.append(await until(client, pid, False))
        return added, removed

    (folder / "start.jsonl").write_text(json.dumps({"id": "bench-start", "abstract": (
        "A paper present when the watcher starts.")}) + "\n")
    return anyio.run(main)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=30, help="timed calls per face")
    args = parser.parse_args()
    with temp_home() as tmp:
        home = tmp / "home"
        run([RAG, "ingest", "-q"], bench_env(home))
        stdio_times = ask_stdio(home, args.n)
        mcp_http, api_http = ask_http(home, args.n)
        folder = tmp / "watched"
        folder.mkdir()
        added, removed = watch_latency(tmp / "watch-home", folder)
    ms = lambda xs: f"{median(xs) * 1000:.1f} / {pct(xs, 95) * 1000:.1f} ms"  # noqa: E731
    print(table(["what", "median / p95", "target"], [
        ["`ask` (offline, fact question) through MCP stdio", ms(stdio_times),
         f"≤ {TARGET_S:.0f} s: {'met' if median(stdio_times) <= TARGET_S else 'missed'}"],
        ["the same through MCP streamable HTTP (`rag serve` /mcp)", ms(mcp_http), ""],
        ["the same through the HTTP API (`POST /ask`)", ms(api_http), ""],
        ["watch: new file until searchable", f"{statistics.median(added):.2f} s (max {max(added):.2f})", "≤ 15 s"],
        ["watch: deleted file until gone", f"{statistics.median(removed):.2f} s (max {max(removed):.2f})", "≤ 15 s"],
    ]))
    print(f"\n{args.n} calls per face; {load()}", file=sys.stderr)


if __name__ == "__main__":
    main()
