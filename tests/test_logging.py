"""Logs and progress where they belong: a few lines in a file, a bar on a terminal, one format
for rag and uvicorn, RAG_LOG_LEVEL and -v/-q, NO_COLOR."""

from __future__ import annotations

import fcntl
import io
import logging
import os
import pty
import re
import struct
import subprocess
import termios
from pathlib import Path

import httpx
import pytest

from tests.conftest import RAG, SEEDS, run_rag
from tests.rag_server import RagServer

ONE_FILE = SEEDS / "000_1d593446947ebb0f.txt"  # five papers: a short ingest
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR) [\w.]+: ")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"RAG_HOME": str(tmp_path / ".rag"), "RAG_SEEDS": str(SEEDS), **extra}


def test_progress_to_a_file_is_a_few_log_lines_not_redraws(tmp_path: Path) -> None:
    res = run_rag("ingest", str(ONE_FILE), cwd=tmp_path, env=_env(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "\r" not in res.stderr
    progress = [line for line in res.stderr.splitlines() if "embedding (" in line]
    assert 1 <= len(progress) <= 10, res.stderr
    assert all(LINE.match(line) for line in progress), progress
    assert re.search(r"embedding \(\w+\): (\d+)/\1 texts in [\d.]+ s$", progress[-1])


def _on_a_terminal(*args: str, env: dict[str, str], cwd: Path) -> str:
    """stderr of `rag ARGS` when it is a terminal (a pseudo-terminal)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    proc = subprocess.Popen([RAG, *args], cwd=cwd, env={**os.environ, **env},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the process closed its end
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=180) == 0, out.decode(errors="replace")
    return out.decode(errors="replace")


def test_a_terminal_gets_a_bar_and_quiet_silences_it(tmp_path: Path) -> None:
    bar = _on_a_terminal("ingest", str(ONE_FILE), env=_env(tmp_path), cwd=tmp_path)
    assert "\r" in bar and "text/s" in bar  # tqdm's bar, redrawn in place
    quiet = _on_a_terminal("-q", "ingest", "--index", "q", str(ONE_FILE), env=_env(tmp_path),
                           cwd=tmp_path)
    assert "embedding" not in quiet and "text/s" not in quiet


def test_log_level_setting(tmp_path: Path) -> None:
    warning = run_rag("ingest", str(ONE_FILE), cwd=tmp_path, env=_env(tmp_path, RAG_LOG_LEVEL="warning"))
    assert warning.returncode == 0 and "embedding (" not in warning.stderr, warning.stderr
    bad = run_rag("papers", cwd=tmp_path, env=_env(tmp_path, RAG_LOG_LEVEL="chatty"))
    assert bad.returncode == 2
    assert "RAG_LOG_LEVEL='chatty'" in bad.stderr and "debug, info, warning or error" in bad.stderr
    # -v undoes RAG_LOG_LEVEL=warning: progress shows again
    verbose = run_rag("-v", "ingest", "--index", "v", str(ONE_FILE), cwd=tmp_path,
                      env=_env(tmp_path, RAG_LOG_LEVEL="warning"))
    assert verbose.returncode == 0 and "embedding (" in verbose.stderr, verbose.stderr


def test_serve_logs_uvicorn_and_rag_in_one_format(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / ONE_FILE.name).write_text(ONE_FILE.read_text())
    server = RagServer(tmp_path / ".rag", tmp_path, {"RAG_SEEDS": str(seeds)}).start()
    try:
        assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
    finally:
        server.stop()
    lines = [line for line in server.log().splitlines() if line.strip()]
    assert any(LINE.match(line) and "rag.api: rag " in line and "chat page at" in line for line in lines)
    assert any(LINE.match(line) and " uvicorn.error: Uvicorn running on" in line for line in lines)
    assert any(LINE.match(line) and " uvicorn.access: " in line and "/health" in line for line in lines)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("no_color,coloured", [(None, True), ("1", False)])
def test_warnings_are_coloured_on_a_terminal_unless_no_color(
    no_color: str | None, coloured: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag.logs import log_config

    stream = _Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    formatter = log_config("INFO")["formatters"]["rag"]
    text = formatter["()"](color=formatter["color"]).format(
        logging.makeLogRecord({"name": "rag.x", "levelname": "WARNING", "msg": "careful"}))
    assert ("\x1b[" in text) is coloured
    assert text.endswith("rag.x: careful")
