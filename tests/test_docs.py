"""The documentation site: its reference pages are what the code generates, and what its other
pages name exists. (CI builds the whole site with `mkdocs build --strict` in .ci/run.)"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import click
import pytest

from tests.conftest import ROOT

DOCS = ROOT / "docs"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    return _script("docs_reference")


def _pages() -> dict[str, str]:
    return {str(p.relative_to(DOCS)): p.read_text() for p in DOCS.rglob("*.md")}


def test_each_reference_page_holds_its_generated_block(reference: ModuleType) -> None:
    markers = {}
    for name, text in _pages().items():
        for found in reference.MARKER.findall(text):
            assert found in reference.GENERATORS, f"docs/{name}: no generator named {found!r}"
            markers[found] = name
    assert markers == {"settings": "reference/configuration.md", "cli": "reference/cli.md",
                       "openapi": "reference/http.md"}


def test_the_configuration_page_has_every_setting_with_its_default(reference: ModuleType) -> None:
    from rag.config import Settings, env_name

    page = reference.settings_reference()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)`[^\n]*", page, re.M)}
    for name, field in Settings.model_fields.items():
        row = rows.get(env_name(name))
        assert row, f"{env_name(name)} is not on the configuration page"
        assert field.description and " ".join(field.description.split())[:30] in row, name
        cell = row.split(" | ")[1]
        if name == "model_cache":  # shown as ~/.cache/rag, whatever this machine's $HOME
            continue
        if field.default is None:
            assert cell == "unset", (name, cell)
        elif field.default == "":
            assert cell == "empty", (name, cell)
        elif isinstance(field.default, (int, float)):
            assert float(cell.strip("`")) == field.default, (name, cell)
        else:
            assert cell.strip("`") == str(field.default), (name, cell)
    assert "| `RAG_K` | `8` | integer (≥ 1, ≤ 50) |" in page
    assert "`OLLAMA_HOST` (or `RAG_OLLAMA_HOST`)" in page


def test_every_rag_variable_the_code_reads_is_on_the_configuration_page(reference: ModuleType) -> None:
    """Not only Settings' fields: what the CLI, the thin client and the readers read themselves."""
    page = reference.settings_reference()
    read = set()
    for path in (ROOT / "rag").rglob("*.py"):
        read |= set(re.findall(r"""(?:environ\.get|getenv|environ\[)\(?\s*["']((?:RAG|NO|XDG)_\w+)["']""",
                               path.read_text()))
    assert {"RAG_DEBUG", "RAG_SERVER_URL", "NO_COLOR"} <= read  # the scan finds what it is meant to
    assert sorted(name for name in read if f"`{name}`" not in page) == []


def _commands(group: click.Group, prefix: list[str]) -> list[tuple[str, click.Command]]:
    out: list[tuple[str, click.Command]] = [(" ".join(["rag", *prefix]), group)]
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out += _commands(cmd, [*prefix, name])
        else:
            out.append((" ".join(["rag", *prefix, name]), cmd))
    return out


def test_the_cli_page_has_every_command_and_option(reference: ModuleType) -> None:
    from rag.cli import cli

    page = reference.cli_reference()
    sections = dict(re.findall(r"^## `([^`]+)`\n\n```text\n(.*?)\n```", page, re.M | re.S))
    commands = _commands(cli, [])
    assert sorted(sections) == sorted(name for name, _ in commands)
    for name, cmd in commands:
        for param in cmd.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert opt in sections[name], f"{name} {opt} is not on the CLI page"


def test_the_http_page_has_every_route_and_schema(reference: ModuleType) -> None:
    spec = reference.openapi()
    page = reference.openapi_reference(spec)
    for path, ops in spec["paths"].items():
        for method in ops:
            assert f"### `{method.upper()} {path}`" in page
    for schema in spec["components"]["schemas"]:
        assert f"\n### {schema}\n" in page
    ask = spec["components"]["schemas"]["AskRequest"]["properties"]
    section = page.split("\n### AskRequest\n", 1)[1].split("\n### ", 1)[0]
    assert sorted(f for f in ask if f"| `{f}` |" not in section) == []


def test_no_work_log_references_in_the_docs() -> None:
    """Findings, not a lab notebook: no "issue 22" or "session 46" a reader cannot follow."""
    found = [f"{name}: {m.group(0)}" for name, text in _pages().items()
             for m in re.finditer(r"\b(?:issue|session) [0-9]+", text, re.I)]
    assert found == []


def test_files_and_modules_the_docs_name_exist() -> None:
    for name, text in _pages().items():
        paths = set(re.findall(r"(?<![\w./-])((?:rag|scripts|benchmarks|tests|evals|prompts|docs|seeds)/[\w./-]*\w)",
                               text))
        # reports: rag eval's output; seeds/FILE: how a question set names a paper
        missing = sorted(p for p in paths - {"evals/reports", "seeds/FILE"} if not (ROOT / p).exists())
        assert missing == [], f"docs/{name} names {missing}"
        for dotted in set(re.findall(r"(?<![\w./-])(rag(?:\.[A-Za-z_]+)+)", text)):
            parts = dotted.split(".")
            obj: Any = None
            for cut in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:cut]))
                    break
                except ImportError:
                    continue
            for attr in parts[cut:]:
                assert hasattr(obj, attr), f"docs/{name} names {dotted}, which does not exist"
                obj = getattr(obj, attr)


def test_the_pictures_are_small_and_the_plot_is_drawn_from_its_data(tmp_path: Path) -> None:
    images = sorted((DOCS / "images").glob("*.png"))
    assert {p.name for p in images} >= {"chat-answer.png", "comparison-table.png", "speed-and-scale.png"}
    for image in images:
        assert image.stat().st_size < 300_000, f"{image.name}: keep pictures under 300 kB"
    figures = json.loads((ROOT / "benchmarks" / "figures.json").read_text())
    out = tmp_path / "plot.png"
    _script("plot_speed").plot(figures, out)
    assert out.read_bytes() == (DOCS / "images" / "speed-and-scale.png").read_bytes(), (
        "docs/images/speed-and-scale.png is not drawn from benchmarks/figures.json: "
        "run .venv/bin/python scripts/plot_speed.py")
