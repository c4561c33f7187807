"""The LaTeX decoder both BibTeX and the arXiv snapshot are read with (pylatexenc), knowing the
macros rag's own BibTeX export writes for braces and quotes, so that they survive a round trip.

A decoder failure (pylatexenc recurses once per nested group: 250 nested braces exhaust
Python's stack) is a LatexError, which each reader reports for its one record.
"""

from __future__ import annotations

import re
from typing import Any

BARE_PERCENT = re.compile(r"(?<!\\)%")  # LaTeX's comment sign; in an abstract, a percent sign


class LatexError(ValueError):
    """Text the LaTeX decoder cannot read."""


def decoder(**options: Any) -> Any:
    """pylatexenc's LatexNodes2Text with its default macros, bibtexparser's `\\url{x}` -> x, and
    \\textbraceleft, \\textbraceright, \\textquotedbl, \\textasciicircum, \\textless,
    \\textgreater and \\textbar as the characters they stand for."""
    from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db

    context = get_default_latex_context_db()
    context.add_context_category("rag", prepend=True, macros=[
        MacroTextSpec("url", simplify_repl="%s"),
        MacroTextSpec("textbraceleft", simplify_repl="{"),
        MacroTextSpec("textbraceright", simplify_repl="}"),
        MacroTextSpec("textquotedbl", simplify_repl='"'),
        # pylatexenc reads it as "ˆ" (U+02C6), a look-alike: an exported O(T^{-1}) came back changed
        MacroTextSpec("textasciicircum", simplify_repl="^"),
        # Zotero's BibTeX export writes every <, > and | so (its alwaysMap), Mendeley's too;
        # pylatexenc knows none of them and dropped them: "p {\textless} 0.05" read "p 0.05"
        MacroTextSpec("textless", simplify_repl="<"),
        MacroTextSpec("textgreater", simplify_repl=">"),
        MacroTextSpec("textbar", simplify_repl="|"),
    ])
    return LatexNodes2Text(latex_context=context, **options)


def decode(latex: Any, text: str) -> str:
    """`text` decoded by `latex` (a decoder()); any failure of the decoder is a LatexError."""
    try:
        return str(latex.latex_to_text(text))
    except RecursionError:
        raise LatexError("LaTeX groups nested too deeply to read") from None
    except Exception as exc:  # pylatexenc raises its own and bare errors on odd input
        raise LatexError(f"LaTeX that cannot be read ({type(exc).__name__}: {str(exc)[:80]})") from None
