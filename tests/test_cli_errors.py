"""How `rag ask` reports what goes wrong around it: bad settings, a bug in rag, and an Ollama
that hangs, fails or is not Ollama at all (the Ollama-protocol test server on loopback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RAG, ROOT, run_rag

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
    assert "bad setting: RAG_LLM='bogus': Input should be 'auto', 'ollama', 'openai' or 'none'" in res.stderr
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


@pytest.mark.parametrize(("args", "code", "error"), [
    (["ask", ""], 2, "InputError: the question is empty"),
    (["search", "moe", "--index", "nosuch"], 3, "IndexStoreError: there is no index 'nosuch'"),
])
def test_rag_debug_shows_the_traceback_and_keeps_the_exit_code(args: list[str], code: int, error: str,
                                                             tmp_path: Path) -> None:
    """RAG_DEBUG=1 adds the traceback; a script still sees the documented exit code, not 1."""
    res = run_rag(*args, cwd=tmp_path, env={"RAG_HOME": str(tmp_path / ".rag"), "RAG_DEBUG": "1"})
    assert res.returncode == code, res.stderr
    assert "Traceback" in res.stderr and error in res.stderr
    off = run_rag(*args, cwd=tmp_path, env={"RAG_HOME": str(tmp_path / ".rag"), "RAG_DEBUG": "0"})
    assert off.returncode == code and "Traceback" not in off.stderr, off.stderr  # 0 is off


@pytest.mark.parametrize(("args", "message"), [
    (["ask", "  "], "the question is empty"),
    (["ask", "x" * 2001], "the question is 2001 characters; at most 2000"),
    (["ask", Q, "--year", "twenty"], "year filter 'twenty' is not a year or range"),
    (["search", ""], "the question is empty"),
    (["search", "moe", "--year", "2023-x"], "year filter '2023-x' is not a year or range"),
    (["chat", "--year", "abc"], "year filter 'abc' is not a year or range"),
    # an empty filter was taken for none, silently (rag ingest --category "" was refused)
    (["ask", Q, "--venue", ""], "--venue is empty\n  hint: name a venue such as MLSys, or leave the option out"),
    (["search", "moe", "--year", " "], "--year is empty"),
    (["search", "moe", "--category", ""], "--category is empty"),
    (["ask", Q, "--author", " "], "--author is empty\n  hint: give a surname or full name"),
    (["search", "moe", "--author", "J."], "author filter 'J.' has no name in it"),
    (["chat", "--source", ""], "--source is empty"),
    (["search", "moe", "--index", ""], "--index is empty\n  hint: name an index such as scifact"),  # was the default
    (["ingest", "seeds", "--index", " "], "--index is empty"),
])
def test_bad_input_is_refused_before_seeds_are_ingested(args: list[str], message: str,
                                                        workdir: Path) -> None:
    """On a fresh clone the default index is empty: a typo exits 2 at once, not after
    ingesting seeds/ into .rag (which it did, 15-25 s later)."""
    res = run_rag(*args, cwd=workdir, env={"RAG_HOME": str(workdir / ".rag")})
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith(f"error: {message}"), res.stderr
    assert not (workdir / ".rag" / "chroma").exists()


def test_a_thin_client_whose_server_is_down_exits_3_and_a_bad_url_2(tmp_path: Path) -> None:
    """Neither is a bug in rag (exit 1, what both were)."""
    from tests.ollama_server import free_port_with_nothing_listening

    down = f"http://127.0.0.1:{free_port_with_nothing_listening()}"
    res = run_rag("search", "moe", cwd=tmp_path, env={"RAG_SERVER_URL": down})
    assert res.returncode == 3, res.stderr
    assert res.stderr.startswith(f"error: cannot connect to the rag server at {down}")
    res = run_rag("ask", Q, cwd=tmp_path, env={"RAG_SERVER_URL": "http://[::1"})
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("error: RAG_SERVER_URL 'http://[::1' is not a usable URL")


def _run_timed(server: Any, args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str, float]:
    """Run `rag`; returns rc, stdout, stderr and the seconds from its first request to the
    Ollama server until it exited (the wait, without rag's start-up)."""
    proc = subprocess.Popen([RAG, *args], cwd=cwd, env={**os.environ, **env}, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = None
    while proc.poll() is None:
        if first is None and any(r["method"] == "POST" for r in server.requests):
            first = time.monotonic()
        time.sleep(0.05)
    out, err = proc.communicate()
    assert first is not None, err
    return proc.returncode, out, err, time.monotonic() - first


def test_a_hanging_ollama_is_waited_for_once(seeded_settings: Any, tmp_path: Path, ollama_server: Any) -> None:
    # The server takes every request (the model's template, the chat) and never answers.
    ollama_server.behaviour = "hang"
    env = _env(seeded_settings, OLLAMA_HOST=ollama_server.url, RAG_LLM_TIMEOUT="3")
    rc, out, err, waited = _run_timed(ollama_server, ["ask", "--llm", "ollama", Q], env, tmp_path)
    assert rc == 4 and not out
    assert f"error: Ollama at {ollama_server.url} did not answer within 3 s" in err
    assert 3 <= waited < 4.5, waited  # was 6: the template lookup waited the whole timeout first
    # auto: the same wait, then the offline answer, saying why
    rc, out, err, waited = _run_timed(ollama_server, ["ask", Q], env, tmp_path)
    assert rc == 0 and "3.76x" in out, err
    assert f"Ollama at {ollama_server.url} did not answer within 3 s; answering offline" in err
    assert waited < 4.5 + 10, waited  # the offline answer's time on a shared machine on top


BROKEN = {  # the test server's behaviour -> what the message says of the reply
    "error500": "Ollama at {url} answered 500: llama runner process has terminated",
    "html": "the server at {url} did not answer as Ollama does "
            "(not Ollama's JSON: an HTML page (\"Welcome to nginx!\"))",
    "html502": "the server at {url} answered 502 with an HTML page (\"502 Bad Gateway\")",
    "hangup": "the server at {url} closed the connection without an answer "
              "(Server disconnected without sending a response.)",
}


@pytest.mark.parametrize("behaviour", sorted(BROKEN))
def test_a_broken_ollama_is_named_and_auto_answers_offline(behaviour: str, seeded_settings: Any,
                                                           tmp_path: Path, ollama_server: Any) -> None:
    ollama_server.behaviour = behaviour
    message = BROKEN[behaviour].format(url=ollama_server.url)
    env = _env(seeded_settings, OLLAMA_HOST=ollama_server.url)
    # --llm ollama: exit 4, one error naming the host and summing up the reply
    res = run_rag("ask", "--llm", "ollama", Q, cwd=tmp_path, env=env)
    assert res.returncode == 4 and not res.stdout, res.stderr
    assert res.stderr.startswith(f"error: {message}\n  hint: "), res.stderr
    assert "<html" not in res.stderr.lower() and "Traceback" not in res.stderr
    if behaviour != "error500":  # not Ollama's own error: the hint is to check the host
        assert "OLLAMA_HOST" in res.stderr.split("hint:", 1)[1]
    # auto (the default): the offline answer, and one line on stderr saying why
    res = run_rag("ask", Q, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    assert "3.76x" in res.stdout and "\nReferences\n" in res.stdout
    notice = [line for line in res.stderr.splitlines() if message in line]
    assert len(notice) == 1 and "answering offline from the abstracts" in notice[0], res.stderr
    assert len(notice[0]) < 400 and "<html" not in res.stderr.lower()


def test_a_stream_that_breaks_off_is_an_error_not_a_stop(seeded_settings: Any, tmp_path: Path,
                                                        ollama_server: Any) -> None:
    ollama_server.behaviour = "cut"  # half the answer, then the connection drops
    env = _env(seeded_settings, OLLAMA_HOST=ollama_server.url)
    res = run_rag("ask", "--llm", "ollama", "--json", Q, cwd=tmp_path, env=env)
    assert res.returncode == 4, res.stderr
    obj = json.loads(res.stdout)  # what came is still printed, marked
    assert obj["incomplete"] and obj["finish_reason"] == "error" and obj["answer"].strip()
    assert obj["error"]["message"].startswith("the answer stream from Ollama broke off")
    assert res.stderr.startswith("error: the answer stream from Ollama broke off")
    # text, --llm ollama: the partial answer, marked; exit 4
    res = run_rag("ask", "--llm", "ollama", Q, cwd=tmp_path, env=env)
    assert res.returncode == 4, res.stderr
    assert "[answer incomplete: the model's stream broke off]" in res.stdout
    assert "the answer is incomplete" in res.stderr
    # auto keeps the partial answer, marked, and succeeds
    res = run_rag("ask", "--json", Q, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    assert obj["incomplete"] and obj["finish_reason"] == "error"
