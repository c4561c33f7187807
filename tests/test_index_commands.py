"""What a user keeps and takes out of their data directory with rag itself: `rag index list`,
`rag index delete NAME` (asks first, or --yes; everything of that index goes, the others
stay) and `rag papers remove ID`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_rag


def _jsonl(path: Path, *ids: int) -> Path:
    path.write_text("".join(
        json.dumps({"id": f"p{i}", "title": f"Gradient Compression Study {i}",
                    "abstract": f"We compress gradients for distributed training and cut traffic by {10 + i} percent. "
                                "The method keeps the accuracy of the uncompressed baseline."}) + "\n"
        for i in ids))
    return path


def test_indexes_are_listed_deleted_and_papers_removed(tmp_path: Path) -> None:
    env = {"RAG_HOME": str(tmp_path / "home")}
    for name, ids in (("mine", (1, 2, 3)), ("other", (4,))):
        done = run_rag("ingest", str(_jsonl(tmp_path / f"{name}.jsonl", *ids)), "--index", name, "-q",
                       cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
    listed = run_rag("index", "list", "--json", cwd=tmp_path, env=env)
    assert json.loads(listed.stdout) == {"mine": 3, "other": 1}, listed.stderr

    removed = run_rag("papers", "remove", "p2", "--index", "mine", cwd=tmp_path, env=env)
    assert removed.returncode == 0 and "p2" in removed.stderr, removed.stderr
    papers = json.loads(run_rag("papers", "--json", "--index", "mine", cwd=tmp_path, env=env).stdout)["papers"]
    assert sorted(p["paper_id"] for p in papers) == ["p1", "p3"]
    unknown = run_rag("papers", "remove", "p1", "nosuch", "--index", "mine", cwd=tmp_path, env=env)
    assert unknown.returncode == 2 and "nosuch" in unknown.stderr  # and p1 stays: nothing was removed
    assert json.loads(run_rag("index", "list", "--json", cwd=tmp_path, env=env).stdout)["mine"] == 2

    unasked = run_rag("index", "delete", "mine", cwd=tmp_path, env=env)  # no terminal to ask on
    assert unasked.returncode == 2 and "--yes" in unasked.stderr
    deleted = run_rag("index", "delete", "mine", "--yes", cwd=tmp_path, env=env)
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(run_rag("index", "list", "--json", cwd=tmp_path, env=env).stdout) == {"other": 1}
    assert not [p for p in (tmp_path / "home" / "cache").glob("*") if "mine-" in p.name]
    gone = run_rag("index", "delete", "mine", "--yes", cwd=tmp_path, env=env)
    assert gone.returncode == 3 and "other" in gone.stderr  # names the indexes there are
    asked = run_rag("ask", "--llm", "none", "--index", "other", "Which papers compress gradients?",
                    cwd=tmp_path, env=env)
    assert asked.returncode == 0 and "Gradient Compression Study 4" in asked.stdout, asked.stderr
