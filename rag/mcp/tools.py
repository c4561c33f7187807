"""The work behind the MCP tools, without the SDK: each method takes the tool's arguments,
calls the same code as the CLI and the HTTP API (the pipeline, the retriever, rag.export,
rag.ingest) and returns a result model of rag.mcp.results within its character budget.

Bad input raises a RagError (rag.mcp.server turns it into a tool error).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rag.answering import Pipeline
from rag.config import Settings
from rag.corpus import expand_paths
from rag.corpus.paper import Paper
from rag.corpus.text import split_sentences
from rag.errors import IndexStoreError, InputError
from rag.mcp.results import (
    AskResult,
    Evidence,
    ExportResult,
    IndexInfo,
    IngestResult,
    PaperPage,
    PaperRecord,
    PaperRef,
    Reference,
    SearchHit,
    SearchResult,
    SourceMatch,
    SourceResult,
    Verdict,
    clip,
    fit,
    quoted,
    size,
)
from rag.retrieve import Retriever
from rag.retrieve.metadata import find_paper as lookup_paper
from rag.schema import MAX_QUESTION, AskOptions, QuestionRead
from rag.store.indexes import index_sizes

PAGE = 50  # papers on a list page at most (fewer when the budget says so)
_NOT_WORD = re.compile(r"[\W_]+")


def _words(text: str) -> str:
    """Lower-cased words joined by single spaces: a quote matches whatever its punctuation,
    case, spacing or Unicode form."""
    return " ".join(_NOT_WORD.sub(" ", unicodedata.normalize("NFKC", text).lower()).split())


def find_paper(retriever: Retriever, ident: str, index: str) -> Paper:
    """A paper by the index's id, its arXiv id, its DOI or another identifier it has
    (rag.retrieve.metadata.find_paper)."""
    ident = ident.strip()
    if not ident:
        raise InputError("the paper id is empty", "give a paper id, arXiv id or DOI")
    paper = lookup_paper(retriever.snapshot(), ident)
    if paper is None:
        # the index named: a paper found with index="pubmedqa", then looked up without it,
        # was "not in the index" with nothing to say which
        raise InputError(f"no paper with id, arXiv id or DOI {quoted(ident)} in the index {quoted(index)}",
                         "find papers with search_papers or list_papers, and pass the same `index`")
    return paper


def _options(base: AskOptions, **given: Any) -> AskOptions:
    """The server's defaults with the call's arguments over them, validated like `rag ask`."""
    values = {**base.model_dump(exclude_none=True),
              **{k: v for k, v in given.items() if v is not None}}
    try:
        return AskOptions(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"{'.'.join(map(str, err['loc'])) or 'argument'}: {err['msg']}",
                         "see the tool's input schema") from None


def _query(text: str, what: str) -> str:
    text = text.strip()
    if not text:
        raise InputError(f"the {what} is empty", f"give a {what}")
    if len(text) > MAX_QUESTION:
        raise InputError(f"the {what} is {len(text)} characters; at most {MAX_QUESTION}",
                         f"shorten the {what}")
    return text


class RagTools:
    """One per server: the pipeline of the default index (`base`, loaded once) and, on
    demand, one for each other index named in a call, sharing its embedding model."""

    def __init__(self, settings: Settings, base: Callable[[], Pipeline], defaults: AskOptions,
                 allow_ingest: Path | None = None) -> None:
        self.settings = settings
        self.base = base
        self.defaults = defaults
        self.allow_ingest = allow_ingest.resolve() if allow_ingest else None
        self._others: dict[str, Pipeline] = {}
        self._lock = threading.Lock()

    # -- indexes --------------------------------------------------------------------------

    def indexes(self) -> list[IndexInfo]:
        """The indexes in this data directory (or Chroma server) that hold papers, and the
        server's own, with their paper counts."""
        sizes = index_sizes(self.base().retriever.store.client, self.settings)
        return [IndexInfo(index=index, papers=papers) for index, papers in sizes.items()
                if papers or index == self.settings.index]

    def pipeline(self, index: str | None = None) -> Pipeline:
        """The pipeline of an index with papers in it (an empty one is an error: the answer
        "no papers match" would read as if the index held nothing on the topic)."""
        if not index or index == self.settings.index:
            return self._filled(self.base())
        with self._lock:
            if index in self._others:
                return self._filled(self._others[index])
        known = [i.index for i in self.indexes()]
        if index not in known:
            raise IndexStoreError(f"no index {quoted(index)}", f"the indexes are: {', '.join(known)}")
        from rag.store import Store

        settings = self.settings.model_copy(update={"index": index})
        embedder = self.base().retriever.embedder
        store = Store(settings, create=False)
        pipeline = Pipeline(settings, Retriever(settings, store=store, embedder=embedder))
        with self._lock:
            return self._others.setdefault(index, pipeline)

    def _filled(self, pipeline: Pipeline) -> Pipeline:
        if pipeline.corpus_size() == 0:  # `rag mcp --allow-ingest` may start on an empty index
            index = pipeline.settings.index
            hint = ("ingest first: add papers with the ingest tool" if self.allow_ingest
                    else f"fill it with `rag ingest PATH --index {index}`")
            raise IndexStoreError(f"the index '{index}' is empty", hint)
        return pipeline

    def close(self) -> None:
        with self._lock:
            for p in self._others.values():
                p.close()
            self._others.clear()

    # -- the tools ------------------------------------------------------------------------

    def search_papers(self, query: str, k: int, filters: dict[str, Any], index: str | None,
                      budget: int) -> SearchResult:
        query = _query(query, "query")
        pipeline = self.pipeline(index)
        hits = pipeline.retriever.search(query, k, _options(self.defaults, **filters).to_filters())
        rows = [SearchHit(**PaperRef.of(h.paper).model_dump(), rank=h.rank, score=round(h.score, 6),
                          relevance=round(h.relevance, 4),
                          best_sentence=h.matched[0] if h.matched else h.paper.abstract)
                for h in hits]

        def build(kept: Sequence[SearchHit], more: int) -> SearchResult:
            return SearchResult(
                query=query, index=pipeline.settings.index, results=list(kept), more=more,
                hint=(f"{more} more hit(s) left out to stay within max_chars; raise max_chars, "
                      "lower k or narrow the query") if more else None)

        result = fit(rows, build, budget)
        if rows and not result.results:  # a passage alone over a small budget: cut, not "no papers"
            first, excess = rows[0], size(build(rows[:1], len(rows) - 1)) - budget
            first.best_sentence = clip(first.best_sentence,
                                       max(0, len(first.best_sentence) - excess - 60), "passage")
            result = build(rows[:1], len(rows) - 1)
        return result

    def ask(self, question: str, strict: bool | None, filters: dict[str, Any], index: str | None,
            budget: int) -> AskResult:
        options = _options(self.defaults, strict=strict, **filters)
        answer = self.pipeline(index).answer(_query(question, "question"), options)
        public = answer.to_public()
        result = AskResult(
            question=QuestionRead(**public["question"]), answer=answer.answer, declined=answer.abstained,
            answerer=answer.answerer, notices=answer.notices,
            references=[Reference(n=s.n, **PaperRef.of(s.paper).model_dump()) for s in answer.sources],
            sentences=[Verdict(**{k: s[k] for k in ("text", "citations", "supported", "verdict", "attributed", "quote", "support", "addresses")})
                       for s in public["sentences"]],
            nearest=[Evidence(**{k: d.get(k) for k in ("paper_id", "label", "title", "quote", "score")})
                     for d in public["nearest"]])
        return _shrink(result, budget)

    def get_paper(self, paper_id: str, budget: int, index: str | None = None) -> PaperRecord:
        p = find_paper(self.pipeline(index).retriever, paper_id, index or self.settings.index)
        record = PaperRecord(**{**PaperRef.of(p).model_dump(), "abstract": p.abstract,
                                "authors": p.authors, "journal_ref": p.journal_ref, "date": p.date,
                                "categories": p.categories, "source": p.source})
        excess = size(record) - budget
        if excess > 0:
            record.abstract = clip(p.abstract, max(0, len(p.abstract) - excess - 60), "abstract")
            record.truncated = True
        return record

    def export_citations(self, paper_ids: list[str], fmt: str, budget: int,
                         index: str | None = None) -> ExportResult:
        from rag.export import export

        if not paper_ids:
            raise InputError("no paper ids given", "pass the ids of the papers to export")
        retriever = self.pipeline(index).retriever
        name = index or self.settings.index
        papers = list({p.paper_id: p for p in (find_paper(retriever, i, name) for i in paper_ids)}.values())

        def build(kept: Sequence[Paper], more: int) -> ExportResult:
            return ExportResult(format=fmt, count=len(kept),  # type: ignore[arg-type]
                                text=export(list(kept), fmt, retriever.snapshot().papers.values()),
                                remaining_ids=[p.paper_id for p in papers[len(kept):]])

        result = fit(papers, build, budget)
        if not result.count:
            # not one paper fits: an empty export that names every id to export "in another
            # call" would only fail again
            needed = size(build(papers[:1], len(papers) - 1))
            raise InputError(f"max_chars {budget:,} is too small for one paper's {fmt} export "
                             f"({needed:,} characters)", f"raise max_chars to at least {needed:,}")
        return result

    def list_papers(self, filters: dict[str, Any], cursor: str | None, index: str | None,
                    budget: int) -> PaperPage:
        # the server's filters (`rag mcp --venue ...`) keep the list as they keep a search
        accepted = _options(self.defaults, **filters).to_filters()
        listed = [p for p in self.pipeline(index).retriever.papers() if accepted.accepts(p)]
        start = 0
        if cursor:
            # isdigit() also takes "²" and other digits int() refuses; a cursor this server
            # gave is a short run of ASCII digits
            if not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 9) \
                    or int(cursor) > len(listed):
                raise InputError(f"cursor {quoted(cursor)} is not one this server gave",
                                 "start again without a cursor")
            start = int(cursor)
        rows = [PaperRef.of(p) for p in listed[start: start + PAGE]]

        def build(kept: Sequence[PaperRef], more: int) -> PaperPage:
            end = start + max(len(kept), 1)
            return PaperPage(papers=list(kept) or rows[:1], total=len(listed),
                             next_cursor=str(end) if end < len(listed) else None)

        return fit(rows, build, budget)

    def find_source(self, quote: str, index: str | None, budget: int) -> SourceResult:
        quote = _query(quote, "quote")
        pipeline = self.pipeline(index)
        snap = pipeline.retriever.snapshot()
        wanted = _words(quote)
        matches: list[SourceMatch] = []
        # Word for word: every abstract is checked (a substring test over the whole index
        # takes milliseconds), so an exact quote is found whatever retrieval ranks first.
        for p in snap.papers.values():
            if wanted and wanted in _words(p.abstract):
                matches.append(SourceMatch(**PaperRef.of(p).model_dump(), match="exact", score=1.0,
                                           sentence=_holding(p.abstract, wanted)))
        if not matches:  # nearly: the papers the answerer would read, judged like a citation
            pipeline.refresh_names()
            for hit in pipeline.retriever.search(quote, pipeline.settings.k):
                support = pipeline.judge.check(quote, [("", hit.paper.abstract)])
                if support.supported:
                    matches.append(SourceMatch(**PaperRef.of(hit.paper).model_dump(), match="near",
                                               score=support.score, sentence=support.quote))
            matches.sort(key=lambda m: -m.score)

        def build(kept: Sequence[SourceMatch], more: int) -> SourceResult:
            return SourceResult(quote=quote, found=bool(matches), matches=list(kept))

        return fit(matches, build, budget)

    def ingest(self, path: str) -> IngestResult:
        from rag.ingest import ingest

        files = self.allowed_files(path)
        pipeline = self.base()
        report = ingest(files, pipeline.settings, store=pipeline.retriever.store, show_progress=False)
        return IngestResult(path=path, papers=report.papers, new=report.new, changed=report.changed,
                            unchanged=report.unchanged, removed=report.removed,
                            summary=report.summary())

    def allowed_files(self, path: str) -> list[Path]:
        """The files a path names, all inside the --allow-ingest folder (links resolved)."""
        root = self.allow_ingest
        if root is None:
            raise InputError("ingest is off", "start the server with --allow-ingest DIR")
        if not path.strip():
            raise InputError("the path is empty", f"give a file or folder inside {root}")
        if control := next((c for c in path if unicodedata.category(c) == "Cc"), None):
            # a NUL reaches no file (the OS refuses it), a line break would split the message
            raise InputError(f"{quoted(path)}: a path with a control character "
                             f"(U+{ord(control):04X}) is refused", f"give a path inside {root}")
        given = Path(path.strip())
        if ".." in given.parts:
            raise InputError(f"{quoted(path)}: a path with '..' is refused",
                             f"give a path inside {root}")
        target = given if given.is_absolute() else root / given
        try:
            if not target.resolve().is_relative_to(root):
                raise InputError(f"{quoted(path)} is outside the folder open to ingest ({root})",
                                 f"give a path inside {root}")
            files = expand_paths([target])
            for f in files:  # a link inside the folder may lead out of it
                if not f.resolve().is_relative_to(root):
                    raise InputError(f"{f} leads outside the folder open to ingest ({root})",
                                     "remove the link, or copy the file into the folder")
        except OSError as exc:  # a name too long for the file system, a folder not readable
            raise InputError(f"{quoted(path)}: {exc.strerror or exc}",
                             f"give a file or folder inside {root}") from None
        return files


LEFT_OUT = ("parts left out to stay within max_chars (closest passages, sentence verdicts, "
            "notices, then the end of the answer); raise max_chars to see them")
_MARKERS = re.compile(r"\[([\d,\s]+)\]")


def _shrink(result: AskResult, budget: int) -> AskResult:
    """An answer within the budget: what matters least goes first; the answer text is cut
    last, and then only the references it still cites are kept."""
    if size(result) <= budget:
        return result
    result.left_out = LEFT_OUT
    for part in (result.nearest, result.sentences, result.notices):
        while part and size(result) > budget:
            part.pop()
    # The answer's units (list items or sentences) go from the end, each with the references
    # only it cited; characters are cut only from a last unit too long by itself.
    sep = "\n" if "\n" in result.answer else " "
    units = result.answer.split("\n") if sep == "\n" else split_sentences(result.answer)
    refs = list(result.references)
    while len(units) > 1 and size(result) > budget:
        units.pop()
        result.answer = sep.join(units) + f"{sep}[answer cut to fit max_chars]"
        result.references = _cited(result.answer, refs)
    if size(result) > budget:
        result.answer = clip(result.answer, max(0, len(result.answer) - (size(result) - budget)),
                             "answer")
        result.references = _cited(result.answer, refs)
    while result.references and size(result) > budget:
        result.references.pop()
    return result


def _cited(answer: str, refs: list[Reference]) -> list[Reference]:
    cited = {int(n) for m in _MARKERS.findall(answer) for n in re.findall(r"\d+", m)}
    return [r for r in refs if r.n in cited]


def _holding(abstract: str, wanted: str) -> str:
    """The shortest run of the abstract's sentences that holds the quote."""
    sents = split_sentences(abstract) or [abstract]
    for width in range(1, len(sents) + 1):
        for i in range(len(sents) - width + 1):
            run = " ".join(sents[i: i + width])
            if wanted in _words(run):
                return run
    return abstract
