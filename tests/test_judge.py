"""The citation-support judge on the labelled cases of evals/judge_cases.jsonl, and its checks.

Precision and recall of `supported` must stay at or above the `judge` thresholds recorded in
evals/thresholds.yaml; every number, name, wrong-paper, fabricated and off-topic perturbation
must be caught, and all negations but two at most.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, SEEDS

EVALS = ROOT / "evals"
CAUGHT = ("number_changed", "name_swapped", "wrong_paper", "fabricated", "off_topic")


@pytest.fixture(scope="module")
def papers() -> list[Any]:
    from rag.eval.run import seed_papers

    return seed_papers(SEEDS)


@pytest.fixture(scope="module")
def judge(papers: list[Any]) -> Any:
    from rag.config import Settings
    from rag.embed import get_embedder
    from rag.eval.run import known_names
    from rag.judge import Judge

    settings = Settings()
    return Judge(get_embedder(settings.model_cache, settings.embed_threads),
                 known_names=known_names(papers))


@pytest.fixture(scope="module")
def results(judge: Any, papers: list[Any]) -> list[dict[str, Any]]:
    from rag.eval.report import judge_cases, load_judge_cases

    return judge_cases(judge, load_judge_cases(EVALS / "judge_cases.jsonl"), papers)


def paper(papers: list[Any], ref: str) -> Any:
    from rag.eval.run import match_ref

    found = match_ref(ref, papers)
    assert found is not None, ref
    return found


def check(judge: Any, papers: list[Any], sentence: str, *refs: str) -> Any:
    from rag.schema import Source

    cited = [paper(papers, r) for r in refs]
    return judge.check(sentence, [(Source(1, p, 0.0).header(), p.abstract) for p in cited])


SKRULL, MEGABLOCKS = "seeds/000_1d593446947ebb0f.txt#1", "seeds/002_582fbc6f8791162a.txt#17"
EDGE_IMPULSE = "seeds/002_582fbc6f8791162a.txt#15"


# -- on the labelled cases ----------------------------------------------------------------


def test_precision_and_recall_meet_the_recorded_thresholds(results: list[dict[str, Any]]) -> None:
    from rag.eval.report import judge_summary

    bounds = yaml.safe_load((EVALS / "thresholds.yaml").read_text())["judge"]["min"]
    summary = judge_summary(results)
    assert summary["n"] >= 150
    assert summary["precision"] >= bounds["precision"], summary
    assert summary["recall"] >= bounds["recall"], summary


def test_quotes_the_abstract_holds_word_for_word_pass(results: list[dict[str, Any]], papers: list[Any]) -> None:
    from rag.corpus.words import verbatim

    quotes = [r for r in results if r["kind"] == "quote"]
    held = [r for r in quotes if verbatim(r["sentence"], paper(papers, r["paper"]).abstract)]
    assert len(held) >= 12 and all(r["predicted"] for r in held)


@pytest.mark.parametrize("kind", CAUGHT)
def test_perturbations_are_caught(results: list[dict[str, Any]], kind: str) -> None:
    cases = [r for r in results if r["kind"] == kind]
    assert cases
    passed = [(r["id"], r["sentence"]) for r in cases if r["predicted"]]
    assert passed == [], f"{kind} cases judged supported"


def test_negations_are_caught(results: list[dict[str, Any]]) -> None:
    """11 of 13 (the similarity judge alone caught 5)."""
    cases = [r for r in results if r["kind"] == "negation"]
    passed = [(r["id"], r["sentence"]) for r in cases if r["predicted"]]
    assert len(cases) == 13 and len(passed) <= 2, passed


# -- the checks themselves ----------------------------------------------------------------


def test_number_and_name_extraction() -> None:
    from rag.corpus.words import names, numbers

    assert numbers("3.76x on average (up to 7.54×), 118,185 projects, 4X longer") == {
        "3.76", "7.54", "118185", "4"}
    assert numbers("ResNet-18 and arXiv:2307.11285") >= {"18", "2307.11285"}
    assert {"deepspeed", "sdp4bit", "h-gcn"} <= names("DeepSpeed, SDP4Bit and H-GCN are systems.")
    assert "the" not in names("The system is fast.")


def test_quote_passes_and_changed_number_fails(judge: Any, papers: list[Any]) -> None:
    quote = "Skrull outperforms DeepSpeed by 3.76x on average (up to 7.54x) in real-world long-SFT scenarios [1]."
    ok = check(judge, papers, quote, SKRULL)
    assert ok.supported and ok.score >= judge.threshold and "3.76x" in ok.quote
    bad = check(judge, papers, quote.replace("3.76x", "3.67x"), SKRULL)
    assert not bad.supported and "number not in abstract: 3.67" in bad.reasons


def test_thousands_separators_and_unit_suffixes_match(judge: Any, papers: list[Any]) -> None:
    ans = check(judge, papers, "Edge Impulse hosts 118185 projects from 50,953 developers.", EDGE_IMPULSE)
    assert ans.supported, ans.reasons


def test_swapped_system_name_fails(judge: Any, papers: list[Any]) -> None:
    s = check(judge, papers, "MegaBlocks trains MoEs up to 40% faster than with DeepSpeed.", MEGABLOCKS)
    assert not s.supported and any("deepspeed" in r for r in s.reasons)


def test_lower_case_corpus_name_must_be_in_the_cited_abstract(judge: Any, papers: list[Any]) -> None:
    # "tutel" is a known system name of the corpus even when written in lower case
    assert "tutel" in judge.known_names
    s = check(judge, papers, "skrull balances long and short sequences better than tutel.", SKRULL)
    assert not s.supported and any("tutel" in r for r in s.reasons)


def test_wrong_paper_without_names_or_numbers_fails_on_the_verifier(judge: Any, papers: list[Any]) -> None:
    # Nothing for the hard checks to catch: only the verifier can.
    claim = "Dynamic data scheduling balances the computation of long and short sequences."
    assert check(judge, papers, claim, SKRULL).supported
    wrong = check(judge, papers, claim, MEGABLOCKS)
    assert not wrong.supported and wrong.verdict == "not_supported"
    assert wrong.reasons[-1].startswith("no sentence of the abstract says it")


def test_best_of_several_citations_and_no_citation(judge: Any, papers: list[Any]) -> None:
    claim = "MegaBlocks never drops tokens and maps efficiently to modern hardware [1, 2]."
    both = check(judge, papers, claim, SKRULL, MEGABLOCKS)
    assert both.supported and both.source == 1
    none = check(judge, papers, claim)
    assert not none.supported and none.reasons == ["no citation"]


def test_the_quote_is_a_sentence_of_the_abstract(judge: Any, papers: list[Any]) -> None:
    """What the chat page highlights in the abstract: a list line starts with the paper's
    title, which must not make the record's header (title, authors, venue) the quote; a
    claim only the header states (its authors) is quoted from the header."""
    adaqp = paper(papers, "seeds/002_582fbc6f8791162a.txt#12")
    line = check(judge, papers, "Adaptive Message Quantization and Parallelization for Distributed "
                 "Full-graph GNN Training: This paper proposes an efficient GNN training system, "
                 "AdaQP, to expedite distributed full-graph GNN training [1].", "seeds/002_582fbc6f8791162a.txt#12")
    assert line.supported
    assert line.quote == "This paper proposes an efficient GNN training system, AdaQP, to expedite " \
                         "distributed full-graph GNN training."
    authors = check(judge, papers, f"AdaQP is by {', '.join(adaqp.authors)} [1].", "seeds/002_582fbc6f8791162a.txt#12")
    assert authors.quote not in adaqp.abstract and adaqp.authors[0] in authors.quote


def test_a_claim_its_abstract_settles_leaves_the_header_unread(judge: Any, papers: list[Any]) -> None:
    """Headers are not stored with the index: each one checked is embedded on the spot (a list
    answer's 43 took 3 s at 20,000 papers). A quote its abstract supports embeds no header, with
    the verdict and quote it had with the header; a claim about the authors still reads it."""
    from rag.judge import Judge, _sentence_cache
    from rag.schema import Source

    class Counting:
        def __init__(self, inner: Any) -> None:
            self.inner, self.texts = inner, []

        def embed(self, texts: list[str]) -> Any:
            self.texts += texts
            return self.inner.embed(texts)

    adaqp = paper(papers, "seeds/002_582fbc6f8791162a.txt#12")
    header = Source(1, adaqp, 0.0).header()
    counting = Counting(judge.embedder)
    lazy = Judge(counting, known_names=set(judge.known_names))  # type: ignore[arg-type]
    _sentence_cache.pop(header, None)
    quote = "This paper proposes an efficient GNN training system, AdaQP, to expedite distributed " \
            "full-graph GNN training [1]."
    got = lazy.check(quote, [(header, adaqp.abstract)])
    whole = judge.score_one(quote.removesuffix(" [1]."), judge.embedder.embed([quote.removesuffix(" [1].")])[0],
                            adaqp.abstract, header, whole=True)
    assert got.supported and whole.supported and got.quote == whole.quote
    assert not any(t in header for t in counting.texts), counting.texts
    authors = lazy.check(f"AdaQP is by {', '.join(adaqp.authors)} [1].", [(header, adaqp.abstract)])
    assert adaqp.authors[0] in authors.quote  # quoted from the header, so read
    assert any(adaqp.authors[0] in t for t in counting.texts)


def test_claims_about_the_record_are_checked_against_its_fields(judge: Any, papers: list[Any]) -> None:
    """Authors, venue and an arXiv comment are the record's, not the abstract's: each claim is
    compared with that field (led by the paper's name), not with the whole record, where the
    title's words outweighed the names ("Cupcake is by ..., T. S. Eugene Ng" scored 0.53 and
    was marked unsupported; so were "HyperGef appeared at MLSYS 2023" and BCD's "Accepted by
    ACM International Conference on Multimedia 2023")."""
    from rag.corpus.text import short_label
    from rag.schema import Source

    cupcake = paper(papers, "seeds/002_582fbc6f8791162a.txt#22")
    assert "T. S. Eugene Ng" in cupcake.authors
    claims = [(f"Cupcake is by {', '.join(cupcake.authors)} [1].", cupcake, "T. S. Eugene Ng"),
              ("HyperGef appeared at MLSYS 2023 [1].", paper(papers, "seeds/002_582fbc6f8791162a.txt#23"), "MLSYS"),
              ]
    bcd = next(p for p in papers if any("Multimedia" in c for c in p.comments))
    claims.append((f"{short_label(bcd.title, bcd.label)}: Accepted by ACM International Conference "
                   "on Multimedia 2023 [1].", bcd, "Multimedia"))
    for claim, cited, field in claims:
        got = judge.check(claim, [(Source(1, cited, 0.0).header(), cited.abstract)])
        assert got.supported, (claim, got)
        assert field in got.quote and cited.abstract[:40] not in got.quote
    wrong = judge.check("Cupcake was evaluated on ImageNet with ResNet-50 [1].",
                        [(Source(1, cupcake, 0.0).header(), cupcake.abstract)])
    assert not wrong.supported


def test_reversed_claims_are_unsupported_and_negated_paraphrases_are_not(
        judge: Any, papers: list[Any]) -> None:
    slower = check(judge, papers, "Skrull is slower than DeepSpeed in long-SFT scenarios [1].", SKRULL)
    assert not slower.supported
    assert slower.verdict == "contradicted" or "direction opposite to the abstract" in slower.reasons
    faster = check(judge, papers, "Skrull outperforms DeepSpeed in long-SFT scenarios [1].", SKRULL)
    assert faster.supported
    # "never drops tokens" is in the abstract: saying so is fine, with or without other words
    kept = check(judge, papers, "MegaBlocks never drops tokens and maps efficiently to modern "
                                "hardware [1].", MEGABLOCKS)
    assert kept.supported, kept.reasons


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_ollama_judge_takes_the_models_verdict(judge: Any, papers: list[Any], ollama_server: Any) -> None:
    from rag.judge import OllamaJudge
    from rag.llm import Ollama
    from rag.schema import Source

    llm_judge = OllamaJudge(judge.embedder, Ollama(ollama_server.url, "llama3.2", timeout=10))
    p = paper(papers, SKRULL)
    record = [(Source(1, p, 0.0).header(), p.abstract)]
    said = "Skrull outperforms DeepSpeed by 3.76x on average"
    ollama_server.replies = ['{"supported": false, "quote": ""}',
                             f'{{"supported": true, "quote": "{said.upper()}"}}',
                             # a small model's yes with the prompt's placeholder for its quote
                             '{"supported": true, "quote": "The abstract sentence that states it"}']
    negated = llm_judge.check("Skrull is slower than DeepSpeed in long-SFT scenarios.", record)
    assert not negated.supported and negated.reasons == ["the model judged it unsupported"]
    faster = llm_judge.check("Skrull is faster than DeepSpeed.", record)
    assert faster.supported and faster.quote == said.upper()
    placeholder = llm_judge.check("Skrull runs on TPUs.", record)
    assert not placeholder.supported
    # a name the abstract lacks refuses the model's yes before its quote is read
    assert placeholder.reasons == ["the model called it supported, but name not in abstract: tpu"]
    body = ollama_server.requests[-2]["body"]
    prompt = body["messages"][-1]["content"]
    assert "<claim>\nSkrull is faster than DeepSpeed.\n</claim>" in prompt and "Long-context" in prompt
    assert body["format"]["properties"]["supported"] == {"type": "boolean"}  # structured output
    # a budget for the verdict (its quote is at most the record): a small model wrote a JSON
    # quote until the 120 s timeout without one
    assert len(p.abstract) / 4 < body["options"]["num_predict"] < len(p.abstract)
    ollama_server.replies.append('{"supported": true, "quote": "The abstract sentence that states it"}')
    unquoted = llm_judge.check("Skrull schedules long and short sequences.", record)
    assert unquoted.reasons == ["the model called it supported but quoted nothing the abstract says"]
    llm_judge.llm.client._client.close()  # type: ignore[attr-defined]  # rag.llm.Ollama has no close()



@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_ollama_judge_sends_nothing_once_the_answers_deadline_passed(
        judge: Any, papers: list[Any], ollama_server: Any) -> None:
    """A sentence checked after the answer's deadline is decided by rag's verifier, says why,
    and costs the server no request (a loaded run sent verdict requests past the deadline)."""
    from rag.judge import OllamaJudge
    from rag.llm import Ollama
    from rag.llm.guard import Deadline
    from rag.schema import Source

    llm_judge = OllamaJudge(judge.embedder, Ollama(ollama_server.url, "llama3.2", timeout=10))
    p = paper(papers, SKRULL)
    record = [(Source(1, p, 0.0).header(), p.abstract)]
    chats = lambda: [r for r in ollama_server.requests if r["path"] == "/api/chat"]  # noqa: E731
    sent = len(chats())
    ollama_server.replies = ['{"supported": true, "quote": "Skrull outperforms DeepSpeed"}']
    late = llm_judge.within(Deadline(0.0))
    verdict = late.check("Skrull is faster than DeepSpeed.", record)
    assert len(chats()) == sent and late.asked == 0
    assert late.fallbacks and "deadline" in late.fallbacks[0]
    assert verdict == judge.check("Skrull is faster than DeepSpeed.", record)  # the verifier's own
    # the same judge within a live deadline asks
    live = llm_judge.within(Deadline(30.0))
    assert live.check("Skrull is faster than DeepSpeed.", record).supported
    assert len(chats()) == sent + 1 and live.asked == 1 and not live.fallbacks
    llm_judge.llm.client._client.close()  # type: ignore[attr-defined]  # rag.llm.Ollama has no close()

def test_thresholds_file_records_the_judge_bounds() -> None:
    data = yaml.safe_load(Path(EVALS / "thresholds.yaml").read_text())
    assert set(data["judge"]["min"]) == {"precision", "recall"}
