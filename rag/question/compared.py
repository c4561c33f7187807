"""What a comparison question asks: several papers side by side ("Compare the speedups of A,
B and C"), and in what respect (a speedup, a memory saving, the datasets)."""

from __future__ import annotations

import re

DEFAULT_ASPECT = "reported results"

# "How does FlexGen compare with Petals?" asks for one paper's result against its baseline
# (a fact question); "How do A, B and C compare?" asks for several papers side by side.
_COMPARISON = re.compile(
    r"""^\W*(?:(?:please|now|can\s+you|could\s+you|would\s+you)\s+)*(?:compare|contrast|tabulate)\b
      | \b(?:in|as|into)\s+a\s+table\b
      | \b(?:a|the)\s+(?:comparison\s+)?table\s+(?:of|comparing|with|showing|for|that|listing)\b
      | \bcomparison\s+table\b | \btable\s+comparing\b
      | ^\W*(?:make|build|give|show|create|draw|produce|generate)\b.{0,40}?\btable\b
      | \bside[-\s]by[-\s]side\b | \bhead[-\s]to[-\s]head\b
      | \bvs\.?(?=\s) | \bversus\b
      | \bhow\s+do\b.{1,200}?\bcompare\b
      | \b(?:compare|comparing)\s+(?:the\s+)?[a-z][\w-]*(?:\s+[a-z][\w-]*)?\s+
        (?:of|reported\s+by|achieved\s+by|across|among|between)\b
    """,
    re.I | re.X,
)

# Quantities a comparison usually asks for: the words that name each in a question, and the
# words by which an abstract's sentence says it reports that quantity.
_KNOWN_ASPECTS = [
    ("speedup", r"speed-?ups?|faster|speed|acceleration",
     r"speed|faster|accelerat|outperform|improve|\btime\b"),
    ("throughput", r"throughputs?", r"throughput|speed|faster|tokens?/s|per\s+second"),
    ("latency", r"latenc(?:y|ies)|response\s+times?", r"latenc|delay|response\s+time|time"),
    ("memory", r"memory|footprints?", r"memory|footprint|[KMG]i?B\b"),
    ("accuracy", r"accurac(?:y|ies)|top-1|f1(?:\s+scores?)?|bleu", r"accura|top-1|F1|BLEU|error"),
    ("energy", r"energy|power(?:\s+efficiency)?", r"energy|power"),
    ("cost", r"costs?|prices?", r"cost|price|\$"),
    ("scalability", r"scal(?:ability|ing(?:\s+efficiency)?)", r"scal"),
]
REPORTS = {name: re.compile(rf"(?i){said}") for name, _, said in _KNOWN_ASPECTS}
_ASPECT_WORDS = re.compile(
    "|".join(f"(?P<a{i}>\\b(?:{asked})\\b)" for i, (_, asked, _) in enumerate(_KNOWN_ASPECTS)), re.I)
# Otherwise the words the question puts where a compared quantity goes.
_NAMED_ASPECT = [
    re.compile(r"\b(?:[Cc]ompar|[Cc]ontrast|[Tt]abulat)\w*\s+(?:the\s+)?(?P<a>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)\s+"
               r"(?:of|reported|achieved|by|across|among|between|for|in|from)\b"),
    re.compile(r"\btheir\s+(?:reported\s+)?(?P<a>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)"),
    re.compile(r"\b(?:on|by|in\s+terms\s+of)\s+(?P<a>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)\s*\??\s*$"),
]
# Words that say how to compare, or what, but not in what respect.
_HOW = re.compile(r"(?i)\b(?:side[-\s]by[-\s]side|head[-\s]to[-\s]head|(?:in|as|into)\s+a\s+table|"
                  r"(?:a\s+)?comparison\s+table|table)\b")
_NOT_ASPECTS = frozenset({
    "the", "and", "their", "paper", "papers", "system", "systems", "work", "works", "abstract",
    "abstracts", "one", "ones"
})
# What is compared without a figure: the row quotes the best sentence, number or not.
_QUALITATIVE = frozenset({
    "approach", "approaches", "method", "methods", "design", "designs", "technique",
    "techniques", "idea", "ideas", "goal", "goals", "contribution", "contributions",
    "architecture", "architectures", "hardware", "platform", "platforms", "model", "models",
    "dataset", "datasets", "setting", "settings", "task", "tasks", "application",
    "applications", "limitation", "limitations", "assumption", "assumptions", "baseline",
    "baselines"
})


def is_comparison(question: str) -> bool:
    """Does the question ask for several papers side by side (a table)?"""
    return bool(_COMPARISON.search(question))


def _singular(phrase: str) -> str:
    *head, last = phrase.split()
    if last.endswith("ies"):
        last = last[:-3] + "y"
    elif last.endswith(("tches", "rches", "nches", "oaches", "shes", "sses", "xes")):
        last = last[:-2]
    elif last.endswith("s") and not last.endswith(("ss", "us", "is")):
        last = last[:-1]
    return " ".join([*head, last])


def aspect(question: str) -> str:
    """What is compared: "speedup", "throughput", ... (DEFAULT_ASPECT when unsaid)."""
    m = _ASPECT_WORDS.search(question)
    if m:
        return _KNOWN_ASPECTS[int(next(k for k, v in m.groupdict().items() if v)[1:])][0]
    question = _HOW.sub(" ", question)
    for pattern in _NAMED_ASPECT:
        for found in pattern.finditer(question):
            words = [w for w in found.group("a").split() if w not in _NOT_ASPECTS]
            if words:
                return _singular(" ".join(words))
    return DEFAULT_ASPECT


def is_quantity(what: str) -> bool:
    return not any(w in _QUALITATIVE for w in what.split())
