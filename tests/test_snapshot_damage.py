"""A damaged snapshot never answers: each file of an index's cached snapshot, truncated,
emptied, deleted or with a byte changed, is found out when the snapshot opens (its manifest of
sizes and checksums) and the snapshot is rebuilt from the index with one notice, so the answer
is the clean index's. Damaged relevance caches are rebuilt too, and old versions' caches go."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_rag
from tests.rag_server import copy_home

QUESTIONS = ("Which papers report a 2.5x speedup?", "Which papers build on Megatron-LM?")
FILES = ("snapshot.sqlite3", "abstracts.bin", "abstracts-starts.npy", "titles.bin", "titles-starts.npy",
         "bm25-data.npy", "bm25-indices.npy", "bm25-indptr.npy", "manifest.json")


@pytest.fixture(scope="module")
def home(seeded_settings: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_home(seeded_settings.home, tmp_path_factory.mktemp("damage") / "home")


@pytest.fixture(scope="module")
def pipeline(seeded_settings: Any, home: Path) -> Iterator[Any]:
    from rag.answering.pipeline import Pipeline

    with Pipeline(seeded_settings.model_copy(update={"home": home})) as p:
        yield p


@pytest.fixture(scope="module")
def clean(pipeline: Any) -> dict[str, str]:
    return {q: pipeline.answer(q).answer for q in QUESTIONS}


def _folder(home: Path) -> Path:
    (folder,) = [p for p in (home / "cache").iterdir() if p.is_dir() and not p.name.startswith(".")]
    return folder


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    stat = path.stat()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "emptied":
        path.write_bytes(b"")
    elif how == "deleted":
        path.unlink()
    else:  # a byte changed in the middle, the size and the modification time kept
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0x5A]) + data[middle + 1:])
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


CASES = [(f, how) for f in FILES for how in ("a byte changed", "truncated")] + [
    ("snapshot.sqlite3", "emptied"), ("abstracts-starts.npy", "emptied"), ("bm25-indices.npy", "deleted"),
    ("abstracts.bin", "deleted"), ("manifest.json", "deleted")]


@pytest.mark.parametrize(("name", "how"), CASES, ids=[f"{n} {h}" for n, h in CASES])
def test_a_damaged_snapshot_file_is_rebuilt_not_read(pipeline: Any, clean: dict[str, str], home: Path,
                                                     name: str, how: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    from rag.retrieve import hybrid

    folder = _folder(home)
    _damage(folder / name, how)
    hybrid._snapshots.clear()  # as a new process: the snapshot is opened from disk
    with caplog.at_level(logging.WARNING, logger="rag.retrieve.hybrid"):
        answers = {q: pipeline.answer(q).answer for q in QUESTIONS}
    assert answers == clean
    said = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert len(said) == 1 and name in said[0], said  # one notice, naming the file


@pytest.mark.parametrize("at", [0.15, 0.3, 0.45, 0.6, 0.75, 0.9])
def test_a_byte_changed_anywhere_in_the_manifest_is_said_of_the_manifest(
        pipeline: Any, clean: dict[str, str], home: Path, at: float,
        caplog: pytest.LogCaptureFixture) -> None:
    """A changed byte may fall in a file's name, size or checksum: whichever it is, the answers
    are the clean index's and a notice names the manifest (the file it lists may be the sound
    one). A byte that changes only what the manifest says of a modification time damages
    nothing: the checksum is then read, and it matches."""
    from rag.retrieve import hybrid

    path = _folder(home) / "manifest.json"
    data, stat = path.read_bytes(), path.stat()
    i = int(len(data) * at)
    damaged = data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:]
    path.write_bytes(damaged)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    hybrid._snapshots.clear()
    with caplog.at_level(logging.WARNING, logger="rag.retrieve.hybrid"):
        answers = {q: pipeline.answer(q).answer for q in QUESTIONS}
    assert answers == clean
    said = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert len(said) == (1 if _lists_otherwise(data, damaged) else 0), said
    assert all("manifest.json" in s for s in said), said


def _lists_otherwise(before: bytes, after: bytes) -> bool:
    """Whether the changed manifest lists other files, sizes or checksums than it did (a change
    to a modification time alone lists the same content)."""
    def listed(raw: bytes) -> object:
        files = json.loads(raw)["files"]
        return {n: (f.get("size"), f.get("crc32")) for n, f in files.items()}
    try:
        return listed(after) != listed(before)
    except (ValueError, KeyError, TypeError, AttributeError):
        return True


def test_a_damaged_relevance_cache_is_rebuilt(seeded_settings: Any, tmp_path: Path) -> None:
    home = copy_home(seeded_settings.home, tmp_path / "home")
    env = {"RAG_HOME": str(home), "RAG_LLM": "none"}
    first = run_rag("ask", QUESTIONS[0], cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    caches = [p for p in (home / "cache").iterdir() if p.name.startswith(("probes-", "relevance-"))]
    assert {p.name.split("-")[0] for p in caches} == {"probes", "relevance"}
    for p in caches:
        p.write_bytes(b"")
    again = run_rag("ask", QUESTIONS[0], cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout and "bug in rag" not in again.stderr
    for p in caches:  # written again, whole
        assert p.stat().st_size > 0


def test_a_changed_byte_in_the_database_is_one_notice_and_the_clean_answer(seeded_settings: Any,
                                                                          tmp_path: Path) -> None:
    home = copy_home(seeded_settings.home, tmp_path / "home")
    env = {"RAG_HOME": str(home), "RAG_LLM": "none"}
    first = run_rag("ask", QUESTIONS[1], cwd=tmp_path, env=env)
    _damage(_folder(home) / "snapshot.sqlite3", "a byte changed")
    again = run_rag("ask", QUESTIONS[1], cwd=tmp_path, env=env)
    assert again.returncode == 0 and again.stdout == first.stdout, again.stderr
    assert again.stderr.count("damaged") == 1 and "snapshot.sqlite3" in again.stderr


def test_old_versions_caches_are_removed(fresh_settings: Any, tmp_path: Path) -> None:
    from rag.answering.pipeline import Pipeline
    from rag.ingest import ingest

    def paper(i: int) -> str:
        return (f'{{"id": "p{i}", "title": "Paper {i}", "abstract": "We study gradient compression for '
                f'distributed training and reduce communication by {10 + i} percent."}}\n')

    (tmp_path / "a.jsonl").write_text(paper(1) + paper(2))
    ingest([tmp_path / "a.jsonl"], fresh_settings, show_progress=False)
    with Pipeline(fresh_settings) as p:
        p.answer("Which papers study gradient compression?")
    cache = fresh_settings.home / "cache"
    before = sorted(x.name for x in cache.iterdir() if "-v" in x.name)  # of one version
    (tmp_path / "b.jsonl").write_text(paper(3))
    ingest([tmp_path / "b.jsonl"], fresh_settings, show_progress=False)
    with Pipeline(fresh_settings) as p:
        p.answer("Which papers study gradient compression?")
    after = sorted(x.name for x in cache.iterdir() if "-v" in x.name)
    kinds = lambda names: sorted(n.split("-v")[0] for n in names)  # noqa: E731
    assert kinds(after) == kinds(before) and not set(after) & set(before), (before, after)
    shutil.rmtree(cache)
