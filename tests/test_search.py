"""Retrieval quality floor and filters on the real seeds index, and the `--json` contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.errors import InputError
from rag.retrieve import Filters, Retriever
from tests.conftest import run_rag

# query naming a system -> (the label or title start of its paper, its source file prefix)
NAMED = {
    "Skrull": ("Skrull", "000"),
    "RT-HARE": ("RT-HARE", "000"),
    "FamilySeer": ("FamilySeer", "000"),
    "AdaCM2": ("AdaCM²", "001"),
    "AdaCM²": ("AdaCM²", "001"),
    "SDP4Bit": ("SDP4Bit", "001"),
    "DeepSpeed-Ulysses": ("DeepSpeed-Ulysses", "001"),
    "HEAT": ("HEAT", "001"),
    "HALOC": ("HALOC", "001"),
    "Tutel": ("Tutel: Adaptive Mixture-of-Experts at Scale", "002"),
    "FedTree": ("FedTree: A Federated Learning System For Trees", "002"),
    "MegaBlocks": ("MegaBlocks: Efficient Sparse Training with Mixture-of-Experts", "002"),
    "Cupcake": ("Cupcake: A Compression Scheduler", "002"),
    "HyperGef": ("HyperGef: A Framework Enabling Efficient Fusion", "002"),
    "Buff": ("Buff", "003"),
    "AMSP": ("AMSP", "003"),
    "Sylvie": ("Sylvie", "003"),
    "FedABC": ("FedABC", "003"),
    "DynaPipe": ("DynaPipe", "004"),
    "FuseFPS": ("FuseFPS", "004"),
    "PASCL": ("PASCL", "004"),
    "Vcc": ("Vcc", "004"),
}


def labels(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.paper.label for h in hits]


def test_long_sequence_training_floor(retriever: Retriever) -> None:
    hits = retriever.search("which systems target long-sequence training?", k=5)
    assert len(hits) == 5
    assert {"Skrull", "DeepSpeed-Ulysses", "Buff"} <= set(labels(hits))
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))


@pytest.mark.parametrize("name", list(NAMED))
@pytest.mark.parametrize("template", ["{}", "What is {}?", "How does {} work?"])
def test_query_naming_a_system_ranks_its_paper_first(
        retriever: Retriever, name: str, template: str) -> None:
    label, source = NAMED[name]
    top = retriever.search(template.format(name), k=3)[0]
    assert top.paper.label.startswith(label), labels(retriever.search(template.format(name), k=3))
    assert Path(top.paper.source).name.startswith(f"{source}_")
    assert top.matched and all(isinstance(t, str) and t for t in top.matched)


def test_search_returns_at_most_k_distinct_papers(retriever: Retriever) -> None:
    hits = retriever.search("distributed training communication", k=7)
    assert len(hits) == 7
    assert len({h.paper.paper_id for h in hits}) == 7
    assert len(retriever.search("distributed training communication", k=100)) == 60


def test_empty_query_is_input_error(retriever: Retriever) -> None:
    with pytest.raises(InputError):
        retriever.search("   ", k=5)


# -- filters ------------------------------------------------------------------------------------


def test_venue_filter_mlsys_gives_only_the_conference_listing(retriever: Retriever) -> None:
    hits = retriever.search("training", k=100, filters=Filters.parse(venue="mlsys"))
    assert len(hits) == 25
    assert {Path(h.paper.source).name[:4] for h in hits} == {"002_"}


def test_venue_filter_icml_gives_pascl(retriever: Retriever) -> None:
    hits = retriever.search("out-of-distribution detection", k=100, filters=Filters.parse(venue="ICML"))
    assert labels(hits) == ["PASCL"]


def test_venue_filter_matches_comments_and_journal_refs(retriever: Retriever) -> None:
    hits = retriever.search("federated learning", k=100, filters=Filters.parse(venue="aaai"))
    assert labels(hits) == ["FedABC"]
    hits = retriever.search("object localization", k=100, filters=Filters.parse(venue="Multimedia"))
    assert labels(hits) == ["BCD"]


@pytest.mark.parametrize(("year", "expected"), [
    ("2022", {2022: 4}),
    ("2024", {2024: 3}),
    ("2023-2024", {2023: 38, 2024: 3}),
    ("2024-", {2024: 3}),
    ("-2022", {2022: 4}),
    ("2022..2022", {2022: 4}),
])
def test_year_filter_single_and_ranges(retriever: Retriever, year: str, expected: dict[int, int]) -> None:
    hits = retriever.search("deep learning", k=100, filters=Filters.parse(year=year))
    got: dict[int, int] = {}
    for h in hits:
        got[h.paper.year] = got.get(h.paper.year, 0) + 1  # type: ignore[index]
    assert got == expected


@pytest.mark.parametrize("author", ["Gale", "Trevor Gale", "T. Gale", "gale, trevor", "GALE"])
def test_author_filter_takes_a_surname_or_a_name_as_people_write_it(retriever: Retriever, author: str) -> None:
    hits = retriever.search("training", k=100, filters=Filters.parse(author=author))
    assert [h.paper.title.split(":")[0] for h in hits] == ["MegaBlocks"]


def test_author_filter_finds_every_paper_of_the_author_and_only_theirs(retriever: Retriever) -> None:
    hits = retriever.search("deep learning", k=100, filters=Filters.parse(author="Bingsheng He"))
    assert len(hits) >= 2 and all(any("Bingsheng He" in a for a in h.paper.authors) for h in hits)
    # A name matches whatever the order of its parts.
    assert {h.paper.paper_id for h in hits} == {
        h.paper.paper_id for h in retriever.search("deep learning", k=100, filters=Filters.parse(author="He Bingsheng"))}
    assert retriever.search("training", k=100, filters=Filters.parse(author="T. Zale")) == []


def test_author_names_match_whatever_their_accents() -> None:
    from rag.retrieve.filters import by_author, name_words

    assert by_author(name_words("Muller"), [name_words("Jörg Müller")])
    assert by_author(name_words("Jörg MÜLLER"), [name_words("Muller, J.")])
    assert not by_author(name_words("Mull"), [name_words("Jörg Müller")])
    assert not by_author(name_words("Gale"), [name_words("G. Smith")])


def test_an_author_filter_without_a_name_is_refused() -> None:
    with pytest.raises(InputError, match="has no name in it"):
        Filters.parse(author="C.")


def test_source_filter(retriever: Retriever) -> None:
    hits = retriever.search("graph neural networks", k=100, filters=Filters.parse(source="003_"))
    assert len(hits) == 10
    assert {Path(h.paper.source).name[:4] for h in hits} == {"003_"}


def test_filters_combine(retriever: Retriever) -> None:
    hits = retriever.search("training", k=100, filters=Filters.parse(venue="mlsys", year="2022"))
    assert hits == []
    hits = retriever.search("federated", k=100, filters=Filters.parse(year="2023", source="003"))
    assert {h.paper.year for h in hits} == {2023} and len(hits) == 7


@pytest.mark.parametrize("filters", [
    {"venue": "NeurIPS"}, {"year": "1999"}, {"year": "2030-"}, {"source": "nowhere.txt"},
])
def test_filter_matching_nothing_gives_no_results(retriever: Retriever, filters: dict[str, str]) -> None:
    assert retriever.search("training", k=10, filters=Filters.parse(**filters)) == []


@pytest.mark.parametrize("year", ["abc", "20x3", "23", "20233", "-", "..", "2024-2022", "2022-2023-2024"])
def test_bad_year_filter_is_input_error(year: str) -> None:
    with pytest.raises(InputError, match="year"):
        Filters.parse(year=year)


# -- `rag search --json` --------------------------------------------------------------------------

DOCUMENTED = {"rank", "paper_id", "title", "label", "authors", "venue", "year", "arxiv_id", "source",
              "score", "abstract", "matched"}


def test_search_json_has_exactly_the_documented_keys(seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = run_rag("search", "long-sequence LLM training", "-k", "4", "--json", cwd=tmp_path,
                   env={"RAG_HOME": str(seeded_settings.home)})
    assert proc.returncode == 0, proc.stderr
    assert "ingesting" not in proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"query", "index", "results"}
    assert out["query"] == "long-sequence LLM training" and out["index"] == "default"
    assert len(out["results"]) == 4
    for i, r in enumerate(out["results"], 1):
        assert set(r) - {"relevance"} == DOCUMENTED
        assert r["rank"] == i
        assert isinstance(r["authors"], list) and isinstance(r["matched"], list) and r["matched"]
        assert all(m in r["abstract"] for m in r["matched"])
        assert isinstance(r["score"], float) and r["abstract"] and r["label"]
    buff = next(r for r in out["results"] if r["label"] == "Buff")
    assert (buff["paper_id"], buff["arxiv_id"], buff["year"]) == ("2401.09149", "2401.09149", 2024)
    assert buff["source"].endswith("seeds/003_246f2e3c5dbacfbf.txt")
    assert buff["title"] is None and buff["venue"] is None and buff["authors"] == []
