"""The one module that talks to Ollama; maps its failures to RagErrors.

One `Ollama` is shared by every answer in a process (the Pipeline keeps one per model): it
holds no per-answer state, and the httpx client under `ollama.Client` is documented
thread-safe (one connection pool, used from many threads), so concurrent `stream()` calls
from the API's worker threads are fine. Each stream has its own `ThinkFilter`.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx

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
    opens_think_in_prompt,
    token_count,
)
from rag.llm.guard import Deadline, DeadlinePassed, guarded, one
from rag.llm.transport import Transport

log = logging.getLogger(__name__)
_UNSET: Any = object()  # "take it from the process's settings"
# Ollama's own 404 for a model it lacks: "model 'x' not found" (older: 'model "x" not found,
# try pulling it first'); any other 404 is a server that is not Ollama.
_OLLAMA_NOT_FOUND = re.compile(r"model ['\"].*['\"] not found", re.I)

class Ollama:
    """A model on an Ollama server. `think`, `keep_alive`, `num_predict`: Ollama's options
    (RAG_THINK, RAG_KEEP_ALIVE, RAG_NUM_PREDICT when not given; None: not sent)."""

    def __init__(self, host: str, model: str, timeout: float = 120.0, num_ctx: int = 8192, *,
                 think: bool | str | None = _UNSET, keep_alive: float | str | None = _UNSET,
                 num_predict: int | None = _UNSET, temperature: float = 0.0) -> None:
        import ollama

        if _UNSET in (think, keep_alive, num_predict):
            from rag.config import get_settings

            s = get_settings()
            think = s.think if think is _UNSET else think
            keep_alive = s.keep_alive if keep_alive is _UNSET else keep_alive
            num_predict = s.num_predict if num_predict is _UNSET else num_predict
        self.host = host
        self.model = model
        self.num_ctx = num_ctx
        self.timeout = timeout
        self.think = think
        self.keep_alive = keep_alive
        self.num_predict = num_predict
        self.temperature = temperature
        self._template: str | None = None
        self._trained_ctx: int | None = None  # the model's own context length (/api/show)
        self._lock = threading.Lock()
        # A TLS context loads the CA bundle (~30-50 ms per answer); plain http (Ollama's
        # default, also without a scheme) never uses it.
        # Redirects are not followed: an answer from somewhere else is no answer of this server.
        self.client = ollama.Client(host=host, timeout=timeout, follow_redirects=False,
                                    transport=Transport(host, verify=host.strip().lower().startswith("https://")))

    @classmethod
    def from_settings(cls, settings: Any, model: str | None = None,
                      timeout: float | None = None) -> Ollama:
        s = settings
        return cls(s.ollama_host, model or s.model, s.llm_timeout if timeout is None else timeout,
                   s.num_ctx, think=s.think, keep_alive=s.keep_alive, num_predict=s.num_predict,
                   temperature=s.temperature)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Ollama:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    kind = "ollama"

    @property
    def options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"temperature": self.temperature, "num_ctx": self.num_ctx, "seed": 0}
        if self.num_predict is not None:
            opts["num_predict"] = self.num_predict
        return opts

    def _request(self, max_tokens: int | None = None) -> dict[str, Any]:
        """Keyword arguments of every chat request; unset options are not sent at all."""
        options = self.options
        if max_tokens is not None:
            options["num_predict"] = max_tokens
        out: dict[str, Any] = {"model": self.model, "options": options}
        if self.think is not None:
            out["think"] = self.think
        if self.keep_alive is not None:
            out["keep_alive"] = self.keep_alive
        return out

    def _map(self, exc: BaseException) -> LLMError:
        import ollama

        if isinstance(exc, LLMError):  # rag's own (a reply too large, the deadline): as it is
            return exc
        if isinstance(exc, ollama.ResponseError):
            if exc.status_code == 404:
                if not _OLLAMA_NOT_FOUND.search(str(exc.error)) and self._speaks_openai():
                    # llama.cpp's server, LM Studio, vLLM: no /api/*, so "ollama pull" is no help
                    return LLMError(f"the server at {self.host} is not Ollama: it answers the "
                                    "OpenAI API (/v1/models) but not Ollama's (/api/show)",
                                    f"use --llm openai with RAG_OPENAI_BASE_URL={self.host.rstrip('/')}/v1")
                return ModelNotFound(f"the model '{self.model}' is not available in Ollama at {self.host}",
                                     f"run `ollama pull {self.model}`, or pick another with --model")
            reply = excerpt(str(exc.error))
            if is_html(str(exc.error)):  # a proxy's or a web server's page, not Ollama's JSON
                return LLMError(f"the server at {self.host} answered {exc.status_code} with {reply}",
                                f"check that OLLAMA_HOST ({self.host}) points at Ollama, and "
                                "that Ollama is running behind any proxy there")
            said = f"answered {exc.status_code}" if exc.status_code > 0 else "reported an error"
            if self.think is not None and "think" in reply.lower():
                return LLMError(f"Ollama at {self.host} {said}: {reply}",
                                f"unset RAG_THINK (now {self.think!r}): '{self.model}' does not take it")
            return LLMError(f"Ollama at {self.host} {said}: {reply}", "check `ollama serve`'s log")
        if isinstance(exc, httpx.TimeoutException):
            return LLMTimeout(f"Ollama at {self.host} did not answer within {self.timeout:g} s",
                              "raise RAG_LLM_TIMEOUT, use a smaller model, or use --llm none")
        if isinstance(exc, (httpx.ConnectError, ConnectionError)):
            return LLMUnavailable(f"Ollama is not running at {self.host}",
                                  "start it with `ollama serve` (or set OLLAMA_HOST), or use --llm none")
        if isinstance(exc, ValueError):  # a reply that is not JSON, or not Ollama's JSON
            reply = excerpt(str(getattr(exc, "doc", "")) or str(exc))
            return LLMError(f"the server at {self.host} did not answer as Ollama does "
                            f"(not Ollama's JSON: {reply})",
                            f"check OLLAMA_HOST ({self.host}): it should reach Ollama "
                            "(`ollama serve`; by default http://127.0.0.1:11434)")
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.NetworkError)):
            return LLMError(f"the server at {self.host} closed the connection without an answer "
                            f"({excerpt(str(exc)) or type(exc).__name__})",
                            f"check OLLAMA_HOST ({self.host}) and `ollama serve`'s log")
        return LLMError(f"talking to Ollama at {self.host} failed: {type(exc).__name__}: "
                        f"{excerpt(str(exc))}", "check `ollama serve`'s log")

    def _speaks_openai(self) -> bool:
        """Does the server answer the OpenAI API's model list (asked only to name the fix)?"""
        try:
            reply = httpx.get(f"{self.host.rstrip('/')}/v1/models", timeout=min(self.timeout, 30.0))
            return reply.status_code == 200 and isinstance(reply.json().get("data"), list)
        except (httpx.HTTPError, ValueError, AttributeError):
            return False

    def _show(self) -> Any:
        """Read the model's template and context length (/api/show); the reply."""
        info = self.client.show(self.model)
        lengths = [n for k, v in (getattr(info, "modelinfo", None) or {}).items()
                   if k.endswith(".context_length") and (n := context_length(v)) is not None]
        with self._lock:
            self._template = str(getattr(info, "template", "") or "")
            self._trained_ctx = min(lengths) if lengths else None
        return info

    def check(self) -> dict[str, Any]:
        """Is Ollama up and the model present? Raises the matching error otherwise."""
        try:
            info = self._show()
        except Exception as exc:
            raise self._map(exc) from exc
        return {"model": self.model, "details": getattr(info, "details", None)}

    def context_window(self, deadline: Deadline | None = None) -> int | None:
        """num_ctx, or the model's own context length when that is shorter (Ollama loads the
        model with the shorter of the two)."""
        with self._lock:
            known, trained = self._template, self._trained_ctx
        if known is None:
            try:
                one(self._show, deadline, self.host)
            except (httpx.TimeoutException, DeadlinePassed) as exc:  # as in _starts_inside: said now, not twice
                raise self._map(exc) from exc
            except Exception as exc:  # the chat request itself reports a real problem
                log.debug("could not read %s's context length: %s", self.model, exc)
            with self._lock:
                trained = self._trained_ctx
        return min(self.num_ctx, trained) if trained else self.num_ctx

    def _starts_inside(self) -> bool:
        """Whether this model's output begins inside a <think> block (asked once per client;
        a server that cannot say now is taken to mean no, and asked again next time)."""
        with self._lock:
            known = self._template
        if known is None:
            try:
                self._show()
            except httpx.TimeoutException as exc:
                # A server that does not say within the timeout will not answer the chat
                # either: report it now, not after waiting the whole timeout a second time.
                raise self._map(exc) from exc
            except Exception as exc:  # the chat request itself reports a real problem
                log.debug("could not read %s's template: %s", self.model, exc)
                return False
            with self._lock:
                known = self._template
        return opens_think_in_prompt(known or "")

    def stream(self, messages: list[dict[str, str]], max_tokens: int | None = None,
               deadline: Deadline | None = None) -> Iterator[Token | Thinking | StreamEnd]:
        """Yield the answer and the reasoning apart as they arrive, then one StreamEnd; raise
        StreamBroken (with the answer so far) if the stream stops early, DeadlinePassed when
        `deadline` passes first. `max_tokens`: this answer's budget (Ollama's num_predict),
        else RAG_NUM_PREDICT's."""
        return guarded(lambda: self._stream(messages, max_tokens), deadline, self.host)

    def _stream(self, messages: list[dict[str, str]],
                max_tokens: int | None) -> Iterator[Token | Thinking | StreamEnd]:
        got: list[str] = []
        done = False
        filt = ThinkFilter(inside=self._starts_inside())
        try:
            for part in self.client.chat(messages=messages, stream=True,
                                         **self._request(max_tokens)):
                items: list[Token | Thinking] = []
                if part.message.thinking:
                    items.append(Thinking(part.message.thinking))
                items += filt.feed(part.message.content or "")
                if part.done:
                    items += filt.flush()
                for item in items:
                    if isinstance(item, Token):
                        got.append(item.text)
                    yield item
                if part.done:
                    done = True
                    yield StreamEnd(part.done_reason,
                                    token_count(part.prompt_eval_count, self.host, "prompt_eval_count"),
                                    token_count(part.eval_count, self.host, "eval_count"))
        except Exception as exc:
            mapped = self._map(exc)
            if got:  # something arrived: keep it, report the break
                raise StreamBroken("".join(got), str(exc) or type(exc).__name__) from exc
            raise mapped from exc
        if not done:
            raise StreamBroken("".join(got), "no end-of-answer message")

    def complete(self, messages: list[dict[str, str]], format: dict[str, Any] | None = None,  # noqa: A002
                 max_tokens: int | None = None, deadline: Deadline | None = None) -> str:
        """The whole reply at once, reasoning removed; `format`: a JSON schema it must follow."""
        try:
            resp, inside = one(lambda: (self.client.chat(messages=messages, stream=False, format=format,
                                                         **self._request(max_tokens)),
                                        self._starts_inside()), deadline, self.host)
        except Exception as exc:
            raise self._map(exc) from exc
        filt = ThinkFilter(inside=inside)
        items = filt.feed(str(resp.message.content or "")) + filt.flush()
        return "".join(i.text for i in items if isinstance(i, Token))
