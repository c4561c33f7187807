"""The question read once: `rag ask --json`, `/ask` and MCP show how rag read a question (its
kind, the papers it names, what it asks of them), and the stages answer what was read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.question import KINDS, read_question
from rag.retrieve import Filters
from tests.conftest import run_rag

# Questions written for this test, none from an eval set: (question, kind, what else is read).
READINGS = [
    ("Which papers study graph neural network training?", "list", {"topic": "study graph neural network training"}),
    ("List the works on federated learning", "list", {}),
    ("Compare the memory footprint of Alpha and Beta", "compare", {"aspect": "memory"}),
    ("Alpha versus Beta: which is faster?", "compare", {"aspect": "speedup"}),
    ("What does QLoRA stand for?", "definition", {}),
    ("Who wrote the Gamma paper?", "metadata", {"record": "authors"}),
    ("Which year was Gamma published?", "metadata", {"record": "date"}),
    ("What is the DOI of Gamma?", "metadata", {"record": "doi"}),
    ("Which papers report a 12.5x reduction in latency?", "list", {"figure": "12.5x"}),
    ("What gives the 40% lower energy?", "figure", {"figure": "40%"}),
    ("How many GPUs does Delta scale to?", "count", {}),
    ("What does Delta freeze during fine-tuning?", "fact", {}),
]


@pytest.mark.parametrize(("text", "kind", "fields"), READINGS)
def test_a_question_is_read_into_its_kind(text: str, kind: str, fields: dict[str, str]) -> None:
    read = read_question(text).to_public()
    assert read["kind"] == kind and kind in KINDS
    assert {k: read[k] for k in fields} == fields
    assert read["text"] == read["standalone"] == text and not read["follow_up"]


def test_a_question_that_names_a_paper_and_asks_nothing_else_is_a_summary() -> None:
    assert read_question("What is Delta?", names=["delta"], labels=["Delta"]).kind == "summary"
    assert read_question("What is Delta?").kind == "fact"  # no paper of the index goes by it


def test_the_filters_asked_with_are_part_of_the_reading() -> None:
    read = read_question("Which papers study caching?", filters=Filters.parse("MLSys", "2021-2023"))
    assert read.to_public()["filters"] == {"venue": "MLSys", "year_from": 2021, "year_to": 2023}


def test_ask_json_shows_how_the_question_was_read(seeded_settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {"RAG_HOME": str(seeded_settings.home)}
    asked = {
        "Compare the speedups reported by Skrull and HEAT": ("compare", {"Skrull", "HEAT"}),
        "Who wrote Skrull?": ("metadata", {"Skrull"}),
        "Which systems target long-sequence training?": ("list", set()),
    }
    for text, (kind, names) in asked.items():
        res = run_rag("ask", text, "--llm", "none", "--json", cwd=tmp_path, env=env)
        assert res.returncode == 0, res.stderr
        obj = json.loads(res.stdout)
        assert obj["question"]["kind"] == kind and set(obj["question"]["names"]) == names
        assert obj["question"]["text"] == obj["question"]["standalone"] == text
        # what was read is what was answered: a list cites its members, a comparison is a table
        assert obj["list_question"] == (kind == "list")
        assert (obj.get("table") is not None) == (kind == "compare")


def test_a_name_typed_plainly_is_read_as_the_paper_writes_it_and_is_no_follow_up(
        seeded_settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = run_rag("ask", "What does AdaCM2 do?", "--llm", "none", "--json", cwd=tmp_path,
                  env={"RAG_HOME": str(seeded_settings.home)})
    assert res.returncode == 0, res.stderr
    read = json.loads(res.stdout)["question"]
    assert read["text"] == "What does AdaCM2 do?" and read["standalone"] == "What does AdaCM² do?"
    assert read["names"] == ["AdaCM²"] and read["kind"] == "summary" and not read["follow_up"]


def test_ask_endpoint_shows_the_same_reading(seeded_settings) -> None:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from rag.api import create_app

    with TestClient(create_app(seeded_settings)) as client:
        body = client.post("/ask", json={"question": "Who wrote Skrull?", "llm": "none"}).json()
    assert body["question"]["kind"] == "metadata" and body["question"]["record"] == "authors"
    assert body["question"]["names"] == ["Skrull"]


LIBRARY = Path(__file__).parent / "data" / "library" / "refs.bib"  # LoRA and Chinchilla


@pytest.fixture(scope="module")
def own_library(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("own-library")
    env = {"RAG_HOME": str(home / "data")}
    res = run_rag("ingest", str(LIBRARY), "-q", cwd=home, env=env)
    assert res.returncode == 0, res.stderr
    return {"cwd": str(home), **env}


def _ask(library: dict[str, str], question: str) -> dict:  # type: ignore[type-arg]
    env = {k: v for k, v in library.items() if k != "cwd"}
    res = run_rag("ask", question, "--llm", "none", "--json", cwd=Path(library["cwd"]), env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.parametrize(("question", "says"), [
    ("What does LoRA freeze?", "freezes the pre-trained model weights"),
    ("What does LoRA inject into each layer?", "injects trainable rank decomposition matrices"),
    # not a question the rule was written from
    ("What does Chinchilla outperform?", "outperforms Gopher"),
    # a name spelled out in apposition ("Low-Rank Adaptation, or LoRA, which ..."), not in brackets
    ("What does LoRA stand for?", "Low-Rank Adaptation, or LoRA"),
])
def test_a_plain_question_over_a_small_library_is_answered_from_the_sentence_that_says_it(
        own_library: dict[str, str], question: str, says: str) -> None:
    obj = _ask(own_library, question)
    assert not obj["abstained"] and says in obj["answer"]
    assert obj["sentences"] and all(s["verdict"] == "supported" for s in obj["sentences"])
    assert len(obj["citations"]) == 1


def test_what_the_named_papers_abstract_does_not_say_stays_declined(own_library: dict[str, str]) -> None:
    for question in ("What dataset was LoRA evaluated on for summarization?",
                     "What license is Chinchilla released under?"):
        obj = _ask(own_library, question)
        assert obj["abstained"], (question, obj["answer"])


def test_a_list_over_a_small_library_lists_each_paper_it_asks_for(own_library: dict[str, str]) -> None:
    obj = _ask(own_library, "Which papers are about large language models?")
    assert obj["question"]["kind"] == "list"
    assert {c["arxiv_id"] for c in obj["citations"]} == {"2106.09685", "2203.15556"}  # both


def test_the_decisions_page_lists_every_answering_rule() -> None:
    """The rules' tables on the site are the code's: a rule added or renamed shows there."""
    from rag.answering.listing import LIST_RULES
    from rag.answering.rules import RULES

    page = (Path(__file__).parent.parent / "docs" / "asking" / "decisions.md").read_text()
    missing = [r.name for r in (*RULES, *LIST_RULES) if f"\n| {r.name} |" not in page]
    assert not missing, f"rules the decisions page does not list: {missing}"


def test_a_plural_asked_is_counted_only_in_the_plural() -> None:
    """"How many languages ..." is not answered by "400 language models" (the singular there
    qualifies another noun), nor "How many GPUs ..." by "1,024 GPU-hours"; the plural is."""
    from rag.question.asks import count_in

    text = ("We train over 400 language models on 1,024 GPU-hours of compute. "
            "The tokenizer covers 12 languages and runs on 8 GPUs.")
    assert count_in("How many languages does the tokenizer cover?", text) == \
        "The tokenizer covers 12 languages and runs on 8 GPUs."
    assert count_in("How many languages does it support?", text.split(". ")[0]) is None
    assert count_in("How many GPUs does it run on?", text.split(". ")[0]) is None
    assert count_in("How many language models were trained?", text).startswith("We train over 400")
