"""One record per paper across files, readers and ingests: records sharing a DOI, an arXiv id,
a PMID, an id, or title + first author + year (within one) are one paper; the indexed (or
published, or first) record's fields stay, the others fill gaps and are listed as sources;
every merge is reported, and `--replace` lets the later record win. Also: the filters on the
new readers' fields, and PubMed's DeleteCitation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.corpus import read_file
from rag.corpus.merge import Merger
from rag.corpus.paper import Paper
from rag.ingest import ingest
from rag.retrieve import Retriever
from rag.retrieve.filters import Filters
from rag.store import Store
from tests.conftest import run_rag
from tests.zotero_fixture import sample_library

DATA = Path(__file__).resolve().parent / "data" / "formats"
PREPRINT = ("Multi-task model training has been adopted to enable a single deep neural network model "
            "to handle multiple tasks. We advocate pipeline-parallel training with variable-length "
            "micro-batches.")
PUBLISHED = ("Multi-task model training has been adopted to enable a single deep neural network model "
             "(often a large language model) to handle multiple tasks (e.g., question answering and "
             "text summarization). DynaPipe reaches up to 4.39x higher training throughput.")
TITLE = "DynaPipe: Optimizing Multi-task Training through Dynamic Pipelines"


def _snapshot(path: Path) -> Path:
    """The arXiv snapshot's record of DynaPipe (no DOI in it: the title rule must match)."""
    record = {"id": "2311.10418", "submitter": "Chenyu Jiang", "authors": "Chenyu Jiang, Zhen Jia, Chuan Wu",
              "title": TITLE, "comments": "18 pages, 18 figures", "journal-ref": None, "doi": None,
              "categories": "cs.DC cs.LG", "abstract": PREPRINT,
              "versions": [{"version": "v1", "created": "Fri, 17 Nov 2023 09:34:21 GMT"}],
              "authors_parsed": [["Jiang", "Chenyu", ""], ["Jia", "Zhen", ""], ["Wu", "Chuan", ""]]}
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def _bib(path: Path) -> Path:
    path.write_text(f"""@inproceedings{{jiang2024dynapipe,
  title = {{{TITLE}}},
  author = {{Jiang, Chenyu and Jia, Zhen and Zheng, Shuai and Wang, Yida and Wu, Chuan}},
  booktitle = {{Proceedings of the Nineteenth European Conference on Computer Systems}},
  series = {{EuroSys '24}},
  year = {{2024}},
  doi = {{10.1145/3627703.3629585}},
  abstract = {{{PUBLISHED}}}
}}
""", encoding="utf-8")
    return path


def test_dynapipe_from_the_snapshot_and_a_bib_file_is_one_paper(tmp_path: Path) -> None:
    records = [*read_file(_snapshot(tmp_path / "snap.json")).papers, *read_file(_bib(tmp_path / "refs.bib")).papers]
    merger = Merger()
    for r in records:
        merger.add(r)
    [paper] = merger.papers
    assert paper.paper_id == "2311.10418"
    assert paper.abstract == PUBLISHED  # the published record over the preprint
    assert paper.doi == "10.1145/3627703.3629585" and paper.arxiv_id == "2311.10418"
    assert paper.categories == ["cs.DC", "cs.LG"]
    assert [e["source"].rsplit("/", 1)[-1] for e in paper.sources] == ["refs.bib", "snap.json"]
    [merge] = merger.merges
    assert merge.differ and "same title, first author and year" in merge.why


def test_each_merge_names_the_paper_as_it_ends_up(tmp_path: Path) -> None:
    """The published record first (no arXiv id), then the preprint: the paper's id becomes the
    arXiv id, and the merge reported before that named the id it had then
    ("merged: dynapipe-optimizing-…-8d8f7f"), counted as another paper ("merged 2 paper(s)")."""
    oa = {"id": "https://openalex.org/W4388745555", "doi": "https://doi.org/10.1145/3627703.3629585",
          "display_name": TITLE, "publication_year": 2024,
          "authorships": [{"author": {"display_name": "Chenyu Jiang"}}],
          "abstract_inverted_index": {w: [i] for i, w in enumerate(PUBLISHED.split())}}
    (tmp_path / "works.json").write_text(json.dumps({"results": [oa]}), encoding="utf-8")
    records = [*read_file(_bib(tmp_path / "refs.bib")).papers, *read_file(tmp_path / "works.json").papers,
               *read_file(_snapshot(tmp_path / "snap.json")).papers]
    merger = Merger()
    for r in records:
        merger.add(r)
    [paper] = merger.papers
    assert paper.paper_id == "2311.10418"
    assert [m.describe().split(" ", 1)[0] for m in merger.merges] == ["2311.10418", "2311.10418"]


@pytest.mark.parametrize("caps_first", [True, False])
def test_a_title_in_capitals_gives_way_to_the_same_title_as_written(tmp_path: Path, caps_first: bool) -> None:
    """The published record in capitals (a typed-in BibTeX entry) and the arXiv snapshot's
    record: the paper kept DYNAPIPE: OPTIMIZING ... whichever came first; now its title is as
    written, under the same id."""
    caps = _bib(tmp_path / "refs.bib")
    caps.write_text(caps.read_text(encoding="utf-8").replace(TITLE, TITLE.upper()), encoding="utf-8")
    files = [caps, _snapshot(tmp_path / "snap.json")]
    records = [p for f in (files if caps_first else files[::-1]) for p in read_file(f).papers]
    merger = Merger()
    for r in records:
        merger.add(r)
    [paper] = merger.papers
    assert (paper.paper_id, paper.title, paper.label) == ("2311.10418", TITLE, TITLE)
    assert paper.abstract == PUBLISHED  # the published record's fields otherwise


def test_a_one_word_title_in_capitals_is_a_name() -> None:
    a = Paper("a", "We train BERT.", title="BERT", label="BERT", doi="10.1/b")
    a.merge(Paper("b", "We train BERT.", title="Bert", label="Bert", doi="10.1/b"))
    assert a.title == "BERT"


@pytest.mark.parametrize(("title", "author", "year", "one"), [
    ("DYNAPIPE -- optimizing multi-task training through dynamic pipelines!", "C. Jiang", 2024, True),
    (TITLE, "Chenyu Jiang", 2021, False),  # years two apart
    (TITLE, "Zhen Jia", 2023, False),  # another first author
])
def test_title_rule(title: str, author: str, year: int, one: bool) -> None:
    a = Paper("a", "First abstract.", title=TITLE, authors=["Chenyu Jiang"], year=2023)
    b = Paper("b", "Second abstract.", title=title, authors=[author], year=year)
    merger = Merger()
    merger.add(a)
    merger.add(b)
    assert (len(merger.papers) == 1) is one


SAME_TITLE = [  # two papers titled "Deep learning": the review in Nature, one in Radiology
    ("lecun2015", "LeCun, Yann and Bengio, Yoshua", "Nature", 2015, "10.1038/nature14539",
     "Deep learning allows computational models that are composed of multiple processing layers "
     "to learn representations of data with multiple levels of abstraction."),
    ("smith2019", "Smith, Alice and Okafor, Chidi", "Radiology", 2019, "10.1148/radiol.2019190001",
     "This review summarises 120 studies of chest radiograph classification with convolutional "
     "neural networks for radiologists."),
]


def _same_title_bib(path: Path, *which: int) -> Path:
    path.write_text("".join(f"""@article{{{key},
  author = {{{authors}}}, title = {{Deep Learning}}, journal = {{{venue}}},
  year = {{{year}}}, doi = {{{doi}}}, abstract = {{{abstract}}}
}}
""" for key, authors, venue, year, doi, abstract in (SAME_TITLE[i] for i in which)), encoding="utf-8")
    return path


def test_two_papers_with_one_title_stay_two(tmp_path: Path, fresh_settings) -> None:  # type: ignore[no-untyped-def]
    """A title (and the id made from it) is no identifier: papers whose DOIs, first authors
    and years differ are two papers, each searchable, in one file or across ingests; the
    paper indexed first keeps its id, the other gets one of its own, the same on re-ingest."""
    both = ingest([_same_title_bib(tmp_path / "both.bib", 0, 1)], fresh_settings, show_progress=False)
    assert (both.papers, both.merges) == (2, [])
    store = Store(fresh_settings)
    ids = sorted(p.paper_id for p in store.papers())
    store.close()
    assert ids[0] == "deep-learning-871183" and ids[1].startswith("deep-learning-871183-")
    assert ingest([tmp_path / "both.bib"], fresh_settings, show_progress=False).unchanged == 2
    found = Retriever(fresh_settings).search("chest radiograph classification studies", 1)
    assert found[0].paper.doi == "10.1148/radiol.2019190001"
    # the same two, from two files and two ingests
    fresh_settings.index = "two"
    ingest([_same_title_bib(tmp_path / "nature.bib", 0)], fresh_settings, show_progress=False)
    later = ingest([_same_title_bib(tmp_path / "radiology.bib", 1)], fresh_settings, show_progress=False)
    assert (later.new, later.merges) == (1, [])
    store = Store(fresh_settings)
    assert sorted(p.paper_id for p in store.papers()) == ids
    store.close()
    # one paper, its DOI corrected in its file: still one paper, with the same id
    fix = _same_title_bib(tmp_path / "nature.bib", 0)
    fix.write_text(fix.read_text().replace("nature14539", "nature14540"))
    edited = ingest([fix], fresh_settings, show_progress=False)
    assert (edited.changed, edited.removed) == (1, 0)
    store = Store(fresh_settings)
    assert {p.paper_id: p.doi for p in store.papers()}[ids[0]] == "10.1038/nature14540"
    store.close()


def test_a_record_changed_where_nothing_is_embedded_is_rewritten_without_embedding(
        tmp_path: Path, fresh_settings) -> None:  # type: ignore[no-untyped-def]
    """A corrected DOI and year (or a journal's kind, a name's parts: what a newer rag reads
    from the same file) change the stored record and its filters, and embed nothing."""
    bib = _same_title_bib(tmp_path / "nature.bib", 0)
    ingest([bib], fresh_settings, show_progress=False)
    bib.write_text(bib.read_text().replace("nature14539", "nature14540").replace("2015", "2016"))
    report = ingest([bib], fresh_settings, show_progress=False)
    assert (report.changed, report.chunks, report.sentences) == (1, 0, 0)
    store = Store(fresh_settings)
    [paper] = store.papers()
    store.close()
    assert (paper.doi, paper.year) == ("10.1038/nature14540", 2016)
    retriever = Retriever(fresh_settings)
    assert retriever.search("deep learning representations", 3, Filters(year_from=2016, year_to=2016))
    assert retriever.search("deep learning representations", 3, Filters(year_from=2015, year_to=2015)) == []
    assert ingest([bib], fresh_settings, show_progress=False).unchanged == 1


@pytest.mark.parametrize(("doi", "author", "one"), [
    ("10.48550/arXiv.2311.10418", "Chenyu Jiang", True),  # the preprint's arXiv DOI
    ("10.1145/9999999.9999999", "Chenyu Jiang", False),  # another publisher DOI
    (None, "Chenyu Jiang", True),
])
def test_a_title_joins_records_only_when_their_identifiers_agree(doi: str | None, author: str, one: bool) -> None:
    a = Paper("x", "First abstract.", title=TITLE, authors=["Chenyu Jiang"], year=2023, doi="10.1145/3627703.3629585")
    b = Paper("y", "Second abstract.", title=TITLE, authors=[author], year=2024, doi=doi)
    merger = Merger()
    merger.add(a)
    merger.add(b)
    assert (len(merger.papers) == 1) is one


def test_same_id_in_one_file_keeps_the_first_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text("".join(json.dumps({"id": "p1", "abstract": a}) + "\n"
                            for a in ("Pipelines for training large models.", "A study of databases.")))
    merger = Merger()
    for r in read_file(path).papers:
        merger.add(r)
    assert [p.abstract for p in merger.papers] == ["Pipelines for training large models."]
    assert merger.merges[0].describe().endswith("kept the abstract from one.jsonl:1".replace(
        "one.jsonl", merger.merges[0].kept.rsplit(":", 1)[0]))
    later = Merger(replace=True)
    for r in read_file(path).papers:
        later.add(r)
    assert [p.abstract for p in later.papers] == ["A study of databases."]


def test_hostile_bib_does_not_replace_an_indexed_abstract(workdir: Path) -> None:
    """A .bib entry with eprint 2309.05017 (FuseFPS, in seeds/) and another abstract."""
    (workdir / "evil.bib").write_text("""@article{evil, title = {FuseFPS}, eprint = {2309.05017},
  archivePrefix = {arXiv}, year = {2023}, abstract = {This abstract was written to replace the real one.}}
""")
    env = {"RAG_HOME": str(workdir / "h")}
    assert run_rag("ingest", "-q", "seeds", cwd=workdir, env=env).returncode == 0
    kept = run_rag("ingest", "-q", "evil.bib", cwd=workdir, env=env)
    assert kept.returncode == 0, kept.stderr
    assert "merged 1 paper(s) seen in several sources" in kept.stdout
    line = next(x for x in kept.stderr.splitlines() if x.startswith("merged:"))
    assert "evil.bib:1" in line and "seeds/004_" in line and "same arXiv id 2309.05017" in line
    assert "kept the abstract from seeds/004_" in line and "--replace" in line
    shown = run_rag("papers", "show", "2309.05017", cwd=workdir, env=env).stdout
    assert "Farthest point sampling" in shown and "written to replace" not in shown
    assert "evil.bib:1 (bibtex): same arXiv id 2309.05017" in shown  # listed as a source
    replaced = run_rag("ingest", "-q", "--replace", "evil.bib", cwd=workdir, env=env)
    assert replaced.returncode == 0 and "kept the abstract from evil.bib:1" in replaced.stderr
    assert "written to replace" in run_rag("papers", "show", "2309.05017", cwd=workdir, env=env).stdout


def test_a_merged_paper_is_shown_by_any_of_its_identifiers(workdir: Path) -> None:
    """A statin trial from a .bib file (first, so its id is made from its title) and PubMed:
    `rag papers show PMID:31452104` (and its DOI) said "no paper with id"."""
    (workdir / "statins.bib").write_text("@article{smith, title = {Statin therapy in older adults: a randomized "
                                         "trial}, journal = {Nature}, doi = {10.1038/S41586-019-1500-0},\n"
                                         "  author = {Smith, John}, abstract = {Statins reduce events.}}\n")
    (workdir / "to_pubmed.xml").write_bytes((DATA / "pubmed.xml").read_bytes())  # after statins.bib, wherever tests/ is
    env = {"RAG_HOME": str(workdir / "ids")}
    built = run_rag("ingest", "-q", "statins.bib", "to_pubmed.xml", "--index", "s", cwd=workdir, env=env)
    assert built.returncode == 0, built.stderr
    for ident in ("PMID:31452104", "31452104", "10.1038/s41586-019-1500-0", "https://doi.org/10.1038/S41586-019-1500-0"):
        shown = run_rag("papers", "show", ident, "--index", "s", cwd=workdir, env=env)
        assert shown.returncode == 0 and "paper_id: statin-therapy-in-older-adults" in shown.stdout, (ident, shown.stderr)
    missing = run_rag("papers", "show", "PMID:1", "--index", "s", cwd=workdir, env=env)
    assert missing.returncode == 2 and "PMID:1" in missing.stderr


def test_dynapipe_one_paper_in_the_index_listing_both_files(workdir: Path) -> None:
    _snapshot(workdir / "snap.json")
    _bib(workdir / "refs.bib")
    env = {"RAG_HOME": str(workdir / "h")}
    done = run_rag("ingest", "-q", "snap.json", "refs.bib", cwd=workdir, env=env)
    assert done.returncode == 0, done.stderr
    assert "1 papers" in done.stdout and "merged 1 paper(s)" in done.stdout
    shown = run_rag("papers", "show", "2311.10418", cwd=workdir, env=env).stdout
    assert "refs.bib:1 (bibtex)" in shown and "snap.json:1 (arxiv-snapshot): same title" in shown
    dups = run_rag("papers", "--duplicates", cwd=workdir, env=env).stdout
    assert dups.splitlines()[0].startswith("2311.10418") and "snap.json:1" in dups
    bib = run_rag("papers", "--format", "bibtex", "2311.10418", cwd=workdir, env=env).stdout
    assert "10.1145/3627703.3629585" in bib and "2311.10418" in bib  # the merged record is cited


def test_two_records_of_one_api_page_are_both_listed_as_sources(workdir: Path) -> None:
    def work(ident: str, words: str) -> dict[str, object]:
        return {"id": f"https://openalex.org/{ident}", "doi": "https://doi.org/10.1000/buff",
                "display_name": "Buff: long sequences", "publication_year": 2024,
                "abstract_inverted_index": {w: [i] for i, w in enumerate(words.split())}}

    # a pretty-printed API page where the preprint and the published work are one paper
    (workdir / "page.json").write_text(json.dumps({"meta": {"count": 2}, "results": [
        work("W1", "Buff trains long sequences."), work("W2", "Buff trains long sequences fast.")]}, indent=2))
    env = {"RAG_HOME": str(workdir / "h")}
    done = run_rag("ingest", "-q", "page.json", cwd=workdir, env=env)
    assert done.returncode == 0, done.stderr
    assert "page.json:26 merged with page.json:6" in done.stderr  # where each record starts
    dups = run_rag("papers", "--duplicates", cwd=workdir, env=env)
    assert "page.json:6 (openalex)\n" in dups.stdout and "page.json:26 (openalex): same DOI 10.1000/buff" in dups.stdout
    assert "1 papers merged from several records" in dups.stderr
    # the same page as curl saves it, on one line: both records still listed
    (workdir / "page.json").write_text(json.dumps({"meta": {"count": 2}, "results": [
        work("W1", "Buff trains long sequences."), work("W2", "Buff trains long sequences fast.")]}))
    assert run_rag("ingest", "-q", "page.json", cwd=workdir, env=env).returncode == 0
    dups = run_rag("papers", "--duplicates", cwd=workdir, env=env).stdout
    assert "page.json:1 (openalex)\n" in dups and "page.json:1 record 2 (openalex): same DOI" in dups, dups


def test_merge_across_ingests_keeps_the_indexed_record(tmp_path: Path, fresh_settings) -> None:  # type: ignore[no-untyped-def]
    snap, bib = _snapshot(tmp_path / "snap.json"), _bib(tmp_path / "refs.bib")
    ingest([snap], fresh_settings, show_progress=False)
    report = ingest([bib], fresh_settings, show_progress=False)
    assert (report.new, report.changed) == (0, 1) and report.merges[0].differ
    again = ingest([bib], fresh_settings, show_progress=False)
    assert again.unchanged == 1  # nothing to embed the second time
    store = Store(fresh_settings)
    [paper] = store.papers()
    assert paper.abstract == PREPRINT and paper.doi == "10.1145/3627703.3629585"
    # the snapshot re-read alone: the bib's contribution stays, the paper is not removed
    assert ingest([snap], fresh_settings, show_progress=False).removed == 0
    assert {e["source"].rsplit("/", 1)[-1] for e in Store(fresh_settings).papers()[0].sources} == {
        "snap.json", "refs.bib"}
    store.close()


def test_a_pruned_file_leaves_the_paper_it_shared(tmp_path: Path, fresh_settings) -> None:  # type: ignore[no-untyped-def]
    """DynaPipe from a .bib (kept record) and a snapshot: once the .bib is deleted and
    `rag ingest --prune` runs, the paper is the snapshot's, and nothing names the deleted file."""
    folder = tmp_path / "lib"
    folder.mkdir()
    snap, bib = _snapshot(folder / "snap.json"), _bib(folder / "refs.bib")
    ingest([folder], fresh_settings, show_progress=False)
    bib.unlink()
    report = ingest([folder], fresh_settings, show_progress=False, prune=True)
    assert report.changed == 1
    store = Store(fresh_settings)
    [paper] = store.papers()
    store.close()
    assert paper.source == str(snap) or paper.source.endswith("snap.json")
    assert paper.abstract == PREPRINT and paper.doi is None
    assert not any(str(e.get("source", "")).endswith("refs.bib") for e in paper.sources)
    assert Retriever(fresh_settings).search("multi-task training", 5, Filters(source="refs.bib")) == []
    again = ingest([folder], fresh_settings, show_progress=False, prune=True)
    assert (again.unchanged, again.merges) == (1, [])


def test_delete_citation_removes_the_indexed_pmid(tmp_path: Path, fresh_settings) -> None:  # type: ignore[no-untyped-def]
    ingest([DATA / "pubmed.xml"], fresh_settings, show_progress=False)
    update = tmp_path / "pubmed24n1500.xml"
    update.write_text('<?xml version="1.0"?>\n<PubmedArticleSet><DeleteCitation><PMID Version="1">10234567</PMID>'
                      "</DeleteCitation></PubmedArticleSet>\n")
    report = ingest([update], fresh_settings, show_progress=False)
    assert report.removed == 1
    store = Store(fresh_settings)
    assert [p.paper_id for p in store.papers()] == ["PMID:31452104"]
    store.close()


def test_filters_on_every_new_format(tmp_path: Path, fresh_settings) -> None:  # type: ignore[no-untyped-def]
    library = sample_library(tmp_path / "zotero.sqlite")
    files = [DATA / "pubmed.xml", DATA / "openalex.jsonl", DATA / "s2_graph.json",
             DATA / "s2_papers.jsonl", DATA / "s2_abstracts.jsonl", library]
    report = ingest(files, fresh_settings, show_progress=False)
    retriever = Retriever(fresh_settings)

    def found(**kw: str) -> set[str]:
        hits = retriever.search("training models retrieval statins dialysis yeast", k=20,
                                filters=Filters.parse(**kw))
        return {h.paper.paper_id for h in hits}

    assert found(year="1998") == {"PMID:10234567"}  # PubMed MedlineDate
    assert found(category="Renal Dialysis") == {"PMID:10234567"}  # MeSH heading
    assert found(category="biology") == {"openalex:W2000000002"}  # OpenAlex concept
    assert found(category="linguistics") == {"s2:5000"}  # Semantic Scholar field of study
    assert found(category="Retrieval") == {"2201.01234"}  # Zotero collection
    assert found(venue="Journal of Retrieval") == {"2201.01234"}  # Zotero publicationTitle
    assert found(venue="Rural Health") == {"PMID:10234567"}  # PubMed journal
    assert found(venue="Computational Linguistics", year="2020") == {"s2:5000"}
    # DynaPipe from OpenAlex, the S2 datasets and Zotero, and the statin trial from PubMed and
    # the S2 datasets, are one paper each
    assert {m.paper_id for m in report.merges} == {"2311.10418", "PMID:31452104"}
    assert "Systems" in retriever.paper("2311.10418").categories  # type: ignore[union-attr]
