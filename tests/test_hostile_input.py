"""Hostile input to the BibTeX and arXiv-snapshot readers and to the citation exports: each bad
record is refused alone, with file and line, and nothing written can be turned into more
fields or records than the paper has."""

from __future__ import annotations

import json
from pathlib import Path

import bibtexparser
import pytest
import rispy

from rag.corpus import Restrict, read_file
from rag.corpus.arxiv import MAX_LINE_BYTES
from rag.corpus.bibtex_macros import MAX_DEPTH, MAX_FIELD_CHARS
from rag.corpus.paper import Paper
from rag.errors import InputError
from rag.export import to_bibtex, to_csl_json, to_ris
from tests.conftest import run_rag

ABSTRACT = "We propose a scheduler that overlaps communication with computation on GPU clusters."


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def string_bomb(fan_out: int, levels: int) -> str:
    """@strings that concatenate the one below `fan_out` times, `levels` deep."""
    lines = ['@string{s0 = "aaaaaaaaaa"}']
    lines += [f"@string{{s{i} = " + " # ".join([f"s{i - 1}"] * fan_out) + "}" for i in range(1, levels + 1)]
    lines.append(f"@article{{bomb, title = {{Bomb}}, abstract = s{levels} # s{levels}}}")
    lines.append(f"@article{{fine, title = {{Fine}}, abstract = {{{ABSTRACT}}}}}")
    return "\n".join(lines) + "\n"


# -- BibTeX -----------------------------------------------------------------------------------


def test_string_expansion_bomb_refuses_its_entry_with_file_and_line(tmp_path: Path) -> None:
    # 2.2 KB that expanded to over 640 MB (ten-fold fan-out): now refused while expanding
    path = write(tmp_path, "bomb.bib", string_bomb(10, 8))
    assert path.stat().st_size < 3000
    result = read_file(path)
    assert [p.title for p in result.papers] == ["Fine"]
    [problem] = result.problems
    assert problem.line == 10 and "bomb.bib:10" in str(problem)
    assert f"{MAX_FIELD_CHARS:,} characters" in problem.message


def test_string_loops_and_deep_chains_are_refused_not_garbage(tmp_path: Path) -> None:
    chain = [f"@string{{m{i} = m{i + 1}}}" for i in range(MAX_DEPTH + 2)] + [f'@string{{m{MAX_DEPTH + 2} = "x"}}']
    text = "\n".join([
        "@string{a = b # { and }}", "@string{b = a}",
        "@article{loop, title = {Loop}, abstract = a}",
        *chain,
        "@article{deep, title = {Deep}, abstract = m0}",
        f"@article{{fine, title = {{Fine}}, abstract = {{{ABSTRACT}}}}}",
    ])
    result = read_file(write(tmp_path, "loops.bib", text))
    assert [p.title for p in result.papers] == ["Fine"]
    messages = {p.line: p.message for p in result.problems}
    assert "refers to itself" in messages[3]
    assert f"more than {MAX_DEPTH} deep" in messages[4 + len(chain)]


def test_strings_within_limits_still_expand(tmp_path: Path) -> None:
    text = ('@string{pvldb = "Proc. VLDB Endow."}\n@string{sys = "sys" # "tems"}\n'
            '@article{ok, title = {On } # sys, journal = pvldb # " 16(4)", year = 2023,\n'
            f'  abstract = {{{ABSTRACT}}}}}\n')
    [paper] = read_file(write(tmp_path, "ok.bib", text)).papers
    assert (paper.title, paper.venue) == ("On systems", "Proc. VLDB Endow. 16(4)")


def test_a_percent_line_inside_a_field_is_text_and_loses_no_entry(tmp_path: Path) -> None:
    text = (
        "% a comment line\n"
        "% @article{gone, title = {Commented out}, abstract = {not a paper}}\n"
        "@article{one, title = {One},\n  abstract = {Our method gains\n% 5 points over baseline.\n}}\n"
        '@article{two, title = {Two},\n  abstract = "It is fast,\n  % 7 points better\n  and small."}\n'
        f"@article{{three, title = {{Three}}, abstract = {{{ABSTRACT}}}}}\n"
    )
    result = read_file(write(tmp_path, "percent.bib", text))
    assert result.problems == []
    by_title = {p.title: p.abstract for p in result.papers}
    assert list(by_title) == ["One", "Two", "Three"]
    assert by_title["One"] == "Our method gains % 5 points over baseline."
    assert "% 7 points better" in by_title["Two"]


def test_deeply_nested_braces_in_bibtex_are_one_entrys_error(tmp_path: Path) -> None:
    deep = "{" * 400 + "x" + "}" * 400
    text = (f"@article{{deep, title = {{{deep}}}, abstract = {{{ABSTRACT}}}}}\n"
            f"@article{{fine, title = {{Fine}}, abstract = {{{ABSTRACT} Second.}}}}\n")
    result = read_file(write(tmp_path, "deep.bib", text))
    assert [p.title for p in result.papers] == ["Fine"]
    assert [p.line for p in result.problems] == [1]


# -- arXiv snapshot ---------------------------------------------------------------------------


def record(ident: str, title: str = "A title", **extra: object) -> str:
    obj = {"id": ident, "title": title, "abstract": ABSTRACT, "categories": "cs.DC",
           "versions": [{"version": "v1", "created": "Mon, 2 Oct 2023 10:00:00 GMT"}],
           "authors_parsed": [["Doe", "Jane", ""]], **extra}
    return json.dumps(obj)


def test_deep_latex_nesting_in_a_snapshot_line_is_that_lines_error(tmp_path: Path) -> None:
    nested = "{" * 250 + "x" + "}" * 250
    lines = [record("2310.00001"), record("2310.00002", nested), record("2310.00003")]
    path = write(tmp_path, "snap.json", "\n".join(lines) + "\n")
    result = read_file(path)
    assert [p.arxiv_id for p in result.papers] == ["2310.00001", "2310.00003"]
    [problem] = result.problems
    assert problem.line == 2 and "nested too deeply" in problem.message
    # the CLI says so in one line and --skip-bad keeps the rest
    done = run_rag("ingest", "--skip-bad", str(path), cwd=tmp_path, env={"RAG_HOME": str(tmp_path / ".rag")})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "snap.json:2" in done.stderr


def test_an_overlong_snapshot_line_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    huge = record("2310.00002", abstract="word " * (MAX_LINE_BYTES // 5 + 10))
    path = write(tmp_path, "snap.json", "\n".join([record("2310.00001"), huge, record("2310.00003")]) + "\n")
    result = read_file(path)
    assert [p.arxiv_id for p in result.papers] == ["2310.00001", "2310.00003"]
    assert [p.line for p in result.problems] == [2]
    assert "over 1 MB" in result.problems[0].message


def test_undecodable_lines_count_toward_the_bad_line_stop(tmp_path: Path) -> None:
    lines = [record("2310.00001").encode()] + [b"\xff\xfe garbage"] * 1500
    result = read_file(write(tmp_path, "snap.json", b"\n".join(lines) + b"\n"))
    assert len(result.problems) == 1001
    assert "stopped reading after 1000 bad lines" in result.problems[-1].message


@pytest.mark.parametrize("since", ["2023-13", "2023-06-31", "2023-00", "0000-02-30"])
def test_since_must_be_a_real_date(since: str) -> None:
    with pytest.raises(InputError, match="is not a date"):
        Restrict.parse((), since)


def test_an_empty_category_is_refused_not_everything() -> None:
    with pytest.raises(InputError, match="--category is empty"):
        Restrict.parse(("cs.DC", " "), None)


# -- values checked on the way in -------------------------------------------------------------


def test_jsonl_doi_and_date_that_are_none_are_dropped_with_a_warning(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    rows = [{"abstract": ABSTRACT, "title": "Bad", "doi": "10.1/x}, title = {Hacked}", "date": "2023-13-45"},
            {"abstract": ABSTRACT + " Two.", "title": "Good", "doi": "https://doi.org/10.1145/3600006.3613139",
             "date": "2023-10-02"}]
    path = write(tmp_path, "p.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    bad, good = read_file(path).papers
    assert (bad.doi, bad.date) == (None, None)
    assert (good.doi, good.date) == ("10.1145/3600006.3613139", "2023-10-02")
    assert "p.jsonl:1: DOI" in caplog.text and "p.jsonl:1: date '2023-13-45'" in caplog.text


# -- exports ----------------------------------------------------------------------------------


def hostile_papers() -> list[Paper]:
    """As an index from before values were checked may hold them."""
    return [
        Paper("a", ABSTRACT, title="Injected", authors=["Jane } Doe", "Max {Braces} Muster"],
              doi="10.1/x}, title = {Hacked}", date="2023-13-45", year=2023),
        Paper("b", ABSTRACT + "\nER  - \nTY  - JOUR", title="Lines\nER  - ", authors=["A\nER  - B"],
              doi="10.1/y\nER  -\nTY  - JOUR\nTI  - Forged", venue="Venue\nER  - ", year=2024),
        *[Paper(f"p{i}", f"{ABSTRACT} {i}.", title=f"Plain {i}", year=2022) for i in range(6)],
    ]


def test_bibtex_export_cannot_gain_fields_and_round_trips_braces() -> None:
    papers = hostile_papers()
    library = bibtexparser.parse_string(to_bibtex(papers))
    assert len(library.entries) == len(papers) and not library.failed_blocks
    first = library.entries[0]
    assert sorted(f.key for f in first.fields) == ["abstract", "author", "rag-id", "title", "year"]
    assert (first["title"], first["rag-id"]) == ("Injected", "a")  # an id not made from the title


def test_bibtex_round_trip_keeps_braces_quotes_and_names(tmp_path: Path) -> None:
    paper = Paper("r", 'A {braced} "quoted" abstract about } schedulers and GPUs.',
                  title='The "Brace" {Test}', authors=["Jane } Doe"], year=2023)
    [back] = read_file(write(tmp_path, "round.bib", to_bibtex([paper]))).papers
    assert (back.title, back.abstract, back.authors) == (paper.title, paper.abstract, ["Jane } Doe"])


def test_ris_export_cannot_gain_records() -> None:
    papers = hostile_papers()
    text = to_ris(papers)
    records = rispy.loads(text)
    assert len(records) == len(papers) == text.count("\nER  - ") + text.startswith("ER  - ")
    assert "doi" not in records[0] and "doi" not in records[1]
    assert "date" not in records[0]  # 2023-13-45 is no date


def test_csl_json_has_no_impossible_dates() -> None:
    items = json.loads(to_csl_json(hostile_papers()))
    assert items[0]["issued"] == {"date-parts": [[2023]]}
    assert "DOI" not in items[0] and "DOI" not in items[1]


# -- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [" sekret", "sekret\n", "\tsekret "])
def test_api_key_with_surrounding_whitespace_is_refused_at_start(tmp_path: Path, key: str) -> None:
    done = run_rag("serve", "--port", "9", cwd=tmp_path, env={"RAG_API_KEY": key, "RAG_HOME": str(tmp_path / ".rag")},
                   timeout=60)
    assert done.returncode == 2
    assert "RAG_API_KEY" in done.stderr and "spaces" in done.stderr
    assert "sekret" not in done.stderr  # the key is not echoed
