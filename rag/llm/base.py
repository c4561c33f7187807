"""What every model backend shares: the stream's items, reasoning split from the answer,
and how a server's reply is quoted in an error."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from rag.errors import LLMError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from rag.llm.guard import Deadline

OPEN, CLOSE = "<think>", "</think>"


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

    def __init__(self, partial: str, cause: str, server: str = "Ollama",
                 log_hint: str = "check `ollama serve`'s log") -> None:
        super().__init__(f"the answer stream from {server} broke off ({cause})",
                         f"the answer is incomplete; ask again, and {log_hint}")
        self.partial = partial


class ModelClient(Protocol):
    """A model behind a server (rag.llm.ollama.Ollama, rag.llm.openai.OpenAICompatible): what
    the answering stages use, so that they never know which server they talk to."""

    kind: str  # "ollama" or "openai": the answerer is reported as KIND:MODEL
    host: str
    timeout: float
    num_predict: int | None  # the user's answer budget (RAG_NUM_PREDICT); None: rag's default

    @property
    def model(self) -> str: ...

    def check(self) -> dict[str, Any]: ...

    def context_window(self, deadline: Deadline | None = None) -> int | None:
        """Tokens of prompt and answer together that the server gives this model (None: it
        does not say)."""
        ...

    # Every call that waits on the model takes the answer's deadline (rag.llm.guard): it
    # raises DeadlinePassed when the deadline passes, whatever the server sends meanwhile.
    def stream(self, messages: list[dict[str, str]], max_tokens: int | None = None,
               deadline: Deadline | None = None) -> Iterator[Token | Thinking | StreamEnd]: ...

    def complete(self, messages: list[dict[str, str]], format: dict[str, Any] | None = None,  # noqa: A002
                 max_tokens: int | None = None, deadline: Deadline | None = None) -> str: ...

    def close(self) -> None: ...


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


MAX_TOKENS = 10**9  # no server reads or writes more tokens for one answer
MAX_CONTEXT = 1 << 24  # 16M tokens: no model's context is longer; a larger figure is no length


def token_count(value: Any, host: str, name: str) -> int | None:
    """A count of tokens a server sent (`usage.prompt_tokens`, `prompt_eval_count`), checked:
    a whole number from 0 to 10^9, or None when absent; anything else is an error naming the
    server and the field (never NaN in rag's JSON, nor "the server read -5 tokens")."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
        raise LLMError(f"the server at {host} sent `{name}` = {excerpt(repr(value), 40)}, not a token "
                       f"count (0 to {MAX_TOKENS})", "check the server's version and log")
    return value


def context_length(value: Any) -> int | None:
    """A model's context length as a server lists it, or None when it is no such length
    (not a whole number, `true`, under 1, over 16M tokens): rag then keeps RAG_NUM_CTX."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_CONTEXT:
        return None
    return value


M = TypeVar("M", bound="BaseModel")


def parsed(model: type[M], value: Any, host: str) -> M:
    """A server's JSON as a typed model, or rag's error naming the server and the first field
    that is wrong (never a traceback, nor the server's text unquoted)."""
    from pydantic import ValidationError

    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the reply"
        raise LLMError(f"the server at {host} sent `{where}` = {excerpt(repr(first.get('input')), 60)}: "
                       f"{first['msg'].lower()}", "check the server's version and log") from None


def is_html(reply: str) -> bool:
    return re.match(r"\s*<(!doctype|html|head|body)\b", reply, re.I) is not None


def excerpt(reply: str, limit: int = 200) -> str:
    """A server's reply as an error message quotes it: on one line, at most `limit`
    characters, no control characters, and an HTML page by its title (or its text), never its
    markup."""
    if is_html(reply):
        title = re.search(r"<title[^>]*>(.*?)</title>", reply, re.I | re.S)
        words = " ".join(re.sub(r"<[^>]*>", " ", title.group(1) if title else reply).split())
        reply = f'an HTML page ("{words}")' if words else "an HTML page"
    # Control characters (terminal escape codes, NUL) never reach the user's terminal.
    reply = " ".join("".join(c if c.isprintable() else " " for c in reply).split())
    return reply if len(reply) <= limit else reply[: limit - 1] + "…"


def opens_think_in_prompt(template: str) -> bool:
    """Does the model's chat template end the prompt inside a <think> block (QwQ, some R1
    builds)? Then its output starts with reasoning and only a </think> marks the answer."""
    at = template.rfind(OPEN)
    return at >= 0 and CLOSE not in template[at:]


