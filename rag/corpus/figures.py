"""What a sentence of an abstract states of a quantity: the figures that can state it (a speedup
is a ratio or a percentage, a memory saving may be in GB), the clause that states the figure,
and the baseline or setting it was measured against ("over FairScale", "on 64 GPUs")."""

from __future__ import annotations

import re

_NUM = r"\d[\d,]*(?:\.\d+)?"
_MULTIPLIER = rf"{_NUM}\s*(?:x|×|X|times|-fold|fold)(?![A-Za-z0-9])"
_PERCENT = rf"{_NUM}\s*(?:%|percent\b)"
# A number standing alone: not part of a name (V100, x86, SwinV2) nor a list mark "(1)", "1)".
_PLAIN = rf"(?<![\w.(\-]){_NUM}(?![\w)])"
_UNITS = {
    "throughput": r"(?:tokens|samples|images|sequences|queries|requests|frames)\s*(?:/|per)\s*(?:s|sec|second)\b|TFLOPS|FPS",
    "memory": r"[KMGT]B\b|[KMGT]iB\b|bytes\b",
    "latency": r"(?:ms|us|µs|s|sec|seconds|minutes|hours)\b",
    "energy": r"(?:J|kJ|W|mW|kWh)\b",
}
_RELATIVE = re.compile(f"{_MULTIPLIER}|{_PERCENT}")
_ANY_FIGURE = re.compile(f"{_MULTIPLIER}|{_PERCENT}|{_PLAIN}")


def figure_pattern(what: str) -> re.Pattern[str]:
    """The figures that can state this quantity: a speedup is a ratio or a percentage, a
    memory saving may also be in GB, an accuracy is any number."""
    if what in ("speedup", "scalability"):
        return _RELATIVE
    if what in _UNITS:
        return re.compile(rf"{_MULTIPLIER}|{_PERCENT}|{_NUM}\s*(?:{_UNITS[what]})")
    return _ANY_FIGURE


# -- condensing a sentence to the clause that states the figure --------------------------------

# "Experimental results demonstrate that X ..." -> "X ...": the claim, not its preamble.
_PREAMBLE = re.compile(
    r"^.{0,200}?\b(?:show|shows|showed|shown|demonstrate|demonstrates|demonstrated|indicate|"
    r"indicates|indicated|reveal|reveals|revealed|confirm|confirms|confirmed|suggest|suggests)"
    r"\s+that\s+", re.S)
# Two sentences glued without a space ("state-of-the-art.Our evaluation") or joined by ";".
_CLAUSE_BREAK = re.compile(r"(?<=[a-z0-9)][.;])\s*(?=[A-Z])|;\s+")
_STOP = r"(?=\s+(?:by|in|on|at|for|when|while|across|respectively|and\s+(?:about\s+|up\s+to\s+)?\d)\b|\s*[,;()]|\.?\s*$)"
_BASELINES = [
    re.compile(r"\b(?:over|than|compared\s+(?:to|with)|relative\s+to|against|versus|vs\.?)\s+"
               rf"(?!\d|up\s+to\b)(?P<b>(?:the\s+)?[^,;()]+?){_STOP}", re.I),
    re.compile(rf"\b(?:outperforms?|outperformed|beats?|surpass(?:es|ed)?)\s+(?P<b>[^,;()]+?){_STOP}", re.I),
]
_SETTING = re.compile(
    r"\b(?:on|with|using|across|over|at)\s+(?:a\s+scale\s+of\s+)?(?P<b>(?:up\s+to\s+)?\d[\d,]*(?:\s+(?:and|to|-)\s+\d[\d,]*)?"
    r"\s+(?:[A-Z][\w-]*\d[\w-]*\s+)?(?:GPUs?|CPUs?|TPUs?|nodes|machines|cores|devices|servers|workers))",
)


def clause_stating(sentence: str, figure: re.Pattern[str]) -> str:
    """The part of the sentence that states the figure: its preamble cut, and of a sentence
    that holds two claims, the one with the figure. Only cut, never reworded: the cell stays
    a quote of the abstract."""
    parts = [p for p in _CLAUSE_BREAK.split(sentence) if p.strip()]
    text = next((p for p in parts if figure.search(p)), sentence).strip()
    m = _PREAMBLE.match(text)
    if m and figure.search(text[m.end():]):
        text = text[m.end():]
    return text.rstrip(" .")


def baseline_of(clause: str) -> str:
    """Against what and where the figure was measured ("over FairScale", "on 64 GPUs")."""
    found: list[str] = []
    for pattern in [*_BASELINES, _SETTING]:
        for m in pattern.finditer(clause):
            b = m.group("b").strip(" .")
            if b and not any(b in f or f in b for f in found):
                found.append(b)
    return "; ".join(found)


def words_pattern(what: str) -> re.Pattern[str]:
    """A sentence uses the words of "dataset size" if it says "dataset" or "size" (or "sizes")."""
    stems = [re.escape(w[:6]) for w in re.findall(r"[a-z][\w-]{2,}", what.lower())]
    return re.compile(rf"(?i)\b(?:{'|'.join(stems)})" if stems else r"(?!)")
