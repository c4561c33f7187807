"""Fuzzing the BibTeX and arXiv-snapshot readers (hypothesis, bounded): whatever the input,
they raise nothing but the documented per-file ParseError and report each bad record as a
ParseError of its own; and no input makes their work grow faster than its size.

Work is counted, not timed: the characters handed to the LaTeX decoder (the step that ran
over 640 MB for a 2.2 KB @string bomb), against the size of the input.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rag.corpus.arxiv
import rag.corpus.bibtex
import rag.corpus.latex
from rag.corpus import read_file
from rag.corpus.bibtex_macros import EXTRA_BUDGET
from rag.errors import ParseError

FUZZ = settings(max_examples=60, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

BIBTEX_ATOMS = [
    "@article{", "@string{", "@comment{", "@preamble{", "@misc(", "@inproceedings{k,\n", "}", "{",
    ")", '"', " # ", "=", ",", "\n", "\n%", "% ", "\\", "\\'e", "\\textbf{", "\\textbraceleft",
    "$x^2$", "~", " and ", "others", "abstract = ", "title = ", "author = ", "eprint = ",
    "doi = ", "date = ", "year = ", "archivePrefix = {arXiv}", "10.1/x}, t = {y", "2023-13-45",
    "s0", "s1", "s0 # s0 # s0", "Jane Doe", "Doe, Jane", '{\\"o}', "\\url{", "\x00", "\ufeff",
    "We propose FastThing, a 3.2x faster scheduler. ",
]
LATEX_ATOMS = ["{", "}", "\\", "$", "%", "~", "\\emph{", "\\'", "\\begin{itemize}", "\\end{x}",
               "\\\\", "^", "_", "&", "#", "\\verb|", "\\newcommand{\\a}{\\a}", "x", " ", "\n"]


def joined(atoms: list[str], max_size: int) -> st.SearchStrategy[str]:
    return st.lists(st.one_of(st.sampled_from(atoms), st.text(max_size=12)), max_size=max_size).map("".join)


@pytest.fixture()
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the characters both readers hand to the LaTeX decoder."""
    count = [0]

    def counting(**options: Any) -> Any:
        real = rag.corpus.latex.decoder(**options)
        decode: Callable[..., str] = real.latex_to_text

        def latex_to_text(text: str, **kw: Any) -> str:
            count[0] += len(text)
            return decode(text, **kw)

        real.latex_to_text = latex_to_text
        return real

    monkeypatch.setattr(rag.corpus.bibtex, "decoder", counting)
    monkeypatch.setattr(rag.corpus.arxiv, "decoder", counting)
    monkeypatch.setattr(rag.corpus.arxiv, "_latex", None)
    yield count


def read(data: bytes, name: str) -> None:
    """read_file on the data: a ParseError for the file as a whole is documented; anything
    else escaping is a bug, and so is a record problem that is not a ParseError."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        try:
            result = read_file(path)
        except ParseError:
            return
        assert all(isinstance(p, ParseError) and p.path for p in result.problems)


@FUZZ
@given(text=joined(BIBTEX_ATOMS, 80))
def test_bibtex_reader_raises_nothing_undocumented(text: str) -> None:
    read(("@article{k,\n" + text).encode("utf-8", "surrogatepass"), "fuzz.bib")


@FUZZ
@given(fan_out=st.integers(2, 30), levels=st.integers(1, 10), uses=st.integers(1, 40),
       piece=st.text(alphabet="ab{}\\'", min_size=1, max_size=40))
def test_bibtex_string_blow_up_work_is_bounded_by_size(decoded: list[int], fan_out: int, levels: int,
                                                       uses: int, piece: str) -> None:
    lines = [f"@string{{s0 = {{{piece}}}}}"]
    lines += [f"@string{{s{i} = " + " # ".join([f"s{i - 1}"] * fan_out) + "}" for i in range(1, levels + 1)]
    lines += [f"@article{{e{n}, title = s{levels} # s{levels}, abstract = s{levels} # {{ x }}}}"
              for n in range(uses)]
    text = "\n".join(lines) + "\n"
    decoded[0] = 0
    read(text.encode(), "bomb.bib")
    # every expanded character is decoded at most once, names once more as their parts
    assert decoded[0] <= 3 * len(text) + EXTRA_BUDGET


LATEX = joined(LATEX_ATOMS, 40)
ANY_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                        max_leaves=8)
RECORD = st.fixed_dictionaries(
    {"id": st.sampled_from(["2310.00001", "math/0703001", "2313.00001", "x", ""]) | st.text(max_size=12)},
    optional={"abstract": LATEX | ANY_JSON, "title": LATEX | ANY_JSON, "comments": LATEX,
              "journal-ref": LATEX, "doi": st.sampled_from(["10.1/x", "10.1/x}\nER  -", ""]) | ANY_JSON,
              "categories": st.text(max_size=12) | ANY_JSON,
              "versions": st.lists(st.fixed_dictionaries({"version": st.text(max_size=3),
                                                          "created": st.text(max_size=30)}), max_size=2) | ANY_JSON,
              "authors_parsed": st.lists(st.lists(LATEX, max_size=3), max_size=3) | ANY_JSON,
              "authors": LATEX | ANY_JSON},
)
LINE = RECORD.map(lambda r: json.dumps(r).encode()) | st.binary(max_size=40) | \
    st.integers(1, 600).map(lambda d: json.dumps({"id": "2310.00002", "abstract": "{" * d + "x" + "}" * d,
                                                  "versions": []}).encode())


@FUZZ
@given(lines=st.lists(LINE, min_size=1, max_size=12))
def test_snapshot_reader_raises_nothing_undocumented(decoded: list[int], lines: list[bytes]) -> None:
    # the first line makes it a snapshot; the rest is anything
    first = json.dumps({"id": "2310.00001", "abstract": "An abstract.", "versions": []}).encode()
    data = b"\n".join([first, *lines]) + b"\n"
    decoded[0] = 0
    read(data, "fuzz.json")
    assert decoded[0] <= len(data)  # each field is decoded once, never expanded
