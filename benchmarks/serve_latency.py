"""Latency and memory of a warm `rag serve` (not a test; prints tables).

    .venv/bin/python benchmarks/serve_latency.py [--n 300] [--scifact-home /tmp/rag-scifact]

A seeds/ index is built in a temporary RAG_HOME (not timed); `rag serve` is started on it with
OLLAMA_HOST pointing at the Ollama-protocol test server (tests/ollama_server.py, behaviour
"cited", no token delay), warmed up, then measured one request at a time over keep-alive:

  GET /search            p50 / p95 / p99 over --n requests (queries rotate)
  POST /ask, llm none    p50 / p95 over --n/3 requests (the offline answerer)
  POST /chat, stream     time from sending the request to the first `token` SSE event, minus
                         the `retrieve` time the final event reports: what streaming adds
                         before the first token beyond retrieval (prompt, Ollama request, SSE)
  memory                 VmRSS and VmHWM (peak) of the `rag serve` process, from /proc
  baseline               GET / (the static chat page) in the same run: the server's HTTP floor

Queries and questions are all different (titles, abstract openings, labels and topics of the
seed papers; one question in four a list question), so caches of repeated texts do not flatter
the figures.

When the SciFact index exists (built by benchmarks/scifact_retrieval.py), a second server is
started on it and GET /search is measured with SciFact's claims as queries.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import httpx
from _bench import (
    RAG,
    ROOT,
    SCIFACT,
    bench_env,
    load,
    median,
    pct,
    rss_mb,
    run,
    serve,
    table,
    temp_home,
    verdict,
    wait_for_quiet,
)

sys.path.insert(0, str(ROOT))

TOPICS = [
    "long-sequence training", "mixture of experts", "pipeline parallelism", "GPU memory",
    "sequence parallelism", "federated learning", "communication compression",
    "activation recomputation", "quantization", "graph neural networks", "video understanding",
    "out-of-distribution detection", "large language model serving", "KV cache",
    "data loading", "scheduling of training jobs", "fault tolerance", "sparse attention",
    "tensor parallelism", "optimizer state sharding", "fine-tuning", "recommendation models",
    "distributed inference", "compiler optimisation", "energy efficiency",
]
PAPER_QUESTIONS = ["What does {} do?", "How does {} work?", "What problem does {} address?",
                   "What are the results of {}?"]
LIST_QUESTIONS = ["Which papers study {}?", "Which systems address {}?", "Which papers are about {}?"]


def distinct_queries(papers: list[dict], n: int) -> list[str]:
    """n different search queries: paper titles/labels, abstract openings and topics."""
    out: list[str] = []
    for p in papers:
        words = p["abstract"].split()
        out += [p["title"] or p["label"], " ".join(words[:8]), " ".join(words[-8:]),
                f"what is {p['label']}"]
    out += TOPICS
    seen: set[str] = set()
    uniq = [q for q in out if q.strip() and not (q in seen or seen.add(q))]
    return (uniq * (n // len(uniq) + 1))[:n]


def distinct_questions(papers: list[dict], n: int) -> list[str]:
    """n questions, one in four a list question, as few repeats as the corpus allows."""
    single = [t.format(p["label"]) for t in PAPER_QUESTIONS for p in papers]
    lists = [t.format(topic) for t in LIST_QUESTIONS for topic in TOPICS]
    out = []
    for i in range(n):
        pool = lists if i % 4 == 3 else single
        out.append(pool[(i // 4 if pool is lists else i - i // 4) % len(pool)])
    return out


def timed_requests(client: httpx.Client, n: int, make) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for i in range(n):
        method, path, kw = make(i)
        start = time.perf_counter()
        resp = client.request(method, path, **kw)
        out.append((time.perf_counter() - start) * 1000)
        if resp.status_code != 200:
            raise SystemExit(f"{method} {path} answered {resp.status_code}: {resp.text[:500]}")
    return out


def first_token(client: httpx.Client, question: str) -> tuple[float, float, float]:
    """(ms to the first token event, retrieve ms from the final event, total ms)."""
    body = {"messages": [{"role": "user", "content": question}], "stream": True, "llm": "ollama"}
    start = time.perf_counter()
    ttft = None
    final = None
    event = None
    with client.stream("POST", "/chat", json=body) as resp:
        if resp.status_code != 200:
            raise SystemExit(f"/chat answered {resp.status_code}: {resp.read()[:500]!r}")
        for line in resp.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                if event == "token" and ttft is None:
                    ttft = (time.perf_counter() - start) * 1000
                elif event == "final":
                    final = json.loads(line[6:])
                elif event == "error":
                    raise SystemExit(f"/chat stream error: {line}")
    total = (time.perf_counter() - start) * 1000
    if ttft is None or final is None:
        raise SystemExit("the /chat stream sent no token or no final event")
    if not final["answerer"].startswith("ollama:"):
        raise SystemExit(f"expected an Ollama answer, got {final['answerer']}: {final['notices']}")
    return ttft, final["timings_ms"]["retrieve"], total


def ms(values: list[float], p: float) -> str:
    return f"{pct(values, p):.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="GET /search requests (POST /ask: n/3)")
    ap.add_argument("--chat", type=int, default=40, help="streamed /chat requests")
    ap.add_argument("--scifact-home", type=Path, default=Path("/tmp/rag-scifact"))
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS")
    args = ap.parse_args()
    from tests.ollama_server import OllamaTestServer

    wait_for_quiet(timeout=args.wait_quiet)
    rows: list[list[object]] = []
    notes: list[str] = []
    before = load()
    with temp_home() as home, OllamaTestServer(behaviour="cited") as ollama:
        env = bench_env(home, OLLAMA_HOST=ollama.url)
        run([RAG, "ingest", "-q"], env)
        with serve(env) as server, httpx.Client(base_url=server.url, timeout=120) as client:
            rss_start, _ = rss_mb(server.pid)
            papers = client.get("/papers").json()["papers"]
            n_ask = max(10, args.n // 3)
            queries = distinct_queries(papers, args.n + 12)
            questions = distinct_questions(papers, n_ask + 8)
            chat_qs = [t.format(p["label"]) for t in ("Summarise what {} contributes.",
                                                      "What is new in {}?") for p in papers]
            for q in queries[-12:]:  # warm-up (not measured, not repeated below)
                client.get("/search", params={"q": q})
            for q in questions[-8:]:
                client.post("/ask", json={"question": q, "llm": "none"})
            first_token(client, chat_qs[-1])
            floor = timed_requests(client, args.n, lambda i: ("GET", "/", {}))
            search = timed_requests(client, args.n, lambda i: (
                "GET", "/search", {"params": {"q": queries[i]}}))
            ask = timed_requests(client, n_ask, lambda i: (
                "POST", "/ask", {"json": {"question": questions[i], "llm": "none"}}))
            chats = [first_token(client, chat_qs[i % (len(chat_qs) - 1)]) for i in range(args.chat)]
            rss, hwm = rss_mb(server.pid)
        gap = [t - r for t, r, _ in chats]
        rows += [
            ["GET / (the chat page: HTTP floor)", len(floor), ms(floor, 50), ms(floor, 95), ms(floor, 99), ""],
            ["GET /search, seeds/", len(search), ms(search, 50), ms(search, 95), ms(search, 99),
             f"p50 <= 15: {verdict(pct(search, 50), 15)}; p95 <= 30: {verdict(pct(search, 95), 30)}"],
            ["POST /ask llm none, seeds/", len(ask), ms(ask, 50), ms(ask, 95), ms(ask, 99),
             f"p95 <= 100: {verdict(pct(ask, 95), 100)}"],
            ["POST /chat stream: time to first token", len(chats), ms([c[0] for c in chats], 50),
             ms([c[0] for c in chats], 95), ms([c[0] for c in chats], 99), ""],
            ["  of which retrieval (final event)", len(chats), ms([c[1] for c in chats], 50),
             ms([c[1] for c in chats], 95), ms([c[1] for c in chats], 99), ""],
            ["  first token minus retrieval", len(chats), ms(gap, 50), ms(gap, 95), ms(gap, 99),
             f"<= 20 (median): {verdict(median(gap), 20)}"],
        ]
        notes.append(f"rag serve on seeds/: VmRSS {rss:.0f} MB after the run ({rss_start:.0f} MB "
                     f"when it came up), peak VmHWM {hwm:.0f} MB "
                     f"(target <= 400 MB: {verdict(rss, 400)})")

    sci_index = args.scifact_home / "chroma"
    if sci_index.exists():
        queries = [json.loads(line)["text"] for line in
                   (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
        env = bench_env(args.scifact_home, RAG_INDEX="scifact", RAG_SEEDS=str(args.scifact_home / "none"))
        with serve(env) as server, httpx.Client(base_url=server.url, timeout=120) as client:
            papers = client.get("/health").json()["papers"]
            for q in queries[:20]:
                client.get("/search", params={"q": q})
            n = min(args.n, len(queries) - 20)
            sci = timed_requests(client, n, lambda i: ("GET", "/search", {"params": {"q": queries[20 + i]}}))
            rss, hwm = rss_mb(server.pid)
        rows.append([f"GET /search, SciFact ({papers} abstracts)", len(sci), ms(sci, 50),
                     ms(sci, 95), ms(sci, 99), f"p95 <= 60: {verdict(pct(sci, 95), 60)}"])
        notes.append(f"rag serve on SciFact: VmRSS {rss:.0f} MB, peak {hwm:.0f} MB")
    else:
        notes.append(f"no SciFact index at {args.scifact_home}: build it with "
                     "benchmarks/scifact_retrieval.py to measure /search on it")
    after = load()
    print(f"\nWarm `rag serve`, one request at a time ({before} before, {after} after)\n")
    print(table(["request", "n", "p50 ms", "p95 ms", "p99 ms", "target"], rows))
    print()
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
