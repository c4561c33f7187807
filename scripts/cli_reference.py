"""Print the CLI reference (every command's --help) as Markdown.

The documentation's CLI page (docs/reference/cli.md) is generated from `reference()` at
`mkdocs build` time (scripts/docs_reference.py)."""

from __future__ import annotations

import click

from rag.cli import cli


def _commands(group: click.Group, prefix: list[str]) -> list[tuple[list[str], click.Command]]:
    out: list[tuple[list[str], click.Command]] = [(prefix, group)]
    for name in sorted(group.commands):
        cmd = group.commands[name]
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, [*prefix, name]))
        else:
            out.append(([*prefix, name], cmd))
    return out


def reference(level: int = 2, width: int = 100) -> str:
    """Every command's --help under a heading of `level` (the docs page: 2),
    wrapped at `width` (narrower, click cuts the commands' one-line summaries)."""
    parts = []
    for path, cmd in _commands(cli, []):
        ctx = click.Context(cmd, info_name=" ".join(["rag", *path]), terminal_width=width)
        parts.append(f"{'#' * level} `{' '.join(['rag', *path])}`\n\n```text\n{cmd.get_help(ctx)}\n```\n")
    return "\n".join(parts)


def main() -> None:
    print(reference())


if __name__ == "__main__":
    main()
