"""Make the test PDFs of tests/test_pdf.py from their sources here, with three typesetters:
pdflatex (twocolumn.tex), LibreOffice Writer (journal.html) and the fpdf2 library (the rest,
below). Run from this folder: python make_pdfs.py (needs texlive-latex-base,
texlive-fonts-recommended, libreoffice-writer-nogui and `pip install fpdf2`). The PDFs are
committed; their text is the authors' of these tests, made up for them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from fpdf import FPDF

HERE = Path(__file__).resolve().parent

PREPRINT = ("Large language models answer questions about papers fluently, but their answers cite "
            "sources that do not say what they claim. We study how often a citation in a generated "
            "answer is supported by the abstract it points to, across four open models and 1,200 "
            "questions. Between 18% and 41% of cited sentences are not supported, and a simple check "
            "that compares each sentence with its cited abstract removes most of them while keeping "
            "nine in ten of the supported ones.")


def latex() -> None:
    for _ in range(2):
        subprocess.run(["pdflatex", "-interaction=nonstopmode", "twocolumn.tex"], cwd=HERE, check=True,
                       capture_output=True)
    for ext in ("aux", "log"):
        (HERE / f"twocolumn.{ext}").unlink(missing_ok=True)


def libreoffice() -> None:
    # imported as a Writer document (Writer/Web's export starts with an empty page)
    subprocess.run(["soffice", "--headless", "--infilter=HTML (StarWriter)", "--convert-to", "pdf",
                    "journal.html"], cwd=HERE, check=True, capture_output=True)


def preprint() -> None:
    """A preprint with no "Abstract" heading: the abstract is the paragraph after the authors."""
    pdf = FPDF()
    pdf.set_title("How Often Do Generated Citations Hold?")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 18)
    pdf.multi_cell(0, 9, "How Often Do Generated Citations Hold?", align="C", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 6, "Jonas Weber, Ana Souza", align="C", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 8)
    pdf.multi_cell(0, 5, "arXiv:2409.01234v2 [cs.CL] 3 Sep 2024", align="C", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.set_font("Helvetica", "", 10)
    pdf.multi_cell(0, 5, PREPRINT, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.set_font("Helvetica", "B", 12)
    pdf.multi_cell(0, 6, "1 Introduction", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 10)
    pdf.multi_cell(0, 5, "Citations are how a reader checks a claim. " * 6, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(HERE / "preprint.pdf"))


def no_text() -> None:
    """A scan: a page with a picture of text and no text."""
    pdf = FPDF()
    pdf.add_page()
    for y in range(20, 260, 8):
        pdf.rect(20, y, 170, 3, style="F")
    pdf.output(str(HERE / "scan.pdf"))


def no_abstract() -> None:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.cell(0, 10, "Meeting notes, 12 March")
    pdf.ln(12)
    pdf.set_font("Helvetica", "", 10)
    for line in ("Agenda: budget, hiring, the lab move.", "Next meeting in two weeks.", "Action items below."):
        pdf.cell(0, 6, line)
        pdf.ln(7)
    pdf.output(str(HERE / "notes.pdf"))


if __name__ == "__main__":
    if shutil.which("pdflatex"):
        latex()
    if shutil.which("soffice"):
        libreoffice()
    preprint()
    no_text()
    no_abstract()
    data = (HERE / "preprint.pdf").read_bytes()
    (HERE / "truncated.pdf").write_bytes(data[: len(data) // 3])
