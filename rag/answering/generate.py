"""Stage two, with a model: the prompt, and the model's stream as answer text and progress."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass

from rag.corpus.words import strip_markers
from rag.llm import ModelClient, StreamEnd, Thinking, Token
from rag.llm.guard import Deadline
from rag.prompts import NO_ANSWER, Template, fence, format_source
from rag.question import Question
from rag.schema import ProgressEvent, Source

MAX_INSTRUCTIONS = 4000  # a client's own instructions (OpenAI system messages), at most
# A loop: one sentence written a third time, or the answer's end the same stretch three times
# over (digits aside: "1. X 2. X 3. X"). Stretches shorter than LOOP_MIN characters repeat in
# real answers ("- [1]", "and [2]"), so they never count.
LOOP_TIMES, LOOP_MIN, LOOP_MAX = 3, 16, 600
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


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


def messages(templates: dict[str, Template], asked: Question, sources: list[Source],
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
        sources=blocks, question=asked.standalone, no_answer=NO_ANSWER, n_sources=len(sources))})
    return out


def model_text(client: ModelClient, prompt: list[dict[str, str]], max_tokens: int | None = None,
               deadline: Deadline | None = None) -> Generator[str | ProgressEvent | Ending, None, None]:
    """The answer's text as it streams, a ProgressEvent when the model starts reasoning (the
    reasoning itself is never part of the answer), and how the stream ended, last. Closing
    it closes the model's stream (the server stops writing)."""
    thinking = False
    stream = client.stream(prompt, max_tokens, deadline)
    try:
        for item in stream:
            if isinstance(item, Token):
                thinking = False
                yield item.text
            elif isinstance(item, Thinking):
                if not thinking:
                    yield ProgressEvent("thinking")
                thinking = True
            elif isinstance(item, StreamEnd):
                yield Ending(item.done_reason or "stop", item.prompt_tokens, item.completion_tokens)
    finally:
        stream.close()  # type: ignore[attr-defined]


def _shape(text: str) -> str:
    return re.sub(r"\d+", "#", strip_markers(text).lower()).strip()


def repeating(text: str) -> str:
    """What the model keeps writing again and again ("" when it does not): a sentence of at
    least LOOP_MIN characters for the LOOP_TIMES-th time, or the same stretch LOOP_TIMES times
    at the end of the text. Written by hand: Ollama and llama.cpp stop a loop only at the
    token limit, and greedy decoding (temperature 0, as rag asks) loops exactly."""
    counts = Counter(s for s in map(_shape, _SENTENCE_END.split(text)) if len(s) >= LOOP_MIN)
    sentence = next((s for s, n in counts.items() if n >= LOOP_TIMES), "")
    if sentence:
        return sentence
    shape = re.sub(r"\d+", "#", text)
    for period in range(LOOP_MIN, min(LOOP_MAX, len(shape) // LOOP_TIMES) + 1):
        tail = shape[-period:]
        if tail.strip() and all(shape[-(k + 1) * period: -k * period] == tail
                                for k in range(1, LOOP_TIMES)):
            return text[-period:].strip()
    return ""
