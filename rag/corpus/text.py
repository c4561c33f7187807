"""Text clean-up and naming helpers shared by the parsers."""

from __future__ import annotations

import re

_SUPERSCRIPT = str.maketrans("0123456789+-=()n", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿ")
_SUBSCRIPT = str.maketrans("0123456789+-=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎")
_COMMANDS = {
    "times": "×", "sim": "~", "approx": "≈", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥",
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "lambda": "λ",
    "mu": "μ", "sigma": "σ", "pi": "π", "infty": "∞", "rightarrow": "→", "to": "→",
    "cdot": "·", "pm": "±", "%": "%", "ell": "ℓ", "log": "log",
}


def _math(expr: str) -> str:
    def script(m: re.Match[str]) -> str:
        body = m.group(2) or m.group(3)
        table = _SUPERSCRIPT if m.group(1) == "^" else _SUBSCRIPT
        out = body.translate(table)
        return out if all(c not in out for c in body if c.isalnum()) else m.group(1) + body

    expr = re.sub(r"\\(?:mathrm|text|textbf|mathbf|mathit|emph|mathcal)\{([^{}]*)\}", r"\1", expr)
    expr = re.sub(r"\\([A-Za-z]+|%)", lambda m: _COMMANDS.get(m.group(1), m.group(1)), expr)
    expr = re.sub(r"([\^_])(?:\{([^{}]*)\}|(\w))", script, expr)
    return expr.replace("{", "").replace("}", "").strip()


def clean_latex(text: str) -> str:
    """Make inline LaTeX readable (AdaCM$^2$ -> AdaCM²); leave other text unchanged."""
    if "$" not in text and "\\" not in text and "``" not in text:
        return text
    text = re.sub(r"\$([^$]{1,80})\$", lambda m: _math(m.group(1)), text)
    for _ in range(3):  # nested \textbf{\underline{N}}
        text = re.sub(r"\\(?:textbf|textit|emph|underline|texttt|mathrm|text)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\([_&#%$])", r"\1", text)
    text = text.replace("``", "“").replace("''", "”")
    return re.sub(r"\\(times|sim|approx|%)\b", lambda m: _COMMANDS[m.group(1)], text)


# A name-like token: starts upper-case, and is an acronym, CamelCase, or carries digits/hyphens.
# Quantifiers are bounded and a name must end at a word end: unbounded, nested `\w*` made
# these patterns take quadratic time (minutes) on a long run of capitals in a huge abstract.
_C = r"[\w²³⁴⁺]"
_STRONG = (
    rf"([A-Z]{_C}{{0,30}}(?:[A-Z0-9]{_C}{{0,30}}|-{_C}{{1,30}})(?:-{_C}{{1,30}}){{0,4}})(?!{_C})"
)
_WORD = rf"([A-Z]{_C}{{0,30}}(?:-{_C}{{1,30}}){{0,4}})(?!{_C})"
_VERBS = r"(?:propose|present|introduce|design|develop|build|implement|describe|contribute)"
_NOUNS = (
    r"(?:framework|system|method|approach|scheme|technique|tool|library|scheduler|compiler|"
    r"algorithm|platform|model|engine|runtime|language|architecture|benchmark|initiative|strategy)"
)
# Tried in order: the more explicit the naming, the earlier.
_PATTERNS = [
    re.compile(r"\b(?:dubbed|namely|called|named|coined)\s+" + _WORD),
    re.compile(r"\b" + _NOUNS + r",?\s+" + _STRONG + r"(?=\s*[,(:;.]|\s+(?:which|that|to|for|is)\b)"),
    re.compile(r"\b" + _NOUNS + r",?\s+" + _WORD + r"(?=\s*[,(:;]|\s+(?:which|that)\b)"),
    re.compile(
        r"\b" + _VERBS
        + r"s?\s+(?:the\s+|a\s+|an\s+)?(?:[A-Z][\w\-]{0,30}\s+){1,8}\(([A-Z][\w\-]{0,30}[A-Z][\w\-]{0,30})\)"
    ),
    re.compile(r"\b" + _VERBS + r"s?\s+(?:the\s+)?" + _STRONG),
    re.compile(r"\b" + _VERBS + r"s?\s+(?:the\s+)?" + _WORD + r"(?=\s*[,(:;]|\s+(?:a|an|which|that|to)\b)"),
    re.compile(r"\btermed\s+" + _WORD),
    # "the development of RT-HARE, a real-time HAR system": the name in apposition to a system noun
    re.compile(r"\b" + _STRONG + r",\s+an?\s+[^.,;()]{0,80}?\b" + _NOUNS + r"\b"),
    re.compile(_VERBS + r"s?\b[^.]{0,300}?\(([A-Z][\w\-]{0,30}[A-Z][\w\-]{0,30})\)"),
    re.compile(r"\b" + _STRONG + r",?\s+(?:is\s+)?an?\s+(?:novel|new)\b"),
    re.compile(r"\b" + _STRONG + r"(?:'s|’s) (?:source )?code"),
]
# Last resort: an abbreviation that spells the initials of the words before it, in a sentence
# that proposes something ("we propose a VIP-token centric compression (Vcc) scheme").
_INITIALS = re.compile(
    _VERBS + r"s?\b[^.]{0,300}?(?<![\w\-])((?:[\w\-]{1,40}\s+){1,8})\(([A-Z][A-Za-z0-9]{1,9})\)"
)
MAX_SCAN = 20_000
_NOT_NAMES = {"we", "this", "our", "the", "in", "a", "an", "to", "llm", "llms", "dl", "ml", "gpu", "gpus"}


def system_name(abstract: str) -> str | None:
    """The system or method an abstract proposes, if it names one."""
    abstract = abstract[:MAX_SCAN]  # longer texts are rejected as abstracts anyway
    for pattern in _PATTERNS:
        for m in pattern.finditer(abstract):
            name = m.group(1).strip(" -.")
            if len(name) >= 2 and name.lower() not in _NOT_NAMES:
                return name
    for m in _INITIALS.finditer(abstract):
        words, abbrev = m.group(1).split(), m.group(2)
        initials = "".join(w[0] for w in words[-len(abbrev):]).lower()
        if len(words) >= len(abbrev) and initials == abbrev.lower():
            return abbrev
    return None


def lead(abstract: str, words: int = 8) -> str:
    parts = abstract.split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


def make_label(title: str | None, abstract: str) -> str:
    return title or system_name(abstract) or lead(abstract)


# Words whose period ends no sentence ("As of Oct. 2022, ...", "approx. 3x"): each its own
# look-behind, with its period (the look-behinds stand after it), since Python's must be of
# fixed width.
_NOT_ENDS = ("e\\.g", "i\\.e", "et al", "vs", "Fig", "Figs", "Eq", "Eqs", "No", "Nos", "Sec", "Tab",
             "Ref", "Refs", "cf", "approx", "resp", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug",
             "Sep", "Sept", "Oct", "Nov", "Dec")
_ABBREV = "".join(rf"(?<!\b{w}\.)" for w in _NOT_ENDS)
_SENTENCE_END = re.compile(_ABBREV + r"(?<=[.!?])\s+(?=[A-Z0-9\"“(])")


def split_sentences(text: str) -> list[str]:
    """Sentences of an abstract or answer; keeps 3.76, e.g., et al. and "Oct. 2022" intact."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def sentence_pieces(text: str) -> list[str]:
    """split_sentences' boundaries with each sentence's trailing whitespace kept, so the
    pieces join back to `text` (what llama-index's SentenceSplitter expects of its sentence
    tokenizer)."""
    pieces, at = [], 0
    for m in _SENTENCE_END.finditer(text):
        pieces.append(text[at : m.end()])
        at = m.end()
    pieces.append(text[at:])
    return [piece for piece in pieces if piece]


def short_label(title: str | None, label: str) -> str:
    """What to call a paper in running text: 'Tutel' for 'Tutel: Adaptive Mixture-of-Experts…'."""
    if title and ":" in title:
        head = title.split(":", 1)[0].strip()
        if 0 < len(head.split()) <= 3:
            return head
    return label
