"""Typed dependencies of the routes: settings, the pipeline, the thread pools, the API key.

Tests replace any of them with `app.dependency_overrides[get_pipeline] = ...`.
"""

from __future__ import annotations

import json
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from rag.answering import Pipeline
from rag.api.errors import Unauthorized, field_error
from rag.config import Settings


def get_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


def get_pipeline(request: Request) -> Pipeline:
    return request.app.state.pipeline  # type: ignore[no-any-return]


def get_executor(request: Request) -> ThreadPoolExecutor:
    """The pool for answering and searching (CPU-bound, or waiting on Ollama)."""
    return request.app.state.executor  # type: ignore[no-any-return]


def get_light_executor(request: Request) -> ThreadPoolExecutor:
    """A separate small pool for quick lookups, so /health answers even under load."""
    return request.app.state.light_executor  # type: ignore[no-any-return]


def get_export_executor(request: Request) -> ThreadPoolExecutor:
    """The pool citation exports are written in, apart from the other two."""
    return request.app.state.export_executor  # type: ignore[no-any-return]


SettingsDep = Annotated[Settings, Depends(get_settings)]
PipelineDep = Annotated[Pipeline, Depends(get_pipeline)]
ExecutorDep = Annotated[ThreadPoolExecutor, Depends(get_executor)]
LightExecutorDep = Annotated[ThreadPoolExecutor, Depends(get_light_executor)]
ExportExecutorDep = Annotated[ThreadPoolExecutor, Depends(get_export_executor)]

_bearer = HTTPBearer(auto_error=False, description="The server's RAG_API_KEY (only when it sets one).")


async def require_key(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    if not settings.api_key:
        return
    given = credentials.credentials if credentials else ""
    if not secrets.compare_digest(given.encode(), settings.api_key.encode()):
        raise Unauthorized()


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _lone_surrogate(value: Any, loc: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return loc
    elif isinstance(value, dict):
        for k, v in value.items():
            if found := _lone_surrogate(v, (*loc, k)):
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if found := _lone_surrogate(v, (*loc, i)):
                return found
    return None


async def valid_unicode(request: Request) -> None:
    """JSON can spell half of a UTF-16 pair ("\\ud83d"), which is no text: the fields typed as
    a union of a string and something else let it through to the tokenizer, which raised a
    TypeError (a 500). It is bad input: a 422 naming the field."""
    if request.method != "POST":
        return
    body = await request.body()  # FastAPI has read it already; this is its cached copy
    if not _SURROGATE_ESCAPE.search(body):
        return
    try:
        data = json.loads(body)
    except ValueError:
        return  # not JSON: the body's own validation says so
    loc = _lone_surrogate(data, ("body",))
    if loc:
        raise field_error(loc, "the text holds a lone UTF-16 surrogate, which is not valid Unicode",
                          "string_unicode")


PROTECTED = [Depends(require_key), Depends(valid_unicode)]
