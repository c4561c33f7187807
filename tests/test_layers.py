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


# Words that lead a seed paper's title or follow "we propose" in its abstract without naming
# it ("LLMs: ...", "propose Temporal ..."): general words, not a paper's name.
_NOT_NAMES = {"Adaptor", "Auxiliary", "Breadth-First", "Buff", "Edge", "Edge Impulse", "LLM", "LLMs",
              "Partial", "PyTorch", "PyTorch RPC", "Temporal", "TinyML"}


def _seed_paper_names() -> set[str]:
    """What the papers of seeds/ call themselves: the head of a title before its colon, and
    the name an abstract introduces its work by (rag's own reading of "we propose X")."""
    import re

    from rag.corpus import read_all
    from rag.question.patterns import introduced_names

    results, _, _ = read_all(sorted((ROOT / "seeds").iterdir()), skip_bad=True)
    names: set[str] = set()
    for paper in (p for r in results for p in r.papers):
        names |= set(introduced_names(paper.abstract or ""))
        head = re.match(r"\s*([^:]{2,40}):", paper.title or "")
        if head and len(head.group(1).split()) <= 3:
            names.add(head.group(1).strip())
        names |= set(re.findall(r"\b(?:propose|present|introduce|design|develop|build)\w*\s+"
                                r"(?:a\s+\w+\s+\w+,?\s+)?([A-Z][\w\-²]+)", paper.abstract or ""))
    return names - _NOT_NAMES


def test_no_seed_paper_is_named_in_the_package() -> None:
    """Rules are written for any library: an example in a comment of rag/ names no paper of the
    demo corpus (those examples belong in tests and docs, where a reader can check them)."""
    import re

    names = _seed_paper_names()
    assert len(names) >= 30, sorted(names)  # the reading above still finds the demo's names
    pattern = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
                         + r")(?![\w-])")
    found = [f"{p.relative_to(ROOT)}:{i}: {m.group(0)}" for p in sorted((ROOT / "rag").rglob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1) if (m := pattern.search(line))]
    assert not found, "seed papers named in rag/:\n" + "\n".join(found)
