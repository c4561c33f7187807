"""The documentation's reference pages, generated from the code at `mkdocs build` time.

An MkDocs hook (mkdocs.yml: `hooks:`): a page with a line `<!-- generated: NAME -->` gets, in its
place, what NAME's generator writes from the code, so the reference cannot drift from it:

    settings   every field of rag.config.Settings (variable, default, values, description),
               then the variables rag reads outside Settings
    cli        every command's --help (scripts/cli_reference.py)
    openapi    every endpoint and schema of `rag serve`'s OpenAPI document
               (rag.api.app.create_app), which is also written to reference/openapi.json

Run alone, it prints one generated block: `python scripts/docs_reference.py settings`; with
`--write` it writes every block into its page, where it is committed (so that the pages read
whole on a code host; a test checks that they are current).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
import tempfile
import types
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the checkout being documented, not an installed copy
    sys.path.insert(0, str(ROOT))

MARKER = re.compile(r"^<!-- generated: (\w+) -->$", re.M)  # a line of its own
# A block as committed: the marker, what its generator wrote, the end marker. Committed so that
# the pages read whole on a code host too; tests/test_docs.py checks they are current.
BLOCK = re.compile(r"^<!-- generated: (\w+) -->\n(?:.*?\n)?<!-- end generated: \1 -->$", re.M | re.S)

# Read by rag outside Settings (tests/test_docs.py checks that every RAG_ variable the code
# reads is on the page); Settings' own fields come from the class.
OTHER_VARIABLES = {
    "RAG_SERVER_URL": "`rag ask` and `rag search` become thin clients of the `rag serve` at "
    "this URL (read by `rag/client.py`, so that they start without pydantic); `RAG_API_KEY` "
    "and `RAG_INDEX` are sent with it.",
    "RAG_DEBUG": "`1` (any value but empty, `0`, `false`, `no`, `off`): an error shows its "
    "traceback; the exit code stays the documented one.",
    "NO_COLOR": "Set: log levels are never coloured (they are coloured only on a terminal).",
    "XDG_CACHE_HOME": "When set, the default `RAG_MODEL_CACHE` is `$XDG_CACHE_HOME/rag`.",
}


# --- settings -----------------------------------------------------------------------------

def _sections() -> dict[str, str]:
    """Field name -> the heading comment above its group in rag/config.py (`# Storage`)."""
    source = (ROOT / "rag" / "config.py").read_text()
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Settings")
    lines = source.splitlines()
    out: dict[str, str] = {}
    heading = ""
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        # A group's heading is a comment line right after a blank line, above its first
        # field; the fields below it, up to the next heading, are in its group.
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#"):
            if row == 0 or not lines[row - 1].strip():
                heading = re.split(r" \(", lines[row].strip().lstrip("#").strip())[0]
                break
            row -= 1
        out[node.target.id] = heading
    return out


def _default(name: str, value: Any) -> str:
    if value is None:
        return "unset"
    if value == "":
        return "empty"
    if name == "model_cache":  # depends on the machine's $HOME / $XDG_CACHE_HOME
        return "`~/.cache/rag`"
    if name == "home":  # the user's data folder (rag.config.default_home)
        return "`~/.local/share/rag`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def _values(annotation: Any, metadata: list[Any]) -> str:
    """What a field accepts: its choices, its type and its bounds."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        parts = [_values(a, []) for a in args if a is not type(None)]
        kinds = ", ".join(p for p in parts if p)
    elif origin is typing.Literal:
        kinds = ", ".join(f"`{str(a).lower() if isinstance(a, bool) else a}`" for a in args)
    else:
        kinds = {int: "integer", float: "number", str: "text", bool: "`true`, `false`",
                 Path: "path"}.get(annotation, getattr(annotation, "__name__", str(annotation)))
    bounds = []
    for item in metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if getattr(item, attr, None) is not None:
                bound = getattr(item, attr)
                bounds.append(f"{sign} {int(bound) if float(bound).is_integer() else bound:,}")
    return f"{kinds} ({', '.join(bounds)})" if bounds else kinds


def _text(text: str) -> str:
    """Markdown of a description: `<model>` outside code spans is text, not an HTML tag."""
    parts = text.split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def _cell(text: str) -> str:
    return _text(" ".join(text.split())).replace("|", "\\|")


def settings_reference() -> str:
    from pydantic import AliasChoices

    from rag.config import Settings, env_name

    sections = _sections()
    groups: dict[str, list[str]] = {}
    for name, field in Settings.model_fields.items():
        variable = f"`{env_name(name)}`"
        if isinstance(field.validation_alias, AliasChoices):
            others = [a for a in field.validation_alias.choices
                      if isinstance(a, str) and a != env_name(name)]
            variable += "".join(f" (or `{a}`)" for a in others)
        row = (f"| {variable} | {_default(name, field.default)} | "
               f"{_cell(_values(field.annotation, field.metadata))} | {_cell(field.description or '')} |")
        groups.setdefault(sections.get(name) or "Other", []).append(row)
    out = []
    for heading, rows in groups.items():
        out += [f"### {heading}", "", "| variable | default | values | what it does |",
                "|---|---|---|---|", *rows, ""]
    out += ["### Read outside the settings", "", "| variable | what it does |", "|---|---|"]
    out += [f"| `{name}` | {_cell(text)} |" for name, text in OTHER_VARIABLES.items()]
    return "\n".join(out) + "\n"


# --- CLI ----------------------------------------------------------------------------------

def cli_reference() -> str:
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.reference(level=2))


# --- OpenAPI ------------------------------------------------------------------------------

def openapi() -> dict[str, Any]:
    from rag.api.app import create_app
    from rag.config import Settings

    with tempfile.TemporaryDirectory() as home:  # no lifespan runs: no index is opened
        return create_app(Settings(home=Path(home) / ".rag")).openapi()


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        parts = [_type(s) for s in schema["anyOf"] if s.get("type") != "null"]
        nullable = any(s.get("type") == "null" for s in schema["anyOf"])
        return " or ".join(parts) + (" or null" if nullable else "")
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema and isinstance(schema["additionalProperties"], dict):
        return f"object of {_type(schema['additionalProperties'])}"
    return str(kind)


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else str(value)


def _limits(schema: dict[str, Any]) -> str:
    found: list[str] = []
    for part in [schema, *schema.get("anyOf", [])]:
        for low, high, unit in (("minimum", "maximum", ""), ("exclusiveMinimum", "maximum", ""),
                                ("minLength", "maxLength", " characters"),
                                ("minItems", "maxItems", " items")):
            lo, hi = part.get(low), part.get(high)
            strict = low.startswith("exclusive")
            if lo is not None and hi is not None:
                found.append(f"{'> ' if strict else ''}{_number(lo)}{'' if strict else '–'}"
                             f"{', ≤ ' if strict else ''}{_number(hi)}{unit}")
            elif lo is not None:
                found.append(f"{'>' if strict else '≥'} {_number(lo)}{unit}")
            elif hi is not None and not strict:
                found.append(f"≤ {_number(hi)}{unit}")
    if "default" in schema and schema["default"] is not None:
        found.append(f"default `{json.dumps(schema['default'])}`")
    return "; ".join(found)


def _properties(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    rows = ["| field | type | required | limits | description |", "|---|---|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        rows.append(f"| `{name}` | {_type(prop)} | {'yes' if name in required else ''} | "
                    f"{_cell(_limits(prop))} | {_cell(prop.get('description', ''))} |")
    return rows


def openapi_reference(spec: dict[str, Any] | None = None) -> str:
    spec = spec or openapi()
    out = [f"`rag serve` {spec['info']['version']}: {_cell(spec['info'].get('summary', ''))} "
           "The same document, as JSON: [openapi.json](openapi.json); a running server serves "
           "it at `/openapi.json` and its try-it pages at `/docs`.", "", "## Endpoints", ""]
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            out += [f"### `{method.upper()} {path}`", "", _text(op.get("summary", "")), ""]
            if op.get("description"):
                out += [_text(op["description"].strip()), ""]
            params = op.get("parameters", [])
            if params:
                out += ["| parameter | in | type | required | limits | description |",
                        "|---|---|---|---|---|---|"]
                out += [f"| `{p['name']}` | {p['in']} | {_type(p['schema'])} | "
                        f"{'yes' if p.get('required') else ''} | {_cell(_limits(p['schema']))} | "
                        f"{_cell(p.get('description', ''))} |" for p in params]
                out.append("")
            body = op.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                out += [f"Request body ({media}): {_type(content.get('schema', {}))}", ""]
            responses = []
            for code, resp in sorted(op.get("responses", {}).items()):
                kinds = ", ".join(f"{_type(c.get('schema', {}))} ({m})"
                                  for m, c in resp.get("content", {}).items() if c.get("schema"))
                responses.append(f"| {code} | {_cell(resp.get('description', ''))} | {kinds} |")
            out += ["| status | meaning | body |", "|---|---|---|", *responses, ""]
    out += ["## Schemas", ""]
    for name, schema in sorted(spec["components"]["schemas"].items()):
        out += [f"### {name}", ""]
        if schema.get("description"):
            out += [_text(schema["description"].strip()), ""]
        out += [*_properties(schema), ""] if schema.get("properties") else [f"Type: {_type(schema)}", ""]
    return "\n".join(out) + "\n"


GENERATORS = {"settings": settings_reference, "cli": cli_reference, "openapi": openapi_reference}


# --- the MkDocs hook ----------------------------------------------------------------------

def fill(markdown: str, where: str = "") -> str:
    """The page with each generated block written anew from the code (a marker without its
    block, or a block gone stale, alike)."""
    def generated(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{where}: no generator named {name!r} "
                             f"(scripts/docs_reference.py has {', '.join(GENERATORS)})")
        return f"<!-- generated: {name} -->\n{GENERATORS[name]().rstrip()}\n<!-- end generated: {name} -->"

    markdown = BLOCK.sub(lambda m: f"<!-- generated: {m.group(1)} -->", markdown)
    return MARKER.sub(generated, markdown)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    return fill(markdown, page.file.src_uri)


def on_files(files: Any, config: Any, **_: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, "reference/openapi.json",
                                content=json.dumps(openapi(), indent=2) + "\n"))
    return files


def write_pages() -> list[str]:
    """Rewrite the committed blocks of docs/reference/ (`--write`); the pages changed."""
    changed = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        if MARKER.search(text) and (new := fill(text, str(page))) != text:
            page.write_text(new, encoding="utf-8")
            changed.append(str(page.relative_to(ROOT)))
    return changed


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        print("\n".join(write_pages()) or "the reference pages are current")
        raise SystemExit(0)
    names = sys.argv[1:] or list(GENERATORS)
    unknown = [n for n in names if n not in GENERATORS]
    if unknown:
        raise SystemExit(f"unknown generator {unknown}; choose from {', '.join(GENERATORS)}")
    for name in names:
        print(GENERATORS[name]())
