"""Relevance decisions from the fitted model (rag.relevance), as a user of `rag ask` and
`rag search` sees them: lists that hold papers the old hand-picked bounds left out, abstention
on a question from another field, papers found by their record's fields, lists longer than 30,
and a clear error when the fitted parameters are missing or broken."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag.corpus.paper import Paper
from rag.errors import RagError
from rag.question import read_question
from rag.relevance import Decision, RelevanceParamsError, hub, load_params
from rag.retrieve import PaperHit

# -- the fitted parameters --------------------------------------------------------------------


def test_shipped_parameters_load() -> None:
    params = load_params()
    assert set(params["models"]) == {"member", "source", "answer", "sentence"}


@pytest.mark.parametrize(("text", "problem"), [
    ("{not json", "corrupt"),
    (json.dumps({"format": 99, "models": {}, "pool": {}}), "format 99"),
    (json.dumps({"format": 1, "models": {}, "pool": {}}), "corrupt"),
])
def test_broken_parameters_are_a_clear_error(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "relevance_params.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RelevanceParamsError) as exc:
        load_params(path)
    assert str(path) in exc.value.message and problem in exc.value.message
    assert "scripts/fit_relevance.py" in exc.value.hint
    assert isinstance(exc.value, RagError)


def test_missing_parameters_are_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RelevanceParamsError, match="cannot read"):
        load_params(tmp_path / "absent.json")


def test_a_model_with_unknown_features_is_refused(tmp_path: Path) -> None:
    shipped = Path(__file__).resolve().parent.parent / "rag" / "relevance" / "params.json"
    data = json.loads(shipped.read_text(encoding="utf-8"))
    data["models"]["answer"]["names"][0] = "no_such_feature"
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RelevanceParamsError, match="unknown features"):
        load_params(path)


@pytest.mark.parametrize(("spoil", "problem"), [
    (lambda d: d["models"]["answer"]["coef"].__setitem__(0, float("nan")), "not a finite number"),
    (lambda d: d["models"]["source"]["mean"].pop(), "one value per feature"),
    (lambda d: d["models"]["member"].__setitem__("threshold", 7.0), "not a probability"),
    (lambda d: d["models"]["answer"].__setitem__("decline", 0.9), "at most the threshold"),
    (lambda d: d["models"]["sentence"]["scale"].__setitem__(0, 0.0), "scale is not positive"),
    (lambda d: d["pool"].__setitem__("fact", 0), "at least 1"),
    (lambda d: d["pool"].pop("list_max"), "pool needs"),
])
def test_a_spoilt_parameters_file_is_refused_not_declining_everything(
        tmp_path: Path, spoil: Any, problem: str) -> None:
    # A NaN weight made every probability NaN, every question declined without a word.
    shipped = Path(__file__).resolve().parent.parent / "rag" / "relevance" / "params.json"
    data = json.loads(shipped.read_text(encoding="utf-8"))
    spoil(data)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RelevanceParamsError, match=problem):
        load_params(path)


def test_an_unmeasured_feature_weighs_neither_way() -> None:
    """An index of one paper has no second candidate: that feature is NaN, and the answer
    model counts it as its fitted mean instead of a probability of 0, which alone declined."""
    model = load_params()["models"]["answer"]
    row = dict(zip(model.names, model.mean.tolist(), strict=True))
    row["p_top"] += model.scale[model.names.index("p_top")]  # a confident top paper
    at_mean = model.probability(row)
    row["p_second"] = float("nan")
    assert model.probability(row) == pytest.approx(at_mean)
    assert model.probabilities([row])[0] == pytest.approx(at_mean)
    row["p_second"] = -13.8  # the logit of a probability of 0, as it was measured before
    assert model.probability(row) < at_mean - 0.2


def test_small_index_is_made_up_to_the_fitted_size() -> None:
    """Word weights and what is normal in an index smaller than any fitted on come mostly from
    the fitted corpora (rag/relevance/background.json), the more so the smaller the index."""
    import math

    from rag.relevance.stats import IndexStats, background, padded

    one = IndexStats(1, {"injsi": 1, "spars": 1}, *[math.nan] * 6)
    small = padded(one, 60)
    # "much" is in no paper of this index, but in many of the fitted corpora: a generic word
    assert background()["df"]["much"] > 50
    assert small.idf("much") < small.idf("injsi") < small.idf("zzzunseen")
    assert one.idf("much") == one.idf("zzzunseen")  # unpadded, every absent word weighs most
    assert small.top_mean == background()["stats"]["top_mean"]
    twenty = padded(IndexStats(20, {}, 0.9, 0.01, 0.9, 0.01, 0.9, 0.01), 60)
    assert background()["stats"]["bg_mean"] < twenty.bg_mean < 0.9
    assert twenty.bg_std > 0.01


def test_concurrent_answers_each_cache_the_index_stats_whole(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Concurrent calls on a new index version (MCP calls, API requests) each compute the
    stats and write the cache at once: with one fixed temporary name one writer's replace took
    the file another was writing ("could not cache the relevance statistics", seen in three
    concurrent MCP runs). Each writer now has a temporary file of its own."""
    import logging
    import threading

    from rag.relevance.stats import IndexStats, cached

    path = tmp_path / "cache" / "relevance-papers-v7-s2.json"
    writers = 12
    ready = threading.Barrier(writers)
    df = {f"term{i}": i for i in range(20_000)}  # a cache of some size: writes take a while

    def build() -> IndexStats:
        ready.wait()  # every writer writes at the same moment
        return IndexStats(60, df, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)

    results: list[IndexStats] = []
    with caplog.at_level(logging.WARNING, logger="rag.relevance.stats"):
        for _ in range(5):
            path.unlink(missing_ok=True)
            threads = [threading.Thread(target=lambda: results.append(cached(path, build)))
                       for _ in range(writers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert not [r.getMessage() for r in caplog.records], caplog.records[:1]
    assert len(results) == 5 * writers
    assert cached(path, lambda: pytest.fail("the cache was not read")).df == df
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temporary left


# -- lists are not capped at 30 ------------------------------------------------------------


class _Retriever:
    def __init__(self, hits: list[PaperHit]) -> None:
        self.hits = hits

    def search(self, query: str, k: int, filters: Any = None) -> list[PaperHit]:
        return self.hits[:k]


class _Relevance:
    """Says every retrieved paper is a member, as the fitted model does for a large topic."""

    def pool_size(self, list_question: bool) -> int:
        return 100

    def decide(self, question: str, hits: list[PaperHit], *, list_question: bool, topic: str,
               with_model: bool = False) -> Decision:
        return Decision(True, 0.99, hits, {h.paper.paper_id: 0.9 for h in hits}, [])

    def prime(self, papers: list[Paper]) -> None:
        pass


def test_a_list_answer_cites_every_member_past_30() -> None:
    from rag.answering.sources import SourceChooser

    hits = [PaperHit(Paper(paper_id=f"p{i}", abstract=f"Study {i} of laparoscopy.", title=f"Study {i}"),
                     0.5, 0.5) for i in range(45)]
    chooser = SourceChooser(_Retriever(hits), judge=None, relevance=_Relevance())  # type: ignore[arg-type]
    chosen = chooser.choose(read_question("Which studies are about laparoscopy?"), 5, None)
    assert chosen.list_question and len(chosen.sources) == 45 and chosen.matched == 45


# -- through the pipeline, on seeds/ -------------------------------------------------------


@pytest.fixture(scope="module")
def pipeline(seeded_settings: Any) -> Any:
    from rag.answering import Pipeline

    with Pipeline(seeded_settings.model_copy(update={"llm": "none"})) as p:
        yield p


def cited(answer: Any) -> set[str]:
    return {s.paper.title or s.paper.label for s in answer.sources}


def test_prompt_tuning_list_includes_pomp(pipeline: Any) -> None:
    # The example: the hand-picked list bounds listed 2 of 3 (POMP missing).
    ans = pipeline.answer("Which papers use prompt learning or prompt tuning?")
    labels = " ".join(s.paper.label for s in ans.sources)
    assert not ans.abstained and "POMP" in labels and "SPT" in labels


@pytest.mark.parametrize("question", [
    "Which studies are about laparoscopy?",  # a MeSH topic of PubMedQA, asked of seeds/
    "Is aspirin effective for preventing recurrent stroke in older adults?",
])
def test_question_from_another_field_abstains(pipeline: Any, question: str) -> None:
    ans = pipeline.answer(question)
    assert ans.abstained and ans.sources == []


def test_a_paper_close_to_every_pseudo_question_is_a_hub(pipeline: Any) -> None:
    rel = pipeline.chooser.relevance
    owners, probes = rel.probes()
    assert len(owners) == min(64, len(rel.retriever.papers())) == len(probes)
    centre = probes.mean(axis=0)
    centre /= np.linalg.norm(centre)
    other = np.random.default_rng(0).normal(size=probes.shape[1])
    other /= np.linalg.norm(other)
    # an abstract whose sentence sits among all the index's pseudo-questions is a hub; one
    # pointing elsewhere is not
    assert hub("not-in-the-index", centre[None, :], owners, probes) > \
        hub("not-in-the-index", other[None, :], owners, probes) + 0.2
    # a paper is not measured with its own title
    assert hub(owners[0], probes[:1], owners, probes) < hub("not-in-the-index", probes[:1], owners, probes)


def test_named_paper_fact_is_answered_from_its_abstract(pipeline: Any) -> None:
    ans = pipeline.answer("What speedup does Skrull report over DeepSpeed?")
    assert not ans.abstained and "3.76" in ans.answer


# -- metadata in retrieval -----------------------------------------------------------------


@pytest.mark.parametrize(("query", "want"), [
    ("Which paper has arXiv id 2307.11285?", "2307.11285"),  # FHA-Kitchens; ranked nothing before
    ("Which paper was written by Trevor Gale and Matei Zaharia?", "megablocks"),  # was 8th
    ("Which paper has the DOI 10.1145/3627703.3629585?", "10.1145/3627703.3629585"),
])
def test_search_finds_papers_by_their_record(retriever: Any, query: str, want: str) -> None:
    top5 = [" ".join(filter(None, [h.paper.arxiv_id, h.paper.doi, h.paper.label, h.paper.title])).lower()
            for h in retriever.search(query, 5)]
    assert any(want in record for record in top5), top5
