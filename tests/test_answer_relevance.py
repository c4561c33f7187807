"""The answer-relevance check (rag.relevance.addresses): a quote faithful to its abstract that
answers something else is flagged, per sentence in the JSON (`addresses: false`) and, in a
model's answer, by a notice; one that answers is not. Its fitted parameters load or fail with
a clear error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rag.answering.pipeline import Pipeline
from rag.errors import RagError
from rag.relevance import RelevanceParamsError
from rag.relevance.addresses import asked, load_model
from rag.schema import AskOptions

SHIPPED = Path(__file__).resolve().parent.parent / "rag" / "relevance" / "addresses.json"
OFFLINE = AskOptions(llm="none")


@pytest.fixture(scope="module")
def pipe(seeded_settings: Any) -> Any:
    with Pipeline(seeded_settings) as p:
        yield p


@pytest.mark.parametrize("question", [
    # no abstract is about object detection: MAS's "reducing training time by 2x" is quoted
    "What mAP do object detectors reach on COCO at 2x training schedules?",
    # Vcc's "3× efficiency improvement" and GiPH's "3 times faster" are
    "What top-1 accuracy does ResNet-50 reach on ImageNet when trained 3x longer?",
    # DynaPipe's repository address
    "What license does the DynaPipe repository use?",
])
def test_a_quote_that_answers_something_else_is_flagged(pipe: Any, question: str) -> None:
    public = pipe.answer(question, OFFLINE).to_public()
    assert public["sentences"] and all(s["addresses"] is False for s in public["sentences"])


@pytest.mark.parametrize(("question", "fact"), [
    ("What speedup does Skrull report over DeepSpeed?", "3.76"),
    ("How many developers took part in the Hotline user study?", "17"),
    ("Where is DynaPipe's code?", "github"),
    ("What does TDPO-R stand for?", "Temporal Diffusion Policy Optimization"),
])
def test_a_quote_that_answers_is_given_and_marked_so(pipe: Any, question: str, fact: str) -> None:
    ans = pipe.answer(question, OFFLINE)
    assert not ans.abstained and fact.lower() in ans.answer.lower()
    public = ans.to_public()
    # judged and passed; "What does TDPO-R stand for?" asks nothing beyond the name: not judged
    assert public["sentences"] and all(s["addresses"] is not False for s in public["sentences"])


def test_a_question_about_a_record_field_is_not_judged(pipe: Any) -> None:
    ans = pipe.answer("Who are the authors of MegaBlocks?", OFFLINE)
    assert not ans.abstained
    assert all(s["addresses"] is None for s in ans.to_public()["sentences"])


def test_a_model_sentence_that_answers_something_else_is_flagged(seeded_settings: Any, ollama_server: Any) -> None:
    question = "What speedup does Skrull report over DeepSpeed?"
    settings = seeded_settings.model_copy(update={"ollama_host": ollama_server.url, "llm": "ollama"})
    with Pipeline(settings) as pipe:
        ollama_server.replies.append("Skrull outperforms DeepSpeed by 3.76x on average [1].")
        good = pipe.answer(question)
        ollama_server.replies.append("Skrull formulates the data scheduling as a joint optimization problem [1].")
        off = pipe.answer(question)
    assert [s.addresses for s in good.sentences] == [True] and not good.notices
    # supported by Skrull's abstract, and no answer to what was asked
    assert off.sentences[0].supported and off.sentences[0].addresses is False
    assert off.to_public()["sentences"][0]["addresses"] is False
    assert any("do not address what was asked" in n for n in off.notices)


def test_what_a_question_asks_for() -> None:
    a = asked("What license does the DynaPipe repository use?", ["DynaPipe"])
    assert a.named and a.focus == {"licens"} and "dynapip" not in a.terms
    b = asked("What mAP do object detectors reach on COCO at 2x training schedules?", ["MAS"])
    assert not b.named and "map" in b.focus and b.wants_number
    c = asked("Which datasets was FedABC evaluated on?", ["FedABC"])
    assert c.wants_name and not c.wants_number


def test_the_shipped_model_loads() -> None:
    model = load_model()
    assert 0 < model.threshold < 1


@pytest.mark.parametrize(("text", "problem"), [
    ("{not json", "corrupt"),
    (json.dumps({"format": 7, "model": {}}), "format 7"),
    (json.dumps({"format": 1, "model": {"names": ["no_such"], "mean": [0], "scale": [1], "coef": [1],
                                        "bias": 0, "threshold": 0.5}}), "unknown features"),
])
def test_a_broken_model_file_is_a_clear_error(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "addresses.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RelevanceParamsError) as exc:
        load_model(path)
    assert str(path) in exc.value.message and problem in exc.value.message
    assert "scripts/fit_addresses.py" in exc.value.hint and isinstance(exc.value, RagError)
