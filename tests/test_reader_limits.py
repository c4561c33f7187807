"""Bounded memory per record in every reader: a record over the caps of rag.corpus.limits (an
XML element, a JSON line or document, an inverted index, a MEDLINE or RIS record, a BibTeX
name list) is refused as it is read, never built whole, with the file and the record named;
the records beside it are still read. The bombs themselves (a 200 MB element, a 400 MB line)
are run by benchmarks/reader_memory.py, which prints each one's peak memory."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rag.corpus import read_file
from rag.corpus.limits import (
    MAX_JSON_VALUES,
    MAX_NAMES,
    MAX_POSITIONS,
    MAX_RECORD_BYTES,
    MAX_RECORD_LINES,
    MAX_XML_ELEMENTS,
)
from rag.errors import ParseError
from tests.conftest import RAG

ABSTRACT = "We propose a scheduler that overlaps communication with computation on GPU clusters."
MB = 1 << 20


def _gz(path: Path, *parts: bytes, level: int = 1) -> Path:
    with gzip.open(path, "wb", compresslevel=level) as out:
        for part in parts:
            out.write(part)
    return path


def _work(ident: int, **extra: object) -> bytes:
    words = {w: [i] for i, w in enumerate(ABSTRACT.split())}
    return json.dumps({"id": f"https://openalex.org/W{ident}", "display_name": f"Work {ident}",
                       "abstract_inverted_index": words, **extra}).encode() + b"\n"


def _article(pmid: int, abstract: bytes = ABSTRACT.encode()) -> bytes:
    return (b"<PubmedArticle><MedlineCitation><PMID>%d</PMID><Article><ArticleTitle>T</ArticleTitle>"
            b"<Abstract><AbstractText>%s</AbstractText></Abstract></Article></MedlineCitation>"
            b"</PubmedArticle>\n") % (pmid, abstract)


def _pubmed(tmp: Path, middle: bytes) -> Path:
    return _gz(tmp / "bomb.xml.gz", b'<?xml version="1.0"?>\n<PubmedArticleSet>\n', _article(1),
               _article(2, middle), _article(3), b"</PubmedArticleSet>\n")


def _atom(tmp: Path) -> Path:
    entry = (b"<entry><id>http://arxiv.org/abs/2301.0000%dv1</id><title>T</title><summary>%s</summary>"
             b"<published>2023-01-02T00:00:00Z</published></entry>\n")
    return _gz(tmp / "feed.xml.gz", b'<?xml version="1.0"?>\n<feed xmlns="http://www.w3.org/2005/Atom">\n',
               entry % (1, ABSTRACT.encode()), entry % (2, b"big " * ((MAX_RECORD_BYTES + MB) // 4)), b"</feed>\n")


def _jsonl_lines(name: str, good: Callable[[int], bytes], bad: bytes) -> Callable[[Path], Path]:
    return lambda tmp: _gz(tmp / name, good(1), bad, good(3))


def _s2(ident: int) -> bytes:
    return json.dumps({"paperId": f"p{ident}", "title": f"Paper {ident}", "abstract": ABSTRACT}).encode() + b"\n"


def _csl(ident: int) -> bytes:
    return json.dumps([{"type": "article-journal", "issued": {"date-parts": [[2020]]}, "id": f"c{ident}",
                        "title": f"Item {ident}", "abstract": ABSTRACT}]).encode() + b"\n"


def _plain(ident: int) -> bytes:
    return json.dumps({"id": f"j{ident}", "abstract": ABSTRACT}).encode() + b"\n"


def _s2_document(tmp: Path) -> Path:
    return _gz(tmp / "page.json.gz", b'{"data": [\n', _s2(1).rstrip(), b",\n",
               b"{},\n" * (MAX_JSON_VALUES // 2 + 1), _s2(3).rstrip(), b"\n]}\n")


def _medline(tmp: Path) -> Path:
    record = b"PMID- %d\nTI  - T\nAB  - " + ABSTRACT.encode() + b"\n"
    return _gz(tmp / "refs.nbib.gz", record % 1, b"\n", record % 2, b"AU  - X\n" * MAX_RECORD_LINES, b"\n",
               record % 3)


def _ris(tmp: Path) -> Path:
    record = b"TY  - JOUR\nTI  - T%d\nAB  - " + ABSTRACT.encode() + b"\n"
    return _gz(tmp / "refs.ris.gz", record % 1, b"ER  - \n", record % 2, b"AU  - X\n" * MAX_RECORD_LINES,
               b"ER  - \n", record % 3, b"ER  - \n")


def _bibtex(tmp: Path) -> Path:
    entry = "@article{k%d, title = {T%d}, abstract = {" + ABSTRACT + "}, author = {%s}}\n"
    return _gz(tmp / "refs.bib.gz", (entry % (1, 1, "Ann Able") + entry % (2, 2, " and ".join(["A B"] * (MAX_NAMES + 1)))
                                     + entry % (3, 3, "Cy Dee")).encode())


# (file, the record refused as it names it, the records still read)
CASES: dict[str, tuple[Callable[[Path], Path], str, int]] = {
    "PubMed element over the bytes": (
        lambda tmp: _pubmed(tmp, b"big " * ((MAX_RECORD_BYTES + MB) // 4)),
        "<PubmedArticle> number 2 (PMID 2) is over 8 MB", 1),
    "PubMed element over the elements": (
        lambda tmp: _pubmed(tmp, b"<i/>" * (MAX_XML_ELEMENTS + 1)),
        f"<PubmedArticle> number 2 (PMID 2) is over 8 MB or {MAX_XML_ELEMENTS:,} elements", 1),
    "arXiv feed entry": (_atom, "<entry> number 2 (http://arxiv.org/abs/2301.00002v1) is over 8 MB", 1),
    "OpenAlex line over the bytes": (
        _jsonl_lines("works.jsonl.gz", _work, b'{"id": "W2", "x": "' + b"x" * MAX_RECORD_BYTES + b'"}\n'),
        "works.jsonl.gz:2: line is over 8 MB: refused before it was read whole", 2),
    "OpenAlex line over the values": (
        _jsonl_lines("works.jsonl.gz", _work, _work(2, x=[0] * MAX_JSON_VALUES)),
        f"works.jsonl.gz:2: line is over {MAX_JSON_VALUES:,} JSON values", 2),
    "OpenAlex inverted index": (
        _jsonl_lines("works.jsonl.gz", _work, json.dumps({
            "id": "https://openalex.org/W2", "abstract_inverted_index": {"w": list(range(MAX_POSITIONS + 1))}
        }).encode() + b"\n"),
        f"works.jsonl.gz:2: `abstract_inverted_index` holds {MAX_POSITIONS + 1:,} positions", 2),
    "Semantic Scholar line": (
        _jsonl_lines("papers.jsonl.gz", _s2, b'{"paperId": "p2", "abstract": "' + b"x" * MAX_RECORD_BYTES + b'"}\n'),
        "papers.jsonl.gz:2: line is over 8 MB", 2),
    "Semantic Scholar document": (_s2_document, f"page.json.gz: JSON document of over {MAX_JSON_VALUES:,} values", 0),
    "CSL-JSON line": (
        _jsonl_lines("items.json.gz", _csl, b'[{"type": "article", "abstract": "' + b"x" * MAX_RECORD_BYTES + b'"}]\n'),
        "items.json.gz:2: line is over 8 MB", 2),
    "JSON Lines line over the bytes": (
        _jsonl_lines("papers.jsonl.gz", _plain, b'{"id": "j2", "abstract": "' + b"x" * MAX_RECORD_BYTES + b'"}\n'),
        "papers.jsonl.gz:2: line is over 8 MB: refused before it was read", 2),
    "JSON Lines line over the values": (
        _jsonl_lines("papers.jsonl.gz", _plain, json.dumps({"id": "j2", "abstract": "A.", "authors": ["ab"] * MAX_JSON_VALUES}).encode() + b"\n"),
        f"papers.jsonl.gz:2: line is over {MAX_JSON_VALUES:,} JSON values", 2),
    "MEDLINE record": (_medline, f"refs.nbib.gz:5: MEDLINE record (PMID- 2) of over {MAX_RECORD_LINES:,} lines", 2),
    "RIS record": (_ris, f"refs.ris.gz:5: RIS record of over {MAX_RECORD_LINES:,} lines", 2),
    "BibTeX names": (_bibtex, f"refs.bib.gz:2: BibTeX entry refused: field `author` lists over {MAX_NAMES:,} names", 2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_record_over_the_caps_is_refused_by_name_and_the_others_are_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    make, said, kept = CASES[case]
    path = make(tmp_path)
    monkeypatch.chdir(tmp_path)
    try:
        result = read_file(Path(path.name))
    except ParseError as exc:  # a document is refused whole
        assert said in str(exc) and kept == 0, str(exc)
        return
    assert len(result.papers) == kept, [p.paper_id for p in result.papers]
    assert any(said in str(p) for p in result.problems), [str(p) for p in result.problems]


def test_records_at_the_caps_are_still_read(tmp_path: Path) -> None:
    """Just under every cap: a long author list, a page of many values, a long abstract."""
    names = " and ".join(f"Au{i} Thor" for i in range(2000))
    bib = tmp_path / "long.bib"
    bib.write_text(f"@article{{k, title = {{Many authors}}, author = {{{names}}}, abstract = {{{ABSTRACT}}}}}\n")
    [paper] = read_file(bib).papers
    assert len(paper.authors) == 2000
    words = ["a"] * (MAX_POSITIONS // 2)  # 19,999 characters
    works = _gz(tmp_path / "w.jsonl.gz", _work(1, x=[0] * (MAX_JSON_VALUES - 100)), json.dumps({
        "id": "https://openalex.org/W2", "abstract_inverted_index": {"a": list(range(len(words)))}}).encode())
    result = read_file(works)
    assert [len(p.abstract) for p in result.papers] == [len(ABSTRACT), len(" ".join(words))] and not result.problems


@pytest.mark.parametrize("kind", ["pubmed", "openalex"])
def test_rag_ingest_refuses_a_bomb_without_taking_its_size_in_memory(tmp_path: Path, kind: str) -> None:
    """A gzipped file under 1 MB holding one 100 MB record: PubMed XML (a 200 MB element peaked
    at 2.3 GB before it was refused) and an OpenAlex line of 50 million inverted-index
    positions (400 MB: 2.5 GB, and accepted after 43 s)."""
    piece = (b"bomb " if kind == "pubmed" else b"0,") * (MB // 4)
    if kind == "pubmed":
        path = _gz(tmp_path / "pubmed.xml.gz", b'<?xml version="1.0"?>\n<PubmedArticleSet>',
                   b"<PubmedArticle><MedlineCitation><PMID>7</PMID><Article><Abstract><AbstractText>",
                   *[piece] * 400, b"</AbstractText></Abstract></Article></MedlineCitation></PubmedArticle>",
                   b"</PubmedArticleSet>\n", level=9)
    else:
        path = _gz(tmp_path / "works.jsonl.gz", b'{"id": "https://openalex.org/W7", "abstract_inverted_index": {"w": [',
                   *[piece] * 400, b"0]}}\n", level=9)
    assert path.stat().st_size < 1_000_000
    # run under a parent of its own, whose only child it is: that parent's children's peak is its peak
    measured = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", measured, RAG, "ingest", "-q", path.name], cwd=tmp_path,
                          env={**os.environ, "RAG_HOME": str(tmp_path / "home")}, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    *said_lines, peak = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    said = ["pubmed.xml.gz: 0 good and 1 bad record(s)", "<PubmedArticle> number 1 (PMID 7) is over 8 MB"] if kind == "pubmed" else [
        "works.jsonl.gz:1: 0 good and 1 bad record(s)", "line is over 8 MB: refused before it was read whole"]
    assert all(s in "\n".join(said_lines) for s in said), said_lines
    assert int(peak) / 1024 < 1000, peak  # the CLI's own imports included; the record alone took 1+ GB
