"""Text clean-up and naming helpers shared by the parsers."""

from __future__ import annotations

import html
import re
import unicodedata

_SUPERSCRIPT = str.maketrans("0123456789+-−=()n∘", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻⁼⁽⁾ⁿ°")
_SUBSCRIPT = str.maketrans("0123456789+-−=()", "₀₁₂₃₄₅₆₇₈₉₊₋₋₌₍₎")
_GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "zeta": "ζ", "eta": "η", "theta": "θ", "vartheta": "ϑ", "iota": "ι", "kappa": "κ",
    "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ",
    "tau": "τ", "upsilon": "υ", "phi": "φ", "varphi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω",
    "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Xi": "Ξ", "Pi": "Π", "Sigma": "Σ",
    "Upsilon": "Υ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω", "partial": "∂", "nabla": "∇",
    "ell": "ℓ", "hbar": "ℏ", "infty": "∞",
}
_COMMANDS = {
    **_GREEK,
    "times": "×", "sim": "~", "approx": "≈", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥",
    "rightarrow": "→", "to": "→", "cdot": "·", "pm": "±", "%": "%",
    "mp": "∓", "div": "÷", "simeq": "≃", "cong": "≅", "equiv": "≡", "propto": "∝", "neq": "≠",
    "ne": "≠", "ll": "≪", "gg": "≫", "sum": "∑", "prod": "∏", "int": "∫", "in": "∈",
    "notin": "∉", "subset": "⊂", "subseteq": "⊆", "supset": "⊃", "supseteq": "⊇", "cup": "∪",
    "cap": "∩", "setminus": "∖", "emptyset": "∅", "varnothing": "∅", "forall": "∀",
    "exists": "∃", "neg": "¬", "land": "∧", "wedge": "∧", "lor": "∨", "vee": "∨",
    "leftarrow": "←", "gets": "←", "Rightarrow": "⇒", "implies": "⇒", "Leftarrow": "⇐",
    "leftrightarrow": "↔", "Leftrightarrow": "⇔", "iff": "⇔", "mapsto": "↦", "circ": "∘",
    "ast": "∗", "star": "⋆", "bullet": "•", "otimes": "⊗", "oplus": "⊕", "odot": "⊙",
    "perp": "⊥", "parallel": "∥", "mid": "|", "vert": "|", "Vert": "‖", "langle": "⟨",
    "rangle": "⟩", "lceil": "⌈", "rceil": "⌉", "lfloor": "⌊", "rfloor": "⌋", "ldots": "…",
    "cdots": "⋯", "dots": "…", "prime": "′", "dagger": "†", "sqrt": "√",
    "quad": " ", "qquad": " ",
    # sizes and styles that only change how the maths is typeset
    **dict.fromkeys(["left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr",
                     "displaystyle", "textstyle", "scriptstyle", "limits", "nolimits"], ""),
}
# Written as words, set apart from the letters around them: n\log n -> n log n
_OPERATORS = frozenset({
    "log", "ln", "lg", "exp", "sin", "cos", "tan", "cot", "sinh", "cosh", "tanh", "arcsin", "arccos",
    "arctan", "max", "min", "sup", "inf", "lim", "liminf", "limsup", "arg", "argmax", "argmin", "det",
    "dim", "ker", "deg", "gcd", "Pr", "mod", "poly", "polylog",
})
_FONTS = r"mathrm|mathbf|mathit|mathsf|mathtt|mathcal|mathscr|mathfrak|boldsymbol|bm|operatorname\*?|" \
         r"text|textbf|textit|textrm|textsf|texttt|emph|mbox"
_OPEN, _CLOSE, _NO_SPACE = "\ue001", "\ue002", "\ue003"  # placeholders while braces go
_DOUBLE_STRUCK = str.maketrans("RNZQC", "ℝℕℤℚℂ")
_ACCENTS = {"hat": "\u0302", "widehat": "\u0302", "tilde": "\u0303", "widetilde": "\u0303",
            "bar": "\u0304", "overline": "\u0305", "vec": "\u20d7", "dot": "\u0307", "ddot": "\u0308"}
_ARG = r"(?:\{([^{}]*)\}|\s*([A-Za-z0-9]))"  # {anything} or one letter or digit
_PLAIN = re.compile(r"[^\s+\-−*/=<>±×·,]+")  # needs no brackets around it beside a slash
_NAMES = "|".join(sorted(_COMMANDS.keys() | _OPERATORS, key=len, reverse=True))
_KNOWN = re.compile(rf"\\({_NAMES})(?![A-Za-z])")
_FONT = re.compile(rf"\\(?:{_FONTS})(?![A-Za-z])" + _ARG)
_BLACKBOARD = re.compile(r"\\mathbb(?![A-Za-z])" + _ARG)
_FRACTION = re.compile(r"\\[dt]?frac(?![A-Za-z])" + _ARG + _ARG)
_ROOT = re.compile(r"√(?:\[([^\]{}]*)\])?" + _ARG)
_ACCENT = re.compile(rf"\\({'|'.join(_ACCENTS)})(?![A-Za-z])" + _ARG)
# inner scripts first (e^{-x^2}); a bracket of ours, ^(ab), is not read again as a script
_SCRIPT = re.compile(r"([\^_])(?:\{([^{}^_]*)\}|(\w|[^\s{}\\^_(]))")


def script(body: str, mark: str) -> str:
    """`body` as a superscript (mark "^") or subscript ("_"): Unicode's raised or lowered
    characters when every character has one (10^-8 -> 10⁻⁸), else the mark and the body,
    bracketed when longer than one character (R^d, x^(ab))."""
    out = body.translate(_SUPERSCRIPT if mark == "^" else _SUBSCRIPT)
    if body and all(a != b for a, b in zip(body, out, strict=True)):
        return out
    return mark + (body if len(body) == 1 else f"({body})")


def _arg(m: re.Match[str], i: int) -> str:
    """The argument matched by the _ARG at group i: braced, or one character."""
    return m.group(i) if m.group(i) is not None else m.group(i + 1) or ""


def _command(m: re.Match[str]) -> str:
    name, text, end = m.group(1), m.string, m.end()
    after = text[end:end + 1]
    if name in _OPERATORS:
        before = text[m.start() - 1:m.start()]
        return (" " if before.isalnum() else "") + name + (" " if after.isalnum() or after == "{" else "")
    if name in _COMMANDS:
        if name in _GREEK and after == " " and text[end + 1:end + 2].isalpha():
            return _COMMANDS[name] + _NO_SPACE  # LaTeX drops that space: \Delta u is Δu
        return _COMMANDS[name]
    # unknown: kept as written, never glued to what follows (\foo{x} -> \foo x, not \foox)
    return m.group(0) + (" " if after.isalnum() or after == "{" else "")


def _fraction(m: re.Match[str]) -> str:
    parts = (_arg(m, 1).strip(), _arg(m, 3).strip())
    return "/".join(p if _PLAIN.fullmatch(p) else f"({p})" for p in parts)


def _root(m: re.Match[str]) -> str:
    index, body = (m.group(1) or "").strip(), _arg(m, 2).strip()
    degree = script(index, "^") if index else ""
    return degree + "√" + (body if not body or _PLAIN.fullmatch(body) else f"({body})")


def _accent(m: re.Match[str]) -> str:
    body = _arg(m, 2)
    return unicodedata.normalize("NFC", body + _ACCENTS[m.group(1)]) if len(body) == 1 else body


def _math(expr: str) -> str:
    """Inline maths as text: symbols in Unicode, \\frac and \\sqrt as a/b and √x, scripts
    raised or lowered where Unicode can; a command not known here stays as written.

    By hand, not pylatexenc's LatexNodes2Text (which rag uses for LaTeX outside maths): in
    maths mode it drops the braces that bound a script ($e^{-x^2}$ -> "e^-x^2", $10^{-8}$ ->
    "10^-8"), glues operators to the letters before them ($O(n\\log n)$ -> "O(nlog n)") and
    drops commands it does not know, where a reader must see what was there."""
    expr = expr.replace(r"\{", _OPEN).replace(r"\}", _CLOSE).replace(r"\|", "‖")
    expr = re.sub(r"\\[,;:> ]", " ", expr).replace(r"\!", "")
    expr = _KNOWN.sub(_command, expr)
    for _ in range(3):  # nested: \frac{1}{\sqrt{n}}
        before = expr
        expr = _FONT.sub(lambda m: _arg(m, 1), expr)
        expr = _BLACKBOARD.sub(lambda m: _arg(m, 1).translate(_DOUBLE_STRUCK), expr)
        expr = _FRACTION.sub(_fraction, expr)
        expr = _ROOT.sub(_root, expr)
        expr = _ACCENT.sub(_accent, expr)
        if expr == before:
            break
    expr = re.sub(r"\\([A-Za-z]+)", _command, expr)
    for _ in range(3):
        before = expr
        expr = _SCRIPT.sub(lambda m: script(_arg(m, 2), m.group(1)), expr)
        if expr == before:
            break
    expr = expr.replace("{", "").replace("}", "").replace(_OPEN, "{").replace(_CLOSE, "}")
    return re.sub(r" {2,}", " ", expr.replace(_NO_SPACE + " ", "").replace(_NO_SPACE, "")).strip()


# The HTML and JATS tags metadata services leave in titles and abstracts (OpenAlex and Semantic
# Scholar titles: <i>, <sub>; Crossref's abstracts: <jats:p>, <jats:italic>; Zotero's rich-text
# titles: <i>, <span class="nocase">), by name: a "<" of the text itself (p<0.05) is no tag.
_TAG_NAMES = (r"p|i|b|u|em|strong|sc|scp|small|span|div|br|a|font|italic|bold|underline|monospace|"
              r"sec|list|list-item|label|abstract|break|math|mi|mo|mn|mrow|mtext")
_TAG = re.compile(rf"</?(?:(?:jats|mml):)?(?:{_TAG_NAMES})(?:\s[^<>]*)?/?>", re.IGNORECASE)
_CLOSING = re.compile(rf"</(?:(?:jats|mml):)?(?:{_TAG_NAMES}|sub|sup|inf|title)>|<br\s*/?>", re.IGNORECASE)
_BLOCK = re.compile(r"</?(?:jats:)?(?:p|div|br|sec|list|list-item|abstract|break)\b", re.IGNORECASE)
_SCRIPT_TAG = re.compile(r"<((?:(?:jats|mml):)?(sub|sup|inf))\b[^<>]*>([^<>]{0,40})</\1>", re.IGNORECASE)
_HEADING = re.compile(r"<((?:jats:)?title)\b[^<>]*>([^<>]{0,80})</\1>\s*", re.IGNORECASE)
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,30});")


def strip_markup(text: str) -> str:
    """The text that HTML or JATS markup marks up (`CO<sub>2</sub>` -> CO₂, a section's
    <jats:title> as "Methods: ", "Abstract" as nothing), its entities decoded (`&amp;` -> &).
    Only text with a closing tag is taken for markup, so an author writing about
    `<div>` elements keeps them."""
    if _CLOSING.search(text):
        text = _SCRIPT_TAG.sub(lambda m: script(m.group(3).strip(), "^" if m.group(2).lower() == "sup" else "_"), text)
        text = _HEADING.sub(lambda m: "" if m.group(2).strip().lower() == "abstract" else f" {m.group(2).strip()}: ", text)
        text = _TAG.sub(lambda m: " " if _BLOCK.match(m.group()) else "", text)
    return _ENTITY.sub(lambda m: html.unescape(m.group()), text) if "&" in text else text


# A `$` that opens a dollar amount opens no maths: "cost $1,200 versus $3,400" (PubMed, RIS,
# OpenAlex... write dollars bare) read as the maths "1,200 versus " and lost both signs. An
# amount is a `$` and a digit whose span up to the next `$` ends in a space or is followed by
# a digit (the next amount); maths is never written so ($10^{-3}$, $2n$ are still maths).
_MATH_SPAN = re.compile(r"\$(?!\d[^$]{0,79}(?:\s\$|\$\d))([^$]{1,80})\$")


def clean_latex(text: str) -> str:
    """Make inline LaTeX readable (Pix$^2$ -> Pix²); leave other text unchanged."""
    if "$" not in text and "\\" not in text and "``" not in text:
        return text
    text = _MATH_SPAN.sub(lambda m: _math(m.group(1)), text)
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
    # "the development of X-Net, a real-time tracking system": the name in apposition to a system noun
    re.compile(r"\b" + _STRONG + r",\s+an?\s+[^.,;()]{0,80}?\b" + _NOUNS + r"\b"),
    re.compile(_VERBS + r"s?\b[^.]{0,300}?\(([A-Z][\w\-]{0,30}[A-Z][\w\-]{0,30})\)"),
    re.compile(r"\b" + _STRONG + r",?\s+(?:is\s+)?an?\s+(?:novel|new)\b"),
    re.compile(r"\b" + _STRONG + r"(?:'s|’s) (?:source )?code"),
]
# Last resort: an abbreviation that spells the initials of the words before it, in a sentence
# that proposes something ("we propose a key-token centric pruning (KTP) scheme").
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
# Initials in a row are a name ("J. R. R. Tolkien", "M. D. Anderson Cancer Center"): no end
# after an initial that another follows, nor after the second of two. One initial alone is
# left to end a sentence: "... in arm A. In arm B ...", "vitamin D. Compared with ...".
_INITIALS_RUN = r"(?<!\b[A-Z]\.\s[A-Z]\.)(?!(?<=\b[A-Z]\.)\s+[A-Z]\.[\s,])"
# A sentence glued to the next by a lost space ("... the dynamic workload.We present Horovod",
# as conference listings copied from PDFs write them) ends there too: a word of small letters,
# its stop, and a capitalised word.
_GLUED = _ABBREV + r"(?<=[a-z]{2}[.!?])(?=[A-Z][a-z])"
_SENTENCE_END = re.compile(_ABBREV + r"(?<=[.!?])" + _INITIALS_RUN + r"\s+(?=[A-Z0-9\"“(])|" + _GLUED)


# A middle initial after a capitalised name ("Edward J. Hu"): no end there either. Python's
# look-behinds are of fixed width, so the pieces are joined after the split.
# The next word must read as a surname, not as a sentence's first word ("Arm A. In arm B").
_MIDDLE_INITIAL = re.compile(r"(?:^|\s)[A-Z][a-z]+\s[A-Z]\.\s*$")
_NAME_NEXT = re.compile(r"\s*([A-Z][a-z]+)")
_SENTENCE_STARTS = frozenset(
    ["a", "an", "the", "in", "on", "at", "of", "for", "to", "from", "by", "with", "as", "we", "our", "this", "these", "those", "it", "its", "they", "their", "there", "here", "however", "but", "and", "or", "in", "to", "when", "while", "after", "before", "since", "if", "although", "thus", "hence", "then", "compared", "all", "each", "both", "most", "some", "such", "no", "not", "one", "two", "three"])


def _names_joined(pieces: list[str]) -> list[str]:
    out: list[str] = []
    for piece in pieces:
        nxt = _NAME_NEXT.match(piece)
        if out and nxt and _MIDDLE_INITIAL.search(out[-1]) and nxt.group(1).lower() not in _SENTENCE_STARTS:
            out[-1] += piece if out[-1].endswith((" ", "\n")) or piece.startswith(" ") else " " + piece
        else:
            out.append(piece)
    return out


def split_sentences(text: str) -> list[str]:
    """Sentences of an abstract or answer; keeps 2.5, e.g., et al., "Oct. 2022" and "Edward
    J. Hu" intact."""
    return [s.strip() for s in _names_joined(_SENTENCE_END.split(text.strip())) if s.strip()]


def sentence_pieces(text: str) -> list[str]:
    """split_sentences' boundaries with each sentence's trailing whitespace kept, so the
    pieces join back to `text` (what llama-index's SentenceSplitter expects of its sentence
    tokenizer)."""
    pieces, at = [], 0
    for m in _SENTENCE_END.finditer(text):
        pieces.append(text[at : m.end()])
        at = m.end()
    pieces.append(text[at:])
    return _names_joined([piece for piece in pieces if piece])


MAX_NAME = 30  # longer short labels are sentences (untitled papers' leads), not names


def short_label(title: str | None, label: str) -> str:
    """What to call a paper in running text: 'Horovod' for 'Horovod: Fast and Easy Distributed…'."""
    if title and ":" in title:
        head = title.split(":", 1)[0].strip()
        if 0 < len(head.split()) <= 3:
            return head
    return label
