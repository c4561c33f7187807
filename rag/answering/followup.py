"""Follow-up questions: rewrite "what does it report?" into a stand-alone question."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag.answering.names import CorpusNames
from rag.errors import LLMError
from rag.llm import ModelClient
from rag.llm.guard import Deadline
from rag.prompts import NO_ANSWER, Template
from rag.question.patterns import ANOTHER, FOLLOW_UP, names_pattern

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
             template: Template, llm: ModelClient | None, deadline: Deadline | None = None) -> str:
    """The question as it reads without the conversation before it."""
    previous = [m["content"] for m in history if m.get("role") == "user"]
    if not previous:
        return question
    if llm is not None:
        convo = "\n".join(f"{m['role']}: {m['content'][:SCAN_CHARS]}" for m in history[-HISTORY_TURNS:])
        try:
            rewritten = llm.complete([{"role": "user", "content": template.render(
                history=convo, question=question)}], deadline=deadline).strip()
            if line := _question_line(rewritten):
                return line
        except LLMError:
            pass
    return _offline(question, history, names)


SHORT = 4  # words: a question this short leans on the conversation ("Who wrote it?", "Why?")


@dataclass
class _Turn:
    """A user turn as the offline resolver reads it: its words and the papers it is about."""

    text: str
    about: list[str]  # lower-cased names: those it names, else those carried over from before
    carried: bool  # `about` came from the conversation, not from `text`

    def standalone(self, names: CorpusNames) -> str:
        carried = [n for n in self.about if n not in names.mentioned(self.text)] if self.carried else []
        if not carried:
            return self.text
        return f"{self.text.rstrip(' ?')} ({', '.join(names.display(n) for n in carried)})?"


def _offline(question: str, history: list[dict[str, str]], names: CorpusNames) -> str:
    """Offline, a follow-up that leans on the conversation gets the names of the papers the
    question before was about (else those its answer names, else the question before's words),
    so retrieval finds the same papers. The conversation's own follow-ups are resolved first,
    in order: "Who wrote it?" after "And what does it use?" after "What does ByteScheduler do?" is
    about ByteScheduler, not about the words of the turn before."""
    before: _Turn | None = None
    answer = ""
    for m in history[-4 * HISTORY_TURNS:]:
        if m.get("role") == "user":
            before, answer = _resolve(m["content"], before, answer, names), ""
        elif m.get("role") == "assistant":
            answer = m["content"]
    if before is None:
        return question
    return _resolve(question, before, answer, names).standalone(names)


def _resolve(question: str, before: _Turn | None, answer: str, names: CorpusNames) -> _Turn:
    """One user turn, read after the turn `before` (resolved) and the `answer` it got."""
    own = names.mentioned(question[:SCAN_CHARS])
    if before is None:
        return _Turn(question, own, False)
    if own and ANOTHER.search(question) and len(question.split()) <= SHORT:
        # The question before, of the paper this one names: its names swapped for this one's,
        # or this one's put where it carried the conversation's.
        text = before.text
        if not before.carried and before.about:
            pattern = names_pattern(before.about)
            text = pattern.sub(names.display(own[0]), text) if pattern else text
            return _Turn(text, own, False)
        return _Turn(text, own, True)
    if not FOLLOW_UP.search(question) and (own or len(question.split()) > SHORT):
        # a question that names its paper and leans on nothing ("Who wrote Horovod?") stands
        # alone, however short: it was asked as "Who wrote Horovod (ByteScheduler)?"
        return _Turn(question, own, False)
    if before.about:
        # "How does it compare with PipeDream?" after GShard: about both, so that "Which one is
        # faster?" after it still is (it was about GShard alone)
        return _Turn(question, [*before.about[:2], *(n for n in own if n not in before.about[:2])], True)
    # An abstention's closest passages are not what the user was asking about.
    named = [] if answer.startswith(NO_ANSWER) else names.mentioned(answer[:SCAN_CHARS])[:2]
    if named:
        return _Turn(question, named, True)
    return _Turn(f"{before.standalone(names)[:SCAN_CHARS]} {question}", own, False)
