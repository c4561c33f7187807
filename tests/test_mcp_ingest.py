"""Ingest through MCP (`rag mcp --allow-ingest DIR`) and keeping in step with folders
(`rag mcp --watch`, `rag ingest --watch`), through the SDK's client over stdio."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path

from tests.conftest import RAG, ROOT, run_rag
from tests.mcp_client import Session, connect, stdio_params, wait_for
from tests.rag_server import copy_home

WITHIN = 15.0  # seconds a watched change may take to reach the index


def paper(pid: str, name: str, topic: str) -> str:
    return json.dumps({"id": pid, "title": f"{name}: {topic}", "abstract": (
        f"We present {name}, a system for {topic}. {name} reduces the cost of {topic} by "
        f"reordering work across accelerators. Experiments show {name} is 2.5x faster than "
        "the best baseline.")}) + "\n"


def present(session: Session, pid: str) -> bool:
    return not session.call("get_paper", paper_id=pid).is_error


def test_allow_ingest_takes_files_inside_the_folder_only(seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    home = copy_home(seeded_settings.home, tmp_path / "home")
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "new.jsonl").write_text(paper("mcp-new", "Quokkaflow", "gradient checkpoint placement"))
    outside = tmp_path / "outside.jsonl"
    outside.write_text(paper("mcp-outside", "Wombatshard", "optimizer state sharding"))
    (allowed / "sub").mkdir()
    (allowed / "sub" / "link.jsonl").symlink_to(outside)
    with connect(stdio_params(home, ["--allow-ingest", str(allowed)])) as mcp:
        assert "ingest" in {t.name for t in mcp.tools()}
        for path, says in (("", "the path is empty"), ("../outside.jsonl", "'..' is refused"),
                           (str(outside), "is outside the folder open to ingest"),
                           ("sub/link.jsonl", "is outside the folder open to ingest"),
                           ("sub", "leads outside the folder open to ingest"),
                           (".", "leads outside the folder open to ingest")):
            text = mcp.error("ingest", path=path)
            assert says in text and "\n" not in text, path
        assert mcp.ok("list_papers")["total"] == 60
        assert not present(mcp, "mcp-outside")
        (allowed / "sub" / "link.jsonl").unlink()
        done = mcp.ok("ingest", path="new.jsonl")
        assert (done["new"], done["papers"]) == (1, 1)
        hits = mcp.ok("search_papers", query="Quokkaflow gradient checkpoint placement", k=3)
        assert hits["results"][0]["paper_id"] == "mcp-new"
        assert mcp.ok("list_papers")["total"] == 61 and not present(mcp, "mcp-outside")


def test_allow_ingest_starts_on_a_new_index_and_fills_it(seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`rag mcp --index NEW --allow-ingest DIR` serves: its ingest tool is the one way to
    fill NEW, and reads before that say the index is empty (not "no papers match")."""
    home = copy_home(seeded_settings.home, tmp_path / "home")
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "new.jsonl").write_text(paper("mcp-new", "Quokkaflow", "gradient checkpoint placement"))
    with connect(stdio_params(home, ["--index", "brandnew", "--allow-ingest", str(allowed)])) as mcp:
        for tool, arguments in (("search_papers", {"query": "Quokkaflow"}), ("list_papers", {}),
                                ("ask", {"question": "What does Quokkaflow place?"}),
                                ("get_paper", {"paper_id": "mcp-new"}), ("find_source", {"quote": "x"})):
            text = mcp.error(tool, **arguments)
            assert text.endswith("the index 'brandnew' is empty (ingest first: add papers with the "
                                 "ingest tool)"), (tool, text)
        assert {"index": "brandnew", "papers": 0} in json.loads(mcp.read("rag://indexes"))["indexes"]
        assert mcp.ok("ingest", path="new.jsonl")["new"] == 1
        hits = mcp.ok("search_papers", query="Quokkaflow gradient checkpoint placement", k=3)
        assert [h["paper_id"] for h in hits["results"]] == ["mcp-new"]
        assert mcp.ok("list_papers")["total"] == 1
        assert mcp.ok("list_papers", index="default")["total"] == 60


def test_watch_follows_new_deleted_and_malformed_files(seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    home = copy_home(seeded_settings.home, tmp_path / "home")
    watched = tmp_path / "watched"
    watched.mkdir()
    (watched / "a.jsonl").write_text(paper("watch-a", "Alpacaring", "ring all-reduce"))
    both = paper("watch-d", "Dingopipe", "pipeline bubbles")
    (watched / "d1.jsonl").write_text(both)
    (watched / "d2.jsonl").write_text(both)
    with (tmp_path / "stderr.txt").open("w") as errlog, \
            connect(stdio_params(home, ["--watch", str(watched)]), errlog=errlog) as mcp:
        assert present(mcp, "watch-a") and present(mcp, "watch-d")  # ingested at start
        assert mcp.ok("list_papers")["total"] == 62

        (watched / "b.jsonl").write_text(paper("watch-b", "Bisonbatch", "micro-batch sizing"))
        wait_for(lambda: present(mcp, "watch-b"), WITHIN, "a new file's paper in the index")
        hits = mcp.ok("search_papers", query="Bisonbatch micro-batch sizing", k=3)
        assert hits["results"][0]["paper_id"] == "watch-b"

        (watched / "d1.jsonl").unlink()  # another file still holds its paper
        (watched / "a.jsonl").unlink()
        wait_for(lambda: not present(mcp, "watch-a"), WITHIN, "a deleted file's paper gone")
        assert present(mcp, "watch-d")
        assert mcp.ok("list_papers")["total"] == 62  # 60 + b + d

        (watched / "c.jsonl").write_text(paper("watch-c", "Cobrastep", "step scheduling") + "{not json\n")
        (watched / "b.jsonl").write_text("{broken\n")
        # told beside the next result, as warnings: not as log notifications, which need the
        # logging capability the protocol deprecates
        wait_for(lambda: mcp.ok("list_papers") and sum("c.jsonl" in m for m in mcp.warnings)
                 and sum("b.jsonl" in m for m in mcp.warnings), WITHIN,
                 "the malformed files reported to the client")
        assert all(w.startswith("warning: watch: ") for w in mcp.warnings) and not mcp.logs
        assert not present(mcp, "watch-c") and present(mcp, "watch-b")  # the index as it was
        assert mcp.ok("list_papers")["total"] == 62
    assert "Warning" not in (tmp_path / "stderr.txt").read_text()  # no MCPDeprecationWarning


def test_rag_ingest_watch_creates_the_index_and_follows_the_folder(tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    (watched / "one.jsonl").write_text(paper("cli-one", "Emuscale", "elastic scaling"))
    home = tmp_path / "home"
    env = {**os.environ, "RAG_HOME": str(home)}
    proc = subprocess.Popen([RAG, "ingest", "--watch", str(watched)], cwd=ROOT, env=env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stderr], daemon=True)  # type: ignore[union-attr]
    reader.start()

    def said(text: str) -> str:
        def seen() -> str | None:
            while not lines.empty():
                line = lines.get()
                if text in line:
                    return line
            return None
        return wait_for(seen, 120, f"stderr line with {text!r}")  # type: ignore[no-any-return]

    try:
        assert "1 new" in said("watch: 1 file(s), 1 papers")
        (watched / "two.jsonl").write_text(paper("cli-two", "Kiwicache", "KV cache eviction"))
        assert "1 new, 0 changed, 1 unchanged" in said("watch: 2 file(s), 2 papers")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        reader.join(timeout=30)
        proc.stderr.close()  # type: ignore[union-attr]
    listed = run_rag("papers", "--json", cwd=ROOT, env={"RAG_HOME": str(home)})
    assert {p["paper_id"] for p in json.loads(listed.stdout)["papers"]} == {"cli-one", "cli-two"}


def test_ingest_watch_needs_paths(tmp_path: Path) -> None:
    res = run_rag("ingest", "--watch", cwd=tmp_path, env={"RAG_HOME": str(tmp_path / "home")})
    assert res.returncode == 2 and "--watch needs the files or folders" in res.stderr


def test_tools_take_another_index_by_name(seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    home = copy_home(seeded_settings.home, tmp_path / "home")
    (tmp_path / "other.jsonl").write_text(paper("other-one", "Lemurlink", "NVLink topology search"))
    made = run_rag("ingest", "--index", "other", str(tmp_path / "other.jsonl"), cwd=ROOT,
                   env={"RAG_HOME": str(home)})
    assert made.returncode == 0, made.stderr
    # an index of pooled chunk vectors is listed too, and read as it was built
    (tmp_path / "pooled.jsonl").write_text(paper("pooled-one", "Marmotmesh", "mesh sharding"))
    made = run_rag("ingest", "--index", "pooled", str(tmp_path / "pooled.jsonl"), cwd=ROOT,
                   env={"RAG_HOME": str(home), "RAG_CHUNK_VECTORS": "sentences"})
    assert made.returncode == 0, made.stderr
    # a read with the other kind set leaves an empty collection of that kind: it hides nothing
    other = run_rag("search", "mesh sharding", "--index", "pooled", cwd=ROOT,
                    env={"RAG_HOME": str(home), "RAG_CHUNK_VECTORS": "model"})
    assert other.returncode == 3 and "built with other chunk settings" in other.stderr
    # a mistyped name leaves no index behind; one an earlier rag left empty is not listed
    typo = run_rag("search", "mesh sharding", "--index", "typo", cwd=ROOT, env={"RAG_HOME": str(home)})
    assert typo.returncode == 3 and "there is no index 'typo'" in typo.stderr
    from rag.store import Store

    Store(seeded_settings.model_copy(update={"home": home, "index": "leftover"})).close()
    with connect(stdio_params(home)) as mcp:
        assert json.loads(mcp.read("rag://indexes"))["indexes"] == [
            {"index": "default", "papers": 60}, {"index": "other", "papers": 1},
            {"index": "pooled", "papers": 1}]
        for name in ("typo", "leftover"):
            says = mcp.error("search_papers", query="mesh sharding", index=name)
            assert says.endswith(f"no index '{name}' (the indexes are: default, other, pooled)"), says
        hits = mcp.ok("search_papers", query="mesh sharding", index="pooled")
        assert [h["paper_id"] for h in hits["results"]] == ["pooled-one"]
        hits = mcp.ok("search_papers", query="NVLink topology search", index="other")
        assert [h["paper_id"] for h in hits["results"]] == ["other-one"]
        assert mcp.ok("list_papers", index="other")["total"] == 1
        answer = mcp.ok("ask", question="What does Lemurlink search?", index="other")
        cited = [r["paper_id"] for r in answer["references"] + answer["nearest"]]
        assert cited and set(cited) == {"other-one"}
        # the paper a search of another index found is read and exported from that index
        paper_ = mcp.ok("get_paper", paper_id="other-one", index="other")
        assert paper_["paper_id"] == "other-one" and "Lemurlink" in paper_["abstract"]
        out = mcp.ok("export_citations", paper_ids=["other-one"], format="ris", index="other")
        assert out["count"] == 1 and "Lemurlink" in out["text"]
        assert "no paper with id" in mcp.error("get_paper", paper_id="other-one")  # not in default
        assert mcp.ok("list_papers")["total"] == 60


def test_watch_follows_a_zotero_library(seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.zotero_fixture import Library, sample_library

    home = copy_home(seeded_settings.home, tmp_path / "home")
    watched = tmp_path / "Zotero"
    watched.mkdir()
    sample_library(watched / "zotero.sqlite")
    with connect(stdio_params(home, ["--watch", str(watched)])) as mcp:
        assert present(mcp, "2305.12345")  # FlexPipe, a preprint of the library
        # Zotero writes the library again: FlexPipe deleted, a new item added.
        later = Library(tmp_path / "later.sqlite")
        later.item("preprint", "NEWI0001", {
            "title": "Quokkajoin: streaming joins on GPUs", "date": "2024",
            "abstractNote": "Quokkajoin runs streaming joins on GPUs 3x faster than CPU engines.",
            "archiveID": "arXiv:2406.00001"}, [("Quinn", "Okka", "author")])
        later.close()
        os.replace(tmp_path / "later.sqlite", watched / "zotero.sqlite")
        wait_for(lambda: present(mcp, "2406.00001"), WITHIN, "the new Zotero item in the index")
        wait_for(lambda: not present(mcp, "2305.12345"), WITHIN, "the deleted Zotero item gone")
        # DynaPipe was in the library and is in seeds/ too: that file still holds it.
        assert present(mcp, "2311.10418")
