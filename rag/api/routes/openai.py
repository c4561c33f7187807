"""OpenAI-compatible endpoints, so chat clients and UIs can use rag as a model.

Models: "rag" (the server's default answerer: Ollama when it runs, else offline),
"rag-offline" (the extractive answerer, no LLM) and "rag:<ollama model>" (that Ollama model).
The message text carries the [n] citation markers and a reference list; the cited papers are
also in the extra field `references` (on the response, or on the last chunk when streaming).
System messages reach the model as the client's preferences, after rag's own rules.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from rag.api import relay
from rag.api.deps import PROTECTED, ExecutorDep, LightExecutorDep, PipelineDep, SettingsDep
from rag.api.errors import (
    UnknownModel,
    describe,
    field_error,
    openai_error,
    split_conversation,
    status_of,
)
from rag.api.models import (
    MAX_MESSAGE_CHARS,
    MAX_TOTAL_CHARS,
    OPENAI_HISTORY,
    ChatCompletionPublic,
    ChatCompletionRequest,
    ModelListPublic,
    ModelPublic,
)
from rag.errors import InputError, ModelNotFound
from rag.render import tail
from rag.schema import Answer, AskOptions, DoneEvent, Event, SentenceEvent

router = APIRouter(prefix="/v1", tags=["openai-compatible"], dependencies=PROTECTED)
STARTED = int(time.time())
OPENAI_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": desc, "content": {"application/json": {"example": openai_error(
        "...", "...", "InputError", code)}}}
    for code, desc in [(400, "Bad input or an unsupported parameter."),
                       (401, "Missing or wrong API key."), (404, "Unknown model."),
                       (503, "Ollama unavailable or its stream broke off.")]
}
# OpenAI parameters rag cannot honour: refused by name rather than silently ignored.
UNSUPPORTED = ("tools", "functions", "tool_choice", "function_call", "logprobs", "audio")
T = TypeVar("T")


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


async def _of_named_model(work: Awaitable[T], model: str | None) -> T:
    """A model the request named ('rag:<name>') that Ollama lacks is OpenAI's unknown model
    (404 model_not_found), not a 503: OpenAI clients retry a 503, twice by default."""
    try:
        return await work
    except ModelNotFound as exc:
        if model is None:  # 'rag': the server's own model is missing, the server's fault
            raise
        raise UnknownModel(exc.message, f"{exc.hint} (see GET /v1/models)") from None


# In the Markdown content, from abstracts or the model: an HTML tag (<img onerror>, <script>)
# or a link to a script (](javascript:...)) is escaped, so a Markdown client shows it as text.
_HTML_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_SCRIPT_LINK = re.compile(r"\]\((?=\s*<?\s*(?:javascript|vbscript|data):)", re.IGNORECASE)


def markdown_safe(text: str) -> str:
    return _SCRIPT_LINK.sub(r"]\\(", _HTML_TAG.sub(r"\\<", text))


def _refuse_unsupported(body: ChatCompletionRequest) -> None:
    extra = body.model_extra or {}
    if body.n not in (None, 1):
        raise InputError(f"n={body.n}: rag writes one answer per request", "leave n unset or 1")
    fmt = extra.get("response_format")
    if fmt not in (None, {}) and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise InputError("response_format: rag answers in cited Markdown text only",
                         "remove 'response_format', or send {\"type\": \"text\"}")
    for name in UNSUPPORTED:
        if extra.get(name) not in (None, [], False):
            raise InputError(f"the parameter '{name}' is not supported by rag",
                             f"remove '{name}' from the request")


def _not_huge(texts: Sequence[tuple[str, str]]) -> None:
    """The limits of /chat, on the messages answered from (system messages, the last turns,
    the question): older turns are trimmed, so a long one there does not refuse the request."""
    last = len(texts) - 1
    turns = [i for i, (role, _) in enumerate(texts[:last]) if role in ("user", "assistant")]
    kept = [i for i, (role, _) in enumerate(texts) if role in ("system", "developer")]
    kept = sorted({*kept, *turns[-OPENAI_HISTORY:], last})
    for i in kept:
        if len(texts[i][1]) > MAX_MESSAGE_CHARS:
            raise field_error(("body", "messages", i, "content"),
                              f"a message is at most {MAX_MESSAGE_CHARS} characters", "string_too_long")
    if sum(len(texts[i][1]) for i in kept) > MAX_TOTAL_CHARS:
        raise field_error(("body",), f"the messages are at most {MAX_TOTAL_CHARS} characters together")


@lru_cache(maxsize=1)
def _tokenizer() -> Any:
    """The embedding model's WordPiece tokenizer, untruncated: offline token counts."""
    from tokenizers import Tokenizer

    from rag.config import get_settings
    from rag.embed import tokenizer_path

    tok = Tokenizer.from_file(str(tokenizer_path(get_settings().model_cache)))
    tok.no_truncation()
    tok.no_padding()
    return tok


def _tokens(text: str) -> int:
    return len(_tokenizer().encode(text, add_special_tokens=False).ids) if text else 0


def usage(ans: Answer, prompt: str, content: str) -> dict[str, int]:
    if ans.usage:
        p, c = ans.usage["prompt_tokens"], ans.usage["completion_tokens"]
    else:
        p, c = _tokens(prompt), _tokens(content)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def after_answer(result: dict[str, Any]) -> str:
    """What follows the answer text in the message: notes, notices, references."""
    parts = [text] if (text := tail(result, markdown=True)) else []
    parts += [f"Note: {n}" for n in result["notices"]]
    return "".join("\n\n" + p for p in parts)


def _stream_broken(ans: Answer) -> dict[str, Any]:
    """The model's stream broke off: a 503 error (the answer so far is not sent as a reply)."""
    data = relay.incomplete_data(ans)
    return openai_error(data["message"], data["hint"], "StreamBroken", 503)


def rag_extra(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("answerer", "abstained", "incomplete", "notices", "standalone_question", "sentences",
            "dropped_citations", "rewritten_citations", "timings_ms")
    return {k: result[k] for k in keys if k in result}


@router.get("/models", response_model=ModelListPublic, responses=OPENAI_ERRORS,
            summary="The models rag offers")
async def list_models(settings: SettingsDep, light: LightExecutorDep) -> Any:
    def ollama_models() -> list[str]:
        import ollama

        def writes_text(name: str) -> bool:
            """An embedding model (nomic-embed-text) reports only 'embedding' and cannot
            answer: a client that offered it would fail. An Ollama too old to report
            capabilities, or a failed look, keeps the model."""
            try:
                capabilities = client.show(name).capabilities
            except Exception:
                return True
            return not capabilities or "completion" in capabilities

        client = ollama.Client(host=settings.ollama_host, timeout=2.0)
        try:
            return [m.model for m in client.list().models if m.model and writes_text(m.model)]
        except Exception:  # Ollama down: offer the configured model anyway
            return []
        finally:
            client.close()

    names = await relay.run_blocking(light, ollama_models)
    if settings.model.removesuffix(":latest") not in {n.removesuffix(":latest") for n in names}:
        names.insert(0, settings.model)
    ids = ["rag", "rag-offline", *(f"rag:{n}" for n in names)]
    return {"object": "list",
            "data": [{"id": i, "object": "model", "created": STARTED, "owned_by": "rag"} for i in ids]}


@router.get("/models/{model:path}", response_model=ModelPublic, responses=OPENAI_ERRORS,
            summary="One model rag offers (404 model_not_found for any other)")
async def retrieve_model(model: str, settings: SettingsDep, light: LightExecutorDep) -> Any:
    listed = (await list_models(settings, light))["data"]
    # 'rag:llama3.2' is the model listed as 'rag:llama3.2:latest', as chat completions take it
    found = next((m for m in listed if m["id"].removesuffix(":latest") == model.removesuffix(":latest")), None)
    if found is None:
        parse_model(model)  # a name rag never offers says which ones it does
        raise UnknownModel(f"the model {model!r} is not in Ollama", "see GET /v1/models")
    return found


@router.post(
    "/chat/completions", response_model=ChatCompletionPublic, responses=OPENAI_ERRORS,
    summary="OpenAI chat completions (streaming and not)",
    description=(
        "Accepts OpenAI's request plus the rag extensions k, strict, venue, year, source, "
        "category and author. The last message is the question; system messages are passed to the model "
        "as the client's preferences (rag's citation rules still win); a long conversation is "
        "trimmed to its last turns. `n` > 1 and tools are refused with 400. With `stream: "
        "true`: `chat.completion.chunk` events whose content is the checked answer sentence by "
        "sentence, the last one with `finish_reason` and the extra fields `references` and "
        "`rag`, a usage chunk when `stream_options.include_usage` is set, then `data: [DONE]`; "
        "a failure mid-stream arrives as `data: {\"error\": {...}}` (the openai client raises "
        "APIError)."
    ),
)
async def chat_completions(body: ChatCompletionRequest, pipeline: PipelineDep,
                           executor: ExecutorDep, request: Request) -> Any:
    _refuse_unsupported(body)
    llm, model = parse_model(body.model)
    last = body.messages[-1]
    if isinstance(last.content, list) and last.content and all(p.type != "text" for p in last.content):
        raise field_error(("body", "messages", len(body.messages) - 1, "content"),
                          "the question has no text: rag reads only content parts of type 'text' "
                          "(images and files are left out)", "string_too_short")
    texts = [(m.role, m.text()) for m in body.messages]
    question, history = split_conversation(texts)
    _not_huge(texts)
    instructions = "\n".join(t for r, t in texts if r in ("system", "developer") and t.strip())
    options = AskOptions(k=body.k, llm=llm, model=model, strict=body.strict, venue=body.venue,
                         year=body.year, source=body.source, category=body.category,
                         author=body.author)
    kwargs: dict[str, Any] = {"history": history[-OPENAI_HISTORY:], "instructions": instructions or None}
    prompt = "\n".join(t for _, t in texts)
    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

    if not body.stream:
        ans = await _of_named_model(
            relay.answer(executor, pipeline, question, options, request, **kwargs), model)
        if ans.error is not None:  # OpenAI has no finish_reason for it: an error, as streamed
            return JSONResponse(_stream_broken(ans), status_code=503)
        result = ans.to_public()
        content = markdown_safe(result["answer"] + after_answer(result))
        return {
            "id": cid, "object": "chat.completion", "created": created, "model": body.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": ans.finish_reason}],
            "usage": usage(ans, prompt, content),
            "references": result["citations"], "rag": rag_extra(result),
        }

    events = relay.events(executor, pipeline, question, options, openai=True, **kwargs)
    first = await _of_named_model(anext(events), model)  # an error before it: a JSON error
    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
        obj = {"id": cid, "object": "chat.completion.chunk", "created": created,
               "model": body.model, **extra,
               "choices": [] if delta is None else [{"index": 0, "delta": delta,
                                                     "finish_reason": finish}]}
        if include_usage:
            obj.setdefault("usage", None)
        return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()

    def error(exc: BaseException) -> bytes:
        message, hint, type_ = describe(exc, openai=True)
        return f"data: {json.dumps(openai_error(message, hint, type_, status_of(exc)))}\n\n".encode()

    async def stream() -> AsyncIterator[bytes]:
        async def all_events() -> AsyncIterator[Event]:
            yield first
            async for ev in events:
                yield ev

        try:
            yield chunk({"role": "assistant", "content": ""})
            async for ev in all_events():
                if isinstance(ev, SentenceEvent):
                    yield chunk({"content": markdown_safe(ev.delta)})
                elif isinstance(ev, DoneEvent):
                    ans, result = ev.answer, ev.answer.to_public()
                    if ans.error is not None:
                        yield f"data: {json.dumps(_stream_broken(ans))}\n\n".encode()
                        return
                    rest = markdown_safe(after_answer(result))
                    if rest:
                        yield chunk({"content": rest})
                    yield chunk({}, ans.finish_reason, references=result["citations"],
                                rag=rag_extra(result))
                    if include_usage:
                        yield chunk(None, usage=usage(ans, prompt, markdown_safe(result["answer"]) + rest))
                    yield b"data: [DONE]\n\n"
        except Exception as exc:
            yield error(exc)
        finally:
            await events.aclose()  # type: ignore[attr-defined]

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
