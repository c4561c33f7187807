"""What the `rag` commands share: settings for a command, the thin-client switch, the common
options, JSON output and opening the index (seeding the default one)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from rag.errors import InputError

F = TypeVar("F", bound=Callable[..., Any])


def _settings(index: str | None = None, **overrides: Any) -> Any:
    from rag.config import get_settings

    s = get_settings()
    updates = {k: v for k, v in overrides.items() if v is not None}
    ctx = click.get_current_context(silent=True)
    if ctx is not None and "rag.logs" not in ctx.meta:  # here, not in cli(): the thin client
        from rag.logs import configure  # starts without rag.config (pydantic)

        ctx.meta["rag.logs"] = configure(s.log_level, ctx.meta.get("rag.verbosity", 0))
        _say_legacy_home(s)
    if ctx is not None and ctx.find_root().params.get("chroma_url"):
        updates["chroma_url"] = ctx.find_root().params["chroma_url"]
    if index:
        updates["index"] = index
    return s.model_copy(update=updates) if updates else s


def _say_legacy_home(settings: Any) -> None:
    """One line when the data are read from an earlier rag's ./.rag, not the data folder."""
    from rag.config import LEGACY_HOME

    if "home" not in settings.model_fields_set and settings.home == LEGACY_HOME:
        from platformdirs import user_data_dir

        click.echo(f"note: using ./.rag, the data folder an earlier rag made here; to use it from any "
                   f"folder, move it to {user_data_dir('rag', appauthor=False)} or set RAG_HOME", err=True)


def _remote() -> Any:
    """The `rag serve` that RAG_SERVER_URL names (the CLI is then a thin client), or None."""
    if not os.environ.get("RAG_SERVER_URL", "").strip():
        return None  # rag.client imports httpx, which the local path does not need
    from rag.client import Remote

    return Remote.from_env()


def index_option(fn: F) -> F:
    return click.option("--index", "index", metavar="NAME", callback=_not_blank,
                        help="Index to use (default: RAG_INDEX or 'default').")(fn)


# What to give each option instead of an empty value.
_BLANK_HINTS = {
    "venue": "name a venue such as MLSys, or leave the option out to keep every paper",
    "year": "give a year or range such as 2023 or 2022-2023, or leave the option out to keep every paper",
    "source": "give part of a source file's path, or leave the option out to keep every paper",
    "category": "name an arXiv category such as cs.DC, or leave the option out to keep every paper",
    "author": "give a surname or full name such as Hwang, or leave the option out to keep every paper",
    "index": "name an index such as scifact, or leave the option out for RAG_INDEX or 'default'",
}


def _not_blank(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An empty filter (or --index) was taken for none, silently (`rag ingest --category ""`
    is refused)."""
    if value is not None and not value.strip():
        raise InputError(f"--{param.name} is empty", _BLANK_HINTS[str(param.name)])
    return value


def filter_options(fn: F) -> F:
    fn = click.option("--author", callback=_not_blank,
                      help="Only papers with this author (a surname or full name: Hwang, C. Hwang).")(fn)
    fn = click.option("--category", metavar="CAT", callback=_not_blank,
                      help="Only papers in this arXiv category (cs.DC; cs for all cs.*).")(fn)
    fn = click.option("--source", callback=_not_blank,
                      help="Only papers read from a file whose path contains this.")(fn)
    fn = click.option("--year", callback=_not_blank,
                      help="Only papers from this year or range (2023, 2022-2023).")(fn)
    fn = click.option("--venue", callback=_not_blank,
                      help="Only papers whose venue/journal ref mentions this.")(fn)
    return fn


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False))


def preload_model(settings: Any | None = None) -> None:
    """Start loading the embedding model in a thread while the index opens (rag.embed.preload):
    the one `settings` name, or, without them, the one the environment names, before the
    settings are read (rag.embed.preload_from_env)."""
    from rag.embed import preload_for, preload_from_env

    preload_for(settings) if settings is not None else preload_from_env()


def local_settings(index: str | None) -> Any:
    """The settings of a command answering from a local index, the embedding model already
    loading (from the environment before the settings are read: rag.embed.preload_from_env)."""
    preload_model()
    settings = _settings(index)
    preload_model(settings)
    return settings


def _ensure_index(settings: Any) -> Any:
    """Open the retriever; an empty default index gets seeds/ ingested first, saying so, and a
    named index that does not exist is an error (rag.ingest.open_index)."""
    from rag.ingest import open_index
    from rag.retrieve import Retriever

    store = open_index(settings, say=lambda text: click.echo(text, err=True))
    return Retriever(reading(settings, store), store=store)


def reading(settings: Any, store: Any) -> Any:
    """The settings of the index the store is (the demo index, while the default holds none of
    the user's papers: rag.ingest.open_index)."""
    index = store.settings.index
    return settings if index == settings.index else settings.model_copy(update={"index": index})


def say_ingest(report: Any, replace: bool, as_json: bool) -> None:
    """What an ingest read, merged and left out (stderr), then its summary or its JSON."""
    for note in report.notes:
        click.echo(f"read: {note}", err=True)
    for problem in report.skipped:
        click.echo(f"skipped: {problem}", err=True)
    for unread in report.unread:
        click.echo(f"not read: {unread}", err=True)
    for merge in report.merges:
        hint = " (--replace takes the other)" if merge.differ and not replace else ""
        click.echo(f"merged: {merge.describe()}{hint}", err=True)
    for deletion in report.deletions:
        click.echo(f"PubMed deleted {deletion}", err=True)
    if as_json:
        emit_json(report.to_public())
    else:
        click.echo(report.summary())


def paper_named(snapshot: Any, given: str, index: str, more: str = "") -> Any:
    """The paper `given` names in the index (its id, arXiv id, DOI, PMID, or the citation key
    an export writes), or InputError naming it and how to list ids."""
    from rag.retrieve.metadata import find_paper

    paper = find_paper(snapshot, given)
    if paper is None:  # a citation key, as an export from this index writes it
        from rag.export.keys import keyed

        paper = keyed(snapshot.papers.values()).get(given)
    if paper is None:
        raise InputError(f"no paper with id, citation key, arXiv id, DOI or PMID {given!r} in the "
                         f"index '{index}'", "list ids with `rag papers`" + more)
    return paper
