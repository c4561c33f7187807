"""With a model, nothing is declined before the model has read the best sources (gate loosely,
check strictly): a question the offline answerer declines (P(answerable) below the answer
model's `threshold`, fitted by scripts/fit_relevance.py) goes to the model, told to answer
exactly "The provided abstracts do not answer this question." when the sources do not, and
what comes back is checked like any answer; an answer with nothing supported is declined.
Offline, and when the model is not running, such a question is declined as before."""

from __future__ import annotations

from typing import Any

import pytest

from rag.answering.pipeline import Pipeline
from rag.eval.sets import load_set
from rag.prompts import NO_ANSWER
from rag.question.patterns import is_list_question
from rag.relevance import load_params
from rag.schema import AskOptions
from tests.conftest import ROOT
from tests.ollama_server import free_port_with_nothing_listening

BOUNDS = load_params()["models"]["answer"]


def _chat_calls(server: Any) -> int:
    return sum(r["path"] == "/api/chat" for r in server.requests)


@pytest.fixture(scope="module")
def by_p(seeded_settings) -> list[tuple[float, str]]:  # type: ignore[no-untyped-def]
    """(P(answerable), question) of every seeds/ fact and unanswerable question that is not
    a "which papers" list (those are decided as lists), offline."""
    questions = [q.turns[-1] for q in load_set(ROOT / "evals" / "questions.yaml")
                 if q.kind in ("fact", "unanswerable") and not is_list_question(q.turns[-1])]
    with Pipeline(seeded_settings) as pipe:
        return sorted((pipe.chooser.decide(q, None, False).p_answerable, q) for q in questions)


def test_the_bounds_leave_a_band_for_the_model(by_p) -> None:  # type: ignore[no-untyped-def]
    assert 0 < BOUNDS.decline < BOUNDS.threshold
    assert any(BOUNDS.decline <= p < BOUNDS.threshold for p, _ in by_p)
    assert any(p < BOUNDS.decline for p, _ in by_p)


def _pipe(settings: Any, url: str, llm: str = "ollama") -> Pipeline:
    return Pipeline(settings.model_copy(update={"ollama_host": url, "llm": llm}))


def test_a_borderline_question_goes_to_the_model(seeded_settings, ollama_server, by_p) -> None:  # type: ignore[no-untyped-def]
    question = next(q for p, q in by_p if BOUNDS.decline <= p < BOUNDS.threshold)
    with Pipeline(seeded_settings) as offline:
        assert offline.answer(question, AskOptions(llm="none")).abstained  # as before
    with _pipe(seeded_settings, ollama_server.url) as pipe:
        before = _chat_calls(ollama_server)
        ans = pipe.answer(question)
        assert _chat_calls(ollama_server) == before + 1
        prompt = ollama_server.requests[-1]["body"]["messages"]
        assert NO_ANSWER in prompt[0]["content"] and '<source n="1">' in prompt[-1]["content"]
        # the model's answer is checked as any: cited from the sources it was given
        assert not ans.abstained and ans.answerer.startswith("ollama:")
        assert ans.sentences and all(s.citations for s in ans.sentences)
        assert all(s.supported for s in ans.sentences)

        ollama_server.replies.append(NO_ANSWER)  # ... or it says the abstracts do not answer
        declined = pipe.answer(question)
        assert declined.abstained and declined.answer.startswith(NO_ANSWER)
        assert not declined.sources and declined.nearest


def test_even_the_least_answerable_question_reaches_the_model_and_is_checked(seeded_settings, ollama_server, by_p) -> None:  # type: ignore[no-untyped-def]
    question = by_p[0][1]  # the lowest P(answerable) of the set: the offline answerer declines it
    with _pipe(seeded_settings, ollama_server.url) as pipe:
        before = _chat_calls(ollama_server)
        ollama_server.replies.append("The capital of France is Paris [1].")  # not in any source
        ans = pipe.answer(question)
    assert _chat_calls(ollama_server) == before + 1
    assert ans.abstained and ans.answerer.startswith("ollama:") and ans.nearest
    assert ans.sentences and not any(s.supported for s in ans.sentences)
    assert any("none of the model's" in n for n in ans.notices)


def test_a_borderline_question_is_declined_when_the_model_is_not_running(seeded_settings, by_p) -> None:  # type: ignore[no-untyped-def]
    """`--llm auto` falls back to the offline answerer, which would have declined it."""
    question = next(q for p, q in by_p if BOUNDS.decline <= p < BOUNDS.threshold)
    url = f"http://127.0.0.1:{free_port_with_nothing_listening()}"
    with _pipe(seeded_settings, url, "auto") as pipe:
        ans = pipe.answer(question)
    assert ans.abstained and ans.answerer == "extractive"
    assert any("offline" in n for n in ans.notices)
