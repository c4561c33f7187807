"""How failures become HTTP responses: RagError -> {"error", "hint", "type"} with a status
code, 422s that name the field, 401 for a missing bearer token; never a bare traceback.

Under /v1 (the OpenAI-compatible endpoints) the same information is wrapped the way OpenAI
clients expect: {"error": {"message", "type", "code", "param", "hint"}}.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag.api.models import (
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES,
    MAX_TOTAL_CHARS,
    AskRequest,
    ChatMessage,
    ChatRequest,
    ErrorPublic,
    ValidationErrorPublic,
    _Filters,
)
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


class Forbidden(RagError):
    """A request from a web page the server does not serve (403)."""


class UnknownModel(NotFound):
    pass


class PayloadTooLarge(InputError):
    """A request body over RAG_MAX_BODY_KB (413)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "send a smaller request, or raise RAG_MAX_BODY_KB on the server")


class InvalidJSON(InputError):
    """A body that is no JSON object sent as JSON (400): not JSON at all, not UTF-8, nested
    too deep, or sent without `Content-Type: application/json`."""


class BodyTimeout(InputError):
    """A body that stalled (408)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "send the whole body without pausing")


class ClientGone(Exception):
    """The client closed the connection before its answer was ready: nobody reads a reply."""


def status_of(exc: BaseException) -> int:
    if isinstance(exc, Unauthorized):
        return 401
    if isinstance(exc, Forbidden):
        return 403
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, PayloadTooLarge):
        return 413
    if isinstance(exc, BodyTimeout):
        return 408
    if isinstance(exc, InputError):
        return 400
    if isinstance(exc, LLMError):
        return 503
    return 500


# The pipeline's hints name the command line's options; over HTTP the request says the same.
_CLI_OPTIONS = [(re.compile(r"\buse --llm none\b"), 'send "llm": "none"', 'use the model "rag-offline"'),
                (re.compile(r"\bwith --model\b"), 'with "model"', 'with the model "rag:<name>"')]


def in_request_terms(text: str, openai: bool = False) -> str:
    """A hint, or a notice quoting one, as an HTTP client (of /v1 when `openai`) acts on it."""
    for option, field, model in _CLI_OPTIONS:
        text = option.sub(model if openai else field, text)
    return text


def describe(exc: BaseException, openai: bool = False) -> tuple[str, str, str]:
    """(message, hint, type) for any exception, the hint as an HTTP client (of /v1 when
    `openai`) acts on it; internals are summarised, never dumped."""
    if isinstance(exc, RagError):
        return exc.message, in_request_terms(exc.hint, openai), type(exc).__name__
    # No path of the server's files (a traceback's, an OSError's) goes out in a reply.
    said = _PATH.sub("<path>", " ".join(str(exc).split()))[:200]
    return (f"internal error: {type(exc).__name__}: {said}",
            "this is a bug in rag; the server log has the details", "InternalError")


_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.@+~-]+){2,}[/\\]?")


def is_openai(request: Request) -> bool:
    return request.url.path.startswith("/v1/")


def openai_error(message: str, hint: str, type_: str, status: int,
                 param: str | None = None) -> dict[str, Any]:
    kind = ("authentication_error" if status == 401 else "service_unavailable" if status == 503
            else "invalid_request_error" if 400 <= status < 500 else "server_error")  # OpenAI's names
    code = "model_not_found" if type_ == "UnknownModel" else type_
    return {"error": {"message": message, "type": kind, "code": code, "param": param, "hint": hint}}


def error_response(request: Request, exc: BaseException) -> JSONResponse:
    status = status_of(exc)
    message, hint, type_ = describe(exc, is_openai(request))
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if is_openai(request):
        body = openai_error(message, hint, type_, status, "model" if type_ == "UnknownModel" else None)
    else:
        body = ErrorPublic(error=message, hint=hint, type=type_).model_dump()
    return JSONResponse(body, status_code=status, headers=headers)


# pydantic puts the member of a union it tried into the location (year.str, year.int,
# messages.0.content.list[OpenAIContentPart]): no field the client sent, so left out of it.
_UNION_MEMBER = re.compile(r"str|int|float|bool|bytes|none|[\w-]+\[.*\]")


def _loc(error: Any) -> list[str | int]:
    loc = [p if isinstance(p, int) else str(p) for p in error.get("loc", ())]
    own = len(loc) - 1 if error.get("type") == "extra_forbidden" else -1  # the client's key
    return [p for i, p in enumerate(loc)
            if isinstance(p, int) or i == own or not _UNION_MEMBER.fullmatch(p)]


def _field(loc: Sequence[str | int]) -> str:
    parts = [str(p) for p in loc[1:]] if len(loc) > 1 and loc[0] in ("body", "query", "path") else [
        str(p) for p in loc]
    return ".".join(parts) or "body"


QUESTION_HINT = f"a question is 1..{MAX_QUESTION} characters, not only spaces"
# What to do about a field, by its name (the last part of its location).
FIELD_HINTS = {
    "question": QUESTION_HINT, "q": QUESTION_HINT,
    "k": f"k is a whole number from 1 to {MAX_K}",
    "year": "year is a year or a range: 2023, \"2022-2023\", \"2022-\", \"-2023\"",
    # an empty filter, or one too long: what to give instead
    "venue": "venue is text the venue or journal ref contains (MLSys), at most 200 characters; "
             "leave it out to keep every paper",
    "source": "source is part of a source file's path, at most 500 characters; leave it out to keep every paper",
    "category": "category is an arXiv category (cs.DC, or cs for every cs.*), at most 100 characters; "
                "leave it out to keep every paper",
    "author": "author is a surname or full name (Hwang, Changho Hwang, C. Hwang), at most 200 "
              "characters; leave it out to keep every paper",
    "role": "role is user, assistant or system, and the last message is the user's question",
    "content": f"a message is at most {MAX_MESSAGE_CHARS:,} characters, the last one (the "
               f"question) 1..{MAX_QUESTION}; all of them at most {MAX_TOTAL_CHARS:,} together",
    "body": "send one JSON object with `Content-Type: application/json` (see /docs)",
}
# The fields of each request body, for the hint of one that is not among them.
_BODY_FIELDS: dict[str, type[BaseModel]] = {"/ask": AskRequest, "/chat": ChatRequest,
                                            "filters": _Filters, "messages": ChatMessage}


def _hint(request: Request, error: dict[str, Any]) -> str:
    """What to do about the first bad field: its own limits, its accepted values, or the
    fields there are."""
    loc, kind = error["loc"], error["type"]
    if kind == "extra_forbidden" and not is_openai(request):
        parent = next((str(p) for p in reversed(loc[1:-1]) if isinstance(p, str)), request.url.path)
        if model := _BODY_FIELDS.get(parent):
            return f"the fields{' of ' + parent if parent in ('filters', 'messages') else ''} are: " \
                   f"{', '.join(model.model_fields)}"
    name = str(loc[-1]) if loc else "body"
    if name == "content" and "question" in error["msg"]:  # the last message
        return QUESTION_HINT
    if name == "body" and "characters together" in error["msg"]:  # all messages' lengths
        return FIELD_HINTS["content"]
    if name == "content" and is_openai(request):
        return 'content is text or a list of parts [{"type": "text", "text": "..."}]; ' + FIELD_HINTS[name]
    if name == "messages":
        return ("at least one message, the last the user's question" if is_openai(request)
                else f"1..{MAX_MESSAGES} messages, the last the user's question")
    if isinstance(loc[-1], int) and len(loc) > 1 and loc[-2] == "messages":
        return 'each message is an object {"role": "user", "content": "..."}'
    if name == "model":
        return ("model is 'rag', 'rag-offline' or 'rag:<ollama model>' (GET /v1/models lists them)"
                if is_openai(request) else "model is the name of an Ollama model, e.g. llama3.2")
    if name in FIELD_HINTS:
        return FIELD_HINTS[name]
    if kind in ("bool_type", "bool_parsing"):
        return f"{_field(loc)} is true or false"
    if kind == "literal_error" and error.get("expected"):
        return f"{_field(loc)} is one of {error['expected']}"
    return f"see {request.method} {request.url.path} at /docs"


def validation_response(request: Request, errors: Sequence[Any]) -> JSONResponse:
    detail = [{"loc": _loc(e), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
              for e in errors]
    fields = list(dict.fromkeys(_field(d["loc"]) for d in detail))
    message = "invalid request: " + "; ".join(f"{_field(d['loc'])}: {d['msg']}" for d in detail)
    hint = _hint(request, {**detail[0], "expected": (errors[0].get("ctx") or {}).get("expected")}) \
        if detail else ""
    if is_openai(request):  # OpenAI answers a malformed request with 400
        body = openai_error(message, hint, "ValidationError", 400, fields[0] if fields else None)
        body["error"]["fields"] = fields
        body["detail"] = detail
        return JSONResponse(body, status_code=400)
    else:
        body = ValidationErrorPublic(error=message, hint=hint, type="ValidationError",
                                     fields=fields, detail=detail).model_dump()  # type: ignore[arg-type]
    return JSONResponse(body, status_code=422)


def unreadable_body(request: Request, exc: Exception) -> InvalidJSON | None:
    """The body is no JSON object that the fields could be read from: said as such, not as
    the field-by-field 422 (which named a character offset as the field, or "a valid
    dictionary" for JSON sent as text/plain). FastAPI raises a RequestValidationError for
    bad JSON, keeps a body not sent as JSON as bytes, and answers a 400 for the rest."""
    how = f"send one JSON object with `Content-Type: application/json` (see {request.url.path} at /docs)"
    if isinstance(exc, RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        loc = tuple(first.get("loc", ()))
        if first.get("type") == "json_invalid":
            where = json.JSONDecodeError((first.get("ctx") or {}).get("error", "JSON decode error"),
                                         exc.body if isinstance(exc.body, str) else "",
                                         loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0)
            return InvalidJSON(f"the body is not valid JSON: {where}", how)
        if loc == ("body",) and isinstance(first.get("input"), bytes):
            given = request.headers.get("content-type")
            return InvalidJSON("the body was not sent as JSON: it needs the header "
                               "`Content-Type: application/json` "
                               f"({f'it came as {given!r}' if given else 'it came without one'})", how)
        return None
    cause = exc.__cause__
    if isinstance(cause, UnicodeDecodeError):
        return InvalidJSON(f"the body is not valid JSON: it is not UTF-8 text (byte "
                           f"{cause.object[cause.start]:#04x} at position {cause.start})",
                           "send the JSON encoded as UTF-8")
    if isinstance(cause, RecursionError):
        return InvalidJSON("the body nests arrays or objects too deep to be read as JSON", how)
    return None


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
        if problem := unreadable_body(request, exc):
            return error_response(request, problem)
        return validation_response(request, exc.errors())

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        # the body guards (rag.api.limits) raise these while the body is read
        problem = (PayloadTooLarge(str(exc.detail)) if exc.status_code == 413
                   else BodyTimeout(str(exc.detail)) if exc.status_code == 408
                   else unreadable_body(request, exc) if exc.status_code == 400 else None)
        if problem is not None:
            return error_response(request, problem)
        if exc.status_code == 404:
            message, hint = f"no such endpoint: {request.url.path}", "the endpoints are listed at /docs"
            if request.url.path.rstrip("/").endswith(("/chat/completions", "/models")):
                # an OpenAI client whose base URL lacks /v1 (or has it twice)
                hint = f"an OpenAI client's base URL is {request.base_url}v1 (with /v1 once); {hint}"
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

    app.add_middleware(_Unhandled, handler=on_rag_error)
    app.add_exception_handler(ClientGone, on_client_gone)
    app.add_exception_handler(RagError, on_rag_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    # Anything else: a JSON 500 (Starlette still logs the traceback to the server log).
    app.add_exception_handler(Exception, on_rag_error)


class _Unhandled:
    """An exception no handler took becomes rag's JSON 500 here, inside the CORS middleware
    (install() adds this before any other), so a page of an allowed origin reads the error
    instead of a CORS failure. Starlette answers such exceptions in its outermost middleware,
    past CORS, whose headers the 500 then lacks; a handler cannot be moved there, so this
    small ASGI wrapper does it. The traceback still goes to the server log."""

    def __init__(self, app: Any, handler: Any) -> None:
        self.app, self.handler = app, handler

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if started:  # a streamed response already begun: nothing to answer with
                raise
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            response = await self.handler(Request(scope, receive), exc)
            await response(scope, receive, send)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorPublic, "description": "Bad input (InputError), or a body that is no JSON "
                                               "object sent as JSON (InvalidJSON)."},
    401: {"model": ErrorPublic, "description": "RAG_API_KEY is set and the bearer token is missing or wrong."},
    422: {"model": ValidationErrorPublic, "description": "A limit is broken; `fields` names the field."},
    500: {"model": ErrorPublic, "description": "Unexpected failure (index problem or bug)."},
    503: {"model": ErrorPublic, "description": "Ollama unavailable, model missing, timeout or broken stream."},
}
