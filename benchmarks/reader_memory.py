"""Memory of the streamed readers: a generated PubMed XML file and an OpenAlex works file (both
gzipped, N records each, default 100,000) read through rag's readers (parse only, nothing
embedded), each in its own process; prints the peak RSS after 10,000 records and after all
of them, and the records per second. The readers hold one record at a time, so the two peaks
should be about equal whatever N is. Then the bombs: small gzipped files, one per reader,
each holding one record far over what a record may be (a 200 MB XML element, a 400 MB JSON
line, 200 million inverted-index positions, millions of JSON values or MEDLINE lines in one
record), each read through rag.corpus.read_file in its own process; prints the peak RSS, the
time and whether the file was refused. Not a test.

    .venv/bin/python benchmarks/reader_memory.py            # 100,000 records per format
    .venv/bin/python benchmarks/reader_memory.py --n 20000
    .venv/bin/python benchmarks/reader_memory.py --bombs    # the bombs only

The records are synthetic (seeded): abstracts of 150-250 words from a 5,000-word vocabulary,
3 authors, MeSH headings / concepts, DOIs; one PubMed article in 50 without an abstract, one
OpenAlex work in 50 with a null inverted index (counted and left out by the readers).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
MARK = 10_000


def _words(rng: random.Random, vocab: list[str], n: int) -> list[str]:
    return [rng.choice(vocab) for _ in range(n)]


def write_pubmed(path: Path, n: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE PubmedArticleSet PUBLIC '
                  '"-//NLM//DTD PubMedArticle, 1st January 2024//EN" '
                  '"https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_240101.dtd">\n<PubmedArticleSet>\n')
        for i in range(n):
            pmid = 30_000_000 + i
            body = "" if i % 50 == 49 else (
                "<Abstract>" + "".join(
                    f'<AbstractText Label="{label}">{escape(" ".join(_words(rng, vocab, rng.randint(50, 80))))}.</AbstractText>'
                    for label in ("BACKGROUND", "METHODS", "RESULTS")) + "</Abstract>")
            authors = "".join(f"<Author><LastName>L{rng.randint(0, 9999)}</LastName><ForeName>F{j}</ForeName></Author>"
                              for j in range(3))
            out.write(f"<PubmedArticle><MedlineCitation><PMID Version=\"1\">{pmid}</PMID><Article>"
                      f"<Journal><JournalIssue><PubDate><Year>{2000 + i % 24}</Year></PubDate></JournalIssue>"
                      f"<Title>Journal {i % 300}</Title></Journal>"
                      f"<ArticleTitle>Title {' '.join(_words(rng, vocab, 8))}</ArticleTitle>{body}"
                      f"<AuthorList>{authors}</AuthorList></Article><MeshHeadingList>"
                      f"<MeshHeading><DescriptorName>Mesh {i % 97}</DescriptorName></MeshHeading></MeshHeadingList>"
                      f"</MedlineCitation><PubmedData><ArticleIdList><ArticleId IdType=\"pubmed\">{pmid}</ArticleId>"
                      f"<ArticleId IdType=\"doi\">10.9999/pm.{pmid}</ArticleId></ArticleIdList></PubmedData>"
                      "</PubmedArticle>\n")
        out.write("</PubmedArticleSet>\n")


def write_openalex(path: Path, n: int, seed: int = 2) -> None:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for i in range(n):
            index: dict[str, list[int]] | None = None
            if i % 50 != 49:
                index = {}
                for pos, w in enumerate(_words(rng, vocab, rng.randint(150, 250))):
                    index.setdefault(w, []).append(pos)
            work = {"id": f"https://openalex.org/W{4_000_000_000 + i}", "doi": f"https://doi.org/10.9999/oa.{i}",
                    "display_name": "Title " + " ".join(_words(rng, vocab, 8)), "publication_year": 2000 + i % 24,
                    "authorships": [{"author": {"display_name": f"Author {rng.randint(0, 9999)}"}} for _ in range(3)],
                    "primary_location": {"source": {"display_name": f"Venue {i % 300}"}},
                    "concepts": [{"display_name": f"Concept {i % 97}"}], "abstract_inverted_index": index}
            out.write(json.dumps(work) + "\n")


MB = 1 << 20


def _gz_parts(path: Path, parts: list[tuple[bytes, int]]) -> None:
    """A gzip file of `parts`: each (bytes, times), written a piece at a time."""
    with gzip.open(path, "wb", compresslevel=9) as out:
        for piece, times in parts:
            for _ in range(times):
                out.write(piece)


def _filler(unit: bytes, size: int) -> tuple[bytes, int]:
    """`unit` repeated to about `size` bytes, as a 1 MB piece and a count."""
    piece = unit * (MB // len(unit))
    return piece, max(1, size // len(piece))


BOMBS: dict[str, tuple[str, Callable[[Path], None]]] = {}


def bomb(name: str, suffix: str) -> Callable[[Callable[[Path], None]], Callable[[Path], None]]:
    def register(write: Callable[[Path], None]) -> Callable[[Path], None]:
        BOMBS[name] = (suffix, write)
        return write
    return register


def _pubmed_abstract(path: Path, filler: tuple[bytes, int]) -> None:
    """One PubMed article whose abstract is `filler` (a piece and how many times)."""
    _gz_parts(path, [(b'<?xml version="1.0"?>\n<PubmedArticleSet><PubmedArticle><MedlineCitation>'
                      b"<PMID>1</PMID><Article><Abstract><AbstractText>", 1), filler,
                     (b"</AbstractText></Abstract></Article></MedlineCitation></PubmedArticle>"
                      b"</PubmedArticleSet>\n", 1)])


@bomb("PubMed XML: one 200 MB element", ".xml.gz")
def _pubmed_bomb(path: Path) -> None:
    _pubmed_abstract(path, _filler(b"bomb ", 200 * MB))


@bomb("PubMed XML: 2 million elements in one", ".xml.gz")
def _pubmed_many(path: Path) -> None:
    _pubmed_abstract(path, _filler(b"<i/>", 8 * MB))


@bomb("arXiv Atom feed: one 200 MB entry", ".xml.gz")
def _atom_bomb(path: Path) -> None:
    _gz_parts(path, [(b'<?xml version="1.0"?>\n<feed xmlns="http://www.w3.org/2005/Atom"><entry>'
                      b"<id>http://arxiv.org/abs/2301.00001v1</id><title>T</title><summary>", 1),
                     _filler(b"bomb ", 200 * MB), (b"</summary></entry></feed>\n", 1)])


@bomb("OpenAlex: one 400 MB line, 200 million positions", ".jsonl.gz")
def _openalex_bomb(path: Path) -> None:
    _gz_parts(path, [(b'{"id": "https://openalex.org/W1", "display_name": "T", '
                      b'"abstract_inverted_index": {"bomb": [', 1),
                     _filler(b"0,", 400 * MB), (b"0]}}\n", 1)])


@bomb("OpenAlex: 1 million positions in a 7 MB line", ".jsonl.gz")
def _openalex_positions(path: Path) -> None:
    _gz_parts(path, [(b'{"id": "https://openalex.org/W1", "display_name": "T", '
                      b'"abstract_inverted_index": {"bomb": [', 1),
                     _filler(b"1234567,", 7 * MB), (b"0]}}\n", 1)])


@bomb("Semantic Scholar: one 400 MB line", ".jsonl.gz")
def _s2_bomb(path: Path) -> None:
    _gz_parts(path, [(b'{"paperId": "p1", "title": "T", "abstract": "', 1),
                     _filler(b"bomb ", 400 * MB), (b'"}\n', 1)])


@bomb("Semantic Scholar: a 19 MB document of 5 million objects", ".json.gz")
def _s2_document(path: Path) -> None:
    _gz_parts(path, [(b'{"data": [\n{"paperId": "p1", "title": "T", "abstract": "A short abstract."},\n', 1),
                     _filler(b"{},\n", 19 * MB), (b"{}\n]}\n", 1)])


@bomb("OpenAlex: a line just under the caps (990,000 values)", ".jsonl.gz")
def _openalex_within(path: Path) -> None:
    _gz_parts(path, [(b'{"id": "https://openalex.org/W1", "display_name": "T", '
                      b'"abstract_inverted_index": {"A": [0], "short": [1], "abstract.": [2]}, "x": [', 1),
                     (b"{}," * 494_990, 1), (b"{}]}\n", 1)])


@bomb("CSL-JSON: one 400 MB line", ".json.gz")
def _csl_bomb(path: Path) -> None:
    _gz_parts(path, [(b'[{"type": "article-journal", "issued": {"date-parts": [[2020]]}, "title": "T", '
                      b'"abstract": "', 1), _filler(b"bomb ", 400 * MB), (b'"}]\n', 1)])


@bomb("JSON Lines: 5 million strings in a 19 MB line", ".jsonl.gz")
def _jsonl_values(path: Path) -> None:
    _gz_parts(path, [(b'{"id": "p1", "abstract": "A short abstract.", "authors": [', 1),
                     _filler(b'"ab",', 19 * MB), (b'"ab"]}\n', 1)])


@bomb("arXiv snapshot: one 400 MB line", ".json.gz")
def _snapshot_bomb(path: Path) -> None:
    first = {"id": "2301.00001", "title": "T", "abstract": "A short abstract.", "authors": "A. Author",
             "versions": [{"version": "v1", "created": "Mon, 2 Jan 2023 00:00:00 GMT"}]}
    _gz_parts(path, [(json.dumps(first).encode() + b'\n{"id": "2301.00002", "abstract": "', 1),
                     _filler(b"bomb ", 400 * MB), (b'"}\n', 1)])


@bomb("MEDLINE: 2.4 million lines in one record", ".nbib.gz")
def _medline_bomb(path: Path) -> None:
    _gz_parts(path, [(b"PMID- 1\nTI  - T\nAB  - A short abstract.\n", 1), _filler(b"AU  - x\n", 19 * MB)])


@bomb("RIS: 2.4 million lines in one record", ".ris.gz")
def _ris_bomb(path: Path) -> None:
    _gz_parts(path, [(b"TY  - JOUR\nTI  - T\nAB  - A short abstract.\n", 1), _filler(b"AU  - x\n", 19 * MB),
                     (b"ER  - \n", 1)])


@bomb("BibTeX: 2.4 million authors in one entry", ".bib.gz")
def _bibtex_bomb(path: Path) -> None:
    _gz_parts(path, [(b"@article{k, title = {T}, abstract = {A short abstract.}, author = {", 1),
                     _filler(b"a and ", 19 * MB), (b"a}}\n", 1)])


def measure_bomb(path: str) -> None:
    """In a child process: read the bomb through read_file, print the figures as JSON."""
    from rag.corpus import read_file
    from rag.errors import ParseError

    started = time.perf_counter()
    try:
        result = read_file(Path(path))
        outcome = (f"refused: {result.problems[0].message.split(': ', 1)[-1][:90]}" if result.problems
                   else f"accepted: {len(result.papers)} paper(s)")
    except ParseError as exc:
        outcome = f"refused: {exc.message.split(': ', 1)[-1][:90]}"
    print(json.dumps({"peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "seconds": time.perf_counter() - started, "outcome": outcome}))


def run_bombs(tmp: str) -> None:
    print(f"\n{'bomb':<58} {'file (gz)':>9} {'peak RSS':>10} {'seconds':>8}  outcome")
    for name, (suffix, write) in BOMBS.items():
        path = Path(tmp) / f"bomb{suffix}"
        write(path)
        out = subprocess.run([sys.executable, __file__, "--measure-bomb", str(path)], cwd=ROOT,
                             capture_output=True, text=True)
        if out.returncode:
            print(f"{name:<58} failed: {out.stderr.strip().splitlines()[-1]}")
            continue
        r = json.loads(out.stdout)
        print(f"{name:<58} {path.stat().st_size / 1024:>6.0f} KB {r['peak_mb']:>7.0f} MB {r['seconds']:>8.1f}  "
              f"{r['outcome']}", flush=True)
        path.unlink()


def measure(fmt: str, path: str) -> None:
    """In a child process: read the file through the reader, print the figures as JSON."""
    from rag.corpus import openalex, pubmed

    reader = pubmed if fmt == "pubmed" else openalex
    stream = reader.read(Path(path), path)
    started = time.perf_counter()
    at_mark = None
    count = 0
    for _ in stream.papers:
        count += 1
        if count == MARK:
            at_mark = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    seconds = time.perf_counter() - started
    print(json.dumps({"records": count, "left_out": sum(stream.left_out.values()),
                      "problems": len(stream.problems), "peak_mb_at_10k": at_mark,
                      "peak_mb_at_end": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "records_per_s": count / seconds}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--bombs", action="store_true", help="run the bombs only")
    parser.add_argument("--measure", nargs=2, metavar=("FORMAT", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--measure-bomb", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(*args.measure)
        return
    if args.measure_bomb:
        measure_bomb(args.measure_bomb)
        return
    with tempfile.TemporaryDirectory(prefix="rag-readers-") as tmp:
        if args.bombs:
            run_bombs(tmp)
            return
        files = {"pubmed": Path(tmp) / "pubmed.xml.gz", "openalex": Path(tmp) / "works.jsonl.gz"}
        write_pubmed(files["pubmed"], args.n)
        write_openalex(files["openalex"], args.n)
        print(f"{'format':<9} {'records':>8} {'left out':>9} {'file MB (gz)':>12} "
              f"{'peak RSS at 10k':>16} {'peak RSS at end':>16} {'records/s':>10}")
        for fmt, path in files.items():
            out = subprocess.run([sys.executable, __file__, "--measure", fmt, str(path)], cwd=ROOT,
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout)
            print(f"{fmt:<9} {r['records']:>8,} {r['left_out']:>9,} {path.stat().st_size / 2**20:>12.1f} "
                  f"{r['peak_mb_at_10k']:>13.1f} MB {r['peak_mb_at_end']:>13.1f} MB {r['records_per_s']:>10,.0f}")
        run_bombs(tmp)


if __name__ == "__main__":
    main()
