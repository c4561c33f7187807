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
_STRONG = r"([A-Z][\w²³⁴⁺]*(?:[A-Z0-9][\w²³⁴⁺]*|-[\w²³⁴⁺]+)(?:-[\w²³⁴⁺]+)*)"
_WORD = r"([A-Z][\w²³⁴⁺]*(?:-[\w²³⁴⁺]+)*)"
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
        r"\b" + _VERBS + r"s?\s+(?:the\s+|a\s+|an\s+)?(?:[A-Z][\w\-]*\s+){1,8}\(([A-Z][\w\-]*[A-Z][\w\-]*)\)"
    ),
    re.compile(r"\b" + _VERBS + r"s?\s+(?:the\s+)?" + _STRONG),
    re.compile(r"\b" + _VERBS + r"s?\s+(?:the\s+)?" + _WORD + r"(?=\s*[,(:;]|\s+(?:a|an|which|that|to)\b)"),
    re.compile(r"\btermed\s+" + _WORD),
    re.compile(_VERBS + r"s?\b[^.]*?\(([A-Z][\w\-]*[A-Z][\w\-]*)\)"),
    re.compile(r"\b" + _STRONG + r",?\s+(?:is\s+)?an?\s+(?:novel|new)\b"),
    re.compile(r"\b" + _STRONG + r"(?:'s|’s) (?:source )?code"),
]
_NOT_NAMES = {"we", "this", "our", "the", "in", "a", "an", "to", "llm", "llms", "dl", "ml", "gpu", "gpus"}


def system_name(abstract: str) -> str | None:
    """The system or method an abstract proposes, if it names one."""
    for pattern in _PATTERNS:
        for m in pattern.finditer(abstract):
            name = m.group(1).strip(" -.")
            if len(name) >= 2 and name.lower() not in _NOT_NAMES:
                return name
    return None


def lead(abstract: str, words: int = 8) -> str:
    parts = abstract.split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


def make_label(title: str | None, abstract: str) -> str:
    return title or system_name(abstract) or lead(abstract)
