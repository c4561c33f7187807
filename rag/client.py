"""A thin HTTP client for a running `rag serve`, used by the CLI when RAG_SERVER_URL is set.

`remote_search` and `remote_ask` return exactly the objects `rag search --json` and
`rag ask --json` print locally, from the index the server serves (naming another is an
error). The server's errors come back as the same RagError classes (so the CLI's exit codes
match), and a server that cannot be reached, or is not `rag serve`, is an IndexStoreError (exit
3, as an unreachable Chroma server) with a hint.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from rag import errors as rag_errors
from rag.errors import IndexStoreError, InputError, LLMError, RagError

if TYPE_CHECKING:
    from rag.schema import AskOptions

CONNECT_TIMEOUT = 5.0
# The server enforces its own Ollama timeout and answers with an error; the client only needs
# to outwait it.
ASK_TIMEOUT = 600.0


@dataclass(frozen=True)
class Remote:
    """The running `rag serve` to call: RAG_SERVER_URL and RAG_API_KEY, read straight from the
    environment, because importing rag.config (pydantic-settings) would be a third of a thin
    client's start-up."""

    url: str
    api_key: str | None = None

    @classmethod
    def from_env(cls) -> Remote | None:
        url = os.environ.get("RAG_SERVER_URL", "").strip()
        return cls(url, os.environ.get("RAG_API_KEY") or None) if url else None

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


def _error_from(resp: httpx.Response, url: str) -> RagError:
    """The RagError a non-2xx response stands for (same class as the server raised)."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        message, hint, name = body["error"], str(body.get("hint") or ""), str(body.get("type") or "")
    else:
        message, hint, name = f"the rag server at {url} answered {resp.status_code}", "", ""
    if resp.status_code == 401:
        return InputError(message, "set RAG_API_KEY to the server's key")
    cls = getattr(rag_errors, name, None)
    if isinstance(cls, type) and issubclass(cls, RagError) and cls.__init__ is RagError.__init__:
        return cls(message, hint)
    if resp.status_code in (400, 404, 422):
        return InputError(message, hint)
    if resp.status_code == 503:
        return LLMError(message, hint)
    return RagError(message, hint)


def _request(remote: Remote, method: str, path: str, *, read_timeout: float,
             **kwargs: Any) -> dict[str, Any]:
    base = remote.url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise InputError(f"RAG_SERVER_URL {remote.url!r} is not an http(s) URL",
                         "set it like http://127.0.0.1:8000, or unset it to work locally")
    url = base + path
    timeout = httpx.Timeout(read_timeout, connect=CONNECT_TIMEOUT)
    # A plain-http server needs no TLS context: building one loads the CA bundle (~90 ms).
    verify = base.startswith("https://")
    try:
        with httpx.Client(timeout=timeout, headers=remote.headers(), verify=verify) as client:
            resp = client.request(method, url, **kwargs)
    except httpx.InvalidURL as exc:
        raise InputError(f"RAG_SERVER_URL {remote.url!r} is not a usable URL ({exc})",
                         "set it like http://127.0.0.1:8000, or unset it to work locally") from None
    # The server that holds the index cannot be reached: an index problem (exit 3), as an
    # unreachable Chroma server is, not a bug in rag (exit 1).
    except httpx.ConnectError as exc:
        raise IndexStoreError(f"cannot connect to the rag server at {base} ({exc})",
                              "start it with `rag serve`, or unset RAG_SERVER_URL to work locally") from exc
    except httpx.TimeoutException as exc:
        raise IndexStoreError(f"the rag server at {base} did not answer within {read_timeout:.0f} s",
                              "check the server's log; unset RAG_SERVER_URL to work locally") from exc
    except httpx.HTTPError as exc:
        raise IndexStoreError(f"talking to the rag server at {base} failed: {exc}",
                              "check RAG_SERVER_URL and the server's log") from exc
    if resp.status_code >= 400:
        raise _error_from(resp, base)
    try:
        data = resp.json()
    except ValueError as exc:
        raise IndexStoreError(f"the server at {base} did not answer with JSON",
                              "is RAG_SERVER_URL pointing at `rag serve`?") from exc
    if not isinstance(data, dict):
        raise IndexStoreError(f"the server at {base} sent an unexpected answer",
                              "is RAG_SERVER_URL pointing at `rag serve`?")
    return data


def check_index(remote: Remote, index: str | None) -> None:
    """A server answers from the one index it serves: an index named here (`--index`, or
    RAG_INDEX) that is another is refused, never answered from the server's."""
    wanted = index or os.environ.get("RAG_INDEX", "").strip()
    if not wanted:
        return
    served = _request(remote, "GET", "/health", read_timeout=60.0).get("index")
    if served != wanted:
        raise InputError(
            f"the rag server at {remote.url.rstrip('/')} serves the index '{served}', not '{wanted}'",
            f"start a server on it (`rag serve --index {wanted}`) and point RAG_SERVER_URL at it, "
            "or unset RAG_SERVER_URL to read it here")


def remote_search(remote: Remote, query: str, k: int, venue: str | None = None,
                  year: str | int | None = None, source: str | None = None,
                  category: str | None = None, index: str | None = None,
                  author: str | None = None) -> dict[str, Any]:
    """GET /search: the object `rag search --json` prints."""
    check_index(remote, index)
    given = {"venue": venue, "year": year, "source": source, "category": category, "author": author}
    params = {"q": query, "k": k, **{k: v for k, v in given.items() if v not in (None, "")}}
    return _request(remote, "GET", "/search", params=params, read_timeout=60.0)


def remote_ask(remote: Remote, question: str, options: AskOptions,
               export: str | None = None, index: str | None = None) -> dict[str, Any]:
    """POST /ask with the same options object: the object `rag ask --json` prints (with the
    cited papers in `export` format when asked)."""
    check_index(remote, index)
    body = {"question": question, **options.for_request(), **({"export": export} if export else {})}
    return _request(remote, "POST", "/ask", json=body, read_timeout=ASK_TIMEOUT)
