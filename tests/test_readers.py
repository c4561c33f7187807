"""The readers of researchers' libraries: PubMed/MEDLINE XML, OpenAlex works, Semantic Scholar
(API JSON and the papers + abstracts datasets), and a Zotero library, with golden records
from small files in each real format (tests/data/formats/, tests/zotero_fixture.py) and the
traps real files have. Expected values were written by hand from those files.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from rag.corpus import merge_papers, read_all, read_file
from rag.errors import InputError, ParseError
from rag.export import export
from tests.conftest import run_rag
from tests.zotero_fixture import Library, sample_library

DATA = Path(__file__).resolve().parent / "data" / "formats"
FIELDS = ["paper_id", "title", "authors", "abstract", "year", "date", "doi", "arxiv_id", "venue",
          "categories", "ids"]


def _golden(path: Path, **kw: object) -> list[dict[str, object]]:
    return [{k: p.to_dict()[k] for k in FIELDS} for p in read_file(path, **kw).papers]  # type: ignore[arg-type]


# -- PubMed ---------------------------------------------------------------------------------

PUBMED_GOLDEN = [
    {
        "paper_id": "PMID:31452104",
        "title": "Statin therapy in older adults: a randomized trial.",  # <i> markup flattened
        "authors": ["Chidi Okafor", "Maja Lindqvist", "STAT-75 Investigators"],
        # a structured abstract keeps its labels; &#8211; decoded
        "abstract": "BACKGROUND: The benefit of statins in adults over 75 is uncertain. "
                    "METHODS: We randomly assigned 1,200 participants to atorvastatin or placebo. "
                    "RESULTS: Major vascular events fell by 21% (HR 0.79; 95% CI, 0.66\u20130.95).",
        "year": 2019, "date": "2019-08-28",
        # the article's DOI, not the one of a reference's ArticleIdList
        "doi": "10.1038/s41586-019-1500-0", "arxiv_id": None, "venue": "Nature",
        "categories": ["Aged", "Hydroxymethylglutaryl-CoA Reductase Inhibitors"],  # MeSH
        "ids": {"pmid": "31452104", "pmcid": "PMC6789012"},
    },
    {
        "paper_id": "PMID:10234567", "title": "Access to dialysis in rural counties.",
        "authors": ["JT Brennan"],  # initials when there is no ForeName
        "abstract": "Rural patients travel farther for dialysis. Travel time predicted missed sessions.",
        "year": 1998, "date": None,  # MedlineDate "1998 Dec-1999 Jan"
        "doi": None, "arxiv_id": None, "venue": "The Journal of Rural Health",
        "categories": ["Renal Dialysis"], "ids": {"pmid": "10234567"},
    },
]


def test_pubmed_golden_records() -> None:
    result = read_file(DATA / "pubmed.xml")
    assert result.layout == "pubmed-xml"
    assert _golden(DATA / "pubmed.xml") == PUBMED_GOLDEN
    assert result.left_out == {"PubMed articles without an abstract": 1}
    assert result.deleted == ["20000001", "20000002"]  # DeleteCitation


# The same two articles as PubMed's "Send to: Citation manager" (.nbib) writes them
MEDLINE = """PMID- 31452104
OWN - NLM
STAT- MEDLINE
DCOM- 20191001
IS  - 1476-4687 (Electronic)
VI  - 572
IP  - 7770
DP  - 2019 Aug 28
TI  - Statin therapy in older adults: a randomized trial.
LID - 10.1038/s41586-019-1500-0 [doi]
AB  - BACKGROUND: The benefit of statins in adults over 75 is uncertain. METHODS: We
      randomly assigned 1,200 participants to atorvastatin or placebo. RESULTS: Major
      vascular events fell by 21% (HR 0.79; 95% CI, 0.66–0.95).
FAU - Okafor, Chidi
AU  - Okafor C
FAU - Lindqvist, Maja
AU  - Lindqvist M
CN  - STAT-75 Investigators
LA  - eng
PT  - Journal Article
TA  - Nature
JT  - Nature
MH  - Aged
MH  - *Hydroxymethylglutaryl-CoA Reductase Inhibitors/therapeutic use
PMC - PMC6789012
AID - 10.1038/s41586-019-1500-0 [doi]
PST - ppublish
SO  - Nature. 2019 Aug 28;572(7770):1-2. doi: 10.1038/s41586-019-1500-0.

PMID- 10234567
DP  - 1998 Dec-1999 Jan
TI  - Access to dialysis in rural counties.
AB  - Rural patients travel farther for dialysis. Travel time predicted missed sessions.
AU  - Brennan JT
JT  - The Journal of Rural Health
MH  - Renal Dialysis

PMID- 10000001
TI  - A letter without an abstract.
"""


def test_pubmed_medline_text_reads_as_the_xml_does(tmp_path: Path) -> None:
    """PubMed's .nbib ("Send to: Citation manager") and "PubMed" text format was "content is
    in no known layout": it gives the records the XML gives."""
    (tmp_path / "pubmed-statins.nbib").write_text(MEDLINE, encoding="utf-8")
    result = read_file(tmp_path / "pubmed-statins.nbib")
    assert result.layout == "medline" and result.left_out == {"MEDLINE records without an abstract": 1}
    assert _golden(tmp_path / "pubmed-statins.nbib") == PUBMED_GOLDEN
    assert [p.line for p in result.papers] == [1, 30]
    assert len(merge_papers([*result.papers, *read_file(DATA / "pubmed.xml").papers])) == 2


def test_medline_authors_without_full_names_read_as_the_xml_gives_them(tmp_path: Path) -> None:
    """Records before 2002 have `AU` ("LastName Initials [Suffix]") and no `FAU`: split at the
    first space, "van den Berg P" was "den Berg P van" and "King ML Jr" "ML Jr King"; and an
    `AU` without its own `FAU` beside authors with one was lost."""
    (tmp_path / "old.nbib").write_text(
        "PMID- 1000002\nDP  - 1985 Mar\nTI  - Old trial.\nAB  - Old abstract.\nAU  - van den Berg P\n"
        "AU  - García Márquez G\nAU  - King ML Jr\nAU  - Doe JA\nCN  - Old Trial Group\nJT  - Old J\n\n"
        "PMID- 1000003\nDP  - 2005\nTI  - Newer.\nAB  - Newer abstract.\nFAU - Nuñez, José María\n"
        "AU  - Nuñez JM\nAD  - Dept X.\nAU  - Doe JA\n", encoding="utf-8")
    (tmp_path / "old.xml").write_text(
        '<?xml version="1.0" ?>\n<PubmedArticleSet><PubmedArticle><MedlineCitation><PMID>1000002</PMID><Article>'
        "<Journal><JournalIssue><PubDate><Year>1985</Year></PubDate></JournalIssue><Title>Old J</Title></Journal>"
        "<ArticleTitle>Old trial.</ArticleTitle><Abstract><AbstractText>Old abstract.</AbstractText></Abstract>"
        "<AuthorList><Author><LastName>van den Berg</LastName><Initials>P</Initials></Author><Author>"
        "<LastName>García Márquez</LastName><Initials>G</Initials></Author><Author><LastName>King</LastName>"
        "<Initials>ML</Initials><Suffix>Jr</Suffix></Author><Author><LastName>Doe</LastName><Initials>JA</Initials>"
        "</Author><Author><CollectiveName>Old Trial Group</CollectiveName></Author></AuthorList></Article>"
        "</MedlineCitation></PubmedArticle></PubmedArticleSet>\n", encoding="utf-8")
    old, newer = read_file(tmp_path / "old.nbib").papers
    [xml] = read_file(tmp_path / "old.xml").papers
    assert old.authors == ["P van den Berg", "G García Márquez", "ML King Jr", "JA Doe", "Old Trial Group"]
    assert (old.authors, old.author_names) == (xml.authors, xml.author_names)
    assert newer.authors == ["José María Nuñez", "JA Doe"]


def test_pubmed_gzipped_reads_the_same(tmp_path: Path) -> None:
    gz = tmp_path / "pubmed24n0001.xml.gz"
    gz.write_bytes(gzip.compress((DATA / "pubmed.xml").read_bytes()))
    assert _golden(gz) == PUBMED_GOLDEN


def test_pubmed_entity_expansion_is_refused(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.xml"
    bomb.write_text('<?xml version="1.0"?>\n<!DOCTYPE PubmedArticleSet [\n'
                    '<!ENTITY a "aaaaaaaaaa">\n<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">\n]>\n'
                    "<PubmedArticleSet><PubmedArticle><MedlineCitation><PMID>1</PMID><Article>"
                    "<Abstract><AbstractText>&b;</AbstractText></Abstract></Article></MedlineCitation>"
                    "</PubmedArticle></PubmedArticleSet>\n")
    with pytest.raises(ParseError, match="entity"):
        read_file(bomb)


def test_pubmed_truncated_file_names_the_file(tmp_path: Path) -> None:
    cut = tmp_path / "cut.xml"
    cut.write_bytes((DATA / "pubmed.xml").read_bytes()[:3000])
    result = read_file(cut)
    assert result.problems and "cut.xml" in str(result.problems[-1])


PUBMED_NAMES = """<?xml version="1.0"?>
<PubmedArticleSet><PubmedArticle><MedlineCitation><PMID>1</PMID><Article>
<Journal><JournalIssue><PubDate><Year>2020</Year></PubDate></JournalIssue><Title>Lancet</Title></Journal>
<ArticleTitle>Statins.</ArticleTitle><Abstract><AbstractText>Statins work.</AbstractText></Abstract>
<AuthorList><Author><LastName>King</LastName><ForeName>Martin Luther</ForeName><Suffix>Jr</Suffix></Author>
<Author><LastName>García Márquez</LastName><ForeName>Ana</ForeName></Author></AuthorList>
</Article></MedlineCitation></PubmedArticle></PubmedArticleSet>
"""


def test_pubmed_articles_export_as_journal_articles_with_their_names(tmp_path: Path) -> None:
    papers = read_file(DATA / "pubmed.xml").papers
    bib = export(papers, "bibtex")
    assert "@article{okafor2019statin," in bib and "journal = {Nature}" in bib and "booktitle" not in bib
    assert "author = {Okafor, Chidi and Lindqvist, Maja and {STAT-75 Investigators}}" in bib
    assert "TY  - JOUR\nID  - okafor2019statin\nAU  - Okafor, Chidi\nAU  - Lindqvist, Maja\nAU  - STAT-75 Investigators" in (
        export(papers, "ris"))
    csl = json.loads(export(papers, "csl-json"))[0]
    assert (csl["type"], csl["container-title"], csl["author"][2]) == (
        "article-journal", "Nature", {"literal": "STAT-75 Investigators"})
    (tmp_path / "names.xml").write_text(PUBMED_NAMES, encoding="utf-8")
    [paper] = read_file(tmp_path / "names.xml").papers
    assert paper.authors == ["Martin Luther King Jr", "Ana García Márquez"]
    assert "AU  - King, Martin Luther, Jr\nAU  - García Márquez, Ana\n" in export([paper], "ris")


def test_pubmed_superscripts_and_subscripts_stay_raised_and_lowered(tmp_path: Path) -> None:
    xml = tmp_path / "sup.xml"
    xml.write_text(
        '<?xml version="1.0"?>\n<PubmedArticleSet><PubmedArticle><MedlineCitation><PMID>1</PMID><Article>'
        "<ArticleTitle>CO<sub>2</sub> and Ca<sup>2+</sup> in V<sub>max</sub></ArticleTitle><Abstract><AbstractText>"
        "LDL-C at 10<sup>3</sup> sites; P = 5 \u00d7 10<sup>-8</sup> (or 10<sup>\u22128</sup>); the effect size "
        '<mml:math xmlns:mml="http://www.w3.org/1998/Math/MathML"><mml:msup><mml:mi>R</mml:mi>'
        "<mml:mn>2</mml:mn></mml:msup></mml:math> was 0.41; "
        '<mml:math xmlns:mml="http://www.w3.org/1998/Math/MathML"><mml:msub><mml:mi>x</mml:mi>'
        "<mml:mi>i</mml:mi></mml:msub></mml:math> per site<sup>a</sup>."
        "</AbstractText></Abstract></Article></MedlineCitation></PubmedArticle></PubmedArticleSet>\n")
    [paper] = read_file(xml).papers
    assert paper.title == "CO₂ and Ca²⁺ in V_(max)"
    assert paper.abstract == ("LDL-C at 10³ sites; P = 5 × 10⁻⁸ (or 10⁻⁸); the effect size R² was 0.41; "
                              "x_i per site^a.")


# -- OpenAlex -------------------------------------------------------------------------------

OPENALEX_GOLDEN = [
    {
        "paper_id": "2311.10418",  # arXiv id from the arxiv.org location
        "title": "DynaPipe: Optimizing Multi-task Training through Dynamic Pipelines",
        "authors": ["Chenyu Jiang", "Zhen Jia", "Chuan Wu"],
        # word order from the positions; "training" at 1 and 6
        "abstract": "Multi-task training needs dynamic pipelines; pipeline training is the the_end.",
        "year": 2024, "date": "2024-04-22", "doi": "10.1145/3627703.3629585", "arxiv_id": "2311.10418",
        "venue": "Proceedings of the Nineteenth European Conference on Computer Systems",
        "categories": ["Parallel Computing and Optimization Techniques"],
        "ids": {"openalex": "W4388745555"},
    },
    {
        "paper_id": "openalex:W2000000002", "title": "Gene networks in yeast", "authors": ["Ana Silva"],
        "abstract": "Yeast gene networks rewire under stress.", "year": 2021, "date": None,
        "doi": "10.1000/xyz", "arxiv_id": None, "venue": None, "categories": ["Biology", "Gene"],
        "ids": {"openalex": "W2000000002", "pmid": "33333333"},
    },
]


@pytest.mark.parametrize("name", ["openalex.jsonl", "openalex.jsonl.gz"])
def test_openalex_golden_records(name: str) -> None:
    assert _golden(DATA / name) == OPENALEX_GOLDEN
    assert read_file(DATA / name).left_out == {"OpenAlex works without an abstract": 1}


def test_openalex_api_response() -> None:
    [paper] = read_file(DATA / "openalex_api.json").papers
    assert paper.abstract == "Sparse attention scales; dense attention does not."
    assert (paper.venue, paper.year, paper.authors) == ("Transactions of the ACL", 2022, ["Rui Zhang"])


def test_openalex_and_semantic_scholar_journal_works_export_as_journal_articles(tmp_path: Path) -> None:
    works = [{"id": f"https://openalex.org/W{n}", "display_name": f"{kind.title()} work", "publication_year": 2022,
              "primary_location": {"source": {"display_name": venue, "type": kind}},
              "authorships": [{"author": {"display_name": "Rui Zhang"}}],
              "abstract_inverted_index": {"Sparse": [0], "attention.": [1]}}
             for n, venue, kind in [(1, "Transactions of the ACL", "journal"), (2, "NeurIPS", "conference")]]
    (tmp_path / "works.json").write_text(json.dumps({"results": works}), encoding="utf-8")
    bib = export(read_file(tmp_path / "works.json").papers, "bibtex")
    assert "@article{zhang2022journal,\n\tauthor = {Zhang, Rui},\n\ttitle = {Journal work},\n\tjournal = {Transactions of the ACL}" in bib
    assert "@inproceedings{zhang2022conference," in bib and "booktitle = {NeurIPS}" in bib
    s2 = [{"paperId": f"p{n}", "corpusId": n, "title": f"Paper {n}", "abstract": "Retrieval helps.", "year": 2020,
           "venue": venue, "authors": [{"name": "Lena Vogt"}], **extra}
          for n, venue, extra in [(1, "Nature", {"publicationVenue": {"type": "journal"}}),
                                  (2, "ACL", {"publicationVenue": {"type": "conference"},
                                              "publicationTypes": ["JournalArticle", "Conference"]}),
                                  (3, "Cell", {"publicationTypes": ["JournalArticle"]})]]
    (tmp_path / "s2.json").write_text(json.dumps({"data": s2}), encoding="utf-8")
    types = [i["type"] for i in json.loads(export(read_file(tmp_path / "s2.json").papers, "csl-json"))]
    assert types == ["article-journal", "paper-conference", "article-journal"]


def _work(ident: str, words: str, doi: str = "") -> dict[str, object]:
    return {"id": f"https://openalex.org/{ident}", "doi": doi or None, "display_name": f"Work {ident}",
            "publication_year": 2023, "abstract_inverted_index": {w: [i] for i, w in enumerate(words.split())}}


def test_openalex_json_lines_whose_first_line_is_bad_keep_their_other_lines(tmp_path: Path) -> None:
    good = [json.dumps(_work("W2", "Sharded tables speed up training.")),
            json.dumps(_work("W3", "Sharded data parallel cuts memory."))]
    part = tmp_path / "part_000.jsonl"
    part.write_text(json.dumps(_work("W1", "This record was cut off."))[:60] + "\n" + "\n".join(good) + "\n")
    with pytest.raises(ParseError) as refused:
        read_all([part], skip_bad=False)
    assert "part_000.jsonl:1: 2 good and 1 bad record(s); first: not valid JSON" in str(refused.value)
    assert "--skip-bad" in refused.value.hint
    results, skipped, _ = read_all([part], skip_bad=True)
    assert [p.paper_id for p in results[0].papers] == ["openalex:W2", "openalex:W3"]
    [bad] = skipped
    assert "part_000.jsonl:1: not valid JSON (Invalid control character at column 61)" in bad
    assert "hint: JSON Lines hold one complete object per line" in bad


@pytest.mark.parametrize(("name", "cut", "line"), [("openalex_api.json", "\"display_name\": \"Rui", 10),
                                                 ("s2_graph.json", "\"title\": \"No abstract", 3)])
def test_a_truncated_api_document_names_its_line(tmp_path: Path, name: str, cut: str, line: int) -> None:
    text = (DATA / name).read_text()
    assert text.splitlines()[line - 1].find(cut) >= 0  # the line the file now ends on
    short = tmp_path / name
    short.write_text(text[:text.index(cut) + len(cut)])
    with pytest.raises(ParseError) as refused:
        read_file(short)
    assert str(refused.value).startswith(f"{short.as_posix()}:{line}: not valid JSON (Unterminated string")
    assert "download it again" in refused.value.hint


def test_records_of_a_pretty_printed_api_page_have_their_own_lines(tmp_path: Path) -> None:
    page = tmp_path / "page.json"
    page.write_text(json.dumps({"meta": {"count": 3}, "results": [
        _work("W1", "Buff trains long sequences.", "10.1000/buff"),
        _work("W2", "Buff trains long sequences fast.", "10.1000/buff"),  # the same paper again
        {**_work("W3", "A bad record."), "authorships": 5},
    ]}, indent=2))
    result = read_file(page)
    assert [p.line for p in result.papers] == [6, 26]  # where each record starts
    [bad] = result.problems
    assert bad.line == 49 and "field of the wrong type" in str(bad)
    [paper] = merge_papers(result.papers)
    assert [(e["line"], e.get("matched")) for e in paper.sources] == [(6, None), (26, "same DOI 10.1000/buff")]
    compact = tmp_path / "compact.json"  # the same page on one line, as the API sends it
    compact.write_text(page.read_text().replace("\n", " "))
    [bad] = read_file(compact).problems
    assert str(bad).startswith(f"{compact.as_posix()}:1: record 3 on this line: an OpenAlex work")


# -- Semantic Scholar -----------------------------------------------------------------------


def test_a_semantic_scholar_batch_answer_with_ids_not_found_is_read(tmp_path: Path) -> None:
    """POST /graph/v1/paper/batch answers an id it has no paper for with null: such a saved
    answer was "not a Semantic Scholar paper" at that line and the ingest exited 2."""
    (tmp_path / "batch.json").write_text(json.dumps([
        {"paperId": "649def34f8be52c8b66281af98ae884c09aef38b", "title": "DynaPipe",
         "externalIds": {"ArXiv": "2311.10418", "CorpusId": 265281234},
         "abstract": "Multi-task model training has been adopted.", "year": 2023,
         "authors": [{"authorId": "1", "name": "Chenyu Jiang"}]},
        None], indent=2), encoding="utf-8")
    result = read_file(tmp_path / "batch.json")
    assert not result.problems
    assert [p.paper_id for p in result.papers] == ["2311.10418"]
    assert result.left_out == {"null records (ids the API found no paper for)": 1}

def test_semantic_scholar_datasets_joined_on_corpusid() -> None:
    results, skipped, _ = read_all([DATA / "s2_papers.jsonl", DATA / "s2_abstracts.jsonl"], skip_bad=False)
    assert not skipped
    papers = {p.paper_id: p for r in results for p in r.papers}
    assert set(papers) == {"2311.10418", "s2:111"}
    dyna = papers["2311.10418"]
    assert dyna.abstract.startswith("Multi-task model training has been adopted")
    assert (dyna.doi, dyna.venue, dyna.year, dyna.categories) == (
        "10.1145/3627703.3629585", "European Conference on Computer Systems", 2023, ["Computer Science"])
    assert papers["s2:111"].ids == {"s2": "111", "pmid": "31452104"}
    left = {k: v for r in results for k, v in r.left_out.items()}
    assert left == {"Semantic Scholar papers whose abstract is in none of the files read": 1,
                    "Semantic Scholar abstracts without a paper record": 1}


def test_semantic_scholar_graph_api() -> None:
    result = read_file(DATA / "s2_graph.json")
    assert _golden(DATA / "s2_graph.json") == [{
        "paper_id": "s2:5000", "title": "Retrieval helps small models", "authors": ["Lena Vogt", "Omar Haddad"],
        "abstract": "Retrieval lets small models match large ones on open questions.", "year": 2020,
        "date": "2020-07-05", "doi": "10.18653/v1/2020.acl-main.1", "arxiv_id": None,
        "venue": "Annual Meeting of the Association for Computational Linguistics",
        "categories": ["Computer Science", "Linguistics"], "ids": {"s2": "5000"},
    }]
    assert result.left_out == {"Semantic Scholar papers without an abstract": 1}


# -- Zotero ---------------------------------------------------------------------------------


@pytest.fixture()
def library(tmp_path: Path) -> Path:
    return sample_library(tmp_path / "zotero.sqlite")


ZOTERO_GOLDEN = [
    {
        "paper_id": "2311.10418", "title": "DynaPipe: Optimizing Multi-task Training through Dynamic Pipelines",
        "authors": ["Chenyu Jiang", "Zhen Jia", "Shuai Zheng"],  # in order; the editor is no author
        "abstract": "Multi-task model training has been adopted to enable a single deep neural network "
                    "model to handle multiple tasks.",
        "year": 2024, "date": "2024-04-22", "doi": "10.1145/3627703.3629585",
        "arxiv_id": "2311.10418",  # from `extra`
        "venue": "Proceedings of the Nineteenth European Conference on Computer Systems",
        "categories": ["Systems"], "ids": {"zotero": "DYNA0001"},
    },
    {
        "paper_id": "2305.12345", "title": "FlexPipe: pipelined training on elastic clusters",
        "authors": ["Ada Lovelace"], "abstract": "We present FlexPipe for elastic clusters.",
        "year": 2023, "date": None,  # "2023-05-00": no day
        "doi": None, "arxiv_id": "2305.12345",  # from archiveID
        "venue": None, "categories": ["Pipelines"], "ids": {"zotero": "PREP0001"},
    },
    {
        "paper_id": "2201.01234", "title": "Sparse retrieval at scale", "authors": ["Rui Zhang"],
        "abstract": "Sparse retrieval scales to billions of documents.", "year": 2022, "date": None,
        "doi": None, "arxiv_id": "2201.01234",  # from the URL
        "venue": "Journal of Retrieval", "categories": ["Retrieval"], "ids": {"zotero": "URLA0001"},
    },
]


def test_zotero_golden_records(library: Path) -> None:
    before = hashlib.sha256(library.read_bytes()).hexdigest()
    result = read_file(library)
    assert result.layout == "zotero"
    assert _golden(library) == ZOTERO_GOLDEN  # no trashed item, no note, no attachment
    assert result.left_out == {"Zotero items in the trash": 1, "Zotero items without an abstract": 1}
    assert result.note == "Zotero library, schema version 121"
    assert hashlib.sha256(library.read_bytes()).hexdigest() == before  # never written
    assert sorted(p.name for p in library.parent.iterdir()) == ["zotero.sqlite"]  # no journal left


def test_zotero_journal_articles_and_one_field_creators_export_as_zotero_has_them(tmp_path: Path) -> None:
    lib = Library(tmp_path / "zotero.sqlite")
    lib.item("journalArticle", "WHO00001", {"title": "Global report", "abstractNote": "Tuberculosis fell.",
                                            "date": "2023", "publicationTitle": "The Lancet"},
             [(None, "World Health Organization", "author"), ("Gabriel", "García Márquez", "author")])
    lib.item("conferencePaper", "CONF0001", {"title": "Pipelines", "abstractNote": "Pipelines are fast.",
                                             "date": "2023", "proceedingsTitle": "Proceedings of MLSys"},
             [("Ada", "Lovelace", "author")])
    lib.close()
    papers = read_file(tmp_path / "zotero.sqlite").papers
    assert papers[0].authors == ["World Health Organization", "Gabriel García Márquez"]
    bib = export(papers, "bibtex")
    assert ("@article{worldhealthorganization2023global,\n\tauthor = {{World Health Organization} and "
            "Garc{\\'\\i}a M{\\'a}rquez, Gabriel},\n\ttitle = {Global report},\n\tjournal = {The Lancet}") in bib
    assert "@inproceedings{lovelace2023pipelines," in bib and "booktitle = {Proceedings of MLSys}" in bib
    csl = json.loads(export(papers, "csl-json"))
    assert csl[0]["author"] == [{"literal": "World Health Organization"}, {"family": "García Márquez", "given": "Gabriel"}]


def test_zotero_feed_items_are_not_library_items(tmp_path: Path) -> None:
    lib = Library(tmp_path / "zotero.sqlite")
    lib.item("journalArticle", "MINE0001", {"title": "Elastic training on preemptible instances",
                                            "abstractNote": "We train on preemptible instances."})
    nature = lib.feed("Nature - Latest Research", "https://www.nature.com/nature.rss")
    lib.feed_item(nature, "FEED0001", {"title": "Unread RSS item: coral reef bleaching",
                                       "abstractNote": "Coral reefs bleached in 54 countries."},
                  "https://www.nature.com/articles/x")
    lib.close()
    result = read_file(tmp_path / "zotero.sqlite")
    assert [p.title for p in result.papers] == ["Elastic training on preemptible instances"]
    assert result.left_out == {"Zotero feed items (RSS subscriptions, not the library)": 1}


def test_zotero_data_directory(library: Path) -> None:
    (library.parent / "storage").mkdir()
    (library.parent / "storage" / "notes.txt").write_text("Abstract: not a paper of the library\n")
    results, _, _ = read_all([library.parent], skip_bad=False)
    assert [r.layout for r in results] == ["zotero"]


def test_zotero_locked_by_a_running_zotero_is_still_read(library: Path) -> None:
    zotero = sqlite3.connect(library)
    zotero.execute("BEGIN EXCLUSIVE")  # what Zotero holds while it writes
    try:
        plain = sqlite3.connect(f"file:{library}?mode=ro", uri=True, timeout=0.1)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            plain.execute("SELECT COUNT(*) FROM items").fetchone()  # an ordinary reader fails
        plain.close()
        assert [p.paper_id for p in read_file(library).papers] == ["2311.10418", "2305.12345", "2201.01234"]
    finally:
        zotero.rollback()
        zotero.close()


def test_zotero_collection_takes_its_subcollections(library: Path) -> None:
    result = read_file(library, collection="Systems")
    assert [p.paper_id for p in result.papers] == ["2311.10418", "2305.12345"]  # Pipelines is inside
    assert result.left_out["Zotero items outside the collection"] == 2  # one has no abstract either
    with pytest.raises(InputError, match="no Zotero collection named 'Nope'"):
        read_file(library, collection="Nope")


def test_collection_without_a_zotero_library_is_refused() -> None:
    with pytest.raises(InputError, match="--collection"):
        read_all([DATA / "pubmed.xml"], skip_bad=False, collection="Systems")


def test_sqlite_that_is_not_zotero(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(ParseError, match="not a Zotero library"):
        read_file(other)


def test_a_damaged_zotero_library_is_refused_naming_the_file(tmp_path: Path) -> None:
    """A schema entry whose name is not UTF-8 (as a flipped byte in sqlite_master leaves it):
    SQLite's own message about it could not be decoded, and `rag ingest` said "a bug in rag"
    (exit 1, UnicodeDecodeError from reading the schema version)."""
    library = sample_library(tmp_path / "zotero.sqlite")
    con = sqlite3.connect(library)
    con.execute("PRAGMA writable_schema=ON")
    con.execute("UPDATE sqlite_master SET name = CAST(X'6974656d73b9' AS TEXT), sql = 'CREATE x' "
                "WHERE name = 'items'")
    con.commit()
    con.close()
    done = run_rag("ingest", "-q", "zotero.sqlite", cwd=tmp_path, env={"RAG_HOME": str(tmp_path / "h")})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: zotero.sqlite: SQLite database whose own records cannot be read")
    assert "zotero.sqlite.bak" in done.stderr and "bug" not in done.stderr


@pytest.mark.parametrize("name", ["openalex.jsonl", "openalex_api.json", "s2_graph.json",
                                  "s2_papers.jsonl", "arxiv_snapshot.json", "pubmed.xml"])
def test_a_utf8_byte_order_mark_changes_nothing(tmp_path: Path, name: str) -> None:
    bom = tmp_path / name
    bom.write_bytes(b"\xef\xbb\xbf" + (DATA / name).read_bytes())  # as Windows tools save text
    plain, result = read_file(DATA / name), read_file(bom)
    assert (result.layout, result.problems, result.left_out) == (plain.layout, [], plain.left_out)
    assert [p.to_dict() | {"source": ""} for p in result.papers] == [
        p.to_dict() | {"source": ""} for p in plain.papers]


def test_detected_from_content_not_name(tmp_path: Path, library: Path) -> None:
    for src, name in [(DATA / "pubmed.xml", "a.txt"), (DATA / "openalex.jsonl", "b.json"), (library, "c.bin")]:
        shutil.copy(src, tmp_path / name)
    assert [read_file(tmp_path / n).layout for n in ("a.txt", "b.json", "c.bin")] == [
        "pubmed-xml", "openalex", "zotero"]


# -- What metadata services write into titles and abstracts ---------------------------------


def test_html_and_jats_markup_is_read_as_the_text_it_marks_up(tmp_path: Path) -> None:
    """OpenAlex and Semantic Scholar titles carry HTML (<i>, <sub>), Crossref's abstracts JATS
    (<jats:p>, a <jats:title> heading), Zotero's rich-text titles <i> and <span class="nocase">:
    the tags were indexed, shown and exported (`{\\ensuremath{<}}i{\\ensuremath{>}}`)."""
    work = {"id": "https://openalex.org/W1", "publication_year": 2022,
            "display_name": "Growth of <i>Escherichia coli</i> in CO<sub>2</sub>-rich media",
            "abstract_inverted_index": {
                "<jats:title>Abstract</jats:title><jats:p>We": [0], "grew": [1], "<jats:italic>E.": [2],
                "coli</jats:italic>": [3], "at": [4], "10<sup>\u22123</sup>": [5], "M.</jats:p><jats:p>Growth": [6],
                "doubled.</jats:p>": [7]}}
    (tmp_path / "works.json").write_text(json.dumps({"results": [work]}), encoding="utf-8")
    [oa] = read_file(tmp_path / "works.json").papers
    assert oa.title == "Growth of Escherichia coli in CO\u2082-rich media"
    assert oa.abstract == "We grew E. coli at 10\u207b\u00b3 M. Growth doubled."
    s2 = {"paperId": "p1", "corpusId": 1, "title": "Retrieval &amp; reranking <b>at scale</b>", "year": 2020,
          "abstract": "<p>Retrieval helps.</p><p>Reranking &lt;b&gt; helps more.</p>", "authors": [{"name": "Lena Vogt"}]}
    (tmp_path / "s2.json").write_text(json.dumps({"data": [s2]}), encoding="utf-8")
    [paper] = read_file(tmp_path / "s2.json").papers
    assert (paper.title, paper.abstract) == ("Retrieval & reranking at scale",
                                             "Retrieval helps. Reranking <b> helps more.")
    lib = Library(tmp_path / "zotero.sqlite")
    lib.item("journalArticle", "RICH0001", {
        "title": '<i>Drosophila</i> wing growth needs <span class="nocase">Dpp</span>',
        "abstractNote": "Wing discs grow.", "date": "2021"}, [("Ada", "Lovelace", "author")])
    lib.close()
    [zot] = read_file(tmp_path / "zotero.sqlite").papers
    assert zot.title == "Drosophila wing growth needs Dpp"
    bib = export([oa, paper, zot], "bibtex")
    assert "jats" not in bib and bib.count("\\ensuremath{<}") == 1  # the text's own <b>
    # an author's own text (an arXiv listing, `Abstract:` lines) keeps what it says about tags
    (tmp_path / "lines.txt").write_text("Abstract: Browsers render <p> and <div> elements.\n")
    assert read_file(tmp_path / "lines.txt").papers[0].abstract == "Browsers render <p> and <div> elements."


def test_a_preprint_server_is_no_venue(tmp_path: Path) -> None:
    """OpenAlex names arXiv as a work's source ("arXiv (Cornell University)", a repository),
    Semantic Scholar as its venue ("arXiv.org"), a BibTeX export as its journal ("ArXiv"): the
    preprint was exported as @inproceedings{booktitle = {arXiv (Cornell University)}} and
    matched `--venue arxiv`. A repository is passed over for a location that is a venue."""
    arxiv = {"display_name": "arXiv (Cornell University)", "type": "repository"}
    works = [
        {**_work("W1", "Attention is all you need."), "primary_location": {"source": arxiv},
         "locations": [{"source": arxiv, "landing_page_url": "https://arxiv.org/abs/1706.03762"}]},
        {**_work("W2", "Pipelines train fast."), "primary_location": {"source": arxiv},
         "locations": [{"source": arxiv}, {"source": {"display_name": "Transactions of the ACL", "type": "journal"}}]},
    ]
    (tmp_path / "works.json").write_text(json.dumps({"results": works}), encoding="utf-8")
    preprint, published = read_file(tmp_path / "works.json").papers
    assert (preprint.venue, preprint.arxiv_id) == (None, "1706.03762")
    assert (published.venue, published.venue_kind) == ("Transactions of the ACL", "journal")
    s2 = {"paperId": "p1", "corpusId": 1, "title": "A preprint", "abstract": "Preprints help.", "year": 2024,
          "venue": "arXiv.org", "journal": {"name": "ArXiv", "volume": "abs/2401.00001"},
          "externalIds": {"ArXiv": "2401.00001"}, "authors": [{"name": "Ann Author"}]}
    (tmp_path / "s2.json").write_text(json.dumps({"data": [s2, {**s2, "paperId": "p2", "venue": ""}]}))
    assert [p.venue for p in read_file(tmp_path / "s2.json").papers] == [None, None]
    (tmp_path / "refs.bib").write_text("@article{a, title = {A preprint}, journal = {ArXiv}, volume = "
                                       "{abs/2401.00001}, year = {2024}, abstract = {Preprints help.}}\n")
    [bib] = read_file(tmp_path / "refs.bib").papers
    assert bib.venue is None
    assert export([preprint], "bibtex").startswith("@misc{")


def test_an_old_style_arxiv_id_gives_the_year_as_a_new_style_one_does(tmp_path: Path) -> None:
    """A record with no year takes it from its arXiv id: 2301.00001v3 gave 2023, but
    hep-th/9901001 (January 1999) and cs/0601001 gave none, so `--year 1999` missed them."""
    (tmp_path / "refs.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"title": "Branes", "abstract": "Branes wrap cycles.", "arxiv_id": "hep-th/9901001v2"},
        {"title": "Routing", "abstract": "Routing on networks.", "arxiv_id": "cs/0601001"},
        {"title": "Recent", "abstract": "A recent preprint.", "arxiv_id": "arXiv:2301.00001v3"},
    ]) + "\n")
    (tmp_path / "refs.bib").write_text("@misc{w, title = {Strings}, eprint = {hep-th/9711200}, "
                                       "archiveprefix = {arXiv}, abstract = {Large N limits.}}\n")
    papers = read_file(tmp_path / "refs.jsonl").papers + read_file(tmp_path / "refs.bib").papers
    assert [(p.arxiv_id, p.year) for p in papers] == [
        ("hep-th/9901001", 1999), ("cs/0601001", 2006), ("2301.00001", 2023), ("hep-th/9711200", 1997)]


# -- CSL-JSON -------------------------------------------------------------------------------

ZOTERO_CSL = [
    {"id": "http://zotero.org/users/local/x/items/DYNA0001", "type": "paper-conference",
     "abstract": "Multi-task model training has been adopted to enable a single model to handle multiple tasks.",
     "collection-title": "EuroSys '24",
     "container-title": "Proceedings of the Nineteenth European Conference on Computer Systems",
     "DOI": "10.1145/3627703.3629585", "page": "542\u2013559", "publisher": "Association for Computing Machinery",
     "title": "DynaPipe: Optimizing Multi-task Training through Dynamic Pipelines",
     "URL": "https://dl.acm.org/doi/10.1145/3627703.3629585",
     "author": [{"family": "Jiang", "given": "Chenyu"}, {"family": "Berg", "given": "Anna",
                                                        "non-dropping-particle": "van der"}],
     "accessed": {"date-parts": [["2024", 5, 2]]}, "issued": {"date-parts": [["2024", 4, 22]]}},
    {"id": "http://zotero.org/users/local/x/items/PREP0001", "type": "article", "title": "FlexPipe",
     "abstract": "We present FlexPipe for elastic clusters.", "number": "arXiv:2305.12345", "publisher": "arXiv",
     "DOI": "10.48550/arXiv.2305.12345", "URL": "http://arxiv.org/abs/2305.12345", "note": "arXiv:2305.12345 [cs]",
     "author": [{"literal": "Google Research"}], "issued": {"date-parts": [["2023", 5, 20]]}},
    {"id": "http://zotero.org/users/local/x/items/NOAB0001", "type": "article-journal", "title": "No abstract",
     "container-title": "Nature", "issued": {"date-parts": [[2020]]}},
    {"id": "WHO", "type": "article-journal", "title": "Global report", "abstract": "Tuberculosis fell.",
     "container-title": "The Lancet", "PMID": "31452104", "issued": {"literal": "in press"},
     "author": [{"family": "King", "given": "Martin Luther", "suffix": "Jr."}]},
    {"id": "raw", "type": "article-journal", "title": "Raw date", "abstract": "Dated as written.",
     "container-title": "Cell", "issued": {"raw": "March 2021"}},
]


def test_a_zotero_csl_json_export_is_read(tmp_path: Path) -> None:
    """Zotero's "Export Library… → CSL JSON" (a pretty-printed list, the year as a string)
    was "content is in no known layout"."""
    (tmp_path / "My Library.json").write_text(json.dumps(ZOTERO_CSL, indent="\t"), encoding="utf-8")
    result = read_file(tmp_path / "My Library.json")
    assert result.layout == "csl-json" and result.left_out == {"CSL-JSON items without an abstract": 1}
    dyna, flex, who, raw = result.papers
    assert (raw.year, raw.date) == (2021, None)  # a raw date as people write one: its year
    assert (dyna.title, dyna.authors, dyna.year, dyna.date, dyna.doi, dyna.venue, dyna.venue_kind, dyna.line) == (
        "DynaPipe: Optimizing Multi-task Training through Dynamic Pipelines", ["Chenyu Jiang", "Anna van der Berg"],
        2024, "2024-04-22", "10.1145/3627703.3629585",
        "Proceedings of the Nineteenth European Conference on Computer Systems", None, 2)
    assert (flex.paper_id, flex.arxiv_id, flex.authors, flex.venue) == ("2305.12345", "2305.12345", ["Google Research"], None)
    assert (who.year, who.venue_kind, who.ids, who.authors) == (None, "journal", {"pmid": "31452104", "key": "WHO"},
                                                                 ["Martin Luther King Jr."])
    assert json.loads(export([who], "csl-json"))[0]["author"] == [
        {"family": "King", "given": "Martin Luther", "suffix": "Jr."}]


def test_an_arxiv_doi_gives_the_arxiv_id(tmp_path: Path) -> None:
    """A preprint known only by its arXiv DOI (Zotero's BibTeX export of a preprint item:
    doi = {10.48550/arXiv.2311.10418}, no eprint) had no arXiv id: no eprint in its export,
    an id made from its title, and `rag papers show 2311.10418` did not find it."""
    (tmp_path / "refs.bib").write_text(
        "@misc{jiang_dynapipe_2023, title = {{DynaPipe}: Optimizing Multi-task Training}, publisher = {arXiv},\n"
        "  doi = {10.48550/arXiv.2311.10418}, author = {Jiang, Chenyu}, year = {2023},\n"
        "  abstract = {Multi-task model training has been adopted.}}\n")
    (tmp_path / "refs.jsonl").write_text(json.dumps({"title": "Old", "abstract": "Old-style ids too.",
                                                     "doi": "https://doi.org/10.48550/arXiv.hep-th/9901001"}) + "\n")
    papers = read_file(tmp_path / "refs.bib").papers + read_file(tmp_path / "refs.jsonl").papers
    assert [(p.paper_id, p.arxiv_id, p.year) for p in papers] == [
        ("2311.10418", "2311.10418", 2023), ("hep-th/9901001", "hep-th/9901001", 1999)]
    assert "eprint = {2311.10418}" in export(papers[:1], "bibtex")


# -- RIS ------------------------------------------------------------------------------------

ZOTERO_RIS = """TY  - CONF
TI  - DynaPipe: Optimizing Multi-task Training through Dynamic Pipelines
AU  - Jiang, Chenyu
AU  - van der Berg, Anna
AU  - King, Martin Luther, Jr.
T2  - Proceedings of the Nineteenth European Conference on Computer Systems
AB  - Multi-task model training has been adopted to enable a single model to handle multiple tasks.
DA  - 2024/04/22/
PY  - 2024
DO  - 10.1145/3627703.3629585
SP  - 542
EP  - 559
PB  - Association for Computing Machinery
UR  - https://dl.acm.org/doi/10.1145/3627703.3629585
ER  -

TY  - JOUR
AU  - Smith, J.
TI  - Statins in older adults
JO  - Nature
PY  - 2019///
N2  - Statins reduce events in adults over 75.
ER  -

TY  - UNPB
TI  - FlexPipe
AU  - Google Research
AB  - We present FlexPipe for elastic clusters.
PY  - 2023
UR  - http://arxiv.org/abs/2305.12345
N1  - arXiv:2305.12345 [cs]
ER  -

TY  - JOUR
TI  - No abstract here
PY  - 2020
ER  -
""".replace("ER  -\n", "ER  - \n")  # as written: a space after the dash, ended by the line


def test_a_zotero_or_endnote_ris_export_is_read(tmp_path: Path) -> None:
    """RIS, what Zotero, EndNote and Mendeley export (and `rag papers --format ris`), was
    "content is in no known layout"."""
    (tmp_path / "library.ris").write_text(ZOTERO_RIS, encoding="utf-8")
    result = read_file(tmp_path / "library.ris")
    assert result.layout == "ris" and result.left_out == {"RIS records without an abstract": 1}
    dyna, statins, flex = result.papers
    assert (dyna.authors, dyna.year, dyna.date, dyna.doi, dyna.venue, dyna.venue_kind, dyna.line) == (
        ["Chenyu Jiang", "Anna van der Berg", "Martin Luther King Jr."], 2024, "2024-04-22",
        "10.1145/3627703.3629585", "Proceedings of the Nineteenth European Conference on Computer Systems", None, 1)
    assert (statins.abstract, statins.year, statins.venue, statins.venue_kind, statins.line) == (
        "Statins reduce events in adults over 75.", 2019, "Nature", "journal", 17)
    assert (flex.paper_id, flex.authors) == ("2305.12345", ["Google Research"])
    (tmp_path / "cut.ris").write_text("TY  - JOUR\nTI  - A\nAB  - One.\nTY  - JOUR\nTI  - B\nAB  - Two.\nER  - \n")
    cut = read_file(tmp_path / "cut.ris")  # a record with no ER: an error, the next one kept
    assert [p.title for p in cut.papers] == ["B"]
    assert [str(e).splitlines()[0] for e in cut.problems] == [
        f"{(tmp_path / 'cut.ris').as_posix()}:1: RIS record with no `ER  - ` line ending it"]


def test_a_wiley_or_cochrane_ris_export_with_header_lines_is_read(tmp_path: Path) -> None:
    """Wiley Online Library and the Cochrane Library write "Provider:" and "Content:" lines
    (Cochrane also "Record #N of M") before each record, CRLF-ended; such a file was "content
    is in no known layout"."""
    record = ("Record #{n} of 2\r\nProvider: John Wiley & Sons, Ltd.\r\nContent: text/plain; charset=\"UTF-8\"\r\n\r\n"
              "TY  - JOUR\r\nAU  - {author}\r\nTI  - {title}\r\nJO  - The Lancet\r\nPY  - 2010\r\n"
              "AB  - {title} lowered blood pressure.\r\nER  - \r\n\r\n")
    (tmp_path / "citation-export.ris").write_bytes(
        (record.format(n=1, author="Smith, Anna", title="Trial one")
         + record.format(n=2, author="Nuñez, José", title="Trial two")).encode())
    result = read_file(tmp_path / "citation-export.ris")
    assert result.layout == "ris" and not result.problems
    assert [(p.title, p.authors, p.abstract, p.line) for p in result.papers] == [
        ("Trial one", ["Anna Smith"], "Trial one lowered blood pressure.", 5),
        ("Trial two", ["José Nuñez"], "Trial two lowered blood pressure.", 17)]


@pytest.mark.parametrize(("fmt", "name"), [("csl-json", "refs.json"), ("ris", "refs.ris")])
def test_rag_s_own_export_reads_back_as_the_same_papers(fmt: str, name: str, tmp_path: Path) -> None:
    """`rag papers --format csl-json|ris` into a fresh index: the same papers and fields."""
    from tests.conftest import SEEDS

    results, _, _ = read_all([SEEDS], skip_bad=False)
    seeds = merge_papers([p for r in results for p in r.papers])
    (tmp_path / name).write_text(export(seeds, fmt), encoding="utf-8")
    back = {p.abstract: p for p in read_file(tmp_path / name).papers}
    assert len(back) == len(seeds) == 60
    for p in seeds:
        q = back[p.abstract]
        assert (q.title or q.label, q.authors, q.year, q.date, q.doi, q.arxiv_id, q.venue, q.venue_kind,
                q.journal_ref) == (p.title or p.label, p.authors, p.year, p.date, p.doi, p.arxiv_id, p.venue,
                                   p.venue_kind, p.journal_ref)
        assert q.paper_id == p.paper_id  # a paper without a title too, exported under its label


# -- arXiv API feed -------------------------------------------------------------------------

ARXIV_FEED = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <link href="http://arxiv.org/api/query?search_query%3Dall%3Adynapipe" rel="self" type="application/atom+xml"/>
  <title type="html">ArXiv Query: search_query=all:dynapipe&amp;id_list=&amp;start=0&amp;max_results=10</title>
  <id>http://arxiv.org/api/cHxbiOdZaP56ODnBPIenZhzg5f8</id>
  <updated>2024-05-01T00:00:00-04:00</updated>
  <opensearch:totalResults xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">2</opensearch:totalResults>
  <entry>
    <id>http://arxiv.org/abs/2311.10418v2</id>
    <updated>2024-03-04T10:00:00Z</updated>
    <published>2023-11-17T09:50:40Z</published>
    <title>DynaPipe: Optimizing Multi-task Training through Dynamic
  Pipelines</title>
    <summary>  Multi-task model training has been adopted to enable a single deep neural
network model to handle multiple tasks in $O(n\\log n)$ time.
</summary>
    <author><name>Chenyu Jiang</name></author>
    <author><name>Zhen Jia</name></author>
    <arxiv:doi xmlns:arxiv="http://arxiv.org/schemas/atom">10.1145/3627703.3629585</arxiv:doi>
    <arxiv:comment xmlns:arxiv="http://arxiv.org/schemas/atom">14 pages, accepted at EuroSys 2024</arxiv:comment>
    <arxiv:journal_ref xmlns:arxiv="http://arxiv.org/schemas/atom">EuroSys 2024</arxiv:journal_ref>
    <link title="doi" href="http://dx.doi.org/10.1145/3627703.3629585" rel="related"/>
    <arxiv:primary_category xmlns:arxiv="http://arxiv.org/schemas/atom" term="cs.DC" scheme="http://arxiv.org/schemas/atom"/>
    <category term="cs.DC" scheme="http://arxiv.org/schemas/atom"/>
    <category term="cs.LG" scheme="http://arxiv.org/schemas/atom"/>
  </entry>
  <entry>
    <id>http://arxiv.org/abs/hep-th/9901001v1</id>
    <published>1999-01-01T00:00:00Z</published>
    <title>Branes</title>
    <summary>Branes wrap cycles.</summary>
    <author><name>Ed Witten</name></author>
    <arxiv:primary_category xmlns:arxiv="http://arxiv.org/schemas/atom" term="hep-th"/>
  </entry>
  <entry>
    <id>http://arxiv.org/api/errors#incorrect_id_format_for_1234.1234v1</id>
    <title>Error</title>
    <summary>incorrect id format for 1234.1234v1</summary>
  </entry>
</feed>
"""


def test_an_arxiv_api_feed_is_read(tmp_path: Path) -> None:
    """A feed saved from export.arxiv.org/api/query was "content is in no known layout"."""
    (tmp_path / "query.xml").write_text(ARXIV_FEED, encoding="utf-8")
    result = read_file(tmp_path / "query.xml")
    assert result.layout == "arxiv-atom"
    assert _golden(tmp_path / "query.xml") == [
        {"paper_id": "2311.10418", "title": "DynaPipe: Optimizing Multi-task Training through Dynamic Pipelines",
         "authors": ["Chenyu Jiang", "Zhen Jia"],
         "abstract": "Multi-task model training has been adopted to enable a single deep neural network model "
                     "to handle multiple tasks in O(n log n) time.",
         "year": 2023, "date": "2023-11-17", "doi": "10.1145/3627703.3629585", "arxiv_id": "2311.10418",
         "venue": "EUROSYS", "categories": ["cs.DC", "cs.LG"], "ids": {}},
        {"paper_id": "hep-th/9901001", "title": "Branes", "authors": ["Ed Witten"], "abstract": "Branes wrap cycles.",
         "year": 1999, "date": "1999-01-01", "doi": None, "arxiv_id": "hep-th/9901001", "venue": None,
         "categories": ["hep-th"], "ids": {}}]
    [error] = result.problems
    assert "entry 3 is no arXiv paper (incorrect id format for 1234.1234v1)" in str(error)
    # the published record's fields over the preprint's, whichever is read first
    (tmp_path / "refs.bib").write_text("@inproceedings{j, title = {DynaPipe: Optimizing Multi-task Training through "
                                       "Dynamic Pipelines}, booktitle = {EuroSys '24}, year = {2024}, doi = "
                                       "{10.1145/3627703.3629585}, author = {Jiang, Chenyu}, abstract = {Published.}}\n")
    [paper] = merge_papers([*result.papers[:1], *read_file(tmp_path / "refs.bib").papers])
    assert (paper.paper_id, paper.abstract, paper.venue, paper.year) == ("2311.10418", "Published.", "EuroSys '24", 2024)


def test_dollar_amounts_in_an_abstract_are_kept(tmp_path: Path) -> None:
    """PubMed, RIS and OpenAlex write dollars bare; the span between two amounts was read as
    LaTeX maths ("cost 1,200 per patient-year versus3,400"): both signs and a space lost."""
    (tmp_path / "costs.nbib").write_text(
        "PMID- 31452105\nTI  - Statin costs.\n"
        "AB  - Treatment cost $1,200 per patient-year versus $3,400 for usual care, and\n"
        "      US$5 to US$50 per visit; the $k$ visits were modelled.\n"
        "FAU - Nuñez, José María\nDP  - 2019 Aug\n", encoding="utf-8")
    [paper] = read_file(tmp_path / "costs.nbib").papers
    assert paper.abstract == ("Treatment cost $1,200 per patient-year versus $3,400 for usual care, "
                              "and US$5 to US$50 per visit; the k visits were modelled.")
