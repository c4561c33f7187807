"""A researcher's first hour: their papers apart from the demo papers, in their data folder,
from any folder. The "Your first library" page's commands run as written, and after the
README's quick start a `.bib` of two papers leaves the default index with exactly those two."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

from tests.conftest import ROOT, SEEDS, run_rag

PDFS = ROOT / "tests" / "data" / "pdf"
BIB = """@inproceedings{okafor2024sparse,
  title = {Sparse Gradient Exchange for Federated Training on Phones},
  author = {Okafor, Amara and Brandt, Lukas and Tanaka, Mei},
  booktitle = {Proceedings of the Workshop on Systems for Learning},
  year = {2024},
  doi = {10.5555/sparsex.2024.7},
  abstract = {Federated learning trains one model across many phones without collecting their data,
    but every round sends a full gradient from each phone. We present SparseX, which sends only the
    largest one percent of each gradient's entries; it reaches the accuracy of full exchange while
    sending 42 times fewer bytes.},
}
@article{weber2024citations,
  title = {Unrelated Notes on Citation Practice},
  author = {Weber, Jonas},
  year = {2024},
  abstract = {We survey how researchers cite preprints and find that most citations of a preprint
    remain after its journal version appears, which splits its citation count in two.},
}
"""


def _library(folder: Path) -> Path:
    folder.mkdir()
    for name in ("twocolumn.pdf", "journal.pdf", "preprint.pdf"):
        shutil.copy2(PDFS / name, folder / name)
    (folder / "refs.bib").write_text(BIB)
    (folder / "README.md").write_text("my papers\n")
    return folder


def test_the_first_library_page_runs_as_written(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "library" / "first.md").read_text()
    block = re.search(r"```bash\n(.*?)```", page, re.S)
    assert block
    library = _library(tmp_path / "papers")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    outputs = []
    for line in block.group(1).strip().splitlines():
        words = shlex.split(line.replace("~/papers", str(library)))
        out_file = None
        if ">" in words:
            out_file = cwd / words[words.index(">") + 1]
            words = words[: words.index(">")]
        assert words[0] == "rag"
        done = run_rag(*words[1:], cwd=cwd, env=env)
        assert done.returncode == 0, (line, done.stderr)
        if out_file:
            out_file.write_text(done.stdout)
        outputs.append(done)
    ingest, listed, asked, exported, checked = outputs
    assert "not read: " in ingest.stderr and "README.md" in ingest.stderr
    assert re.search(r"^mine\t4 papers$", listed.stdout, re.M), listed.stdout  # 3 PDFs + 1 .bib, one merged
    assert "42 times fewer bytes" in asked.stdout and "[1]" in asked.stdout
    assert "okafor2024sparse" in (cwd / "mine.bib").read_text()  # the .bib's key, exported again
    assert "supported" in checked.stdout
    assert sorted(p.name for p in cwd.iterdir()) == ["mine.bib"]  # nothing of rag's own here
    assert (tmp_path / "data" / "rag" / "chroma").is_dir()


def test_after_the_quick_start_a_bib_of_two_papers_is_all_the_default_index_holds(tmp_path: Path) -> None:
    work = tmp_path / "clone"
    shutil.copytree(SEEDS, work / "seeds")
    demo = run_rag("ask", "--llm", "none", "which systems target long-sequence training?", cwd=work)
    assert demo.returncode == 0 and "demo index" in demo.stderr, demo.stderr
    (work / "refs.bib").write_text(BIB)
    assert run_rag("ingest", "refs.bib", "-q", cwd=work).returncode == 0
    sizes = json.loads(run_rag("index", "list", "--json", cwd=work).stdout)
    assert sizes == {"default": 2, "demo": 60}, sizes
    papers = json.loads(run_rag("papers", "--json", cwd=work).stdout)["papers"]
    assert sorted(p["title"] for p in papers) == sorted(
        ["Sparse Gradient Exchange for Federated Training on Phones", "Unrelated Notes on Citation Practice"])
    assert not (work / ".rag").exists()


def test_an_earlier_rags_dot_rag_keeps_working_and_is_named(tmp_path: Path) -> None:
    legacy = tmp_path / ".rag"  # made by an earlier rag, which kept its data in the folder it ran in
    (tmp_path / "refs.bib").write_text(BIB)
    assert run_rag("ingest", "refs.bib", "-q", cwd=tmp_path, env={"RAG_HOME": str(legacy)}).returncode == 0
    listed = run_rag("papers", "--json", cwd=tmp_path)  # no RAG_HOME: the default data folder
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["papers"]) == 2  # the index is not lost on upgrade
    assert listed.stderr.count("using ./.rag") == 1 and "RAG_HOME" in listed.stderr
