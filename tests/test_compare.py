"""What researchers do next with an answer: comparison questions answered as tables, the cited
papers exported for a reference manager, abstentions explained by the closest passages."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import bibtexparser
import pytest
import rispy
from fastapi.testclient import TestClient

from rag.answering import Pipeline
from rag.schema import AskOptions
from tests.conftest import run_rag

COMPARE_Q = "Compare the speedups reported by Skrull, HEAT and FuseFPS"
OFF_TOPIC = "What is the boiling point of ethanol at sea level?"
FIGURE = re.compile(r"\d(?:\.\d+)?\s*[x×X%]")


@pytest.fixture(scope="module")
def offline(seeded_settings, retriever) -> Pipeline:  # type: ignore[no-untyped-def]
    return Pipeline(seeded_settings.model_copy(update={"llm": "none"}), retriever)


def rows_by_label(public: dict) -> dict[str, dict]:
    return {r["label"]: r for r in public["table"]["rows"]}


def cited_paper(public: dict, n: int) -> str:
    return next(c["paper_id"] for c in public["citations"] if c["n"] == n)


def test_offline_comparison_is_a_table_of_the_named_papers_each_citing_itself(offline) -> None:  # type: ignore[no-untyped-def]
    public = offline.answer(COMPARE_Q).to_public()
    table = public["table"]
    assert table["columns"][0] == "Speedup"
    assert [r["label"] for r in table["rows"]] == ["Skrull", "HEAT", "FuseFPS"]
    for row in table["rows"]:
        cell = row["cells"][0]
        assert FIGURE.search(cell["text"]), cell
        assert len(cell["citations"]) == 1 and cited_paper(public, cell["citations"][0]) == row["paper_id"]
        assert cell["supported"] is True
    assert "3.76x" in rows_by_label(public)["Skrull"]["cells"][0]["text"]
    assert "QuickFPS" in rows_by_label(public)["FuseFPS"]["cells"][1]["text"]  # the baseline
    # The text answer carries the same table in Markdown, numbered like the citations.
    assert "| Paper | Speedup | Baseline / setting |" in public["answer"]
    skrull_line = next(line for line in public["answer"].splitlines() if line.startswith("| Skrull"))
    assert "3.76x" in skrull_line and "[1]" in skrull_line
    assert [c["n"] for c in public["citations"]] == [1, 2, 3]
    assert not public["abstained"] and public["nearest"] == []


def test_a_named_paper_missing_from_the_index_is_said(offline) -> None:  # type: ignore[no-untyped-def]
    public = offline.answer("Compare the speedups of Skrull, Zorblax and HEAT").to_public()
    assert [r["label"] for r in public["table"]["rows"]] == ["Skrull", "HEAT"]
    assert public["matched"] == 2  # the papers compared, as the header says
    assert "“Zorblax” is not in the index" in public["answer"]
    # the last of the run after its article: named too, not dropped
    public = offline.answer("Compare Skrull, HEAT and the Zorblaxformer").to_public()
    assert [r["label"] for r in public["table"]["rows"]] == ["Skrull", "HEAT"]
    assert "“Zorblaxformer” is not in the index" in public["answer"], public["answer"]
    # one known paper against an unknown name: its row, and the name said, not an abstention
    for question in ("Compare the speedups reported by Skrull and Zorblax", "Skrull vs Zorblax"):
        public = offline.answer(question).to_public()
        assert not public["abstained"], question
        assert [r["label"] for r in public["table"]["rows"]] == ["Skrull"] and public["matched"] == 1
        assert "“Zorblax” is not in the index" in public["answer"]
        assert "1 papers" not in public["answer"] and "of Skrull" in public["answer"].split("\n")[0]



def test_a_name_an_abstract_introduces_its_work_by_gets_that_papers_row(offline) -> None:  # type: ignore[no-untyped-def]
    # "This paper proposes an efficient GNN training system, AdaQP, ..." under a title that
    # gives no short name: "AdaQP" was said not to be in the index
    public = offline.answer("Compare AdaQP and Sylvie").to_public()
    rows = public["table"]["rows"]
    assert len(rows) == 2 and rows[1]["label"] == "Sylvie"
    assert rows[0]["label"].startswith("Adaptive Message Quantization") and "AdaQP" in rows[0]["cells"][0]["text"]
    assert "not in the index" not in public["answer"]
    # named by their abstracts alone, both ("Pre-train and Search ... propose NeuroShard")
    public = offline.answer("Compare AdaQP and NeuroShard").to_public()
    assert [r["label"] for r in public["table"]["rows"]] == [rows[0]["label"], "Pre-train and Search"]

def test_a_comparison_of_names_the_index_lacks_says_so(offline) -> None:  # type: ignore[no-untyped-def]
    # no paper is named either, and the abstracts find nothing to compare: the names are
    # said (it read "No papers match the filters: ." with no filter given)
    public = offline.answer("compare Zorblax and Quux").to_public()
    assert public["abstained"] and public["citations"] == []
    assert public["answer"] == "“Zorblax”, “Quux” are not in the index."
    # with a longer name in the index, that name is offered
    public = offline.answer("Compare Zorblax and Ulysses").to_public()
    assert public["answer"].startswith("“Zorblax”, “Ulysses” are not in the index (for “Ulysses”, "
                                       "did you mean “DeepSpeed-Ulysses”?)")


def test_a_name_the_index_has_only_within_longer_names_is_offered_them(offline) -> None:  # type: ignore[no-untyped-def]
    """"compare DeepSpeed and DynaPipe": no paper is called DeepSpeed, two are called
    DeepSpeed-something; the answer offers them rather than only "not in the index"."""
    public = offline.answer("compare DeepSpeed and DynaPipe").to_public()
    assert [r["label"] for r in public["table"]["rows"]] == ["DynaPipe"]
    assert ("“DeepSpeed” is not in the index (did you mean “DeepSpeed-Ulysses” or "
            "“DeepSpeed4Science”?).") in public["answer"].split("\n")[0]
    lead = offline.answer("Compare the speedups of Skrull, Zorblax and Ulysses").to_public()["answer"]
    assert ("“Zorblax”, “Ulysses” are not in the index (for “Ulysses”, did you mean "
            "“DeepSpeed-Ulysses”?).") in lead.split("\n")[0]


def test_a_paper_without_the_figure_is_not_reported_and_uncited(offline) -> None:  # type: ignore[no-untyped-def]
    public = offline.answer("Compare the energy use reported by Skrull and FuseFPS").to_public()
    skrull = rows_by_label(public)["Skrull"]["cells"][0]
    assert skrull == {"text": "not reported in the abstract", "citations": []}
    assert "power efficiency" in rows_by_label(public)["FuseFPS"]["cells"][0]["text"]


def test_a_topic_table_lists_the_papers_on_that_topic(offline) -> None:  # type: ignore[no-untyped-def]
    public = offline.answer("a table of the mixture-of-experts systems and their reported throughput").to_public()
    labels = [r["label"] for r in public["table"]["rows"]]
    assert {"MegaBlocks", "Tutel"} <= set(labels)
    assert "SDP4Bit" not in labels



def test_a_lead_counts_the_papers_that_state_it_in_good_english(env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Of seven federated learning systems one states a result: '(1 states it in its
    abstract)', not '(1 state it in their abstract)'."""
    proc = run_rag("ask", "compare the federated learning systems", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    lead = proc.stdout.split("\n")[0]
    assert re.fullmatch(r"The reported results of \d+ papers side by side \(1 states it in its abstract\):", lead), lead


def test_with_a_model_each_cell_is_checked_against_its_own_paper(seeded_settings, retriever, ollama_server) -> None:  # type: ignore[no-untyped-def]
    # The model fills the table (rows numbered in the order named) in a loose citation
    # style, puts Skrull's figure in HEAT's row, and skips FuseFPS.
    ollama_server.replies = [
        "- Skrull: outperforms DeepSpeed by 3.76x on average [1]\n"
        "- HEAT: outperforms DeepSpeed by 3.76x on average [2]\n"
    ]
    settings = seeded_settings.model_copy(update={"ollama_host": ollama_server.url, "llm": "ollama"})
    with Pipeline(settings, retriever) as pipe:
        public = pipe.answer(COMPARE_Q).to_public()
        rows = rows_by_label(public)
        assert public["answerer"].startswith("ollama:")
        assert rows["Skrull"]["cells"][0]["supported"] is True
        assert "3.76x" in rows["Skrull"]["cells"][0]["text"]
        assert rows["HEAT"]["cells"][0]["supported"] is False
        assert rows["FuseFPS"]["cells"][0]["text"] == "not reported in the abstract"
        # strict: an unsupported cell is not shown
        ollama_server.replies = ["- Skrull: 3.76x over DeepSpeed [1]\n- HEAT: 3.76x over DeepSpeed [2]\n"]
        strict = pipe.answer(COMPARE_Q, AskOptions(strict=True)).to_public()
        assert rows_by_label(strict)["HEAT"]["cells"][0]["text"] == "not reported in the abstract"


def test_an_abstention_carries_its_closest_passages(offline) -> None:  # type: ignore[no-untyped-def]
    public = offline.answer(OFF_TOPIC).to_public()
    assert public["abstained"]
    near = public["nearest"]
    assert 1 <= len(near) <= 3
    papers = {p.paper_id: p for p in offline.retriever.papers()}
    for passage in near:
        assert passage["quote"] in papers[passage["paper_id"]].abstract
    assert [p["score"] for p in near] == sorted((p["score"] for p in near), reverse=True)


# -- the command line and the API ---------------------------------------------------------------


@pytest.fixture(scope="module")
def env(seeded_settings) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {"RAG_HOME": str(seeded_settings.home), "RAG_LLM": "none"}


def test_cli_shows_the_table_and_exports_the_cited_papers(env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = run_rag("ask", COMPARE_Q, "--export", "refs.bib", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "| Skrull |" in proc.stdout and "| Paper | Speedup |" in proc.stdout
    assert "wrote 3 cited paper(s) to refs.bib" in proc.stderr
    library = bibtexparser.parse_string((tmp_path / "refs.bib").read_text(encoding="utf-8"))
    assert len(library.entries) == 3 and not library.failed_blocks
    # a capitalised name is braced ({HEAT}) so that BibTeX styles keep its capitals
    assert {e.fields_dict["title"].value.strip("{}") for e in library.entries} == {"Skrull", "HEAT", "FuseFPS"}
    proc = run_rag("ask", COMPARE_Q, "--export", "refs.ris", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["table"]["rows"]
    assert len(rispy.loads((tmp_path / "refs.ris").read_text(encoding="utf-8"))) == 3


def test_cli_export_to_an_unknown_extension_fails_before_answering(env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = run_rag("ask", COMPARE_Q, "--export", "refs.docx", cwd=tmp_path, env=env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "refs.docx" in proc.stderr and ".bib" in proc.stderr
    assert not (tmp_path / "refs.docx").exists()


def test_cli_abstention_prints_the_closest_passages(env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = run_rag("ask", OFF_TOPIC, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "do not answer" in proc.stdout
    tail = proc.stdout.split("Closest passages, which do not answer the question:")[1]
    assert tail.strip().startswith("- ")


@pytest.fixture(scope="module")
def client(seeded_settings) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    from rag.api import create_app

    with TestClient(create_app(seeded_settings.model_copy(update={"llm": "none"}))) as c:
        yield c


def test_api_ask_exports_the_cited_papers_and_papers_takes_ids(client: TestClient) -> None:
    out = client.post("/ask", json={"question": COMPARE_Q, "export": "bibtex"}).json()
    assert out["table"]["rows"] and out["export"]["format"] == "bibtex"
    assert len(bibtexparser.parse_string(out["export"]["text"]).entries) == len(out["citations"]) == 3
    ids = [c["paper_id"] for c in out["citations"]]
    got = client.get("/papers", params={"format": "ris", "id": ids[::-1]})
    assert got.status_code == 200
    assert [r["title"] for r in rispy.loads(got.text)] == ["FuseFPS", "HEAT", "Skrull"]
    assert client.post("/ask", json={"question": COMPARE_Q, "export": "pdf"}).status_code in (400, 422)
    assert client.post("/ask", json={"question": OFF_TOPIC}).json()["nearest"]


def test_a_named_paper_outside_the_filters_gets_no_row(env, client: TestClient, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`--year 2023` keeps a comparison to 2023's papers, as it keeps any answer: Skrull and
    HEAT give no year, DynaPipe is of 2023."""
    proc = run_rag("ask", "compare Skrull and DynaPipe", "--year", "2023", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    public = json.loads(proc.stdout)
    assert [r["label"] for r in public["table"]["rows"]] == ["DynaPipe"]
    assert [c["label"] for c in public["citations"]] == ["DynaPipe"]
    assert "“Skrull” is outside the filters (year 2023)." in public["answer"].split("\n")[0]
    # none of them within the filters: said, not a table of other 2023 papers
    out = client.post("/ask", json={"question": "compare Skrull and HEAT", "year": "2023"}).json()
    assert out["answer"] == "“Skrull”, “HEAT” are outside the filters (year 2023)."
    assert out["abstained"] and out["table"] is None and out["citations"] == []
