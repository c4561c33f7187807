"""Follow-up questions: rewrite "what does it report?" into a stand-alone question."""

from __future__ import annotations

import re

from rag.answering.names import CorpusNames
from rag.answering.questions import FOLLOW_UP
from rag.errors import LLMError
from rag.llm import Ollama
from rag.prompts import Template

HISTORY_TURNS = 6  # turns shown to the model when it rewrites a follow-up
# Only the start of a previous turn is scanned for paper names: a question is at most 2,000
# characters and the names an answer is about come first; the rest of a 20,000-character
# message only costs time.
SCAN_CHARS = 4000
_LABEL = re.compile(r"^(?:(?:the\s+)?(?:stand-?\s?alone|rewritten|reformulated)\s+)?question\s*:\s*",
                    re.I)
_MARKUP = " \t*_`\"'“”>"  # bold, quotes, a blockquote's ">"


def _question_line(reply: str) -> str:
    """The question in a model's rewrite: its first line that is no lead-in ("Here is the
    rewritten question:"), without a label ("Stand-alone question: ..."), quotes or bold."""
    for line in reply.splitlines():
        line = _LABEL.sub("", line.strip(_MARKUP)).strip(_MARKUP)
        if line and not line.endswith(":"):
            return line
    return ""


def condense(question: str, history: list[dict[str, str]], names: CorpusNames,
             template: Template, llm: Ollama | None) -> str:
    """The question as it reads without the conversation before it."""
    previous = [m["content"] for m in history if m.get("role") == "user"]
    if not previous:
        return question
    if llm is not None:
        convo = "\n".join(f"{m['role']}: {m['content'][:SCAN_CHARS]}" for m in history[-HISTORY_TURNS:])
        try:
            rewritten = llm.complete([{"role": "user", "content": template.render(
                history=convo, question=question)}]).strip()
            if line := _question_line(rewritten):
                return line
        except LLMError:
            pass
    # Offline: a follow-up that leans on the conversation gets the names of the papers the
    # last question was about (else its words), so retrieval finds the same papers.
    if not (FOLLOW_UP.search(question) or len(question.split()) <= 4):
        return question
    answers = [m["content"] for m in history if m.get("role") == "assistant"]
    named: list[str] = []
    for text in (previous[-1], answers[-1] if answers else ""):
        named = names.mentioned(text[:SCAN_CHARS])[:2]
        if named:
            break
    if named:
        return f"{question.rstrip('?')} ({', '.join(names.display(n) for n in named)})?"
    return f"{previous[-1][:SCAN_CHARS]} {question}"
