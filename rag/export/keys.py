"""Citation keys: the first author's family name, the year and the first title word, with
a, b, ... for papers of one index that would share one; never a bare year."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from rag.corpus.names import paper_names
from rag.corpus.paper import Paper
from rag.corpus.text import system_name

_TITLE_STOP = frozenset({
    "a", "an", "the", "on", "of", "in", "for", "to", "and", "with", "toward", "towards", "via",
    "from", "by", "at", "is", "are", "do", "does", "how", "what", "why", "when", "can", "your",
    "you", "we", "our"
})


# Letters NFKD does not take apart, which encode("ascii", "ignore") would drop (Ødegård
# would be "degard"): written as German, Danish or Polish typists would.
_TRANSLIT = str.maketrans({
    "Ø": "O", "ø": "o", "Ł": "L", "ł": "l", "Đ": "D", "đ": "d", "Ð": "D", "ð": "d", "ß": "ss",
    "Æ": "AE", "æ": "ae", "Œ": "OE", "œ": "oe", "Þ": "Th", "þ": "th", "ı": "i",
})


def _ascii(text: str) -> str:
    plain = unicodedata.normalize("NFKD", text.translate(_TRANSLIT)).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]", "", plain.lower())


def _first_word(text: str) -> str:
    """The first word that is not "a", "the", "on"... (else the first word) in ASCII."""
    words = [_ascii(w) for w in text.split()]
    return next((w for w in words if w and w not in _TITLE_STOP), next(filter(None, words), ""))


def _base_key(p: Paper) -> str:
    first = paper_names(p.authors[:1], p.author_names[:1])
    author = _ascii(first[0].get("family") or first[0].get("literal", "")) if first else ""
    word = _first_word(p.title or p.label)
    if not author and not word:
        # A title with no ASCII letter (大规模…, Кэширование…) and no author (or one written
        # so): the key was the bare year, "2023a". The name the abstract gives the paper, or
        # its first word, else "paper", before the year.
        word = _first_word(system_name(p.abstract) or "") or _first_word(p.abstract) or "paper"
    year = str(p.year or "")
    key = f"{author}{year}{word}" if author else f"{word}{year}"
    return key or "paper"


def keyed(papers: Iterable[Paper]) -> dict[str, Paper]:
    """Citation key -> paper, for every key an export from these papers gives (and the keys
    their libraries gave them)."""
    every = list(papers)
    by_id = {p.paper_id: p for p in every}
    out = {key: by_id[pid] for pid, key in cite_keys(every).items()}
    for p in every:
        if p.ids.get("key"):
            out.setdefault(p.ids["key"], p)
    return out


def _suffix(i: int) -> str:
    """a, b, ..., z, aa, ab, ...: the letters BibTeX users expect after a clashing key."""
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = chr(ord("a") + r) + out
    return out


def cite_keys(papers: Iterable[Paper], index_papers: Iterable[Paper] = ()) -> dict[str, str]:
    """paper_id -> citation key: first author's last name + year + first title word
    ("gale2023megablocks"). Papers that share a key get a, b, ... in paper-id order among
    all the papers of `index_papers` (every paper of the index) and `papers` that share it,
    so a paper's key is the same in every export from the index, whatever is exported with
    it and in whatever order: two exports never give two papers one key."""
    bases = {p.paper_id: _base_key(p) for p in papers}
    exported = list(bases)
    # A paper with a year that is in none of these keys can neither share one nor take the
    # suffixed key of one (the year's digits would be in both): only the others are worked
    # out, so an answer's three papers do not cost a pass over 100,000.
    years = " ".join(bases.values())
    for p in index_papers:
        if p.paper_id not in bases and (not p.year or str(p.year) in years):
            bases[p.paper_id] = _base_key(p)
    groups: dict[str, list[str]] = {}
    for pid, base in bases.items():
        groups.setdefault(base, []).append(pid)
    keys: dict[str, str] = {}
    taken = {base for base, ids in groups.items() if len(ids) == 1}
    for base, ids in sorted(groups.items()):
        if len(ids) == 1:
            keys[ids[0]] = base
            continue
        i = 0
        for pid in sorted(ids):
            while f"{base}{_suffix(i)}" in taken:
                i += 1
            keys[pid] = f"{base}{_suffix(i)}"
            taken.add(keys[pid])
    return {pid: keys[pid] for pid in exported}
