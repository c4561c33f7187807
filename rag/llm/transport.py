"""httpx's transport as the guarded calls need it (rag.llm.guard): apart, so that importing the
guard (every answer's deadline) costs no httpx import for an offline answer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from rag.llm.guard import MAX_REPLY_BYTES, ReplyTooLarge, _trace


class _Counted(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, server: str, limit: int) -> None:
        self.inner, self.server, self.limit = inner, server, limit

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        for chunk in self.inner:
            seen += len(chunk)
            if seen > self.limit:
                raise ReplyTooLarge(self.server, self.limit)
            yield chunk

    def close(self) -> None:
        self.inner.close()


class Transport(httpx.BaseTransport):
    """httpx's transport with no kept-alive connections (each call's socket is its own, so
    that giving up on a call can shut it down) and at most `limit` bytes read per reply."""

    def __init__(self, server: str, limit: int = MAX_REPLY_BYTES, **kwargs: Any) -> None:
        self.server, self.limit = server, limit
        self.inner = httpx.HTTPTransport(limits=httpx.Limits(max_keepalive_connections=0), **kwargs)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.extensions = {**request.extensions, "trace": _trace}
        response = self.inner.handle_request(request)
        stream = response.stream
        assert isinstance(stream, httpx.SyncByteStream)
        response.stream = _Counted(stream, self.server, self.limit)
        return response

    def close(self) -> None:
        self.inner.close()
