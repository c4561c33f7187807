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
    """pylatexenc's LatexNodes2Text with its default macros, bibtexparser's `\\url{x}` -> x,
    `\\href{x}{text}` -> text (x), and
    \\textbraceleft, \\textbraceright, \\textquotedbl, \\textasciicircum, \\textless,
    \\textgreater and \\textbar as the characters they stand for, \\textsuperscript{} and
    \\textsubscript{} raised and lowered, and a bare & as itself."""
    from pylatexenc import latexwalker, macrospec
    from pylatexenc.latex2text import (
        LatexNodes2Text,
        MacroTextSpec,
        SpecialsTextSpec,
        get_default_latex_context_db,
    )

    from rag.corpus.text import script

    # \textsuperscript{-3} and \textsubscript{2}: what Zotero, publishers' BibTeX and arXiv
    # authors write for <sup> and <sub>; pylatexenc knows neither, so "10\textsuperscript{-3}"
    # read "10-3". Raised and lowered as PubMed's <sup> and <sub> are (script).
    walker = latexwalker.get_default_latex_context_db()
    # \href{url}{text} too: pylatexenc's text for it reads two arguments its parser never
    # gives it (IndexError), so a record with a link was "LaTeX that cannot be read"
    walker.add_context_category("rag", prepend=True, macros=[
        macrospec.MacroSpec("textsuperscript", "{"), macrospec.MacroSpec("textsubscript", "{"),
        macrospec.MacroSpec("href", "{{")])

    def args(n: Any, l2tobj: Any) -> list[str]:  # those given: `\href{x}` at a line's end has one
        return [l2tobj.nodelist_to_text([a]).strip() for a in (n.nodeargd.argnlist if n.nodeargd else [])
                if a is not None]

    def scripted(n: Any, l2tobj: Any) -> str:
        body = "".join(args(n, l2tobj))
        return script(body, "^" if n.macroname == "textsuperscript" else "_") if body else ""

    def linked(n: Any, l2tobj: Any) -> str:
        url, *text = args(n, l2tobj) or [""]
        return f"{text[0]} ({url})" if text and text[0] != url else url

    class Decoder(LatexNodes2Text):  # type: ignore[misc]
        def latex_to_text(self, latex: str, **parse_flags: Any) -> str:
            return str(super().latex_to_text(latex, latex_context=walker, **parse_flags))

    context = get_default_latex_context_db()
    context.add_context_category("rag", prepend=True, macros=[
        MacroTextSpec("url", simplify_repl="%s"),
        MacroTextSpec("href", simplify_repl=linked),
        MacroTextSpec("textbraceleft", simplify_repl="{"),
        MacroTextSpec("textbraceright", simplify_repl="}"),
        MacroTextSpec("textquotedbl", simplify_repl='"'),
        # pylatexenc reads it as "ˆ" (U+02C6), a look-alike: an exported O(T^{-1}) came back changed
        MacroTextSpec("textasciicircum", simplify_repl="^"),
        # and this as "˙" (U+02D9, a dot above): Zotero writes every "·" so ("kg·day" read "kg˙day")
        MacroTextSpec("textperiodcentered", simplify_repl="·"),
        # Zotero's BibTeX export writes every <, > and | so (its alwaysMap), Mendeley's too;
        # pylatexenc knows none of them and dropped them: "p {\textless} 0.05" read "p 0.05"
        MacroTextSpec("textless", simplify_repl="<"),
        MacroTextSpec("textgreater", simplify_repl=">"),
        MacroTextSpec("textbar", simplify_repl="|"),
        # JabRef's LaTeX encoding of "−" (U+2212): dropped, "{\textminus}80 °C" read "80 °C"
        MacroTextSpec("textminus", simplify_repl="−"),
        MacroTextSpec("textunderscore", simplify_repl="_"),
        # pylatexenc drops these with what they hold (its parser knows their argument, its text
        # maker does not): "we release \texttt{torchgpipe}" read "we release"
        *(MacroTextSpec(name, discard=False) for name in ("texttt", "textsf", "textup", "textmd", "mbox")),
        MacroTextSpec("texorpdfstring", simplify_repl="%(1)s"),
        MacroTextSpec("LaTeX", simplify_repl="LaTeX"),
        MacroTextSpec("TeX", simplify_repl="TeX"),
        MacroTextSpec("textsuperscript", simplify_repl=scripted),
        MacroTextSpec("textsubscript", simplify_repl=scripted),
    ], specials=[
        # a table's column separator to pylatexenc, which made it spaces; in a title or an
        # abstract it is an ampersand ("Q&A", Crossref's "&amp;" and "&lt;", read later)
        SpecialsTextSpec("&", simplify_repl="&"),
    ])
    return Decoder(latex_context=context, **options)


def decode(latex: Any, text: str) -> str:
    """`text` decoded by `latex` (a decoder()); any failure of the decoder is a LatexError."""
    try:
        return str(latex.latex_to_text(text))
    except RecursionError:
        raise LatexError("LaTeX groups nested too deeply to read") from None
    except Exception as exc:  # pylatexenc raises its own and bare errors on odd input
        raise LatexError(f"LaTeX that cannot be read ({type(exc).__name__}: {str(exc)[:80]})") from None
