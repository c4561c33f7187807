"""The package's shape: layers one way (import-linter contract in pyproject.toml), no import
cycles, no module over 400 lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 400


def test_layers_contract_is_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    res = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_no_import_cycles() -> None:
    import grimp

    graph = grimp.build_graph("rag")
    cycles = []
    for module in sorted(graph.modules):
        for dep in graph.find_modules_directly_imported_by(module):
            # a package's __init__ re-exporting its own submodules is not a cycle of the code
            if dep.startswith(module + ".") or module.startswith(dep + "."):
                continue
            chain = graph.find_shortest_chain(importer=dep, imported=module)
            if chain and not any(a.startswith(b + ".") or b.startswith(a + ".")
                                 for a, b in zip(chain, chain[1:], strict=False)):
                cycles.append(" -> ".join([module, *chain]))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_module_is_over_400_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "rag").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules: {long}"


def test_the_top_of_the_package_reads_as_the_path_of_a_question() -> None:
    """At most 14 modules beside the packages (corpus, embed, store, retrieve, relevance,
    answering, cli, api, eval, integrations): halves of one thing live in one package."""
    top = sorted(p.name for p in (ROOT / "rag").glob("*.py"))
    assert len(top) <= 14, f"{len(top)} modules at the top of rag/: {top}"
    for package in ("corpus", "embed", "store", "retrieve", "relevance", "answering", "cli", "eval"):
        assert (ROOT / "rag" / package / "__init__.py").is_file(), package
