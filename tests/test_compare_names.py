"""Comparison tables and the names in a question: every named paper is either a row or said
to be left out, and a name is matched and quoted whole ("Pipe|Net" is one name)."""

from __future__ import annotations

import json
import re

import pytest

from rag.answering import Pipeline
from rag.answering.compare import MAX_ROWS, quoted
from rag.answering.names import CorpusNames
from rag.ingest import ingest
from rag.retrieve import Retriever

NOT_IN_INDEX = re.compile(r"([^:.]*) (?:is|are) not in the index")


@pytest.fixture(scope="module")
def offline(seeded_settings, retriever) -> Pipeline:  # type: ignore[no-untyped-def]
    return Pipeline(seeded_settings.model_copy(update={"llm": "none"}), retriever)


def test_named_papers_beyond_the_table_are_said_and_listed(offline: Pipeline, retriever) -> None:  # type: ignore[no-untyped-def]
    names = CorpusNames(retriever)
    names.refresh()
    # names a question can use as they are: one word each, so no name holds another
    shown = sorted({names.display(n) for n in names.known if re.fullmatch(r"[A-Za-z][\w-]+", n)})[:30]
    assert len(shown) == 30
    public = offline.answer("Compare the speedups reported by " + ", ".join(shown[:-1])
                            + f" and {shown[-1]}").to_public()
    rows = [r["label"] for r in public["table"]["rows"]]
    assert len(rows) == MAX_ROWS
    lead = public["answer"].split("\n", 1)[0]
    left = [n for n in shown if n not in rows]
    assert f"{len(left)} more named papers are left out" in lead
    assert all(quoted(n) in lead for n in left)  # which ones, each of them


@pytest.fixture(scope="module")
def odd_names(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    from rag.config import Settings

    home = tmp_path_factory.mktemp("odd-names")
    corpus = home / "papers.jsonl"
    rows = [
        ("Pipe|Net: pipelined training across GPU clusters",
         "We present Pipe|Net, which pipelines training across GPU clusters and achieves a 2.1x speedup over GPipe."),
        ("Vortex: fast attention kernels for long sequences",
         "We present Vortex, attention kernels that reach a 3.4x speedup over FlashAttention on long sequences."),
        ("**Bold**: emphasis in systems papers",
         "We study emphasis in systems papers and report a 1.5x speedup in reading time over plain text."),
        # two papers that go by one name
        ("Kestrel: sharded key-value caches for serving",
         "We present Kestrel, a sharded key-value cache that serves requests with a 2.7x speedup over vLLM."),
        ("Kestrel: verified network configuration",
         "We present Kestrel, which verifies network configurations with a 9.3x speedup over Batfish."),
    ]
    corpus.write_text("\n".join(json.dumps({"title": t, "abstract": a}) for t, a in rows) + "\n")
    settings = Settings(home=home / ".rag", seeds=corpus, llm="none")
    ingest([corpus], settings, show_progress=False)
    return Pipeline(settings, Retriever(settings))


def test_a_name_with_a_pipe_is_one_name_not_two_unknown_ones(odd_names: Pipeline) -> None:
    public = odd_names.answer("Compare the speedups reported by Pipe|Net, Vortex and Zorblax").to_public()
    assert [r["label"] for r in public["table"]["rows"]] == ["Pipe|Net", "Vortex"]
    said = NOT_IN_INDEX.search(public["answer"])
    assert said is not None and said.group(1).strip().endswith("“Zorblax”")
    assert "Pipe" not in said.group(1) and "Net" not in said.group(1)


def test_names_with_markdown_are_quoted_as_text(odd_names: Pipeline) -> None:
    public = odd_names.answer("Compare the speedups reported by **Bold**, Vortex and Zorblax").to_public()
    assert "**Bold**" in [r["label"] for r in public["table"]["rows"]]
    said = NOT_IN_INDEX.search(public["answer"])
    assert said is not None and "“Zorblax”" in said.group(1) and "Bold" not in said.group(1)
    assert quoted("**Bold**") == "“\\*\\*Bold\\*\\*”" and quoted("Pipe|Net") == "“Pipe\\|Net”"


def test_a_name_two_papers_go_by_gives_each_a_row(odd_names: Pipeline) -> None:
    """"Compare Kestrel and Vortex" with two Kestrels in the index: one of them, chosen
    silently, was compared; now each has a row and the lead says the name is shared."""
    public = odd_names.answer("Compare the speedups reported by Kestrel and Vortex").to_public()
    rows = public["table"]["rows"]
    assert [r["label"] for r in rows] == ["Kestrel", "Kestrel", "Vortex"]
    assert {c["title"] for c in public["citations"]} == {
        "Kestrel: sharded key-value caches for serving", "Kestrel: verified network configuration",
        "Vortex: fast attention kernels for long sequences"}
    assert "Several papers go by “Kestrel”: each has a row." in public["answer"].split("\n")[0]
