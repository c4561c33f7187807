"""`rag papers`: list the index, show one paper, export papers for a reference manager."""

from __future__ import annotations

import textwrap

import click

from rag.cli.common import _ensure_index, _settings, emit_json, index_option, paper_named
from rag.errors import InputError


class _PapersGroup(click.Group):
    """`rag papers show ID` runs the subcommand; other words after the options are paper ids."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if self._first_word(args) not in self.commands:
            ctx.allow_interspersed_args = True  # ids, then options: `rag papers ID --index lib`
        rest = super().parse_args(ctx, args)
        words, ctx.params["ids"] = [*ctx._protected_args, *rest], ()
        if words and words[0] not in self.commands:
            ctx.params["ids"], ctx._protected_args, ctx.args = tuple(words), [], []
        return ctx.args

    def _first_word(self, args: list[str]) -> str | None:
        """The first argument that is neither an option nor an option's value."""
        takes_value = {o for p in self.params if isinstance(p, click.Option) and not p.is_flag for o in p.opts}
        words = iter(args)
        for word in words:
            if word == "--":
                return next(words, None)
            if not word.startswith("-"):
                return word
            if word in takes_value:
                next(words, None)
        return None


@click.group(cls=_PapersGroup, invoke_without_command=True, subcommand_metavar="[ID]... | show ID")
@click.option("--json", "as_json", is_flag=True, help='Print {"papers": [...]} with every field.')
@click.option("--format", "fmt", type=click.Choice(["bibtex", "ris", "csl-json"]),
              help="Print the papers as citations for a reference manager.")
@click.option("--duplicates", is_flag=True,
              help="Only papers merged from several records, with each source and why.")
@index_option
@click.pass_context
def papers(ctx: click.Context, as_json: bool, fmt: str | None, duplicates: bool, ids: tuple[str, ...],
           index: str | None) -> None:
    """List every paper in the index (`rag papers show ID` for one).

    With --format, print the papers named by ID (all when none is named) as BibTeX, RIS or
    CSL-JSON, for a reference manager."""
    ctx.obj = {"index": index}
    if ctx.invoked_subcommand:
        return
    if ids and (not fmt or any(i.startswith("-") for i in ids)):
        raise InputError(f"paper ids {' '.join(ids)!r} need --format, given before them",
                         "`rag papers --format bibtex ID ...`; `rag papers show ID` shows one paper")
    listed = every = _ensure_index(_settings(index)).papers()
    if duplicates:
        listed = [p for p in listed if p.sources]
    if duplicates and not as_json and not fmt:
        for p in listed:
            click.echo(f"{p.paper_id:<48} {textwrap.shorten(p.label, 60)}")
            for line in source_lines(p):
                click.echo(f"    {line}")
        click.echo(f"{len(listed)} papers merged from several records", err=True)
        return
    if fmt:
        from rag.export import export, select

        click.echo(export(select(listed, ids), fmt, every), nl=False)
        return
    if as_json:
        emit_json({"papers": [p.to_dict() for p in listed]})
        return
    for p in listed:
        click.echo(f"{p.paper_id:<48} {textwrap.shorten(p.label, 60)}")
    click.echo(f"{len(listed)} papers", err=True)


@papers.command("show")
@click.argument("paper_id")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@index_option
@click.pass_context
def papers_show(ctx: click.Context, paper_id: str, as_json: bool, index: str | None) -> None:
    """Show one paper (by its id, citation key, arXiv id, DOI or PMID) with all its fields."""

    retriever = _ensure_index(_settings(index or ctx.obj.get("index")))
    paper = paper_named(retriever.snapshot(), paper_id, retriever.settings.index)
    if as_json:
        emit_json(paper.to_dict())
        return
    for key, value in paper.to_dict().items():
        if key in ("abstract", "sources", "author_names") or value in (None, [], "", {}):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        click.echo(f"{key:>12}: {', '.join(value) if isinstance(value, list) else value}")
    if paper.sources:
        click.echo(f"{'sources':>12}:")
        for line in source_lines(paper):
            click.echo(f"{'':>14}{line}")
    click.echo()
    click.echo(textwrap.fill(paper.abstract, 92))


def source_lines(paper: object) -> list[str]:
    """One line per record merged into the paper: where, its format, and what matched."""
    out = []
    for e in getattr(paper, "sources", []):
        where = f"{e.get('source')}:{e['line']}" if e.get("line") else str(e.get("source"))
        where += f" record {e['record']}" if e.get("record") else ""
        fmt = f" ({e['format']})" if e.get("format") else ""
        why = f": {e['matched']}" if e.get("matched") else ""
        out.append(f"{where}{fmt}{why}")
    return out
