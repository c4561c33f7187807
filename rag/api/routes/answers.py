"""POST /ask and POST /chat (JSON, or server-sent events)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from rag.api import relay
from rag.api.deps import PROTECTED, ExecutorDep, ExportExecutorDep, PipelineDep
from rag.api.errors import ERROR_RESPONSES, split_conversation
from rag.api.models import AnswerPublic, AskRequest, ChatRequest
from rag.schema import DoneEvent, Event, NoticeEvent, ProgressEvent, SentenceEvent

router = APIRouter(tags=["answers"], dependencies=PROTECTED, responses=ERROR_RESPONSES)
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

CHAT_DESCRIPTION = (
    "The last message is the question; earlier turns condense a follow-up into a stand-alone "
    "question; system messages reach the model as the client's preferences (rag's citation "
    "rules still win). With `stream: true` the response is `text/event-stream`: `sentence` events "
    "`{\"delta\", \"text\", \"citations\", \"supported\", \"support\", \"quote\", \"addresses\", "
    "\"meta\"}` as "
    "each sentence of the answer is final (cleaned, renumbered, checked; the answer text is the "
    "concatenation of the deltas), `token` events `{\"text\"}` carrying the same deltas (for "
    "clients that only show text), `notice` events `{\"message\"}`, `progress` events "
    "`{\"stage\"}` (\"thinking\" while a reasoning model reasons), then exactly one `final` event "
    "carrying the whole answer object (as without streaming) or one `error` event `{\"message\", "
    "\"hint\", \"type\", \"status\"}` (with `incomplete` and `partial` when the model's stream "
    "broke off). Errors found before anything was sent are ordinary JSON error responses."
)


@router.post("/ask", response_model=AnswerPublic, response_model_exclude_unset=True,  # `export` when asked
             summary="Answer a question (the object `rag ask --json` prints)")
async def ask(body: AskRequest, pipeline: PipelineDep, executor: ExecutorDep,
              exports: ExportExecutorDep, request: Request) -> Any:
    ans = await relay.answer(executor, pipeline, body.question, body.options(), request)
    out = ans.to_public()
    if body.export:
        from rag.export import export

        fmt, cited = body.export, [s.paper for s in ans.sources]
        # keys chosen among every paper of the index, as in every other export from it
        every = pipeline.retriever.snapshot
        out["export"] = {"format": fmt,
                         "text": await relay.run_blocking(exports, lambda: export(cited, fmt, every().papers.values()))}
    return out


@router.post("/chat", response_model=AnswerPublic, response_model_exclude_unset=True,
             summary="Multi-turn chat; with stream=true, server-sent events",
             description=CHAT_DESCRIPTION,
             responses={200: {"content": {"text/event-stream": {}},
                              "description": "The answer object, or its event stream."}})
async def chat(body: ChatRequest, pipeline: PipelineDep, executor: ExecutorDep,
               request: Request) -> Any:
    question, history = split_conversation([(m.role, m.content) for m in body.messages])
    # system messages reach the model as the client's preferences, as under /v1
    instructions = "\n".join(m.content for m in body.messages if m.role == "system" and m.content.strip())
    if not body.stream:
        ans = await relay.answer(executor, pipeline, question, body.options(), request,
                                 history=history, instructions=instructions or None)
        return ans.to_public()
    events = relay.events(executor, pipeline, question, body.options(), history=history,
                          instructions=instructions or None)
    first = await anext(events)  # an error before the first event is a plain JSON error
    return StreamingResponse(_chat_stream(first, events), media_type="text/event-stream",
                             headers=SSE_HEADERS)


def _sse(ev: Event) -> bytes | None:
    if isinstance(ev, SentenceEvent):
        return relay.sse("sentence", ev.to_public()) + relay.sse("token", {"text": ev.delta})
    if isinstance(ev, NoticeEvent):
        return relay.sse("notice", {"message": ev.message})
    if isinstance(ev, ProgressEvent):
        return relay.sse("progress", {"stage": ev.stage})
    if isinstance(ev, DoneEvent):
        if ev.answer.error is not None:
            return relay.sse("error", relay.incomplete_data(ev.answer))
        return relay.sse("final", ev.answer.to_public())
    return None  # raw tokens: the sentence events carry the checked text


async def _chat_stream(first: Event, events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
    try:
        if (data := _sse(first)) is not None:
            yield data
        async for ev in events:
            if (data := _sse(ev)) is not None:
                yield data
    except Exception as exc:
        yield relay.sse("error", relay.error_data(exc))
    finally:
        await events.aclose()  # type: ignore[attr-defined]
