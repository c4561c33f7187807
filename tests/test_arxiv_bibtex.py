"""The arXiv metadata snapshot and BibTeX readers: golden records from files written for the
traps real dumps have (old-style ids, versions out of order, LaTeX accents and macros, hard
line breaks, nested braces, @string macros and `#` concatenation, comments, entries without
an abstract), the restriction while reading (--category/--since), and streaming.

The expected values were derived by hand from tests/data/formats/*, not from the reader.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import pytest

from rag.corpus import Restrict, read_file
from rag.corpus import reading as corpus
from rag.errors import InputError, ParseError
from rag.export import export
from tests.conftest import run_rag

DATA = Path(__file__).resolve().parent / "data" / "formats"
SNAPSHOT = DATA / "arxiv_snapshot.json"
BIB = DATA / "library.bib"
FIELDS = ["paper_id", "arxiv_id", "title", "authors", "abstract", "year", "date", "doi",
          "journal_ref", "venue", "comments", "categories"]

SNAPSHOT_GOLDEN = [
    {
        "paper_id": "0704.0001", "arxiv_id": "0704.0001",
        # the title's hard line break and its two-space indent are one space
        "title": "Calculation of prompt diphoton production cross sections at Tevatron and LHC energies",
        # from authors_parsed ([last, first, suffix]) as "First Last"; Bal\'azs decoded
        "authors": ["C. Balázs", "E. L. Berger", "P. M. Nadolsky", "C.-P. Yuan"],
        "abstract": "A fully differential calculation in perturbative quantum chromodynamics is "
                    "presented for the production of massive photon pairs at hadron colliders. All "
                    "next-to-leading order perturbative contributions are included.",
        # v1's date, not v2's (2007-07-24) nor update_date (2008-11-13)
        "year": 2007, "date": "2007-04-02", "doi": "10.1103/PhysRevD.76.013009",
        "journal_ref": "Phys.Rev.D76:013009,2007", "venue": None,
        "comments": ["37 pages, 15 figures; published version"], "categories": ["hep-ph"],
    },
    {
        "paper_id": "math/0703001", "arxiv_id": "math/0703001",  # old-style id
        "title": "On the Schrödinger equation with O(n²) terms",
        "authors": ["Jörg Müller", "Anna van der Berg", "Martin Luther King Jr."],
        # \emph dropped, a bare % and ~ kept as the author meant them, math made readable
        "abstract": "We study the Schrödinger equation on compact manifolds. About 10% of the "
                    "cases need ~100 iterations, and α² stays bounded.",
        # versions listed v2 first: the date is v1's
        "year": 2007, "date": "2007-03-01", "doi": None, "journal_ref": None, "venue": None,
        "comments": [], "categories": ["math.AP", "math-ph"],
    },
    {
        "paper_id": "2305.12345", "arxiv_id": "2305.12345",
        "title": "FlexPipe: Pipelined training on elastic GPU clusters",
        "authors": ["Ada Lovelace", "Alan Turing"],
        "abstract": "We present FlexPipe, a system for pipelined training on elastic GPU clusters. "
                    "FlexPipe reaches 1.5x the throughput of static pipelines.",
        "year": 2023, "date": "2023-05-20", "doi": None, "journal_ref": None,
        "venue": "MLSYS",  # from the comments, as for every other layout
        "comments": ["Accepted at MLSys 2024"], "categories": ["cs.DC", "cs.LG"],
    },
    {
        "paper_id": "2401.00002", "arxiv_id": "2401.00002", "title": "Compilers for tensor programs",
        "authors": ["Grace Hopper"], "abstract": "A compiler for tensor programs that fuses operators.",
        "year": 2024, "date": "2024-01-01", "doi": None, "journal_ref": None, "venue": None,
        "comments": [], "categories": ["cs.PL"],
    },
]

BIB_GOLDEN = [
    {
        "paper_id": "fast-ber-scheduling-of-gpu-clusters-99b353", "arxiv_id": None,
        # protective and nested braces gone, {\"U} decoded
        "title": "Fast Über-Scheduling of GPU Clusters with Nested Braces",
        # "Last, First and ..." with accents in braces, \'{\i} included
        "authors": ["Jörg Müller", "Anna van der Berg", "José García"],
        "abstract": "We present Sched, a scheduler for GPU clusters. It improves throughput by 3× "
                    "over naïve baselines on 10% of the jobs.",
        "year": 2023, "date": None, "doi": "10.14778/3574245.3574270",  # the URL prefix dropped
        "journal_ref": None, "venue": "Proc. VLDB Endow. 16(4)",  # @string # " 16(4)"
        "comments": [], "categories": [],
    },
    {
        "paper_id": "2305.00001", "arxiv_id": "2305.00001",  # eprint with archivePrefix arXiv
        "title": "Retrieval with BM25 and Dense Vectors",
        "authors": ["Alice Smith", "Bob Jones"],  # "and others" is no author
        "abstract": "Hybrid retrieval fuses BM25 and dense rankings. We measure it on five benchmarks.",
        "year": 2023, "date": None, "doi": None, "journal_ref": None,
        "venue": "Proceedings of the 61st Annual Meeting of the ACL",  # booktitle = acl (@STRING)
        "comments": [], "categories": ["cs.CL"],
    },
    {
        "paper_id": "2402.01234", "arxiv_id": "2402.01234",  # Google Scholar's journal field
        "title": "Mixture-of-experts training at scale", "authors": ["Wei Zhang", "Na Li"],
        "abstract": "We train mixture-of-experts models on 1,024 GPUs with expert parallelism.",
        "year": 2024, "date": None, "doi": None, "journal_ref": None,
        "venue": None,  # "arXiv preprint arXiv:…" is no venue
        "comments": [], "categories": [],
    },
]


def fields(result: corpus.FileResult) -> list[dict[str, object]]:
    return [{k: p.to_dict()[k] for k in FIELDS} for p in result.papers]


def test_snapshot_records_golden() -> None:
    result = read_file(SNAPSHOT)
    assert result.layout == "arxiv-snapshot"
    assert result.problems == [] and result.left_out == {}
    assert fields(result) == SNAPSHOT_GOLDEN


def test_bibtex_entries_golden_and_entries_without_abstract_counted() -> None:
    result = read_file(BIB)
    assert result.layout == "bibtex"
    assert result.problems == []
    # the commented-out entry (% lines) and the one inside @comment are not papers; the @book
    # without an abstract and the @misc with a blank one are left out and counted
    assert result.left_out == {"BibTeX entries without an abstract": 2}
    assert fields(result) == BIB_GOLDEN


def test_snapshot_and_bibtex_names_and_journals_export_as_their_source_had_them() -> None:
    """authors_parsed's [last, first, suffix] and BibTeX's name parts are kept for export; a
    BibTeX `journal` makes an @article, a `booktitle` an @inproceedings."""
    snapshot = {p.paper_id: p for p in read_file(SNAPSHOT).papers}
    bib = export([snapshot["math/0703001"]], "bibtex")
    assert "@misc{muller2007schrodinger," in bib
    assert "author = {M{\\\"u}ller, J{\\\"o}rg and van der Berg, Anna and King, Jr., Martin Luther}" in bib
    assert json.loads(export([snapshot["math/0703001"]], "csl-json"))[0]["author"][2] == {
        "family": "King", "given": "Martin Luther", "suffix": "Jr."}
    library = export(read_file(BIB).papers[:2], "bibtex")
    assert "@article{muller2023fast," in library and "journal = {Proc. VLDB Endow. 16(4)}" in library
    assert "@inproceedings{smith2023retrieval," in library and "booktitle = {Proceedings of the 61st" in library


def test_maths_in_a_snapshot_and_a_bibtex_entry_reads_as_maths(tmp_path: Path) -> None:
    snapshot = tmp_path / "snap.jsonl"
    snapshot.write_text(json.dumps({
        "id": "math/0703001", "title": "On the Schr\\\"odinger equation in $\\mathbb{R}^3$",
        "abstract": "We study $i\\partial_t u = -\\Delta u$ and solve it in $O(n\\log n)$ time.",
        "versions": [{"version": "v1", "created": "Thu, 1 Mar 2007 09:30:00 GMT"}],
        "authors_parsed": [["Dirac", "P.", ""]]}) + "\n")
    [paper] = read_file(snapshot).papers
    assert paper.title == "On the Schrödinger equation in ℝ³"
    assert paper.abstract == "We study i∂_t u = -Δu and solve it in O(n log n) time."
    bib = tmp_path / "refs.bib"
    bib.write_text("@article{a, title = {A $\\frac{1}{2}$-approximation in $O(\\sqrt{n})$ rounds},\n"
                   " abstract = {Gradients $\\nabla f$ of $\\mathcal{O}(1)$ cost.}}\n")
    [paper] = read_file(bib).papers
    assert (paper.title, paper.abstract) == ("A 1/2-approximation in O(√n) rounds",
                                             "Gradients ∇f of O(1) cost.")


def test_bibtex_crossref_gives_an_entry_the_volumes_venue_and_year(tmp_path: Path) -> None:
    bib = tmp_path / "dblp.bib"  # DBLP's export: each paper crossrefs its proceedings
    bib.write_text("""@inproceedings{DBLP:conf/mlsys/ZhangL23,
  crossref  = {DBLP:conf/mlsys/2023},
  author    = {Zhang, Wei and Li, Na},
  title     = {Pipeline Parallelism with Adaptive Micro-batching},
  abstract  = {We introduce AdaPipe, which adapts micro-batch size per stage.}
}
@inproceedings{DBLP:conf/mlsys/Other23,
  crossref  = {dblp:conf/mlsys/2023},
  title     = {Another paper of the volume},
  author    = {Okafor, Chidi},
  year      = {2022},
  abstract  = {A second paper, its own year kept.}
}
@inproceedings{DBLP:conf/osdi/X22,
  crossref  = {DBLP:conf/osdi/2022},
  title     = {A volume with a title only},
  abstract  = {Its venue is the volume's title.}
}
@proceedings{DBLP:conf/mlsys/2023,
  title     = {Proceedings of Machine Learning and Systems 5},
  booktitle = {Proceedings of Machine Learning and Systems 5},
  editor    = {Song, Dawn},
  publisher = {mlsys.org},
  year      = {2023},
  doi       = {10.5555/mlsys2023},
  url       = {https://proceedings.mlsys.org/volume5}
}
@proceedings{DBLP:conf/osdi/2022,
  title     = {16th USENIX Symposium on Operating Systems Design and Implementation},
  year      = {2022}
}
@misc{other, title = {An entry without an abstract}}
""")
    result = read_file(bib)
    assert [(p.title, p.venue, p.year, p.doi) for p in result.papers] == [
        ("Pipeline Parallelism with Adaptive Micro-batching", "Proceedings of Machine Learning and Systems 5", 2023, None),
        ("Another paper of the volume", "Proceedings of Machine Learning and Systems 5", 2022, None),
        ("A volume with a title only", "16th USENIX Symposium on Operating Systems Design and Implementation",
         2022, None),
    ]  # the volume's own DOI is not theirs: it would make the two papers one
    assert result.left_out == {"BibTeX entries without an abstract": 1}  # not the two volumes


@pytest.mark.parametrize(("name", "layout"), [("arxiv_snapshot.json", "arxiv-snapshot"), ("library.bib", "bibtex")])
def test_a_gzipped_snapshot_or_bibtex_file_reads_as_the_plain_one(tmp_path: Path, name: str, layout: str) -> None:
    gz = tmp_path / (name + ".gz")
    gz.write_bytes(gzip.compress(b"\xef\xbb\xbf" + (DATA / name).read_bytes()))  # a BOM inside too
    plain, result = read_file(DATA / name), read_file(gz)
    assert (result.layout, result.problems, result.left_out) == (layout, [], plain.left_out)
    assert fields(result) == fields(plain)
    assert {gz} <= set(corpus.expand_paths([tmp_path]))  # a folder's .gz files are read too


def test_a_damaged_or_binary_gzip_says_so(tmp_path: Path) -> None:
    cut = tmp_path / "snapshot.json.gz"
    cut.write_bytes(gzip.compress(SNAPSHOT.read_bytes() * 200)[:3000])
    with pytest.raises(ParseError, match="damaged gzip file") as damaged:
        read_file(cut)
    assert damaged.value.hint == "download the file again"
    archive = tmp_path / "refs.tar.gz"
    archive.write_bytes(gzip.compress(b"refs.bib\x00\x00\x00" + BIB.read_bytes()))
    with pytest.raises(ParseError, match="gzip-compressed file whose content is binary") as binary:
        read_file(archive)
    assert "unpack it first" in binary.value.hint


def test_unknown_layout_hint_lists_the_library_formats(tmp_path: Path) -> None:
    letter = tmp_path / "letter.txt"
    letter.write_text("Dear editor,\nplease find attached our paper.\n")
    with pytest.raises(ParseError, match="content is in no known layout") as unknown:
        read_file(letter)
    for fmt in ("BibTeX", "Zotero", "PubMed", "OpenAlex", "Semantic Scholar", "gzipped"):
        assert fmt in unknown.value.hint


def test_bibtex_found_in_a_folder_and_detected_from_content(tmp_path: Path) -> None:
    (tmp_path / "refs.bib").write_bytes(BIB.read_bytes())
    (tmp_path / "exported.txt").write_bytes(BIB.read_bytes())  # the name decides nothing
    found = corpus.expand_paths([tmp_path])
    assert sorted(p.name for p in found) == ["exported.txt", "refs.bib"]
    assert {read_file(p).layout for p in found} == {"bibtex"}


def test_generic_json_lines_with_an_id_stay_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"id": "x1", "title": "T", "abstract": "An abstract."}) + "\n")
    assert read_file(path).layout == "jsonl"


def test_unreadable_bibtex_entry_is_reported_with_its_line_and_the_rest_kept(tmp_path: Path) -> None:
    path = tmp_path / "bad.bib"
    path.write_text("@article{a,\n title={Good},\n abstract={Fine one.}\n}\n\n"
                    "@article{b,\n title={Broken {brace},\n abstract={x}\n\n"
                    "@article{c, title={C}, abstract={Third.}}\n")
    result = read_file(path)
    assert [p.title for p in result.papers] == ["Good", "C"]
    [problem] = result.problems
    assert problem.line == 6 and "braces" in str(problem)


def test_zotero_s_escaped_less_than_greater_than_and_bar_read_as_written(tmp_path: Path) -> None:
    """Zotero's BibTeX export writes every <, > and | as {\\textless}, {\\textgreater} and
    {\\textbar} (Mendeley's too), JabRef "−" as {\\textminus}; pylatexenc dropped them: "p < 0.05"
    read "p 0.05", ">90%" "90%", "−80 °C" "80 °C"."""
    path = tmp_path / "My Library.bib"
    path.write_text("\n@article{okafor_statins_2019,\n\ttitle = {Statins in adults {\\textgreater}75 years},\n"
                    "\tabstract = {Events fell (p {\\textless} 0.001) in {\\textgreater}90\\% of sites; "
                    "scores {\\textbar}x{\\textbar} {\\textless}= 2 at {\\textminus}80 {\\textdegree}C in "
                    "a{\\textunderscore}b.},\n"
                    "\tauthor = {Okafor, Chidi},\n\tyear = {2019},\n}\n")
    [paper] = read_file(path).papers
    assert paper.title == "Statins in adults >75 years"
    assert paper.abstract == "Events fell (p < 0.001) in >90% of sites; scores |x| <= 2 at −80 °C in a_b."


def test_zotero_s_escaped_middle_dot_reads_as_a_middle_dot(tmp_path: Path) -> None:
    """Zotero writes "·" as {\\textperiodcentered}; pylatexenc made it "˙" (U+02D9, a dot
    above), so "5 µg/kg·day" was indexed as "kg˙day", a word no search for kg·day finds."""
    path = tmp_path / "My Library.bib"
    path.write_text("@article{z,\n\ttitle = {Dosing},\n\tabstract = {Doses of 5 {\\textmu}g/kg{\\textperiodcentered}day"
                    " were given.},\n\tyear = {2021},\n}\n")
    [paper] = read_file(path).papers
    assert paper.abstract == "Doses of 5 µg/kg·day were given."


def test_textsuperscript_and_textsubscript_are_raised_and_lowered(tmp_path: Path) -> None:
    """Zotero writes a title's <sup> and <sub> as \\textsuperscript{} and \\textsubscript{};
    pylatexenc flattened them, so "10\\textsuperscript{-3} bar" read "10-3 bar", another number."""
    path = tmp_path / "My Library.bib"
    path.write_text("@article{lee_co2_2020,\n\ttitle = {{CO}\\textsubscript{2} uptake at 10\\textsuperscript{-3} bar "
                    "and {Ca}\\textsuperscript{2+} sites},\n\tabstract = {Sorbents took up CO\\textsubscript{2}"
                    " at x\\textsuperscript{ab}.},\n\tauthor = {Lee, Kim},\n\tyear = {2020},\n}\n")
    [paper] = read_file(path).papers
    assert paper.title == "CO₂ uptake at 10⁻³ bar and Ca²⁺ sites"
    assert paper.abstract == "Sorbents took up CO₂ at x^(ab)."


def test_a_biblatex_journaltitle_is_the_journal(tmp_path: Path) -> None:
    """Zotero's BibLaTeX export (and Better BibLaTeX) names the journal `journaltitle`: the
    paper had no venue, matched no --venue filter and exported as @misc."""
    path = tmp_path / "My Library.bib"
    path.write_text("\n@article{muller_pre-training_2021,\n\ttitle = {Pre-training for solvers},\n"
                    "\tdoi = {10.5555/jmlr.2021.001},\n\tabstract = {We study pre-training of solvers.},\n"
                    "\tjournaltitle = {Journal of Machine Learning Research},\n\tshortjournal = {J. Mach. Learn. Res.},\n"
                    "\tauthor = {Müller, Jürgen},\n\tdate = {2021-03-15},\n}\n", encoding="utf-8")
    [paper] = read_file(path).papers
    assert (paper.venue, paper.venue_kind, paper.year) == ("Journal of Machine Learning Research", "journal", 2021)
    assert "@article{" in export([paper], "bibtex")
    assert "journal = {Journal of Machine Learning Research}" in export([paper], "bibtex")


def test_capitalised_field_names_of_bibdesk_and_jabref_are_read(tmp_path: Path) -> None:
    """BibDesk and JabRef 3 write `Author = {...}`, `Title`, `Journal`: bibtexparser's name
    splitter looks for `author` only, so all the authors came out as one garbled name."""
    path = tmp_path / "library.bib"
    path.write_text("%% This BibTeX bibliography file was created using BibDesk.\n\n"
                    "@article{Smith:2020aa,\n\tAbstract = {We study caching at scale.},\n"
                    "\tAuthor = {Smith, John and M{\\\"u}ller, J{\\\"u}rgen and van der Berg, Piet},\n"
                    "\tJournal = {Journal of Caching},\n\tTitle = {Caching at Scale},\n\tYear = {2020},\n"
                    "\tBdsk-Url-1 = {https://doi.org/10.1000/xyz123}}\n", encoding="utf-8")
    [paper] = read_file(path).papers
    assert paper.authors == ["John Smith", "Jürgen Müller", "Piet van der Berg"]
    assert (paper.title, paper.venue, paper.year) == ("Caching at Scale", "Journal of Caching", 2020)


def test_better_biblatex_extended_names_are_read(tmp_path: Path) -> None:
    """Better BibLaTeX writes a name with a particle in biblatex's extended format
    (family=Gogh, given=Vincent, prefix=van, useprefix=true); bibtexparser refused the entry
    ("too many commas"), so the paper was lost and the ingest exited 2."""
    path = tmp_path / "My Library.bib"
    path.write_text("@article{goghStarryNights2020,\n  title = {Starry Nights},\n"
                    "  author = {family=Gogh, given=Vincent, prefix=van, useprefix=true and Doe, Jane and "
                    "family=Berg, given=Piet, prefix={van der}, useprefix=false and "
                    "family={M{\\\"u}ller}, given={J{\\\"u}rgen}, suffix=Jr.},\n"
                    "  date = {2020},\n  abstract = {We paint.}\n}\n", encoding="utf-8")
    result = read_file(path)
    assert not result.problems
    [paper] = result.papers
    assert paper.authors == ["Vincent van Gogh", "Jane Doe", "Piet van der Berg", "Jürgen Müller Jr."]
    assert "author = {van Gogh, Vincent and Doe, Jane and van der Berg, Piet and " in export([paper], "bibtex")


def _snapshot(tmp_path: Path, arxiv_id: str, title: str, abstract: str) -> Path:
    """A one-record arXiv metadata snapshot (its JSON lines, as Kaggle's file holds them)."""
    snapshot = tmp_path / "snap.jsonl"
    snapshot.write_text(json.dumps({
        "id": arxiv_id, "title": title, "abstract": abstract,
        "versions": [{"version": "v1", "created": "Mon, 2 Jan 2023 09:30:00 GMT"}],
        "authors_parsed": [["Dirac", "P.", ""]]}) + "\n")
    return snapshot


def test_a_bare_ampersand_stays_an_ampersand(tmp_path: Path) -> None:
    """pylatexenc took a bare & for a table's column separator and made it spaces: an arXiv
    abstract's "Q&A" (beside any accent or brace) read "Q A", a BibTeX journal "Science &
    Justice" lost it, and Crossref's "&amp;" and "&lt;" came out as "amp;" and "lt;"."""
    snapshot = _snapshot(tmp_path, "2301.00001", "Q&A over Schr\\\"odinger equations",
                         "We build a Q&A system for R\\&D on Schr\\\"odinger equations.")
    [paper] = read_file(snapshot).papers
    assert (paper.title, paper.abstract) == ("Q&A over Schrödinger equations",
                                             "We build a Q&A system for R&D on Schrödinger equations.")
    bib = tmp_path / "refs.bib"
    bib.write_text("@article{a, title = {Trace evidence: Tom &amp; Jerry}, journal = {Science & Justice},\n"
                   " year = {2020}, abstract = {Fibres matched (p &lt; 0.05) in {M}unich &#x2013; and Paris.}}\n")
    [paper] = read_file(bib).papers
    assert (paper.title, paper.venue, paper.abstract) == (
        "Trace evidence: Tom & Jerry", "Science & Justice", "Fibres matched (p < 0.05) in Munich – and Paris.")


def test_an_href_link_is_read_as_its_text_and_address(tmp_path: Path) -> None:
    """pylatexenc's text for \\href reads two arguments its parser never gives it: a snapshot
    record or BibTeX entry with a link was "LaTeX that cannot be read" and left out."""
    snapshot = _snapshot(tmp_path, "2301.00002", "Fast Schr\\\"odinger solvers",
                         "Code is at \\href{https://github.com/x/y_z}{this https URL}.")
    result = read_file(snapshot)
    assert not result.problems
    assert result.papers[0].abstract == "Code is at this https URL (https://github.com/x/y_z)."
    bib = tmp_path / "refs.bib"
    bib.write_text("@article{a, title = {Solvers}, abstract = {See \\href{https://x.org/d}{the data}.}}\n")
    [paper] = read_file(bib).papers
    assert paper.abstract == "See the data (https://x.org/d)."


def test_typewriter_sans_and_boxed_names_are_kept(tmp_path: Path) -> None:
    """pylatexenc dropped \\texttt{}, \\textsf{}, \\textup{}, \\textmd{} and \\mbox{} with what they
    hold: "We release \\texttt{torchgpipe}" read "We release", a BibTeX title lost its name."""
    snapshot = _snapshot(tmp_path, "2301.00003", "\\texttt{torchgpipe}: pipelines for Schr\\\"odinger solvers",
                         "We release \\texttt{torchgpipe} and \\textsf{GPipe}, built with \\LaTeX{} docs.")
    [paper] = read_file(snapshot).papers
    assert (paper.title, paper.abstract) == ("torchgpipe: pipelines for Schrödinger solvers",
                                             "We release torchgpipe and GPipe, built with LaTeX docs.")
    bib = tmp_path / "refs.bib"
    bib.write_text("@article{a, title = {\\texttt{DeepSpeed}: training \\mbox{GPT-3} \\textup{fast}},\n"
                   " abstract = {\\texorpdfstring{$\\mathcal{O}(n)$}{O(n)} memory with \\textmd{ZeRO}.}}\n")
    [paper] = read_file(bib).papers
    assert (paper.title, paper.abstract) == ("DeepSpeed: training GPT-3 fast", "O(n) memory with ZeRO.")


def test_a_bibtex_entry_missing_a_comma_between_fields_is_refused_with_its_line(tmp_path: Path) -> None:
    """A hand-edited entry with no comma after a field: bibtexparser read the next field into
    it (title "First Paper author = Doe, Jane", no authors; a bare year swallowed them too)
    without a word. BibTeX refuses it; so does rag, naming the field, and keeps the rest."""
    path = tmp_path / "refs.bib"
    path.write_text("@article{a2021,\n  title = {First Paper}\n  author = {Doe, Jane},\n"
                    "  abstract = {First abstract.},\n}\n\n"
                    "@article{b2022,\n  title = {Second Paper},\n  year = 2022\n  author = {Roe, Rick},\n"
                    "  abstract = {Second abstract, where x = 5 on a {line\n  n = 2} of its own.},\n}\n\n"
                    "@article{c2023, title = \"Third\" # { Paper}, author = {Poe, Pat},\n"
                    "  abstract = \"Third: a = b\"}\n")
    result = read_file(path)
    assert [(p.title, p.authors) for p in result.papers] == [("Third Paper", ["Pat Poe"])]
    first, second = result.problems
    assert (first.line, second.line) == (1, 7)
    assert "no comma after field `title` (line 2), before field `author`" in str(first)
    assert "no comma after field `year` (line 9), before field `author`" in str(second)
    assert "put a comma after each field's value" in str(first.hint)


@pytest.mark.parametrize(("categories", "since", "kept", "outside"), [
    (["cs.DC"], None, ["2305.12345"], 3),
    (["cs"], None, ["2305.12345", "2401.00002"], 2),  # an archive takes all of its categories
    (["math-ph", "hep-ph"], None, ["0704.0001", "math/0703001"], 2),
    ([], "2024", ["2401.00002"], 3),  # 2305.12345's v3 is from 2024, its v1 is not
    ([], "2007-04", ["0704.0001", "2305.12345", "2401.00002"], 1),
    (["cs"], "2023-06", ["2401.00002"], 3),
])
def test_snapshot_restricted_while_reading(categories: list[str], since: str | None,
                                           kept: list[str], outside: int) -> None:
    result = read_file(SNAPSHOT, Restrict.parse(categories, since))
    assert [p.paper_id for p in result.papers] == kept
    assert sum(result.left_out.values()) == outside


def test_bibtex_restricted_by_year_and_primary_class() -> None:
    result = read_file(BIB, Restrict.parse(["cs.CL"], "2023"))
    assert [p.paper_id for p in result.papers] == ["2305.00001"]


@pytest.mark.parametrize("since", ["23", "2023/06", "last year"])
def test_bad_since_is_input_error(since: str) -> None:
    with pytest.raises(InputError, match="not a date"):
        Restrict.parse([], since)


def _big_snapshot(path: Path, n: int) -> None:
    padding = "word " * 300  # about 1.5 kB of abstract per record
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({
                "id": f"2301.{i:05d}", "title": f"Paper {i}", "abstract": f"Abstract {i}. {padding}",
                "categories": "cs.DC" if i % 1000 == 0 else "hep-th",
                "versions": [{"version": "v1", "created": "Mon, 2 Jan 2023 10:00:00 GMT"}],
                "authors_parsed": [["Doe", "Jane", ""]]}) + "\n")


def test_snapshot_is_streamed_past_the_file_size_limit(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "arxiv-metadata-oai-snapshot.json"
    _big_snapshot(path, 5000)  # ~8 MB
    monkeypatch.setattr(corpus, "MAX_FILE_BYTES", 1 << 20)  # other layouts are refused past it
    tracemalloc.start()
    try:
        result = read_file(path, Restrict.parse(["cs.DC"]))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [p.paper_id for p in result.papers] == [f"2301.{i:05d}" for i in range(0, 5000, 1000)]
    assert result.left_out == {"records outside --category cs.DC": 4995}
    assert peak < path.stat().st_size / 4  # only the kept records are held, never the file


def test_ingest_category_and_since_from_the_command_line(tmp_path: Path) -> None:
    env = {"RAG_HOME": str(tmp_path / ".rag")}
    bad = run_rag("ingest", str(SNAPSHOT), "--since", "spring", cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "--since 'spring' is not a date" in bad.stderr
    none = run_rag("ingest", str(SNAPSHOT), "--category", "q-bio", cwd=tmp_path, env=env)
    assert none.returncode == 2 and "left out 4 records outside --category q-bio" in none.stderr
    done = run_rag("ingest", str(SNAPSHOT), str(BIB), "--category", "cs", "--since", "2023",
                   "-q", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "3 papers" in done.stdout and "left out" in done.stdout
    listed = run_rag("papers", "--json", cwd=tmp_path, env=env)
    papers = {p["paper_id"]: p for p in json.loads(listed.stdout)["papers"]}
    # the snapshot's cs papers of 2023 on, and the BibTeX entry whose primaryClass is cs.CL
    assert sorted(papers) == ["2305.00001", "2305.12345", "2401.00002"]
    assert papers["2305.12345"]["categories"] == ["cs.DC", "cs.LG"]
