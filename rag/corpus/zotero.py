"""A Zotero library (`zotero.sqlite`, or the Zotero data directory holding it), read-only.

Zotero keeps its database open and locked while it runs, so it is opened as an immutable
SQLite URI (`?mode=ro&immutable=1`): no lock is taken and nothing is ever written. The cost:
changes Zotero has not yet written back to the file are not seen; close Zotero for those.
Regular items with an abstract become papers; notes, attachments and annotations, and
items in the trash (`deletedItems`), are skipped. The tables read are those of Zotero's
own schema (resource/schema/userdata.sql and system.sql in the zotero/zotero repository).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from rag.corpus.formats import _paper, split_arxiv_id
from rag.corpus.merge import norm_doi
from rag.corpus.names import authors_and_names, organisation, person
from rag.corpus.paper import Paper
from rag.corpus.streams import SQLITE_MAGIC, Stream
from rag.errors import InputError, ParseError

LAYOUT = "zotero"
SKIPPED_TYPES = ("note", "attachment", "annotation")
_VENUE_FIELDS = ("publicationTitle", "proceedingsTitle", "conferenceName", "bookTitle", "repository",
                 "websiteTitle", "university")
_ARXIV = re.compile(r"arxiv(?:\.org/(?:abs|pdf)/|:\s*|\s+id:\s*)([\w./-]+)", re.IGNORECASE)


def detect(head: bytes) -> bool:
    return head.startswith(SQLITE_MAGIC)


def connect(path: Path) -> sqlite3.Connection:
    """Read-only and immutable: works while Zotero holds its lock, and can write nothing."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


def _table(con: sqlite3.Connection, *names: str) -> str:
    """The first of these tables the database has (Zotero 5+ reads `...Combined` ones)."""
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for n in names:
        if n in have:
            return n
    raise sqlite3.DatabaseError(f"no table {' or '.join(names)}")


def schema_version(con: sqlite3.Connection) -> str:
    rows = dict(con.execute("SELECT schema, version FROM version"))
    return str(rows.get("userdata", "unknown"))


def arxiv_id(fields: dict[str, str]) -> str | None:
    """From `archiveID` ("arXiv:2311.10418"), `extra` ("arXiv: 2311.10418"), or the URL."""
    for name in ("archiveID", "extra", "url"):
        for m in _ARXIV.finditer(fields.get(name, "")):
            split = split_arxiv_id(m.group(1).removesuffix(".pdf"))
            if split and not split[1].strip(" .,;"):
                return split[0]
    return None


def _collections(con: sqlite3.Connection, name: str | None) -> set[int] | None:
    """Ids of the collection called `name` and all its subcollections (None: no restriction)."""
    if name is None:
        return None
    rows = list(con.execute("SELECT collectionID, collectionName, parentCollectionID FROM collections"))
    chosen = {cid for cid, cname, _ in rows if cname == name} or {
        cid for cid, cname, _ in rows if cname.casefold() == name.casefold()}
    if not chosen:
        known = ", ".join(sorted({c for _, c, _ in rows})[:20]) or "none"
        raise InputError(f"no Zotero collection named {name!r}", f"collections in this library: {known}")
    grew = True
    while grew:
        more = {cid for cid, _, parent in rows if parent in chosen} - chosen
        chosen |= more
        grew = bool(more)
    return chosen


# What SQLite says of a damaged file can itself be bytes that are not UTF-8 (a schema entry's
# name, in "malformed database schema (...)"): Python then raises UnicodeDecodeError, not
# sqlite3.DatabaseError.
_DAMAGED = "the file is damaged: Zotero keeps backups beside it (zotero.sqlite.bak); ingest a copy of one"


def read(path: Path, source: str, collection: str | None = None) -> Stream:
    con = None
    try:
        con = connect(path)
        version = schema_version(con)
        wanted = _collections(con, collection)
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        if con is not None:
            con.close()
        if isinstance(exc, UnicodeDecodeError):
            raise ParseError(source, None, "SQLite database whose own records cannot be read "
                             "(text in it is not UTF-8)", _DAMAGED) from None
        raise ParseError(source, None, f"SQLite database that is not a Zotero library ({exc})",
                         "point at zotero.sqlite in the Zotero data directory") from None
    stream = Stream.of(LAYOUT, lambda stream: _papers(con, source, stream, wanted))
    stream.note = f"Zotero library, schema version {version}" + (f", collection {collection!r}" if collection else "")
    return stream


def _feed_items(con: sqlite3.Connection) -> str:
    """An SQL condition on `items i`: the item came from a subscribed RSS feed (Zotero keeps
    feeds as libraries of type 'feed', their items in feedItems), not from the user's library."""
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conditions = ["0"]
    if "libraries" in have and "type" in {r[1] for r in con.execute("PRAGMA table_info(libraries)")}:
        conditions.append("i.libraryID IN (SELECT libraryID FROM libraries WHERE type = 'feed')")
    if "feedItems" in have:
        conditions.append("i.itemID IN (SELECT itemID FROM feedItems)")
    return " OR ".join(conditions)


def _papers(con: sqlite3.Connection, source: str, stream: Stream, wanted: set[int] | None) -> Iterator[Paper]:
    try:
        types, fields = _table(con, "itemTypesCombined", "itemTypes"), _table(con, "fieldsCombined", "fields")
        skip = ",".join("?" * len(SKIPPED_TYPES))
        feed = _feed_items(con)
        items = con.execute(
            f"SELECT i.itemID, i.key, t.typeName FROM items i JOIN {types} t ON t.itemTypeID = i.itemTypeID "
            f"WHERE t.typeName NOT IN ({skip}) AND i.itemID NOT IN (SELECT itemID FROM deletedItems) "
            f"AND NOT ({feed}) ORDER BY i.itemID", SKIPPED_TYPES).fetchall()
        trashed, fed = con.execute(
            f"SELECT COALESCE(SUM(i.itemID IN (SELECT itemID FROM deletedItems) AND NOT ({feed})), 0), "
            f"COALESCE(SUM({feed}), 0) FROM items i JOIN {types} t ON t.itemTypeID = i.itemTypeID "
            f"WHERE t.typeName NOT IN ({skip})", SKIPPED_TYPES).fetchone()
        if trashed:
            stream.leave_out("Zotero items in the trash", trashed)
        if fed:
            stream.leave_out("Zotero feed items (RSS subscriptions, not the library)", fed)
        for n, (item_id, key, kind) in enumerate(items, 1):
            colls = con.execute(
                "SELECT c.collectionID, c.collectionName FROM collectionItems ci JOIN collections c "
                "ON c.collectionID = ci.collectionID WHERE ci.itemID = ? ORDER BY c.collectionName",
                (item_id,)).fetchall()
            if wanted is not None and not any(cid in wanted for cid, _ in colls):
                stream.leave_out("Zotero items outside the collection")
                continue
            values = dict(con.execute(
                f"SELECT f.fieldName, v.value FROM itemData d JOIN {fields} f ON f.fieldID = d.fieldID "
                "JOIN itemDataValues v ON v.valueID = d.valueID WHERE d.itemID = ?", (item_id,)))
            values = {k: str(v) for k, v in values.items() if v is not None}
            if not values.get("abstractNote", "").strip():
                stream.leave_out("Zotero items without an abstract")
                continue
            paper = _item_paper(con, item_id, key, kind, values, [c for _, c in colls], n)
            yield paper
    except sqlite3.Error as exc:
        stream.problems.append(ParseError(source, None, f"Zotero database that cannot be read ({exc})",
                                          "close Zotero and try again, or copy zotero.sqlite and ingest the copy"))
    except UnicodeDecodeError:
        stream.problems.append(ParseError(source, None, "Zotero database that cannot be read (text in it is "
                                          "not UTF-8)", _DAMAGED))
    finally:
        con.close()


def _item_paper(con: sqlite3.Connection, item_id: int, key: str, kind: str, values: dict[str, str],
                collections: list[str], n: int) -> Paper:
    creators = con.execute(
        "SELECT c.firstName, c.lastName, c.fieldMode, t.creatorType FROM itemCreators ic JOIN creators c "
        "ON c.creatorID = ic.creatorID LEFT JOIN creatorTypes t ON t.creatorTypeID = ic.creatorTypeID "
        "WHERE ic.itemID = ? ORDER BY ic.orderIndex", (item_id,)).fetchall()
    # fieldMode 1: a creator typed in one field ("World Health Organization"), not First Last
    names = [(organisation(last or "") if mode == 1 else person(last or "", first or ""), role)
             for first, last, mode, role in creators]
    authors, author_names = authors_and_names([n for n, role in names if role in (None, "author")])
    if not authors:
        authors, author_names = authors_and_names([n for n, _ in names])
    # Zotero stores dates as "YYYY-MM-DD original text" (00 for an unknown month or day)
    date_field = values.get("date", "")
    year = re.match(r"(\d{4})", date_field)
    iso = re.match(r"(\d{4}-\d{2}-\d{2})", date_field)
    venue = next((values[f] for f in _VENUE_FIELDS if values.get(f, "").strip()), None)
    paper = _paper(values["abstractNote"], title=values.get("title"), arxiv_id=arxiv_id(values),
                   authors=authors, author_names=author_names, venue=venue,
                   venue_kind="journal" if venue and kind == "journalArticle" else None,
                   year=int(year.group(1)) if year else None,
                   date=iso.group(1) if iso and "-00" not in iso.group(1) else None,
                   doi=norm_doi(values.get("DOI")), categories=collections, line=0)
    paper.ids = {"zotero": key}
    return paper
