"""`rag mcp`'s transport: the MCP SDK's stdio transport, with an answer for every line of
stdin that is no JSON-RPC message (the SDK hands such a line on as an exception and its
dispatcher drops it, so the client waited for its own timeout; over HTTP the SDK answers)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

from rag.mcp.results import one_line

log = logging.getLogger("rag.mcp")


def unreadable_reply(exc: Exception) -> JSONRPCError | None:
    """The JSON-RPC error for a line of stdin the SDK could not read as a message (it hands
    the exception on, and its dispatcher drops it: the client waited for its own timeout).
    Not JSON: -32700; JSON but no JSON-RPC message: -32600; with the line's id when it has
    one (a lone surrogate, valid to Python's json, fails the SDK's parser), else null.
    None for a blank line, which is no message at all."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    line = next((e["input"] for e in errors if e["type"] == "json_invalid"), None)
    if isinstance(line, str) and not line.strip():
        return None
    parsed: Any = None
    if isinstance(line, str):
        with contextlib.suppress(ValueError, RecursionError):
            parsed = json.loads(line)
    else:
        parsed = next((e["input"] for e in errors if isinstance(e["input"], dict)), None)
    ident = parsed.get("id") if isinstance(parsed, dict) else None
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        ident = None
    if line is not None:
        problem = errors[0]["msg"] if errors else str(exc)
        error = ErrorData(code=PARSE_ERROR, message=f"Parse error: {one_line(problem, 300)}")
    else:
        error = ErrorData(code=INVALID_REQUEST, message="Invalid request: not a JSON-RPC 2.0 "
                          "request, notification or response")
    return JSONRPCError(jsonrpc="2.0", id=ident, error=error)


async def serve(lowlevel: Any) -> None:
    """Serve the SDK's low-level server over stdin/stdout until stdin closes; each unreadable
    line is answered (unreadable_reply) and said on stderr."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        relay_send, relay_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            async with relay_send:
                async for item in read:
                    if not isinstance(item, Exception):
                        await relay_send.send(item)
                    elif (reply := unreadable_reply(item)) is not None:
                        log.warning("stdin: %s (answered %d)", reply.error.message,
                                    reply.error.code)
                        with contextlib.suppress(anyio.ClosedResourceError):
                            await write.send(SessionMessage(reply))

        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            await lowlevel.run(relay_receive, write, lowlevel.create_initialization_options())
            tg.cancel_scope.cancel()


def run_stdio(server: Any, *background: Callable[[], Any]) -> None:
    """Serve over stdin/stdout until the client closes it; `background` coroutines (the
    folder watcher) run beside it and stop with it."""

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for job in background:
                tg.start_soon(job)
            await server.run_stdio_async()
            tg.cancel_scope.cancel()

    anyio.run(main)
