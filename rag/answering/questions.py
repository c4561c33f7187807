"""What a question asks: a list of papers, a quantity, a paper's metadata, a summary."""

from __future__ import annotations

import re

from rag.judge import content_words

_LIST_Q = re.compile(
    r"^\s*(?:which|what|list|name|find|show|are there|give me)\b.{0,40}?\b"
    r"(?:papers|systems|works|methods|approaches|frameworks|abstracts|studies|tools|"
    r"techniques|ones)\b", re.I,
)
_LIST_LEAD = re.compile(
    _LIST_Q.pattern + r"\s*(?:(?:are|is|that|which|do|does|in the corpus|here)\s+)*"
    r"(?:\w+\s+(?:on|about|with|to|for)\s+)?", re.I,
)
FOLLOW_UP = re.compile(r"\b(it|its|it's|they|them|their|this|that|these|those|he|she|the same)\b", re.I)
BY_AUTHOR = re.compile(r"\b(write|writes|wrote|written|authors?|authored|by)\b", re.I)
META = re.compile(
    r"\b(arxiv(?:\s+id)?|doi|authors?|who wrote|written by|venue|published|journal|conference|"
    r"what year|which year|when was)\b", re.I,
)
ARXIV_ID = re.compile(r"\b(\d{4}\.\d{4,5})\b")

QUESTION_STOP = content_words(
    "which what papers systems works methods approaches frameworks abstracts studies tools "
    "does do did paper system target targets about any report reports how much many"
)
# Words that ask nothing in particular: "What does X do?" asks for a summary of X.
GENERIC = content_words(
    "what does do did work works working purpose goal goals main idea ideas about propose "
    "proposes proposed offer offers contribution contributions tell me describe summary summarise "
    "summarize explain overview key point points is are was were it its optimise optimize "
    "optimises optimizes solve solves address addresses tackle tackles aim aims achieve "
    "achieves improve improves"
) | QUESTION_STOP


def without_names(question: str, names: list[str]) -> str:
    """The question with these paper names taken out: what it asks about them."""
    for name in names:
        question = re.sub(rf"(?i)(?<![\w-]){re.escape(name)}(?![\w-])", " ", question)
    return question


def asks_for_summary(question: str, names: list[str]) -> bool:
    """"What is Skrull?", "What does DynaPipe optimise?": a question that names a paper and
    asks nothing in particular about it, which the paper's abstract answers by being one."""
    return bool(names) and not content_words(without_names(question, names)) - GENERIC


def is_list_question(q: str) -> bool:
    return bool(_LIST_Q.search(q))


def topic_of(q: str) -> str:
    """'which systems target long-sequence training?' -> 'target long-sequence training'."""
    return _LIST_LEAD.sub("", q).strip(" ?") or q


def names_pattern(names: list[str]) -> re.Pattern[str] | None:
    """One regex matching any of these names as a whole word: a text is scanned once, not once
    per name (a long message times thousands of names tied up a server worker)."""
    if not names:
        return None
    alternatives = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])", re.I)


def mentions(pattern: re.Pattern[str] | None, text: str) -> list[str]:
    """The names the pattern finds in text, lower-cased, in order of first mention."""
    if pattern is None:
        return []
    found: list[str] = []
    for m in pattern.finditer(text):
        name = m.group(0).lower()
        if name not in found:
            found.append(name)
    return found
