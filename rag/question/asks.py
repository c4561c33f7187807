"""Where a named paper's abstract says what a question asks of it: the sentence that spells
out its name or an acronym, gives a count, a speed-up factor, where its code lives, or what
it was evaluated on (each None when no sentence does, and the question is left to the
relevance models)."""

from __future__ import annotations

import re

from rag.corpus.acronyms import long_form
from rag.corpus.text import split_sentences
from rag.corpus.words import content_words
from rag.question.patterns import FIGURE, GENERIC, without_names
from rag.relevance.features import URL


def expansion_in(name: str, text: str) -> str | None:
    """The sentence of `text` that spells out `name`: "Low-Rank Adaptation (LoRA)", "a system
    (called PipeDream)", or in apposition, "Low-Rank Adaptation, or LoRA," where the words
    before it hold the name's letters in order (Schwartz and Hearst's long form, as for a
    parenthesis); None if none does."""
    pattern = re.compile(rf"\((?:(?:called|dubbed|named|termed|or|i\.e\.,?)\s+)?{re.escape(name)}s?\)|"
                         rf"(?<![\w-]){re.escape(name)}\s*\((?!\s*\d)[^)]{{6,}}\)")
    apposed = re.compile(rf",\s+or\s+{re.escape(name)}(?![\w-])")
    span = min(len(name) + 5, 2 * len(name))
    for sentence in split_sentences(text):
        if pattern.search(sentence):
            return sentence
        m = apposed.search(sentence)
        if m and long_form(name, " ".join(re.findall(r"\w[\w'-]*", sentence[:m.start()])[-span:])):
            return sentence
    return None


# A word with a capital or digit past its first letter ("MoE", "LoRA", "GNNs"): what a
# "What does ... stand for?" question may ask about besides the paper's name.
_ACRONYM_LIKE = re.compile(r"\b[A-Za-z][a-z]*[A-Z0-9][\w-]*")


def spelled_out(question: str, name: str, text: str) -> str | None:
    """The sentence of `text` that spells out what a "What does ... stand for?" question asks
    about: an acronym the question names ("What does MoE stand for in vLLM?"), or the
    paper's `name`; None if none does. The question's own words first: "What does FL stand
    for?", answered from a paper on SAS, asks for "federated learning (FL)", not "SAS (Split and Sync)"."""
    return next((sent for term in [*asked_acronyms(question), name]
                 if (sent := expansion_in(term, text))), None)


def asked_acronyms(question: str) -> list[str]:
    """The words a "What does MPT stand for?" question may ask to spell out."""
    return _ACRONYM_LIKE.findall(question)


# "How many developers took part in ...?": the words naming what is counted, up to the verb or
# preposition after them.
_HOW_MANY = re.compile(r"\bhow many\s+((?:(?!(?:did|does|do|were|was|are|is|took|can|could|have|has|"
                      r"had|will|would|in|on|of|per|for|to|with|by|at)\b)[\w-]+\s*){1,4})", re.I)


def count_in(question: str, text: str) -> str | None:
    """The sentence of `text` that gives a count of what a "How many ...?" question counts
    ("a user study with 17 software developers", "on 20+ models"): a number, then at most
    three words, then the counted noun; None if no sentence does or nothing is counted."""
    m = _HOW_MANY.search(question)
    if not m:
        return None
    head = m.group(1).split()[-1].lower()
    plural = head.endswith("s") and len(head) > 3
    stem = head[:-1] if plural else head
    # A plural asked is counted in the plural: "How many languages" is not answered by "400
    # language models", where the singular only qualifies another noun.
    pattern = re.compile(rf"(?<![\w.])\d[\d.,]*(?:[kKMB]\b|\+)?(?:\s+[\w-]+){{0,3}}?\s+"
                         rf"{re.escape(stem)}(?:s|es){'' if plural else '?'}(?![\w-])", re.I)
    return next((s for s in split_sentences(text) if pattern.search(s)), None)


# "What speedup does GPipe achieve?", "How much faster is X than Y?": a question for a factor.
_FACTOR_ASK = re.compile(r"\b(?:speed-?ups?|how (?:much )?(?:faster|quicker)|by how much|how fast)\b", re.I)
_FACTOR_WORDS = content_words("speedup speedups speed-up speed faster quicker fast much achieve achieves "
                              "achieved report reports reported give gives get gets obtain obtains "
                              "deliver delivers show shows average what how than does do did is are was were")


def factor_in(question: str, name: str, text: str) -> str | None:
    """The sentence of `text` (the abstract of the paper `name`) that gives the factor a
    "What speedup does GPipe achieve?" question asks for: one with a figure such as "2.5x"
    that holds every other word the question asks with ("over FairScale", "on long
    sequences"); None if no sentence does, so "... on TPUs?" of a paper that reports GPUs
    stays declined."""
    if not _FACTOR_ASK.search(question):
        return None
    wanted = content_words(question) - content_words(name) - _FACTOR_WORDS
    return next((s for s in split_sentences(text)
                 if any(m.group(2).lower() in ("x", "×", "times") for m in FIGURE.finditer(s))
                 and wanted <= content_words(s)), None)


# "Where is ByteScheduler's code?", "Is MLPerf open source?": a question for where a paper's code
# or data lives.
LINK_ASK = re.compile(r"\b(?:code|github|repo|repository|url|link|website|homepage|open[- ]?sourced?|"
                      r"downloads?|downloaded|publicly available)\b|\bwhere\b[^?]*\b(?:find|get|obtain|"
                      r"access)\b", re.I)


def link_in(question: str, text: str) -> str | None:
    """The sentence of `text` that gives where its code or data lives (a URL), when the
    question asks for it; None otherwise."""
    if not LINK_ASK.search(question):
        return None
    return next((s for s in split_sentences(text) if URL.search(s)), None)


# "What is PipeDream evaluated on?", "On which datasets was GShard tested?": a question for what a
# paper measures its work on; the sentence that says so names the evaluation and what it was on.
_EVALUATED_ASK = re.compile(r"\b(?:what|which|how|on)\b.*\b(?:evaluat\w*|test(?:s|ed)?|benchmark(?:s|ed)?|"
                            r"validat\w*|experiment\w*)\b", re.I)
_EVALUATED_SAYS = re.compile(r"\b(?:evaluat\w*|test(?:s|ed)?|benchmark(?:s|ed|ing)?|validat\w*|"
                             r"experiment\w*)\b.*\b(?:on(?! average)|with|using|across)\b", re.I)
_EVALUATED_WORDS = content_words("evaluate evaluated evaluation evaluations evaluating test tests tested "
                                 "testing benchmark benchmarks benchmarked validate validated validation "
                                 "experiment experiments experimental what which how does do did is are "
                                 "was were it its paper system")


def evaluated_in(question: str, name: str, text: str) -> str | None:
    """The sentence of `text` (the abstract of the paper `name`) that says what a "What is
    PipeDream evaluated on?" question asks: one that names its evaluation, what it was on, and every
    other word the question asks with ("datasets", "GPUs"); None if no sentence does, so
    "... tested on TPUs?" of a paper that reports GPUs stays declined. A question for which of
    a kind ("Which datasets ...?") needs a sentence that names one ("CIFAR-10", "V100"), not
    only counts them ("on two popular datasets"). The last such sentence: an abstract reports
    its evaluation at its end, where an earlier one ("our benchmarking results show that data
    loading is the bottleneck") motivates the work."""
    if not _EVALUATED_ASK.search(question):
        return None
    wanted = content_words(question) - content_words(name) - _EVALUATED_WORDS
    return next((s for s in reversed(split_sentences(text))
                 if _EVALUATED_SAYS.search(s) and wanted <= content_words(s)
                 and (not wanted or any(w != name for w in _ACRONYM_LIKE.findall(s)))), None)


def asked_words_in(question: str, name: str, text: str) -> str | None:
    """The sentence of `text` (the abstract of the paper `name`) that holds every word the
    question asks with, beyond the paper's name and the words that ask nothing in particular:
    "What does LoRA freeze?" is answered where the abstract says what it "freezes". None when
    no one sentence holds them all, or the question asks with no such word."""
    wanted = content_words(without_names(question, [name])) - GENERIC
    if not wanted:
        return None
    return next((s for s in split_sentences(text) if wanted <= content_words(s)), None)
