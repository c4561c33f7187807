"""A damaged vector segment is reported before Chroma loads it, because loading it crashes.

Chroma keeps each collection's vectors in an hnswlib graph under the index directory
(`<segment uuid>/header.bin` and `data_level0.bin`). hnswlib trusts those files: a truncated
one makes Chroma raise (rag.store turns that into a clear IndexStoreError), but one with
garbage in it makes the process die with a segmentation fault while following links that
point nowhere, which no Python code can catch. So rag.store checks the files first: the
header must match the data file, and every neighbour link of the base layer must point at an
element that exists.

Only files in the layout this check knows (the 100-byte header of the persisted hnswlib
index, version 1) are checked; anything else is left to Chroma. A segment that passed is not
read again until its files change (a stamp of sizes and mtimes under the data directory).
`index_error` says what any other failure inside Chroma means, and what to do about it.
"""

from __future__ import annotations

import json
import os
import shlex
import struct
from pathlib import Path

import numpy as np

from rag.config import Settings
from rag.errors import IndexStoreError
from rag.store import space

# version, offsetLevel0, max_elements, cur_element_count, size_data_per_element, label_offset,
# offsetData, maxlevel, enterpoint_node, maxM, maxM0, M, mult, ef_construction
_HEADER = struct.Struct("<iQQQQQQiIQQQdQ")
_STAMP = "segments-checked.json"


def segment_problem(segment: Path) -> str | None:
    """What is wrong with one hnswlib segment directory, or None (also for unknown layouts)."""
    header_path, data_path = segment / "header.bin", segment / "data_level0.bin"
    try:
        header = header_path.read_bytes()
        size = data_path.stat().st_size
    except FileNotFoundError as exc:
        return f"{Path(exc.filename or '').name} is missing"
    if len(header) != _HEADER.size:
        return None if not header else f"header.bin is {len(header)} bytes, not {_HEADER.size}"
    (version, offset0, max_elements, count, row, label_offset, data_offset, max_level, entry,
     _, max_m0, _, _, _) = _HEADER.unpack(header)
    if version != 1:
        return None  # a layout this check does not know: Chroma decides
    if offset0 != 0 or row == 0 or count > max_elements or data_offset != 4 + 4 * max_m0 \
            or label_offset + 8 > row:
        return "header.bin does not describe an hnswlib index"
    # Chroma writes the rows in use, or the whole preallocated block
    if size not in (count * row, max_elements * row):
        return f"data_level0.bin is {size} bytes; its header says {count} rows of {row} bytes"
    if count == 0:
        return None
    if not 0 <= max_level < 64 or entry >= count:
        return "header.bin names an entry point that does not exist"
    rows = np.memmap(data_path, dtype=np.uint8, mode="r", shape=(count, row))
    links = np.ascontiguousarray(rows[:, :data_offset]).view(np.uint32)
    del rows
    n_links = links[:, 0] & 0xFFFF
    if (n_links > max_m0).any():
        return f"{int((n_links > max_m0).sum())} element(s) of data_level0.bin have impossible link counts"
    used = np.arange(max_m0)[None, :] < n_links[:, None]
    if (links[:, 1:][used] >= count).any():
        return "data_level0.bin has links to elements that do not exist"
    return None


def _signature(segment: Path) -> list[int]:
    out: list[int] = []
    for name in ("header.bin", "data_level0.bin"):
        st = (segment / name).stat()
        out += [st.st_size, st.st_mtime_ns]
    return out


def check_segments(index_dir: Path, stamp_dir: Path, rebuild_hint: str) -> None:
    """Raise IndexStoreError naming the first damaged segment under index_dir."""
    segments = sorted(p.parent for p in index_dir.glob("*/header.bin"))
    if not segments:
        return
    stamp_path = stamp_dir / _STAMP
    try:
        checked = json.loads(stamp_path.read_text())
        if not isinstance(checked, dict):
            checked = {}
    except (OSError, ValueError):
        checked = {}
    fresh: dict[str, list[int]] = {}
    for segment in segments:
        try:
            signature = _signature(segment)
        except OSError:
            signature = []
        if signature and checked.get(segment.name) == signature:
            fresh[segment.name] = signature
            continue
        try:
            problem = segment_problem(segment)
        except (OSError, ValueError) as exc:
            problem = f"unreadable: {exc}"
        if problem:
            raise IndexStoreError(
                f"the index at {index_dir} is damaged: segment {segment.name}: {problem}",
                rebuild_hint,
            )
        if signature:
            fresh[segment.name] = signature
    if fresh != checked:
        try:
            stamp_dir.mkdir(parents=True, exist_ok=True)
            tmp = stamp_path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(fresh))
            tmp.replace(stamp_path)
        except OSError:
            pass  # a read-only data directory: check again next time


def rebuild_command(settings: Settings) -> str:
    index = "" if settings.index == "default" else f" --index {shlex.quote(settings.index)}"
    return f"rm -rf {shlex.quote(str(settings.index_dir))} && rag ingest{index} PATH..."


def index_error(settings: Settings, exc: BaseException) -> IndexStoreError:
    """A failure inside Chroma, as the user can act on it: the server is unreachable, or the
    index directory is read-only, or damaged or deleted (the hint then names the rebuild)."""
    if isinstance(exc, IndexStoreError):
        return exc
    if not settings.chroma_url and space.says_full(exc):  # not damaged: never the rm -rf hint
        return space.disk_full(settings.index_dir)
    lines = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300].rstrip(": ")
    if settings.chroma_url:
        return IndexStoreError(
            f"the Chroma server at {settings.chroma_url} failed: {detail}",
            "check that the Chroma server (`chroma run`) is up and RAG_CHROMA_URL points at it",
        )
    where = settings.index_dir
    exists = where.exists()
    if isinstance(exc, PermissionError) or "readonly" in detail.lower().replace(" ", "") or (
            exists and not os.access(where, os.W_OK)):
        return IndexStoreError(
            f"the index at {where} is read-only ({detail})",
            f"Chroma writes to its directory even to read: make {where} writable, "
            "or point RAG_HOME at a writable copy",
        )
    what = "cannot be read, it may be damaged" if exists else "is gone, was it deleted?"
    return IndexStoreError(
        f"the index at {where} {what} ({detail})",
        f"rebuild it: {rebuild_command(settings)} (and restart `rag serve` if one uses it)",
    )
