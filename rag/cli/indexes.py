"""`rag index list`, `rag index delete NAME` and `rag papers remove ID`: what a user keeps and
takes out of their data directory, without deleting files by hand."""

from __future__ import annotations

import re
import shutil
import sys

import click

from rag.cli.common import _settings, emit_json, paper_named
from rag.errors import InputError


@click.group("index")
def index_group() -> None:
    """List and delete indexes (each corpus of papers in the data directory)."""


@index_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print {name: papers} as JSON.")
def index_list(as_json: bool) -> None:
    """The indexes of the data directory and how many papers each holds."""
    from rag.store import all_index_sizes

    settings = _settings()
    sizes = all_index_sizes(settings)
    if as_json:
        emit_json(sizes)
        return
    click.echo(f"data directory: {settings.home}", err=True)
    for name, papers in sizes.items():
        click.echo(f"{name}\t{papers} papers")


@index_group.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask first.")
def index_delete(name: str, yes: bool) -> None:
    """Delete the index NAME and everything rag keeps for it (its papers, vectors, caches)."""
    from rag.store import Store
    from rag.store.indexes import collection_names, index_sizes
    from rag.store.lock import ingest_lock
    from rag.store.quick import forget

    settings = _settings(name)
    store = Store(settings, create=False)  # an index that does not exist: the error names those that do
    try:
        pattern = re.compile(rf"{re.escape(name)}-[0-9a-f]{{8}}(?:-paper-sentences)?")
        doomed = [n for n in collection_names(store.client) if pattern.fullmatch(n)]
        papers = index_sizes(store.client, settings).get(name, 0)
        if not yes:
            if not sys.stdin.isatty():
                raise InputError(f"deleting the index '{name}' needs a yes", "pass --yes to delete it without asking")
            click.confirm(f"Delete the index '{name}' from {settings.home}?", abort=True, err=True)
        with ingest_lock(settings):
            forget(settings, name)
            for collection in doomed:
                store.client.delete_collection(collection)
            prefixes = tuple(f"{prefix}{n}-v" for n in doomed for prefix in ("", "probes-", "relevance-"))
            cache = settings.home / "cache"
            for old in cache.iterdir() if cache.is_dir() else []:
                if old.name.startswith(prefixes) and old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
                elif old.name.startswith(prefixes):
                    old.unlink(missing_ok=True)
    finally:
        store.close()
    click.echo(f"deleted the index '{name}' ({papers} papers)", err=True)


@click.command("remove")
@click.argument("ids", nargs=-1, required=True)
@click.option("--index", "index", metavar="NAME", help="The index to remove them from (default: RAG_INDEX).")
def papers_remove(ids: tuple[str, ...], index: str | None) -> None:
    """Remove papers (by id, citation key, arXiv id, DOI or PMID) from the index."""
    from rag.retrieve import Retriever
    from rag.store import Store
    from rag.store.lock import ingest_lock

    settings = _settings(index)
    store = Store(settings, create=False)
    try:
        snapshot = Retriever(settings, store=store).snapshot()
        found = {}
        for given in ids:
            paper = paper_named(snapshot, given, settings.index, "; nothing was removed")
            found[paper.paper_id] = paper
        with ingest_lock(settings):
            store.write([], delete_papers=list(found))
    finally:
        store.close()
    for paper in found.values():
        click.echo(f"removed {paper.paper_id} ({paper.label})", err=True)
