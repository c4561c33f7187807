"""A full disk is said as a full disk, never as a damaged index whose hint deletes it: the
index is intact and opens (and an ingest goes on) once there is room."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag.config import Settings
from rag.corpus import read_file
from rag.errors import EXIT_INDEX
from rag.store import Store
from rag.store.collection import index_error
from rag.store.space import DiskFull, checked_write, room_for
from tests.conftest import SEEDS, run_rag

SEED_FILE = max(SEEDS.iterdir(), key=lambda p: p.stat().st_size)  # 25 papers, 37 KB


def mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True)
    return done.returncode == 0


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 1.3 MB filesystem (tmpfs; needs root and mount), unmounted afterwards: room for
    an empty index, not for the seeds' largest file."""
    disk = tmp_path / "disk"
    if not mount_tmpfs(disk, "1300k"):
        pytest.skip("mounting a tmpfs needs root and mount permission here; "
                    "test_disk_full_is_told_from_damage_at_the_write_layer covers the same")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def assert_said_full(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == EXIT_INDEX, done.stderr
    assert "is full" in done.stderr and "MB free" in done.stderr
    assert "rm -rf" not in done.stderr and "damaged" not in done.stderr.replace("not damaged", "")


def test_a_disk_filled_during_ingest_is_full_not_damaged_and_ingest_resumes(small_disk: Path) -> None:
    env = {"RAG_HOME": str(small_disk / ".rag")}
    assert_said_full(run_rag("ingest", str(SEED_FILE), cwd=small_disk, env=env))
    assert (small_disk / ".rag" / "chroma" / "chroma.sqlite3").exists()  # nothing was deleted
    # room made (the filesystem grown): the same index opens and the ingest completes
    subprocess.run(["mount", "-o", "remount,size=48m", str(small_disk)], check=True)
    done = run_rag("ingest", str(SEED_FILE), cwd=small_disk, env=env)
    assert done.returncode == 0, done.stderr
    listed = run_rag("papers", cwd=small_disk, env=env)
    assert listed.returncode == 0 and f"{len(read_file(SEED_FILE).papers)} papers" in listed.stderr
    # the disk filled up later: reading says so too, and works again once there is room
    filler = small_disk / "filler"
    with filler.open("wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    # a small index is read from its quick file (rag.store.quick), which writes nothing
    read = run_rag("papers", cwd=small_disk, env=env)
    assert read.returncode == 0 and read.stdout == listed.stdout, read.stderr
    # Chroma writes even to read: without the quick file, a full disk is said as such
    (small_disk / ".rag" / "cache" / "quick.json").unlink()
    assert_said_full(run_rag("papers", cwd=small_disk, env=env))
    filler.unlink()
    again = run_rag("papers", cwd=small_disk, env=env)
    assert again.returncode == 0 and again.stdout == listed.stdout != ""


def test_disk_full_is_told_from_damage_at_the_write_layer(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(home=tmp_path / ".rag", llm="none")
    settings.index_dir.mkdir(parents=True)
    # what SQLite (through Chroma) and the OS say when the disk is full
    for exc in (OSError(errno.ENOSPC, "No space left on device"),
                RuntimeError("Query error: Database error: error returned from database: "
                             "(code: 13) database or disk is full")):
        said = index_error(settings, exc)
        assert isinstance(said, DiskFull) and "is full" in said.message and "rm -rf" not in said.hint
    # a damaged index still gets the rebuild hint
    assert "rm -rf" in index_error(settings, RuntimeError("file is not a database")).hint
    # an opaque failure during a write, on a disk without room for the write: a full disk
    assert room_for(settings.index_dir, 1024)

    def no_room(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_room)
    opaque = RuntimeError("Error in compaction: Failed to apply logs to the metadata segment")
    with pytest.raises(DiskFull, match=r"needs about 2\.0 MB"), checked_write(settings.index_dir, 2 * 2**20):
        raise index_error(settings, opaque) from opaque


def test_store_write_on_a_full_disk_raises_disk_full(fresh_settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    from rag.store.collection import Chunk

    store = Store(fresh_settings)
    paper = read_file(SEED_FILE).papers[0]
    chunk = Chunk(f"{paper.paper_id}#0", paper.paper_id, paper.abstract, 0)

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.collection._target, "upsert", full)
    with pytest.raises(DiskFull) as caught:
        store.write([(paper, [chunk], np.zeros((1, 384), dtype=np.float32))])
    assert "rm -rf" not in str(caught.value)
    store.close()
