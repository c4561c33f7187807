"""The MCP server (official `mcp` SDK, v2: `MCPServer`) over rag.mcp.tools: the tools with
their descriptions and schemas, and the resources (rag.mcp.stdio serves it for `rag mcp`).

Every tool returns a readable text block and the structured result its output schema
describes. Bad input is a tool error (`isError`) of one line; the server goes on answering.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, BeforeValidator, Field, ValidationError, WithJsonSchema
from pydantic_core import PydanticCustomError

from rag import __version__
from rag.errors import RagError
from rag.mcp.results import (
    DEFAULT_MAX_CHARS,
    MAX_MAX_CHARS,
    MIN_MAX_CHARS,
    AskResult,
    ExportResult,
    IngestResult,
    PaperPage,
    PaperRecord,
    SearchResult,
    SourceResult,
    clip,
    one_line,
    quoted,
    text_of,
)
from rag.mcp.tools import RagTools
from rag.schema import MAX_K

log = logging.getLogger("rag.mcp")

INSTRUCTIONS = (
    "rag answers questions from a library of research-paper abstracts, offline, citing the "
    "abstracts as [n] and checking every sentence against them. Use `ask` for a question, "
    "`search_papers` to find papers on a topic, `get_paper` for one paper's abstract, "
    "`list_papers` to page through the library, `find_source` to trace a quoted sentence to "
    "its paper, and `export_citations` for BibTeX, RIS or CSL-JSON."
)

MaxChars = Annotated[int, Field(
    ge=MIN_MAX_CHARS, le=MAX_MAX_CHARS,
    description="Character budget of the result; a longer list returns what fits and says "
                "how to get the rest.")]
Index = Annotated[str | None, Field(
    description="Index to use (default: the server's); the resource rag://indexes lists them.")]
Venue = Annotated[str | None, Field(max_length=200, description=(
    "Only papers whose venue/journal ref mentions this (the venue alone, e.g. MLSys: "
    "the year goes in `year`)."))]


def _year_text(value: Any) -> Any:
    """A year sent as a number, as a model reading "year" sends it (2023), read as its text;
    true or false is refused as POST /ask refuses it."""
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "Input should be a year, not true or false")
    return str(value) if isinstance(value, int) else value


# The schema offers a number too: a client that checks arguments against it would refuse 2023
Year = Annotated[Annotated[str, Field(max_length=20)] | None, BeforeValidator(_year_text),
                 WithJsonSchema({
    "anyOf": [{"type": "string", "maxLength": 20}, {"type": "integer"}, {"type": "null"}],
    "description": "Only papers from this year or range: 2023, 2022-2023."})]
Source = Annotated[str | None, Field(max_length=500,
                                     description="Only papers read from a file whose path contains this.")]
Category = Annotated[str | None, Field(max_length=100,
                                       description="Only papers in this arXiv category (cs.DC; cs for all cs.*).")]
Author = Annotated[str | None, Field(max_length=200, description=(
    "Only papers with this author: a surname or full name (Hwang, Changho Hwang, C. Hwang)."))]
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


class RagMCPServer(MCPServer[Any]):
    """MCPServer whose argument errors read as one line ("k: Input should be ..."), that
    refuses arguments a tool does not take (the SDK drops them: a filter with a typo in its
    name would go unapplied without a word), and that takes an optional argument sent as
    null or "" as not given: assistants fill the fields they leave unset so (`"venue": ""`,
    `"k": null`), and a refusal cost the user another turn for no fault of theirs."""

    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport, with an answer for each line it cannot read."""
        from rag.mcp.stdio import serve

        await serve(self._lowlevel_server)

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        accepted = list(tool.parameters.get("properties", {})) if tool else []
        unknown = [key for key in arguments if tool and key not in accepted]
        if unknown:
            named = ", ".join(quoted(key, 60) for key in unknown[:5])
            raise ToolError(f"{name}: unknown argument{'s' * (len(unknown) > 1)} {named}; "
                            f"the arguments are: {', '.join(accepted)}")
        if tool:
            required = tool.parameters.get("required", [])
            arguments = {k: v for k, v in arguments.items() if k in required or not _unset(v)}
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            # A bug in rag, not the caller's fault: still one line (the SDK's own says only
            # "Error executing tool NAME" and logs a traceback), the traceback only with -v.
            crash: BaseException = exc.__cause__ or exc
            log.error("tool %s: unexpected %s: %s", name, type(crash).__name__, one_line(str(crash)))
            log.debug("the traceback of that error", exc_info=crash)
            raise ToolError(f"{name}: unexpected {type(crash).__name__}: {one_line(str(crash))} "
                            "(this is a bug in rag: `rag -v` shows its traceback on the "
                            "server's stderr; report it)") from None
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                                     for e in cause.errors())
                raise ToolError(f"{name}: bad argument: {one_line(problems)}") from None
            raise


class Notes:
    """Problems of the watched folders, also told to the client: a text block of warnings
    beside the next tool result. Not log notifications: the protocol deprecates the logging
    capability (SEP-2577), and a server must declare it to send them."""

    def __init__(self) -> None:
        self.pending: list[str] = []
        self._lock = threading.Lock()  # added from the watcher's thread, taken in the loop

    def add(self, text: str) -> None:
        with self._lock:
            self.pending.append(text)

    def take(self) -> list[str]:
        with self._lock:
            taken, self.pending = self.pending, []
        return taken


def build(tools: RagTools, *, allow_ingest: bool = False, notes: Notes | None = None) -> RagMCPServer:
    """The MCP server over `tools` (one per process or per `rag serve`)."""
    server = RagMCPServer("rag", title="rag: cited answers over research abstracts",
                          instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    notes = notes or Notes()

    async def run(work: Callable[[], BaseModel], budget: int) -> CallToolResult:
        try:
            # In a worker thread: answering is CPU work, and the event loop keeps serving
            # other clients. A client that leaves mid-call leaves the work to finish.
            result = await anyio.to_thread.run_sync(work)
        except RagError as exc:  # one line: what is wrong, then what to do, within the budget
            text = one_line(exc.one_line())
            room = budget - 60  # the SDK puts "Error executing tool NAME: " before it
            raise ToolError(text if len(text) <= room else
                            text[: room - 24] + " [cut to fit max_chars]") from None
        content = [TextContent(type="text", text=clip(text_of(result), budget))]
        if warnings := notes.take():
            content.append(TextContent(type="text", text=clip(
                "\n".join(f"warning: {w}" for w in warnings), budget, "warnings")))
        return CallToolResult(content=content, structured_content=result.model_dump(mode="json"))

    @server.tool(annotations=READ_ONLY)
    async def search_papers(
        query: Annotated[str, Field(description="Topic, question or keywords.")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many papers.")] = 10,
        venue: Venue = None, year: Year = None, source: Source = None, category: Category = None,
        author: Author = None, index: Index = None, max_chars: MaxChars = DEFAULT_MAX_CHARS,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Find papers in the library on a topic (hybrid semantic + keyword search). Returns
        each paper's id, title, year, arXiv id / DOI, score and its best-matching sentence.
        Use it to see what the library holds; use `ask` to get an answer."""
        filters = {"venue": venue, "year": year, "source": source, "category": category,
                   "author": author}
        return await run(lambda: tools.search_papers(query, k, filters, index, max_chars),
                         max_chars)

    @server.tool(annotations=READ_ONLY)
    async def ask(
        question: Annotated[str, Field(description="The question, in plain words.")],
        venue: Venue = None, year: Year = None, source: Source = None, category: Category = None,
        author: Author = None,
        strict: Annotated[bool | None, Field(
            description="Drop sentences their citations do not support.")] = None,
        index: Index = None, max_chars: MaxChars = DEFAULT_MAX_CHARS,
    ) -> Annotated[CallToolResult, AskResult]:
        """Answer a question from the library's abstracts, citing them as [n]; every sentence
        is checked against the abstracts it cites (verdict per sentence). When the abstracts
        do not answer it, it declines and shows the nearest evidence: do not answer from
        memory then. Prefer this over search_papers for any factual question about the papers.
        A comparison ("compare the speedups of GPipe and PipeDream") comes back as a table, one
        row per paper named, each cell cited."""
        filters = {"venue": venue, "year": year, "source": source, "category": category,
                   "author": author}
        return await run(lambda: tools.ask(question, strict, filters, index, max_chars),
                         max_chars)

    @server.tool(annotations=READ_ONLY)
    async def get_paper(
        paper_id: Annotated[str, Field(description="The index's paper id, an arXiv id "
                                                   "(2311.10418, arXiv:2311.10418v2) or a DOI.")],
        index: Index = None, max_chars: MaxChars = DEFAULT_MAX_CHARS,
    ) -> Annotated[CallToolResult, PaperRecord]:
        """One paper's metadata (title, authors, venue, year, arXiv id, DOI) and full abstract
        (from the index a search or list found it in: pass the same `index`)."""
        return await run(lambda: tools.get_paper(paper_id, max_chars, index), max_chars)

    @server.tool(annotations=READ_ONLY)
    async def export_citations(
        paper_ids: Annotated[list[str], Field(min_length=1, max_length=200, description=(
            "Papers to export: ids as other tools return them, arXiv ids or DOIs."))],
        format: Annotated[Literal["bibtex", "ris", "csl-json"], Field(
            description="bibtex (.bib), ris (.ris) or csl-json (Zotero, Pandoc).")] = "bibtex",
        index: Index = None, max_chars: MaxChars = DEFAULT_MAX_CHARS,
    ) -> Annotated[CallToolResult, ExportResult]:
        """The papers as a BibTeX, RIS or CSL-JSON document for a reference manager (the same
        text as `rag papers --format`). Papers beyond max_chars are named in remaining_ids.
        Papers found in another index than the server's: pass the same `index`."""
        return await run(lambda: tools.export_citations(paper_ids, format, max_chars, index),
                         max_chars)

    @server.tool(annotations=READ_ONLY)
    async def list_papers(
        venue: Venue = None, year: Year = None, source: Source = None, category: Category = None,
        author: Author = None,
        cursor: Annotated[str | None, Field(
            description="next_cursor of the previous page; leave out for the first page.")] = None,
        index: Index = None, max_chars: MaxChars = DEFAULT_MAX_CHARS,
    ) -> Annotated[CallToolResult, PaperPage]:
        """A page of the library's papers (id, title, year, arXiv id / DOI) with the total;
        call again with next_cursor until it is absent to see them all."""
        filters = {"venue": venue, "year": year, "source": source, "category": category,
                   "author": author}
        return await run(lambda: tools.list_papers(filters, cursor, index, max_chars),
                         max_chars)

    @server.tool(annotations=READ_ONLY)
    async def find_source(
        quote: Annotated[str, Field(description="The sentence to trace, as quoted.")],
        index: Index = None, max_chars: MaxChars = DEFAULT_MAX_CHARS,
    ) -> Annotated[CallToolResult, SourceResult]:
        """Which paper's abstract holds a quoted sentence, word for word or nearly (a
        paraphrase the citation judge accepts), with the abstract's sentence. Use it to check
        or attribute a quote."""
        return await run(lambda: tools.find_source(quote, index, max_chars), max_chars)

    if allow_ingest:
        @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                 idempotent_hint=True, open_world_hint=False))
        async def ingest(
            path: Annotated[str, Field(description="A file or folder inside the folder the "
                                                   "server opened to ingest (relative to it).")],
            ) -> Annotated[CallToolResult, IngestResult]:
            """Add the abstracts of a file (text, JSONL, BibTeX, arXiv snapshot) to the index,
            incrementally: unchanged papers cost nothing."""
            return await run(lambda: tools.ingest(path), DEFAULT_MAX_CHARS)

    # {+paper_id}: a DOI holds '/', which a plain {paper_id} never matches
    @server.resource("paper://{+paper_id}", mime_type="text/plain",
                     description="A paper's metadata and abstract, by id, arXiv id or DOI.")
    def paper(paper_id: str) -> str:
        try:
            return text_of(tools.get_paper(paper_id, MAX_MAX_CHARS))
        except RagError as exc:  # the SDK's "not found" (-32602) with rag's message; no traceback
            raise ResourceNotFoundError(exc.one_line()) from None

    @server.resource("rag://indexes", mime_type="application/json",
                     description="The indexes of this server with their paper counts.")
    def indexes() -> str:
        import json

        return json.dumps({"default": tools.settings.index,
                           "indexes": [i.model_dump() for i in tools.indexes()]})

    for tool in server._tool_manager.list_tools():
        tool.parameters["additionalProperties"] = False  # as call_tool enforces
        tool.description = inspect.cleandoc(tool.description)  # the docstring's indents
    return server
