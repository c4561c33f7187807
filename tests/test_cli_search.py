"""The `rag` command as a user runs it: help, `rag papers`, `rag papers show`, `rag search`."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
import pytest

from rag.corpus.paper import Paper
from tests.conftest import run_rag

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = json.loads((ROOT / "tests" / "data" / "seeds_golden.json").read_text(encoding="utf-8"))
LONG_SEQ = "which systems target long-sequence training?"


@pytest.fixture(scope="module")
def project(seeded_settings, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:  # type: ignore[no-untyped-def]
    """The CLI pointed at the session's index over seeds/ (only read here, never written)."""
    return tmp_path_factory.mktemp("cli"), {"RAG_HOME": str(seeded_settings.home)}


def rag(project, *args: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    cwd, env = project
    return run_rag(*args, cwd=cwd, env=env)


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        out.append((*prefix, name))
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, (*prefix, name)))
    return out


def test_help_for_rag_and_every_subcommand(tmp_path: Path) -> None:
    from rag.cli import cli

    commands = [(), *_commands(cli)]
    assert {("ingest",), ("search",), ("papers",), ("papers", "show")} <= set(commands)
    with ThreadPoolExecutor(max_workers=4) as pool:
        procs = list(pool.map(lambda c: run_rag(*c, "--help", cwd=tmp_path), commands))
    for command, proc in zip(commands, procs, strict=True):
        assert proc.returncode == 0, (command, proc.stderr)
        assert proc.stdout.startswith("Usage: rag"), command
        assert f"Usage: rag {' '.join(command)}".rstrip() in proc.stdout
    assert not (tmp_path / ".rag").exists()  # help touches no index


def test_search_lists_ranks_and_labels(project) -> None:  # type: ignore[no-untyped-def]
    proc = rag(project, "search", LONG_SEQ, "-k", "5")
    assert proc.returncode == 0, proc.stderr
    assert "ingesting" not in proc.stderr
    ranked = re.findall(r"^ ?(\d+)\. (.+?)(?:  \[.*\])?$", proc.stdout, flags=re.M)
    assert [int(r) for r, _ in ranked] == [1, 2, 3, 4, 5]
    assert {"Skrull", "DeepSpeed-Ulysses", "Buff"} <= {label for _, label in ranked}
    assert "Buff  [2024 · arXiv:2401.09149]" in proc.stdout
    assert proc.stdout.count("seeds/0") == 5  # where each one comes from
    assert "#2401.09149  relevance " in proc.stdout


def test_search_with_a_title_shows_it(project) -> None:  # type: ignore[no-untyped-def]
    proc = rag(project, "search", "Tutel", "-k", "3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(" 1. Tutel: Adaptive Mixture-of-Experts at Scale  [MLSYS · 2023]\n")


def test_search_filters_on_the_command_line(project) -> None:  # type: ignore[no-untyped-def]
    proc = rag(project, "search", "training", "--venue", "mlsys", "--year", "2023", "-k", "25")
    assert proc.returncode == 0, proc.stderr
    assert len(re.findall(r"^ ?\d+\. ", proc.stdout, flags=re.M)) == 25
    assert proc.stdout.count("seeds/002_") == 25
    none = rag(project, "search", "training", "--year", "1999")
    assert none.returncode == 0 and none.stdout.strip() == "No papers match the filters: year 1999."
    bad = rag(project, "search", "training", "--year", "last year")
    assert bad.returncode == 2
    assert "year filter 'last year' is not a year or range" in bad.stderr


def test_papers_json_lists_all_sixty_papers_with_all_fields(project) -> None:  # type: ignore[no-untyped-def]
    proc = rag(project, "papers", "--json")
    assert proc.returncode == 0, proc.stderr
    papers = json.loads(proc.stdout)["papers"]
    assert len(papers) == 60
    fields = {f.name for f in dataclasses.fields(Paper)} - Paper.INTERNAL
    for got, golden in zip(papers, GOLDEN, strict=True):
        assert set(got) == fields
        golden = dict(golden)
        assert got.pop("source").endswith(golden.pop("source"))  # relative to where it was run
        abstract = got.pop("abstract")
        got.update(abstract_start=abstract[:60], abstract_end=abstract[-60:], abstract_len=len(abstract))
        # no seeds paper is in two files: one source each, no ids beyond the record's own
        assert got.pop("ids") == {} and got.pop("sources") == []
        # listings name no journal and split no name otherwise than the display strings do
        assert got.pop("venue_kind") is None and got.pop("author_names") == []
        assert got == golden


def test_papers_lists_ids_and_labels(project) -> None:  # type: ignore[no-untyped-def]
    proc = rag(project, "papers")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 60
    assert "60 papers" in proc.stderr
    assert any(re.match(r"^2401\.09149\s+Buff$", line) for line in lines)


def test_papers_show(project) -> None:  # type: ignore[no-untyped-def]
    proc = rag(project, "papers", "show", "2207.01160")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for line in ["label: PASCL", "arxiv_id: 2207.01160", "venue: ICML", "year: 2022",
                 "date: 2022-07-03", "comments: ICML 2022", "position: 10"]:
        assert line in out, line
    assert "Existing out-of-distribution (OOD) detection methods" in out
    as_json = json.loads(rag(project, "papers", "show", "2207.01160", "--json").stdout)
    golden = next(g for g in GOLDEN if g["paper_id"] == "2207.01160")
    shared = set(golden) & set(as_json) - {"source"}
    assert len(shared) == 13  # every field but the abstract (start/end/length in the golden file)
    assert {k: as_json[k] for k in shared} == {k: golden[k] for k in shared}


def test_papers_show_unknown_id_exits_2_with_a_hint(project) -> None:  # type: ignore[no-untyped-def]
    proc = rag(project, "papers", "show", "9999.99999")
    assert proc.returncode == 2
    assert "no paper with id, citation key, arXiv id, DOI or PMID '9999.99999'" in proc.stderr
    assert "hint:" in proc.stderr and "rag papers" in proc.stderr
    assert proc.stdout == ""
