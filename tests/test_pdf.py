"""A paper's PDF becomes a paper: title, authors, year, DOI or arXiv id and abstract, from PDFs
of three typesetters (tests/data/pdf/make_pdfs.py: pdflatex two columns, LibreOffice Writer,
the fpdf2 library); a PDF with no text, no abstract or a broken body is named with the
reason, in a folder passed over, alone an error; every file of a folder is accounted for."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_rag

PDFS = ROOT / "tests" / "data" / "pdf"


@pytest.mark.parametrize(("name", "title", "authors", "starts", "ends", "ids"), [
    ("twocolumn.pdf", "Sparse Gradient Exchange for Federated Training on Phones",
     ["Amara Okafor", "Lukas Brandt", "Mei Tanaka"], "Federated learning trains one model across many phones",
     "from 9.1 to 2.3 seconds on a 4G link.", {}),
    ("journal.pdf", "Soil Moisture Predicts Early Wheat Yield Across Semi-Arid Farms",
     ["Priya Raman", "Tomás Ortega", "Hannah Keller"], "Farmers in semi-arid regions must decide",
     "can guide early management decisions.", {"doi": "10.5555/jfa.2024.0117", "year": 2024}),
    ("preprint.pdf", "How Often Do Generated Citations Hold?", ["Jonas Weber", "Ana Souza"],
     "Large language models answer questions about papers fluently",
     "nine in ten of the supported ones.", {"arxiv_id": "2409.01234", "year": 2024}),
])
def test_a_papers_pdf_reads_as_its_record(name: str, title: str, authors: list[str], starts: str,
                                          ends: str, ids: dict[str, Any]) -> None:
    from rag.corpus import read_file

    result = read_file(PDFS / name)
    (paper,) = result.papers
    assert result.layout == "pdf" and not result.problems
    assert paper.title == title and paper.authors == authors
    assert paper.abstract.startswith(starts) and paper.abstract.endswith(ends), paper.abstract
    assert "Introduction" not in paper.abstract and "Keywords" not in paper.abstract
    for field, value in ids.items():
        assert getattr(paper, field) == value, field


@pytest.mark.parametrize(("name", "says"), [
    ("scan.pdf", "no text to read"), ("notes.pdf", "no abstract found"), ("truncated.pdf", "not a readable PDF"),
])
def test_a_pdf_without_a_paper_is_named_with_the_reason(tmp_path: Path, name: str, says: str) -> None:
    done = run_rag("ingest", str(PDFS / name), cwd=tmp_path, env={"RAG_HOME": str(tmp_path / "home")})
    assert done.returncode == 2 and name in done.stderr and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_hostile_pdf_is_refused_while_it_is_read(tmp_path: Path) -> None:
    from rag.corpus import read_file
    from rag.errors import ParseError

    ops = b"BT /F1 1 Tf " + b"(x) Tj " * 400_000 + b"ET"  # 400,000 characters on one page
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n" % len(ops) + ops + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    body, offsets = b"%PDF-1.4\n", []
    for i, obj in enumerate(objects, 1):
        offsets.append(len(body))
        body += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(body)
    body += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    body += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    body += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    (tmp_path / "dense.pdf").write_bytes(body)
    started = time.monotonic()
    with pytest.raises(ParseError, match="dense.pdf.*over 60,000 characters"):
        read_file(tmp_path / "dense.pdf")
    assert time.monotonic() - started < 30


def test_a_folder_of_pdfs_and_a_bib_is_read_and_every_file_accounted_for(tmp_path: Path) -> None:
    library = tmp_path / "library"
    library.mkdir()
    for name in ("twocolumn.pdf", "journal.pdf", "preprint.pdf", "scan.pdf"):
        (library / name).write_bytes((PDFS / name).read_bytes())
    (library / "notes.docx").write_bytes(b"PK\x03\x04 not read")
    # the journal article again, from a reference manager's export: one paper, merged by DOI
    (library / "refs.bib").write_text(
        "@article{raman2024soil,\n  title = {Soil Moisture Predicts Early Wheat Yield Across Semi-Arid Farms},\n"
        "  author = {Raman, Priya and Ortega, Tom{\\'a}s and Keller, Hannah},\n  year = {2024},\n"
        "  journal = {Journal of Field Agronomy},\n  doi = {10.5555/jfa.2024.0117},\n"
        "  abstract = {Farmers in semi-arid regions must decide on fertiliser weeks before a wheat crop "
        "shows how it will yield. We measured soil moisture at three depths on 214 farms.}\n}\n")
    env = {"RAG_HOME": str(tmp_path / "home")}
    done = run_rag("ingest", str(library), "--json", "--index", "mine", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["papers"] == 3 and report["merged"] == 1, report
    not_read = {Path(u["path"]).name: u["reason"] for u in report["not_read"]}
    assert set(not_read) == {"scan.pdf", "notes.docx"}, not_read
    assert "no text" in not_read["scan.pdf"] and "not read" in not_read["notes.docx"]
    assert "scan.pdf" in done.stderr and "notes.docx" in done.stderr
    listed = run_rag("papers", "--json", "--index", "mine", cwd=tmp_path, env=env)
    papers = {p["title"]: p for p in json.loads(listed.stdout)["papers"]}
    assert papers["Soil Moisture Predicts Early Wheat Yield Across Semi-Arid Farms"]["venue"] == \
        "Journal of Field Agronomy"  # the .bib's field, merged into the PDF's paper
    asked = run_rag("ask", "--llm", "none", "--json", "--index", "mine",
                    "How many fewer bytes does SparseX send than full exchange?", cwd=tmp_path, env=env)
    answer = json.loads(asked.stdout)
    assert "42 times fewer bytes" in answer["answer"] and answer["citations"], answer["answer"]
