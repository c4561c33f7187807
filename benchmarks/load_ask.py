"""Load test of POST /ask with the offline answerer (not a test; prints figures).

    .venv/bin/python benchmarks/load_ask.py                      # starts `rag serve` over RAG_HOME
    .venv/bin/python benchmarks/load_ask.py --url http://127.0.0.1:8000 --api-key KEY

N concurrent clients (default 50) each send questions back to back for D seconds (default 30);
reports requests/s, p50/p95/p99 latency and errors. Each question is asked once before the
clock starts, so one-time work (BM25 snapshot, sentence vectors) is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

QUESTIONS = [
    "How much faster is Skrull than DeepSpeed?",
    "What does DeepSpeed-Ulysses do?",
    "Which papers are about long-sequence training?",
    "How does Buff reduce GPU memory fragmentation?",
    "What problem does DynaPipe address?",
    "Which systems use pipeline parallelism?",
    "What is sequence parallelism?",
    "How are mixed long and short sequences scheduled?",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(home: str | None, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    rag = str(Path(sys.executable).parent / "rag")
    env = {**os.environ, "RAG_LLM": "none"}
    if home:
        env["RAG_HOME"] = home
    env.pop("RAG_API_KEY", None)
    with log_path.open("wb") as log:
        proc = subprocess.Popen([rag, "serve", "--port", str(port)], env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300  # an empty index is ingested first
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"rag serve exited with {proc.returncode}; see {log_path}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.terminate()
    sys.exit(f"rag serve did not come up; see {log_path}")


def pct(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[i]


async def run(url: str, clients: int, duration: float, api_key: str | None) -> int:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits,
                                 timeout=httpx.Timeout(120, connect=10)) as client:
        t0 = time.perf_counter()
        for q in QUESTIONS:  # warm-up, not counted
            resp = await client.post("/ask", json={"question": q, "llm": "none"})
            if resp.status_code != 200:
                print(f"warm-up failed: {resp.status_code} {resp.text[:300]}", file=sys.stderr)
                return 1
        print(f"warm-up: {len(QUESTIONS)} questions in {time.perf_counter() - t0:.1f} s")

        deadline = time.perf_counter() + duration

        async def one_client(i: int) -> None:
            n = i
            while time.perf_counter() < deadline:
                q = QUESTIONS[n % len(QUESTIONS)]
                n += 1
                start = time.perf_counter()
                try:
                    resp = await client.post("/ask", json={"question": q, "llm": "none"})
                    ok = resp.status_code == 200 and "answer" in resp.json()
                    if not ok:
                        errors[f"HTTP {resp.status_code}"] += 1
                except (httpx.HTTPError, ValueError) as exc:
                    errors[type(exc).__name__] += 1
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - start)

        health: list[float] = []

        async def watch_health() -> None:  # is the server still responsive under load?
            async with httpx.AsyncClient(base_url=url, timeout=30) as probe:
                while time.perf_counter() < deadline:
                    start = time.perf_counter()
                    await probe.get("/health")
                    health.append(time.perf_counter() - start)
                    await asyncio.sleep(1.0)

        started = time.perf_counter()
        await asyncio.gather(watch_health(), *(one_client(i) for i in range(clients)))
        elapsed = time.perf_counter() - started

    lat = sorted(latencies)
    total = len(lat) + sum(errors.values())
    print(f"POST /ask (llm none): {clients} concurrent clients for {elapsed:.1f} s")
    print(f"  requests   {total} ({len(lat)} ok, {sum(errors.values())} errors"
          + (f": {dict(errors)}" if errors else "") + ")")
    print(f"  throughput {len(lat) / elapsed:.1f} requests/s")
    if lat:
        print(f"  latency    p50 {pct(lat, 50) * 1000:.0f} ms   p95 {pct(lat, 95) * 1000:.0f} ms   "
              f"p99 {pct(lat, 99) * 1000:.0f} ms   max {lat[-1] * 1000:.0f} ms   "
              f"mean {statistics.mean(lat) * 1000:.0f} ms")
    if health:
        print(f"  /health under load: {len(health)} probes, max {max(health) * 1000:.0f} ms")
    return 1 if errors else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running `rag serve` (default: start one)")
    parser.add_argument("--home", help="RAG_HOME for the server this script starts")
    parser.add_argument("--api-key", default=os.environ.get("RAG_API_KEY"),
                        help="bearer token for --url (default: RAG_API_KEY)")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds")
    args = parser.parse_args()

    proc = None
    url = args.url
    if not url:
        log_path = Path(os.environ.get("TMPDIR", "/tmp")) / "rag-load-serve.log"
        print(f"starting rag serve (log: {log_path}) ...")
        proc, url = start_server(args.home, log_path)
        args.api_key = None
    try:
        health = httpx.get(f"{url}/health", timeout=10).json()
        print(f"server {url}: index '{health['index']}', {health['papers']} papers, "
              f"{os.cpu_count()} CPUs here")
        return asyncio.run(run(url, args.clients, args.duration, args.api_key))
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    sys.exit(main())
