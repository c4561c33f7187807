"""Only the default index fills itself from seeds/: an empty index named on purpose says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import SEEDS, run_rag
from tests.rag_server import reserve_port


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"RAG_HOME": str(home), "RAG_SEEDS": str(SEEDS), **extra}


@pytest.mark.parametrize("args,env", [
    (["papers", "--index", "mine"], {}),
    (["search", "long sequences"], {"RAG_INDEX": "mine"}),
    (["ask", "--llm", "none", "what is Skrull?", "--index", "mine"], {}),
    (["chat", "--index", "mine"], {}),
])
def test_an_empty_named_index_is_not_filled_with_seeds(args: list[str], env: dict[str, str],
                                                       tmp_path: Path) -> None:
    res = run_rag(*args, cwd=tmp_path, env=_env(tmp_path / ".rag", **env))
    assert res.returncode == 3, res.stderr
    assert "there is no index 'mine'" in res.stderr and "(no index holds papers yet)" in res.stderr
    assert "rag ingest PATH --index mine" in res.stderr
    assert "ingesting" not in res.stderr and res.stdout == ""


def test_a_mistyped_index_is_refused_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """Every read of an index that is not there says so, naming those that are; none makes
    the index, so the next read says the same (not "is empty"), and `rag mcp` lists none."""
    home = tmp_path / ".rag"
    built = run_rag("ingest", "-q", str(SEEDS / "000_1d593446947ebb0f.txt"), "--index", "lib",
                    cwd=tmp_path, env=_env(home))
    assert built.returncode == 0, built.stderr
    with reserve_port() as hold:
        reads = [["search", "long sequences", "--index", "lbi"], ["papers", "--index", "lbi"],
                 ["ask", "--llm", "none", "What is Skrull?", "--index", "lbi"],
                 ["papers", "--index", "lbi", "show", "x"], ["mcp", "--index", "lbi"],
                 ["serve", "--port", str(hold.getsockname()[1]), "--index", "lbi"],
                 ["search", "long sequences", "--index", "lbi"]]
        for args in reads:
            res = run_rag(*args, cwd=tmp_path, env=_env(home))
            assert res.returncode == 3, (args, res.stderr)
            assert "there is no index 'lbi'" in res.stderr and "(the indexes are: lib)" in res.stderr, args
            assert res.stdout == "", args


def test_a_failed_ingest_into_a_named_index_does_not_show_the_seeds(tmp_path: Path) -> None:
    """The issue's case: `rag ingest library.bib --index bib` fails, then `rag papers --index bib`."""
    (tmp_path / "library.bib").write_text("@article{a,\n  title = {Unclosed\n")
    home = tmp_path / ".rag"
    failed = run_rag("ingest", "library.bib", "--index", "bib", cwd=tmp_path, env=_env(home))
    assert failed.returncode == 2, failed.stderr
    listed = run_rag("papers", "--index", "bib", cwd=tmp_path, env=_env(home))
    assert listed.returncode == 3, listed.stderr
    assert "Skrull" not in listed.stdout and "there is no index 'bib'" in listed.stderr


def test_serve_on_an_empty_named_index_exits_3(tmp_path: Path) -> None:
    with reserve_port() as hold:  # a port taken meanwhile would be exit 2, not the 3 checked
        res = run_rag("serve", "--port", str(hold.getsockname()[1]), "--index", "mine",
                      cwd=tmp_path, env=_env(tmp_path / ".rag"))
    assert res.returncode == 3, res.stderr
    assert "there is no index 'mine'" in res.stderr and "--index mine" in res.stderr


def test_an_index_keeps_the_chunk_vectors_it_was_built_with(tmp_path: Path) -> None:
    """Chunk vectors made another way (here pooled from the sentence pass,
    RAG_CHUNK_VECTORS=sentences) are not mixed with the model's: with the setting unset, that
    index is read and grown as it was built; set to the other kind, the index's name says what
    happened and how to read it. The model's precision is no such setting: an index built with
    fp32 answers int8 queries and the other way round."""
    home = tmp_path / ".rag"
    seed = str(SEEDS / "000_1d593446947ebb0f.txt")
    built = run_rag("ingest", "-q", seed, "--index", "lib", cwd=tmp_path,
                    env=_env(home, RAG_CHUNK_VECTORS="sentences"))
    assert built.returncode == 0, built.stderr
    kept = run_rag("search", "long sequences", "--index", "lib", cwd=tmp_path, env=_env(home))
    assert kept.returncode == 0 and "Long-SFT" in kept.stdout, kept.stderr
    pooled = _env(home, RAG_CHUNK_VECTORS="sentences")
    before = run_rag("papers", "--index", "lib", cwd=tmp_path, env=pooled).stdout.splitlines()
    grown = run_rag("ingest", "-q", str(SEEDS / "001_081bc128d00d0de2.txt"), "--index", "lib",
                    cwd=tmp_path, env=_env(home))
    assert grown.returncode == 0, grown.stderr
    after = run_rag("papers", "--index", "lib", cwd=tmp_path, env=pooled).stdout.splitlines()
    assert len(after) > len(before) > 0  # grown in the index's own collection
    other = run_rag("search", "long sequences", "--index", "lib", cwd=tmp_path,
                    env=_env(home, RAG_CHUNK_VECTORS="model"))
    assert other.returncode == 3, other.stderr
    assert "built with other chunk settings" in other.stderr and "RAG_CHUNK_VECTORS" in other.stderr
    # the rebuild names the file the index was built from (after an upgrade that changed the
    # chunking, the user may not remember them)
    files = " ".join(str((SEEDS / f).resolve()) for f in ("000_1d593446947ebb0f.txt", "001_081bc128d00d0de2.txt"))
    assert f"rag ingest {files} --index lib" in other.stderr and other.stdout == ""

    fp32 = run_rag("ingest", "-q", seed, "--index", "full", cwd=tmp_path,
                   env=_env(home, RAG_EMBED_PRECISION="fp32"))
    assert fp32.returncode == 0, fp32.stderr
    int8 = run_rag("search", "long sequences", "--index", "full", cwd=tmp_path, env=_env(home))
    assert int8.returncode == 0 and "Long-SFT" in int8.stdout, int8.stderr


def test_a_default_index_of_ones_own_papers_built_otherwise_is_not_refilled_with_seeds(tmp_path: Path) -> None:
    """The default index, empty under these chunk settings, fills itself from seeds/ only when
    what it held under others came from seeds/: a library of one's own, built before an upgrade
    changed the chunking (or with other RAG_CHUNK_* settings), is named for its rebuild, not
    replaced by the seed papers as if it were gone."""
    home = tmp_path / ".rag"
    (tmp_path / "mine.jsonl").write_text(
        '{"id": "g1", "title": "Goodie", "abstract": "We propose Goodie, a system for long sequences."}\n',
        encoding="utf-8")
    built = run_rag("ingest", "-q", "mine.jsonl", cwd=tmp_path, env=_env(home, RAG_CHUNK_SIZE="300"))
    assert built.returncode == 0, built.stderr
    read = run_rag("search", "long sequences", cwd=tmp_path, env=_env(home))
    assert read.returncode == 3 and "ingesting" not in read.stderr and read.stdout == ""
    assert f"rag ingest {(tmp_path / 'mine.jsonl').resolve()} --index default" in read.stderr
    rebuilt = run_rag("ingest", "-q", str(tmp_path / "mine.jsonl"), cwd=tmp_path, env=_env(home))
    assert rebuilt.returncode == 0, rebuilt.stderr
    found = run_rag("search", "long sequences", cwd=tmp_path, env=_env(home))
    assert found.returncode == 0 and "Goodie" in found.stdout, found.stderr

    # one built from seeds/ alone (of another checkout, here) fills itself again from seeds/,
    # as a new one does
    seeded, elsewhere = tmp_path / "seeded", tmp_path / "old-checkout" / "seeds"
    elsewhere.mkdir(parents=True)
    shutil.copy(SEEDS / "000_1d593446947ebb0f.txt", elsewhere)
    built = run_rag("ingest", "-q", str(elsewhere / "000_1d593446947ebb0f.txt"), cwd=tmp_path,
                    env=_env(seeded, RAG_CHUNK_SIZE="300"))
    assert built.returncode == 0, built.stderr
    read = run_rag("search", "long sequences", cwd=tmp_path, env=_env(seeded))
    assert read.returncode == 0 and "ingesting" in read.stderr and "Long-SFT" in read.stdout, read.stderr


def test_fast_ingest_builds_a_pooled_index_and_never_a_second_one_beside_another(tmp_path: Path) -> None:
    """`rag ingest --fast` builds an index of pooled chunk vectors, read afterwards as it was
    built. Asked of an index the model's chunk vectors built, it is refused before anything is
    written: a second collection under the same name would hold papers no read sees."""
    home = tmp_path / ".rag"
    seed, other_seed = str(SEEDS / "000_1d593446947ebb0f.txt"), str(SEEDS / "001_081bc128d00d0de2.txt")
    built = run_rag("ingest", "-q", "--fast", seed, "--index", "lib", cwd=tmp_path, env=_env(home))
    assert built.returncode == 0, built.stderr
    found = run_rag("search", "long sequences", "--index", "lib", cwd=tmp_path, env=_env(home))
    assert found.returncode == 0 and "Long-SFT" in found.stdout, found.stderr
    as_model = run_rag("search", "long sequences", "--index", "lib", cwd=tmp_path,
                       env=_env(home, RAG_CHUNK_VECTORS="model"))
    assert as_model.returncode == 3 and "built with other chunk settings" in as_model.stderr

    made = run_rag("ingest", "-q", other_seed, "--index", "full", cwd=tmp_path, env=_env(home))
    assert made.returncode == 0, made.stderr
    papers = run_rag("papers", "--index", "full", cwd=tmp_path, env=_env(home)).stdout
    on_disk = sorted(p.name for p in (home / "chroma").iterdir())
    refused = run_rag("ingest", "-q", "--fast", seed, "--index", "full", cwd=tmp_path, env=_env(home))
    assert refused.returncode == 2, refused.stderr
    assert "the index 'full' was built with the model reading each chunk" in refused.stderr
    assert "--index NEW" in refused.stderr and refused.stdout == ""
    assert sorted(p.name for p in (home / "chroma").iterdir()) == on_disk
    assert run_rag("papers", "--index", "full", cwd=tmp_path, env=_env(home)).stdout == papers
    listed = run_rag("papers", "--index", "lib", cwd=tmp_path, env=_env(home))
    before = listed.stdout.splitlines()
    assert before, listed.stderr
    grown = run_rag("ingest", "-q", "--fast", other_seed, "--index", "lib", cwd=tmp_path, env=_env(home))
    assert grown.returncode == 0, grown.stderr  # an index of its own kind grows
    after = run_rag("papers", "--index", "lib", cwd=tmp_path, env=_env(home)).stdout.splitlines()
    assert len(after) > len(before) > 0

    watched = run_rag("ingest", "--fast", "--watch", seed, cwd=tmp_path, env=_env(home))
    assert watched.returncode == 2 and "--fast builds an index" in watched.stderr


def test_index_may_follow_the_papers_rag_papers_shows_or_exports(tmp_path: Path) -> None:
    """`rag papers show ID --index lib` was refused ("No such option '--index'") and `rag papers
    --format bibtex ID --index lib` said the ids "need --format, given before them": options
    after the ids, as every other command takes them."""
    (tmp_path / "lib.bib").write_text(
        "@inproceedings{jiang2024dynapipe, title = {DynaPipe}, booktitle = {EuroSys}, year = {2024},\n"
        "  author = {Jiang, Chenyu}, eprint = {2311.10418}, archiveprefix = {arXiv},\n"
        "  abstract = {Multi-task model training is made efficient by dynamic micro-batching.}}\n")
    env = _env(tmp_path / ".rag")
    built = run_rag("ingest", "-q", "lib.bib", "--index", "lib", cwd=tmp_path, env=env)
    assert built.returncode == 0, built.stderr
    shown = run_rag("papers", "show", "2311.10418", "--index", "lib", cwd=tmp_path, env=env)
    assert shown.returncode == 0 and "title: DynaPipe\n" in shown.stdout, shown.stderr
    for args in (["--format", "bibtex", "2311.10418", "--index", "lib"],
                 ["2311.10418", "--index", "lib", "--format", "bibtex"]):
        exported = run_rag("papers", *args, cwd=tmp_path, env=env)
        assert exported.returncode == 0 and exported.stdout.startswith("@inproceedings{jiang2024dynapipe,"), (
            args, exported.stderr)
    unformatted = run_rag("papers", "2311.10418", "--index", "lib", cwd=tmp_path, env=env)
    assert unformatted.returncode == 2 and "need --format" in unformatted.stderr
