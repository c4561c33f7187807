"""The README's commands stay true: the quick start, the CI command, the worked example (and
the getting-started page's), the MCP configuration. The reference tables live on the
documentation pages, checked against the code by tests/test_docs.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, named_but_missing

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
    env = {**os.environ, "OLLAMA_HOST": "http://127.0.0.1:9", "XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("RAG_HOME", None)
    res = subprocess.run(["bash", "-c", quick_start()[0]], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "is empty: ingesting seeds/ first" in res.stderr
    assert (tmp_path / "data" / "rag" / "chroma").is_dir()  # the user's data folder
    assert not (tmp_path / ".rag").exists()  # nothing of it in the folder rag ran in
    for name in ("Skrull", "DeepSpeed-Ulysses", "Buff"):
        assert re.search(rf"^- {re.escape(name)}: .+\[\d+\]\.$", res.stdout, re.M), res.stdout
    assert "\nReferences\n" in res.stdout


def test_help_runs() -> None:
    res = subprocess.run([str(Path(sys.executable).parent / "rag"), "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "ask" in res.stdout and "ingest" in res.stdout


def test_files_and_modules_the_readme_names_exist() -> None:
    assert named_but_missing(README, frozenset({"evals/reports"})) == []  # reports: rag eval's output


def _transcripts(text: str, heading: str) -> list[list[tuple[str, list[str]]]]:
    """Per text block of the section under `heading`: (command, the lines it prints) of each
    `$ rag ...` in it."""
    body = text.split(f"{heading}\n", 1)[1].split("\n## ", 1)[0]
    blocks = []
    for block in re.findall(r"```text\n(.+?)\n```", body, re.S):
        shown = []
        for part in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, *lines = part.rstrip("\n").split("\n")
            shown.append((command, lines))
        blocks.append(shown)
    return blocks


def _prints_what_is_shown(command: str, lines: list[str], env: dict[str, str]) -> None:
    import shlex

    args = shlex.split(command)
    assert args[0] == "rag", command
    res = subprocess.run([str(Path(sys.executable).parent / "rag"), *args[1:]], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    expected = [line for line in lines if not line.startswith("Ollama is not running")]  # stderr
    if expected[-1] == "- ...":  # the text shows the first of several
        expected = expected[:-1]
    assert res.stdout.splitlines()[:len(expected)] == expected, command


def test_the_worked_example_prints_what_the_readme_shows(seeded_settings: Any, ollama_server: Any) -> None:
    """The offline answer with no model running, and the model's answer as CI replays it."""
    offline, with_model = _transcripts(README, "## A worked example")
    assert len(offline) == 1 and len(with_model) == 1
    env = {**os.environ, "RAG_HOME": str(seeded_settings.home), "OLLAMA_HOST": "http://127.0.0.1:9"}
    _prints_what_is_shown(*offline[0], env)
    recorded = [json.loads(line) for line in (ROOT / "evals" / "recorded" / "faithful.jsonl").read_text().splitlines()]
    question = with_model[0][0].split(" ", 2)[2].strip('"')
    ollama_server.replies = [r["reply"] for r in recorded if r["reply"] in "\n".join(with_model[0][1])]
    assert len(ollama_server.replies) == 1, f"the model's answer to {question!r} is not a recorded one"
    _prints_what_is_shown(*with_model[0], {**env, "OLLAMA_HOST": ollama_server.url, "RAG_LLM": "ollama"})
    assert ollama_server.replies == []  # the model answered


def test_the_getting_started_session_prints_what_the_page_shows(seeded_settings: Any) -> None:
    page = (ROOT / "docs" / "getting-started.md").read_text()
    shown = [t for block in _transcripts(page, "## A first session") for t in block]
    assert len(shown) == 3
    env = {**os.environ, "RAG_HOME": str(seeded_settings.home), "OLLAMA_HOST": "http://127.0.0.1:9"}
    for command, lines in shown:
        _prints_what_is_shown(command, lines, env)


def _json_blocks(text: str) -> list[str]:
    return re.findall(r"```json\n(.+?)\n```", text, re.S)


def test_the_readme_mcp_configuration_is_the_tested_one() -> None:
    """tests/test_mcp.py starts `rag mcp` from docs/mcp.md's configuration; the README's copy
    is that one, word for word."""
    section = README.split("## In an AI assistant (MCP)", 1)[1].split("\n## ", 1)[0]
    page = (ROOT / "docs" / "mcp.md").read_text()
    readme_blocks = _json_blocks(section)
    assert len(readme_blocks) == 1
    assert "claude_desktop_config.json" in section
    assert readme_blocks[0] == _json_blocks(page.split("claude_desktop_config.json", 1)[1])[0]


def test_the_readme_is_short_and_its_links_resolve() -> None:
    assert len(README.splitlines()) <= 200
    for target in re.findall(r"\]\(((?:docs/)[^)#]+)", README):
        assert (ROOT / target).is_file(), target
