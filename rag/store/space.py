"""A full disk told apart from a damaged index.

Chroma reports a full disk as SQLite's "database or disk is full" (code 13) or an OSError
ENOSPC, or, when it fails while applying its log, only as "Error in compaction" with the
cause lost. Either way the index is intact (SQLite rolls the write back) and opens again
once there is room, so the message must never be the damaged index's "rm -rf" hint. For the
opaque case during a write, the disk is asked whether the write's bytes would fit.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rag.errors import IndexStoreError

_FULL = re.compile(r"database or disk is full|no space left on device|disk quota exceeded|\bSQLITE_FULL\b",
                   re.IGNORECASE)
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


class DiskFull(IndexStoreError):
    """The disk holding the index has no room left; the index itself is fine."""


def says_full(exc: BaseException | None) -> bool:
    """Does the error, or any error it came from, say the disk is full?"""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            return True
        if _FULL.search(str(exc)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def room_for(directory: Path, nbytes: int) -> bool:
    """Whether `nbytes` more fit on the disk holding `directory`: the disk itself is asked
    (posix_fallocate), since free-space figures ignore reserved blocks and quotas."""
    try:
        fd, name = tempfile.mkstemp(dir=directory, prefix=".rag-space-")
    except OSError as exc:
        return exc.errno not in _FULL_ERRNOS
    try:
        os.posix_fallocate(fd, 0, max(1, nbytes))
    except OSError as exc:
        return exc.errno not in _FULL_ERRNOS  # EOPNOTSUPP and the like: cannot tell, so yes
    finally:
        os.close(fd)
        os.unlink(name)
    return True


def _mb(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MB"


def disk_full(directory: Path, needed: int | None = None) -> DiskFull:
    try:
        free = f"{_mb(shutil.disk_usage(directory).free)} free"
    except OSError:
        free = "free space unknown"
    need = f"; this write needs about {_mb(needed)}" if needed else ""
    return DiskFull(
        f"the disk holding the index at {directory} is full ({free}{need})",
        "free space on that disk (or point RAG_HOME at one with room) and run the command "
        "again: the index is not damaged, and an ingest goes on where it stopped",
    )


def write_size(papers: Sequence[tuple[Any, Sequence[Any], Any]],
               sentences: Sequence[tuple[str, Sequence[str], Any]]) -> int:
    """About how many bytes a Store.write adds: vectors, texts and per-chunk metadata (which
    carries the paper's record), twice: Chroma keeps them in its log, then in its segments."""
    total = 0
    for paper, chunks, vectors in papers:
        record = len(json.dumps(paper.to_dict()))
        total += getattr(vectors, "nbytes", 0) + sum(len(c.text) + record for c in chunks)
    for _, sents, vectors in sentences:
        total += getattr(vectors, "nbytes", 0) + sum(len(s) for s in sents)
    return 2 * total


@contextlib.contextmanager
def checked_write(directory: Path | None, needed: int) -> Iterator[None]:
    """A write that fails opaquely while the disk has no room for it is reported as a full
    disk (only for an embedded index: `directory` None is a Chroma server)."""
    try:
        yield
    except DiskFull:
        raise
    except IndexStoreError as exc:
        if directory is not None and directory.is_dir() and not room_for(directory, needed):
            raise disk_full(directory, needed) from exc.__cause__ or exc
        raise
