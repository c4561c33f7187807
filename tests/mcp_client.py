"""The MCP SDK's own client, driven from synchronous tests: `rag mcp` started as docs/mcp.md's
client configuration says (over stdio), or `rag serve`'s /mcp over streamable HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from anyio.from_thread import BlockingPortal, start_blocking_portal

from tests.conftest import RAG, ROOT, SEEDS

MCP_PAGE = (ROOT / "docs" / "mcp.md").read_text()
PLACEHOLDER = "/ABSOLUTE/PATH/TO/rag"


def page_configs() -> dict[str, dict[str, Any]]:
    """The JSON client configurations of docs/mcp.md, by the file they go in."""
    section = MCP_PAGE.split("## Configure your client", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"`([^`\n]+\.json)`[^`]*?:\n\n```json\n(.+?)\n```", section, re.S)
    return {name: json.loads(block) for name, block in found}


def page_server() -> dict[str, Any]:
    """The `rag` server entry of claude_desktop_config.json on docs/mcp.md."""
    return page_configs()["claude_desktop_config.json"]["mcpServers"]["rag"]  # type: ignore[no-any-return]


def stdio_params(home: Path, extra_args: list[str] | None = None, cwd: Path = ROOT) -> Any:
    """What a client starts from docs/mcp.md's configuration, with this checkout's venv for
    the placeholder path and the test's data directory for RAG_HOME."""
    from mcp import StdioServerParameters

    entry = page_server()
    command = entry["command"].replace(f"{PLACEHOLDER}/.venv/bin/rag", RAG)
    env = {**{k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "HF_", "OLLAMA"))},
           **entry.get("env", {}), "RAG_HOME": str(home), "RAG_SEEDS": str(SEEDS)}
    return StdioServerParameters(command=command, args=[*entry["args"], *(extra_args or [])],
                                 env=env, cwd=cwd)


class Session:
    """A connected MCP client; `call` returns the CallToolResult, and keeps the warnings
    that came beside a result (text blocks after the first, "warning: ...") in `warnings`."""

    def __init__(self, portal: BlockingPortal, client: Any, logs: list[str]) -> None:
        self.portal, self.client, self.logs = portal, client, logs
        self.warnings: list[str] = []

    def call(self, name: str, **arguments: Any) -> Any:
        result = self.portal.call(self.client.call_tool, name, arguments)
        self.warnings += [c.text for c in result.content[1:] if getattr(c, "text", "").startswith("warning: ")]
        return result

    def ok(self, name: str, **arguments: Any) -> dict[str, Any]:
        """The structured result of a call that must succeed."""
        result = self.call(name, **arguments)
        assert not result.is_error, result.content[0].text
        assert result.structured_content is not None
        return result.structured_content  # type: ignore[no-any-return]

    def error(self, name: str, **arguments: Any) -> str:
        """The text of a call that must be a tool error."""
        result = self.call(name, **arguments)
        assert result.is_error, result
        return result.content[0].text  # type: ignore[no-any-return]

    def read(self, uri: str) -> str:
        return self.portal.call(self.client.read_resource, uri).contents[0].text  # type: ignore[no-any-return]

    def tools(self) -> Any:
        return self.portal.call(self.client.list_tools).tools


@contextlib.contextmanager
def connect(server: Any, errlog: TextIO | None = None) -> Iterator[Session]:
    """A client connected to `server` (StdioServerParameters, or a Transport); the server's
    log messages (opted in at warning) are collected in Session.logs, and a stdio server's
    stderr goes to `errlog` when given."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    if errlog is not None and isinstance(server, StdioServerParameters):
        server = stdio_client(server, errlog=errlog)
    logs: list[str] = []

    async def on_log(params: Any) -> None:
        logs.append(str(params.data))

    with start_blocking_portal() as portal, portal.wrap_async_context_manager(
            Client(server, log_level="warning", logging_callback=on_log)) as client:
        yield Session(portal, client, logs)


def wait_for(condition: Callable[[], Any], within: float, what: str) -> Any:
    """Poll until condition() is truthy; fail after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:.0f} s: {what}")
        time.sleep(0.2)
