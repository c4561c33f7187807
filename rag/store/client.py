"""Opening Chroma: a client (embedded, after the segment checks, or a server's), and the
wrapper that turns any failure inside Chroma into an IndexStoreError that says what to do."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from rag.config import Settings
from rag.errors import RagError
from rag.store.check import check_segments, index_error, rebuild_command
from rag.store.imports import import_chromadb


def database_id(settings: Settings) -> tuple[int, int] | None:
    """Which file the embedded index's database is (None for a Chroma server)."""
    if settings.chroma_url:
        return None
    try:
        st = (settings.index_dir / "chroma.sqlite3").stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


class Guarded:
    """A Chroma client or collection whose failures, on any call, are IndexStoreErrors: Chroma
    raises on open, count, get or query when its files are damaged, deleted or read-only."""

    def __init__(self, target: Any, settings: Settings) -> None:
        self._target, self._settings = target, settings

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except RagError:
                raise
            except Exception as exc:
                raise index_error(self._settings, exc) from exc

        return call


def open_client(settings: Settings) -> Any:
    chromadb = import_chromadb()
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    try:
        if settings.chroma_url:
            url = urlparse(settings.chroma_url)
            return chromadb.HttpClient(
                host=url.hostname or "127.0.0.1", port=url.port or 8000,
                ssl=url.scheme == "https", settings=chroma_settings,
            )
        settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)  # private: abstracts may be
        settings.index_dir.mkdir(mode=0o700, exist_ok=True)
        # hnswlib crashes the process on a damaged segment; say so before Chroma loads it
        check_segments(settings.index_dir, settings.home / "cache",
                       f"rebuild it: {rebuild_command(settings)}")
        return chromadb.PersistentClient(path=str(settings.index_dir), settings=chroma_settings)
    except Exception as exc:  # chromadb raises bare Exceptions/ValueErrors here
        raise index_error(settings, exc) from exc
