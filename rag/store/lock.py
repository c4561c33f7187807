"""One writer at a time per data directory: the ingest lock, a file in RAG_HOME."""

from __future__ import annotations

import contextlib
import fcntl
import sys
from collections.abc import Iterator

from rag.config import Settings
from rag.errors import IndexStoreError


@contextlib.contextmanager
def ingest_lock(settings: Settings, wait: bool = True) -> Iterator[None]:
    """One writer at a time per data directory; a second ingest waits, saying so."""
    try:
        settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)  # private (docs/security.md)
        lock = open(settings.home / "ingest.lock", "a")  # noqa: SIM115 (closed below)
    except OSError as exc:  # a read-only or unreachable data directory
        raise IndexStoreError(
            f"cannot write to the data directory {settings.home}: {exc.strerror or exc}",
            "make it writable, or point RAG_HOME at a writable directory",
        ) from None
    with lock as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                raise IndexStoreError(
                    f"another ingest is writing to {settings.home}", "wait for it to finish"
                ) from None
            print(f"waiting for another ingest into {settings.home} to finish…", file=sys.stderr)
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield
