"""Print the CLI reference (every command's --help) as Markdown; `--write` updates README.md.

The documentation's CLI page is generated from `reference()` too, at `mkdocs build` time
(scripts/docs_reference.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from rag.cli import cli

START, END = "<!-- cli-reference:start -->", "<!-- cli-reference:end -->"


def _commands(group: click.Group, prefix: list[str]) -> list[tuple[list[str], click.Command]]:
    out: list[tuple[list[str], click.Command]] = [(prefix, group)]
    for name in sorted(group.commands):
        cmd = group.commands[name]
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, [*prefix, name]))
        else:
            out.append(([*prefix, name], cmd))
    return out


def reference(level: int = 4, width: int = 100) -> str:
    """Every command's --help under a heading of `level` (README.md: 4; the docs page: 2),
    wrapped at `width` (narrower, click cuts the commands' one-line summaries)."""
    parts = []
    for path, cmd in _commands(cli, []):
        ctx = click.Context(cmd, info_name=" ".join(["rag", *path]), terminal_width=width)
        parts.append(f"{'#' * level} `{' '.join(['rag', *path])}`\n\n```text\n{cmd.get_help(ctx)}\n```\n")
    return "\n".join(parts)


def main() -> None:
    block = f"{START}\n\n{reference()}\n{END}"
    if "--write" in sys.argv:
        readme = Path(__file__).resolve().parent.parent / "README.md"
        text = readme.read_text()
        readme.write_text(re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S))
    else:
        print(block)


if __name__ == "__main__":
    main()
