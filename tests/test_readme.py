"""The README's commands stay true: quick start, CI command, CLI reference."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

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
