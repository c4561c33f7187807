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

from tests.conftest import ROOT, named_but_missing

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


def test_the_committed_reference_pages_are_current(reference: ModuleType) -> None:
    """The reference pages read whole on a code host: their generated blocks are committed, and
    are what the code generates now."""
    for name, text in _pages().items():
        if reference.MARKER.search(text):
            assert reference.BLOCK.search(text), f"docs/{name}: its generated block is not committed"
            assert reference.fill(text) == text, \
                f"docs/{name} is stale: run `python scripts/docs_reference.py --write`"


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
        if name == "home":  # the user's data folder, whatever this machine's $HOME
            assert cell == "`~/.local/share/rag`", cell
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
        # reports: rag eval's output; seeds/FILE: how a question set names a paper
        assert named_but_missing(text, frozenset({"evals/reports", "seeds/FILE"})) == [], f"docs/{name}"


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


def _section(page: str, heading: str) -> str:
    """The text under `heading` on docs/`page`, up to the next heading of its level or above."""
    level = heading.split(" ", 1)[0]
    body = (DOCS / page).read_text().split(f"\n{heading}\n", 1)[1]
    return re.split(rf"\n#{{1,{len(level)}}} ", body, maxsplit=1)[0]


def _endpoint_table() -> str:
    return "\n".join(line for line in _section("http-api.md", "## Endpoints").splitlines()
                     if line.startswith("| `"))


def _openapi(tmp_path: Path) -> dict[str, Any]:
    from rag.api.app import create_app
    from rag.config import Settings

    return create_app(Settings(home=tmp_path / ".rag")).openapi()  # no lifespan: no index


def test_every_http_route_is_in_the_endpoint_table_and_back(tmp_path: Path) -> None:
    paths = _openapi(tmp_path)["paths"]
    table = _endpoint_table()
    served = {(method.upper(), path) for path, ops in paths.items() for method in ops}
    missing = sorted(f"{m} {p}" for m, p in served if f"`{m} {p}" not in table)
    assert missing == [], f"add to docs/http-api.md's endpoint table: {missing}"
    listed = set(re.findall(r"`(GET|POST|DELETE) (/[^`?\s]*)", table))
    unknown = sorted(f"{m} {p}" for m, p in listed if (m, p) not in served and p not in ("/", "/mcp"))
    assert unknown == [], f"docs/http-api.md lists routes the app does not serve: {unknown}"


def test_the_endpoint_table_names_every_field_of_ask_and_search(tmp_path: Path) -> None:
    spec = _openapi(tmp_path)
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(?:GET|POST) (/\w+)[^\n]*", _endpoint_table(), re.M)}
    ask = spec["components"]["schemas"]["AskRequest"]["properties"]
    assert sorted(f for f in ask if f'"{f}"' not in rows["/ask"]) == []
    search = [p["name"] for p in spec["paths"]["/search"]["get"]["parameters"]]
    assert sorted(p for p in search if f"{p}=" not in rows["/search"]) == []


def test_what_rag_api_key_leaves_open_is_what_the_http_page_says() -> None:
    from rag.api.limits import PUBLIC_PREFIXES

    sentence = _section("http-api.md", "## API key").split("With `RAG_API_KEY` set,", 1)[1].split("Bearer KEY", 1)[0]
    assert sorted(p for p in PUBLIC_PREFIXES if f"`{p}" not in sentence) == []


def test_the_mcp_tool_table_is_what_rag_mcp_offers() -> None:
    import anyio

    from rag.mcp.server import build

    tools = anyio.run(build(object(), allow_ingest=True).list_tools)  # type: ignore[arg-type]
    rows = dict(re.findall(r"^\| `(\w+)\(([^)]*)\)` \|", _section("mcp.md", "## Tools"), re.M))
    assert sorted(rows) == sorted(t.name for t in tools)
    for tool in tools:
        props, required = tool.input_schema["properties"], set(tool.input_schema.get("required", []))
        documented = {}
        for arg in filter(None, (a.strip() for a in rows[tool.name].split(","))):
            name, _, default = arg.rstrip("?").partition("=")
            documented[name] = (arg.endswith("?") or bool(default), default)
        assert sorted(documented) == sorted(set(props) - {"max_chars"}), tool.name  # max_chars: in the text
        for name, (optional, default) in documented.items():
            assert optional == (name not in required), (tool.name, name)
            if default:
                assert json.loads(default) == props[name]["default"], (tool.name, name)


def test_the_json_page_names_every_field_of_an_answer() -> None:
    """The answer's fields and those of its citations and sentences (`export`, POST /ask's,
    is named under the table)."""
    from rag.api.models import AnswerPublic, CitationPublic, SentencePublic

    section = _section("reference/json.md", "## `rag ask --json`")
    for model in (AnswerPublic, CitationPublic, SentencePublic):
        missing = sorted(f for f in set(model.model_fields) - {"export"} if f"`{f}`" not in section)
        assert missing == [], f"document on docs/reference/json.md: {model.__name__} {missing}"
    assert "`export`" in section or "export:" in section


def test_the_exit_codes_page_lists_every_exit_code_and_the_sizes_are_measured() -> None:
    """The documented exit codes are rag's own, and the model cache's documented size is what
    the cache holds (within 5%)."""
    import rag.errors as errors
    from rag.config import get_settings

    page = (DOCS / "reference" / "exit-codes.md").read_text()
    listed = {int(m) for m in re.findall(r"^\| (\d+) \|", page, re.M)}
    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    assert listed == codes | {130}, (listed, codes)
    started = (DOCS / "getting-started.md").read_text()
    said = int(re.search(r"`RAG_MODEL_CACHE`, (\d+) MB", started).group(1))  # type: ignore[union-attr]
    cache = get_settings().model_cache
    held = sum(f.stat().st_size for f in cache.glob("all-MiniLM-L6-v2*")) / 2**20
    assert abs(held - said) <= 0.05 * said, (said, held)
