"""Golden tests over the 60 seed papers, field by field, plus ids, LaTeX and merging.

tests/data/seeds_golden.json was generated once from the parser and then checked entry by
entry against the raw files in seeds/ (titles, authors, ids, comments, dates and the start,
end and length of every abstract were re-derived from the raw text independently; every
label was read and judged by hand).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rag.corpus import expand_paths, merge_papers, read_file
from rag.corpus.paper import Paper
from rag.corpus.text import clean_latex, make_label

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "seeds"
GOLDEN = json.loads((ROOT / "tests" / "data" / "seeds_golden.json").read_text(encoding="utf-8"))
FIELDS = ["paper_id", "title", "label", "authors", "arxiv_id", "doi", "journal_ref", "venue",
          "year", "date", "comments", "categories", "source", "position"]


def parse_seeds(seeds: Path = SEEDS) -> list[Paper]:
    return merge_papers([p for f in expand_paths([seeds]) for p in read_file(f).papers])


@pytest.fixture(scope="module")
def seed_papers() -> list[Paper]:
    old = Path.cwd()
    os.chdir(ROOT)  # `source` is stored relative to the working directory (the project)
    try:
        return parse_seeds(Path("seeds"))
    finally:
        os.chdir(old)


def test_golden_file_covers_all_sixty_papers() -> None:
    assert len(GOLDEN) == 60
    assert len({g["paper_id"] for g in GOLDEN}) == 60


@pytest.mark.parametrize("golden", GOLDEN, ids=[f"{g['source'][6:9]}-{g['position']}" for g in GOLDEN])
def test_seed_paper_fields(seed_papers: list[Paper], golden: dict) -> None:
    matches = [p for p in seed_papers
               if (p.source, p.position) == (golden["source"], golden["position"])]
    assert len(matches) == 1, f"no single paper at {golden['source']} #{golden['position']}"
    paper = matches[0].to_dict()
    got = {k: paper[k] for k in FIELDS}
    got["abstract_start"] = paper["abstract"][:60]
    got["abstract_end"] = paper["abstract"][-60:]
    got["abstract_len"] = len(paper["abstract"])
    assert got == golden


def test_papers_per_file_are_5_10_25_10_10() -> None:
    results = [read_file(f) for f in expand_paths([SEEDS])]
    assert [r.path.name[:3] for r in results] == ["000", "001", "002", "003", "004"]
    assert [len(r.papers) for r in results] == [5, 10, 25, 10, 10]
    assert [r.layout for r in results] == [
        "abstract-lines", "abstract-lines", "conference-listing", "arxiv-listing", "arxiv-export"]
    assert all(r.problems == [] for r in results)
    assert len(parse_seeds()) == 60


def test_every_paper_has_a_label_a_person_would_use(seed_papers: list[Paper]) -> None:
    for p in seed_papers:
        assert p.label, p.paper_id
        if p.title:
            assert p.label == p.title
        # a short lead is at most 8 words; a system name is one token
        assert len(p.label.split()) <= 8 or p.label == p.title
    labels = {p.label for p in seed_papers}
    for name in ["Skrull", "RT-HARE", "AdaCM²", "SDP4Bit", "DeepSpeed-Ulysses", "HEAT", "Buff",
                 "DynaPipe", "Vcc", "PASCL", "FedABC", "TDPO-R"]:
        assert name in labels


def test_paper_ids_are_stable_across_parses() -> None:
    first = [p.paper_id for p in parse_seeds()]
    second = [p.paper_id for p in parse_seeds()]
    assert first == second
    assert len(set(first)) == 60


def test_paper_ids_do_not_depend_on_cwd_or_absolute_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed_papers: list[Paper]) -> None:
    expected = [p.paper_id for p in seed_papers]
    # the same files from elsewhere, by absolute path
    monkeypatch.chdir(tmp_path)
    assert [p.paper_id for p in parse_seeds(SEEDS.resolve())] == expected
    # a copy of the files in another directory (another machine, another checkout)
    copy = tmp_path / "elsewhere" / "corpus"
    shutil.copytree(SEEDS, copy)
    moved = parse_seeds(copy)
    assert [p.paper_id for p in moved] == expected
    assert {p.source for p in moved} == {f"elsewhere/corpus/{f.name}" for f in SEEDS.iterdir()}


def test_source_is_relative_to_the_project_even_for_an_absolute_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    papers = parse_seeds(SEEDS.resolve())
    assert {p.source for p in papers} == {f"seeds/{f.name}" for f in SEEDS.iterdir()}


def test_arxiv_papers_are_identified_by_their_arxiv_id(seed_papers: list[Paper]) -> None:
    with_id = [p for p in seed_papers if p.arxiv_id]
    assert len(with_id) == 20
    assert all(p.paper_id == p.arxiv_id for p in with_id)


# -- LaTeX ---------------------------------------------------------------------------------


def test_latex_is_made_readable_in_seed_abstracts(seed_papers: list[Paper]) -> None:
    by_label = {p.label: p for p in seed_papers}
    adacm = by_label["AdaCM²"]
    assert "we propose AdaCM², which" in adacm.abstract
    assert "$" not in adacm.abstract and "^" not in adacm.abstract
    assert "4.08× speedup" in by_label["SDP4Bit"].abstract
    assert "about 4.3× and about 6.1× improvements" in by_label["FuseFPS"].abstract
    assert "more than 3× efficiency" in by_label["Vcc"].abstract
    assert "PartImageNet and Pascal_Part datasets" in by_label["PartSeg"].abstract
    assert "concept of “part” and" in by_label["PartSeg"].abstract
    assert "by 1.29%, 1.45%, 0.69% anomaly" in by_label["PASCL"].abstract
    assert "propose the Node-oriented spectral Filtering for Graph Neural Network (namely NFGNN)" \
        in by_label["NFGNN"].abstract
    assert "parameters (P), gradient (G), and optimizer states (OS)" in by_label["AMSP"].abstract
    pypi = next(p for p in seed_papers if p.title and p.title.startswith("Be Careful with PyPI"))
    assert "PyTorch provides torchvision.models for developers" in pypi.abstract


def test_no_latex_markup_is_left_in_any_seed_abstract(seed_papers: list[Paper]) -> None:
    for p in seed_papers:
        assert "$" not in p.abstract, p.paper_id
        assert "\\" not in p.abstract, p.paper_id
        assert "``" not in p.abstract, p.paper_id


@pytest.mark.parametrize(("raw", "readable"), [
    ("we propose AdaCM$^2$, which", "we propose AdaCM², which"),
    ("up to 4.08$\\times$ speedup", "up to 4.08× speedup"),
    ("more than $3\\times$ efficiency", "more than 3× efficiency"),
    ("rate by $1.29\\%$, $1.45\\%$", "rate by 1.29%, 1.45%"),
    ("Pascal$\\_$Part", "Pascal_Part"),
    ("\\textbf{\\underline{N}}ode-oriented", "Node-oriented"),
    ("the ``one-vs-all'' strategy", "the “one-vs-all” strategy"),
    ("with $x_1$ and $\\alpha \\le 2$", "with x₁ and α ≤ 2"),
    # maths
    ("the Schrödinger equation in $\\mathbb{R}^3$", "the Schrödinger equation in ℝ³"),
    ("We study $i\\partial_t u = -\\Delta u$ on", "We study i∂_t u = -Δu on"),
    ("in $O(\\sqrt{n})$ time", "in O(√n) time"),
    ("$\\sqrt{n+1}$ rounds", "√(n+1) rounds"),
    ("in $O(n\\log n)$ time", "in O(n log n) time"),
    ("a $\\frac{1}{2}$-approximation", "a 1/2-approximation"),
    ("$\\frac{n+1}{\\sqrt{n}}$", "(n+1)/√n"),
    ("points in $\\mathbb{R}^d$", "points in ℝ^d"),
    ("the gradient $\\nabla f$", "the gradient ∇f"),
    ("$\\mathcal{O}(n^2)$ memory", "O(n²) memory"),
    ("$\\tilde{O}(\\epsilon^{-2})$ samples", "Õ(ε⁻²) samples"),
    ("a $p < 5 \\times 10^{-8}$ threshold", "a p < 5 × 10⁻⁸ threshold"),
    ("$e^{-x^2}$ decay", "e^(-x²) decay"),
    ("$\\|x\\|_2 \\leq \\lambda$", "‖x‖₂ ≤ λ"),
    ("$\\operatorname{softmax}(QK^T)$", "softmax(QK^T)"),
    # a command not known is kept as written, never glued to the next word
    ("$\\foo{x}$", "\\foo x"),
    ("$\\foo x$", "\\foo x"),
    ("$a\\foo2$", "a\\foo 2"),
])
def test_clean_latex(raw: str, readable: str) -> None:
    assert clean_latex(raw) == readable


@pytest.mark.parametrize("text", [
    "Plain text is left exactly as it was: 3.76x, (up to 7.54x), 1.1~2.3X, 65%.",
    "A price of $5 is not LaTeX.",
    "",
])
def test_clean_latex_leaves_other_text_unchanged(text: str) -> None:
    assert clean_latex(text) == text


def test_label_falls_back_from_title_to_system_name_to_lead() -> None:
    abstract = "Training is slow. We propose Zorblax, a scheduler for it. Zorblax is fast."
    assert make_label("A Title", abstract) == "A Title"
    assert make_label(None, abstract) == "Zorblax"
    lead = make_label(None, "We study how training time grows with the size of the cluster used.")
    assert lead == "We study how training time grows with the…"


# -- merging -----------------------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_same_arxiv_id_in_two_files_becomes_one_record_with_merged_fields(tmp_path: Path) -> None:
    listing = _write(tmp_path / "a_listing.txt",
                     "We propose Quill, a system for merging records. It merges.\n"
                     "ICML 2022\n"
                     "arXiv:2207.01160\n")
    export = _write(tmp_path / "b_export.txt",
                    "We propose Quill, a system for merging records (second version of the text).\n\n"
                    "arXiv:2207.01160 - doi: 10.1000/quill\nCreated: 2022-07-03\n")
    jsonl = _write(tmp_path / "c.jsonl", json.dumps(
        {"abstract": "A third rendering of the Quill abstract.", "title": "Quill: Merging Records",
         "authors": ["Ann Author", "Bob Writer"], "arxiv_id": "arXiv:2207.01160v2"}) + "\n")
    papers = merge_papers([p for f in (listing, export, jsonl) for p in read_file(f).papers])
    assert len(papers) == 1
    p = papers[0]
    assert p.paper_id == p.arxiv_id == "2207.01160"
    assert p.abstract == "We propose Quill, a system for merging records. It merges."  # the first
    assert p.comments == ["ICML 2022"]  # from the listing
    assert p.venue == "ICML"
    assert p.doi == "10.1000/quill" and p.date == "2022-07-03"  # from the export
    assert p.title == p.label == "Quill: Merging Records"  # from the JSONL
    assert p.authors == ["Ann Author", "Bob Writer"]


def test_same_abstract_in_two_files_becomes_one_record(tmp_path: Path) -> None:
    abstract = ("Long-context fine-tuning mixes long and short sequences. We propose Skrill, a "
                "data scheduler that balances them.")
    lines = _write(tmp_path / "a.txt", f"Abstract:{abstract}\nAbstract:Another paper entirely.\n")
    # same text, different whitespace and a LaTeX-free copy with a title and an arXiv id
    jsonl = _write(tmp_path / "b.jsonl", json.dumps(
        {"abstract": abstract.replace(" ", "  "), "title": "Skrill: Scheduling Data",
         "arxiv_id": "2501.00001", "year": 2025, "venue": "MLSys"}) + "\n")
    papers = merge_papers([p for f in (lines, jsonl) for p in read_file(f).papers])
    assert len(papers) == 2
    p = next(p for p in papers if "Skrill" in p.abstract)
    assert p.title == p.label == "Skrill: Scheduling Data"
    assert (p.year, p.venue, p.arxiv_id) == (2025, "MLSys", "2501.00001")
    # the arXiv id, once known, is the id, whichever file came first
    assert p.paper_id == "2501.00001"
    assert p.source.endswith("a.txt") and p.position == 1
    reverse = merge_papers([p for f in (jsonl, lines) for p in read_file(f).papers])
    assert {q.paper_id for q in reverse} == {q.paper_id for q in papers}


def test_different_papers_are_not_merged(tmp_path: Path) -> None:
    f = _write(tmp_path / "a.txt", "Abstract:One paper about schedulers.\n"
                                   "Abstract:Another paper about compilers.\n")
    assert len(merge_papers(read_file(f).papers)) == 2


def test_seeds_twice_still_give_sixty_papers(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(SEEDS, copy)
    papers = merge_papers([p for d in (SEEDS, copy) for f in expand_paths([d])
                           for p in read_file(f).papers])
    assert len(papers) == 60
