"""How `rag ask` reports what goes wrong around it: bad settings, a bug in rag, and an Ollama
that hangs, fails or is not Ollama at all (the Ollama-protocol test server on loopback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_rag

Q = "What speedup does Skrull report over DeepSpeed?"


def _env(settings: Any, **extra: str) -> dict[str, str]:
    return {"RAG_HOME": str(settings.home), **extra}


@pytest.mark.parametrize("host", ["http://127.0.0.1:99999", "http://[::1", "ftp://127.0.0.1:1"])
@pytest.mark.parametrize("llm", [[], ["--llm", "ollama"]])
def test_a_bad_ollama_host_is_a_bad_setting(host: str, llm: list[str], seeded_settings: Any,
                                            tmp_path: Path) -> None:
    res = run_rag("ask", *llm, Q, cwd=tmp_path, env=_env(seeded_settings, OLLAMA_HOST=host))
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith(f"error: bad setting: OLLAMA_HOST={host!r}: not a usable URL")
    assert "expected http://HOST:PORT, e.g. http://127.0.0.1:11434" in res.stderr
    assert "Traceback" not in res.stderr and not res.stdout


def test_an_unknown_rag_llm_is_a_bad_setting(seeded_settings: Any, tmp_path: Path) -> None:
    res = run_rag("ask", Q, cwd=tmp_path, env=_env(seeded_settings, RAG_LLM="bogus"))
    assert res.returncode == 2, res.stderr
    assert "bad setting: RAG_LLM='bogus': Input should be 'auto', 'ollama' or 'none'" in res.stderr
    assert not res.stdout


# A command that fails as a bug would: main() must report it, not dump a traceback.
BUG = """
import click, sys
from rag.cli import cli, main

@cli.command()
def crash() -> None:
    {}["missing"]

sys.argv = ["rag", "crash"]
main()
"""


@pytest.mark.parametrize("debug", [False, True])
def test_an_unexpected_error_is_one_line_and_exit_1(debug: bool, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAG_DEBUG"} | ({"RAG_DEBUG": "1"} if debug else {})
    res = subprocess.run([sys.executable, "-c", BUG], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 1
    if debug:
        assert "Traceback" in res.stderr and "KeyError: 'missing'" in res.stderr
    else:
        assert "Traceback" not in res.stderr
        assert res.stderr.startswith("error: unexpected KeyError: 'missing'\n")
        assert "RAG_DEBUG=1" in res.stderr
