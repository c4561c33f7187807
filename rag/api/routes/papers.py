"""GET /search, GET /papers, GET /papers/{id}."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from rag.api import relay
from rag.api.deps import PROTECTED, ExecutorDep, LightExecutorDep, PipelineDep, SettingsDep
from rag.api.errors import ERROR_RESPONSES, NotFound
from rag.api.models import ErrorPublic, PaperListPublic, PaperPublic, SearchResultsPublic
from rag.schema import MAX_K, MAX_QUESTION, AskOptions, search_public

router = APIRouter(tags=["papers"], dependencies=PROTECTED, responses=ERROR_RESPONSES)


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
) -> Any:
    filters = AskOptions(venue=venue, year=year, source=source, category=category).to_filters()
    retriever = pipeline.retriever
    hits = await relay.run_blocking(executor, lambda: retriever.search(q, k, filters))
    return search_public(q, settings.index, hits)


@router.get("/papers", response_model=PaperListPublic,
            summary="Every paper in the index (the object `rag papers --json` prints)")
async def papers(pipeline: PipelineDep, light: LightExecutorDep) -> Any:
    listed = await relay.run_blocking(light, pipeline.retriever.papers)
    return {"papers": [p.to_dict() for p in listed]}


@router.get("/papers/{paper_id:path}", response_model=PaperPublic,
            summary="One paper with all its fields",
            responses={404: {"model": ErrorPublic, "description": "No such paper."}})
async def paper(paper_id: str, pipeline: PipelineDep, light: LightExecutorDep,
                settings: SettingsDep) -> Any:
    found = await relay.run_blocking(light, lambda: pipeline.retriever.paper(paper_id))
    if found is None:
        raise NotFound(f"no paper with id {paper_id!r} in the index '{settings.index}'",
                       "list the ids with GET /papers, or find papers with GET /search?q=...")
    return found.to_dict()
