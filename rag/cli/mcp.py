"""`rag mcp`: the MCP server over stdio (what Claude Desktop, VS Code and other assistants
start), and the watch mode of `rag ingest --watch`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from rag.cli.common import _settings, filter_options, index_option


def _say(text: str) -> None:
    click.echo(text, err=True)


def watch_ingest(paths: tuple[Path, ...], index: str | None, prune: bool = False) -> None:
    """`rag ingest --watch PATH...`: ingest, then follow the paths until Ctrl-C."""
    from rag.watch import tell, watch

    if not paths:
        raise click.UsageError("--watch needs the files or folders to follow")
    settings = _settings(index)
    _say(f"watching {', '.join(map(str, paths))} (Ctrl-C stops)")
    watch(list(paths), settings, lambda done: tell(done, _say), prune=prune)


@click.command("mcp")
@index_option
@click.option("--llm", type=click.Choice(["auto", "ollama", "openai", "none"]), default=None,
              help="How `ask` answers: auto (the model server if it answers, else offline; "
              "default), none, ollama, openai.")
@click.option("--model", help="Model for `ask` (default: RAG_MODEL or llama3.2).")
@click.option("-k", type=click.IntRange(1, 50), default=None,
              help="Papers `ask` answers from (default: RAG_K or 8).")
@click.option("--strict", is_flag=True, default=None,
              help="`ask` drops sentences their citations do not support (a call may say otherwise).")
@filter_options
@click.option("--allow-ingest", "allow_ingest", metavar="DIR",
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Add an `ingest` tool for files under DIR only (default: no ingest tool).")
@click.option("--watch", "watch_paths", multiple=True, metavar="PATH",
              type=click.Path(exists=True, path_type=Path),
              help="Ingest PATH at start and follow it (new, changed, deleted files); repeatable.")
@click.option("--prune", is_flag=True,
              help="With --watch: a watched PATH that is gone or holds no abstract files takes "
                   "its papers out of the index (default: kept until it is back).")
def mcp_command(index: str | None, allow_ingest: Path | None, watch_paths: tuple[Path, ...],
                prune: bool, **values: Any) -> None:
    """Serve rag's tools to an AI assistant over MCP (stdio: stdout carries only the protocol).

    The filters (--venue, --year, ...) are the defaults of `search_papers`, `ask` and
    `list_papers`."""
    from rag.api.app import load_pipeline
    from rag.cli import _ask_options
    from rag.mcp.server import Notes, build
    from rag.mcp.stdio import run_stdio
    from rag.mcp.tools import RagTools
    from rag.watch import awatch, sync, tell

    defaults = _ask_options(values)
    settings = _settings(index)
    if watch_paths:  # before the index is opened: the watched files make it, not seeds/
        tell(sync(list(watch_paths), settings, prune=prune), _say)
    # With --allow-ingest a new or empty named index is served: the ingest tool fills it.
    pipeline = load_pipeline(settings, _say, empty_ok=allow_ingest is not None)
    tools = RagTools(settings, lambda: pipeline, defaults, allow_ingest)
    notes = Notes()
    server = build(tools, allow_ingest=allow_ingest is not None, notes=notes)

    def report(done: Any) -> None:
        tell(done, _say)
        for line in done.notices + done.problems:
            notes.add(f"watch: {line}")

    jobs = [lambda: awatch(list(watch_paths), settings, report, pipeline.retriever.store, prune)] \
        if watch_paths else []
    _say(f"rag mcp: index '{pipeline.settings.index}' ({pipeline.corpus_size()} papers), serving on stdio")
    try:
        run_stdio(server, *jobs)
    finally:
        tools.close()
        pipeline.close()
