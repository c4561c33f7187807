"""The watcher survives what happens to what it watches (`rag ingest --watch` in a
subprocess, `rag mcp --watch` through the SDK's client): a folder deleted, recreated, renamed
or replaced, a file replaced by a folder or by a new file. A watched path that is gone keeps
its papers and is said; `--prune` takes them out."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path

from tests.conftest import RAG, ROOT, run_rag
from tests.mcp_client import connect, stdio_params, wait_for
from tests.rag_server import copy_home
from tests.test_mcp_ingest import WITHIN, paper, present

START = 180.0  # seconds the first pass may take (the models load)


class Watcher:
    """`rag ingest --watch PATH` in a subprocess; its stderr read line by line."""

    def __init__(self, home: Path, *args: str) -> None:
        self.home = home
        self.proc = subprocess.Popen([RAG, "ingest", "--watch", *args], cwd=ROOT,
                                     env={**os.environ, "RAG_HOME": str(home)}, text=True,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=lambda: [self.lines.put(x.rstrip("\n")) for x in self.proc.stderr],  # type: ignore[union-attr]
                                       daemon=True)
        self.reader.start()

    def next_pass(self, within: float = WITHIN) -> list[str]:
        """The lines of the next pass, up to its summary (the line after the notices)."""
        said: list[str] = []
        try:
            while True:
                line = self.lines.get(timeout=within)
                if line.startswith("watch: "):
                    said.append(line)
                    if line.startswith(("watch: nothing to ingest", "watch: error: ")) \
                            or " file(s), " in line or "of deleted files removed" in line:
                        return said
        except queue.Empty:
            raise AssertionError(f"no pass within {within:.0f} s; said so far: {said}") from None

    def papers(self) -> set[str]:
        listed = run_rag("papers", "--json", cwd=ROOT, env={"RAG_HOME": str(self.home)})
        return {p["paper_id"] for p in json.loads(listed.stdout)["papers"]}

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(timeout=30)
            self.proc.stderr.close()  # type: ignore[union-attr]


def folder(path: Path, **papers: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, pid in papers.items():
        (path / f"{name}.jsonl").write_text(paper(pid, name.capitalize(), f"{name} scheduling"))
    return path


def test_a_file_replaced_by_a_folder_of_its_name_takes_its_papers_out(tmp_path: Path) -> None:
    watched = folder(tmp_path / "watched", one="w-one", two="w-two")
    w = Watcher(tmp_path / "home", str(watched))
    try:
        assert "2 new" in w.next_pass(START)[-1]
        (watched / "two.jsonl").unlink()
        (watched / "two.jsonl").mkdir()  # it stayed in the index: its "file" still existed
        assert "1 paper(s) of deleted files removed" in w.next_pass()[-1]
    finally:
        w.stop()
    assert w.papers() == {"w-one"}


def test_a_deleted_folder_keeps_its_papers_and_is_followed_when_it_is_back(tmp_path: Path) -> None:
    watched = folder(tmp_path / "watched", one="w-one", two="w-two")
    w = Watcher(tmp_path / "home", str(watched))
    try:
        assert "2 new" in w.next_pass(START)[-1]
        shutil.rmtree(watched)  # one `rm -r` emptied the index without a question
        said = w.next_pass()
        assert f"watch: {watched} is gone (deleted or moved): its 2 paper(s) stay in the index until " \
               "it is back (watch with --prune to remove them)" in said
        assert not any("removed" in line for line in said), said
        # a sync tool recreates it: empty first, then its files, then a new one
        watched.mkdir()
        said = w.next_pass()
        assert f"watch: {watched} is back: following it again" in said
        assert any("holds no abstract files: its 2 paper(s) stay" in line for line in said), said
        folder(watched, one="w-one", two="w-two", three="w-three")
        # the watcher went deaf on the new folder: its files were never ingested
        assert "1 new, 0 changed, 2 unchanged" in w.next_pass()[-1]
    finally:
        w.stop()
    assert w.papers() == {"w-one", "w-two", "w-three"}


def test_a_renamed_folder_keeps_its_papers_until_it_is_back(tmp_path: Path) -> None:
    watched = folder(tmp_path / "watched", one="w-one")
    w = Watcher(tmp_path / "home", str(watched))
    try:
        assert "1 new" in w.next_pass(START)[-1]
        watched.rename(tmp_path / "elsewhere")
        assert any("is gone (deleted or moved): its 1 paper(s) stay" in line for line in w.next_pass())
        # inotify follows the folder, not its name: a change there is no change here
        folder(tmp_path / "elsewhere", two="w-two")
        (tmp_path / "elsewhere").rename(watched)
        said = w.next_pass()
        assert f"watch: {watched} is back: following it again" in said
        assert "1 new, 0 changed, 1 unchanged" in said[-1]
        (watched / "one.jsonl").unlink()  # and it is followed again
        assert "1 paper(s) of deleted files removed" in w.next_pass()[-1]
    finally:
        w.stop()
    assert w.papers() == {"w-two"}


def test_a_watched_file_replaced_again_and_again_is_followed(tmp_path: Path) -> None:
    """Editors and sync tools save by writing a new file over the old one: the watch on the
    old file's inode heard nothing more."""
    watched = folder(tmp_path / "watched", one="w-one") / "one.jsonl"
    w = Watcher(tmp_path / "home", str(watched))
    try:
        assert "1 new" in w.next_pass(START)[-1]
        text = watched.read_text()
        for n in range(2):
            text += paper(f"w-more{n}", "More", f"more {n}")
            new = tmp_path / "saved.jsonl"
            new.write_text(text)
            os.replace(new, watched)
            said = w.next_pass()
            assert "1 new, 0 changed" in said[-1], (n, said)
    finally:
        w.stop()
    assert w.papers() == {"w-one", "w-more0", "w-more1"}


def test_prune_takes_a_deleted_folders_papers_out(tmp_path: Path) -> None:
    watched = folder(tmp_path / "watched", one="w-one", two="w-two")
    other = folder(tmp_path / "other", three="w-three")
    w = Watcher(tmp_path / "home", "--prune", str(watched), str(other))
    try:
        assert "3 new" in w.next_pass(START)[-1]
        shutil.rmtree(watched)
        said = w.next_pass()
        assert f"watch: {watched} is gone (deleted or moved): its 2 paper(s) left the index (--prune)" in said
        assert "2 paper(s) of deleted files removed" in said[-1]
    finally:
        w.stop()
    assert w.papers() == {"w-three"}


def test_watch_of_a_missing_path_says_so(tmp_path: Path) -> None:
    res = run_rag("ingest", "--watch", str(tmp_path / "nope"), cwd=tmp_path,
                  env={"RAG_HOME": str(tmp_path / "home")})
    assert res.returncode == 2 and f"{tmp_path / 'nope'}: no such file or directory" in res.stderr


def test_rag_mcp_watch_survives_its_folder(seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    home = copy_home(seeded_settings.home, tmp_path / "home")
    watched = folder(tmp_path / "watched", one="w-one")
    with (tmp_path / "stderr.txt").open("w") as errlog, \
            connect(stdio_params(home, ["--watch", str(watched)]), errlog=errlog) as mcp:
        assert present(mcp, "w-one")
        shutil.rmtree(watched)
        # told to the client beside its next result; the paper stays
        wait_for(lambda: mcp.ok("list_papers") and any("is gone" in m for m in mcp.warnings),
                 WITHIN, "the client told that the folder is gone")
        assert present(mcp, "w-one") and mcp.ok("list_papers")["total"] == 61
        folder(watched, one="w-one", two="w-two")
        wait_for(lambda: present(mcp, "w-two"), WITHIN, "the recreated folder's new file in the index")
        (watched / "one.jsonl").unlink()
        wait_for(lambda: not present(mcp, "w-one"), WITHIN, "a file deleted from it leaves the index")
    log = (tmp_path / "stderr.txt").read_text()
    assert "is back: following it again" in log and "Traceback" not in log
