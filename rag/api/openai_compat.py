"""OpenAI-compatible endpoints, so chat clients and UIs can use rag as a model.

Models: "rag" (the server's default answerer: Ollama when it runs, else offline),
"rag-offline" (the extractive answerer, no LLM) and "rag:<ollama model>" (that Ollama model).
The message text carries the [n] citation markers and a reference list; the cited papers are
also in the extra field `references` (on the response, or on the last chunk when streaming).
"""

from __future__ import annotations

import json
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from rag.answer import reference_lines_json
from rag.api.errors import UnknownModel, describe, openai_error, split_conversation, status_of
from rag.api.models import (
    ChatCompletionPublic,
    ChatCompletionRequest,
    ModelListPublic,
)
from rag.api.streaming import (
    MarkerRenumberer,
    added_lines,
    answer_events,
    incomplete_event,
    run_blocking,
    same_text,
)
from rag.retrieve import Filters

router = APIRouter(prefix="/v1", tags=["openai-compatible"])
STARTED = int(time.time())
OPENAI_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": desc, "content": {"application/json": {"example": openai_error(
        "...", "...", "InputError", code)}}}
    for code, desc in [(400, "Bad input."), (401, "Missing or wrong API key."),
                       (404, "Unknown model."), (422, "A limit is broken."),
                       (503, "Ollama unavailable or its stream broke off.")]
}


def parse_model(name: str) -> tuple[str | None, str | None]:
    """(llm mode, ollama model) for a model name; llm None means the server's default."""
    if name == "rag":
        return None, None
    if name == "rag-offline":
        return "none", None
    if name.startswith("rag:") and name[4:].strip():
        return "ollama", name[4:].strip()
    raise UnknownModel(f"the model {name!r} does not exist",
                       "use 'rag', 'rag-offline' or 'rag:<ollama model>' (see GET /v1/models)")


def tail(result: dict[str, Any], streamed: str | None = None) -> str:
    """What follows the answer text: corrections, unsupported sentences, notes, references."""
    parts = []
    if streamed is not None and not same_text(streamed, result["answer"]):
        added = added_lines(streamed, result["answer"])
        if added:  # e.g. "4 of the 60 abstracts match:" put before a model's list
            parts.append("\n\n" + "\n".join(line.rstrip(":") + "." if line.endswith(":") else line
                                             for line in added))
        elif added is None:
            # Streamed text was changed (citations to no source removed, sentences dropped):
            # say so and give the checked text.
            parts.append("\n\nChecked answer (citations corrected):\n" + result["answer"])
    if result.get("incomplete"):
        parts.append("\n\n[answer incomplete: the model's stream broke off]")
    unsupported = [s for s in result["sentences"] if not s["supported"]]
    if unsupported:
        parts.append(f"\n\n[{len(unsupported)} sentence(s) not supported by their citations: "
                     + "; ".join(textwrap.shorten(s["text"], 70) for s in unsupported) + "]")
    for notice in result["notices"]:
        parts.append(f"\n\nNote: {notice}")
    if result["citations"]:
        parts.append("\n\nReferences\n" + "\n".join(reference_lines_json(result["citations"])))
    return "".join(parts)


def rag_extra(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("answerer", "abstained", "incomplete", "notices", "standalone_question", "sentences",
            "dropped_citations", "timings_ms")
    return {k: result[k] for k in keys if k in result}


def _words(text: str) -> int:
    return len(text.split())


@router.get("/models", response_model=ModelListPublic, responses=OPENAI_ERRORS,
            summary="The models rag offers")
async def list_models(request: Request) -> Any:
    settings = request.app.state.settings

    def ollama_models() -> list[str]:
        import ollama

        client = ollama.Client(host=settings.ollama_host, timeout=2.0)
        try:
            return [m.model for m in client.list().models if m.model]
        except Exception:  # Ollama down: offer the configured model anyway
            return []
        finally:
            client.close()

    names = await run_blocking(request.app.state.light_executor, ollama_models)
    base = {n.removesuffix(":latest") for n in names}
    if settings.model.removesuffix(":latest") not in base:
        names.insert(0, settings.model)
    ids = ["rag", "rag-offline", *(f"rag:{n}" for n in names)]
    return {"object": "list",
            "data": [{"id": i, "object": "model", "created": STARTED, "owned_by": "rag"} for i in ids]}


@router.post(
    "/chat/completions", response_model=ChatCompletionPublic, responses=OPENAI_ERRORS,
    summary="OpenAI chat completions (streaming and not)",
    description=(
        "Accepts OpenAI's request (unknown fields such as temperature are ignored) plus the rag "
        "extensions k, strict, venue, year and source. The last message is the question. With "
        "`stream: true`: `chat.completion.chunk` events, the last one with `finish_reason` and "
        "the extra fields `references` and `rag`, then `data: [DONE]`; a failure mid-stream "
        "arrives as `data: {\"error\": {...}}` (the openai client raises APIError)."
    ),
)
async def chat_completions(body: ChatCompletionRequest, request: Request) -> Any:
    llm, model = parse_model(body.model)
    question, history = split_conversation([(m.role, m.text()) for m in body.messages])
    options: dict[str, Any] = {
        "k": body.k, "llm": llm, "model": model, "strict": body.strict, "history": history,
        "filters": Filters.parse(body.venue, body.year, body.source),
    }
    pipeline, executor = request.app.state.pipeline, request.app.state.executor
    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    prompt_words = sum(_words(m.text()) for m in body.messages)

    if not body.stream:
        ans = await run_blocking(executor, lambda: pipeline.answer(question, **options))
        result = ans.to_json()
        content = result["answer"] + tail(result)
        return {
            "id": cid, "object": "chat.completion", "created": created, "model": body.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_words, "completion_tokens": _words(content),
                      "total_tokens": prompt_words + _words(content)},
            "references": result["citations"], "rag": rag_extra(result),
        }

    events = answer_events(executor, pipeline, question, options, stream_tokens=not body.strict)
    first = await events.__anext__()
    if first[0] == "exception":
        await events.aclose()
        raise first[1]

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        obj = {"id": cid, "object": "chat.completion.chunk", "created": created,
               "model": body.model, "choices": [{"index": 0, "delta": delta,
                                                 "finish_reason": finish}], **extra}
        return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()

    def error(exc_or_msg: BaseException | tuple[str, str, str, int]) -> bytes:
        if isinstance(exc_or_msg, BaseException):
            message, hint, type_ = describe(exc_or_msg)
            status = status_of(exc_or_msg)
        else:
            message, hint, type_, status = exc_or_msg
        return f"data: {json.dumps(openai_error(message, hint, type_, status))}\n\n".encode()

    async def stream() -> AsyncIterator[bytes]:
        renumber = MarkerRenumberer()
        streamed: list[str] = []

        async def all_events() -> AsyncIterator[tuple[str, Any]]:
            yield first
            async for ev in events:
                yield ev

        try:
            yield chunk({"role": "assistant", "content": ""})
            async for kind, data in all_events():
                if kind == "token":
                    text = renumber.feed(data)
                    if text:
                        streamed.append(text)
                        yield chunk({"content": text})
                elif kind == "answer":
                    rest = renumber.flush()
                    if rest:
                        streamed.append(rest)
                        yield chunk({"content": rest})
                    result = data.to_json()
                    if data.incomplete:
                        ev = incomplete_event(data, result)
                        yield error((ev["message"], ev["hint"], "StreamBroken", 503))
                        return
                    sent = "".join(streamed) if streamed else None
                    extra = tail(result, sent) if sent is not None else result["answer"] + tail(result)
                    if extra:
                        yield chunk({"content": extra})
                    yield chunk({}, "stop", references=result["citations"], rag=rag_extra(result))
                    yield b"data: [DONE]\n\n"
                elif kind == "exception":
                    yield error(data)
        finally:
            await events.aclose()

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
