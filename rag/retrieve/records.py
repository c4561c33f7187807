"""A snapshot's records, read from its database as they are asked for (rag.retrieve.snapshot):
papers by id, chunk ids in BM25's order, each chunk's paper and text. Each keeps the last few
thousand it decoded; a whole table is read only by a scan, page by page."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.corpus.paper import Paper

_IN = 500  # keys per `IN (...)` query: under SQLite's variable limit
PAPER_CACHE = 4096  # Paper records a process keeps decoded (an answer reads a few hundred)


class Db:
    """One read-only connection to a snapshot's database, shared by the threads of a server."""

    def __init__(self, path: Path) -> None:
        # immutable: a snapshot's files never change once written (a new version is a new folder)
        self._conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True,
                                     check_same_thread=False)
        self._lock = threading.Lock()

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def many(self, sql: str, keys: Sequence[Any]) -> list[tuple[Any, ...]]:
        """`sql` with `{}` standing for a list of placeholders, run over the keys in groups."""
        out: list[tuple[Any, ...]] = []
        for start in range(0, len(keys), _IN):
            part = keys[start : start + _IN]
            out += self.rows(sql.format(",".join("?" * len(part))), part)
        return out

    def scan(self, sql: str, args: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        """Every row, in pages: a whole table is never held at once."""
        last = -1
        while True:
            page = self.rows(sql, (*args, last))
            if not page:
                return
            yield from page
            last = page[-1][0]

    def close(self) -> None:
        self._conn.close()


class Papers(Mapping[str, Paper]):
    """paper id -> Paper, in the order the store gave them; decoded when asked for."""

    def __init__(self, db: Db, count: int) -> None:
        self._db, self._count = db, count
        self._cache: OrderedDict[str, Paper] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        for _, pid in self._db.scan("SELECT pos, id FROM papers WHERE pos > ? ORDER BY pos LIMIT 5000"):
            yield pid

    def __contains__(self, pid: object) -> bool:
        return isinstance(pid, str) and self.get(pid) is not None

    def __getitem__(self, pid: str) -> Paper:
        found = self.many([pid])
        if pid not in found:
            raise KeyError(pid)
        return found[pid]

    def get(self, pid: str, default: Any = None) -> Any:  # type: ignore[override]
        return self.many([pid]).get(pid, default) if isinstance(pid, str) else default

    def many(self, pids: Iterable[str]) -> dict[str, Paper]:
        """The papers of these ids that the snapshot holds, in one read."""
        out: dict[str, Paper] = {}
        wanted = []
        with self._lock:
            for pid in dict.fromkeys(pids):
                hit = self._cache.get(pid)
                if hit is None:
                    wanted.append(pid)
                else:
                    self._cache.move_to_end(pid)
                    out[pid] = hit
        if wanted:
            read = {pid: Paper.from_dict(json.loads(record)) for pid, record in
                    self._db.many("SELECT id, record FROM papers WHERE id IN ({})", wanted)}
            with self._lock:
                for pid, paper in read.items():
                    self._cache[pid] = paper
                while len(self._cache) > PAPER_CACHE:
                    self._cache.popitem(last=False)
            out.update(read)
        return out

    def ordered(self, pids: Iterable[str]) -> list[Paper]:
        """These papers (those the snapshot holds), in the snapshot's order."""
        ids = [pid for _, pid in sorted(self._db.many("SELECT pos, id FROM papers WHERE id IN ({})",
                                                      list(dict.fromkeys(pids))))]
        found = self.many(ids)
        return [found[pid] for pid in ids]

    def values(self) -> Iterator[Paper]:  # type: ignore[override]
        """Every paper, read page by page (a scan: not on a question's path)."""
        for _, record in self._db.scan(
                "SELECT pos, record FROM papers WHERE pos > ? ORDER BY pos LIMIT 2000"):
            yield Paper.from_dict(json.loads(record))

    def items(self) -> Iterator[tuple[str, Paper]]:  # type: ignore[override]
        for p in self.values():
            yield p.paper_id, p


class ChunkIds(Sequence[str]):
    """The chunk ids in the order BM25 numbers them."""

    def __init__(self, db: Db, count: int) -> None:
        self._db, self._count = db, count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        if not isinstance(i, int):
            raise TypeError("chunk ids are read one position at a time")
        if i < 0:
            i += self._count
        rows = self._db.rows("SELECT id FROM chunks WHERE pos = ?", (i,))
        if not rows:
            raise IndexError(i)
        return str(rows[0][0])

    def __iter__(self) -> Iterator[str]:
        for _, cid in self._db.scan("SELECT pos, id FROM chunks WHERE pos > ? ORDER BY pos LIMIT 20000"):
            yield cid

    def at(self, positions: Sequence[int]) -> list[tuple[str, str]]:
        """(chunk id, paper id) at each position."""
        rows = {pos: (cid, pid) for pos, cid, pid in
                self._db.many("SELECT pos, id, paper FROM chunks WHERE pos IN ({})", list(positions))}
        return [rows[p] for p in positions]


class ChunkField(Mapping[str, str]):
    """chunk id -> one column of its row (`paper` or `text`)."""

    def __init__(self, db: Db, column: str, cache: int) -> None:
        self._db, self._column, self._size = db, column, cache
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return int(self._db.rows("SELECT count(*) FROM chunks")[0][0])

    def __iter__(self) -> Iterator[str]:
        for _, cid in self._db.scan("SELECT pos, id FROM chunks WHERE pos > ? ORDER BY pos LIMIT 20000"):
            yield cid

    def __getitem__(self, cid: str) -> str:
        found = self.many([cid])
        if cid not in found:
            raise KeyError(cid)
        return found[cid]

    def get(self, cid: str, default: Any = None) -> Any:  # type: ignore[override]
        return self.many([cid]).get(cid, default) if isinstance(cid, str) else default

    def __contains__(self, cid: object) -> bool:
        return isinstance(cid, str) and cid in self.many([cid])

    def many(self, cids: Iterable[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        wanted = []
        with self._lock:
            for cid in dict.fromkeys(cids):
                hit = self._cache.get(cid)
                if hit is None:
                    wanted.append(cid)
                else:
                    out[cid] = hit
        if wanted:
            read = dict(self._db.many(f"SELECT id, {self._column} FROM chunks WHERE id IN ({{}})", wanted))
            self.remember(read)
            out.update(read)
        return out

    def remember(self, values: Mapping[str, str]) -> None:
        with self._lock:
            self._cache.update(values)
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)

    def items(self) -> Iterator[tuple[str, str]]:  # type: ignore[override]
        for _, cid, value in self._db.scan(
                f"SELECT pos, id, {self._column} FROM chunks WHERE pos > ? ORDER BY pos LIMIT 20000"):
            yield cid, value

    def values(self) -> Iterator[str]:  # type: ignore[override]
        for _, value in self.items():
            yield value
