"""The `rag` command: thin wrappers that call the pipeline and format its result.

Answers and results go to stdout; progress, notices and errors to stderr.
Exit codes: 0 ok, 1 unexpected error, 2 bad input, 3 index problem, 4 LLM problem,
5 eval below threshold.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from rag import __version__
from rag.errors import InputError, RagError

F = TypeVar("F", bound=Callable[..., Any])


def _settings(index: str | None = None, **overrides: Any) -> Any:
    from rag.config import get_settings

    s = get_settings()
    updates = {k: v for k, v in overrides.items() if v is not None}
    if index:
        updates["index"] = index
    return s.model_copy(update=updates) if updates else s


def index_option(fn: F) -> F:
    return click.option("--index", "index", metavar="NAME",
                        help="Index to use (default: RAG_INDEX or 'default').")(fn)


def filter_options(fn: F) -> F:
    fn = click.option("--source", help="Only papers whose source file path contains this.")(fn)
    fn = click.option("--year", help="Only papers from this year or range (2023, 2022-2023).")(fn)
    fn = click.option("--venue", help="Only papers whose venue/journal ref mentions this.")(fn)
    return fn


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False))


def _ensure_index(settings: Any) -> Any:
    """Open the retriever; an empty index gets seeds/ ingested first, saying so."""
    from rag.retrieve import Retriever
    from rag.store import Store

    store = Store(settings)
    if store.count() == 0:
        seeds = settings.seeds
        if not seeds.exists():
            raise RagError(f"the index '{settings.index}' is empty and {seeds}/ does not exist",
                           "run `rag ingest PATH` first")
        click.echo(f"index '{settings.index}' is empty: ingesting {seeds}/ first", err=True)
        from rag.ingest import ingest

        report = ingest([seeds], settings, store=store)
        click.echo(report.summary(), err=True)
    return Retriever(settings, store=store)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rag")
def cli() -> None:
    """Cited answers over research-paper abstracts, offline.

    Set RAG_DEBUG=1 to see full tracebacks.
    """


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@index_option
@click.option("--prune", is_flag=True, help="Remove papers whose source file is gone.")
@click.option("--skip-bad", is_flag=True, help="Ingest the good records of a file with bad ones.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def ingest(paths: tuple[Path, ...], index: str | None, prune: bool, skip_bad: bool, quiet: bool) -> None:
    """Parse abstract dumps (default: seeds/) and add them to the index."""
    from rag.ingest import ingest as run

    settings = _settings(index)
    report = run(list(paths) or [settings.seeds], settings, prune=prune, skip_bad=skip_bad,
                 show_progress=not quiet)
    for problem in report.skipped:
        click.echo(f"skipped: {problem}", err=True)
    click.echo(report.summary())


def _hit_json(h: Any) -> dict[str, Any]:
    p = h.paper
    return {
        "rank": h.rank, "paper_id": p.paper_id, "title": p.title, "label": p.label,
        "authors": p.authors, "venue": p.venue, "year": p.year, "arxiv_id": p.arxiv_id,
        "source": p.source, "score": round(h.score, 6), "relevance": round(h.relevance, 4),
        "abstract": p.abstract, "matched": h.matched,
    }


def search_json(query: str, index: str, hits: list[Any]) -> dict[str, Any]:
    return {"query": query, "index": index, "results": [_hit_json(h) for h in hits]}


@cli.command()
@click.argument("query")
@click.option("-k", default=10, show_default=True, help="How many papers.")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON object.")
@index_option
@filter_options
def search(query: str, k: int, as_json: bool, index: str | None, venue: str | None,
           year: str | None, source: str | None) -> None:
    """Rank papers for QUERY (hybrid dense + BM25)."""
    from rag.retrieve import Filters

    settings = _settings(index)
    if settings.server_url:
        from rag.client import remote_search

        result = remote_search(settings, query, k, venue, year, source)
    else:
        retriever = _ensure_index(settings)
        hits = retriever.search(query, k, Filters.parse(venue, year, source))
        result = search_json(query, settings.index, hits)
    if as_json:
        emit_json(result)
        return
    if not result["results"]:
        click.echo("No papers match.")
    for r in result["results"]:
        meta = " · ".join(str(x) for x in [r["venue"], r["year"], r["arxiv_id"] and f"arXiv:{r['arxiv_id']}"] if x)
        click.echo(f"{r['rank']:>2}. {r['label']}" + (f"  [{meta}]" if meta else ""))
        if r["title"] and r["title"] != r["label"]:
            click.echo(f"    {r['title']}")
        snippet = textwrap.shorten(r["matched"][0] if r["matched"] else r["abstract"], 220)
        click.echo(textwrap.indent(textwrap.fill(snippet, 92), "    "))
        click.echo(f"    {r['source']} #{r['paper_id']}  relevance {r['relevance']:.2f}")


@cli.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help='Print {"papers": [...]} with every field.')
@index_option
@click.pass_context
def papers(ctx: click.Context, as_json: bool, index: str | None) -> None:
    """List every paper in the index (`rag papers show ID` for one)."""
    ctx.obj = {"index": index}
    if ctx.invoked_subcommand:
        return
    retriever = _ensure_index(_settings(index))
    listed = retriever.papers()
    if as_json:
        emit_json({"papers": [p.to_dict() for p in listed]})
        return
    for p in listed:
        click.echo(f"{p.paper_id:<48} {textwrap.shorten(p.label, 60)}")
    click.echo(f"{len(listed)} papers", err=True)


@papers.command("show")
@click.argument("paper_id")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@click.pass_context
def papers_show(ctx: click.Context, paper_id: str, as_json: bool) -> None:
    """Show one paper with all its fields."""
    retriever = _ensure_index(_settings(ctx.obj.get("index")))
    paper = retriever.paper(paper_id)
    if paper is None:
        raise InputError(f"no paper with id {paper_id!r} in the index", "list ids with `rag papers`")
    if as_json:
        emit_json(paper.to_dict())
        return
    for key, value in paper.to_dict().items():
        if key == "abstract":
            continue
        if value not in (None, [], ""):
            click.echo(f"{key:>12}: {', '.join(value) if isinstance(value, list) else value}")
    click.echo()
    click.echo(textwrap.fill(paper.abstract, 92))


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)  # usage errors are bad input
    except RagError as exc:
        if os.environ.get("RAG_DEBUG"):
            raise
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
