"""Citation styles other than [n]: rewritten to [n] before checking, reported in the JSON,
and never confused with numbers that are not citations."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rag.answering.citations import normalize_citations
from tests.conftest import run_rag
from tests.ollama_server import CITATION_STYLES, OllamaTestServer
from tests.test_reasoning import assert_cited_right

# Two sources reach the prompt (seeds/): room for ranges, [1][2] and citing out of order.
Q = "How do systems train with long sequences?"

REWRITES = [  # (model text, with 3 sources) -> canonical text
    ("A is fast [Source 1].", "A is fast [1]."),
    ("A is fast (Source 1).", "A is fast [1]."),
    ("A is fast [source: 2].", "A is fast [2]."),
    ("A is fast [Sources 1, 2].", "A is fast [1, 2]."),
    ("A is fast [Source 1; Source 3].", "A is fast [1, 3]."),
    ("Source 1: A is fast.\nSource 2: B is slow.", "A is fast [1].\nB is slow [2]."),
    ("**Source 2:** B is slow. C [3].", "B is slow [2]. C [3]."),
    ("A is fast 【1】.", "A is fast [1]."),
    ("A is fast 【1†source】.", "A is fast [1]."),
    ("A is fast [^1].", "A is fast [1]."),
    ("A is fast [1-3].", "A is fast [1, 2, 3]."),
    ("A is fast [1–2, 3].", "A is fast [1, 2, 3]."),
    ("A is fast [1][2].", "A is fast [1, 2]."),
    ("A is fast [1] [2].", "A is fast [1, 2]."),
    ("A is fast (1).", "A is fast [1]."),
    ("A is fast (1, 2), B is slow (3).", "A is fast [1, 2], B is slow [3]."),
    ("A is fast [Source 7].", "A is fast [7]."),  # a citation: clean_markers drops it later
]
UNTOUCHED = [
    "A is fast [1].", "A is fast [1, 2].", "A is fast [1,2].",
    "(1) First step. (2) Second step.",  # a numbered list, not citations
    "Steps:\n(1) load\n(2) run",
    "As Equation (2) shows.", "See Table (1).", "f(1) is small.",
    "It came out in 2023 (2023).", "Speed rose (4) times.",  # (4): no 4th source
    "values (1) and (2) differ.",  # no clause ends after them
    "Published [2019-2021].", "A 3x speedup, 1.5 GB, 10-20 runs.",
    "A is fast (Sour",  # cut at the end of the text: completed by a later call
]


@pytest.mark.parametrize(("text", "canonical"), REWRITES)
def test_each_style_is_rewritten_and_reported(text: str, canonical: str) -> None:
    out, rewrites = normalize_citations(text, 3, end=True)
    assert out == canonical and rewrites
    assert all(r["from"] in text and r["to"] in out for r in rewrites)
    assert normalize_citations(out, 3, end=True) == (out, [])  # canonical output: no rewrite


@pytest.mark.parametrize("text", UNTOUCHED)
def test_numbers_that_are_not_citations_are_left_alone(text: str) -> None:
    assert normalize_citations(text, 3, end=True) == (text, [])


def test_a_citation_at_the_end_is_decided_only_once_the_text_is_complete() -> None:
    assert normalize_citations("A is fast (1)", 3) == ("A is fast (1)", [])
    assert normalize_citations("A is fast (1)", 3, end=True)[0] == "A is fast [1]"


FRAGMENTS = ["A is fast", "B", " ", " ", "\n", ".", ",", "(", ")", "[", "]", "1", "2", "3", "7",
             "2023", "-", "Source", "Source 1:", "(Source 2)", "[Source 1]", "【1】", "[^2]",
             "[1-3]", "[1][2]", "(1)", "(2)", "Equation", "step", ":", "x"]
texts = st.lists(st.sampled_from(FRAGMENTS), max_size=25).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=texts)
@example(text="Source 1:Source 1:.")  # found in 1 of 4 suite runs: a prefix opening the claim
def test_normalising_is_idempotent(text: str) -> None:
    for end in (False, True):
        once, _ = normalize_citations(text, 3, end=end)
        assert normalize_citations(once, 3, end=end) == (once, [])


@settings(max_examples=300, deadline=None)
@given(text=texts, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_streamed_text_normalises_as_the_whole_text_does(text: str, cuts: list[int]) -> None:
    """The checker normalises its pending text again each time more arrives: the result must
    not depend on where the chunks were cut, and nothing canonical is reported."""
    points = sorted({c % (len(text) + 1) for c in cuts})
    pending, reported = "", []
    for a, b in zip([0, *points], [*points, len(text)], strict=True):
        pending, rewrites = normalize_citations(pending + text[a:b], 3)
        reported += rewrites
    pending, rewrites = normalize_citations(pending, 3, end=True)
    reported += rewrites
    assert pending == normalize_citations(text, 3, end=True)[0]
    assert all(r["from"] != r["to"] for r in reported)


# -- end to end: the answering pipeline and `rag ask` through the Ollama test server ----------


@pytest.mark.parametrize("behaviour", [*CITATION_STYLES, "cite_reversed"])
def test_every_style_cites_the_right_paper(ollama_pipeline: Any, ollama: OllamaTestServer,
                                           behaviour: str) -> None:
    from rag.schema import AskOptions

    ollama.behaviour = behaviour
    answer = ollama_pipeline.answer(Q, AskOptions(llm="ollama"))
    assert_cited_right(answer)
    assert answer.dropped_citations == 0
    if behaviour == "cite_reversed":
        assert answer.rewritten_citations == []  # [3] then [1]: renumbered, not rewritten
        assert [s.citations for s in answer.sentences] == [[1], [2]]
    else:
        assert answer.rewritten_citations, behaviour


def test_an_answer_cut_by_num_predict_is_marked_incomplete(ollama_pipeline: Any, ollama: OllamaTestServer) -> None:
    from rag.schema import AskOptions

    ollama.behaviour = "length"
    answer = ollama_pipeline.answer(Q, AskOptions(llm="ollama"))
    assert answer.incomplete and answer.finish_reason == "length"
    assert any("stopped at its answer budget" in n and "incomplete" in n for n in answer.notices), answer.notices


def test_rag_ask_json_says_what_was_rewritten(seeded_settings: Any, tmp_path: Any,
                                              ollama: OllamaTestServer) -> None:
    ollama.behaviour = "cite_source_parens"
    res = run_rag("ask", Q, "--json", cwd=tmp_path, env={
        "RAG_HOME": str(seeded_settings.home), "OLLAMA_HOST": ollama.url})
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    assert {"from": "(Source 1)", "to": "[1]"} in obj["rewritten_citations"]
    assert "Source" not in obj["answer"] and obj["citations"]
    assert all(s["supported"] for s in obj["sentences"])
