"""`rag check`: a claim against one paper, or a draft's citing sentences against their papers.

Exit codes: 0 every claim supported, 6 one contradicted, not supported or citing an unknown
key (rag.errors.EXIT_UNSUPPORTED), 2 bad input, 3 index problem.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import click

from rag.cli.common import _ensure_index, _settings, emit_json, index_option, paper_named
from rag.errors import EXIT_UNSUPPORTED, InputError

_MARK = {"supported": "supported", "contradicted": "CONTRADICTED", "not_supported": "not supported"}


@click.command("check")
@click.argument("target")
@click.option("--paper", "paper_id", metavar="ID",
              help="Check TARGET as a claim against this paper (id, citation key, arXiv id, DOI, PMID).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON.")
@index_option
def check(target: str, paper_id: str | None, as_json: bool, index: str | None) -> None:
    """Check a claim against a paper, or every citing sentence of a draft.

    \b
    rag check "LoRA freezes the pre-trained weights" --paper hu2021lora
    rag check draft.md        (pandoc [@key]; LaTeX \\cite{key} in a .tex file)

    Each verdict is supported, contradicted (with the sentence that contradicts it) or not
    supported (the abstract does not say it). Exit 6 when any is not supported."""
    from rag.judge import Judge
    from rag.retrieve.metadata import find_paper

    if not target.strip():
        raise InputError("nothing to check: the claim or draft path is empty",
                         'give a claim with --paper ID, or the path of a draft')
    settings = _settings(index)
    if paper_id is None:
        path = Path(target)
        if not path.is_file():
            raise InputError(f"{target!r} is not a file", "to check a claim, name its paper: "
                             'rag check "CLAIM" --paper ID (ids: `rag papers`)')
        from rag.corpus.drafts import read_draft

        text, kind = read_draft(path)  # bad input is refused before the index is opened
    retriever = _ensure_index(settings)
    snapshot = retriever.snapshot()
    judge = Judge(retriever.embedder)
    if paper_id is not None:
        paper = paper_named(snapshot, paper_id, settings.index)
        _claim(judge, target, paper, as_json)
        return
    from rag.answering.drafts import all_supported, check_draft

    by_key: dict[str, Any] = {}

    def find(key: str) -> Any:
        if not by_key:  # the keys an export from this index writes, worked out once
            from rag.export.keys import keyed

            by_key.update(keyed(snapshot.papers.values()))
        return find_paper(snapshot, key) or by_key.get(key)

    sentences = check_draft(judge, text, kind, find)
    if as_json:
        emit_json({"draft": str(path), "sentences": [s.to_public() for s in sentences]})
    else:
        _print_draft(path, sentences)
    if not all_supported(sentences):
        sys.exit(EXIT_UNSUPPORTED)


def _claim(judge: Any, claim: str, paper: Any, as_json: bool) -> None:
    from rag.schema import Source

    support = judge.check(claim, [(Source(1, paper, 0.0).header(), paper.abstract)])
    if as_json:
        emit_json({"verdict": support.verdict, "score": support.score, "quote": support.quote,
                   "paper_id": paper.paper_id, "reasons": support.reasons})
    else:
        click.echo(f"{_MARK[support.verdict]} ({support.score:.2f}) by {paper.paper_id}")
        if support.quote:
            label = "contradicting sentence" if support.verdict == "contradicted" else "closest sentence"
            click.echo(textwrap.fill(f"{label}: \"{support.quote}\"", 100, subsequent_indent="  "))
        for reason in support.reasons:
            click.echo(f"  {reason}")
    if support.verdict != "supported":
        sys.exit(EXIT_UNSUPPORTED)


def _print_draft(path: Path, sentences: list[Any]) -> None:
    for s in sentences:
        click.echo(f"{path}:{s.line}: {_MARK[s.verdict]}: {textwrap.shorten(s.text, 90)}")
        if s.unknown_keys:
            click.echo(f"    unknown key(s): {', '.join(s.unknown_keys)} (not in the index; "
                       "ingest the .bib that holds them)")
        if s.quote:
            label = "contradicts it" if s.verdict == "contradicted" else "says" \
                if s.verdict == "supported" else "closest"
            click.echo(textwrap.fill(f"{s.paper_id} {label}: \"{s.quote}\"", 100,
                                     initial_indent="    ", subsequent_indent="      "))
    counts = {v: sum(s.verdict == v for s in sentences) for v in _MARK}
    click.echo(f"{len(sentences)} citing sentence(s): {counts['supported']} supported, "
               f"{counts['contradicted']} contradicted, {counts['not_supported']} not supported",
               err=True)
