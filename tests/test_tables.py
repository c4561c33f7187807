"""Comparison tables over the seed abstracts: which questions ask for one, what they compare,
and a row per paper whose cell quotes a figure from that paper's own abstract and cites it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from rag.answering.tables import NOT_REPORTED, Table, TableSource, build_table
from rag.corpus import expand_paths, merge_papers, read_file
from rag.corpus.text import split_sentences
from rag.question.compared import aspect, is_comparison
from tests.conftest import ROOT, SEEDS

COMPARISONS = [
    ("Compare the speedups reported by Skrull, HEAT and FuseFPS", "speedup"),
    ("a table of the MoE systems and their reported throughput", "throughput"),
    ("Skrull vs HEAT", "reported results"),
    ("Tutel versus MegaBlocks: which is faster?", "speedup"),
    ("Show Tutel and MegaBlocks side by side", "reported results"),
    ("How do Tutel, MegaBlocks and SMILE compare on throughput?", "throughput"),
    ("Put the memory savings of AdaCM2 and SDP4Bit in a table", "memory"),
    ("Can you compare the accuracy of the federated learning papers?", "accuracy"),
    ("Contrast the approaches of Skrull and Buff", "approach"),
    ("Compare the dataset sizes of FHA-Kitchens and PartSeg", "dataset size"),
    ("comparison table of GNN systems", "reported results"),
]
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def eval_questions() -> list[str]:
    items = yaml.safe_load((ROOT / "evals" / "questions.yaml").read_text(encoding="utf-8"))
    return [q for it in items for q in [it.get("question"), *it.get("turns", [])] if q]


@pytest.fixture(scope="module")
def abstracts() -> dict[str, tuple[str, str]]:
    """label -> (paper_id, abstract) for the 60 seed papers."""
    papers = merge_papers([p for path in expand_paths([SEEDS]) for p in read_file(Path(path)).papers])
    return {p.label: (p.paper_id, p.abstract) for p in papers}


def rows(abstracts: dict[str, tuple[str, str]], *labels: str) -> list[TableSource]:
    return [TableSource(n, abstracts[label][0], label, abstracts[label][1])
            for n, label in enumerate(labels, 1)]


def word_overlap(what: str, abstract: str) -> list[tuple[float, str]]:
    """A stand-in for the pipeline's MiniLM scorer: shared words."""
    words = set(re.findall(r"\w+", what.lower()))
    return [(float(len(words & set(re.findall(r"\w+", s.lower())))), s) for s in split_sentences(abstract)]


def assert_cited_figures(table: Table, sources: list[TableSource]) -> None:
    """Each row quotes its own abstract, with a number that abstract states, citing it."""
    assert [r.paper_id for r in table.rows] == [s.paper_id for s in sources]
    for row, source in zip(table.rows, sources, strict=True):
        figure = row.cells[0]
        assert figure.citations == [source.n], row
        assert figure.text in source.abstract, row
        numbers = NUMBER.findall(figure.text)
        assert numbers and all(x in source.abstract for x in numbers), row


# -- questions ------------------------------------------------------------------------------


@pytest.mark.parametrize(("question", "what"), COMPARISONS)
def test_comparison_questions_and_what_they_compare(question: str, what: str) -> None:
    assert is_comparison(question)
    assert aspect(question) == what


def test_no_eval_question_asks_for_a_table() -> None:
    """The fact, list, metadata and follow-up questions, "How does FuseFPS compare with
    QuickFPS?" among them, stay ordinary answers."""
    questions = eval_questions()
    assert len(questions) > 80 and "How does FuseFPS compare with QuickFPS?" in questions
    assert [q for q in questions if is_comparison(q)] == []


# -- tables ---------------------------------------------------------------------------------


def test_speedups_of_skrull_heat_and_fusefps(abstracts) -> None:  # type: ignore[no-untyped-def]
    sources = rows(abstracts, "Skrull", "HEAT", "FuseFPS")
    table = build_table(COMPARISONS[0][0], sources, word_overlap)
    assert table.columns == ["Speedup", "Baseline / setting"]
    assert_cited_figures(table, sources)
    skrull, heat, fusefps = table.rows
    assert "3.76x" in skrull.cells[0].text and skrull.cells[1].text == "DeepSpeed"
    assert "45.2X" in heat.cells[0].text and "existing CPU solution" in heat.cells[1].text
    assert "4.3×" in fusefps.cells[0].text and "QuickFPS" in fusefps.cells[1].text
    assert all(r.cells[1].citations == r.cells[0].citations for r in table.rows)
    # The clause, not the sentence's preamble.
    assert not skrull.cells[0].text.startswith("Experimental results")


def test_speedups_with_the_real_embedder(abstracts) -> None:  # type: ignore[no-untyped-def]
    from rag.config import Settings
    from rag.embed import get_embedder

    embedder = get_embedder(Settings().model_cache)

    def minilm(what: str, abstract: str) -> list[tuple[float, str]]:
        sents = split_sentences(abstract)
        sims = embedder.embed(sents) @ embedder.embed([what])[0]
        return [(float(s), sent) for s, sent in zip(sims, sents, strict=True)]

    sources = rows(abstracts, "Skrull", "HEAT", "FuseFPS")
    table = build_table(COMPARISONS[0][0], sources, minilm)
    assert_cited_figures(table, sources)
    assert ["3.76x" in table.rows[0].cells[0].text, "45.2X" in table.rows[1].cells[0].text,
            "4.3×" in table.rows[2].cells[0].text] == [True, True, True]


def test_moe_throughput_table(abstracts) -> None:  # type: ignore[no-untyped-def]
    sources = rows(abstracts, "Tutel: Adaptive Mixture-of-Experts at Scale",
                   "MegaBlocks: Efficient Sparse Training with Mixture-of-Experts", "SMILE")
    table = build_table(COMPARISONS[1][0], sources, word_overlap)
    assert table.columns[0] == "Throughput"
    assert_cited_figures(table, sources)
    assert "Switch Transformer" in table.rows[2].cells[1].text


def test_a_paper_without_the_figure_says_so_uncited(abstracts) -> None:  # type: ignore[no-untyped-def]
    # FamilySeer's abstract has no number at all; SDP4Bit reports a speedup, which is no
    # memory saving.
    table = build_table("Compare the speedups of Skrull and FamilySeer",
                        rows(abstracts, "Skrull", "FamilySeer"), word_overlap)
    assert [c.text for c in table.rows[1].cells] == [NOT_REPORTED, ""]
    assert all(c.citations == [] for c in table.rows[1].cells)
    memory = build_table("Compare the memory savings of AdaCM² and SDP4Bit",
                         rows(abstracts, "AdaCM²", "SDP4Bit"), word_overlap)
    assert "65%" in memory.rows[0].cells[0].text and memory.rows[0].cells[0].citations == [1]
    assert memory.rows[1].cells[0].text == NOT_REPORTED


def test_public_shape_and_markdown(abstracts) -> None:  # type: ignore[no-untyped-def]
    sources = rows(abstracts, "Skrull", "FamilySeer")
    sources[0] = TableSource(7, sources[0].paper_id, "Skrull | the scheduler", sources[0].abstract)
    table = build_table("Compare the speedups of Skrull and FamilySeer", sources, word_overlap)
    public = table.to_public()
    assert public["columns"] == ["Speedup", "Baseline / setting"]
    assert public["rows"][0]["paper_id"] == sources[0].paper_id
    assert public["rows"][0]["label"] == "Skrull | the scheduler"
    assert public["rows"][0]["cells"][0]["citations"] == [7]
    assert set(public["rows"][1]["cells"][0]) == {"text", "citations"}
    lines = table.to_markdown().splitlines()
    assert lines[0] == "| Paper | Speedup | Baseline / setting |"
    assert lines[1] == "| --- | --- | --- |"
    assert lines[2].startswith("| Skrull \\| the scheduler | Skrull outperforms DeepSpeed by 3.76x")
    assert lines[2].endswith(" [7] | DeepSpeed [7] |")
    assert lines[3] == f"| FamilySeer | {NOT_REPORTED} |  |"
    # Every row has as many cells as the header, whatever pipes the text holds.
    assert {len(re.split(r"(?<!\\)\|", line)) for line in lines} == {5}


def test_qualitative_comparison_quotes_without_a_figure(abstracts) -> None:  # type: ignore[no-untyped-def]
    def scheduler_first(what: str, abstract: str) -> list[tuple[float, str]]:
        return [(float("scheduler" in s), s) for s in split_sentences(abstract)]

    table = build_table("Contrast the approaches of Skrull and Buff",
                        rows(abstracts, "Skrull", "Buff"), scheduler_first)
    assert table.columns == ["Approach"]
    assert table.rows[0].cells[0].text.startswith("We propose Skrull, a dynamic data scheduler")
    assert table.rows[0].cells[0].citations == [1]
