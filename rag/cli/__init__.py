"""The `rag` command: thin wrappers that call the pipeline and format its result.

Answers and results go to stdout; progress, notices and errors to stderr.
Exit codes: 0 ok, 1 unexpected error, 2 bad input, 3 index problem, 4 LLM problem,
5 eval below threshold, 6 `rag check` found a claim its papers do not support.
"""

from __future__ import annotations

import os
import sys
import textwrap
import traceback
from pathlib import Path
from typing import Any

import click

from rag import __version__
from rag.cli.check import check
from rag.cli.common import (
    F,
    _ensure_index,
    _remote,
    _settings,
    emit_json,
    filter_options,
    index_option,
    local_settings,
    say_ingest,
)
from rag.cli.indexes import index_group, papers_remove
from rag.cli.mcp import mcp_command, watch_ingest
from rag.cli.papers import papers
from rag.errors import EXIT_ERROR, EXIT_LLM, InputError, RagError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rag")
@click.option("--chroma-url", metavar="URL",
              help="Use the Chroma server at URL (`chroma run`) instead of the embedded store "
                   "(default: RAG_CHROMA_URL).")
@click.option("-v", "--verbose", count=True, help="More log output, a level per -v (debug from the default).")
@click.option("-q", "--quiet", count=True, help="Warnings and errors only, no progress.")
def cli(chroma_url: str | None, verbose: int, quiet: int) -> None:
    """Cited answers over research-paper abstracts, offline.

    Set RAG_DEBUG=1 to see full tracebacks.
    """
    click.get_current_context().meta["rag.verbosity"] = verbose - quiet  # for _settings()


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@index_option
@click.option("--prune", is_flag=True, help="Remove papers whose source file is gone (with "
              "--watch: also those of a watched folder that is gone or empty).")
@click.option("--skip-bad", is_flag=True, help="Ingest the good records of a file with bad ones.")
@click.option("--replace", is_flag=True,
              help="Records of a paper already seen (same DOI, arXiv id, PMID, id): the later "
                   "record's abstract and fields win (default: the first, or the indexed, is kept).")
@click.option("--collection", metavar="NAME",
              help="Zotero library: only items in this collection and its subcollections.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.option("--category", "categories", multiple=True, metavar="CAT",
              help="Only papers in this arXiv category (cs.DC; cs for all cs.*); repeatable.")
@click.option("--since", metavar="DATE", help="Only papers first published from DATE on (2023, 2023-06).")
@click.option("--fast", is_flag=True,
              help="Build the index about twice as fast, its chunk vectors pooled from the "
                   "sentence pass (RAG_CHUNK_VECTORS=sentences): SciFact nDCG@10 0.723 against "
                   "0.727, a little worse at declining what the abstracts do not answer. The "
                   "index keeps the kind it was built with.")
@click.option("--watch", is_flag=True,
              help="Then follow PATHS: new and changed files are ingested, deleted files' papers removed.")
@click.option("--json", "as_json", is_flag=True, help="Print what was read and indexed as JSON.")
def ingest(paths: tuple[Path, ...], index: str | None, prune: bool, skip_bad: bool, replace: bool,
           collection: str | None, quiet: bool, categories: tuple[str, ...], since: str | None,
           fast: bool, watch: bool, as_json: bool) -> None:
    """Parse abstract dumps (default: seeds/) and add them to the index."""
    if watch:
        if fast:
            raise click.UsageError("--fast builds an index; --watch follows one as it was built")
        watch_ingest(paths, index, prune)
        return
    from rag.corpus import Restrict
    from rag.ingest import ingest as run

    settings = _settings(index, chunk_vectors="sentences" if fast else None)
    if not paths and not index:  # the demo papers go to the demo index, not the user's own
        settings = settings.model_copy(update={"index": "demo"})  # rag.ingest.DEMO
    report = run(list(paths) or [settings.seeds], settings, prune=prune, skip_bad=skip_bad,
                 replace=replace, show_progress=not quiet, restrict=Restrict.parse(categories, since),
                 collection=collection)
    say_ingest(report, replace, as_json)


@cli.command()
@click.argument("query")
@click.option("-k", default=10, show_default=True, type=click.IntRange(1, 50),
              help="How many papers (1..50).")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON object.")
@index_option
@filter_options
def search(query: str, k: int, as_json: bool, index: str | None, **filters: Any) -> None:
    """Rank papers for QUERY (hybrid dense + BM25)."""
    remote = _remote()
    if remote:
        from rag.client import remote_search

        result = remote_search(remote, query, k, index=index, **filters)
    else:
        settings = local_settings(index)  # first: the model loads while the rest is checked
        from rag.retrieve import Filters
        from rag.schema import checked_question

        # bad input is refused before the index is opened (or seeds/ ingested into it)
        checked_question(query, "type a question or search terms")
        parsed = Filters.parse(**filters)
        retriever = _ensure_index(settings)
        hits = retriever.search(query, k, parsed)
        from rag.schema import search_public

        result = search_public(query, retriever.settings.index, hits)
    if as_json:
        emit_json(result)
        return
    if not result["results"]:
        from rag.retrieve import Filters

        given = Filters.parse(**filters)  # as `rag ask` says it: which filters left nothing
        click.echo(f"No papers match the filters: {given.describe()}." if given.active() else "No papers match.")
    for r in result["results"]:
        meta = " · ".join(str(x) for x in [r["venue"], r["year"], r["arxiv_id"] and f"arXiv:{r['arxiv_id']}"] if x)
        click.echo(f"{r['rank']:>2}. {r['label']}" + (f"  [{meta}]" if meta else ""))
        if r["title"] and r["title"] != r["label"]:
            click.echo(f"    {r['title']}")
        snippet = textwrap.shorten(r["matched"][0] if r["matched"] else r["abstract"], 220)
        click.echo(textwrap.indent(textwrap.fill(snippet, 92), "    "))
        click.echo(f"    {r['source']} #{r['paper_id']}  relevance {r['relevance']:.2f}")


cli.add_command(papers)
papers.add_command(papers_remove)
cli.add_command(mcp_command)
cli.add_command(check)
cli.add_command(index_group)


def _debug() -> bool:
    """RAG_DEBUG set to anything but nothing, 0, false, no or off: show tracebacks."""
    return os.environ.get("RAG_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off")


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
        if _debug():
            traceback.print_exc()  # and still the documented exit code, not Python's 1
        else:
            click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # a bug in rag: one line here, the traceback when asked for
        if _debug():
            raise
        click.echo(f"error: unexpected {type(exc).__name__}: {exc}\n  hint: this is a bug in rag; "
                   "run again with RAG_DEBUG=1 to see the traceback, and report it", err=True)
        sys.exit(EXIT_ERROR)


def _ask_options(values: dict[str, Any]) -> Any:
    """The AskOptions the command line gave; a value out of range names its option."""
    from pydantic import ValidationError

    from rag.schema import AskOptions

    try:
        return AskOptions(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        name = "--" + str(err["loc"][0]).replace("_", "-") if err["loc"] else "an option"
        raise InputError(f"{name}: {err['msg']}", "see `rag ask --help`") from None


def _print_stream(events: Any) -> Any:
    """Show the answer as its units are checked (the text equals the final answer's), notices
    on stderr, then the notes and references; returns the Answer."""
    from rag.render import tail
    from rag.schema import DoneEvent, NoticeEvent, ProgressEvent, SentenceEvent

    done = None
    thinking_said = False
    open_line = ended = False  # a notice after the answer's text starts a line of its own
    for ev in events:
        if isinstance(ev, SentenceEvent):
            click.echo(ev.delta, nl=False)
            open_line, ended = not ev.delta.endswith("\n"), False
        elif isinstance(ev, NoticeEvent):
            if open_line:
                click.echo()
                open_line, ended = False, True
            click.echo(ev.message, err=True)
        elif isinstance(ev, ProgressEvent) and not thinking_said:
            thinking_said = True
            click.echo("(the model is thinking...)", err=True)
        elif isinstance(ev, DoneEvent):
            done = ev.answer
    assert done is not None
    if not ended:
        click.echo()
    rest = tail(done.to_public(), width=100)
    if rest:
        click.echo("\n" + rest)
    return done


def _print_result(result: dict[str, Any]) -> None:
    from rag.render import full_text

    for n in result.get("notices", []):
        click.echo(n, err=True)
    click.echo(full_text(result, width=100))


def ask_options(fn: F) -> F:
    fn = filter_options(fn)
    fn = index_option(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Print the documented JSON object.")(fn)
    fn = click.option("--strict", is_flag=True, default=None,
                      help="Drop sentences their citations do not support.")(fn)
    fn = click.option("--model", help="Model name (default: RAG_MODEL or llama3.2; an "
                      "OpenAI-compatible server's first model).")(fn)
    fn = click.option("--llm", type=click.Choice(["auto", "ollama", "openai", "none"]), default=None,
                      help="auto: the model server when it answers, else offline (default); "
                      "ollama; openai (RAG_OPENAI_BASE_URL); none: offline.")(fn)
    fn = click.option("-k", type=click.IntRange(1, 50), default=None,
                      help="Papers to answer from (default: RAG_K or 8).")(fn)
    return fn


@cli.command()
@click.argument("question")
@ask_options
@click.option("--export", "export_to", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the cited papers to FILE: .bib (BibTeX), .ris (RIS), .json (CSL-JSON).")
def ask(question: str, as_json: bool, index: str | None, export_to: Path | None,
        **values: Any) -> None:
    """Answer QUESTION from the abstracts, with checked citations."""
    remote = _remote()
    if not remote:  # first: the model loads (in a thread) while the rest is imported and checked
        settings = local_settings(index)
    options = _ask_options(values)
    fmt = None
    if export_to:  # a bad file name fails before answering; rag.export only when asked
        from rag.export import format_for_path

        fmt = format_for_path(export_to)
    if remote:
        from rag.client import remote_ask

        result = remote_ask(remote, question, options, export=fmt, index=index)
        emit_json(result) if as_json else _print_result(result)
        if export_to and result.get("export"):
            _write_file(export_to, result["export"]["text"], len(result["citations"]), fmt)
        _exit_if_cut(result, options.llm, as_json)
        return
    from rag.schema import checked_question

    checked_question(question)  # bad input is refused before the index is opened (or filled)
    options.to_filters()
    from rag.answering import Pipeline

    retriever = _ensure_index(settings)  # the demo index while the default holds no paper
    pipeline = Pipeline(retriever.settings, retriever)
    if as_json:
        answer = pipeline.answer(question, options)
        emit_json(answer.to_public())
    else:
        answer = _print_stream(pipeline.stream(question, options))
    if export_to:
        from rag.export import export

        papers = [s.paper for s in answer.sources]
        every = pipeline.retriever.snapshot().papers.values()  # keys as in every export from the index
        _write_file(export_to, export(papers, fmt or "", every), len(papers), fmt)
    _exit_if_cut(answer.to_public(), options.llm or settings.llm, as_json)


def _exit_if_cut(result: dict[str, Any], mode: str | None, as_json: bool) -> None:
    """With --llm ollama, a model's answer that broke off is a failure (exit 4) once shown as
    far as it came; auto keeps it, marked incomplete (exit 0)."""
    error = result.get("error")
    if error and mode == "ollama":
        if as_json:  # text output has said it already, as a notice
            click.echo(f"error: {error['message']}\n  hint: {error['hint']}", err=True)
        sys.exit(EXIT_LLM)


def _write_file(path: Path, text: str, count: int, fmt: str | None) -> None:
    from rag.export import save

    save(path, text)
    click.echo(f"wrote {count} cited paper(s) to {path} ({fmt})", err=True)


@cli.command()
@ask_options
def chat(as_json: bool, index: str | None, **values: Any) -> None:
    """A conversation in the terminal; follow-ups use the history. /sources /reset /quit."""
    from rag.answering import Pipeline
    from rag.render import reference_lines

    options = _ask_options(values)
    options.to_filters()  # a bad filter is refused before the index is opened (or filled)
    settings = _settings(index)
    retriever = _ensure_index(settings)  # the demo index while the default holds no paper
    pipeline = Pipeline(retriever.settings, retriever)
    history: list[dict[str, str]] = []
    last: dict[str, Any] | None = None
    click.echo("Ask about the abstracts. Commands: /sources /reset /quit", err=True)
    while True:
        try:
            # the prompt on stderr, as every notice: stdout holds only answers (--json: objects)
            line = click.prompt("you", prompt_suffix="> ", default="", show_default=False, err=True)
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
            click.echo("\n".join(reference_lines(last["citations"])) if last and last["citations"]
                       else "(no sources yet)")
            continue
        try:
            events = pipeline.stream(line, options, history=history)
            if as_json:
                ans = next(ev.answer for ev in events if ev.kind == "done")
                emit_json(ans.to_public())
            else:
                ans = _print_stream(events)
        except RagError as exc:
            click.echo(f"error: {exc}", err=True)
            continue
        last = ans.to_public()
        if ans.answerer == "extractive" and ans.notices and options.llm in (None, "auto"):
            # said once: Ollama is not there; stay offline for this conversation
            options = options.model_copy(update={"llm": "none"})
        if ans.standalone_question != line:
            click.echo(f"(searching for: {ans.standalone_question})", err=True)
        history += [{"role": "user", "content": line}, {"role": "assistant", "content": ans.answer}]


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535),
              help="Port to listen on.")
@index_option
def serve(host: str, port: int, index: str | None) -> None:
    """Run the HTTP API and the chat page (FastAPI + uvicorn)."""
    from rag.api import serve as run

    run(_settings(index), host=host, port=port)


@cli.command("eval")
@click.option("--set", "set_path", type=click.Path(path_type=Path), default=Path("evals/questions.yaml"),
              show_default=True, help="Question set to run.")
@click.option("--llm", type=click.Choice(["none", "ollama", "openai"]), default="none", show_default=True)
@click.option("--model", help="Model for --llm ollama or openai.")
@click.option("--judge", type=click.Choice(["default", "model", "ollama"]), default="default",
              show_default=True, help="The support judge: the embedding judge, or the model "
              "(model; ollama is the same).")
@click.option("--out", type=click.Path(path_type=Path), default=Path("evals/reports"), show_default=True,
              help="Directory for the JSON and Markdown reports.")
@index_option
def eval_cmd(set_path: Path, llm: str, model: str | None, judge: str, out: Path,
             index: str | None) -> None:
    """Score answers on a question set; exit 5 when a metric is below its threshold."""
    from rag.eval.run import run_cli

    settings = _ensure_index(_settings(index)).settings  # the demo index, as `rag ask` reads it
    sys.exit(run_cli(settings, set_path=set_path, llm=llm, model=model, judge=judge, out=out))
