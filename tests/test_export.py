"""Citation export: the seed papers as BibTeX, RIS and CSL-JSON that read back with the
libraries reference managers use, through the library, `rag papers --format` and the API."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bibtexparser
import pytest
import rispy
from bibtexparser import middlewares as mw
from fastapi.testclient import TestClient
from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db

from rag.corpus import expand_paths, merge_papers, read_file
from rag.corpus.paper import Paper, make_paper_id
from rag.corpus.text import make_label
from rag.errors import EXIT_INPUT, InputError
from rag.export import cite_keys, export, to_bibtex, to_csl_json, to_ris, write_export
from tests.conftest import SEEDS, run_rag

CSL_TYPES = {"article", "article-journal", "paper-conference"}


def flat(text: str | None) -> str | None:
    return " ".join(text.split()) if text is not None else None


@pytest.fixture(scope="module")
def seeds() -> list[Paper]:
    papers: list[Paper] = []
    for path in expand_paths([SEEDS]):
        papers += read_file(path).papers
    papers = merge_papers(papers)
    assert len(papers) == 60
    return papers


# -- reading back ---------------------------------------------------------------------------


def _decoder() -> LatexNodes2Text:
    """pylatexenc's LaTeX-to-text, taught four standard LaTeX macros it does not know or
    reads as a look-alike (\\textasciicircum prints "^", not "ˆ")."""
    db = get_default_latex_context_db()
    db.add_context_category("export-test", prepend=True, macros=[
        MacroTextSpec("textasciicircum", "^"), MacroTextSpec("textbraceleft", "{"),
        MacroTextSpec("textbraceright", "}"), MacroTextSpec("textquotedbl", '"'),
        MacroTextSpec("url", simplify_repl="%s"),
    ])
    return LatexNodes2Text(latex_context=db, math_mode="verbatim")


def parse_bibtex(text: str) -> dict[str, Any]:
    """key -> {"type", field: value}, with LaTeX decoded and authors as "First von Last"."""
    library = bibtexparser.parse_string(text, append_middleware=[
        mw.LatexDecodingMiddleware(decoder=_decoder()), mw.SeparateCoAuthors(),
        mw.SplitNameParts(), mw.MergeNameParts(style="first"),
    ])
    assert not library.failed_blocks, [b.error for b in library.failed_blocks]
    return {e.key: {"type": e.entry_type, **{f.key: f.value for f in e.fields}}
            for e in library.entries}


def ris_author(name: str) -> str:
    """RIS "Last, First[, Suffix]" back to "First Last[ Suffix]"."""
    last, _, rest = name.partition(", ")
    first, _, suffix = rest.partition(", ")
    return " ".join(x for x in (first, last, suffix) if x)


def csl_author(a: dict[str, str]) -> str:
    return " ".join(a[k] for k in ("given", "non-dropping-particle", "family", "suffix") if k in a)


def bibtex_braces_balance(text: str) -> bool:
    """BibTeX counts every brace, escaped or not: a field must close every one it opens."""
    depth = 0
    for ch in text:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


# -- BibTeX ---------------------------------------------------------------------------------


def test_seed_papers_bibtex_parses_back_with_every_field(seeds: list[Paper]) -> None:
    text = to_bibtex(seeds)
    assert bibtex_braces_balance(text)
    entries = parse_bibtex(text)
    keys = cite_keys(seeds)
    assert len(entries) == 60 and set(entries) == set(keys.values())
    for p in seeds:
        e = entries[keys[p.paper_id]]
        assert e["title"] == flat(p.title or p.label)
        assert e.get("author", []) == [flat(a) for a in p.authors]
        assert e.get("year") == (str(p.year) if p.year else None)
        assert e.get("doi") == p.doi
        assert e.get("eprint") == p.arxiv_id
        assert e.get("archivePrefix") == ("arXiv" if p.arxiv_id else None)
        assert e["abstract"] == flat(p.abstract)
        assert e.get("date") == p.date
        if p.venue:
            assert (e["type"], e["booktitle"]) == ("inproceedings", p.venue)
            assert e.get("note") == (p.journal_ref if p.journal_ref != p.venue else None)
        elif p.journal_ref:
            assert (e["type"], e["journal"]) == ("article", p.journal_ref)
        else:
            assert e["type"] == "misc"
    # The seeds hold some of the characters that need escaping; each came back above.
    assert "{\\textasciicircum}" in text and "{\\c{c}}" in text and "{\\%}" in text
    fusefps = entries["fusefps2023"]
    assert fusefps["url"] == "https://arxiv.org/abs/2309.05017" and fusefps["booktitle"] == "ASP-DAC"


def test_seed_papers_read_back_by_rag_itself(seeds: list[Paper], tmp_path: Path) -> None:
    """An export ingested again (a library moved to a fresh index) gives the same papers: the
    reader took the export's {\\textasciicircum} for "ˆ", so O(T^{-1}) came back as O(Tˆ{-1})."""
    (tmp_path / "refs.bib").write_text(to_bibtex(seeds), encoding="utf-8")
    back = {p.abstract: p for p in read_file(tmp_path / "refs.bib").papers}
    assert len(back) == 60
    for p in seeds:
        q = back[p.abstract]
        assert (q.paper_id, q.title or q.label, q.authors, q.year, q.doi, q.arxiv_id, q.venue, q.journal_ref) == (
            p.paper_id, p.title or p.label, p.authors, p.year, p.doi, p.arxiv_id, p.venue, p.journal_ref)


@pytest.mark.parametrize("name", ["refs.bib", "refs.ris", "refs.json"])
def test_journal_refs_come_back_from_every_export(name: str, tmp_path: Path) -> None:
    """An arXiv listing's journal ref, beside a venue (it was only a note, which no reader
    takes back) or alone (it came back as the venue), is the journal ref again once the
    export is ingested."""
    papers = [
        Paper(paper_id="2301.01234", abstract="FooNet sorts arrays.", arxiv_id="2301.01234", year=2023,
              journal_ref="Proc. VLDB Endow. 16(5):1000-1012, 2023"),
        Paper(paper_id="barsys-1", abstract="BarSys schedules jobs.", title="BarSys", authors=["Ann Lee"],
              year=2022, venue="OSDI", journal_ref="In Proc. OSDI '22, pp. 1-15"),
    ]
    write_export(papers, tmp_path / name)
    back = {p.abstract: p for p in read_file(tmp_path / name).papers}
    for p in papers:
        q = back[p.abstract]
        assert (q.journal_ref, q.venue, q.venue_kind) == (p.journal_ref, p.venue, p.venue_kind), name


@pytest.mark.parametrize("name", ["refs.bib", "refs.ris", "refs.json"])
def test_a_paper_without_a_title_comes_back_under_its_own_id(name: str, tmp_path: Path) -> None:
    """A paper without a title is exported under its label; ingested again, it took that
    label for its title and another id (one made from the title). Now it has its id and no
    title again, and so does a paper whose id its JSON Lines record gave."""
    abstract = "We present Skrull, a scheduler for long sequences that balances the load of each step."
    untitled = Paper(paper_id=make_paper_id(None, None, abstract), abstract=abstract,
                     label=make_label(None, abstract), year=2024)
    given = Paper(paper_id="doc-17", abstract="Caches help.", title="Caching", label="Caching", year=2023)
    assert untitled.label == "Skrull"
    write_export([untitled, given], tmp_path / name)
    back = read_file(tmp_path / name).papers
    assert [(q.paper_id, q.title, q.label) for q in back] == [
        (untitled.paper_id, None, "Skrull"), ("doc-17", "Caching", "Caching")]


def test_special_characters_round_trip() -> None:
    odd = Paper(
        paper_id="odd", title='Fast & 50% cheaper: $5 for #1, x_y {z} ~t a^b c\\d -- ``q\'\' "naïve"',
        authors=["Larissa Rozales Gonçalves", "Javier de Juan", "colby banbury", "Émile Zola",
                 "Smith and Wesson", "Ng, T. S. Eugene"],
        abstract="An unbalanced { brace, 中文 text, the ≈ sign, 3× faster and an\nembedded newline.",
        year=2024, doi="10.1000/a_b-c", venue="SOSP", journal_ref="Proc. SOSP '24",
    )
    text = to_bibtex([odd])
    assert bibtex_braces_balance(text), text
    e = parse_bibtex(text)[cite_keys([odd])["odd"]]
    assert e["title"] == odd.title
    assert e["abstract"] == flat(odd.abstract)
    assert e["author"] == ["Larissa Rozales Gonçalves", "Javier de Juan", "colby banbury",
                           "Émile Zola", "Smith and Wesson", "T. S. Eugene Ng"]
    assert e["doi"] == odd.doi  # verbatim: not escaped
    assert e["note"] == "Proc. SOSP '24"
    ris = rispy.loads(to_ris([odd]))[0]
    assert ris["title"] == odd.title and ris["abstract"] == flat(odd.abstract)
    csl = json.loads(to_csl_json([odd]))[0]
    assert csl["title"] == odd.title
    assert [csl_author(a) for a in csl["author"]][:2] == ["Larissa Rozales Gonçalves", "Javier de Juan"]


def test_keys_are_stable_unique_and_readable(seeds: list[Paper]) -> None:
    keys = cite_keys(seeds)
    assert keys == cite_keys(list(reversed(seeds)))  # not a matter of listing order
    assert len(set(keys.values())) == 60
    assert all(re.fullmatch(r"[a-z0-9]+", k) for k in keys.values())
    by_label = {p.label: keys[p.paper_id] for p in seeds}
    assert by_label["MegaBlocks: Efficient Sparse Training with Mixture-of-Experts"] == "gale2023megablocks"
    assert by_label["Breadth-First Pipeline Parallelism"] == "lamypoirier2023breadthfirst"
    assert by_label["FuseFPS"] == "fusefps2023"  # no authors: title word and year
    # The same first author, year and first title word: a, b in paper-id order, whatever
    # order the papers come in.
    twins = [Paper(paper_id=i, abstract="x", title="Deep Nets", authors=["Ann Lee"], year=2020)
             for i in ("p2", "p1", "p3")]
    assert cite_keys(twins) == {"p1": "lee2020deepa", "p2": "lee2020deepb", "p3": "lee2020deepc"}
    assert cite_keys(twins[::-1]) == cite_keys(twins)
    assert set(parse_bibtex(to_bibtex(twins))) == {"lee2020deepa", "lee2020deepb", "lee2020deepc"}


def test_keys_transliterate_letters_nfkd_does_not_take_apart() -> None:
    firsts = {"Kjersti Ødegård": "odegard", "Jan Łukasiewicz": "lukasiewicz", "Zoran Đinđić": "dindic",
              "Hans Straße": "strasse", "Peter Æbeltoft": "aebeltoft", "Anne Œhler": "oehler",
              "Þóra Þórsdóttir": "thorsdottir", "Emre Yıldız": "yildiz", "Émile Zola": "zola"}
    papers = [Paper(paper_id=str(i), abstract="x", title="Logic", authors=[name], year=2023)
              for i, name in enumerate(firsts)]
    assert list(cite_keys(papers).values()) == [f"{last}2023logic" for last in firsts.values()]


def test_a_paper_with_no_author_and_no_ascii_title_word_has_no_bare_year_key() -> None:
    """Keys came out as 2023a, 2023b: now the name or first word the abstract gives, else
    "paper", before the year, still told apart by a, b."""
    papers = [
        Paper(paper_id="zh", abstract="We present Skrull, a scheduler for long sequences.", title="长序列的调度",
              year=2023),
        Paper(paper_id="ru1", abstract="Мы изучаем кэширование.", title="Кэширование", year=2023),
        Paper(paper_id="ru2", abstract="Мы изучаем хранение.", title="Хранение", authors=["Иван Петров"], year=2023),
        Paper(paper_id="marks", abstract="Caches for key-value stores under skew.", title="???", year=2023),
    ]
    assert cite_keys(papers) == {"zh": "skrull2023", "ru1": "paper2023a", "ru2": "paper2023b",
                                 "marks": "caches2023"}
    assert list(parse_bibtex(to_bibtex(papers))) == ["skrull2023", "paper2023a", "paper2023b", "caches2023"]


def test_keys_are_the_same_in_every_export_from_one_index() -> None:
    """Two papers that share a key keep their a and b when exported one at a time (the
    references of two answers, collected in one .tex)."""
    index = [Paper(paper_id=i, abstract="x", title=t, authors=[a], year=2023, venue=v)
             for i, t, a, v in [("scaling-vit", "Scaling Vision Transformers to 22B Parameters", "Jane Smith", "CVPR"),
                                ("scaling-sparse", "Scaling Laws for Sparse Models", "John Smith", "ICML"),
                                ("other", "Other Work", "Ann Lee", "SOSP")]]
    one = parse_bibtex(export([index[1]], "bibtex", index))
    two = parse_bibtex(export([index[0]], "bibtex", index))
    assert (list(one), list(two)) == (["smith2023scalinga"], ["smith2023scalingb"])
    assert one["smith2023scalinga"]["booktitle"] == "ICML" and two["smith2023scalingb"]["booktitle"] == "CVPR"
    assert export([index[1], index[0]], "bibtex", index) == export(index[1::-1], "bibtex")
    assert json.loads(export([index[0]], "csl-json", index))[0]["id"] == "smith2023scalingb"
    assert rispy.loads(export([index[2]], "ris", index))[0]["id"] == "lee2023other"


def test_bibtex_titles_brace_capitals_a_sentence_case_style_would_lower() -> None:
    p = Paper(paper_id="p", abstract="x", year=2023,
              title="DynaPipe: Efficient Scheduling of GPU Clusters for BERT-style Large-Scale Models in the U.S.")
    text = to_bibtex([p])
    assert ("title = {{DynaPipe}: Efficient Scheduling of {GPU} Clusters for {BERT-style} "
            "Large-Scale Models in the {U.S}.}") in text
    assert parse_bibtex(text)["dynapipe2023"]["title"] == p.title


# -- journals and names, as their readers keep them ---------------------------------------------

JOURNALS = r"""
@article{art, author = {King, Jr., Martin Luther and Garc{\'\i}a M{\'a}rquez, Gabriel and {Google Research}},
  title = {Fault Tolerance for Training}, journal = {Journal of Systems Research}, year = {2022},
  abstract = {Checkpointing large models is slow.}}
@inproceedings{conf, author = {de la Fuente, Juan and {Ramón y Cajal}, Santiago}, title = {Pipelines},
  booktitle = {Proceedings of MLSys}, year = {2023}, abstract = {Pipelines are fast.}}
"""


def test_journal_articles_and_names_export_as_their_library_had_them(tmp_path: Path) -> None:
    (tmp_path / "lib.bib").write_text(JOURNALS, encoding="utf-8")
    art, conf = read_file(tmp_path / "lib.bib").papers
    # answers and `rag papers` show the names as before
    assert art.authors == ["Martin Luther King Jr.", "Gabriel García Márquez", "Google Research"]
    bib = to_bibtex([art, conf])
    assert "@article{king2022fault," in bib and "journal = {Journal of Systems Research}" in bib
    assert ("author = {King, Jr., Martin Luther and Garc{\\'\\i}a M{\\'a}rquez, Gabriel and "
            "{Google Research}}") in bib
    assert "@inproceedings{fuente2023pipelines," in bib and "booktitle = {Proceedings of MLSys}" in bib
    assert "author = {de la Fuente, Juan and {Ramón y Cajal}, Santiago}".replace("ó", "{\\'o}") in bib
    ris = rispy.loads(to_ris([art, conf]))
    assert (ris[0]["type_of_reference"], ris[0]["journal_name"], ris[0]["secondary_title"]) == (
        "JOUR", "Journal of Systems Research", "Journal of Systems Research")
    assert ris[0]["authors"] == ["King, Martin Luther, Jr.", "García Márquez, Gabriel", "Google Research"]
    assert (ris[1]["type_of_reference"], ris[1]["secondary_title"]) == ("CONF", "Proceedings of MLSys")
    csl = json.loads(to_csl_json([art, conf]))
    assert (csl[0]["type"], csl[0]["container-title"]) == ("article-journal", "Journal of Systems Research")
    assert csl[0]["author"] == [{"family": "King", "given": "Martin Luther", "suffix": "Jr."},
                                {"family": "García Márquez", "given": "Gabriel"}, {"literal": "Google Research"}]
    assert csl[1]["type"] == "paper-conference"
    # rag's own export reads back into rag with the same names and kind
    (tmp_path / "again.bib").write_text(bib, encoding="utf-8")
    again = read_file(tmp_path / "again.bib").papers
    assert [(p.authors, p.author_names, p.venue_kind) for p in again] == [
        (p.authors, p.author_names, p.venue_kind) for p in (art, conf)]


def test_names_in_chinese_japanese_or_korean_script_are_family_name_first() -> None:
    """"山田 太郎" (OpenAlex, Semantic Scholar and JSON Lines give a display string) was exported
    as family 太郎, given 山田: written in these scripts a name starts with the family name."""
    p = Paper(paper_id="cjk", title="深層学習", abstract="手法を提案する。", year=2021,
              authors=["山田 太郎", "김 민수", "Wei Li", "李 伟"])
    csl = json.loads(to_csl_json([p]))[0]
    assert csl["author"] == [{"family": "山田", "given": "太郎"}, {"family": "김", "given": "민수"},
                             {"family": "Li", "given": "Wei"}, {"family": "李", "given": "伟"}]
    assert "author = {山田, 太郎 and 김, 민수 and Li, Wei and 李, 伟}" in to_bibtex([p])
    assert rispy.loads(to_ris([p]))[0]["authors"] == ["山田, 太郎", "김, 민수", "Li, Wei", "李, 伟"]


def test_a_merged_paper_keeps_the_kind_of_the_venue_it_kept() -> None:
    """The venue kind and the name parts come from another record only with the venue and
    the authors they describe."""
    def merged(venue: str | None, authors: list[str]) -> str:
        conf = Paper(paper_id="c", abstract="x", title="DynaPipe", doi="10.1/d", venue=venue, year=2024,
                     authors=authors, line=1)
        journal = Paper(paper_id="j", abstract="x", title="DynaPipe", doi="10.1/d", venue="ACM TOCS", year=2024,
                        venue_kind="journal", authors=["Jiang Chenyu"], author_names=[{"literal": "Jiang Chenyu"}],
                        line=2)
        return to_bibtex(merge_papers([conf, journal]))

    both = merged("EuroSys", ["Chenyu Jiang"])
    assert "@inproceedings{jiang2024dynapipe," in both and "booktitle = {EuroSys}" in both
    only_journal = merged(None, [])
    assert "@article{jiangchenyu2024dynapipe," in only_journal and "journal = {ACM TOCS}" in only_journal


def test_a_record_from_an_older_index_exports_as_it_did() -> None:
    """A paper stored before venue kinds and name parts: a venue is a conference, names are
    read from the display strings."""
    old = Paper.from_dict({"paper_id": "p", "abstract": "x", "title": "Statins", "label": "Statins",
                           "authors": ["Kjersti Ødegård", "Ann Lee"], "venue": "Nature", "year": 2019})
    assert "@inproceedings{odegard2019statins," in to_bibtex([old])
    assert "author = {{\\O}deg{\\r{a}}rd, Kjersti and Lee, Ann}" in to_bibtex([old])
    assert old.content_hash() == "db352b21e410735f"  # as stored then: a re-ingest embeds nothing again


# -- RIS and CSL-JSON -----------------------------------------------------------------------


def test_seed_papers_ris_parses_back_with_every_field(seeds: list[Paper]) -> None:
    text = to_ris(seeds)
    assert text.startswith("TY  - ")
    records = rispy.loads(text)
    keys = cite_keys(seeds)
    assert len(records) == 60
    for p, r in zip(seeds, records, strict=True):
        assert r["id"] == keys[p.paper_id]
        assert r["title"] == flat(p.title or p.label)
        assert [ris_author(a) for a in r.get("authors", [])] == [flat(a) for a in p.authors]
        assert r.get("year") == (str(p.year) if p.year else None)
        assert r.get("doi") == p.doi
        assert r["abstract"] == flat(p.abstract)
        arxiv = [u for u in r.get("urls", []) if "arxiv.org/abs/" in u]
        assert [u.rsplit("/abs/", 1)[1] for u in arxiv] == ([p.arxiv_id] if p.arxiv_id else [])
        if p.date:
            assert r["date"] == p.date.replace("-", "/") + "/"
        if p.venue:
            assert (r["type_of_reference"], r["secondary_title"]) == ("CONF", p.venue)
        elif p.journal_ref:
            assert (r["type_of_reference"], r["journal_name"]) == ("JOUR", p.journal_ref)
        else:
            assert r["type_of_reference"] == ("UNPB" if p.arxiv_id else "GEN")


def test_seed_papers_csl_json_has_the_citeproc_fields(seeds: list[Paper]) -> None:
    items = json.loads(to_csl_json(seeds))
    keys = cite_keys(seeds)
    assert [i["id"] for i in items] == [keys[p.paper_id] for p in seeds]
    for p, item in zip(seeds, items, strict=True):
        assert item["type"] in CSL_TYPES
        assert item["title"] == flat(p.title or p.label) and item["abstract"] == flat(p.abstract)
        assert [csl_author(a) for a in item.get("author", [])] == [flat(a) for a in p.authors]
        assert all(set(a) <= {"family", "given", "non-dropping-particle", "suffix"}
                   for a in item.get("author", []))
        parts = item.get("issued", {}).get("date-parts", [[]])[0]
        assert parts[:1] == ([p.year] if p.year else [])
        assert all(isinstance(x, int) for x in parts)
        assert item.get("DOI") == p.doi
        assert item.get("container-title") == (p.venue or p.journal_ref)
        if p.arxiv_id:
            assert item["URL"] == f"https://arxiv.org/abs/{p.arxiv_id}"


def test_write_export_picks_the_format_from_the_extension(seeds: list[Paper], tmp_path: Path) -> None:
    two = seeds[15:17]
    assert write_export(two, tmp_path / "refs.BIB") == "bibtex"
    assert len(parse_bibtex((tmp_path / "refs.BIB").read_text(encoding="utf-8"))) == 2
    assert write_export(two, tmp_path / "refs.ris") == "ris"
    assert len(rispy.loads((tmp_path / "refs.ris").read_text(encoding="utf-8"))) == 2
    assert write_export(two, tmp_path / "refs.json") == "csl-json"
    assert len(json.loads((tmp_path / "refs.json").read_text(encoding="utf-8"))) == 2
    with pytest.raises(InputError) as info:
        write_export(two, tmp_path / "refs.txt")
    assert info.value.exit_code == EXIT_INPUT
    assert "'.txt'" in str(info.value) and ".bib" in info.value.hint and ".ris" in info.value.hint
    assert not (tmp_path / "refs.txt").exists()


# -- the command line -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def project(seeded_settings, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:  # type: ignore[no-untyped-def]
    return tmp_path_factory.mktemp("export-cli"), {"RAG_HOME": str(seeded_settings.home)}


def rag(project: tuple[Path, dict[str, str]], *args: str) -> subprocess.CompletedProcess[str]:
    return run_rag(*args, cwd=project[0], env=project[1])


def test_cli_exports_named_papers_in_the_order_named(project) -> None:  # type: ignore[no-untyped-def]
    proc = rag(project, "papers", "--format", "bibtex", "2309.05017", "2401.09149")
    assert proc.returncode == 0, proc.stderr
    entries = parse_bibtex(proc.stdout)
    assert list(entries) == ["fusefps2023", "buff2024"]
    assert entries["buff2024"]["eprint"] == "2401.09149"


def test_cli_exports_every_paper_when_none_is_named(project) -> None:  # type: ignore[no-untyped-def]
    proc = rag(project, "papers", "--format", "ris")
    assert proc.returncode == 0, proc.stderr
    assert len(rispy.loads(proc.stdout)) == 60


def test_cli_unknown_id_exits_2_naming_it(project) -> None:  # type: ignore[no-untyped-def]
    proc = rag(project, "papers", "--format", "csl-json", "2309.05017", "no-such-paper")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "'no-such-paper'" in proc.stderr and "2309.05017" not in proc.stderr
    proc = rag(project, "papers", "--format", "pdf")
    assert proc.returncode == 2 and "bibtex" in proc.stderr
    proc = rag(project, "papers", "2309.05017")  # ids name papers to export: --format is needed
    assert proc.returncode == 2 and "--format" in proc.stderr and proc.stdout == ""


SAMEKEY = """
@inproceedings{a, author = {Smith, John}, title = {Scaling Laws for Sparse Models}, booktitle = {ICML},
  year = {2023}, abstract = {We fit scaling laws for sparse mixture-of-experts models and find
  compute-optimal expert counts of 64.}}
@inproceedings{b, author = {Smith, Jane}, title = {Scaling Vision Transformers to 22B Parameters},
  booktitle = {CVPR}, year = {2023}, abstract = {We train a 22B parameter vision transformer with
  parallel layers, reaching 89.5% top-1 on ImageNet.}}
@article{c, author = {King, Jr., Martin Luther}, title = {Checkpoints}, journal = {JSR}, year = {2022},
  abstract = {Checkpointing large models asynchronously loses at most 1.2 minutes of work.}}
"""


@pytest.fixture(scope="module")
def samekey(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, str], str]:
    """An index of two papers whose keys would both be smith2023scaling (paper id -> key), and
    one by Martin Luther King Jr. (its id)."""
    from rag.config import Settings
    from rag.ingest import ingest

    root = tmp_path_factory.mktemp("samekey")
    (root / "lib.bib").write_text(SAMEKEY, encoding="utf-8")
    settings = Settings(home=root / ".rag", llm="none")
    ingest([root / "lib.bib"], settings, show_progress=False)
    papers = read_file(root / "lib.bib").papers
    keys = {p.paper_id: "smith2023scaling" + ("a" if "sparse" in p.paper_id else "b")
            for p in papers if p.authors[0].endswith("Smith")}
    return settings, keys, next(p.paper_id for p in papers if p.paper_id not in keys)


def test_exports_from_one_index_never_give_two_papers_one_key(samekey, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Each paper exported alone, from the command line and the API, or cited by an answer
    and exported with it: the key is the one it has in the export of the whole index."""
    from rag.api import create_app

    settings, keys, king_id = samekey
    env = {"RAG_HOME": str(settings.home)}
    king = run_rag("papers", "--format", "bibtex", cwd=tmp_path, env=env)
    assert "@article{king2022checkpoints,\n\tauthor = {King, Jr., Martin Luther}," in king.stdout, king.stderr
    shown = run_rag("papers", "show", king_id, cwd=tmp_path, env=env)
    assert shown.returncode == 0 and "authors: Martin Luther King Jr.\n" in shown.stdout, shown.stderr
    for pid, key in keys.items():
        proc = run_rag("papers", "--format", "bibtex", pid, cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        assert list(parse_bibtex(proc.stdout)) == [key]
    proc = run_rag("ask", "--llm", "none", "What top-1 accuracy does the 22B vision transformer reach?",
                   "--export", "refs.bib", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    cited = parse_bibtex((tmp_path / "refs.bib").read_text(encoding="utf-8"))
    assert cited and set(cited) <= set(keys.values())
    assert all(e["booktitle"] == ("CVPR" if k.endswith("b") else "ICML") for k, e in cited.items())
    with TestClient(create_app(settings)) as c:
        for pid, key in keys.items():
            assert list(parse_bibtex(c.get(f"/papers/{pid}", params={"format": "bibtex"}).text)) == [key]
            assert rispy.loads(c.get("/papers", params={"format": "ris", "id": pid}).text)[0]["id"] == key
        out = c.post("/ask", json={"question": "What compute-optimal expert count do sparse scaling laws find?",
                                   "export": "csl-json"}).json()
        items = json.loads(out["export"]["text"])
        assert items and all(keys[cit["paper_id"]] == i["id"] for cit, i in zip(out["citations"], items, strict=True))


# -- the API --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(seeded_settings) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    from rag.api import create_app

    with TestClient(create_app(seeded_settings)) as c:
        yield c


def test_api_exports_one_paper_or_all(client: TestClient) -> None:
    one = client.get("/papers/2309.05017", params={"format": "bibtex"})
    assert one.status_code == 200 and one.headers["content-type"].startswith("text/x-bibtex")
    assert list(parse_bibtex(one.text)) == ["fusefps2023"]
    ris = client.get("/papers", params={"format": "ris"})
    assert ris.headers["content-type"] == "application/x-research-info-systems; charset=utf-8"
    assert len(rispy.loads(ris.text)) == 60
    csl = client.get("/papers", params={"format": "csl-json"})
    assert csl.headers["content-type"].startswith("application/vnd.citationstyles.csl+json")
    assert len(csl.json()) == 60
    # JSON stays the default, and a format it does not know is a 422 naming the parameter.
    assert client.get("/papers/2309.05017").json()["paper_id"] == "2309.05017"
    bad = client.get("/papers", params={"format": "pdf"})
    assert bad.status_code == 422 and "format" in bad.text
    assert client.get("/papers/no-such", params={"format": "bibtex"}).status_code == 404


def test_openapi_documents_the_export_formats(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    for path in ("/papers", "/papers/{paper_id}"):
        op = spec["paths"][path]["get"]
        content = op["responses"]["200"]["content"]
        assert {"application/json", "text/x-bibtex", "application/x-research-info-systems",
                "application/vnd.citationstyles.csl+json"} <= set(content)
        assert content["application/json"]["schema"]["$ref"].endswith("Public")
        param = next(p for p in op["parameters"] if p["name"] == "format")
        assert param["schema"]["enum"] == ["json", "bibtex", "ris", "csl-json"]


_LATEX_TEXT = "ab1 -'`\"%$&{}\\~^_#<>|.@éß×–—漢\u0301\u0308\u0327\u20d7\ufe0f"


def test_latex_is_the_encoders_text_for_any_text() -> None:
    """latex() leaves plain runs to themselves and encodes the rest with the encoder: the
    same text as the encoder's over the whole (pairs of dashes and quotes, combining accents
    after a plain letter, braces and specials), over the seeds and any mix of such characters."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from rag.export import _LATEX, _flat, latex

    for p in (p for f in expand_paths([SEEDS]) for p in read_file(f).papers):
        for text in (p.title or "", p.abstract, *p.authors):
            assert latex(text) == _LATEX.unicode_to_latex(_flat(text))

    @settings(max_examples=3000, deadline=None)
    @given(st.text(alphabet=st.sampled_from(_LATEX_TEXT), max_size=30) | st.text(max_size=30))
    def same(text: str) -> None:
        assert latex(text) == _LATEX.unicode_to_latex(_flat(text))

    same()
