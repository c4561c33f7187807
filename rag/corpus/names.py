"""Author names: the display string every reader stores ("Martin Luther King Jr."), and the
parts, where a source gives them and the string alone would be read otherwise.

A display string is read by BibTeX's First/von/Last/Jr rules, which get most names right and
some wrong: a suffix ("Martin Luther King Jr." has the last name "Jr."), a family name of
two words ("Gabriel García Márquez"), an organisation ("Google Research"). So a reader whose
source has the parts (BibTeX's own name parts, PubMed's LastName/ForeName/Suffix and
CollectiveName, arXiv's `authors_parsed`, Zotero's lastName/firstName/fieldMode) keeps them
in `Paper.author_names`: one CSL-JSON name per author (`family`, `given`,
`non-dropping-particle`, `suffix`; `literal` for an organisation), and only when some
display string would be read wrong, so an ordinary paper stores nothing more.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # bibtexparser is imported where a name is split: not on `rag ask`'s start-up
    from bibtexparser.middlewares.names import NameParts

Name = dict[str, str]

# A brace in a stored name is a character ("Jane } Doe"), not BibTeX grouping: it is kept
# out of the splitter's sight, which would move it into another part or drop it.
_HIDE_BRACES = str.maketrans({"{": "\ue001", "}": "\ue002"})
_SHOW_BRACES = str.maketrans({"\ue001": "{", "\ue002": "}"})
_ORDER = ("given", "non-dropping-particle", "family", "suffix")


def name_parts(name: str) -> NameParts:
    """BibTeX's reading of "First von Last" ("Javier de Juan": von "de", last "Juan"). A name
    typed all in lower case ("colby banbury") has no von part to find: first + last."""
    from bibtexparser.middlewares.names import NameParts, parse_single_name_into_parts

    words = name.translate(_HIDE_BRACES).split()
    if len(words) > 1 and not any(c.isupper() for c in name):
        parts = NameParts(first=words[:-1], last=words[-1:])
    else:
        parts = parse_single_name_into_parts(" ".join(words), strict=False)
    return NameParts(*([w.translate(_SHOW_BRACES) for w in part]
                       for part in (parts.first, parts.von, parts.last, parts.jr)))


def from_parts(parts: NameParts) -> Name:
    n = {"family": parts.last, "given": parts.first, "non-dropping-particle": parts.von, "suffix": parts.jr}
    return {k: " ".join(" ".join(v).split()) for k, v in n.items() if v}


# Han, kana and Hangul: a name written in these scripts starts with the family name (山田 太郎).
_CJK = "\u1100-\u11ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_NAME = re.compile(f"[{_CJK}]+(?:\\s+[{_CJK}]+)+")


def read_name(name: str) -> Name:
    """The parts a display string alone gives (what export uses when none were stored)."""
    if _CJK_NAME.fullmatch(name.strip()):
        family, given = name.split(None, 1)
        return {"family": family, "given": " ".join(given.split())}
    return from_parts(name_parts(name))


def person(family: str, given: str = "", suffix: str = "") -> Name:
    """A person's name from a source's own parts. Lower-case words that start the family
    name are its particle ("van den Berg": "van den" + "Berg"), as BibTeX reads them."""
    words = family.split()
    cut = 0
    while cut < len(words) - 1 and words[cut][:1].islower():
        cut += 1
    n = {"family": " ".join(words[cut:]), "given": " ".join(given.split()),
         "non-dropping-particle": " ".join(words[:cut]), "suffix": " ".join(suffix.split())}
    return {k: v for k, v in n.items() if v}


def organisation(name: str) -> Name:
    return {"literal": " ".join(name.split())}


def display(n: Name) -> str:
    """"Given von Family Suffix", or the organisation's name: what answers and lists show."""
    return n.get("literal") or " ".join(n[k] for k in _ORDER if n.get(k))


def _plain(n: Name) -> bool:
    """Read right from its display string without asking the parser: capitalised given
    names and a one-word capitalised family name ("Chenyu Jiang", "C.-P. Wang")."""
    words = [n.get("family", ""), *n.get("given", "").split()]
    return set(n) <= {"family", "given"} and " " not in words[0] and all(
        w[:1].isupper() and not any(c in w for c in ",{}") for w in words)


def authors_and_names(names: list[Name]) -> tuple[list[str], list[Name]]:
    """The display strings of these names, and what `Paper.author_names` keeps: every
    name's parts when any display string alone would be read otherwise, else nothing."""
    names = [n for n in names if display(n)]
    authors = [display(n) for n in names]
    if all(_plain(n) or read_name(a) == n for a, n in zip(authors, names, strict=True)):
        return authors, []
    return authors, names


def paper_names(authors: list[str], stored: list[Name]) -> list[Name]:
    """The parts of each author: those stored with the paper (when they match its authors,
    one per author), else read from the display strings (an index from before names were
    stored, or a reader whose source has no parts)."""
    if len(stored) == len(authors) and all(display(n) == " ".join(a.split()) for a, n in zip(authors, stored, strict=True)):
        return stored
    return [read_name(a) for a in authors]
