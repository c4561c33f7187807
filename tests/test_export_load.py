"""Citation exports run where they cannot starve the service routes: /health answers while
many exports are in flight, and a large export streams the same document `export` writes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import bibtexparser
import httpx
import pytest
import uvicorn

import rag.export
from rag.answering import Pipeline
from rag.api.app import EXPORT_WORKERS, LIGHT_WORKERS, create_app
from rag.corpus.paper import Paper
from rag.export import export, export_parts
from tests.ollama_server import free_port_with_nothing_listening as free_port

WAIT_S = 60.0  # bound on waiting for a condition; never a speed expectation


@pytest.fixture()
def server(seeded_settings, retriever) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The app on 127.0.0.1 in this process (so a test can hold its exports at a gate)."""
    settings = seeded_settings.model_copy(update={"llm": "none"})
    app = create_app(settings, pipeline=Pipeline(settings, retriever))
    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                            limit_concurrency=256)
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{config.port}"
    started = threading.Event()
    for _ in range(int(WAIT_S * 10)):
        if srv.started:
            started.set()
            break
        started.wait(0.1)
    assert started.is_set(), "server did not start"
    yield url
    srv.should_exit = True
    thread.join(WAIT_S)


def test_health_answers_while_exports_hold_every_export_worker(server: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    n_exports = 2 * (LIGHT_WORKERS + EXPORT_WORKERS)  # more than every pool /health could share
    gate, entered = threading.Event(), threading.Semaphore(0)
    write_bibtex = rag.export._WRITERS["bibtex"]

    def held(*args: object) -> str:
        entered.release()
        assert gate.wait(WAIT_S), "exports were never let go"
        return write_bibtex(*args)  # type: ignore[arg-type]

    monkeypatch.setitem(rag.export._WRITERS, "bibtex", held)
    with httpx.Client(base_url=server, timeout=WAIT_S) as client, ThreadPoolExecutor(n_exports) as pool:
        exports = [pool.submit(client.get, "/papers", params={"format": "bibtex"}) for _ in range(n_exports)]
        # every export worker is busy writing, and the other exports wait behind them
        for _ in range(min(n_exports, EXPORT_WORKERS)):
            assert entered.acquire(timeout=WAIT_S), "exports did not start"
        health = client.get("/health")
        assert health.status_code == 200 and health.json()["papers"] == 60
        assert not any(f.done() for f in exports)  # answered while all exports were in flight
        gate.set()
        for f in exports:
            done = f.result(timeout=WAIT_S)
            assert done.status_code == 200
            assert len(bibtexparser.parse_string(done.text).entries) == 60


def test_a_large_export_streams_the_same_document(server: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(rag.export, "PART_PAPERS", 7)  # 60 papers: 9 parts
    with httpx.Client(base_url=server, timeout=WAIT_S) as client:
        listed = [Paper.from_dict(p) for p in client.get("/papers").json()["papers"]]
        for fmt in ("bibtex", "ris", "csl-json"):
            with client.stream("GET", "/papers", params={"format": fmt}) as response:
                assert response.headers.get("transfer-encoding") == "chunked"
                text = response.read().decode()
            assert text == export(listed, fmt)


@pytest.mark.parametrize("fmt", ["bibtex", "ris", "csl-json"])
def test_export_parts_join_to_the_whole_document(fmt: str) -> None:
    papers = [Paper(f"p{i}", f"Abstract {i} about GPUs.", title=f"Title {i % 4}", year=2020 + i % 3,
                    authors=["Jane Doe"]) for i in range(11)]
    for size in (1, 3, 10, 11, 50):
        assert "".join(part() for part in export_parts(papers, fmt, size)) == export(papers, fmt)
