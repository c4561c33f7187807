"""The names papers go by in running text ("GPipe", "Colossal-AI"), kept in step with
the index so that a paper ingested while a server runs is known by name too.

Looked up, not scanned: a text's parts that start and end at word edges are looked up in the
index snapshot's name tables (rag.retrieve.snapshot), and only the names found there make the
regex that finds them in the text. One regex of every name was compiled per process and a
judge tested each name against each sentence: seconds at 100,000 abstracts.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

from rag.corpus.text import MAX_NAME
from rag.corpus.words import spans
from rag.question.patterns import mentions, names_pattern
from rag.retrieve import Retriever

__all__ = ["MAX_NAME", "CorpusNames", "NameSet"]


class NameSet:
    """The lower-cased names of one snapshot's papers (at most MAX_NAME characters), as a set
    that is looked up rather than held."""

    def __init__(self, snapshot: Any) -> None:
        self._snapshot = snapshot
        self._display: dict[str, str | None] = {}
        self._lock = threading.Lock()
        # the longest key: lower-casing may lengthen a name ("İ" is two characters lower-cased)
        self.longest = snapshot.longest("short_names") if snapshot is not None else 0

    def display(self, names: list[str]) -> dict[str, str]:
        """lower-cased name -> as papers write it, for those of these that papers go by."""
        with self._lock:
            todo = [n for n in dict.fromkeys(names) if n not in self._display]
        if todo and self._snapshot is None:
            return {}
        if todo:
            found = dict(self._snapshot.lookup("short_names", todo))
            with self._lock:
                if len(self._display) > 50_000:
                    self._display.clear()
                self._display.update({n: found.get(n) for n in todo})
        with self._lock:
            return {n: d for n in names if (d := self._display.get(n)) is not None}

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(self.display([name]))

    def __iter__(self) -> Iterator[str]:
        """Every name (a scan: not on a question's path)."""
        if self._snapshot is not None:
            for key, _ in self._snapshot.scan_lookup("short_names"):
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def found_in(self, text: str) -> set[str]:
        """The names that `text` (lower-cased) holds as whole words, overlapping ones too: what
        `{n for n in names if re.search(rf"(?<![\\w-]){re.escape(n)}(?![\\w-])", text)}` gives."""
        return set(self.display(spans(text, self.longest)))


class CorpusNames:
    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever
        self._snapshot: Any = None
        self._lock = threading.Lock()
        self.known = NameSet(None)

    def refresh(self) -> None:
        snap = self.retriever.snapshot()
        with self._lock:
            if self._snapshot is not snap:
                self._snapshot, self.known = snap, NameSet(snap)

    def _pattern(self, text: str) -> re.Pattern[str] | None:
        """The regex of every name of the index, as far as `text` can match it: of the names
        that a part of it spells (in any case)."""
        return names_pattern(list(self.known.display([s.lower() for s in spans(text, self.known.longest)])))

    def mentioned(self, text: str) -> list[str]:
        """Lower-cased names of papers the text mentions, in order of first mention."""
        self.refresh()
        return mentions(self._pattern(text), text)

    def as_written(self, text: str) -> str:
        """`text` with the names it types plainly written as the papers write them: "What does
        Pix2 do?" asks about Pix², whose name was matched only as written (it was declined)."""
        self.refresh()
        typed = spans(text, self._snapshot.longest("typed_names"))
        plain = dict(self._snapshot.lookup("typed_names", [s.lower() for s in typed]))
        pattern = names_pattern(list(plain))
        if pattern is None:
            return text
        return pattern.sub(lambda m: plain[m.group(0).lower()], text)

    def display(self, name: str) -> str:
        return self.known.display([name]).get(name, name)

    def papers_named(self, names: list[str]) -> dict[str, list[str]]:
        """lower-cased name -> the ids of every paper going by it (its short label)."""
        self.refresh()
        out: dict[str, list[str]] = {}
        for name, pid in self._snapshot.lookup("label_papers", names):
            out.setdefault(name, []).append(pid)
        return out
