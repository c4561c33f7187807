"""Request guards that must run before a route reads the body (pure ASGI, so nothing is
buffered first): the Host check against DNS rebinding, the API key before the body, and a
stalled body dropped. The body size itself is FastAPI's own `max_body_size` (create_app)."""

from __future__ import annotations

import asyncio
import secrets

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag.api.errors import Unauthorized, error_response
from rag.config import Settings
from rag.errors import InputError

BODY_STALL_S = 30.0  # a client that sends no body bytes for this long is dropped (slowloris)
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
PUBLIC_PREFIXES = ("/health", "/static/", "/docs", "/openapi.json")


def host_of(header: str) -> str:
    """`example.org:8000` -> example.org, `[::1]:8000` -> ::1."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def allowed_hosts(settings: Settings) -> frozenset[str]:
    extra = {host_of(h) for h in (settings.allowed_hosts or "").split(",") if h.strip()}
    return LOCAL_HOSTS | extra


class RequestGuards:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.hosts = allowed_hosts(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        problem: Exception | None = None
        if not self.settings.api_key and not self._host_ok(scope, request):
            # Without a key, a page on another site could reach this server through a DNS name
            # rebound to 127.0.0.1; its requests carry that name in Host.
            problem = InputError(f"Host {request.headers.get('host', '')!r} is not served here",
                                 "use http://127.0.0.1, or add the name to RAG_ALLOWED_HOSTS")
        elif self.settings.api_key and self._needs_key(request) and not self._key_ok(request):
            problem = Unauthorized()  # said before a byte of the body is read
        if problem is not None:
            await error_response(request, problem)(scope, receive, send)
            return
        await self.app(scope, _stall_guard(receive), send)

    def _host_ok(self, scope: Scope, request: Request) -> bool:
        if "*" in self.hosts:
            return True
        host = host_of(request.headers.get("host", ""))
        server = scope.get("server")
        # the address the connection came in on (the host `rag serve` binds, or its IP)
        return host in self.hosts or (server is not None and host == str(server[0]).lower())

    def _needs_key(self, request: Request) -> bool:
        path = request.url.path
        return request.method != "OPTIONS" and path != "/" and not path.startswith(PUBLIC_PREFIXES)

    def _key_ok(self, request: Request) -> bool:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        key = self.settings.api_key or ""
        return scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(), key.encode())


def _stall_guard(receive: Receive) -> Receive:
    """Only while the body arrives: afterwards receive() waits for a disconnect (streaming
    responses listen for it) and may rightly wait for minutes."""
    done = False

    async def guarded() -> Message:
        nonlocal done
        if done:
            return await receive()
        try:
            message = await asyncio.wait_for(receive(), BODY_STALL_S)
        except TimeoutError:
            raise HTTPException(408, f"no request body bytes for {BODY_STALL_S:.0f} s") from None
        done = message["type"] != "http.request" or not message.get("more_body", False)
        return message

    return guarded
