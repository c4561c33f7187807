"""The MCP server at `/mcp` of `rag serve` (streamable HTTP), over the app's own pipeline.

It sits behind the app's request guards like every endpoint: the RAG_API_KEY bearer check
(before the body is read), the Host check against DNS rebinding and, here, the Origin check
the MCP specification asks for; so the SDK's own Host and Origin check is off (it would
refuse the names RAG_ALLOWED_HOSTS lets in). Sessions end after RAG_MCP_SESSION_IDLE_S
without a request, and at most RAG_MCP_MAX_SESSIONS are open at once (the SDK's own limits).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from rag.config import Settings
from rag.schema import AskOptions

PATH = "/mcp"


class _Current:
    """The ASGI app of the running session manager (a new one for every app start-up: the
    SDK's manager runs once)."""

    def __init__(self) -> None:
        self.app: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def mount(app: Any, settings: Settings) -> Callable[[], AbstractAsyncContextManager[None]]:
    """Add the /mcp route to the FastAPI app; returns what its lifespan must enter (after the
    pipeline is loaded) for the route to serve."""
    from mcp.server.transport_security import TransportSecuritySettings

    from rag.mcp.server import build
    from rag.mcp.tools import RagTools

    tools = RagTools(settings, lambda: app.state.pipeline, AskOptions())
    server = build(tools)
    current = _Current()
    app.router.routes.append(Route(PATH, endpoint=current, methods=["GET", "POST", "DELETE"],
                                   include_in_schema=False))

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        current.app = server.streamable_http_app(
            streamable_http_path=PATH,
            # the SDK checks Host and Origin together, against exact names: rag's guards
            # (rag.api.limits) check both as every endpoint's Host is checked
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            session_idle_timeout=settings.mcp_session_idle_s,
            max_sessions=settings.mcp_max_sessions)
        try:
            async with server.session_manager.run():
                yield
        finally:
            tools.close()

    return running
