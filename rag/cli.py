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
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().params.get("chroma_url"):
        updates["chroma_url"] = ctx.find_root().params["chroma_url"]
    if index:
        updates["index"] = index
    return s.model_copy(update=updates) if updates else s


def _remote() -> Any:
    """The `rag serve` that RAG_SERVER_URL names (the CLI is then a thin client), or None."""
    if not os.environ.get("RAG_SERVER_URL", "").strip():
        return None  # rag.client imports httpx, which the local path does not need
    from rag.client import Remote

    return Remote.from_env()


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
    from rag.ingest import ensure_seeded
    from rag.retrieve import Retriever
    from rag.store import Store

    store = Store(settings)
    ensure_seeded(settings, store, say=lambda text: click.echo(text, err=True))
    return Retriever(settings, store=store)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rag")
@click.option("--chroma-url", metavar="URL",
              help="Use the Chroma server at URL (`chroma run`) instead of the embedded store "
                   "(default: RAG_CHROMA_URL).")
def cli(chroma_url: str | None) -> None:
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
    remote = _remote()
    if remote:
        from rag.client import remote_search

        result = remote_search(remote, query, k, venue, year, source)
    else:
        from rag.retrieve import Filters

        settings = _settings(index)
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


def _print_answer(result: dict[str, Any], streamed: bool) -> None:
    if not streamed:
        click.echo(result["answer"])
    else:
        click.echo()
    if result["incomplete"]:
        click.echo("[answer incomplete: the model's stream broke off]")
    unsupported = [s for s in result["sentences"] if not s["supported"]]
    if unsupported:
        click.echo(f"\n[{len(unsupported)} sentence(s) not supported by their citations: "
                   + "; ".join(textwrap.shorten(s["text"], 70) for s in unsupported) + "]")
    if result["dropped_citations"]:
        click.echo(f"[{result['dropped_citations']} citation(s) to no source removed]")
    if result["citations"]:
        from rag.answer import reference_lines_json

        click.echo("\nReferences")
        for line in reference_lines_json(result["citations"]):
            click.echo(textwrap.fill(line, 100, subsequent_indent="    "))


def ask_options(fn: F) -> F:
    fn = filter_options(fn)
    fn = index_option(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Print the documented JSON object.")(fn)
    fn = click.option("--strict", is_flag=True, help="Drop sentences their citations do not support.")(fn)
    fn = click.option("--model", help="Ollama model (default: RAG_MODEL or llama3.2).")(fn)
    fn = click.option("--llm", type=click.Choice(["auto", "ollama", "none"]), default=None,
                      help="auto: Ollama if running, else offline (default); none: offline.")(fn)
    fn = click.option("-k", type=int, default=None, help="Papers to answer from (default 8).")(fn)
    return fn


@cli.command()
@click.argument("question")
@ask_options
def ask(question: str, k: int | None, llm: str | None, model: str | None, strict: bool,
        as_json: bool, index: str | None, venue: str | None, year: str | None,
        source: str | None) -> None:
    """Answer QUESTION from the abstracts, with checked citations."""
    remote = _remote()
    if remote:
        from rag.client import remote_ask

        result = remote_ask(remote, question, k, llm, model, strict, venue, year, source)
        if as_json:
            emit_json(result)
        else:
            for n in result.get("notices", []):
                click.echo(n, err=True)
            _print_answer(result, streamed=False)
        return
    from rag.answer import Pipeline
    from rag.retrieve import Filters

    settings = _settings(index)
    filters = Filters.parse(venue, year, source)
    pipeline = Pipeline(settings, _ensure_index(settings))
    streamed = False

    def on_token(token: str) -> None:
        nonlocal streamed
        streamed = True
        click.echo(token, nl=False)

    ans = pipeline.answer(
        question, k=k, llm=llm, model=model, strict=strict, filters=filters,
        on_token=None if (as_json or strict) else on_token,
        on_notice=lambda t: click.echo(t, err=True),
    )
    result = ans.to_json()
    if as_json:
        emit_json(result)
        return
    if streamed and ans.dropped_citations:
        click.echo("\n\nWith citations to no source removed:")
        streamed = False
    _print_answer(result, streamed=streamed)


@cli.command()
@ask_options
def chat(k: int | None, llm: str | None, model: str | None, strict: bool, as_json: bool,
         index: str | None, venue: str | None, year: str | None, source: str | None) -> None:
    """A conversation in the terminal; follow-ups use the history. /sources /reset /quit."""
    from rag.answer import Pipeline
    from rag.retrieve import Filters

    settings = _settings(index)
    pipeline = Pipeline(settings, _ensure_index(settings))
    filters = Filters.parse(venue, year, source)
    history: list[dict[str, str]] = []
    last: dict[str, Any] | None = None
    click.echo("Ask about the abstracts. Commands: /sources /reset /quit", err=True)
    while True:
        try:
            line = click.prompt("you", prompt_suffix="> ", default="", show_default=False)
        except (EOFError, click.exceptions.Abort):
            break
        line = line.strip()
        if not line:
            continue
        if line in ("/quit", "/exit"):
            break
        if line == "/reset":
            history, last = [], None
            click.echo("(conversation cleared)", err=True)
            continue
        if line == "/sources":
            if last and last["citations"]:
                from rag.answer import reference_lines_json

                for ref in reference_lines_json(last["citations"]):
                    click.echo(ref)
            else:
                click.echo("(no sources yet)")
            continue
        try:
            ans = pipeline.answer(line, k=k, llm=llm, model=model, strict=strict, filters=filters,
                                  history=history, on_notice=lambda t: click.echo(t, err=True))
        except RagError as exc:
            click.echo(f"error: {exc}", err=True)
            continue
        last = ans.to_json()
        if ans.answerer == "extractive" and ans.notices and llm in (None, "auto"):
            llm = "none"  # said once: Ollama is not there; stay offline for this conversation
        if as_json:
            emit_json(last)
        else:
            if ans.standalone_question != line:
                click.echo(f"(searching for: {ans.standalone_question})", err=True)
            _print_answer(last, streamed=False)
        history += [{"role": "user", "content": line}, {"role": "assistant", "content": ans.answer}]


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8000, show_default=True, type=int, help="Port to listen on.")
@index_option
def serve(host: str, port: int, index: str | None) -> None:
    """Run the HTTP API and the chat page (FastAPI + uvicorn)."""
    from rag.api import serve as run

    run(_settings(index), host=host, port=port)


@cli.command("eval")
@click.option("--set", "set_path", type=click.Path(path_type=Path), default=Path("evals/questions.yaml"),
              show_default=True, help="Question set to run.")
@click.option("--llm", type=click.Choice(["none", "ollama"]), default="none", show_default=True)
@click.option("--model", help="Ollama model for --llm ollama.")
@click.option("--judge", type=click.Choice(["default", "ollama"]), default="default", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=Path("evals/reports"), show_default=True,
              help="Directory for the JSON and Markdown reports.")
@index_option
def eval_cmd(set_path: Path, llm: str, model: str | None, judge: str, out: Path,
             index: str | None) -> None:
    """Score answers on a question set; exit 5 when a metric is below its threshold."""
    from rag.evaluate import run_cli

    settings = _settings(index)
    _ensure_index(settings)
    sys.exit(run_cli(settings, set_path=set_path, llm=llm, model=model, judge=judge, out=out))
