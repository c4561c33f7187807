"""`rag mcp` over stdio, through the MCP SDK's own client, started exactly as docs/mcp.md's
client configuration says, over a copy of the seeded index."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp_client import PLACEHOLDER, Session, connect, page_configs, stdio_params
from tests.rag_server import copy_home

SKRULL = "long-context-supervised-fine-a335c12e"
DYNAPIPE = "2311.10418"
TOOLS = {"search_papers", "ask", "get_paper", "export_citations", "list_papers", "find_source"}


@pytest.fixture(scope="module")
def mcp_stderr(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the module's `rag mcp` writes its stderr."""
    return tmp_path_factory.mktemp("mcp-stderr") / "stderr.txt"


@pytest.fixture(scope="module")
def mcp(seeded_settings, tmp_path_factory: pytest.TempPathFactory, mcp_stderr: Path) -> Iterator[Session]:  # type: ignore[no-untyped-def]
    home = copy_home(seeded_settings.home, tmp_path_factory.mktemp("mcp") / "home")
    with mcp_stderr.open("w") as errlog, connect(stdio_params(home), errlog=errlog) as session:
        yield session


def within(result: dict, text: str, budget: int = 8000) -> None:  # type: ignore[type-arg]
    """The structured result (as compact JSON) and the text block keep to the budget."""
    assert len(json.dumps(result, ensure_ascii=False, separators=(",", ":"))) <= budget
    assert len(text) <= budget


def test_the_documented_configurations_start_the_same_server() -> None:
    configs = page_configs()
    claude = configs["claude_desktop_config.json"]["mcpServers"]["rag"]
    vscode = configs[".vscode/mcp.json"]["servers"]["rag"]
    assert vscode["type"] == "stdio"
    assert {k: vscode[k] for k in ("command", "args", "env")} == claude
    assert claude["command"] == f"{PLACEHOLDER}/.venv/bin/rag" and claude["args"] == ["mcp"]


def test_every_tool_has_a_description_and_both_schemas(mcp: Session) -> None:
    tools = {t.name: t for t in mcp.tools()}
    assert set(tools) == TOOLS  # no ingest tool unless --allow-ingest
    for t in tools.values():
        assert len(t.description or "") > 60, t.name
        assert "\n " not in t.description, t.name  # the docstring's indents, read by the model
        assert t.input_schema["type"] == "object" and t.output_schema, t.name
        assert t.input_schema["additionalProperties"] is False, t.name  # call_tool refuses others
    assert tools["search_papers"].input_schema["required"] == ["query"]
    assert tools["export_citations"].input_schema["properties"]["format"]["enum"] == [
        "bibtex", "ris", "csl-json"]


def test_fact_question_is_answered_with_a_checked_citation(mcp: Session) -> None:
    result = mcp.call("ask", question="How much faster is Skrull than DeepSpeed?")
    answer = result.structured_content
    assert not result.is_error and not answer["declined"]
    assert "3.76x" in answer["answer"] and "[1]" in answer["answer"]
    # how rag read the question, as `rag ask --json` shows it
    assert answer["question"]["kind"] == "fact" and "Skrull" in answer["question"]["names"]
    assert answer["references"][0]["n"] == 1 and answer["references"][0]["paper_id"] == SKRULL
    assert answer["sentences"] and all(s["supported"] and s["citations"] == [1]
                                       for s in answer["sentences"])
    text = result.content[0].text
    assert "3.76x" in text and "References" in text and SKRULL in text
    within(answer, text)


def test_unanswerable_question_is_declined_with_the_nearest_evidence(mcp: Session) -> None:
    answer = mcp.ok("ask", question="What is the boiling point of liquid nitrogen at sea level?")
    assert answer["declined"] and not answer["references"]
    assert answer["nearest"] and all(e["quote"] for e in answer["nearest"])


def test_paper_by_arxiv_id(mcp: Session, retriever) -> None:  # type: ignore[no-untyped-def]
    for ident in ("2311.10418", "arXiv:2311.10418v2", "https://arxiv.org/abs/2311.10418",
                  "doi:10.1145/3627703.3629585"):
        paper = mcp.ok("get_paper", paper_id=ident)
        assert paper["paper_id"] == DYNAPIPE and paper["label"] == "DynaPipe", ident
    assert paper["abstract"] == retriever.paper(DYNAPIPE).abstract and not paper["truncated"]
    assert "DynaPipe" in mcp.read(f"paper://{DYNAPIPE}")


def test_bibtex_and_ris_exports_are_rag_papers_format(mcp: Session, retriever) -> None:  # type: ignore[no-untyped-def]
    from rag.export import export

    papers = [retriever.paper(DYNAPIPE), retriever.paper(SKRULL)]
    for fmt, start in (("bibtex", "@"), ("ris", "TY  - ")):
        out = mcp.ok("export_citations", paper_ids=[f"arXiv:{DYNAPIPE}", SKRULL], format=fmt)
        assert out["count"] == 2 and out["remaining_ids"] == []
        assert out["text"] == export(papers, fmt)  # the same text and escaping as the CLI
        assert out["text"].count("\n" + start) + out["text"].startswith(start) == 2


def test_export_beyond_the_budget_names_the_rest(mcp: Session, retriever) -> None:  # type: ignore[no-untyped-def]
    ids = [p.paper_id for p in retriever.papers()]
    out = mcp.ok("export_citations", paper_ids=ids, format="bibtex", max_chars=4000)
    assert 0 < out["count"] < len(ids) and out["remaining_ids"] == ids[out["count"]:]


def test_an_export_budget_too_small_for_one_paper_says_how_much_it_needs(mcp: Session) -> None:
    # it answered count 0, an empty text and every id "to export in another call", which
    # failed the same way
    message = mcp.error("export_citations", paper_ids=[DYNAPIPE, SKRULL], format="bibtex", max_chars=1000)
    needed = int(message.split("raise max_chars to at least ")[1].split(")")[0].replace(",", ""))
    assert "max_chars 1,000 is too small for one paper's bibtex export" in message
    out = mcp.ok("export_citations", paper_ids=[DYNAPIPE, SKRULL], format="bibtex", max_chars=needed)
    assert out["count"] == 1 and out["text"].startswith("@") and out["remaining_ids"] == [SKRULL]


def test_all_papers_are_listed_exactly_once_across_pages(mcp: Session, retriever) -> None:  # type: ignore[no-untyped-def]
    for budget in (8000, 1000):
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            args = {"max_chars": budget, **({"cursor": cursor} if cursor else {})}
            result = mcp.call("list_papers", **args)
            page = result.structured_content
            within(page, result.content[0].text, budget)
            assert page["total"] == 60
            seen += [p["paper_id"] for p in page["papers"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert sorted(seen) == sorted(p.paper_id for p in retriever.papers())
        assert len(seen) == len(set(seen)) == 60 and pages > 1


def test_a_quoted_sentence_is_traced_to_its_paper(mcp: Session) -> None:
    exact = mcp.ok("find_source", quote="skrull OUTPERFORMS DeepSpeed by 3.76x on average (up to 7.54x)")
    assert exact["found"] and [m["paper_id"] for m in exact["matches"]] == [SKRULL]
    assert exact["matches"][0]["match"] == "exact"
    assert exact["matches"][0]["sentence"].startswith("Experimental results demonstrate that Skrull")
    nowhere = mcp.ok("find_source", quote="The boiling point of liquid nitrogen is 77 kelvin.")
    assert not nowhere["found"] and nowhere["matches"] == []


def test_a_search_beyond_the_budget_says_how_many_more(mcp: Session) -> None:
    result = mcp.call("search_papers", query="training large language models", k=50, max_chars=2000)
    found = result.structured_content
    within(found, result.content[0].text, 2000)
    assert found["results"] and found["more"] > 0 and "max_chars" in found["hint"]
    assert len(found["results"]) + found["more"] == 50


def test_a_search_at_the_smallest_budget_shows_its_first_hit(mcp: Session) -> None:
    # each passage of this query's papers is near 1,000 characters by itself
    result = mcp.call("search_papers", query="federated learning", max_chars=1000)
    found, text = result.structured_content, result.content[0].text
    within(found, text, 1000)
    assert "No papers match" not in text
    assert found["results"][0]["label"].startswith("FedTree") and found["more"] == 9
    assert found["results"][0]["best_sentence"].endswith("[passage cut to fit max_chars]")


def test_indexes_resource_lists_the_index_and_its_size(mcp: Session) -> None:
    listed = json.loads(mcp.read("rag://indexes"))
    assert listed["indexes"] == [{"index": "default", "papers": 60}]


def test_optional_arguments_sent_empty_or_null_are_not_given(mcp: Session) -> None:
    """Assistants fill the optional fields they leave unset with "" or null: each call is the
    call without them, not an error that costs the user another turn."""
    query = "pipeline parallelism"
    assert mcp.ok("search_papers", query=query, k=None, venue="", year=" ", source=None,
                  category="", index="", max_chars=None) == mcp.ok("search_papers", query=query)
    answer = mcp.ok("ask", question="How much faster is Skrull than DeepSpeed?", venue="",
                    year=None, strict="", index=None, max_chars="")
    assert "3.76x" in answer["answer"] and not answer["declined"]
    assert mcp.ok("list_papers", venue="", year=None, source=" ", cursor="")["total"] == 60
    assert mcp.ok("export_citations", paper_ids=[DYNAPIPE], format=None, max_chars="")["text"].startswith("@")
    # a required argument is still required
    assert "the question is empty" in mcp.error("ask", question="", venue="")
    assert "query: Input should be a valid string" in mcp.error("search_papers", query=None)


def test_a_year_sent_as_a_number_filters_as_its_text(mcp: Session) -> None:
    """A model reads "year" as a number and sends 2023: the filter `rag ask --year 2023` and
    HTTP apply, and the schema says so (a client checking it would refuse the call)."""
    schema = {t.name: t for t in mcp.tools()}["search_papers"].input_schema["properties"]["year"]
    assert {"type": "integer"} in schema["anyOf"]
    as_text = mcp.ok("list_papers", year="2023", max_chars=200_000)
    assert mcp.ok("list_papers", year=2023, max_chars=200_000) == as_text and 0 < as_text["total"] < 60
    hits = mcp.ok("search_papers", query="federated learning", year=2023)["results"]
    assert hits and {h["year"] for h in hits} == {2023}
    # true is no year (read as 1 it would say "year filter '1' is not a year or range")
    assert "year: Input should be a year, not true or false" in mcp.error("list_papers", year=True)


def test_ask_and_list_take_every_filter_rag_ask_takes(mcp: Session, retriever) -> None:  # type: ignore[no-untyped-def]
    """`rag ask --source` and POST /ask's source and category keep an answer to those papers;
    ask and list_papers take them too (they were refused as unknown arguments)."""
    source = "003_"
    inside = {p.paper_id for p in retriever.papers() if source in p.source}
    assert 0 < len(inside) < 60
    answer = mcp.ok("ask", question="which papers study federated learning?", source=source)
    cited = {r["paper_id"] for r in answer["references"]}
    assert cited and cited <= inside
    assert mcp.ok("list_papers", source=source, max_chars=200_000)["total"] == len(inside)
    # no seed paper carries an arXiv category: the filter keeps none
    none = mcp.ok("ask", question="which papers study federated learning?", category="cs.DC")
    assert none["answer"] == "No papers match the filters: category cs.DC."
    assert mcp.ok("list_papers", category="cs.DC")["total"] == 0


def test_the_servers_filters_keep_the_list_as_they_keep_a_search(seeded_settings, retriever, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`rag mcp --year 2023` keeps search_papers and ask to 2023's papers; list_papers listed
    all 60 (total 60), so the assistant saw a library the other tools did not answer from."""
    home = copy_home(seeded_settings.home, tmp_path / "home")
    of_2023 = {p.paper_id for p in retriever.papers() if p.year == 2023}
    with connect(stdio_params(home, ["--year", "2023"])) as server:
        listed = server.ok("list_papers", max_chars=200_000)
        assert listed["total"] == len(of_2023) and {p["paper_id"] for p in listed["papers"]} == of_2023
        hits = server.ok("search_papers", query="federated learning")["results"]
        assert hits and {h["paper_id"] for h in hits} <= of_2023
        # a call's own filter replaces the server's
        assert server.ok("list_papers", year="2022-2024")["total"] > len(of_2023)


@pytest.mark.parametrize(("tool", "arguments", "says"), [
    ("search_papers", {"query": "pipelines", "k": 500}, "k: Input should be less than or equal to 50"),
    ("search_papers", {"query": "   "}, "the query is empty"),
    ("search_papers", {"query": "pipelines", "index": "nosuch"}, "no index 'nosuch'"),
    ("get_paper", {"paper_id": "nosuch-0000"}, "no paper with id, arXiv id or DOI 'nosuch-0000'"),
    ("export_citations", {"paper_ids": [DYNAPIPE], "format": "endnote"}, "format: Input should be"),
    ("export_citations", {"paper_ids": ["nosuch-0000"]}, "no paper with id"),
    ("ask", {"question": ""}, "the question is empty"),
    ("ask", {"question": "why? " * 500}, "at most 2000"),
    ("ask", {"question": "why?", "year": "x" * 30}, "year: String should have at most 20"),
    ("list_papers", {"cursor": "banana"}, "cursor 'banana' is not one this server gave"),
    ("list_papers", {"max_chars": 10}, "max_chars: Input should be greater than or equal to 1000"),
    ("find_source", {"quote": ""}, "the quote is empty"),
    ("no_such_tool", {}, "no_such_tool"),
    # an argument a tool does not take is refused, never dropped: the filter would go unapplied
    ("ask", {"question": "What does DynaPipe optimise?", "authors": "Chen"},
     "ask: unknown argument 'authors'; the arguments are: question, venue, year, source, category, author, "
     "strict, index, max_chars"),
    ("search_papers", {"query": "federated learning", "yaer": "2022"}, "unknown argument 'yaer'"),
    ("list_papers", {"categories": "q-bio", "k": 3}, "unknown arguments 'categories', 'k'; the arguments are: venue"),
])
def test_bad_calls_are_one_line_tool_errors_and_the_server_goes_on(
        mcp: Session, tool: str, arguments: dict, says: str) -> None:  # type: ignore[type-arg]
    text = mcp.error(tool, **arguments)
    assert says in text and "\n" not in text and "Traceback" not in text
    assert mcp.ok("get_paper", paper_id=DYNAPIPE)["label"] == "DynaPipe"


@pytest.mark.parametrize(("tool", "arguments"), [
    ("get_paper", {"paper_id": "x" * 100_000}),
    ("export_citations", {"paper_ids": ["y" * 100_000]}),
    ("search_papers", {"query": "pipelines", "index": "z" * 100_000}),
])
def test_an_error_keeps_to_max_chars_too(mcp: Session, tool: str, arguments: dict) -> None:  # type: ignore[type-arg]
    text = mcp.error(tool, max_chars=1000, **arguments)
    assert len(text) <= 1000 and "(100,000 characters)" in text and "\n" not in text


def test_paper_resource_takes_a_doi_and_says_which_paper_is_unknown(mcp: Session, mcp_stderr: Path) -> None:
    from mcp.shared.exceptions import MCPError

    for uri in ("paper://10.1145/3627703.3629585", "paper://doi:10.1145/3627703.3629585",
                "paper://10.1145%2F3627703.3629585", f"paper://arXiv:{DYNAPIPE}v2"):
        assert "DynaPipe" in mcp.read(uri), uri
    for uri, says in (("paper://nope", "no paper with id, arXiv id or DOI 'nope' in the index "
                                       "'default' (find papers with search_papers or list_papers, "
                                       "and pass the same `index`)"),
                      ("paper://", "the paper id is empty")):
        with pytest.raises(MCPError) as caught:
            mcp.read(uri)
        assert caught.value.error.code == -32602 and says in caught.value.error.message, uri
    assert mcp.ok("get_paper", paper_id=DYNAPIPE)["label"] == "DynaPipe"  # and it goes on
    assert "Traceback" not in mcp_stderr.read_text() and "ERROR" not in mcp_stderr.read_text()


def test_stdout_carries_only_the_protocol(seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Start-up notices and logs go to stderr; stdout holds JSON-RPC messages only."""
    params = stdio_params(copy_home(seeded_settings.home, tmp_path / "home"))
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}})
    res = subprocess.run([params.command, *params.args], input=request + "\n", env=params.env,
                         cwd=params.cwd, capture_output=True, text=True, timeout=300)
    assert "serving on stdio" in res.stderr
    lines = res.stdout.splitlines()
    assert lines and all(json.loads(line)["jsonrpc"] == "2.0" for line in lines)
    assert json.loads(lines[0])["result"]["serverInfo"]["name"] == "rag"


def test_rag_ask_never_imports_the_sdk(seeded_settings) -> None:  # type: ignore[no-untyped-def]
    """The SDK is imported only by `rag mcp` and `rag serve`: `rag ask` starts as before."""
    import sys

    script = ("import sys\nfrom rag.cli import cli\n"
              "cli.main(['ask', '--llm', 'none', 'How much faster is Skrull than DeepSpeed?'], "
              "standalone_mode=False)\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', "
              "'watchfiles') or m.startswith(('rag.mcp', 'rag.watch'))))")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "RAG_HOME": str(seeded_settings.home)})
    assert res.returncode == 0, res.stderr
    assert "3.76x" in res.stdout and res.stdout.strip().endswith("[]")


def test_a_long_answer_keeps_to_a_small_budget(mcp: Session) -> None:
    result = mcp.call("ask", question="Which systems target long-sequence training?", max_chars=1000)
    answer = result.structured_content
    within(answer, result.content[0].text, 1000)
    assert answer["references"] and "left out to stay within max_chars" in answer["left_out"]
    markers = {int(n) for n in re.findall(r"\[(\d+)\]", answer["answer"])}
    assert markers == {r["n"] for r in answer["references"]}  # what it cites, it references
