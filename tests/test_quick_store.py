"""A small index is read from its quick file (rag.store.quick), without Chroma: the same
answers as from Chroma, never an answer from a state the index no longer has."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SEEDS, run_rag

QUESTIONS = [
    "What speedup does Skrull report over DeepSpeed?",
    "Which papers study long-context training?",
    "What does LoRA freeze?",
    "Which 2023 papers are about mixture of experts?",
]


@pytest.fixture()
def home(seeded_settings: Any, tmp_path: Path) -> Path:
    """A copy of the seeded data folder, read through the CLI (which writes its quick entry)."""
    copy = tmp_path / "home"
    shutil.copytree(seeded_settings.home, copy)
    return copy


def ask(home: Path, cwd: Path, question: str, *extra: str) -> dict[str, Any]:
    done = run_rag("ask", "--llm", "none", "--json", question, *extra, cwd=cwd,
                   env={"RAG_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    return {k: out[k] for k in ("answer", "citations", "abstained", "sentences", "nearest", "matched")}


def quick_entries(home: Path) -> dict[str, Any]:
    path = home / "cache" / "quick.json"
    return json.loads(path.read_text()) if path.exists() else {}


def test_answers_from_the_quick_file_are_those_from_chroma(home: Path, tmp_path: Path) -> None:
    ask(home, tmp_path, QUESTIONS[0])  # a copied folder's entry names another file: rewritten
    assert quick_entries(home)["default"]["database"]
    quick = [ask(home, tmp_path, q) for q in QUESTIONS]
    assert (home / "cache" / "quick.json").exists()
    (home / "cache" / "quick.json").unlink()
    for question, fast in zip(QUESTIONS, quick, strict=True):
        slow = ask(home, tmp_path, question)
        (home / "cache" / "quick.json").unlink()  # each from Chroma
        assert fast == slow, question


def test_a_question_of_a_small_index_imports_no_chroma(home: Path, tmp_path: Path) -> None:
    ask(home, tmp_path, QUESTIONS[0])
    code = ("import sys; from rag.cli import main\n"
            "sys.argv = ['rag', 'ask', '--llm', 'none', '--json', sys.argv[1]]\n"
            "try:\n    main()\n"
            "except SystemExit:\n    pass\n"
            "print('chromadb' in sys.modules, 'httpx' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, QUESTIONS[0]], cwd=tmp_path,
                          env={"RAG_HOME": str(home), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["citations"]
    assert done.stderr.strip().splitlines()[-1] == "False False"


def test_a_write_is_seen_by_the_next_question(home: Path, tmp_path: Path) -> None:
    ask(home, tmp_path, QUESTIONS[0])
    before = quick_entries(home)["default"]["version"]
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"id": "q1", "title": "Zorblat: quantum sorting of socks",
                                "abstract": "We present Zorblat, which sorts socks with qubits "
                                            "at 9.5 pairs per second."}) + "\n")
    done = run_rag("ingest", str(mine), cwd=tmp_path, env={"RAG_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert quick_entries(home)["default"]["version"] > before  # the writer wrote the new state
    answer = ask(home, tmp_path, "How fast does Zorblat sort socks?")
    assert "9.5" in answer["answer"] and not answer["abstained"]
    removed = run_rag("papers", "remove", "q1", cwd=tmp_path, env={"RAG_HOME": str(home)})
    assert removed.returncode == 0, removed.stderr
    assert ask(home, tmp_path, "How fast does Zorblat sort socks?")["abstained"]


def test_a_damaged_or_stale_quick_file_is_never_read(home: Path, tmp_path: Path) -> None:
    expected = ask(home, tmp_path, QUESTIONS[0])
    entry = quick_entries(home)["default"]
    data = home / "cache" / f"quick-{entry['collection']}-v{entry['version']}-f1.npz"
    data.write_bytes(data.read_bytes()[:1000])  # cut short
    assert ask(home, tmp_path, QUESTIONS[0]) == expected
    # an entry naming another database file (the index deleted and built again) is passed over
    entries = quick_entries(home)
    entries["default"]["database"] = [0, 0]
    (home / "cache" / "quick.json").write_text(json.dumps(entries))
    assert ask(home, tmp_path, QUESTIONS[0]) == expected
    assert quick_entries(home)["default"]["database"] != [0, 0]  # written again


def test_the_demo_index_gives_way_to_ones_own_papers(tmp_path: Path) -> None:
    env = {"RAG_HOME": str(tmp_path / "fresh"), "RAG_SEEDS": str(SEEDS)}
    first = run_rag("ask", "--llm", "none", "--json", QUESTIONS[0], cwd=tmp_path, env=env)
    assert first.returncode == 0 and "demo index" in first.stderr, first.stderr
    entries = quick_entries(tmp_path / "fresh")
    assert entries["default"]["serve"] == "demo" and entries["demo"]["count"] > 0
    again = run_rag("ask", "--llm", "none", "--json", QUESTIONS[0], cwd=tmp_path, env=env)
    assert again.returncode == 0 and "demo index" in again.stderr  # said from the quick file too
    assert json.loads(again.stdout)["answer"] == json.loads(first.stdout)["answer"]
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"id": "q1", "title": "Zorblat: quantum sorting of socks",
                                "abstract": "We present Zorblat, which sorts socks with qubits."}) + "\n")
    done = run_rag("ingest", str(mine), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    listed = run_rag("papers", cwd=tmp_path, env=env)
    assert listed.returncode == 0 and "demo index" not in listed.stderr, listed.stderr
    assert listed.stdout.count("\n") == 1 and "Zorblat" in listed.stdout


def test_a_deleted_index_is_not_answered_from_its_quick_file(tmp_path: Path) -> None:
    env = {"RAG_HOME": str(tmp_path / "h")}
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"id": "q1", "title": "Zorblat: quantum sorting of socks",
                                "abstract": "We present Zorblat, which sorts socks with qubits."}) + "\n")
    assert run_rag("ingest", str(mine), "--index", "lib", cwd=tmp_path, env=env).returncode == 0
    assert run_rag("search", "Zorblat", "--index", "lib", cwd=tmp_path, env=env).returncode == 0
    assert "lib" in quick_entries(tmp_path / "h")
    deleted = run_rag("index", "delete", "lib", "--yes", cwd=tmp_path, env=env)
    assert deleted.returncode == 0, deleted.stderr
    assert "lib" not in quick_entries(tmp_path / "h")
    gone = run_rag("search", "Zorblat", "--index", "lib", cwd=tmp_path, env=env)
    assert gone.returncode != 0 and "Zorblat" not in gone.stdout
