"""Memory of the streamed readers: a generated PubMed XML file and an OpenAlex works file (both
gzipped, N records each, default 100,000) read through rag's readers (parse only, nothing
embedded), each in its own process; prints the peak RSS after 10,000 records and after all
of them, and the records per second. The readers hold one record at a time, so the two peaks
should be about equal whatever N is. Not a test.

    .venv/bin/python benchmarks/reader_memory.py            # 100,000 records per format
    .venv/bin/python benchmarks/reader_memory.py --n 20000

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
    parser.add_argument("--measure", nargs=2, metavar=("FORMAT", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(*args.measure)
        return
    with tempfile.TemporaryDirectory(prefix="rag-readers-") as tmp:
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


if __name__ == "__main__":
    main()
