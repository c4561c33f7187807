"""The README's commands stay true: quick start, CI command, CLI reference."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def quick_start() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_quick_start_has_two_commands_and_ci_runs_the_second() -> None:
    commands = quick_start()
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci.splitlines()


def _setup_is_current() -> bool:
    import hashlib

    digest = hashlib.sha1((ROOT / "pyproject.toml").read_bytes() + (ROOT / "scripts" / "setup").read_bytes())
    return any((ROOT / ".venv" / f".rag-setup-{dev}-{digest.hexdigest()[:12]}").exists() for dev in (0, 1))


def test_quick_start_main_command_answers_with_citations(tmp_path: Path) -> None:
    """Run the first quick-start command in a fresh copy of the repository (sharing .venv)."""
    # Sharing .venv is only safe when setup has nothing left to do: otherwise its editable
    # install would be re-pointed at this temporary copy.
    assert _setup_is_current(), "pyproject.toml or scripts/setup changed: run scripts/setup --dev first"
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    files += [str(p.relative_to(ROOT)) for p in (ROOT / "rag").rglob("*") if p.is_file()]
    for name in set(files):
        src = ROOT / name
        if src.is_file() and "__pycache__" not in name:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tmp_path / name)
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    env = {**os.environ, "OLLAMA_HOST": "http://127.0.0.1:9"}
    env.pop("RAG_HOME", None)
    res = subprocess.run(["bash", "-c", quick_start()[0]], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "is empty: ingesting seeds/ first" in res.stderr
    assert (tmp_path / ".rag").is_dir()
    for name in ("Skrull", "DeepSpeed-Ulysses", "Buff"):
        assert re.search(rf"^- {re.escape(name)}: .+\[\d+\]\.$", res.stdout, re.M), res.stdout
    assert "\nReferences\n" in res.stdout


def test_help_runs() -> None:
    res = subprocess.run([str(Path(sys.executable).parent / "rag"), "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "ask" in res.stdout and "ingest" in res.stdout


def test_cli_reference_in_readme_is_current() -> None:
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_reference.py")],
                         capture_output=True, text=True, check=True)
    assert res.stdout.strip() in README, "run: python scripts/cli_reference.py --write"


def test_every_setting_is_in_the_configuration_table() -> None:
    from rag.config import Settings, env_name

    table = README.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    missing = [env_name(f) for f in Settings.model_fields if f"`{env_name(f)}`" not in table]
    assert missing == [], f"add these to the README's Configuration table: {missing}"


def _configuration_table() -> str:
    return README.split("## Configuration", 1)[1].split("\n## ", 1)[0]


def test_every_rag_variable_the_code_reads_is_in_the_configuration_table() -> None:
    """Not only Settings' fields: what the CLI, the thin client and the readers read
    themselves (RAG_DEBUG, RAG_INDEX ...) and Settings' aliases (RAG_OLLAMA_HOST)."""
    from pydantic import AliasChoices

    from rag.config import Settings

    read = set()
    for path in (ROOT / "rag").rglob("*.py"):
        read |= set(re.findall(r"""(?:environ\.get|getenv|environ\[)\(?\s*["'](RAG_\w+)["']""",
                               path.read_text()))
    for field in Settings.model_fields.values():
        if isinstance(field.validation_alias, AliasChoices):
            read |= {a for a in field.validation_alias.choices if isinstance(a, str) and a.startswith("RAG_")}
    assert {"RAG_DEBUG", "RAG_SERVER_URL"} <= read  # the scan finds what it is meant to
    table = _configuration_table()
    missing = sorted(name for name in read if f"`{name}`" not in table)
    assert missing == [], f"add these to the README's Configuration table: {missing}"


def test_configuration_table_defaults_are_the_code_defaults() -> None:
    from rag.config import Settings, env_name

    fields = {env_name(name): field.default for name, field in Settings.model_fields.items()}
    checked = 0
    for row in re.findall(r"^\| (`[A-Z_]+`(?: / `[A-Z_]+`)?) \| ([^|]+?) \|", _configuration_table(), re.M):
        names = re.findall(r"`([A-Z_]+)`", row[0])
        shown = [d.strip() for d in row[1].split(" / ")] if len(names) > 1 else [row[1].strip()]
        for name, cell in zip(names, shown, strict=True):
            if name not in fields or name == "RAG_MODEL_CACHE":  # that one depends on $HOME
                continue
            default, value = fields[name], re.match(r"`([^`]*)`|(\w+)", cell)
            assert value, (name, cell)
            text = value.group(1) if value.group(1) is not None else value.group(2)
            if default is None:
                assert text == "unset", (name, cell)
            elif default == "":
                assert text == "empty", (name, cell)
            elif isinstance(default, (int, float)):
                assert float(text) == default, (name, cell, default)
            else:
                assert text == str(default), (name, cell, default)
            checked += 1
    assert checked >= 25, checked


def _endpoint_table() -> str:
    section = README.split("## The HTTP API and the chat page", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("| `"))


def _openapi(tmp_path: Path) -> dict[str, Any]:
    from rag.api.app import create_app
    from rag.config import Settings

    return create_app(Settings(home=tmp_path / ".rag")).openapi()  # no lifespan: no index


def test_every_http_route_is_in_the_endpoint_table_and_back(tmp_path: Path) -> None:
    paths = _openapi(tmp_path)["paths"]
    table = _endpoint_table()
    served = {(method.upper(), path) for path, ops in paths.items() for method in ops}
    missing = sorted(f"{m} {p}" for m, p in served if f"`{m} {p}" not in table)
    assert missing == [], f"add to the README's endpoint table: {missing}"
    listed = set(re.findall(r"`(GET|POST|DELETE) (/[^`?\s]*)", table))
    unknown = sorted(f"{m} {p}" for m, p in listed if (m, p) not in served and p not in ("/", "/mcp"))
    assert unknown == [], f"the README lists routes the app does not serve: {unknown}"


def test_the_endpoint_table_names_every_field_of_ask_and_search(tmp_path: Path) -> None:
    spec = _openapi(tmp_path)
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(?:GET|POST) (/\w+)[^\n]*", _endpoint_table(), re.M)}
    ask = spec["components"]["schemas"]["AskRequest"]["properties"]
    assert sorted(f for f in ask if f'"{f}"' not in rows["/ask"]) == []
    search = [p["name"] for p in spec["paths"]["/search"]["get"]["parameters"]]
    assert sorted(p for p in search if f"{p}=" not in rows["/search"]) == []


def test_the_mcp_tool_table_is_what_rag_mcp_offers() -> None:
    import anyio

    from rag.mcp.server import build

    tools = anyio.run(build(object(), allow_ingest=True).list_tools)  # type: ignore[arg-type]
    section = README.split("## Use it from an AI assistant (MCP)", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)\(([^)]*)\)` \|", section, re.M))
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


def test_files_and_modules_the_readme_names_exist() -> None:
    import importlib

    paths = set(re.findall(r"(?<![\w./-])((?:rag|scripts|benchmarks|tests|evals|prompts|docs|seeds)/[\w./-]*\w)",
                           README))
    missing = sorted(p for p in paths - {"evals/reports"} if not (ROOT / p).exists())  # reports: rag eval's output
    assert missing == [], missing
    for dotted in set(re.findall(r"(?<![\w./-])(rag(?:\.[A-Za-z_]+)+)", README)):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj: Any = importlib.import_module(".".join(parts[:cut]))
                break
            except ImportError:
                continue
        for attr in parts[cut:]:
            assert hasattr(obj, attr), f"the README names {dotted}, which does not exist"
            obj = getattr(obj, attr)


def _transcripts(section: str) -> list[tuple[str, list[str]]]:
    """(command, the lines it prints) of each `$ rag ...` in the section's text blocks."""
    body = README.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```text\n(.+?)\n```", body, re.S):
        for part in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, *lines = part.rstrip("\n").split("\n")
            out.append((command, lines))
    return out


def test_the_worked_example_prints_what_the_readme_shows(seeded_settings: Any) -> None:
    import shlex

    shown = _transcripts("A worked example")
    assert len(shown) == 3
    env = {**os.environ, "RAG_HOME": str(seeded_settings.home), "OLLAMA_HOST": "http://127.0.0.1:9"}
    for command, lines in shown:
        args = shlex.split(command)
        assert args[0] == "rag", command
        res = subprocess.run([str(Path(sys.executable).parent / "rag"), *args[1:]], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        expected = [line for line in lines if not line.startswith("Ollama is not running")]  # stderr
        if expected[-1] == "- ...":  # the README shows the first of several
            expected = expected[:-1]
        assert res.stdout.splitlines()[:len(expected)] == expected, command


def test_what_rag_api_key_leaves_open_is_what_the_readme_says() -> None:
    from rag.api.limits import PUBLIC_PREFIXES

    section = README.split("## The HTTP API and the chat page", 1)[1].split("\n## ", 1)[0]
    sentence = section.split("With `RAG_API_KEY` set,", 1)[1].split("Bearer KEY", 1)[0]
    assert sorted(p for p in PUBLIC_PREFIXES if f"`{p}" not in sentence) == []


def test_the_ask_json_section_names_every_field() -> None:
    """The answer's fields and those of its citations and sentences (`nearest`'s are under
    "Abstentions explained"; `export`, POST /ask's, under "Citation export")."""
    from rag.api.models import AnswerPublic, CitationPublic, SentencePublic

    section = README.split("### `rag ask --json`", 1)[1].split("\n### ", 1)[0]
    for model in (AnswerPublic, CitationPublic, SentencePublic):
        missing = sorted(f for f in set(model.model_fields) - {"export"} if f"`{f}`" not in section)
        assert missing == [], f"document in the README's `rag ask --json` section: {model.__name__} {missing}"
