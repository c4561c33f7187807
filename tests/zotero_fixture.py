"""A small Zotero library built with Zotero's own table definitions.

The CREATE TABLE statements below are copied, for the tables the reader touches, from the
zotero/zotero repository: resource/schema/userdata.sql (schema version 107: version,
settings, items, itemDataValues, itemData, itemNotes, itemAttachments, creators,
itemCreators, collections, collectionItems, deletedItems, libraries, feeds, feedItems) and
resource/schema/system.sql (version 32: itemTypes, itemTypesCombined, fields,
fieldsCombined, creatorTypes). Type and field ids are those of Zotero's system data.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE version (
    schema TEXT PRIMARY KEY,
    version INT NOT NULL
);
CREATE TABLE settings (
    setting TEXT,
    key TEXT,
    value,
    PRIMARY KEY (setting, key)
);
CREATE TABLE libraries (
    libraryID INTEGER PRIMARY KEY,
    type TEXT NOT NULL,
    editable INT NOT NULL,
    filesEditable INT NOT NULL,
    version INT NOT NULL DEFAULT 0,
    storageVersion INT NOT NULL DEFAULT 0,
    lastSync INT NOT NULL DEFAULT 0,
    archived INT NOT NULL DEFAULT 0
);
CREATE TABLE items (
    itemID INTEGER PRIMARY KEY,
    itemTypeID INT NOT NULL,
    dateAdded TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    dateModified TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    clientDateModified TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    libraryID INT NOT NULL,
    key TEXT NOT NULL,
    version INT NOT NULL DEFAULT 0,
    synced INT NOT NULL DEFAULT 0,
    UNIQUE (libraryID, key),
    FOREIGN KEY (libraryID) REFERENCES libraries(libraryID) ON DELETE CASCADE
);
CREATE TABLE itemDataValues (
    valueID INTEGER PRIMARY KEY,
    value UNIQUE
);
CREATE TABLE itemData (
    itemID INT,
    fieldID INT,
    valueID,
    PRIMARY KEY (itemID, fieldID),
    FOREIGN KEY (itemID) REFERENCES items(itemID) ON DELETE CASCADE,
    FOREIGN KEY (fieldID) REFERENCES fieldsCombined(fieldID),
    FOREIGN KEY (valueID) REFERENCES itemDataValues(valueID)
);
CREATE TABLE itemNotes (
    itemID INTEGER PRIMARY KEY,
    parentItemID INT,
    note TEXT,
    title TEXT,
    FOREIGN KEY (itemID) REFERENCES items(itemID) ON DELETE CASCADE,
    FOREIGN KEY (parentItemID) REFERENCES items(itemID) ON DELETE CASCADE
);
CREATE TABLE itemAttachments (
    itemID INTEGER PRIMARY KEY,
    parentItemID INT,
    linkMode INT,
    contentType TEXT,
    charsetID INT,
    path TEXT,
    syncState INT DEFAULT 0,
    storageModTime INT,
    storageHash TEXT,
    FOREIGN KEY (itemID) REFERENCES items(itemID) ON DELETE CASCADE,
    FOREIGN KEY (parentItemID) REFERENCES items(itemID) ON DELETE CASCADE,
    FOREIGN KEY (charsetID) REFERENCES charsets(charsetID) ON DELETE SET NULL
);
CREATE TABLE creators (
    creatorID INTEGER PRIMARY KEY,
    firstName TEXT,
    lastName TEXT,
    fieldMode INT,
    UNIQUE (lastName, firstName, fieldMode)
);
CREATE TABLE itemCreators (
    itemID INT NOT NULL,
    creatorID INT NOT NULL,
    creatorTypeID INT NOT NULL DEFAULT 1,
    orderIndex INT NOT NULL DEFAULT 0,
    PRIMARY KEY (itemID, creatorID, creatorTypeID, orderIndex),
    UNIQUE (itemID, orderIndex),
    FOREIGN KEY (itemID) REFERENCES items(itemID) ON DELETE CASCADE,
    FOREIGN KEY (creatorID) REFERENCES creators(creatorID) ON DELETE CASCADE,
    FOREIGN KEY (creatorTypeID) REFERENCES creatorTypes(creatorTypeID)
);
CREATE TABLE collections (
    collectionID INTEGER PRIMARY KEY,
    collectionName TEXT NOT NULL,
    parentCollectionID INT DEFAULT NULL,
    clientDateModified TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    libraryID INT NOT NULL,
    key TEXT NOT NULL,
    version INT NOT NULL DEFAULT 0,
    synced INT NOT NULL DEFAULT 0,
    UNIQUE (libraryID, key),
    FOREIGN KEY (libraryID) REFERENCES libraries(libraryID) ON DELETE CASCADE,
    FOREIGN KEY (parentCollectionID) REFERENCES collections(collectionID) ON DELETE CASCADE
);
CREATE TABLE collectionItems (
    collectionID INT NOT NULL,
    itemID INT NOT NULL,
    orderIndex INT NOT NULL DEFAULT 0,
    PRIMARY KEY (collectionID, itemID),
    FOREIGN KEY (collectionID) REFERENCES collections(collectionID) ON DELETE CASCADE,
    FOREIGN KEY (itemID) REFERENCES items(itemID) ON DELETE CASCADE
);
CREATE TABLE deletedItems (
    itemID INTEGER PRIMARY KEY,
    dateDeleted DEFAULT CURRENT_TIMESTAMP NOT NULL,
    FOREIGN KEY (itemID) REFERENCES items(itemID) ON DELETE CASCADE
);
CREATE TABLE feeds (
    libraryID INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    url TEXT NOT NULL UNIQUE,
    lastUpdate TIMESTAMP,
    lastCheck TIMESTAMP,
    lastCheckError TEXT,
    cleanupReadAfter INT,
    cleanupUnreadAfter INT,
    refreshInterval INT,
    FOREIGN KEY (libraryID) REFERENCES libraries(libraryID) ON DELETE CASCADE
);
CREATE TABLE feedItems (
    itemID INTEGER PRIMARY KEY,
    guid TEXT NOT NULL UNIQUE,
    readTime TIMESTAMP,
    translatedTime TIMESTAMP,
    FOREIGN KEY (itemID) REFERENCES items(itemID) ON DELETE CASCADE
);
CREATE TABLE itemTypes (
    itemTypeID INTEGER PRIMARY KEY,
    typeName TEXT,
    templateItemTypeID INT,
    display INT DEFAULT 1 -- 0 == hide, 1 == display, 2 == primary
);
CREATE TABLE itemTypesCombined (
    itemTypeID INT NOT NULL,
    typeName TEXT NOT NULL,
    display INT DEFAULT 1 NOT NULL,
    custom INT NOT NULL,
    PRIMARY KEY (itemTypeID)
);
CREATE TABLE fields (
    fieldID INTEGER PRIMARY KEY,
    fieldName TEXT,
    fieldFormatID INT,
    FOREIGN KEY (fieldFormatID) REFERENCES fieldFormats(fieldFormatID)
);
CREATE TABLE fieldsCombined (
    fieldID INT NOT NULL,
    fieldName TEXT NOT NULL,
    label TEXT,
    fieldFormatID INT,
    custom INT NOT NULL,
    PRIMARY KEY (fieldID)
);
CREATE TABLE creatorTypes (
    creatorTypeID INTEGER PRIMARY KEY,
    creatorType TEXT
);
"""

# ids as in Zotero's system data (resource/schema/system-107.sql; `preprint` and `archiveID`
# come from the later global schema, with ids of their own)
TYPES = {1: "note", 4: "journalArticle", 14: "attachment", 33: "conferencePaper", 37: "preprint"}
FIELDS = {1: "url", 12: "publicationTitle", 14: "date", 22: "extra", 26: "DOI", 84: "conferenceName",
          90: "abstractNote", 110: "title", 114: "proceedingsTitle", 130: "archiveID"}
CREATOR_TYPES = {1: "author", 3: "editor"}


class Library:
    """Builds a zotero.sqlite item by item."""

    def __init__(self, path: Path, userdata_version: int = 121) -> None:
        self.path = path
        self.con = sqlite3.connect(path)
        self.con.executescript(SCHEMA)
        self.con.executemany("INSERT INTO version VALUES (?, ?)",
                             [("userdata", userdata_version), ("system", 32), ("globalSchema", 30)])
        self.con.execute("INSERT INTO libraries (libraryID, type, editable, filesEditable) VALUES (1, 'user', 1, 1)")
        for tid, name in TYPES.items():
            self.con.execute("INSERT INTO itemTypes VALUES (?, ?, NULL, 1)", (tid, name))
            self.con.execute("INSERT INTO itemTypesCombined VALUES (?, ?, 1, 0)", (tid, name))
        for fid, name in FIELDS.items():
            self.con.execute("INSERT INTO fields VALUES (?, ?, NULL)", (fid, name))
            self.con.execute("INSERT INTO fieldsCombined VALUES (?, ?, NULL, NULL, 0)", (fid, name))
        self.con.executemany("INSERT INTO creatorTypes VALUES (?, ?)", CREATOR_TYPES.items())
        self._next = 1

    def item(self, kind: str, key: str, fields: dict[str, str] | None = None,
             creators: list[tuple[str | None, str, str]] = (), parent: int | None = None,
             library: int = 1) -> int:
        """Add an item (creators as (first, last, type), in order; a first name of None is a
        creator typed in one field, fieldMode 1: "World Health Organization"); return its itemID."""
        type_id = next(t for t, n in TYPES.items() if n == kind)
        item_id = self._next
        self._next += 1
        self.con.execute("INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (?, ?, ?, ?)",
                         (item_id, type_id, library, key))
        field_ids = {n: f for f, n in FIELDS.items()}
        for name, value in (fields or {}).items():
            self.con.execute("INSERT OR IGNORE INTO itemDataValues (value) VALUES (?)", (value,))
            vid = self.con.execute("SELECT valueID FROM itemDataValues WHERE value = ?", (value,)).fetchone()[0]
            self.con.execute("INSERT INTO itemData VALUES (?, ?, ?)", (item_id, field_ids[name], vid))
        # stored in reverse on purpose: the order is orderIndex's, not the rows'
        for order, (first, last, ctype) in reversed(list(enumerate(creators))):
            mode = 1 if first is None else 0
            first = first or ""  # Zotero writes "" for the first name of a one-field creator
            self.con.execute("INSERT OR IGNORE INTO creators (firstName, lastName, fieldMode) VALUES (?, ?, ?)",
                             (first, last, mode))
            cid = self.con.execute("SELECT creatorID FROM creators WHERE firstName = ? AND lastName = ? "
                                   "AND fieldMode = ?", (first, last, mode)).fetchone()[0]
            tid = next(t for t, n in CREATOR_TYPES.items() if n == ctype)
            self.con.execute("INSERT INTO itemCreators VALUES (?, ?, ?, ?)", (item_id, cid, tid, order))
        if kind == "note":
            self.con.execute("INSERT INTO itemNotes (itemID, parentItemID, note, title) VALUES (?, ?, ?, ?)",
                             (item_id, parent, "<p>my note</p>", "my note"))
        if kind == "attachment":
            self.con.execute("INSERT INTO itemAttachments (itemID, parentItemID, linkMode, contentType, path) "
                             "VALUES (?, ?, 0, 'application/pdf', 'storage:paper.pdf')", (item_id, parent))
        return item_id

    def collection(self, name: str, key: str, parent: int | None = None, items: list[int] = ()) -> int:
        cur = self.con.execute("INSERT INTO collections (collectionName, parentCollectionID, libraryID, key) "
                               "VALUES (?, ?, 1, ?)", (name, parent, key))
        cid = int(cur.lastrowid or 0)
        for i in items:
            self.con.execute("INSERT INTO collectionItems (collectionID, itemID) VALUES (?, ?)", (cid, i))
        return cid

    def feed(self, name: str, url: str) -> int:
        """Subscribe to an RSS feed: a library of type 'feed'; return its libraryID."""
        cur = self.con.execute("INSERT INTO libraries (type, editable, filesEditable) VALUES ('feed', 0, 0)")
        library = int(cur.lastrowid or 0)
        self.con.execute("INSERT INTO feeds (libraryID, name, url) VALUES (?, ?, ?)", (library, name, url))
        return library

    def feed_item(self, library: int, key: str, fields: dict[str, str], guid: str) -> int:
        """An item the feed brought in (read or not, it is not in the user's library)."""
        item_id = self.item("journalArticle", key, fields, library=library)
        self.con.execute("INSERT INTO feedItems (itemID, guid) VALUES (?, ?)", (item_id, guid))
        return item_id

    def trash(self, item_id: int) -> None:
        self.con.execute("INSERT INTO deletedItems (itemID) VALUES (?)", (item_id,))

    def close(self) -> None:
        self.con.commit()
        self.con.close()


def sample_library(path: Path) -> Path:
    """The library the tests read: the traps of a real one."""
    lib = Library(path)
    dyna = lib.item("conferencePaper", "DYNA0001", {
        "title": "DynaPipe: Optimizing Multi-task Training through Dynamic Pipelines",
        "abstractNote": "Multi-task model training has been adopted to enable a single deep neural network "
                        "model to handle multiple tasks.",
        "date": "2024-04-22 2024-04-22", "DOI": "10.1145/3627703.3629585",
        "proceedingsTitle": "Proceedings of the Nineteenth European Conference on Computer Systems",
        "extra": "arXiv: 2311.10418",
    }, [("Chenyu", "Jiang", "author"), ("Zhen", "Jia", "author"), ("Shuai", "Zheng", "author"),
        ("Ed", "Itor", "editor")])
    lib.item("note", "NOTE0001", parent=dyna)
    lib.item("attachment", "ATTA0001", {"title": "Full Text PDF"}, parent=dyna)
    pre = lib.item("preprint", "PREP0001", {
        "title": "FlexPipe: pipelined training on elastic clusters",
        "abstractNote": "We present FlexPipe for elastic clusters.",
        "date": "2023-05-00 May 2023", "archiveID": "arXiv:2305.12345",
        "url": "http://arxiv.org/abs/2305.12345v2",
    }, [("Ada", "Lovelace", "author")])
    url_only = lib.item("journalArticle", "URLA0001", {
        "title": "Sparse retrieval at scale",
        "abstractNote": "Sparse retrieval scales to billions of documents.",
        "date": "2022", "publicationTitle": "Journal of Retrieval",
        "url": "https://arxiv.org/pdf/2201.01234v3.pdf",
    }, [("Rui", "Zhang", "author")])
    binned = lib.item("journalArticle", "TRSH0001", {
        "title": "A paper in the trash", "abstractNote": "This item was deleted by the user.",
        "date": "2021"}, [("Tom", "Trash", "author")])
    lib.trash(binned)
    lib.item("journalArticle", "NOAB0001", {"title": "No abstract", "date": "2020"})
    systems = lib.collection("Systems", "COLL0001", items=[dyna])
    lib.collection("Pipelines", "COLL0002", parent=systems, items=[pre])
    lib.collection("Retrieval", "COLL0003", items=[url_only])
    lib.close()
    return path
