"""`rag mcp` under input no assistant should send: lines that are no JSON-RPC message, and
tool arguments of odd Unicode, NUL bytes, over-long names and wrong types. Each gets one
answer of one line; the server goes on answering and writes no traceback."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_client import Session, connect, stdio_params
from tests.rag_server import copy_home

DYNAPIPE = "2311.10418"
# What a tool needs to run at all; each call below replaces one argument with a hostile value.
REQUIRED: dict[str, dict[str, Any]] = {
    "search_papers": {"query": "pipeline parallelism"},
    "ask": {"question": "What does DynaPipe optimise?"},
    "get_paper": {"paper_id": DYNAPIPE},
    "export_citations": {"paper_ids": [DYNAPIPE]},
    "list_papers": {},
    "find_source": {"quote": "dynamic micro-batching"},
    "ingest": {"path": "new.jsonl"},
}
ODD_TEXT = [
    "²",  # a digit to str.isdigit(), none to int()
    "a\x00b",
    "\x00",
    "line\nbreak\u2028and\r",
    "\u202eevil\u200b\ufeff",  # right-to-left override, zero-width space, BOM
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🧪 ﷽",
    "e\u0301" * 300,  # combining accents
    "x" * 5000,  # one name longer than any file system takes
    "a/" * 3000,  # a path longer than PATH_MAX
    "../" * 20 + "etc/passwd",
]
WRONG_TYPES: list[Any] = [5, -1.5, True, ["a"], {"a": 1}, [[["deep"]]]]


@pytest.fixture(scope="module")
def stderr_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile-stderr") / "stderr.txt"


@pytest.fixture(scope="module")
def hostile(seeded_settings, tmp_path_factory: pytest.TempPathFactory,  # type: ignore[no-untyped-def]
            stderr_file: Path) -> Iterator[Session]:
    base = tmp_path_factory.mktemp("hostile")
    home = copy_home(seeded_settings.home, base / "home")
    allowed = base / "allowed"
    allowed.mkdir()
    (allowed / "new.jsonl").write_text(json.dumps({"id": "hostile-new", "title": "Quokkaflow", "abstract": (
        "We present Quokkaflow, a system for gradient checkpoint placement. It is 2x faster.")}) + "\n")
    with stderr_file.open("w") as errlog, \
            connect(stdio_params(home, ["--allow-ingest", str(allowed)]), errlog=errlog) as session:
        yield session


def calls() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every tool with each of its arguments given each hostile value (as a list item too,
    where the argument is a list)."""
    schemas = {
        "search_papers": ["query", "k", "venue", "year", "source", "category", "author", "index", "max_chars"],
        "ask": ["question", "venue", "year", "source", "category", "author", "strict", "index", "max_chars"],
        "get_paper": ["paper_id", "index", "max_chars"],
        "export_citations": ["paper_ids", "format", "index", "max_chars"],
        "list_papers": ["venue", "year", "source", "category", "author", "cursor", "index", "max_chars"],
        "find_source": ["quote", "index", "max_chars"],
        "ingest": ["path"],
    }
    for tool, arguments in schemas.items():
        for argument in arguments:
            for value in ODD_TEXT + WRONG_TYPES:
                yield tool, {**REQUIRED[tool], argument: value}
                if argument == "paper_ids" and isinstance(value, str):
                    yield tool, {**REQUIRED[tool], argument: [DYNAPIPE, value]}


def test_every_tool_answers_hostile_arguments_with_one_line(hostile: Session, stderr_file: Path) -> None:
    assert {t.name for t in hostile.tools()} == set(REQUIRED)
    bare = []
    for tool, arguments in calls():
        result = hostile.call(tool, **arguments)
        text = result.content[0].text
        if result.is_error:
            # rag's message, not the SDK's bare "Error executing tool NAME" of a crash
            if "\n" in text or text.rstrip().endswith(f"Error executing tool {tool}") \
                    or "unexpected" in text or len(text) > 8000:
                bare.append((tool, {k: str(v)[:40] for k, v in arguments.items()}, text[:200]))
        else:
            assert result.structured_content is not None, (tool, arguments)
    assert not bare, bare
    assert hostile.ok("get_paper", paper_id=DYNAPIPE)["label"] == "DynaPipe"  # it goes on
    log = stderr_file.read_text()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]


@pytest.mark.parametrize(("tool", "arguments", "says"), [
    ("list_papers", {"cursor": "²"}, "cursor '²' is not one this server gave"),
    ("list_papers", {"cursor": "9" * 5000}, "is not one this server gave"),
    ("ingest", {"path": "a\x00b"}, "a path with a control character (U+0000) is refused"),
    ("ingest", {"path": "x" * 5000}, "(5,000 characters): File name too long"),
    ("ingest", {"path": "a/" * 3000}, "File name too long"),
])
def test_the_probes_get_rags_message(hostile: Session, tool: str, arguments: dict[str, Any], says: str) -> None:
    text = hostile.error(tool, **arguments)
    assert says in text and "\n" not in text, text[:300]


class Raw:
    """`rag mcp` over pipes, driven a line at a time (the SDK's client never sends a bad line)."""

    def __init__(self, params: Any, errlog: Any) -> None:
        self.proc = subprocess.Popen([params.command, *params.args], env=params.env, cwd=params.cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog,
                                     text=True, encoding="utf-8")
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=lambda: [self.lines.put(x) for x in self.proc.stdout],  # type: ignore[union-attr]
                                       daemon=True)
        self.reader.start()

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def reply(self, within: float = 60) -> dict[str, Any]:
        try:
            return json.loads(self.lines.get(timeout=within))  # type: ignore[no-any-return]
        except queue.Empty:
            raise AssertionError(f"no reply within {within:.0f} s") from None

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(timeout=30)
            self.proc.stdout.close()  # type: ignore[union-attr]


def test_an_unreadable_line_on_stdin_is_answered_and_the_server_goes_on(seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    params = stdio_params(copy_home(seeded_settings.home, tmp_path / "home"))
    with (tmp_path / "stderr.txt").open("w") as errlog:
        raw = Raw(params, errlog)
        try:
            raw.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}}))
            assert raw.reply(300)["result"]["serverInfo"]["name"] == "rag"
            raw.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            raw.send("{not json")
            assert raw.reply() == {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32700, "message": "Parse error: Invalid JSON: key must be a string at line 1 column 2"}}
            raw.send("")  # a blank line is no message: nothing to answer
            # JSON, but no JSON-RPC message: -32600, with its id when it has one
            raw.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": 12}))
            reply = raw.reply()
            assert reply["id"] == 7 and reply["error"]["code"] == -32600
            raw.send("[1, 2]")
            reply = raw.reply()
            assert reply["id"] is None and reply["error"]["code"] == -32600
            # valid to Python's json, not to the SDK's parser: the client is still answered
            raw.send('{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": '
                     '"search_papers", "arguments": {"query": "\\ud800"}}}')
            reply = raw.reply()
            assert reply["id"] == 8 and reply["error"]["code"] == -32700
            raw.send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"}))
            assert raw.reply() == {"jsonrpc": "2.0", "id": 9, "result": {}}
        finally:
            raw.close()
    log = (tmp_path / "stderr.txt").read_text()
    assert log.count("stdin: Parse error") == 2 and log.count("stdin: Invalid request") == 2, log
    assert "Traceback" not in log


def test_a_bug_in_a_tool_is_one_line_too(caplog: pytest.LogCaptureFixture) -> None:
    """What rag did not foresee (here a tool that raises ValueError) is still one line to the
    client, and one line in the server's log: the traceback only at debug level."""
    import logging

    from rag.mcp.server import build

    class Broken:
        settings = None

        def list_papers(self, *args: Any) -> Any:
            raise ValueError("invalid literal for int() with base 10: '²'\nsecond line")

    server = build(Broken(), allow_ingest=False)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="rag.mcp"), connect(server) as session:
        text = session.error("list_papers")
    assert text == ("list_papers: unexpected ValueError: invalid literal for int() with base 10: "
                    "'²' second line (this is a bug in rag: `rag -v` shows its traceback on the "
                    "server's stderr; report it)")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "tool list_papers: unexpected ValueError: invalid literal for int() with base 10: '²' second line"]
    assert all(r.exc_info is None for r in errors)
