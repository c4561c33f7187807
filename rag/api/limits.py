"""Request guards that must run before a route reads the body (pure ASGI, so nothing is
buffered first): the Host check against DNS rebinding, the Origin of a request to /mcp, the
API key before the body, a stalled body dropped, and the body size (a Content-Length over
RAG_MAX_BODY_KB refused before the body is read, a body without one as it grows past it).
FastAPI's own `max_body_size` answered the first case in text/plain, the second in JSON: here
both are JSON errors."""

from __future__ import annotations

import asyncio
import re
import secrets
from urllib.parse import urlsplit

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag.api.errors import Forbidden, PayloadTooLarge, Unauthorized, error_response
from rag.config import Settings
from rag.errors import InputError
from rag.mcp.http import PATH as MCP_PATH

BODY_STALL_S = 30.0  # a client that sends no body bytes for this long is dropped (slowloris)
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
PUBLIC_PREFIXES = ("/health", "/static/", "/docs", "/openapi.json")


# A Host header is a name or an IP (IPv6 in brackets) and an optional port: nothing else
# ("localhost:80@evil.com" is no host, and must not pass as localhost).
_HOST = re.compile(r"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9._-]+))(?::\d{1,5})?")


def host_of(header: str) -> str:
    """`example.org:8000` -> example.org, `[::1]:8000` -> ::1; "" for a malformed header."""
    m = _HOST.fullmatch(header.strip().lower())
    return (m.group("v6") or m.group("name")) if m else ""


def allowed_hosts(settings: Settings) -> frozenset[str]:
    extra = {host_of(h) for h in (settings.allowed_hosts or "").split(",") if h.strip()}
    return LOCAL_HOSTS | extra


class RequestGuards:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.hosts = allowed_hosts(settings)
        self.origins = {o.strip().rstrip("/").lower()
                        for o in (settings.cors_origins or "").split(",") if o.strip()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        problem: Exception | None = None
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.settings.max_body_kb * 1024:
            # said here, as JSON like every other error, before the body is read
            problem = PayloadTooLarge(f"the request body is {int(length):,} bytes; the limit is "
                                      f"{self.settings.max_body_kb * 1024:,} (RAG_MAX_BODY_KB)")
        elif not self.settings.api_key and not self._host_ok(scope, request):
            # Without a key, a page on another site could reach this server through a DNS name
            # rebound to 127.0.0.1; its requests carry that name in Host.
            problem = InputError(f"Host {request.headers.get('host', '')!r} is not served here",
                                 "use http://127.0.0.1, or add the name to RAG_ALLOWED_HOSTS")
        elif request.url.path.rstrip("/") == MCP_PATH and not self._origin_ok(scope, request):
            # The MCP specification asks servers to validate Origin: a page on another site
            # may send requests to a server on this machine, with or without a key set.
            problem = Forbidden(f"Origin {request.headers.get('origin', '')!r} may not use /mcp",
                                "add the page's origin to RAG_CORS_ORIGINS, or its host to "
                                "RAG_ALLOWED_HOSTS")
        elif self.settings.api_key and self._needs_key(request) and not self._key_ok(request):
            problem = Unauthorized()  # said before a byte of the body is read
        if problem is not None:
            await error_response(request, problem)(scope, receive, send)
            return
        await self.app(scope, _stall_guard(receive, self.settings.max_body_kb * 1024), send)

    def _host_ok(self, scope: Scope, request: Request) -> bool:
        if "*" in self.hosts:
            return True
        given = [v for k, v in scope.get("headers", []) if k == b"host"]
        if len(given) > 1:
            return False  # two Host headers: which one a proxy used is anyone's guess
        host = host_of(request.headers.get("host", ""))
        if not host:
            return False
        server = scope.get("server")
        # the address the connection came in on (the host `rag serve` binds, or its IP)
        return host in self.hosts or (server is not None and host == str(server[0]).lower())

    def _origin_ok(self, scope: Scope, request: Request) -> bool:
        """No Origin (a client that is no browser), an origin of RAG_CORS_ORIGINS, or a page
        served from a host the Host check answers (localhost, this server's own address, a
        name of RAG_ALLOWED_HOSTS, but not `*`: that one lets any Host in, not any site)."""
        origins = [v for k, v in scope.get("headers", []) if k == b"origin"]
        if not origins:
            return True
        if len(origins) > 1:
            return False
        origin = request.headers["origin"].strip().rstrip("/").lower()
        if origin in self.origins or "*" in self.origins:
            return True
        try:
            parts = urlsplit(origin)
            host = host_of(parts.netloc) if parts.scheme in ("http", "https") else ""
        except ValueError:
            return False
        server = scope.get("server")
        return bool(host) and (host in self.hosts or (server is not None and host == str(server[0]).lower()))

    def _needs_key(self, request: Request) -> bool:
        path = request.url.path
        return request.method != "OPTIONS" and path != "/" and not path.startswith(PUBLIC_PREFIXES)

    def _key_ok(self, request: Request) -> bool:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        key = self.settings.api_key or ""
        return scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(), key.encode())


def _stall_guard(receive: Receive, max_bytes: int) -> Receive:
    """Only while the body arrives: afterwards receive() waits for a disconnect (streaming
    responses listen for it) and may rightly wait for minutes. A body (sent without a
    Content-Length) that grows past max_bytes is refused as it arrives."""
    done = False
    size = 0

    async def guarded() -> Message:
        nonlocal done, size
        if done:
            return await receive()
        try:
            message = await asyncio.wait_for(receive(), BODY_STALL_S)
        except TimeoutError:
            raise HTTPException(408, f"no request body bytes for {BODY_STALL_S:.0f} s") from None
        size += len(message.get("body", b""))
        if size > max_bytes:
            raise HTTPException(413, f"the request body is over the limit of {max_bytes:,} bytes "
                                "(RAG_MAX_BODY_KB)")
        done = message["type"] != "http.request" or not message.get("more_body", False)
        return message

    return guarded
