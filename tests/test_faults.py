"""Faults survived, nothing lost: an ingest killed halfway, two ingests at once, the index
made read-only or deleted under a running server, Ollama dying in the middle of streamed
answers under load, and a damaged Chroma collection.

Everything is real (the `rag` command in subprocesses, Chroma, the embedding model, `rag
serve` on 127.0.0.1); only Ollama is the Ollama-protocol test server. The corpora are built
from seeds/ (short abstracts, each with a unique code word to search for), so nothing outside
the repository is needed.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import random
import re
import shutil
import signal
import struct
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.conftest import RAG, SEEDS, run_rag
from tests.ollama_server import OllamaTestServer
from tests.rag_server import RagServer, copy_home, serving, sse_events
from tests.test_api_server import FACT_Q, STREAM_Q

# One embedding thread and small batches: the ingests take a few seconds and report progress
# often, so they can be caught halfway; the test's own work keeps the other core.
SLOW_INGEST = {"RAG_EMBED_THREADS": "1", "RAG_EMBED_BATCH": "8"}
SUMMARY = re.compile(r"(\d+) papers: (\d+) new, (\d+) changed, (\d+) unchanged, (\d+) removed")


# -- corpora and the index as it must be -------------------------------------------------------


def write_corpus(dest: Path, files: int, per_file: int, start: int = 0) -> Path:
    """JSONL files of short abstracts taken from seeds/, paper i saying `faultmark<i>`."""
    from rag.corpus import expand_paths, read_file
    from rag.corpus.text import split_sentences

    seeds = [p for path in expand_paths([SEEDS]) for p in read_file(path).papers]
    dest.mkdir(parents=True)
    for f in range(files):
        lines = []
        for j in range(per_file):
            i = start + f * per_file + j
            seed = seeds[i % len(seeds)]
            abstract = " ".join(split_sentences(seed.abstract)[:4])
            lines.append(json.dumps({
                "id": f"fault-{i:03d}", "title": f"{seed.title or seed.label} ({i})",
                "abstract": f"{abstract} Its code word is faultmark{i:03d}.", "year": 2024,
            }))
        (dest / f"part_{f}.jsonl").write_text("\n".join(lines) + "\n")
    return dest


def index_problems(home: Path, corpora: list[Path]) -> list[str]:
    """Everything that differs between the index under home and a complete ingest of corpora:
    missing, extra, duplicate or stale chunks and sentences, and vectors of the wrong text."""
    from rag.config import Settings
    from rag.corpus import expand_paths, merge_papers, read_file
    from rag.corpus.text import split_sentences
    from rag.embed import get_embedder
    from rag.embed.pooling import chunk_weights
    from rag.ingest import _embed_group, _splitter, embed_text, make_chunks
    from rag.store import Store

    settings = Settings(home=home, seeds=SEEDS, llm="none")
    papers = {p.paper_id: p for p in merge_papers(
        [p for path in expand_paths(corpora) for p in read_file(path).papers])}
    splitter = _splitter(settings)
    store = Store(settings)
    problems: list[str] = []
    try:
        ids, docs, metas = store.chunks()
        if len(ids) != len(set(ids)) or store.count() != len(ids):
            problems.append(f"{len(ids)} chunk ids, {len(set(ids))} distinct, count {store.count()}")
        chunks: dict[str, dict[str, tuple[str, dict[str, Any]]]] = defaultdict(dict)
        for cid, doc, meta in zip(ids, docs, metas, strict=True):
            chunks[meta["paper_id"]][cid] = (doc, meta)
        if orphans := sorted(set(chunks) - set(papers)):
            problems.append(f"chunks of papers not in the corpus: {orphans[:5]}")
        stored_sentences = store.sentences(store.sentences_collection.get(include=[])["ids"])
        sentences = {pid: {f"{pid}#s{i}": t for i, t in enumerate(texts)}
                     for pid, (texts, _) in stored_sentences.items()}
        sentence_vectors = {f"{pid}#s{i}": v for pid, (_, vecs) in stored_sentences.items()
                            for i, v in enumerate(vecs)}
        if orphans := sorted(set(sentences) - set(papers)):
            problems.append(f"sentences of papers not in the corpus: {orphans[:5]}")
        chunk_texts: dict[str, str] = {}
        sentence_texts: dict[str, str] = {}
        for pid, paper in papers.items():
            planned = make_chunks(paper, splitter)
            want = {c.chunk_id: c.text for c in planned}
            chunk_texts.update({c.chunk_id: embed_text(paper, c) for c in planned})
            have = chunks.get(pid, {})
            if {cid: doc for cid, (doc, _) in have.items()} != want:
                problems.append(f"{pid}: chunks {sorted(have)} instead of {sorted(want)}")
            if {(m["content_hash"], m["n_chunks"]) for _, m in have.values()} != {
                    (paper.content_hash(), len(want))}:
                problems.append(f"{pid}: chunks of another version of the paper")
            texts = split_sentences(paper.abstract) or [paper.abstract]
            sentence_texts.update({f"{pid}#s{i}": t for i, t in enumerate(texts)})
            if sentences.get(pid, {}) != {f"{pid}#s{i}": t for i, t in enumerate(texts)}:
                problems.append(f"{pid}: sentences {sorted(sentences.get(pid, {}))}")
        # Every stored vector is there and is its own text's (not another paper's, or another
        # version's): compared with the vectors ingest makes afresh (rag.ingest._embed_group:
        # the model reading each chunk, or pooled from sentence vectors where so set).
        embedder = get_embedder(settings.model_cache, settings.embed_threads,
                                precision=settings.embed_precision)
        fresh_chunks: dict[str, np.ndarray] = {}
        for paper in papers.values():
            planned = make_chunks(paper, splitter)
            texts = split_sentences(paper.abstract) or [paper.abstract]
            weights = {paper.paper_id: chunk_weights(paper.abstract, paper.title,
                                                     [c.text for c in planned], texts)
                       if settings.chunk_vectors == "sentences" else None}
            rows, _ = _embed_group([(paper, planned)], {paper.paper_id: texts}, weights,
                                   embedder, settings.embed_batch, None)
            fresh_chunks.update({c.chunk_id: v for c, v in zip(planned, rows[0][2], strict=True)})
        stored = store.collection.get(include=["embeddings"])
        for name, vectors, expected in (
                ("chunk", dict(zip(stored["ids"], stored["embeddings"], strict=True)), chunk_texts),
                ("sentence", sentence_vectors, sentence_texts)):
            present = [i for i in sorted(expected) if i in vectors]
            fresh = (np.asarray([fresh_chunks[i] for i in present]) if name == "chunk"
                     else embedder.embed([expected[i] for i in present]))
            kept = np.asarray([vectors[i] for i in present], dtype=np.float32)
            cosine = (kept * fresh).sum(1) / np.linalg.norm(kept, axis=1).clip(1e-9)
            if wrong := [i for i, c in zip(present, cosine, strict=True) if not c > 0.999]:
                problems.append(f"{len(wrong)} {name} vector(s) of other texts: {wrong[:3]}")
    finally:
        store.close()
    return problems


# -- running `rag ingest` in the background ------------------------------------------------------


class Background:
    """A `rag` subprocess whose stderr (progress bar included) is read as it comes. stderr is
    a pseudo-terminal, as in a user's shell: only there does rag draw its progress bar."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self._master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [RAG, *args], cwd=cwd, env={**os.environ, **env}, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=slave,
        )
        os.close(slave)
        self.err = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 4096)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            self.err += chunk.decode(errors="replace")

    def progress(self) -> float:
        """The progress bar's last fraction (-1 before it shows)."""
        bars = re.findall(r"(\d+)/(\d+) \[", self.err[-400:])
        return int(bars[-1][0]) / max(1, int(bars[-1][1])) if bars else -1.0

    def wait_until(self, what: str, ok: Any, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not ok():
            if self.proc.poll() is not None:
                self._close()
                pytest.fail(f"rag exited ({self.proc.returncode}) before {what}:\n{self.err[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"no {what} within {timeout:.0f} s:\n{self.err[-2000:]}")
            time.sleep(0.002)

    def finish(self, timeout: float = 180) -> tuple[int, str, str]:
        """Exit code, stdout (one summary line: never enough to fill the pipe) and stderr."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        assert self.proc.stdout is not None
        out = self.proc.stdout.read().decode(errors="replace")
        self._close()
        return self.proc.returncode, out, self.err

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._close()

    def _close(self) -> None:
        self._reader.join(5)  # it reads stderr to its end
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        with contextlib.suppress(OSError):
            os.close(self._master)


def chroma_files(home: Path) -> set[tuple[str, int, int]]:
    """What the index's files look like now (any write changes it)."""
    out = set()
    for root, _, names in os.walk(home / "chroma"):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(os.path.join(root, name))
                out.add((os.path.join(root, name), st.st_size, st.st_mtime_ns))
    return out


def summary(stdout: str) -> dict[str, int]:
    m = SUMMARY.search(stdout)
    assert m, stdout
    return dict(zip(["papers", "new", "changed", "unchanged", "removed"], map(int, m.groups()),
                    strict=True))


# -- 1. ingest killed with SIGKILL halfway ------------------------------------------------------


def test_ingest_killed_halfway_then_run_again_leaves_a_complete_index(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", files=8, per_file=10)
    home, cwd = tmp_path / ".rag", tmp_path / "cwd"
    cwd.mkdir()
    env = {**SLOW_INGEST, "RAG_HOME": str(home)}

    first = Background(["ingest", str(corpus)], cwd, env)
    # Past a third of the embedding, some files are stored; then kill -9 at a write, or a
    # moment into one: the most fragile place (between the steps of Store.write).
    first.wait_until("a third of the progress bar", lambda: first.progress() >= 0.35)
    before = chroma_files(home)
    first.wait_until("a write to the index", lambda: chroma_files(home) != before)
    delay = random.uniform(0, 0.25)
    time.sleep(delay)
    assert first.proc.poll() is None, "the ingest finished before it could be killed"
    first.proc.send_signal(signal.SIGKILL)
    first.finish()
    assert first.proc.returncode == -signal.SIGKILL

    again = run_rag("ingest", str(corpus), cwd=cwd, env=env)
    assert again.returncode == 0, again.stderr
    counts = summary(again.stdout)
    # It resumed: what the killed run stored stays, the rest is added.
    assert counts["papers"] == 80 and counts["unchanged"] >= 10, (delay, again.stdout)
    assert counts["new"] + counts["changed"] >= 10, (delay, again.stdout)

    # The papers of the part that was killed are found, as are the first ones.
    for i in (79, 0):
        found = run_rag("search", "--json", "-k", "3", f"faultmark{i:03d}", cwd=cwd, env=env)
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["results"][0]["paper_id"] == f"fault-{i:03d}"
    assert index_problems(home, [corpus]) == [], f"killed {delay:.3f} s into a write"


# -- 2. two ingests at once ------------------------------------------------------------------------


def test_two_ingests_at_once_the_second_waits_and_nothing_is_corrupted(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", files=6, per_file=10)
    extra = write_corpus(tmp_path / "extra", files=1, per_file=5, start=60)
    home, cwd = tmp_path / ".rag", tmp_path / "cwd"
    cwd.mkdir()
    env = {**SLOW_INGEST, "RAG_HOME": str(home)}

    first = Background(["ingest", str(corpus)], cwd, env)
    first.wait_until("the progress bar", lambda: first.progress() >= 0)  # it holds the lock
    second = Background(["ingest", str(extra), str(corpus / "part_0.jsonl")], cwd, env)
    second.wait_until("the second ingest saying it waits", lambda: "waiting for another ingest" in second.err)
    assert first.proc.poll() is None  # it waits for the first, which is still writing
    assert second.progress() < 0  # and has not started embedding

    code, out, err = first.finish()
    assert code == 0, err
    assert summary(out) == {"papers": 60, "new": 60, "changed": 0, "unchanged": 0, "removed": 0}
    code, out, err = second.finish()
    assert code == 0, err
    assert f"waiting for another ingest into {home} to finish" in err
    # After the first, the second sees its file as stored and adds only its new papers.
    assert summary(out) == {"papers": 15, "new": 5, "changed": 0, "unchanged": 10, "removed": 0}
    assert index_problems(home, [corpus, extra]) == []


# -- a running `rag serve` (shared by the two tests below, in either order) ----------------------


@pytest.fixture(scope="module")
def server(seeded_settings, ollama, tmp_path_factory) -> Iterator[RagServer]:  # type: ignore[no-untyped-def]
    with serving(seeded_settings.home, tmp_path_factory.mktemp("faults-serve"),
                 {"OLLAMA_HOST": ollama.url}) as srv:
        try:
            yield srv
        finally:
            with contextlib.suppress(Exception):
                undo_read_only(srv.home)


def ask(srv: RagServer, llm: str = "none") -> httpx.Response:
    return httpx.post(f"{srv.url}/ask", json={"question": FACT_Q, "llm": llm}, timeout=120)


def stream_chat_events(url: str) -> list[tuple[str, Any]]:
    """One streamed /chat answered by Ollama: its events, or a JSON error as ("json", body)."""
    with httpx.Client(timeout=120) as client, client.stream(
            "POST", f"{url}/chat", json={"messages": [{"role": "user", "content": FACT_Q}],
                                         "stream": True, "llm": "ollama"}) as resp:
        if resp.status_code != 200:
            resp.read()
            return [("json", {"status": resp.status_code, **resp.json()})]
        return [(kind, data) for kind, data, _ in sse_events(resp)]


def concurrently(n: int, fn: Any) -> list[Any]:
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        try:
            results[i] = fn(i)
        except Exception as exc:  # reported by the assertions on results
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    return results


def assert_broken_stream_reported(events: Any) -> None:
    assert isinstance(events, list), events
    kinds = [k for k, _ in events]
    assert "final" not in kinds and kinds.count("error") == 1 and kinds[-1] == "error", kinds
    error = events[-1][1]
    assert error["message"] and error["hint"] and error["status"] == 503, error
    assert error.get("incomplete") is True and error["partial"]["incomplete"] is True, error


# -- 4. Ollama breaks off in the middle of streamed answers, under concurrent load -----------------


CLIENTS = 8


def test_ollama_stopping_mid_stream_under_load_gives_every_client_an_error_event(
        server: RagServer, ollama: OllamaTestServer) -> None:
    # Ollama's stream breaks off halfway, for all of 8 clients at once.
    ollama.behaviour, ollama.token_delay = "cut", 0.05
    results = concurrently(CLIENTS, lambda _: stream_chat_events(server.url))
    for events in results:
        assert_broken_stream_reported(events)
        assert any(k == "token" for k, _ in events)  # it did start answering

    # Ollama itself goes away while 8 answers stream: each client is told.
    ollama.behaviour, ollama.token_delay = "cited", 1.0
    asked = sum(r["path"] == "/api/chat" for r in ollama.requests)
    started = [threading.Event() for _ in range(CLIENTS)]

    def client(i: int) -> list[tuple[str, Any]]:
        events: list[tuple[str, Any]] = []
        with httpx.Client(timeout=120) as http, http.stream(
                "POST", f"{server.url}/chat", json={
                    "messages": [{"role": "user", "content": STREAM_Q}], "stream": True,
                    "llm": "ollama"}) as resp:
            assert resp.status_code == 200, resp.read()
            for kind, data, _ in sse_events(resp):
                events.append((kind, data))
                if kind == "token":
                    started[i].set()
        started[i].set()
        return events

    streamed: list[Any] = []
    runner = threading.Thread(target=lambda: streamed.extend(concurrently(CLIENTS, client)))
    runner.start()
    try:
        for event in started:
            assert event.wait(90), "a client got no token"
        assert sum(r["path"] == "/api/chat" for r in ollama.requests) >= asked + CLIENTS
        ollama.stop()
    finally:
        runner.join(180)
    assert len(streamed) == CLIENTS
    for events in streamed:
        assert_broken_stream_reported(events)

    # The server is up: /health says Ollama is gone, and the next question is answered.
    health = httpx.get(f"{server.url}/health", timeout=30)
    assert health.status_code == 200 and health.json()["ollama"]["reachable"] is False
    answered = ask(server)
    assert answered.status_code == 200 and "3.76x" in answered.json()["answer"]
    fallback = ask(server, llm="auto")  # Ollama gone: the offline answerer, with a notice
    assert fallback.status_code == 200 and fallback.json()["answerer"] == "extractive"
    assert server.proc is not None and server.proc.poll() is None


# -- 3. the index read-only, then deleted, under the running server --------------------------------


def make_read_only(path: Path) -> str | None:
    """Make path and everything under it read-only, even for root; None when impossible here."""
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "a-w", str(path)], check=True)
        how = "chmod"
    else:
        # Permission bits do not stop root; the immutable attribute does (if the file system
        # and the container allow setting it).
        if not shutil.which("chattr") or subprocess.run(
                ["chattr", "-R", "+i", str(path)], capture_output=True).returncode != 0:
            undo_read_only(path)
            return None
        how = "chattr +i"
    try:
        (path / "probe").touch()
    except OSError:
        return how
    (path / "probe").unlink()
    undo_read_only(path)
    return None


def undo_read_only(path: Path) -> None:
    if os.geteuid() == 0 and shutil.which("chattr"):
        subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True)
    subprocess.run(["chmod", "-R", "u+w", str(path)], capture_output=True)


def test_index_read_only_under_a_running_server(server: RagServer, tmp_path: Path) -> None:
    how = make_read_only(server.home)
    if how is None:
        pytest.skip("cannot make a directory read-only here (root, and no usable chattr)")
    try:
        # The running server reads what it opened: it keeps answering (it cannot write its
        # BM25 cache, and says so in its log).
        for _ in range(2):
            assert httpx.get(f"{server.url}/health", timeout=30).status_code == 200
            found = httpx.get(f"{server.url}/search", params={"q": "Skrull"}, timeout=60)
            assert found.status_code == 200 and found.json()["results"]
            assert ask(server).status_code == 200
            time.sleep(1.1)  # past the store's version cache: the index is read again
        # A new process reads this small index from its quick file (rag.store.quick), which
        # needs no Chroma, and Chroma writes even to read: it answers from the read-only index.
        env = {"RAG_HOME": str(server.home)}
        for args in (("search", "Skrull"), ("ask", "--llm", "none", FACT_Q)):
            result = run_rag(*args, cwd=tmp_path, env=env)
            assert result.returncode == 0 and "Skrull" in result.stdout, (how, result.stderr)
        # Without its quick file the index is opened in Chroma, which cannot: a clear error, exit 3.
        undo_read_only(server.home)
        (server.home / "cache" / "quick.json").rename(tmp_path / "quick.json")
        assert make_read_only(server.home) == how
        for args in (("search", "Skrull"), ("ask", "--llm", "none", FACT_Q)):
            result = run_rag(*args, cwd=tmp_path, env=env)
            assert result.returncode == 3, (how, result.stderr)
            assert "read-only" in result.stderr and "writable" in result.stderr, result.stderr
            assert "Traceback" not in result.stderr
        ingest = run_rag("ingest", str(SEEDS / "000_1d593446947ebb0f.txt"), cwd=tmp_path, env=env)
        assert ingest.returncode == 3 and "writ" in ingest.stderr, ingest.stderr
        assert "Traceback" not in ingest.stderr
    finally:
        undo_read_only(server.home)


def test_index_deleted_or_replaced_under_a_running_server(seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A server of its own: the index is deleted under it, which leaves it of no use to another test.
    with serving(seeded_settings.home, tmp_path, {}) as server:
        # it has answered before: its store holds the index's files open
        found = httpx.get(f"{server.url}/search", params={"q": "Skrull"}, timeout=60)
        assert found.status_code == 200 and found.json()["results"]
        assert ask(server).status_code == 200
        logged = len(server.log())
        chroma = server.home / "chroma"

        def check_requests(state: str) -> None:
            time.sleep(1.1)  # past the store's version cache (VERSION_TTL)
            for name, resp in (
                    ("search", httpx.get(f"{server.url}/search", params={"q": "Skrull"}, timeout=60)),
                    ("ask", ask(server)),
                    ("papers", httpx.get(f"{server.url}/papers", timeout=60))):
                assert resp.status_code == 500, (state, name, resp.text)
                body = resp.json()  # JSON, never a traceback
                assert body["type"] == "IndexStoreError", (state, name, body)
                assert f"the index at {chroma} was deleted or replaced" in body["error"], (state, body)
                assert f"rm -rf {chroma} && rag ingest" in body["hint"], (state, body)
                assert "restart `rag serve`" in body["hint"], (state, body)
            health = httpx.get(f"{server.url}/health", timeout=30)  # always answers
            assert health.status_code == 200, (state, health.text)
            assert health.json()["papers"] == 0, (state, health.json())

        # Deleted: Chroma would answer from the files it holds open until it opens one anew (a
        # cold path fails at once, a warm one much later); the server says what happened.
        shutil.rmtree(chroma)
        check_requests("deleted")
        # Rebuilt under it: its open files are the old, deleted ones; it must be restarted.
        shutil.copytree(seeded_settings.home / "chroma", chroma)
        check_requests("replaced")
        assert server.proc is not None and server.proc.poll() is None
        assert "Traceback" not in server.log()[logged:]


# -- 5. a damaged collection ----------------------------------------------------------------------


def check_damaged(home: Path, cwd: Path, what: str) -> None:
    for args in (("search", "Skrull"), ("ask", "--llm", "none", FACT_Q)):
        result = run_rag(*args, cwd=cwd, env={"RAG_HOME": str(home)})
        assert result.returncode == 3, f"{what}: {args[0]} exited {result.returncode}: {result.stderr}"
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 2 and lines[0].startswith("error: the index at "), (what, lines)
        assert lines[1].startswith("  hint: rebuild it: rm -rf ") and "&& rag ingest" in lines[1], (what, lines)
        assert str(home / "chroma") in lines[1], (what, lines)


def test_damaged_sqlite_file_says_how_to_rebuild(seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Garbage over the start of the file: Chroma cannot open it.
    home = copy_home(seeded_settings.home, tmp_path / "head")
    db = home / "chroma" / "chroma.sqlite3"
    with db.open("r+b") as fh:
        fh.write(random.randbytes(64 * 1024))
    check_damaged(home, tmp_path, "sqlite header")
    # Garbage in the middle: it opens, and fails when the chunks are counted or read.
    home = copy_home(seeded_settings.home, tmp_path / "middle")
    db = home / "chroma" / "chroma.sqlite3"
    with db.open("r+b") as fh:
        fh.seek(100 * 4096)
        fh.write(random.randbytes(min(2_000_000, db.stat().st_size - 100 * 4096)))
    check_damaged(home, tmp_path, "sqlite pages")


def test_damaged_vector_segment_says_how_to_rebuild(tmp_path: Path) -> None:
    """An hnswlib segment with garbage in it crashed `rag search` and `rag ask` with SIGSEGV
    (exit -11, no message) before rag.store.check looked at it first."""
    from rag.config import Settings
    from rag.corpus.paper import Paper
    from rag.store import Chunk, Store

    # Chroma writes a collection's vector index to disk from 1000 vectors on: 1100 chunks,
    # with random unit vectors for embeddings (nothing here compares meanings).
    home = tmp_path / ".rag"
    rng = np.random.default_rng(7)
    store = Store(Settings(home=home, seeds=SEEDS, llm="none"))
    try:
        papers, sentences = [], []
        for p in range(110):
            paper = Paper(paper_id=f"p{p}", abstract=f"Abstract {p}.", title=f"Paper {p}",
                          label=f"Paper {p}", source="x.jsonl")
            vecs = rng.normal(size=(11, 384)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            chunks = [Chunk(f"p{p}#{i}", f"p{p}", f"Chunk {i} of paper {p}.", i) for i in range(10)]
            papers.append((paper, chunks, vecs[:10]))
            sentences.append((f"p{p}", [paper.abstract], vecs[10:]))
        store.write(papers, sentences=sentences)
        assert store.count() == 1100
    finally:
        store.close()
    segments = [h.parent for h in (home / "chroma").glob("*/header.bin")
                if struct.unpack_from("<iQQQ", h.read_bytes())[3] > 0]
    assert segments, "Chroma wrote no vector index to disk"
    data = segments[0] / "data_level0.bin"
    size = data.stat().st_size
    good = copy_home(home, tmp_path / "good")
    data.write_bytes(random.randbytes(size))
    check_damaged(home, tmp_path, "hnsw data_level0.bin garbage")
    # truncated
    truncated = copy_home(good, tmp_path / "truncated")
    (truncated / "chroma" / segments[0].name / "data_level0.bin").write_bytes(random.randbytes(1000))
    check_damaged(truncated, tmp_path, "hnsw data_level0.bin truncated")
    # the intact copy still works, checked once and then from the stamp
    for _ in range(2):
        result = run_rag("search", "--json", "chunk of paper", cwd=tmp_path, env={"RAG_HOME": str(good)})
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["results"]
    assert (good / "cache" / "segments-checked.json").exists()
