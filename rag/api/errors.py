"""How failures become HTTP responses: RagError -> {"error", "hint", "type"} with a status
code, 422s that name the field, 401 for a missing bearer token; never a bare traceback.

Under /v1 (the OpenAI-compatible endpoints) the same information is wrapped the way OpenAI
clients expect: {"error": {"message", "type", "code", "param", "hint"}}.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag.api.models import MAX_MESSAGES, ErrorPublic, ValidationErrorPublic
from rag.errors import InputError, LLMError, RagError
from rag.schema import MAX_K, MAX_QUESTION

log = logging.getLogger("rag.api")


class NotFound(RagError):
    """Something the request names does not exist (404)."""


class Unauthorized(RagError):
    """No or the wrong bearer token (401)."""

    def __init__(self) -> None:
        super().__init__("missing or wrong API key",
                         "send the header `Authorization: Bearer <key>` with the server's RAG_API_KEY")


class UnknownModel(NotFound):
    pass


class PayloadTooLarge(InputError):
    """A request body over RAG_MAX_BODY_KB (413)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "send a smaller request, or raise RAG_MAX_BODY_KB on the server")


class ClientGone(Exception):
    """The client closed the connection before its answer was ready: nobody reads a reply."""


def status_of(exc: BaseException) -> int:
    if isinstance(exc, Unauthorized):
        return 401
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, PayloadTooLarge):
        return 413
    if isinstance(exc, InputError):
        return 400
    if isinstance(exc, LLMError):
        return 503
    return 500


def describe(exc: BaseException) -> tuple[str, str, str]:
    """(message, hint, type) for any exception; internals are summarised, never dumped."""
    if isinstance(exc, RagError):
        return exc.message, exc.hint, type(exc).__name__
    return (f"internal error: {type(exc).__name__}: {exc}",
            "this is a bug in rag; the server log has the details", "InternalError")


def is_openai(request: Request) -> bool:
    return request.url.path.startswith("/v1/")


def openai_error(message: str, hint: str, type_: str, status: int,
                 param: str | None = None) -> dict[str, Any]:
    kind = {400: "invalid_request_error", 401: "authentication_error", 404: "invalid_request_error",
            413: "invalid_request_error",
            422: "invalid_request_error", 503: "service_unavailable"}.get(status, "server_error")
    code = "model_not_found" if type_ == "UnknownModel" else type_
    return {"error": {"message": message, "type": kind, "code": code, "param": param, "hint": hint}}


def error_response(request: Request, exc: BaseException) -> JSONResponse:
    status = status_of(exc)
    message, hint, type_ = describe(exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if is_openai(request):
        body = openai_error(message, hint, type_, status, "model" if type_ == "UnknownModel" else None)
    else:
        body = ErrorPublic(error=message, hint=hint, type=type_).model_dump()
    return JSONResponse(body, status_code=status, headers=headers)


def _field(loc: Sequence[str | int]) -> str:
    parts = [str(p) for p in loc[1:]] if len(loc) > 1 and loc[0] in ("body", "query", "path") else [
        str(p) for p in loc]
    return ".".join(parts) or "body"


LIMITS_HINT = (f"limits: question 1..{MAX_QUESTION} characters, k 1..{MAX_K}, "
               f"1..{MAX_MESSAGES} messages ending with the user's question")


def validation_response(request: Request, errors: Sequence[Any]) -> JSONResponse:
    detail = [{"loc": [p if isinstance(p, int) else str(p) for p in e.get("loc", ())],
               "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))} for e in errors]
    fields = list(dict.fromkeys(_field(d["loc"]) for d in detail))
    message = "invalid request: " + "; ".join(f"{_field(d['loc'])}: {d['msg']}" for d in detail)
    if is_openai(request):  # OpenAI answers a malformed request with 400
        body = openai_error(message, LIMITS_HINT, "ValidationError", 400, fields[0] if fields else None)
        body["error"]["fields"] = fields
        body["detail"] = detail
        return JSONResponse(body, status_code=400)
    else:
        body = ValidationErrorPublic(error=message, hint=LIMITS_HINT, type="ValidationError",
                                     fields=fields, detail=detail).model_dump()  # type: ignore[arg-type]
    return JSONResponse(body, status_code=422)


def field_error(loc: tuple[str | int, ...], msg: str, type_: str = "value_error") -> RequestValidationError:
    """A 422 raised by an endpoint for a check the models cannot express."""
    return RequestValidationError([{"loc": loc, "msg": msg, "type": type_}])


def split_conversation(messages: Sequence[tuple[str, str]]) -> tuple[str, list[dict[str, str]]]:
    """(role, text) pairs of /chat or /v1/chat/completions: the last message is the question,
    earlier user/assistant turns are the history; errors name the offending message."""
    last = len(messages) - 1
    if messages[last][0] != "user":
        raise field_error(("body", "messages", last, "role"),
                          "the last message must be the user's question (role 'user')")
    question = messages[last][1]
    if not question.strip():
        raise field_error(("body", "messages", last, "content"), "the question is empty",
                          "string_too_short")
    if len(question) > MAX_QUESTION:
        raise field_error(("body", "messages", last, "content"),
                          f"the question is {len(question)} characters; at most {MAX_QUESTION}",
                          "string_too_long")
    history = [{"role": role, "content": text} for role, text in messages[:last]
               if role in ("user", "assistant")]
    return question, history


def install(app: FastAPI) -> None:
    async def on_rag_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request, exc)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return validation_response(request, exc.errors())

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            message, hint = f"no such endpoint: {request.url.path}", "the endpoints are listed at /docs"
        elif exc.status_code == 405:
            message, hint = f"{request.method} is not allowed on {request.url.path}", "see /docs"
        else:
            message, hint = str(exc.detail), ""
        if is_openai(request):
            body = openai_error(message, hint, "HTTPError", exc.status_code)
        else:
            body = ErrorPublic(error=message, hint=hint, type="HTTPError").model_dump()
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    async def on_client_gone(request: Request, exc: Exception) -> Response:
        return Response(status_code=499)  # nginx's "client closed request"; nobody reads it

    app.add_exception_handler(ClientGone, on_client_gone)
    app.add_exception_handler(RagError, on_rag_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    # Anything else: a JSON 500 (Starlette still logs the traceback to the server log).
    app.add_exception_handler(Exception, on_rag_error)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorPublic, "description": "Bad input (InputError)."},
    401: {"model": ErrorPublic, "description": "RAG_API_KEY is set and the bearer token is missing or wrong."},
    422: {"model": ValidationErrorPublic, "description": "A limit is broken; `fields` names the field."},
    500: {"model": ErrorPublic, "description": "Unexpected failure (index problem or bug)."},
    503: {"model": ErrorPublic, "description": "Ollama unavailable, model missing, timeout or broken stream."},
}
