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
from dataclasses import dataclass
from typing import Any

import httpx

from rag.errors import LLMError, LLMTimeout, LLMUnavailable, ModelNotFound

log = logging.getLogger(__name__)

OPEN, CLOSE = "<think>", "</think>"
_UNSET: Any = object()  # "take it from the process's settings"


@dataclass(frozen=True)
class Token:
    """Answer text from the model, reasoning removed."""

    text: str


@dataclass(frozen=True)
class Thinking:
    """Reasoning text (message.thinking, or a <think> block): never part of the answer."""

    text: str


@dataclass(frozen=True)
class StreamEnd:
    """The model's last message: why it stopped and how many tokens it read and wrote."""

    done_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None


class StreamBroken(LLMError):
    """The answer stream stopped before the model said it was done; `partial` holds what came."""

    def __init__(self, partial: str, cause: str) -> None:
        super().__init__(f"the answer stream from Ollama broke off ({cause})",
                         "the answer is incomplete; ask again, and check `ollama serve`'s log")
        self.partial = partial


def _held_prefix(text: str, tags: tuple[str, ...]) -> int:
    """Length of the longest end of `text` that could be the start of one of `tags`."""
    for size in range(min(len(text), max(map(len, tags)) - 1), 0, -1):
        if any(t.startswith(text[-size:]) for t in tags):
            return size
    return 0


class ThinkFilter:
    """Splits a model's content stream into answer (Token) and reasoning (Thinking).

    Written by hand: Ollama separates reasoning only when asked (`think`) and only for models
    it knows; older servers and other models put it in the content between <think> and
    </think>, with the tags cut anywhere between chunks. Rules: text between <think> and
    </think> is reasoning, wherever it occurs; an unterminated <think> makes the rest
    reasoning; a </think> with no opening tag ends reasoning that began before the stream
    (start with `inside=True` when the model's template opens the block in the prompt;
    otherwise the stray tag is dropped). A tag cut at the end of a chunk is held back until
    the next chunk decides it.
    """

    def __init__(self, inside: bool = False) -> None:
        self.inside = inside
        self._held = ""
        self._trim = inside  # the answer after a reasoning block starts at its first non-space

    def feed(self, text: str) -> list[Token | Thinking]:
        buf, self._held = self._held + text, ""
        out: list[Token | Thinking] = []
        while buf:
            tags = (CLOSE,) if self.inside else (OPEN, CLOSE)
            found = [(buf.find(t), t) for t in tags if t in buf]
            if not found:
                keep = _held_prefix(buf, tags)
                self._emit(out, buf[: len(buf) - keep])
                self._held = buf[len(buf) - keep:]
                break
            at, tag = min(found)
            self._emit(out, buf[:at])
            buf = buf[at + len(tag):]
            self.inside = tag == OPEN
            self._trim = tag == CLOSE
        return out

    def flush(self) -> list[Token | Thinking]:
        """What is held at the end of the stream (a tag that never completed is text)."""
        out: list[Token | Thinking] = []
        self._emit(out, self._held)
        self._held = ""
        return out

    def _emit(self, out: list[Token | Thinking], text: str) -> None:
        if not self.inside and self._trim:
            text = text.lstrip()
            self._trim = not text
        if not text:
            return
        kind = Thinking if self.inside else Token
        if out and isinstance(out[-1], kind):
            out[-1] = kind(out[-1].text + text)
        else:
            out.append(kind(text))


def is_html(reply: str) -> bool:
    return re.match(r"\s*<(!doctype|html|head|body)\b", reply, re.I) is not None


def excerpt(reply: str, limit: int = 200) -> str:
    """A server's reply as an error message quotes it: on one line, at most `limit`
    characters, and an HTML page by its title (or its text), never its markup."""
    if is_html(reply):
        title = re.search(r"<title[^>]*>(.*?)</title>", reply, re.I | re.S)
        words = " ".join(re.sub(r"<[^>]*>", " ", title.group(1) if title else reply).split())
        reply = f'an HTML page ("{words}")' if words else "an HTML page"
    reply = " ".join(reply.split())
    return reply if len(reply) <= limit else reply[: limit - 1] + "…"


def opens_think_in_prompt(template: str) -> bool:
    """Does the model's chat template end the prompt inside a <think> block (QwQ, some R1
    builds)? Then its output starts with reasoning and only a </think> marks the answer."""
    at = template.rfind(OPEN)
    return at >= 0 and CLOSE not in template[at:]


class Ollama:
    """A model on an Ollama server. `think`, `keep_alive`, `num_predict`: Ollama's options
    (RAG_THINK, RAG_KEEP_ALIVE, RAG_NUM_PREDICT when not given; None: not sent)."""

    def __init__(self, host: str, model: str, timeout: float = 120.0, num_ctx: int = 8192, *,
                 think: bool | str | None = _UNSET, keep_alive: float | str | None = _UNSET,
                 num_predict: int | None = _UNSET) -> None:
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
        self._template: str | None = None
        self._lock = threading.Lock()
        # A TLS context loads the CA bundle (~30-50 ms per answer); plain http (Ollama's
        # default, also without a scheme) never uses it.
        self.client = ollama.Client(host=host, timeout=timeout,
                                    verify=host.strip().lower().startswith("https://"))

    @classmethod
    def from_settings(cls, settings: Any, model: str | None = None,
                      timeout: float | None = None) -> Ollama:
        s = settings
        return cls(s.ollama_host, model or s.model, s.llm_timeout if timeout is None else timeout,
                   s.num_ctx, think=s.think, keep_alive=s.keep_alive, num_predict=s.num_predict)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Ollama:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"temperature": 0, "num_ctx": self.num_ctx, "seed": 0}
        if self.num_predict is not None:
            opts["num_predict"] = self.num_predict
        return opts

    def _request(self) -> dict[str, Any]:
        """Keyword arguments of every chat request; unset options are not sent at all."""
        out: dict[str, Any] = {"model": self.model, "options": self.options}
        if self.think is not None:
            out["think"] = self.think
        if self.keep_alive is not None:
            out["keep_alive"] = self.keep_alive
        return out

    def _map(self, exc: BaseException) -> LLMError:
        import ollama

        if isinstance(exc, ollama.ResponseError):
            if exc.status_code == 404:
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

    def check(self) -> dict[str, Any]:
        """Is Ollama up and the model present? Raises the matching error otherwise."""
        try:
            info = self.client.show(self.model)
        except Exception as exc:
            raise self._map(exc) from exc
        with self._lock:
            self._template = str(getattr(info, "template", "") or "")
        return {"model": self.model, "details": getattr(info, "details", None)}

    def _starts_inside(self) -> bool:
        """Whether this model's output begins inside a <think> block (asked once per client;
        a server that cannot say now is taken to mean no, and asked again next time)."""
        with self._lock:
            known = self._template
        if known is None:
            try:
                known = str(self.client.show(self.model).template or "")
            except httpx.TimeoutException as exc:
                # A server that does not say within the timeout will not answer the chat
                # either: report it now, not after waiting the whole timeout a second time.
                raise self._map(exc) from exc
            except Exception as exc:  # the chat request itself reports a real problem
                log.debug("could not read %s's template: %s", self.model, exc)
                return False
            with self._lock:
                self._template = known
        return opens_think_in_prompt(known)

    def stream(self, messages: list[dict[str, str]]) -> Iterator[Token | Thinking | StreamEnd]:
        """Yield the answer and the reasoning apart as they arrive, then one StreamEnd; raise
        StreamBroken (with the answer so far) if the stream stops early."""
        got: list[str] = []
        done = False
        filt = ThinkFilter(inside=self._starts_inside())
        try:
            for part in self.client.chat(messages=messages, stream=True, **self._request()):
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
                    yield StreamEnd(part.done_reason, part.prompt_eval_count, part.eval_count)
        except Exception as exc:
            mapped = self._map(exc)
            if got:  # something arrived: keep it, report the break
                raise StreamBroken("".join(got), str(exc) or type(exc).__name__) from exc
            raise mapped from exc
        if not done:
            raise StreamBroken("".join(got), "no end-of-answer message")

    def complete(self, messages: list[dict[str, str]], format: dict[str, Any] | None = None) -> str:  # noqa: A002 (Ollama's name)
        """The whole reply at once, reasoning removed; `format`: a JSON schema it must follow."""
        try:
            resp = self.client.chat(messages=messages, stream=False, format=format,
                                    **self._request())
        except Exception as exc:
            raise self._map(exc) from exc
        filt = ThinkFilter(inside=self._starts_inside())
        items = filt.feed(str(resp.message.content or "")) + filt.flush()
        return "".join(i.text for i in items if isinstance(i, Token))
