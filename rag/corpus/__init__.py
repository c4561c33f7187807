"""Read abstract dumps into Paper records: file checks, layout detection, merging.

`Paper` is imported with the package; the readers (rag.corpus.reading, which imports every
format's parser) on first use of one of their names: a question reads no file, and importing
them cost about 40 ms of every cold `rag ask`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rag.corpus.paper import Paper

if TYPE_CHECKING:
    from rag.corpus.reading import (
        MAX_FILE_BYTES,
        SUFFIXES,
        FileResult,
        Restrict,
        display_path,
        expand_paths,
        infer_metadata,
        merge_papers,
        read_all,
        read_file,
        unread_in,
        where,
    )

__all__ = ["MAX_FILE_BYTES", "SUFFIXES", "FileResult", "Paper", "Restrict", "display_path",
           "expand_paths", "infer_metadata", "merge_papers", "read_all", "read_file", "unread_in",
           "where"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from rag.corpus import reading

        return getattr(reading, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
