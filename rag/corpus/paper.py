"""The Paper record: one per paper, whatever file layout it came from."""

from __future__ import annotations

import datetime
import hashlib
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar


@dataclass
class Paper:
    paper_id: str
    abstract: str
    title: str | None = None
    label: str = ""
    authors: list[str] = field(default_factory=list)
    arxiv_id: str | None = None
    doi: str | None = None
    journal_ref: str | None = None
    venue: str | None = None
    venue_kind: str | None = None  # "journal" where the reader knows it is one; None: a conference or not known
    year: int | None = None
    date: str | None = None
    comments: list[str] = field(default_factory=list)
    # Each author's parts (rag.corpus.names), kept only where a display string alone would be
    # read wrong ("Martin Luther King Jr.", "Google Research"); empty for most papers.
    author_names: list[dict[str, str]] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)  # arXiv's, MeSH, concepts, collections
    # Other identifiers: pmid, pmcid, openalex, s2 (corpus id), zotero (item key).
    ids: dict[str, str] = field(default_factory=dict)
    # Every record merged into this paper (rag.corpus.merge): source, line, format, and the
    # identifier that matched; empty for a paper seen in one record only.
    sources: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""
    position: int = 0
    line: int = 0  # line of the file where the paper starts (for error messages)
    format: str = ""  # the reader that made the record (merge precedence, provenance)
    # Where each file of `source` and `sources` was when read (absolute paths; the names are
    # as written, relative to the folder rag ran in): `--prune` checks these, from any folder.
    located: dict[str, str] = field(default_factory=dict)

    INTERNAL: ClassVar[frozenset[str]] = frozenset({"line", "format", "located"})  # not stored, not in to_dict()
    # Fields added after indexes were built: left out of the content hash while empty, so a
    # re-ingest does not take every stored paper for changed and embed it again.
    LATER: ClassVar[frozenset[str]] = frozenset({"categories", "ids", "sources", "venue_kind", "author_names"})
    # Fields that describe another one (venue_kind the venue, author_names the authors): a
    # merge takes them from another record only with the field they describe.
    PAIRED: ClassVar[dict[str, str]] = {"venue_kind": "venue", "author_names": "authors"}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for name in self.INTERNAL:
            d.pop(name)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Paper:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def content_hash(self) -> str:
        """Changes whenever anything stored for the paper changes."""
        items = [(k, v) for k, v in self.to_dict().items() if v or k not in self.LATER]
        return sha(repr(sorted(items)))[:16]

    def merge(self, other: Paper) -> None:
        """Fill this record's empty fields from another record of the same paper."""
        if (not self.arxiv_id and other.arxiv_id
                and self.paper_id == make_paper_id(None, self.title, self.abstract)):
            # The id is the arXiv id whenever one is known, whichever file came first.
            self.paper_id = other.arxiv_id
        for f in fields(self):
            if f.name in ("paper_id", "source", "position", "line", "format", "sources", "located") \
                    or f.name in self.PAIRED:
                continue
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if not mine and theirs:
                setattr(self, f.name, theirs)
        for name, described in self.PAIRED.items():
            if not getattr(self, name) and getattr(self, described) == getattr(other, described):
                setattr(self, name, getattr(other, name))
        self.ids = {**other.ids, **self.ids}  # every identifier either record has
        self.located = {**other.located, **self.located}
        if other.title and recased(self.title, other.title):
            self.label = other.title if self.label == self.title else self.label
            self.title = other.title
        if other.title and self.label != self.title:
            self.label = self.title or self.label


def recased(title: str | None, other: str) -> bool:
    """`other` is `title` as written where `title` is in capitals (a typed-in record, an old
    database: "DEEP LEARNING FOR X"; a one-word title such as "BERT" is a name): the id,
    made from the title in lower case, is the same for both."""
    def shouted(text: str) -> bool:
        return text.isupper() and len(text.split()) > 1

    return bool(title and shouted(title) and not shouted(other) and other != other.lower()
                and norm_text(other) == norm_text(title))


def source_files(paper: Paper) -> list[str]:
    """Every file the paper was read from: the one its fields come from, then the files of the
    other records merged into it (rag.corpus.merge)."""
    return list(dict.fromkeys([paper.source, *(str(e.get("source")) for e in paper.sources if e.get("source"))]))


def location(paper: Paper, source: str) -> str:
    """Where `source`, one of the paper's files, was when read; as written when not known (an
    index written before rag kept the places, a file that only added to another's paper)."""
    return paper.located.get(source) or source


def venue_text(paper: Paper) -> str:
    """What a venue filter searches: the venue, the journal reference and the comments
    ("Accepted at ICML 2023"), lower-case."""
    return " ".join(filter(None, [paper.venue, paper.journal_ref, *paper.comments])).lower()


_VENUE_NOTE = re.compile(r"\b(accepted|conference|journal|proceedings|workshop|symposium)\b", re.I)


def venue_note(paper: Paper) -> str | None:
    """The comment that says where the paper appeared ("Accepted at ICML 2023"), if any."""
    return next((c for c in paper.comments if _VENUE_NOTE.search(c)), None)


# Where preprints are posted, named as if a venue: Semantic Scholar's "arXiv.org" and "ArXiv",
# OpenAlex's "arXiv (Cornell University)", "bioRxiv (Cold Spring Harbor Laboratory)", dblp's
# journal "CoRR".
_PREPRINT_SERVER = re.compile(r"\s*(?:(?:arxiv|biorxiv|medrxiv|chemrxiv)(?:\.org)?\b|corr\s*$)", re.IGNORECASE)


def preprint_server(venue: str) -> bool:
    """`venue` names a preprint server, where a paper was posted, not where it appeared."""
    return bool(_PREPRINT_SERVER.match(venue))


def venue_words(paper: Paper) -> list[str]:
    """The words of venue_text, each once (stored with every chunk for native filtering)."""
    return sorted(set(re.findall(r"\w+", venue_text(paper))))


def category_keys(categories: list[str]) -> list[str]:
    """What a category filter matches: each category and its archive, lower-case
    (["cs.DC"] -> ["cs", "cs.dc"]), so `--category cs` takes every cs.* paper."""
    keys = {c.lower() for c in categories} | {c.split(".", 1)[0].lower() for c in categories}
    return sorted(k for k in keys if k)


def sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def norm_text(text: str) -> str:
    """Normalised form used to recognise the same abstract in two files."""
    return re.sub(r"\W+", " ", text.lower()).strip()


def slug(text: str, words: int = 6) -> str:
    parts = re.findall(r"[a-z0-9]+", text.lower())[:words]
    return "-".join(parts) or "paper"


def make_paper_id(arxiv_id: str | None, title: str | None, abstract: str) -> str:
    """Stable across re-ingests and machines: arXiv id, else title, else abstract content."""
    if arxiv_id:
        return arxiv_id
    if title:
        return f"{slug(title)}-{sha(norm_text(title))[:6]}"
    return f"{slug(abstract, 4)}-{sha(norm_text(abstract))[:8]}"


# "10." + registrant prefix + "/" + suffix, nothing in it that would end a field of a citation
# file: no whitespace (an RIS field ends at a line break), no braces, quotes or backslashes
# (a BibTeX doi field is verbatim: it cannot escape them).
_DOI = re.compile(r'10\.\d+(?:\.\d+)*/[^\s{}"\\]+')
_DOI_LINK = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", re.IGNORECASE)
_DATE = re.compile(r"\d{4}(?:-\d{2}(?:-\d{2})?)?")


def strip_doi_link(text: str) -> str:
    """`text` without a doi: or doi.org link prefix."""
    return _DOI_LINK.sub("", text.strip()).strip()


def clean_doi(text: str) -> str | None:
    """The DOI in `text` (a bare DOI, doi:…, or a doi.org link), or None when it is none."""
    doi = strip_doi_link(text)
    return doi if _DOI.fullmatch(doi) else None


def real_date(text: str) -> bool:
    """2023, 2023-06 and 2023-06-30 are dates; 2023-13, 2023-06-31 and 23/06/2023 are not."""
    if not _DATE.fullmatch(text):
        return False
    try:
        datetime.date.fromisoformat((text + "-01-01")[:10])
    except ValueError:
        return False
    return True
