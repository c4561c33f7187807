"""The checker turns a writer's text into the final answer unit by unit: the same answer
however the text arrives, markers renumbered by first use, headers held until a claim."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.answering.check import Checker
from rag.corpus.paper import Paper
from rag.judge import Judge
from rag.prompts import NO_ANSWER
from rag.schema import SentenceEvent, Source

SKRULL = Paper("a", "Skrull outperforms DeepSpeed by 3.76x on average in long-SFT scenarios.",
               title="Skrull: dynamic data scheduling", label="Skrull")
ULYSSES = Paper("b", "DeepSpeed-Ulysses partitions input data along the sequence dimension.",
                title=None, label="DeepSpeed-Ulysses")
MODEL_TEXT = ("2 of the 60 abstracts match:\n- Ulysses partitions along the sequence dimension. [2]\n"
              "- Skrull is 3.76x faster than DeepSpeed [1][7]. It schedules data.\n"
              "In short, both target long sequences (e.g. long-SFT) [1, 2].")


@pytest.fixture(scope="module")
def judge(retriever) -> Judge:  # type: ignore[no-untyped-def]
    return Judge(retriever.embedder)


def run(judge: Judge, pieces: list[str], strict: bool = False,
        prelude: list[str] | None = None) -> tuple[Checker, list[SentenceEvent]]:
    checker = Checker([Source(1, SKRULL, 0.9), Source(2, ULYSSES, 0.8)], judge, strict, prelude)
    events = [ev for p in pieces for ev in checker.feed(p)] + checker.flush()
    return checker, events


def test_units_renumbered_by_first_use_and_joined_as_written(judge: Judge) -> None:
    checker, events = run(judge, [MODEL_TEXT])
    assert checker.text == "".join(ev.delta for ev in events)
    lines = checker.text.splitlines()
    assert lines[0] == "2 of the 60 abstracts match:" and events[0].check.meta
    assert lines[1] == "- Ulysses partitions along the sequence dimension [1]."  # [2] came first
    assert lines[2].startswith("- Skrull is 3.76x faster than DeepSpeed [2].")
    assert checker.dropped == 1  # [7] points at no source
    assert checker.order == {2: 1, 1: 2}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(min_value=1, max_value=len(MODEL_TEXT) - 1), max_size=25, unique=True))
def test_the_answer_does_not_depend_on_how_the_text_arrives(judge: Judge, cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(MODEL_TEXT)]
    pieces = [MODEL_TEXT[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    whole, _ = run(judge, [MODEL_TEXT])
    chunked, events = run(judge, pieces)
    assert chunked.text == whole.text == "".join(ev.delta for ev in events)
    assert [c.text for c in chunked.checks] == [c.text for c in whole.checks]


def test_a_sentence_waits_for_a_citation_that_follows_its_full_stop(judge: Judge) -> None:
    checker = Checker([Source(1, SKRULL, 0.9)], judge, False)
    assert checker.feed("Skrull is 3.76x faster than DeepSpeed. [") == []
    events = checker.feed("1] It also schedules data.") + checker.flush()
    assert events[0].check.text == "Skrull is 3.76x faster than DeepSpeed [1]."


def test_abstention_drops_the_header_and_says_so_once(judge: Judge) -> None:
    checker, events = run(judge, [NO_ANSWER], prelude=["2 of the 60 abstracts match:"])
    assert checker.abstained and checker.text == NO_ANSWER and len(events) == 1


def test_strict_drops_unsupported_units_before_numbering(judge: Judge) -> None:
    text = "Skrull runs on quantum computers [2]. Skrull is 3.76x faster than DeepSpeed [1]."
    checker, _ = run(judge, [text], strict=True)
    assert checker.text == "Skrull is 3.76x faster than DeepSpeed [1]." and checker.order == {1: 1}
    nothing, _ = run(judge, ["Skrull runs on quantum computers [1]."], strict=True)
    assert nothing.abstained and nothing.text == NO_ANSWER


def test_in_a_long_answer_an_uncited_sentence_is_attributed_from_the_nearest_sources(
        judge: Judge, retriever) -> None:  # type: ignore[no-untyped-def]
    """Attribution over more sources than a default answer's verifies the sentence against the
    nearest few (rag.answering.check.ATTRIBUTION_POOL), not all: it still finds the one that
    says it, wherever it stands among the sources."""
    from rag.answering.check import ATTRIBUTION_POOL

    papers = [p for p in retriever.papers() if p.abstract][:30]
    sources = [Source(i + 1, p, 0.5) for i, p in enumerate(papers)]
    said = papers[-3]  # late among the sources, so not among the first few by position
    sentence = next(s for s in said.abstract.split(". ") if len(s.split()) > 8).rstrip(".") + "."
    asked: list[int] = []

    class Counting(Judge):
        def check(self, text, abstracts):  # type: ignore[no-untyped-def]
            asked.append(len(abstracts))
            return super().check(text, abstracts)

    counting = Counting(retriever.embedder)
    checker = Checker(sources, counting, False)
    events = checker.feed(sentence + "\n") + checker.flush()
    claim = next(ev.check for ev in events if not ev.check.meta)
    assert claim.supported and claim.attributed and claim.citations == [1]
    assert checker.order == {len(papers) - 2: 1}  # its own source, renumbered as the first cited
    assert max(asked) <= ATTRIBUTION_POOL + 1 < len(sources)
