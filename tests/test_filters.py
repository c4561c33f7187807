"""Filters as conditions the store evaluates itself (year ranges, category, venue words), on a
generated corpus where the papers a filter keeps rank far below the unfiltered top results;
and an index written in the previous format (one sentence per record, no filter metadata),
refused with a message and upgraded in place by `rag ingest`.

Vectors are written by hand (a fixed query direction) so that the ranking is known without
the embedding model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag.config import Settings
from rag.corpus.paper import Paper
from rag.errors import IndexStoreError, InputError
from rag.retrieve import DENSE_POOL, Retriever
from rag.retrieve.filters import Filters
from rag.store import Chunk, Store

DIM = 8
TOP = DENSE_POOL + 100  # more papers above the filtered ones than a ranking pool holds
QUERY = "pipeline parallel training on GPU clusters"


class FixedEmbedder:
    """Every text is the query direction: the store's nearest neighbours are known."""

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        out[:, 0] = 1.0
        return out


def _unit(axis: int, rng: np.random.Generator, noise: float) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[axis] = 1.0
    v += rng.normal(0, noise, DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _papers() -> list[tuple[Paper, np.ndarray]]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(TOP):  # on topic: near the query, every query word in the text
        p = Paper(paper_id=f"top-{i:03d}", abstract=f"{QUERY}, variant {i}.", title=f"Top {i}",
                  venue="MLSys", year=2020 + i % 3, categories=["cs.DC"], source="dumps/top.jsonl")
        out.append((p, _unit(0, rng, 0.05)))
    for i in range(5):  # off topic: orthogonal to the query, no query word
        p = Paper(paper_id=f"far-{i}", abstract=f"Protein folding in yeast cells, study {i}.",
                  title=f"Far {i}", journal_ref=f"Journal of Obscure Biology {i + 10}", year=2023,
                  categories=["q-bio.BM", "physics.bio-ph"], source="dumps/far.jsonl")
        if i == 0:  # also in a Zotero library: merged (rag.corpus.merge), this file kept
            p.sources = [{"source": "dumps/far.jsonl", "line": 1},
                         {"source": "zotero.sqlite", "record": 4, "matched": "same DOI 10.1000/far"}]
        out.append((p, _unit(1, rng, 0.05)))
    return out


def _write(store: Store) -> None:
    rows = _papers()
    store.write([(p, [Chunk(f"{p.paper_id}#0", p.paper_id, p.abstract, 0)], v[None, :])
                 for p, v in rows],
                sentences=[(p.paper_id, [p.abstract], v[None, :]) for p, v in rows])


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Retriever, list[Any]]:
    settings = Settings(home=tmp_path_factory.mktemp("filters") / ".rag", llm="none")
    store = Store(settings)
    _write(store)
    calls: list[Any] = []
    real = store.query_ids

    def spy(vector: np.ndarray, n: int, where: Any = None, total: int | None = None) -> Any:
        calls.append(where)
        return real(vector, n, where, total)

    store.query_ids = spy  # type: ignore[method-assign]
    return Retriever(settings, store=store, embedder=FixedEmbedder()), calls  # type: ignore[arg-type]


FAR = [f"far-{i}" for i in range(5)]


def test_unfiltered_top_holds_none_of_the_far_papers(searched: tuple[Retriever, list[Any]]) -> None:
    retriever, _ = searched
    ranked = [h.paper.paper_id for h in retriever.search(QUERY, 50)]
    assert ranked and not set(ranked) & set(FAR)


@pytest.mark.parametrize("kwargs", [
    {"category": "q-bio.BM"},
    {"category": "q-bio"},  # the archive: every q-bio.* paper
    {"category": "physics.BIO-PH"},  # case does not matter
    {"venue": "obscure biology"},
    {"venue": "Bio"},  # part of a word, as the substring filter always matched
    {"year": "2023", "source": "far"},
    {"year": "2023", "category": "q-bio", "venue": "journal of obscure"},
])
def test_filtered_papers_far_below_the_top_are_returned(
        searched: tuple[Retriever, list[Any]], kwargs: dict[str, str]) -> None:
    retriever, _ = searched
    hits = retriever.search(QUERY, 10, Filters.parse(**kwargs))
    assert sorted(h.paper.paper_id for h in hits) == FAR


def test_source_takes_every_file_a_merged_paper_was_read_from(
        searched: tuple[Retriever, list[Any]]) -> None:
    """A paper kept in a Zotero library and a dump is one paper, stored under the file it was
    first read from: `--source zotero` left it out ("No papers match.")."""
    retriever, calls = searched
    calls.clear()
    hits = retriever.search(QUERY, 10, Filters.parse(source="zotero"))
    assert [h.paper.paper_id for h in hits] == ["far-0"]
    assert "top-" not in json.dumps(calls)  # a condition on the merged papers, not a list of all
    assert sorted(h.paper.paper_id for h in retriever.search(QUERY, 10, Filters.parse(source="far"))) == FAR


def test_year_range_keeps_exactly_its_years(searched: tuple[Retriever, list[Any]]) -> None:
    retriever, _ = searched
    hits = retriever.search(QUERY, 500, Filters.parse(year="2021-2022"))
    years = {h.paper.year for h in hits}
    assert years == {2021, 2022}
    assert len(hits) == sum(1 for i in range(TOP) if i % 3)


def test_store_gets_conditions_not_a_list_of_every_allowed_paper(
        searched: tuple[Retriever, list[Any]]) -> None:
    retriever, calls = searched
    calls.clear()
    hits = retriever.search(QUERY, 10, Filters.parse(year="2020-2022", category="cs"))
    assert len(hits) == 10  # 300 papers allowed
    [where] = calls
    text = json.dumps(where)
    assert "paper_id" not in text and "top-" not in text
    assert where == {"$and": [{"year": {"$gte": 2020}}, {"year": {"$lte": 2022}},
                              {"categories": {"$contains": "cs"}}]}


@pytest.mark.parametrize("kwargs", [{"category": "cs.LG"}, {"venue": "neurips"}, {"year": "1999"}])
def test_filters_nothing_matches_give_no_results(searched: tuple[Retriever, list[Any]],
                                                 kwargs: dict[str, str]) -> None:
    retriever, _ = searched
    assert retriever.search(QUERY, 10, Filters.parse(**kwargs)) == []


def test_parse_keeps_positional_form_and_takes_category_by_keyword() -> None:
    assert Filters.parse("mlsys", "2022-", "seeds") == Filters(
        venue="mlsys", year_from=2022, source="seeds")
    f = Filters.parse(venue=None, year=2023, source=None, category=" cs.DC ")
    assert (f.year_from, f.year_to, f.category) == (2023, 2023, "cs.DC") and f.active()
    assert not Filters.parse(category="").active()
    with pytest.raises(InputError, match="not a year"):
        Filters.parse(year="20x3", category="cs")


# -- an index of the previous format --------------------------------------------------------


# The keys format 3 and 4 added to every chunk: native filters' arrays, LlamaIndex's node keys.
NEWER_KEYS = ("venue_words", "categories", "_node_content", "_node_type", "ref_doc_id", "doc_id",
              "document_id")


def _downgrade(store: Store) -> None:
    """What the previous release wrote: sentences one per record in `<name>-sentences`, chunks
    with their own texts and vectors but no filter metadata, no `format` on the collection.

    The chunk collection is written afresh, as that release's ingest wrote it, with the real,
    distinct chunk vectors. Neither identical vectors nor deleting every record and adding it
    again in the same collection: both leave an HNSW graph in which a filtered search can
    miss a record that matches (a few runs in a hundred), which no ingest ever made."""
    ids = store.sentences_collection.get(include=[])["ids"]
    old = store.client.create_collection(f"{store.name}-sentences", embedding_function=None)
    for pid, (texts, vecs) in store.sentences(ids).items():
        old.add(ids=[f"{pid}#s{i}" for i in range(len(texts))], documents=texts,
                metadatas=[{"paper_id": pid, "n": i} for i in range(len(texts))], embeddings=vecs)
    store.client.delete_collection(f"{store.name}-paper-sentences")
    page = store.collection.get(include=["metadatas", "documents", "embeddings"])
    metas = [{k: v for k, v in m.items() if k not in NEWER_KEYS} for m in page["metadatas"]]
    assert len({tuple(v) for v in page["embeddings"]}) == len(metas)  # distinct, as ingest wrote
    meta = {k: v for k, v in (store.collection.metadata or {}).items() if k != "format"}
    store.client.delete_collection(store.name)
    chunks = store.client.create_collection(
        store.name, metadata=meta, embedding_function=None,
        configuration={"hnsw": {"space": "cosine", "ef_construction": 200, "ef_search": 200,
                                "max_neighbors": 32}})
    chunks.add(ids=page["ids"], metadatas=metas, embeddings=page["embeddings"],
               documents=page["documents"])


def test_previous_format_is_refused_with_a_message_then_upgraded(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / ".rag", llm="none")
    store = Store(settings)
    _write(store)
    before = store.sentences(["far-0", "top-001"])
    _downgrade(store)
    store.close()
    with pytest.raises(IndexStoreError, match="written by an earlier version") as err:
        Store(settings)
    assert "run `rag ingest` once" in (err.value.hint or "")
    upgraded = Store(settings, upgrade=True)  # what `rag ingest` opens
    after = upgraded.sentences(["far-0", "top-001"])
    assert {k: (t, v.tolist()) for k, (t, v) in after.items()} == {
        k: (t, v.tolist()) for k, (t, v) in before.items()}
    hits = Retriever(settings, store=upgraded, embedder=FixedEmbedder()).search(  # type: ignore[arg-type]
        QUERY, 10, Filters.parse(category="q-bio"))
    assert sorted(h.paper.paper_id for h in hits) == FAR
    upgraded.close()
    Store(settings).close()  # opened as usual from now on
