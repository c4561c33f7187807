"""The one module that talks to OpenAI-compatible servers (llama.cpp's llama-server, LM
Studio, vLLM, LocalAI, Jan, Ollama's /v1); maps their failures to RagErrors.

Over httpx rather than the `openai` package: rag needs two endpoints (GET /models, POST
/chat/completions) and the server-sent events of one of them, and the package costs about
0.4 s of import on every `rag ask` that uses it. One client is shared by every answer in a
process, as for Ollama: httpx's client is thread-safe, each stream has its own ThinkFilter.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from rag.errors import LLMError, LLMTimeout, LLMUnavailable, ModelNotFound
from rag.llm.base import (
    StreamBroken,
    StreamEnd,
    ThinkFilter,
    Thinking,
    Token,
    context_length,
    excerpt,
    is_html,
    parsed,
    token_count,
)
from rag.llm.guard import Deadline, DeadlinePassed, guarded, one
from rag.llm.transport import Transport

log = logging.getLogger(__name__)

# Where servers put a model's context length in /v1/models: vLLM (max_model_len), llama.cpp
# (meta.n_ctx), LM Studio and others (context_length, max_context_length).
_CONTEXT_KEYS = ("max_model_len", "context_length", "max_context_length", "n_ctx")
_SERVERS = ("start it (llama.cpp: `llama-server -m MODEL.gguf --port 8080`; LM Studio: its "
            "local server; vLLM: `vllm serve MODEL`), set RAG_OPENAI_BASE_URL, or use --llm none")


class OpenAICompatible:
    """A model behind an OpenAI-compatible chat completions API at `base_url` (".../v1").
    `model` None: the first model the server lists."""

    kind = "openai"

    def __init__(self, base_url: str, model: str | None, timeout: float = 120.0, *,
                 api_key: str | None = None, num_predict: int | None = None,
                 num_ctx: int = 8192, temperature: float = 0.0) -> None:
        self.host = base_url.rstrip("/")
        self._model = model
        self.timeout = timeout
        self.num_predict = num_predict
        self.num_ctx = num_ctx  # what is assumed when the server does not say
        self.temperature = temperature
        self._models: list[dict[str, Any]] | None = None
        self._lock = threading.Lock()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=self.host, timeout=timeout, headers=headers,
                                   transport=Transport(self.host, verify=self.host.lower().startswith("https://")))

    @classmethod
    def from_settings(cls, settings: Any, model: str | None = None) -> OpenAICompatible:
        s = settings
        if not model and "model" in s.model_fields_set:
            model = s.model  # RAG_MODEL set on purpose; rag's default names an Ollama model
        return cls(s.openai_base_url or "", model, s.llm_timeout, api_key=s.openai_api_key,
                   num_predict=s.num_predict, num_ctx=s.num_ctx, temperature=s.temperature)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> OpenAICompatible:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- errors -------------------------------------------------------------------------------

    def _map(self, exc: BaseException) -> LLMError:
        if isinstance(exc, LLMError):  # rag's own (a reply too large): said as it is
            return exc
        if isinstance(exc, httpx.HTTPStatusError):
            reply = exc.response.text
            said = excerpt(_error_text(reply))
            code = exc.response.status_code
            if is_html(reply):
                return LLMError(f"the server at {self.host} answered {code} with {said}",
                                "check RAG_OPENAI_BASE_URL: it should end in /v1 of an "
                                "OpenAI-compatible server")
            if code in (401, 403):
                return LLMError(f"the server at {self.host} refused the request ({code}: {said})",
                                "set RAG_OPENAI_API_KEY to a key the server accepts")
            if code == 404 and "model" in said.lower():
                return ModelNotFound(f"the model '{self.model}' is not served at {self.host} ({said})",
                                     f"pick one of {', '.join(self.listed()) or 'its models'} "
                                     "with --model")
            if code == 404:
                return LLMError(f"the server at {self.host} has no OpenAI chat API ({said})",
                                "check RAG_OPENAI_BASE_URL: it should end in /v1 (e.g. "
                                "http://127.0.0.1:8080/v1)")
            return LLMError(f"the server at {self.host} answered {code}: {said}",
                            "check the server's log")
        if isinstance(exc, httpx.TimeoutException):
            return LLMTimeout(f"the server at {self.host} did not answer within {self.timeout:g} s",
                              "raise RAG_LLM_TIMEOUT, use a smaller model, or use --llm none")
        if isinstance(exc, (httpx.ConnectError, ConnectionError)):
            return LLMUnavailable(f"no OpenAI-compatible server is running at {self.host}", _SERVERS)
        if isinstance(exc, (ValueError, KeyError, TypeError, AttributeError)):
            return LLMError(f"the server at {self.host} did not answer as an OpenAI-compatible "
                            f"server does ({excerpt(str(exc))})",
                            "check RAG_OPENAI_BASE_URL: it should end in /v1")
        if isinstance(exc, httpx.HTTPError):
            return LLMError(f"the server at {self.host} closed the connection without an answer "
                            f"({excerpt(str(exc)) or type(exc).__name__})", "check the server's log")
        return LLMError(f"talking to {self.host} failed: {type(exc).__name__}: {excerpt(str(exc))}",
                        "check the server's log")

    # -- the server's models ------------------------------------------------------------------

    def _list(self, deadline: Deadline | None = None) -> list[dict[str, Any]]:
        with self._lock:
            if self._models is not None:
                return self._models

        def read() -> list[dict[str, Any]]:
            reply = self.client.get("/models")
            reply.raise_for_status()
            data = reply.json()["data"]
            return [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]

        try:
            models = one(read, deadline, self.host)
        except Exception as exc:
            raise self._map(exc) from exc
        with self._lock:
            self._models = models
        return models

    def listed(self) -> list[str]:
        try:
            return [m["id"] for m in self._list()]
        except LLMError:
            return []

    @property
    def model(self) -> str:
        """The model asked for, or the server's first (llama.cpp and LM Studio serve one)."""
        if self._model:
            return self._model
        models = self._list()
        if not models:
            raise ModelNotFound(f"the server at {self.host} lists no model", "load one, or name it with --model")
        self._model = models[0]["id"]
        return self._model

    def check(self) -> dict[str, Any]:
        """Is the server up and the model there? Raises the matching error otherwise."""
        ids = [m["id"] for m in self._list()]
        if self._model and ids and self._model not in ids and len(ids) > 1:
            raise ModelNotFound(f"the model '{self._model}' is not served at {self.host}",
                                f"pick one of {', '.join(ids)} with --model")
        return {"model": self.model, "details": None}

    def context_window(self, deadline: Deadline | None = None) -> int | None:
        """The model's context length as the server lists it, else RAG_NUM_CTX."""
        try:
            models = self._list(deadline)
        except DeadlinePassed:
            raise
        except LLMError:
            return self.num_ctx
        entry = next((m for m in models if m["id"] == self._model), models[0] if models else {})
        meta = entry.get("meta") if isinstance(entry, dict) else None
        for where in (entry if isinstance(entry, dict) else {}, meta if isinstance(meta, dict) else {}):
            for key in _CONTEXT_KEYS:
                if (n := context_length(where.get(key))) is not None:
                    return n
        return self.num_ctx

    # -- answers ------------------------------------------------------------------------------

    def _body(self, messages: list[dict[str, str]], max_tokens: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages,
                                "temperature": self.temperature, "seed": 0}
        limit = max_tokens if max_tokens is not None else self.num_predict
        if limit is not None and limit > 0:
            body["max_tokens"] = limit
        return body

    def stream(self, messages: list[dict[str, str]], max_tokens: int | None = None,
               deadline: Deadline | None = None) -> Iterator[Token | Thinking | StreamEnd]:
        """As Ollama.stream: the answer and the reasoning apart, then one StreamEnd; raises
        DeadlinePassed when `deadline` passes first, whatever the server sends meanwhile."""
        return guarded(lambda: self._stream(messages, max_tokens), deadline, self.host)

    def _stream(self, messages: list[dict[str, str]],
                max_tokens: int | None) -> Iterator[Token | Thinking | StreamEnd]:
        body = {**self._body(messages, max_tokens), "stream": True,
                "stream_options": {"include_usage": True}}
        got: list[str] = []
        reason: str | None = None
        usage: dict[str, Any] = {}
        done = False
        filt = ThinkFilter()
        try:
            with self.client.stream("POST", "/chat/completions", json=body) as reply:
                if reply.status_code >= 400:
                    reply.read()
                    reply.raise_for_status()
                if reply.is_redirect:  # never followed: an answer is not an abstention's silence
                    raise LLMError(f"the server at {self.host} redirected the request (HTTP "
                                   f"{reply.status_code} to {excerpt(reply.headers.get('location', '?'), 120)})",
                                   "set RAG_OPENAI_BASE_URL to the address the server answers at")
                # Server-sent events, one JSON object per "data:" line; "[DONE]" ends them.
                for line in reply.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        done = True
                        break
                    event = parsed(_Event, json.loads(data), self.host)
                    if event.error:
                        raise LLMError(f"the server at {self.host} reported an error: "
                                       f"{excerpt(json.dumps(event.error))}", "check the server's log")
                    usage = _usage(event.usage, self.host) or usage
                    for choice in event.choices or []:
                        delta = choice.delta or _Delta()
                        items: list[Token | Thinking] = []
                        if delta.reasoning_content or delta.reasoning:
                            items.append(Thinking(delta.reasoning_content or delta.reasoning or ""))
                        items += filt.feed(delta.content or "")
                        reason = choice.finish_reason or reason
                        for item in items:
                            if isinstance(item, Token):
                                got.append(item.text)
                            yield item
        except LLMError:
            raise
        except Exception as exc:
            if got:
                raise StreamBroken("".join(got), str(exc) or type(exc).__name__, self.host,
                                   "check the server's log") from exc
            raise self._map(exc) from exc
        if not done and reason is None:
            if not got:  # nothing at all: an error, never the empty answer of an abstention
                raise LLMError(f"the server at {self.host} sent no answer (an empty or "
                               "unreadable body, no end-of-answer message)", "check the server's log")
            raise StreamBroken("".join(got), "no end-of-answer message", self.host,
                               "check the server's log")
        for item in filt.flush():
            yield item
        yield StreamEnd(reason or "stop", usage.get("prompt_tokens"), usage.get("completion_tokens"))

    def complete(self, messages: list[dict[str, str]], format: dict[str, Any] | None = None,  # noqa: A002
                 max_tokens: int | None = None, deadline: Deadline | None = None) -> str:
        """The whole reply at once, reasoning removed; `format`: a JSON schema it must follow."""
        body = self._body(messages, max_tokens)
        if format is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "reply", "schema": format}}

        def read() -> str:
            reply = self.client.post("/chat/completions", json=body)
            reply.raise_for_status()
            return parsed(_Completion, reply.json(), self.host).choices[0].message.content or ""

        try:
            content = one(read, deadline, self.host)
        except LLMError:
            raise
        except Exception as exc:
            raise self._map(exc) from exc
        filt = ThinkFilter()
        items = filt.feed(content) + filt.flush()
        return "".join(i.text for i in items if isinstance(i, Token))


class _Delta(BaseModel):
    model_config = ConfigDict(strict=True)
    content: str | None = None
    reasoning_content: str | None = None  # llama.cpp, vLLM, DeepSeek
    reasoning: str | None = None  # OpenRouter, LM Studio


class _Choice(BaseModel):
    model_config = ConfigDict(strict=True)
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Event(BaseModel):
    """One server-sent event of a streamed chat completion, as rag reads it (strict types:
    text is text, never a number or an object; unknown fields are ignored)."""

    model_config = ConfigDict(strict=True)
    choices: list[_Choice] | None = None
    usage: Any = None  # checked by _usage, which names the count that is wrong
    error: Any = None


class _Message(BaseModel):
    model_config = ConfigDict(strict=True)
    content: str | None = None


class _Reply(BaseModel):
    model_config = ConfigDict(strict=True)
    message: _Message


class _Completion(BaseModel):
    """A chat completion that is not streamed (the model judge's verdict, a rewrite)."""

    model_config = ConfigDict(strict=True)
    choices: list[_Reply] = Field(min_length=1)


def _usage(value: Any, host: str) -> dict[str, int]:
    """The stream's token counts, checked (rag.llm.base.token_count)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise LLMError(f"the server at {host} sent `usage` as {type(value).__name__}, not an object",
                       "check the server's version and log")
    counts = {key: token_count(value.get(key), host, f"usage.{key}")
              for key in ("prompt_tokens", "completion_tokens")}
    return {k: v for k, v in counts.items() if v is not None}


def _error_text(reply: str) -> str:
    """The message of an OpenAI-style error body ({"error": {"message": ...}}), else the body."""
    try:
        err = json.loads(reply).get("error")
    except (ValueError, AttributeError):
        return reply
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err or reply)
