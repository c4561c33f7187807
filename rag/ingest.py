"""Incremental ingest: files -> Paper records -> chunks -> embeddings -> the store.

Everything is parsed before anything is written, so a bad file leaves the index as it was.
Papers whose stored content hash matches are skipped (no embedding work); a changed paper's
chunks are replaced; a re-ingested file's vanished papers are removed.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from rag.config import Settings
from rag.corpus import Paper
from rag.corpus.text import sentence_pieces, split_sentences
from rag.embed import Embedder, get_embedder
from rag.embed.pooling import chunk_weights, pooled
from rag.errors import IndexStoreError, InputError
from rag.logs import progress
from rag.store import Chunk, Store
from rag.store import format as store_format
from rag.store.indexes import built_from, built_otherwise, built_with_others, collection_names
from rag.store.lock import ingest_lock
from rag.store.quick import QuickStore, remember, remember_served

if TYPE_CHECKING:  # the readers are imported by ingest() itself: opening an index for a
    from rag.corpus import Restrict  # question reads no file (rag.corpus)
    from rag.corpus.merge import Merge

GROUP_BATCHES = 16  # embedding batches per group: embedded in one call, written in one write


@dataclass
class IngestReport:
    files: int = 0
    papers: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks: int = 0
    sentences: int = 0
    skipped: list[str] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)  # files not read, each "PATH: why"
    left_out: dict[str, int] = field(default_factory=dict)  # records no error, not ingested
    merges: list[Merge] = field(default_factory=list)  # records found to be one paper
    notes: list[str] = field(default_factory=list)  # what was read, when worth saying
    deletions: list[str] = field(default_factory=list)  # what each PubMed DeleteCitation did
    seconds: float = 0.0

    def summary(self) -> str:
        text = (
            f"{self.files} file(s), {self.papers} papers: {self.new} new, {self.changed} changed, "
            f"{self.unchanged} unchanged, {self.removed} removed; {self.chunks} chunks and "
            f"{self.sentences} sentences embedded "
            f"in {self.seconds:.1f} s"
        )
        if self.skipped:
            text += f"; skipped {len(self.skipped)} bad record(s)/file(s)"
        if self.unread:
            text += f"; {len(self.unread)} file(s) not read (listed above)"
        if self.left_out:
            text += f"; left out {self.left_out_text()}"
        merged = len({m.paper_id for m in self.merges})
        if merged:
            text += f"; merged {merged} paper(s) seen in several sources"
            # an abstract not kept is no longer searched: said here too, not only on stderr
            dropped = len({m.paper_id for m in self.merges if m.differ})
            if dropped:
                text += f" ({dropped} with another abstract not kept: rag papers --duplicates)"
        if self.deletions:
            text += f"; PubMed deleted {len(self.deletions)} PMID(s)"
        return text

    def to_public(self) -> dict[str, Any]:
        """`rag ingest --json` (docs/reference/json.md)."""
        return {"files": self.files, "papers": self.papers, "new": self.new, "changed": self.changed,
                "unchanged": self.unchanged, "removed": self.removed, "chunks": self.chunks,
                "sentences": self.sentences, "skipped": self.skipped,
                "not_read": [{"path": u.split(": ", 1)[0], "reason": u.split(": ", 1)[-1]} for u in self.unread],
                "left_out": self.left_out, "merged": len({m.paper_id for m in self.merges}),
                "seconds": round(self.seconds, 2)}

    def left_out_text(self) -> str:
        return ", ".join(f"{n:,} {why}" for why, n in self.left_out.items())


def make_chunks(paper: Paper, splitter: object) -> list[Chunk]:
    texts = splitter.split_text(paper.abstract)  # type: ignore[attr-defined]
    return [Chunk(f"{paper.paper_id}#{i}", paper.paper_id, t, i) for i, t in enumerate(texts)]


def embed_text(paper: Paper, chunk: Chunk) -> str:
    """What is embedded for a chunk: the title gives every chunk its paper's topic."""
    return f"{paper.title}. {chunk.text}" if paper.title else chunk.text


def _groups(planned: dict[str, list[tuple[Paper, list[Chunk]]]], sentences: dict[str, list[str]],
            size: int) -> Iterator[list[tuple[Paper, list[Chunk]]]]:
    """The papers to embed, in order, in groups of about `size` texts."""
    group: list[tuple[Paper, list[Chunk]]] = []
    n = 0
    for items in planned.values():
        for paper, chunks in items:
            group.append((paper, chunks))
            n += len(chunks) + len(sentences[paper.paper_id])
            if n >= size:
                yield group
                group, n = [], 0
    if group:
        yield group


def ingest_embedder(settings: Settings) -> Embedder:
    """The model on RAG_DEVICE (auto: a GPU when CUDA torch sees one, see rag.embed.gpu); on a
    CPU-only machine this is the same instance the query path uses."""
    from rag.embed import gpu as embed_gpu

    if embed_gpu.choose_device(settings.device) == "cuda":
        return embed_gpu.get_torch_embedder(settings.model_cache)  # type: ignore[return-value]
    return get_embedder(settings.model_cache, settings.embed_threads, precision=settings.embed_precision)


def _splitter(settings: Settings) -> object:
    from llama_index.core.node_parser import SentenceSplitter

    tok = ingest_embedder(settings).tokenizer

    def count_tokens(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids  # type: ignore[no-any-return]

    # Sized in the embedding model's own tokens, so a chunk is never truncated by it. Chunks
    # break at the same sentence boundaries the judge uses (rag.corpus.text), instead of
    # nltk's punkt, whose first use costs ~1 s of every ingest.
    return SentenceSplitter(
        chunk_size=settings.chunk_size, chunk_overlap=settings.chunk_overlap, tokenizer=count_tokens,
        chunking_tokenizer_fn=sentence_pieces,
    )


def ingest(
    paths: list[Path], settings: Settings, *, prune: bool = False, skip_bad: bool = False,
    show_progress: bool = True, store: Store | None = None, restrict: Restrict | None = None,
    replace: bool = False, collection: str | None = None,
) -> IngestReport:
    """Records of one paper (shared DOI, arXiv id, PMID, id, abstract, or title + first author
    + year) are merged (rag.corpus.merge), each merge reported; `replace`: the later record's
    fields win, also over the paper already indexed."""
    started = time.perf_counter()
    from rag.embed.gpu import choose_device

    choose_device(settings.device)  # RAG_DEVICE=cuda without a GPU fails before anything is read
    from rag.corpus import read_all
    from rag.corpus.reingest import plan

    results, skipped, unread = read_all(paths, skip_bad, restrict, collection)
    report = IngestReport(files=len(results), skipped=skipped, unread=unread,
                          notes=[f"{r.source}: {r.note}" for r in results if r.note])
    for r in results:
        for why, n in r.left_out.items():
            report.left_out[why] = report.left_out.get(why, 0) + n
    # nothing read: no record and no PubMed deletion (a deletion leaves its PMID or a record)
    if not prune and not any(r.papers or r.deleted for r in results):
        if report.left_out:
            raise InputError(f"no papers to ingest: left out {report.left_out_text()}",
                             "loosen --category/--since, or point at files with abstracts in them")
        raise InputError("no papers to ingest", "point at files with abstracts in them")

    with ingest_lock(settings):
        owned = store is None
        store = store or Store(settings, upgrade=True)  # an older index is upgraded here
        states = store.paper_states()
        stored = {p.paper_id: p for p in store.papers()} if states else {}
        # A restricted read saw only part of each file: what it left out is not gone from it.
        update = plan(results, stored, {pid: state[3] for pid, state in states.items()}, replace=replace,
                      prune=prune, partial=bool(restrict and restrict.active()),
                      source_paths=store.source_paths() if prune else {})
        papers, report.merges, report.deletions = update.papers, update.merges, update.deletions
        report.papers = len(papers)
        todo: dict[str, list[Paper]] = defaultdict(list)
        rewritten: list[Paper] = []  # changed where nothing is embedded: a new record, same vectors
        for paper in papers:
            state = states.get(paper.paper_id)
            if state is None:
                report.new += 1
            elif state[0] == paper.content_hash() and state[1] == state[2]:
                report.unchanged += 1
                continue
            else:
                report.changed += 1
                old = stored.get(paper.paper_id)
                if state[1] == state[2] and old is not None and (old.title, old.abstract) == (paper.title, paper.abstract):
                    rewritten.append(paper)
                    continue
            todo[paper.source].append(paper)

        gone = update.removed
        report.removed = len(gone)

        # One version bump for the whole ingest (Store.writing), none when nothing changes.
        with store.writing() if todo or rewritten or gone else contextlib.nullcontext():
            if todo:
                _store(todo, store, settings, set(states), show_progress, report)
            if rewritten:
                store_format.rewrite(store, rewritten)
            if gone:
                store.write([], delete_papers=gone)
        if owned:
            store.close()
    report.seconds = time.perf_counter() - started
    return report


def _store(todo: dict[str, list[Paper]], store: Store, settings: Settings, stored: set[str],
           show_progress: bool, report: IngestReport) -> None:
    """Chunk, embed and write the papers to do (`stored`: the ids the store holds already)."""
    splitter = _splitter(settings)
    embedder = ingest_embedder(settings)
    planned = {src: [(p, make_chunks(p, splitter)) for p in ps] for src, ps in todo.items()}
    sentences = {p.paper_id: split_sentences(p.abstract) or [p.abstract]
                 for ps in todo.values() for p in ps}
    derive = store.settings.chunk_vectors == "sentences"  # the index's own kind
    weights = {p.paper_id: chunk_weights(p.abstract, p.title, [c.text for c in cs],
                                          sentences[p.paper_id]) if derive else None
               for items in planned.values() for p, cs in items}
    total = sum(_model_texts(p, cs, weights[p.paper_id]) for items in planned.values()
                for p, cs in items) + sum(len(v) for v in sentences.values())
    # Papers are embedded in groups of GROUP_BATCHES batches (in order, whatever file
    # they come from: per-file calls on seeds/' five files cost 40% more; within a
    # group texts are sorted by length, so batches carry little padding) and each is
    # written in one store.write, in a second thread while the next group embeds
    # (onnxruntime and Chroma's inserts release the GIL). A paper is stored whole or
    # not at all (Store.write), so a killed ingest resumes at the first missing one.
    with progress(total, f"embedding ({embedder.device})", enabled=show_progress) as bar, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="rag-write") as writer:
        pending: Future[None] | None = None
        for group in _groups(planned, sentences, settings.embed_batch * GROUP_BATCHES):
            rows, sent_rows = _embed_group(group, sentences, weights, embedder,
                                           settings.embed_batch, bar)
            if pending:
                pending.result()  # the previous group is stored (or its error raised)
            pending = writer.submit(store.write, rows, sentences=sent_rows,
                                   new=not stored & {p.paper_id for p, _, _ in rows})
            report.chunks += sum(len(c) for _, c, _ in rows)
            report.sentences += sum(len(t) for _, t, _ in sent_rows)
        if pending:
            pending.result()


def _model_texts(paper: Paper, chunks: list[Chunk], weights: np.ndarray | None) -> int:
    """How many texts besides its sentences the model reads for a paper's chunks."""
    return len(chunks) if weights is None else int(bool(weights[:, 0].any()))


def _embed_group(group: list[tuple[Paper, list[Chunk]]], sentences: dict[str, list[str]],
                 weights: dict[str, np.ndarray | None], embedder: Embedder, batch: int,
                 bar: Callable[[int], None] | None
                 ) -> tuple[list[tuple[Paper, list[Chunk], np.ndarray]],
                            list[tuple[str, list[str], np.ndarray]]]:
    """One group's chunk and sentence vectors, in one call of the model. With chunk vectors
    from sentences (RAG_CHUNK_VECTORS=sentences; `weights` from chunk_weights), the model
    reads each sentence and title once and the chunks' vectors are pooled from them: about
    half the tokens of reading the chunks as well (SciFact: 11,406 chunks and 45,162
    sentences for 5,183 abstracts)."""
    texts: list[str] = []
    for paper, chunks in group:
        w = weights[paper.paper_id]
        if w is None:
            texts += [embed_text(paper, c) for c in chunks]
        elif w[:, 0].any():
            texts.append(paper.title or "")
    s_at = len(texts)
    texts += [s for p, _ in group for s in sentences[p.paper_id]]
    derived = any(weights[p.paper_id] is not None for p, _ in group)
    if derived:
        vectors, sums, counts = embedder.embed_sums(texts, batch, bar)
    else:
        vectors = embedder.embed(texts, batch, bar)
    rows, sent_rows, at = [], [], 0
    for paper, chunks in group:
        sents = sentences[paper.paper_id]
        sent_vecs = vectors[s_at : s_at + len(sents)]
        s_at += len(sents)
        w = weights[paper.paper_id]
        if w is None:
            chunk_vecs = vectors[at : at + len(chunks)]
            at += len(chunks)
        else:  # the title's row (none without a title: its weight is 0), then the sentences'
            has_title = bool(w[:, 0].any())
            parts = ([at] if has_title else []) + list(range(s_at - len(sents), s_at))
            chunk_vecs = pooled(w if has_title else w[:, 1:], sums[parts], counts[parts])
            at += has_title
        rows.append((paper, chunks, chunk_vecs))
        sent_rows.append((paper.paper_id, sents, sent_vecs))
    return rows, sent_rows


DEMO = "demo"  # the index of the demo papers (settings.seeds), apart from the user's own


def open_index(settings: Settings, say: Callable[[str], None] | None = None,
               show_progress: bool = True, empty_ok: bool = False) -> Store:
    """The store of settings.index, to read from: while the default index holds none of the
    user's papers, the demo index (filled from settings.seeds on first use) is read instead,
    so that the user's `rag ingest PATH` makes the default index theirs alone; a named one must
    exist and hold papers, and a mistyped name leaves no empty index behind. `empty_ok`: a
    named index may be new or empty (`rag mcp --allow-ingest`, whose ingest tool fills it).
    The store's `settings.index` says which index it is.

    A small embedded index is read from its quick file (rag.store.quick), without Chroma,
    when one is there; else it is opened, and its quick file written for the next question."""
    if not empty_ok:
        fast = QuickStore.open(settings, Store)
        if fast is not None:
            if fast.settings.index != settings.index:
                _say_demo(settings, say)
            return cast(Store, fast)
    default = settings.index == Settings.model_fields["index"].default
    store = Store(settings, create=default or empty_ok)
    if default and not empty_ok and store.count() == 0:
        refuse_unless_seeds(settings, store)
        demo = Store(settings.model_copy(update={"index": DEMO}), create=True)
        if demo.count() == 0:
            seed(demo.settings, demo, say, show_progress)
        remember(demo, lock_held=False)
        remember_served(settings, store, demo)
        store.close()
        _say_demo(settings, say)
        return demo
    ensure_seeded(settings, store, say, show_progress, empty_ok=empty_ok)
    if not empty_ok:  # its quick file is missing or stale, or it would have been read above
        remember(store, lock_held=False)
    return store


def _say_demo(settings: Settings, say: Callable[[str], None] | None) -> None:
    if say:
        say(f"answering from the demo index (the papers of {settings.seeds}/): "
            "`rag ingest PATH` makes the default index yours")


def refuse_unless_seeds(settings: Settings, store: Store) -> None:
    """An empty default index built from the user's own files under other chunk settings (or
    an earlier rag's chunking) is refused, not passed over: their library would seem gone.
    Seed files are known by name, wherever the checkout that read them was."""
    seeds = settings.seeds
    seed_files = {f.name for f in seeds.iterdir()} if seeds.is_dir() else set()
    if any(Path(f).name not in seed_files for f in built_from(settings, store.client, store.name)):
        raise built_otherwise(settings, store.client, store.name)


def seed(settings: Settings, store: Store, say: Callable[[str], None] | None, show_progress: bool) -> None:
    """settings.seeds ingested into `store`, said."""
    seeds = settings.seeds
    if not seeds.exists():
        raise IndexStoreError(f"the index '{settings.index}' is empty and {seeds}/ does not exist",
                              "run `rag ingest PATH` first, or set RAG_SEEDS to a corpus directory")
    if say:
        say(f"index '{settings.index}' is empty: ingesting {seeds}/ first")
    report = ingest([seeds], settings, store=store, show_progress=show_progress)
    if say:
        say(report.summary())


def ensure_seeded(settings: Settings, store: Store, say: Callable[[str], None] | None = None,
                  show_progress: bool = True, empty_ok: bool = False) -> None:
    """The default index, when empty, gets settings.seeds ingested first (what `rag ask` and
    `rag serve` do). An index named on purpose is the user's own: filling an empty one with
    seeds/ would show the seed papers as if they were theirs (after a failed ingest, say)."""
    if store.count() > 0:
        return
    if settings.index != Settings.model_fields["index"].default:
        if built_with_others(settings, collection_names(store.client), store.name):
            raise built_otherwise(settings, store.client, store.name)
        if empty_ok:
            return
        raise IndexStoreError(f"the index '{settings.index}' is empty",
                              f"fill it with `rag ingest PATH --index {settings.index}`")
    refuse_unless_seeds(settings, store)
    seed(settings, store, say, show_progress)
