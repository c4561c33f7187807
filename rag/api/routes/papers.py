"""GET /search, GET /papers, GET /papers/{id}."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError

from rag.api import relay
from rag.api.deps import (
    PROTECTED,
    ExecutorDep,
    ExportExecutorDep,
    LightExecutorDep,
    PipelineDep,
    SettingsDep,
)
from rag.api.errors import ERROR_RESPONSES, NotFound, field_error
from rag.api.models import (
    ErrorPublic,
    PaperListPublic,
    PaperPublic,
    SearchResultsPublic,
    VenueListPublic,
)
from rag.corpus.paper import Paper
from rag.export import MEDIA_TYPES, export_parts, select
from rag.schema import MAX_K, MAX_QUESTION, AskOptions, search_public

router = APIRouter(tags=["papers"], dependencies=PROTECTED, responses=ERROR_RESPONSES)

FormatQuery = Annotated[
    Literal["json", "bibtex", "ris", "csl-json"],
    Query(description="`json` (the default) for rag's own record; `bibtex`, `ris` or `csl-json` "
                      "for a reference manager (BibTeX keys: first author + year + first title "
                      "word)."),
]
MAX_LISTED = 200  # ids in one GET /papers?id=...: an answer cites at most 30 papers

# The citation formats, documented as further 200 responses next to the JSON one.
EXPORT_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"content": {
    media: {"schema": {"type": "string"}} for media in MEDIA_TYPES.values()}}}


async def _exported(exports: ThreadPoolExecutor, papers: list[Paper], fmt: str,
                    every: Iterable[Paper]) -> Response:
    # In the export pool, off the event loop and off the pool /health uses: LaTeX-escaping
    # 2,000 abstracts takes seconds. A large export streams, written a part at a time. Keys
    # are chosen among `every` paper of the index, so that each export gives a paper its key.
    parts = export_parts(papers, fmt, index_papers=every)
    # Starlette names the charset of text/* types only: a client that decodes RIS without one
    # garbled "Müller" (JSON is UTF-8 by definition).
    media = MEDIA_TYPES[fmt] + ("; charset=utf-8" if fmt == "ris" else "")
    if len(parts) == 1:
        return Response(await relay.run_blocking(exports, parts[0]), media_type=media)

    async def stream() -> AsyncIterator[str]:
        for part in parts:
            yield await relay.run_blocking(exports, part)

    return StreamingResponse(stream(), media_type=media)


def _known(papers: list[Paper], ids: list[str], index: str) -> list[str]:
    """The ids, each of a paper listed: an unknown one is a 404, as GET /papers/{id} says."""
    listed = {p.paper_id for p in papers}
    if missing := [i for i in dict.fromkeys(ids) if i not in listed]:
        raise NotFound(f"no paper with id {', '.join(map(repr, missing[:5]))} in the index '{index}'",
                       "list the ids with GET /papers, or find papers with GET /search?q=...")
    return ids


@router.get("/search", response_model=SearchResultsPublic,
            summary="Rank papers for a query (the object `rag search --json` prints)")
async def search(
    pipeline: PipelineDep, executor: ExecutorDep, settings: SettingsDep,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUESTION, description="The query.")],
    k: Annotated[int, Query(ge=1, le=MAX_K, description="How many papers.")] = 10,
    venue: Annotated[str | None, Query(max_length=200)] = None,
    year: Annotated[str | None, Query(max_length=20, description="2023, 2022-2023, ...")] = None,
    source: Annotated[str | None, Query(max_length=500)] = None,
    category: Annotated[str | None, Query(max_length=100, description="arXiv category.")] = None,
    author: Annotated[str | None, Query(max_length=200, description="An author's surname or full name.")] = None,
) -> Any:
    if not q.strip():  # a 422 naming the field, as the empty query is
        raise field_error(("query", "q"), "the query is empty", "string_too_short")
    try:
        options = AskOptions(venue=venue, year=year, source=source, category=category, author=author)
    except ValidationError as exc:  # a 422 naming the parameter, as the request models give
        err = exc.errors()[0]
        raise field_error(("query", *err["loc"]), err["msg"], err["type"]) from None
    filters = options.to_filters()
    retriever = pipeline.retriever
    hits = await relay.run_blocking(executor, lambda: retriever.search(q, k, filters))
    return search_public(q, settings.index, hits)


@router.get("/papers", response_model=PaperListPublic,
            responses={**EXPORT_RESPONSES, 404: {"model": ErrorPublic,
                                                 "description": "A paper named by `id` is unknown."}},
            summary="Every paper in the index (the object `rag papers --json` prints), or "
                    "all of them as BibTeX, RIS or CSL-JSON (`rag papers --format`)")
async def papers(
    pipeline: PipelineDep, light: LightExecutorDep, exports: ExportExecutorDep,
    format: FormatQuery = "json",
    id: Annotated[list[str] | None, Query(
        max_length=MAX_LISTED, description="Only these papers, in this order (repeat `id`): "
        "e.g. the papers an answer cites, for the page's \"copy BibTeX\".")] = None,
) -> Any:
    # An export lists the papers in its own pool too: that listing is most of a small export.
    every = await relay.run_blocking(exports if format != "json" else light, pipeline.retriever.papers)
    listed = select(every, _known(every, id or [], pipeline.settings.index))
    if format != "json":
        return await _exported(exports, listed, format, every)
    return {"papers": [p.to_dict() for p in listed]}


@router.get("/venues", response_model=VenueListPublic,
            summary="The venues of the index's papers, each with its paper count")
async def venues(pipeline: PipelineDep, light: LightExecutorDep) -> Any:
    # The chat page's venue suggestions: a few names, where GET /papers is every abstract.
    def counted() -> dict[str, Any]:
        counts = Counter(p.venue for p in pipeline.retriever.snapshot().papers.values() if p.venue)
        return {"venues": [{"venue": v, "papers": n} for v, n in sorted(counts.items())]}

    return await relay.run_blocking(light, counted)


@router.get("/papers/{paper_id:path}", response_model=PaperPublic,
            summary="One paper with all its fields, or as BibTeX, RIS or CSL-JSON",
            responses={**EXPORT_RESPONSES,
                       404: {"model": ErrorPublic, "description": "No such paper."}})
async def paper(paper_id: str, pipeline: PipelineDep, light: LightExecutorDep,
                exports: ExportExecutorDep, settings: SettingsDep, format: FormatQuery = "json") -> Any:
    found = await relay.run_blocking(light, lambda: pipeline.retriever.paper(paper_id))
    if found is None:
        raise NotFound(f"no paper with id {paper_id!r} in the index '{settings.index}'",
                       "list the ids with GET /papers, or find papers with GET /search?q=...")
    if format != "json":
        every = await relay.run_blocking(light, lambda: list(pipeline.retriever.snapshot().papers.values()))
        return await _exported(exports, [found], format, every)
    return found.to_dict()
