"""The prompt fitted to the model's context, and the answer's token budget.

Written by hand: a server cuts a prompt longer than its context without a word (Ollama keeps
the first few tokens and the end: the system prompt and the first sources are lost) or
refuses it (llama.cpp, vLLM), and none of the libraries here fits a prompt of ranked sources
to a window. Ollama has no tokenize endpoint, so tokens are estimated from characters with
the ratios fitted by scripts/fit_prompt_budget.py (rag/corpus/tokens.json: fitted on seeds/ and
SciFact, reported on PubMedQA).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from rag.corpus.tokens import CHARS_PER_TOKEN, LONG_ABSTRACT, MAX_CHARS_PER_TOKEN, at_most
from rag.schema import Source

MESSAGE_TOKENS = 8  # a chat template's markers around each message (<|im_start|>role\n ...)
# The default answer budget: room for a sentence of about 40 tokens (a recorded list line is
# 20 to 45) on every source the prompt gives, and 256 more for a fact answer's two or three
# sentences; -1 (RAG_NUM_PREDICT) lifts it to whatever the context leaves.
BASE_ANSWER, PER_SOURCE = 256, 40
MIN_ANSWER = 128  # what the context must leave the answer, however many sources are left out

Messages = list[dict[str, str]]


def estimate(messages: Messages) -> int:
    """Tokens the prompt has at most, estimated from its characters."""
    return sum(at_most(m["content"]) + MESSAGE_TOKENS for m in messages)


def floor(messages: Messages) -> int:
    """Tokens the prompt has at least: a server that read fewer cut it."""
    return sum(int(len(m["content"]) / MAX_CHARS_PER_TOKEN) for m in messages)


def answer_budget(num_predict: int | None, n_sources: int) -> int | None:
    """Tokens the answer may take: RAG_NUM_PREDICT, else rag's default; None: no limit but
    the context's (-1)."""
    if num_predict == -1:
        return None
    return num_predict or BASE_ANSWER + PER_SOURCE * n_sources


@dataclass
class Fitted:
    """A prompt made to fit: what it holds and what was left out to make it fit."""

    messages: Messages
    window: int | None  # the model's context in tokens (None: not known, nothing fitted)
    prompt_tokens: int  # estimated
    max_tokens: int | None  # the answer's budget, as sent
    wanted: int | None  # the answer's budget before the context had its say
    left_out: list[Source] = field(default_factory=list)
    cut: list[Source] = field(default_factory=list)

    @property
    def context_bound(self) -> bool:
        """Is the answer's budget what the context left, not what was asked?"""
        return self.max_tokens is not None and (self.wanted is None or self.max_tokens < self.wanted)

    def public(self) -> dict[str, object]:
        return {"context": self.window, "prompt_tokens": self.prompt_tokens,
                "max_tokens": self.max_tokens, "left_out": len(self.left_out), "cut": len(self.cut)}

    def notice(self) -> str | None:
        if not (self.left_out or self.cut):
            return None
        parts = []
        if self.left_out:
            names = ", ".join(s.name for s in self.left_out[:5]) + (", ..." if len(self.left_out) > 5 else "")
            parts.append(f"{len(self.left_out)} lowest-ranked source{'s' if len(self.left_out) > 1 else ''} "
                         f"left out ({names})")
        if self.cut:
            parts.append(f"{len(self.cut)} long abstract{'s' if len(self.cut) > 1 else ''} cut short")
        return (f"the prompt was fitted to the model's context of {self.window} tokens (RAG_NUM_CTX, "
                f"or the model's own when smaller): {' and '.join(parts)}")


def _shorten(source: Source, chars: int) -> Source:
    """The source with its abstract cut to at most `chars`, at a sentence's end if one is near."""
    text = source.paper.abstract
    if len(text) <= chars:
        return source
    head = text[:chars]
    stop = max((m.end() for m in re.finditer(r"[.!?](?=\s)", head)), default=0)
    head = head[:stop] if stop > chars // 2 else head.rsplit(" ", 1)[0]
    return replace(source, paper=replace(source.paper, abstract=head.rstrip() + " […]"))


def fit(build: Callable[[list[Source]], Messages], sources: list[Source], window: int | None,
        num_predict: int | None) -> Fitted:
    """The prompt `build` makes of `sources`, made to fit `window` with room for the answer:
    long abstracts are cut first, then the lowest-ranked sources left out (at least one
    stays, cut to fit if it must)."""
    wanted = answer_budget(num_predict, len(sources))
    messages = build(sources)
    tokens = estimate(messages)
    if window is None:
        return Fitted(messages, None, tokens, wanted, wanted)
    reserve = min(wanted or window, max(MIN_ANSWER, window // 4))
    room = window - reserve
    kept, cut = list(sources), []
    if tokens > room:
        shortened = [_shorten(s, LONG_ABSTRACT) for s in kept]
        cut = [s for s, t in zip(kept, shortened, strict=True) if t is not s]
        kept = shortened
        messages = build(kept)
        tokens = estimate(messages)
    left_out: list[Source] = []
    while tokens > room and len(kept) > 1:
        left_out.insert(0, kept.pop())
        messages = build(kept)
        tokens = estimate(messages)
    if tokens > room:  # one source, still too long: its abstract is cut to what fits
        over = math.ceil((tokens - room) * CHARS_PER_TOKEN)
        last = _shorten(kept[0], max(200, len(kept[0].paper.abstract) - over))
        if last is not kept[0] and kept[0] not in cut:
            cut.append(kept[0])
        kept = [last]
        messages = build(kept)
        tokens = estimate(messages)
    cut = [s for s in cut if s.n in {k.n for k in kept}]
    left = max(MIN_ANSWER, window - tokens)
    return Fitted(messages, window, tokens, min(wanted, left) if wanted else left, wanted,
                  left_out, cut)
