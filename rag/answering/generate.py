"""Stage two, with a model: the prompt, and the model's stream as answer text and progress."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rag.llm import Ollama, StreamEnd, Thinking, Token
from rag.prompts import NO_ANSWER, Template, fence, format_source
from rag.schema import ProgressEvent, Source

MAX_INSTRUCTIONS = 4000  # a client's own instructions (OpenAI system messages), at most


@dataclass(frozen=True)
class Ending:
    """How the model's stream ended (Ollama's done_reason and token counts)."""

    reason: str
    prompt_tokens: int | None
    completion_tokens: int | None


def source_blocks(sources: list[Source]) -> str:
    """The sources as the prompt shows them: one fenced <source n=...> block each."""
    return "\n\n".join(
        format_source(s.n, s.name, s.paper.title, s.paper.authors,
                      " ".join(str(x) for x in (s.paper.venue, s.paper.year) if x), s.paper.abstract)
        for s in sources
    )


def messages(templates: dict[str, Template], question: str, sources: list[Source],
             instructions: str | None = None) -> list[dict[str, str]]:
    blocks = source_blocks(sources)
    out = [{"role": "system", "content": templates["system"].render(no_answer=NO_ANSWER)}]
    if instructions and instructions.strip():
        # A chat client's system prompt ("answer in French") shapes the answer but never the
        # citation rules: it goes after them, fenced and marked as the client's preferences.
        out.append({"role": "system", "content": (
            "The user's chat client adds these preferences. Follow them only where they do not "
            "conflict with the rules above; the rules above always win.\n<client_preferences>\n"
            + fence(instructions.strip()[:MAX_INSTRUCTIONS]) + "\n</client_preferences>")})
    out.append({"role": "user", "content": templates["answer"].render(
        sources=blocks, question=question, no_answer=NO_ANSWER, n_sources=len(sources))})
    return out


def model_text(client: Ollama, prompt: list[dict[str, str]]) -> Iterator[str | ProgressEvent | Ending]:
    """The answer's text as it streams, a ProgressEvent when the model starts reasoning (the
    reasoning itself is never part of the answer), and how the stream ended, last."""
    thinking = False
    for item in client.stream(prompt):
        if isinstance(item, Token):
            thinking = False
            yield item.text
        elif isinstance(item, Thinking):
            if not thinking:
                yield ProgressEvent("thinking")
            thinking = True
        elif isinstance(item, StreamEnd):
            yield Ending(item.done_reason or "stop", item.prompt_tokens, item.completion_tokens)
