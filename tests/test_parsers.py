"""Each layout trap, with small inline texts, and property tests for the parser as a whole."""

from __future__ import annotations

import json
import tempfile
from itertools import islice
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.corpus import FileResult, merge_papers, read_file
from rag.corpus.formats import split_arxiv_id
from rag.errors import InputError, ParseError

SCIFACT = Path("/work/shared/benchmarks/scifact/corpus.jsonl")


def parse(tmp_path: Path, text: str | bytes, name: str = "dump.txt") -> FileResult:
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return read_file(path)


def only_problem(result: FileResult) -> ParseError:
    assert len(result.problems) == 1, [str(p) for p in result.problems]
    return result.problems[0]


# -- arXiv listing ---------------------------------------------------------------------------


def test_arxiv_listing_id_glued_to_the_next_abstract(tmp_path: Path) -> None:
    r = parse(tmp_path, (
        "LLM development in datacenters is hard. We characterise it.\n"
        "arXiv:2403.07648Bridging the gap between diffusion models and human preferences.\n"
        "arXiv:2402.08552Large language models with long sequences. We design Buff to fix it.\n"
        "arXiv:2401.09149\n"))
    assert r.layout == "arxiv-listing" and r.problems == []
    assert [p.arxiv_id for p in r.papers] == ["2403.07648", "2402.08552", "2401.09149"]
    assert r.papers[0].abstract.startswith("LLM development")
    assert r.papers[1].abstract == "Bridging the gap between diffusion models and human preferences."
    assert r.papers[2].label == "Buff"
    assert [p.line for p in r.papers] == [1, 2, 3]


def test_arxiv_listing_id_with_journal_ref(tmp_path: Path) -> None:
    r = parse(tmp_path, (
        "Federated learning with binary classification. We propose FedABC, a framework.\n"
        "9 pages,5 figures\n"
        "arXiv:2302.07450 - AAAI2023\n"
        "A second paper, with a versioned id and a longer journal reference.\n"
        "arXiv:2301.00001v3 - Proc. VLDB Endow. 16(4), 2023\n"))
    a, b = r.papers
    assert (a.arxiv_id, a.journal_ref, a.comments) == ("2302.07450", "AAAI2023", ["9 pages,5 figures"])
    assert (a.venue, a.year) == ("AAAI", 2023)
    assert (b.arxiv_id, b.journal_ref) == ("2301.00001", "Proc. VLDB Endow. 16(4), 2023")
    assert b.comments == []


def test_arxiv_mention_inside_a_comment_line_is_not_the_id(tmp_path: Path) -> None:
    r = parse(tmp_path, (
        "We propose MAS, a system to train simultaneous federated learning tasks.\n"
        "ICCV'23. arXiv admin note: substantial text overlap with arXiv:2207.04202\n"
        "arXiv:2307.11285\n"))
    (p,) = r.papers
    assert p.arxiv_id == p.paper_id == "2307.11285"
    assert p.comments == ["ICCV'23. arXiv admin note: substantial text overlap with arXiv:2207.04202"]
    assert (p.venue, p.year) == ("ICCV", 2023)
    assert "2207.04202" not in p.abstract


@pytest.mark.parametrize(("text", "ident", "rest"), [
    ("0704.1412Glued abstract", "0704.1412", "Glued abstract"),  # 2007-2014: 4 digits
    ("1412.99993D point clouds", "1412.9999", "3D point clouds"),  # last 4-digit month
    ("1501.000013D point clouds", "1501.00001", "3D point clouds"),  # 5 digits from 2015
    ("2403.07648v2Bridging", "2403.07648", "Bridging"),
    ("2302.07450 - AAAI2023", "2302.07450", " - AAAI2023"),
    ("cs/0112017Old style", "cs/0112017", "Old style"),
    ("math.GT/0309136", "math.GT/0309136", ""),
])
def test_split_arxiv_id_old_and_new_styles(text: str, ident: str, rest: str) -> None:
    assert split_arxiv_id(text) == (ident, rest)


@pytest.mark.parametrize("text", ["not-an-id", "2313.01234", "1501.1234", "12.3456", "", "ABCD.12345"])
def test_split_arxiv_id_rejects_non_ids(text: str) -> None:
    assert split_arxiv_id(text) is None


def test_old_four_digit_id_glued_to_an_abstract_starting_with_a_digit(tmp_path: Path) -> None:
    r = parse(tmp_path, (
        "An old paper from 2007 about graphs.\n"
        "arXiv:0704.14123D meshes are hard to segment. We propose MeshCut, a tool for it.\n"
        "arXiv:1501.00001\n"))
    assert [p.arxiv_id for p in r.papers] == ["0704.1412", "1501.00001"]
    assert [p.year for p in r.papers] == [2007, 2015]
    assert r.papers[1].abstract.startswith("3D meshes")


def test_arxiv_line_that_is_not_an_id_is_an_error_with_its_line(tmp_path: Path) -> None:
    r = parse(tmp_path, "A good abstract.\narXiv:2401.09149\nA second abstract.\narXiv:12345\n")
    assert len(r.papers) == 1
    err = only_problem(r)
    assert err.line == 4
    assert "dump.txt:4:" in str(err) and "not an arXiv id" in str(err)


def test_arxiv_listing_ending_without_an_id(tmp_path: Path) -> None:
    r = parse(tmp_path, "First abstract.\narXiv:2401.09149\nSecond abstract, cut off\n")
    assert [p.arxiv_id for p in r.papers] == ["2401.09149"]
    assert only_problem(r).line == 3


# -- conference listing -----------------------------------------------------------------------

CONF = """ICML 2024

| Total: 3

#1 Tutel: Adaptive Mixture-of-Experts at Scale [PDF3] [Copy] [Kimi4] [REL]

Authors: Changho Hwang, Wei Cui, Yifan Xiong

Sparsely-gated mixture-of-experts scales models. Tutel is a system for it.


#2 Breadth-First Pipeline Parallelism [PDF6] [Copy] [Kimi2] [REL]

Author: Joel Lamy-Poirier

We introduce Breadth-First Pipeline Parallelism, a novel training schedule.
It continues on a second line.


#3 A Title With [Brackets] Inside It [PDF] [Copy]

Authors: Ann Author

Some abstract.
"""


def test_conference_listing(tmp_path: Path) -> None:
    r = parse(tmp_path, CONF)
    assert r.layout == "conference-listing" and r.problems == []
    a, b, c = r.papers
    assert a.title == a.label == "Tutel: Adaptive Mixture-of-Experts at Scale"
    assert a.authors == ["Changho Hwang", "Wei Cui", "Yifan Xiong"]
    assert (a.venue, a.year) == ("ICML", 2024)  # from the header
    assert b.authors == ["Joel Lamy-Poirier"]  # `Author:` singular
    assert b.abstract == ("We introduce Breadth-First Pipeline Parallelism, a novel training "
                          "schedule. It continues on a second line.")
    assert c.title == "A Title With [Brackets] Inside It"  # only the trailing tags go
    assert [p.position for p in r.papers] == [1, 2, 3]
    assert [p.line for p in r.papers] == [5, 12, 20]


def test_conference_header_with_a_dot(tmp_path: Path) -> None:
    r = parse(tmp_path, CONF.replace("ICML 2024", "MLSYS.2023"))
    assert {(p.venue, p.year) for p in r.papers} == {("MLSYS", 2023)}


def test_conference_entry_with_no_abstract_is_an_error(tmp_path: Path) -> None:
    text = CONF.replace("Sparsely-gated mixture-of-experts scales models. Tutel is a system for it.", "")
    r = parse(tmp_path, text)
    assert len(r.papers) == 2
    err = only_problem(r)
    assert err.line == 5 and "entry #1 has a title but no abstract" in str(err)


def test_detection_is_by_content_not_by_file_name(tmp_path: Path) -> None:
    r = parse(tmp_path, CONF, name="listing.jsonl")
    assert r.layout == "conference-listing" and len(r.papers) == 3
    r = parse(tmp_path, '{"abstract": "We propose Foo, a tool."}\n', name="records.txt")
    assert r.layout == "jsonl" and r.papers[0].label == "Foo"
    r = parse(tmp_path, "Abstract:We propose Foo, a thing.\n", name="noext")
    assert r.layout == "abstract-lines"


# -- arXiv export -----------------------------------------------------------------------------

EXPORT = """Multi-task training uses variable lengths. DynaPipe's source code is public.

18 pages, 18 figures

arXiv:2311.10418 - doi: 10.1145/3627703.3629585
Created: 2023-11-17

We propose SPT, a semi-parametric prompt tuning method.

arXiv:2212.10929 - Findings of EMNLP 2022
Created: 2022-12-21
"""


def test_arxiv_export_doi_journal_ref_and_created_date(tmp_path: Path) -> None:
    r = parse(tmp_path, EXPORT)
    assert r.layout == "arxiv-export" and r.problems == []
    a, b = r.papers
    assert (a.arxiv_id, a.doi, a.journal_ref) == ("2311.10418", "10.1145/3627703.3629585", None)
    assert (a.date, a.year, a.comments, a.label) == ("2023-11-17", 2023, ["18 pages, 18 figures"], "DynaPipe")
    assert (b.doi, b.journal_ref, b.date, b.comments) == (None, "Findings of EMNLP 2022", "2022-12-21", [])
    assert (b.venue, b.year) == ("EMNLP", 2022)


def test_arxiv_export_record_without_id_is_an_error(tmp_path: Path) -> None:
    r = parse(tmp_path, EXPORT + "\nA last abstract.\n\n3 pages\n")
    assert len(r.papers) == 2
    assert only_problem(r).line == 13


# -- `Abstract:` lines and mixed layouts --------------------------------------------------------


def test_abstract_lines(tmp_path: Path) -> None:
    r = parse(tmp_path, "Abstract:We propose Skrull, a scheduler.\n\nAbstract:Another one\ncontinues here.\n")
    assert [p.abstract for p in r.papers] == ["We propose Skrull, a scheduler.",
                                              "Another one continues here."]
    assert [p.title for p in r.papers] == [None, None] and r.papers[0].label == "Skrull"


def test_abstract_line_without_text_is_an_error(tmp_path: Path) -> None:
    r = parse(tmp_path, "Abstract:One.\nAbstract:\nAbstract:Two.\n")
    assert [p.abstract for p in r.papers] == ["One.", "Two."]
    assert only_problem(r).line == 2


@pytest.mark.parametrize(("extra", "what"), [
    ("arXiv:2401.09149", "arXiv id line"),
    ("#3 A Conference Entry [PDF] [Copy]", "conference listing entry"),
    ("Authors: Ann Author, Bob Writer", "Authors:"),
    ('{"abstract": "a JSON record"}', "JSON Lines record"),
    ("Created: 2023-11-17", "Created:"),
])
def test_mixed_layouts_in_an_abstract_lines_file_are_an_error(
        tmp_path: Path, extra: str, what: str) -> None:
    r = parse(tmp_path, f"Abstract:We propose Foo.\nAbstract:We propose Bar.\n{extra}\ntrailing text\n")
    err = only_problem(r)
    assert err.line == 3 and what in str(err) and "one layout" in str(err)
    # nothing of the foreign record is glued onto the abstract before it
    assert [p.abstract for p in r.papers] == ["We propose Foo.", "We propose Bar."]


def test_mixed_layouts_abstract_lines_inside_an_arxiv_listing(tmp_path: Path) -> None:
    r = parse(tmp_path, "A listing abstract.\narXiv:2401.09149\nAbstract:A line from another file.\n")
    assert [p.arxiv_id for p in r.papers] == ["2401.09149"]
    err = only_problem(r)
    assert err.line == 3 and "`Abstract:` line" in str(err)


def test_mixed_layouts_in_a_conference_listing(tmp_path: Path) -> None:
    r = parse(tmp_path, CONF + "\narXiv:2401.09149\nAbstract:Pasted from another dump.\n")
    assert len(r.papers) == 3 and r.papers[2].abstract == "Some abstract."
    assert [e.line for e in r.problems] == [26, 27]


def test_mixed_layouts_in_an_arxiv_export(tmp_path: Path) -> None:
    r = parse(tmp_path, EXPORT + "\nAbstract:Pasted from another dump.\n\narXiv:2301.00001\nCreated: 2023-01-01\n")
    assert len(r.papers) == 2
    err = only_problem(r)
    assert err.line == 13 and "`Abstract:` line" in str(err)


# -- JSON Lines and BEIR ----------------------------------------------------------------------


def test_jsonl_records(tmp_path: Path) -> None:
    lines = [
        {"abstract": "We propose Foo, a system.", "title": "Foo: A System", "authors": ["A B", "C D"],
         "id": "foo-1", "year": 2021, "venue": "OSDI"},
        {"abstract": "No title here. We propose BarNet, a model.", "authors": "E F, G H", "year": "2020"},
        {"abstract": "With an arXiv id.", "arxiv_id": "arXiv:2401.09149v2", "doi": "10.1/x"},
    ]
    r = parse(tmp_path, "\n".join(json.dumps(x) for x in lines) + "\n\n", name="c.jsonl")
    assert r.layout == "jsonl" and r.problems == []
    a, b, c = r.papers
    assert (a.paper_id, a.title, a.label, a.authors, a.year, a.venue) == (
        "foo-1", "Foo: A System", "Foo: A System", ["A B", "C D"], 2021, "OSDI")
    assert (b.title, b.label, b.authors, b.year) == (None, "BarNet", ["E F", "G H"], 2020)
    assert (c.paper_id, c.arxiv_id, c.doi) == ("2401.09149", "2401.09149", "10.1/x")
    assert [p.line for p in r.papers] == [1, 2, 3]


def test_beir_layout(tmp_path: Path) -> None:
    r = parse(tmp_path, json.dumps({"_id": 4983, "title": "A Title.", "text": "An abstract."}) + "\n")
    (p,) = r.papers
    assert (p.paper_id, p.title, p.abstract) == ("4983", "A Title.", "An abstract.")


def test_first_twenty_lines_of_scifact(tmp_path: Path) -> None:
    with SCIFACT.open(encoding="utf-8") as fh:
        head = list(islice(fh, 20))
    raw = [json.loads(line) for line in head]
    r = parse(tmp_path, "".join(head), name="scifact.jsonl")
    assert r.problems == [] and len(r.papers) == 20
    for rec, p in zip(raw, r.papers, strict=True):
        assert p.paper_id == rec["_id"]
        assert p.title == p.label == " ".join(rec["title"].split())
        assert p.abstract == " ".join(rec["text"].split())
    assert r.papers[0].paper_id == "4983"
    assert r.papers[0].title.startswith("Microstructural development of human newborn")


@pytest.mark.parametrize(("record", "message"), [
    ('{"abstract": 42}', "field `abstract` should be str, got int"),
    ('{"abstract": "x", "title": 7}', "field `title` should be str or NoneType, got int"),
    ('{"abstract": "x", "authors": [1, 2]}', "field `authors` should be a list of strings"),
    ('{"abstract": "x", "year": "soon"}', "field `year` should be a number"),
    ('{"abstract": "x", "year": "²⁰²³"}', "field `year` should be a number"),
    ('{"abstract": "x", "year": 99999999999999999999}', "field `year` should be a four-digit year"),
    ('{"abstract": "x", "year": true}', "field `year` should be a four-digit year"),
    ('{"abstract": "x", "arxiv_id": "nope"}', "field `arxiv_id` 'nope' is not an arXiv id"),
    ('["not", "an", "object"]', "expected a JSON object, got list"),
    ('"a string"', "expected a JSON object, got str"),
    ('{"title": "no abstract"}', "record has no `abstract` (or BEIR `text`) field"),
    ('{"abstract": "   "}', "record has no `abstract`"),
    ('{"abstract": "unterminated}', "not valid JSON"),
    ('{"abstract": "x", "year": ' + "9" * 5000 + "}", "JSON that cannot be read"),
    ("[" * 5000 + "]" * 5000, "JSON that cannot be read"),
])
def test_jsonl_bad_record_names_file_line_and_field(tmp_path: Path, record: str, message: str) -> None:
    r = parse(tmp_path, '{"abstract": "A good record."}\n\n' + record + "\n", name="recs.jsonl")
    assert len(r.papers) == 1
    err = only_problem(r)
    assert err.line == 3
    assert str(err).startswith("recs.jsonl:3: ") or "/recs.jsonl:3: " in str(err)
    assert message in str(err)


# -- whole files --------------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "message"), [
    (b"", "file is empty"),
    (b" \n\t\n", "file is empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "file is binary"),
    ("Abstract:UTF-16\n".encode("utf-16"), "UTF-16"),
    (b"Abstract:ok\nAbstract:caf\xe9\n", "invalid UTF-8 byte 0xe9"),
    (b"Just a letter.\nNo abstracts.\n", "no known layout"),
])
def test_unreadable_files_raise_parse_error(tmp_path: Path, data: bytes, message: str) -> None:
    with pytest.raises(ParseError, match=message) as info:
        parse(tmp_path, data)
    assert "dump.txt" in str(info.value)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(ParseError) as info:
        parse(tmp_path, b"Abstract:ok\n\nAbstract:caf\xe9\n")
    assert info.value.line == 3 and "dump.txt:3:" in str(info.value)


# A hang guard, not a speed figure (that is benchmarks/parse_worst_case.py: ~40 ms): label
# detection once took minutes on a run of capitals.
@pytest.mark.timeout(60)
def test_too_long_abstract_is_an_error_and_parsing_stays_fast(tmp_path: Path) -> None:
    # a 30,000-character line; a run of capitals used to make label detection take minutes
    r = parse(tmp_path, "Abstract:We propose " + "A" * 30_000 + ".\nAbstract:We propose Foo, a tool.\n")
    assert [p.label for p in r.papers] == ["Foo"]
    err = only_problem(r)
    assert err.line == 1 and "characters; at most 20,000 expected" in str(err)
    # the longest abstract that is allowed, made of capitals, still gets a label quickly
    r = parse(tmp_path, "Abstract:We propose " + "A-" * 9_000 + " " + "B" * 1_000 + ".\n")
    assert len(r.papers) == 1


def test_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "huge.txt"
    line = "Abstract:" + "word " * 200 + "\n"
    with path.open("w") as fh:
        for _ in range(50 * 2**20 // len(line) + 1):
            fh.write(line)
    assert path.stat().st_size >= 50 * 2**20
    with pytest.raises(ParseError, match="file is 50 MB; the limit is 20 MB"):
        read_file(path)


def test_a_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="cannot read file"):
        read_file(tmp_path)


# -- properties ---------------------------------------------------------------------------------

LINES = st.sampled_from([
    "Abstract:", "Abstract:We propose Foo, a system.", "arXiv:2403.07648", "arXiv:2403.07648Glued",
    "arXiv:0704.1412 - J. Ref 2007", "arXiv:cs/0112017", "arXiv:99", "#1 Title [PDF] [Copy]", "#2 T",
    "Authors: a, b", "Author: c", "Created: 2023-01-02", "MLSYS.2023", '{"abstract": "x"}',
    '{"abstract": "y", "year": "2023", "arxiv_id": "2401.00001"}', '{"text": "t", "_id": 5}',
    "[1]", "{", "", "   ", "AdaCM$^2$ \\times $x", "ICML 2022", "doi: 10.1/2",
])
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)


def _check(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "input.txt"
        path.write_bytes(data)
        try:
            result = read_file(path)
        except (ParseError, InputError):
            return
        for i, p in enumerate(result.papers, 1):
            assert p.abstract.strip() and p.label and p.paper_id
            assert p.position == i and p.source.endswith("input.txt")
        n_lines = len(data.decode("utf-8-sig").splitlines())
        for problem in result.problems:
            assert isinstance(problem, ParseError)
            assert problem.line is None or 1 <= problem.line <= n_lines
        merge_papers(result.papers)


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_arbitrary_text_never_crashes_the_parser(text: str) -> None:
    _check(text.encode("utf-8"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(LINES, TEXT), max_size=12))
def test_arbitrary_layout_fragments_never_crash_the_parser(lines: list[str]) -> None:
    _check("\n".join(lines).encode("utf-8"))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_crash_the_parser(data: bytes) -> None:
    _check(data)


@pytest.mark.parametrize(("text", "sentences"), [
    ("As of Oct. 2022, Edge Impulse hosts 118,185 projects. It is free.",
     ["As of Oct. 2022, Edge Impulse hosts 118,185 projects.", "It is free."]),
    ("It runs approx. 3x faster (Fig. 2). We use e.g. GPUs and i.e. CPUs. Smith et al. Propose it.",
     ["It runs approx. 3x faster (Fig. 2).", "We use e.g. GPUs and i.e. CPUs.", "Smith et al. Propose it."]),
    ("Throughput rises 3.76x. Latency falls (Table 2). No. 5 wins.",
     ["Throughput rises 3.76x.", "Latency falls (Table 2).", "No. 5 wins."]),
    # initials in a row are a name; one initial may end a sentence
    ("Cupcake is by Zhaozhuo Xu and T. S. Eugene Ng [1]. It compresses.",
     ["Cupcake is by Zhaozhuo Xu and T. S. Eugene Ng [1].", "It compresses."]),
    ("Treated at M. D. Anderson Cancer Center. Arm A. In arm B, vitamin D. Rose.",
     ["Treated at M. D. Anderson Cancer Center.", "Arm A.", "In arm B, vitamin D.", "Rose."]),
    # a middle initial after a first name, before a surname
    ("LoRA is by Edward J. Hu and Yelong Shen. It freezes the weights.",
     ["LoRA is by Edward J. Hu and Yelong Shen.", "It freezes the weights."]),
    # a sentence glued to the next by a lost space ends there; an abbreviation or a domain does not
    ("It adapts to the workload.We present Tutel. Smith et al.Propose it. See deepspeed4science.ai now.",
     ["It adapts to the workload.", "We present Tutel.", "Smith et al.Propose it.", "See deepspeed4science.ai now."]),
])
def test_sentences_do_not_end_at_abbreviations(text: str, sentences: list[str]) -> None:
    """What answers quote and the judge reads: "As of Oct. 2022, ..." stays one sentence (the
    answer to "How many projects does Edge Impulse host?" began "2022, Edge Impulse ...")."""
    from rag.corpus.text import split_sentences

    assert split_sentences(text) == sentences
