"""The one module that talks to Ollama; maps its failures to RagErrors."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from collections.abc import Iterator
from typing import Any

import httpx

from rag.errors import LLMError, LLMTimeout, LLMUnavailable, ModelNotFound

log = logging.getLogger(__name__)


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


class Ollama:
    def __init__(self, host: str, model: str, timeout: float = 120.0, num_ctx: int = 8192) -> None:
        import ollama

        self.host = host
        self.model = model
        self.num_ctx = num_ctx
        self.timeout = timeout
        # A TLS context loads the CA bundle (~30-50 ms per answer); plain http (Ollama's
        # default, also without a scheme) never uses it.
        self.client = ollama.Client(host=host, timeout=timeout,
                                    verify=host.strip().lower().startswith("https://"))

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Ollama:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def options(self) -> dict[str, Any]:
        return {"temperature": 0, "num_ctx": self.num_ctx, "seed": 0}

    def _map(self, exc: BaseException) -> LLMError:
        import ollama

        if isinstance(exc, ollama.ResponseError):
            if exc.status_code == 404:
                return ModelNotFound(f"the model '{self.model}' is not available in Ollama at {self.host}",
                                     f"run `ollama pull {self.model}`, or pick another with --model")
            return LLMError(f"Ollama answered {exc.status_code}: {exc.error}",
                            "check `ollama serve`'s log")
        if isinstance(exc, httpx.TimeoutException):
            return LLMTimeout(f"Ollama at {self.host} did not answer within {self.timeout:.0f} s",
                              "raise RAG_LLM_TIMEOUT, use a smaller model, or use --llm none")
        if isinstance(exc, (httpx.ConnectError, ConnectionError)):
            return LLMUnavailable(f"Ollama is not running at {self.host}",
                                  "start it with `ollama serve` (or set OLLAMA_HOST), or use --llm none")
        return LLMError(f"talking to Ollama failed: {exc}", "check `ollama serve`'s log")

    def check(self) -> dict[str, Any]:
        """Is Ollama up and the model present? Raises the matching error otherwise."""
        try:
            info = self.client.show(self.model)
        except Exception as exc:
            raise self._map(exc) from exc
        return {"model": self.model, "details": getattr(info, "details", None)}

    def version(self) -> str | None:
        try:
            resp = httpx.get(f"{self.host.rstrip('/')}/api/version", timeout=2.0)
            return str(resp.json().get("version"))
        except Exception:
            return None

    def stream(self, messages: list[dict[str, str]]) -> Iterator[Token | Thinking | StreamEnd]:
        """Yield the answer as it arrives; raise StreamBroken if the stream stops early."""
        got: list[str] = []
        done = False
        try:
            for part in self.client.chat(model=self.model, messages=messages, stream=True,
                                         options=self.options):
                token = part.message.content or ""
                if token:
                    got.append(token)
                    yield Token(token)
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

    def complete(self, messages: list[dict[str, str]]) -> str:
        try:
            resp = self.client.chat(model=self.model, messages=messages, stream=False,
                                    options=self.options)
        except Exception as exc:
            raise self._map(exc) from exc
        return str(resp.message.content or "")
