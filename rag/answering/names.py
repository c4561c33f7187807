"""The names papers go by in running text ("Skrull", "DeepSpeed-Ulysses"), kept in step with
the index so that a paper ingested while a server runs is known by name too."""

from __future__ import annotations

import re
import threading

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
            self._version = snap.version

    def mentioned(self, text: str) -> list[str]:
        """Lower-cased names of papers the text mentions, in order of first mention."""
        self.refresh()
        return mentions(self._pattern, text)

    def display(self, name: str) -> str:
        return self._display.get(name, name)
