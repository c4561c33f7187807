"""The names papers go by in running text ("Skrull", "DeepSpeed-Ulysses"), kept in step with
the index so that a paper ingested while a server runs is known by name too."""

from __future__ import annotations

import re
import threading
import unicodedata

from rag.answering.questions import mentions, names_pattern
from rag.corpus.text import short_label
from rag.retrieve import Retriever

MAX_NAME = 30  # longer "names" are sentences (untitled papers' leads), not names


class CorpusNames:
    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever
        self._version = -1
        self._lock = threading.Lock()
        self.known: set[str] = set()
        self._display: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None
        self._plain: dict[str, str] = {}  # "adacm2" -> "AdaCM²": names as a keyboard types them
        self._plain_pattern: re.Pattern[str] | None = None

    def refresh(self) -> None:
        snap = self.retriever.snapshot()
        with self._lock:
            if self._version == snap.version:
                return
            display: dict[str, str] = {}
            for p in snap.papers.values():
                name = short_label(p.title, p.label)
                if len(name) <= MAX_NAME:
                    display.setdefault(name.lower(), name)
            self._display, self.known = display, set(display)
            self._pattern = names_pattern(list(display))
            plain = {typed.lower(): name for name in display.values()
                     if (typed := unicodedata.normalize("NFKC", name)) != name}
            self._plain, self._plain_pattern = plain, names_pattern(list(plain))
            self._version = snap.version

    def mentioned(self, text: str) -> list[str]:
        """Lower-cased names of papers the text mentions, in order of first mention."""
        self.refresh()
        return mentions(self._pattern, text)

    def as_written(self, text: str) -> str:
        """`text` with the names it types plainly written as the papers write them: "What does
        AdaCM2 do?" asks about AdaCM², whose name was matched only as written (it was declined)."""
        self.refresh()
        if self._plain_pattern is None:
            return text
        return self._plain_pattern.sub(lambda m: self._plain[m.group(0).lower()], text)

    def display(self, name: str) -> str:
        return self._display.get(name, name)
