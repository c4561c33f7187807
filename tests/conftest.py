"""Shared fixtures: a real index over seeds/ built once, and the Ollama-protocol test server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "seeds"
RAG = str(Path(sys.executable).parent / "rag")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Never reach a real Ollama from tests by accident.
os.environ["OLLAMA_HOST"] = "http://127.0.0.1:9"
# Nor the user's own data folder (rag.config.default_home): a session's own, unless RAG_HOME
# names one (run_rag gives each working directory its own, below).
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="rag-tests-data-")


@pytest.fixture(scope="session")
def seeded_settings(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Settings for a real Chroma index over seeds/ (built once per session; do not write to it)."""
    from rag.config import Settings
    from rag.ingest import ingest

    home = tmp_path_factory.mktemp("seeded") / ".rag"
    settings = Settings(home=home, seeds=SEEDS, llm="none")
    ingest([SEEDS], settings, show_progress=False)
    return settings


@pytest.fixture(scope="session")
def retriever(seeded_settings):  # type: ignore[no-untyped-def]
    from rag.retrieve import Retriever

    return Retriever(seeded_settings)


@pytest.fixture()
def fresh_settings(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Settings for an empty index in a temp dir (tests may write to it)."""
    from rag.config import Settings

    return Settings(home=tmp_path / ".rag", seeds=SEEDS, llm="none")


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    """A temp working directory holding a copy of seeds/, for running the CLI as a user would."""
    shutil.copytree(SEEDS, tmp_path / "seeds")
    return tmp_path


def run_rag(*args: str, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run the installed `rag` command in a subprocess; without RAG_HOME its data folder is
    the working directory's own (`CWD/.data/rag`), as a user's would be their own."""
    full_env = {**os.environ, **(env or {})}
    if "RAG_HOME" not in full_env and "XDG_DATA_HOME" not in (env or {}):
        full_env["XDG_DATA_HOME"] = str(cwd / ".data")
    return subprocess.run([RAG, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture()
def ollama_server() -> Iterator[object]:
    from tests.ollama_server import OllamaTestServer

    with OllamaTestServer() as server:
        yield server


@pytest.fixture(scope="module")
def ollama_pipeline(seeded_settings, ollama):  # type: ignore[no-untyped-def]
    """A Pipeline over the seeds answering through the module's Ollama test server."""
    from rag.answering.pipeline import Pipeline
    from rag.config import get_settings

    get_settings.cache_clear()  # think/keep_alive/num_predict: from this process's environment
    with Pipeline(seeded_settings.model_copy(update={"ollama_host": ollama.url, "llm": "ollama"})) as p:
        yield p


@pytest.fixture(scope="module")
def ollama() -> Iterator[object]:
    """One Ollama test server for a module's `rag serve` (tests set its behaviour)."""
    from tests.ollama_server import OllamaTestServer

    with OllamaTestServer() as server:
        yield server


@pytest.fixture(scope="session")
def llama() -> Iterator[object]:
    """llama.cpp's own server with a real instruct model (SmolLM2-135M-Instruct), started
    once per session on 127.0.0.1 and stopped after it. Skipped where `scripts/setup --dev`
    did not install the model, except under RAG_REAL_MODEL=required (CI), where it fails."""
    from tests.llama_server import LlamaServer, available

    why = available()
    if why:
        if os.environ.get("RAG_REAL_MODEL") == "required":
            pytest.fail(f"the real model is required here: {why}")
        pytest.skip(why)
    with LlamaServer() as server:
        yield server


@pytest.fixture(scope="module")
def relay(llama) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """The Ollama-protocol test server relaying to the real model, as `smollm2:135m`."""
    from tests.ollama_server import OllamaTestServer

    with OllamaTestServer(models=("smollm2:135m",), relay=llama.url) as server:
        yield server


def named_but_missing(text: str, allowed: frozenset[str] = frozenset()) -> list[str]:
    """The repository paths (`rag/...`, `scripts/...`) and dotted names (`rag.judge.Judge`) a
    text names that do not exist, except those `allowed`: what a page or the README points a
    reader to must be there."""
    import importlib
    import re
    from typing import Any

    paths = set(re.findall(r"(?<![\w./-])((?:rag|scripts|benchmarks|tests|evals|prompts|docs|seeds)/[\w./-]*\w)",
                           text))
    missing = sorted(p for p in paths - allowed if not (ROOT / p).exists())
    for dotted in sorted(set(re.findall(r"(?<![\w./-])(rag(?:\.[A-Za-z_][A-Za-z0-9_]*)+)", text))):
        parts = dotted.split(".")
        obj: Any = None
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
                break
            except ImportError:
                continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                missing.append(dotted)
                break
            obj = getattr(obj, attr)
    return missing
