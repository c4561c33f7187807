"""`rag ingest`: bad input leaves the index as it was; incremental, prune, chunk settings and
separate indexes; a real Chroma in a temp dir and the real embedding model throughout."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from rag.config import Settings
from rag.embed import get_embedder
from rag.ingest import ingest
from rag.store import Store
from tests.conftest import SEEDS, run_rag

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "tests" / "data" / "bad"
S000 = next(SEEDS.glob("000_*.txt"))
S003 = next(SEEDS.glob("003_*.txt"))
S004 = next(SEEDS.glob("004_*.txt"))

# file -> (what stderr must say, line it must name or None)
BAD_FILES: dict[str, tuple[str, int | None]] = {
    "empty.txt": ("file is empty", None),
    "whitespace_only.txt": ("file is empty", None),
    "binary.bin": ("file is binary, not text", None),
    "utf16.txt": ("file is UTF-16 text, not UTF-8", None),
    "latin1.txt": ("invalid UTF-8 byte 0xe9", 2),
    "truncated_listing.txt": ("1 good and 1 bad record(s); first: abstract at the end of the file "
                              "has no `arXiv:ID` line after it", 2),
    "conference_no_abstract.txt": ("1 good and 1 bad record(s); first: entry #2 has a title but no "
                                   "abstract", 12),
    "mixed_layouts.txt": ("an arXiv id line (`arXiv:2401.09149`) in a file in the `Abstract:` lines "
                          "layout", 4),
    "abstract_without_text.txt": ("2 good and 1 bad record(s); first: `Abstract:` line with no text", 2),
    "jsonl_wrong_types.jsonl": ("field `abstract` should be str, got int", 2),
    "jsonl_not_object.jsonl": ("expected a JSON object, got list", 2),
    "jsonl_no_abstract.jsonl": ("record has no `abstract` (or BEIR `text`) field", 2),
    "jsonl_invalid_json.jsonl": ("not valid JSON (Unterminated string", 2),
    "jsonl_bad_year.jsonl": ("field `year` should be a number", 1),
    "jsonl_deep_nesting.jsonl": ("JSON that cannot be read", 2),
    "abstractless.json": ("0 good and 1 bad record(s); first: record has no `abstract`", 1),
    "pretty_printed.json": ("0 good and 4 bad record(s); first: not valid JSON", 1),
    "arxiv_bad_id.txt": ("1 good and 1 bad record(s); first: `arXiv:not-an-id` is not an arXiv id", 4),
    "arxiv_bad_month.txt": ("`arXiv:2313.01234` is not an arXiv id", 2),
    "export_no_id.txt": ("1 good and 1 bad record(s); first: block is followed by no `arXiv:ID` line", 8),
    "unknown_layout.txt": ("content is in no known layout", None),
}
# made by the tests (too big to commit, or not a file at all): name -> (message, line)
GENERATED: dict[str, tuple[str, int | None]] = {
    "long_abstract.txt": ("0 good and 1 bad record(s); first: abstract is 29,999 characters; "
                          "at most 20,000 expected", 1),
    "fifty_mb.txt": ("file is 50 MB; the limit is 20 MB", None),
    "missing.txt": ("no such file or directory", None),
    "empty_dir": ("directory holds no abstract files", None),
}

STATE = r"""
import hashlib, json
from rag.config import Settings
from rag.store import Store
store = Store(Settings())
rows = []
for coll in (store.collection, getattr(store, "sentences_collection", None)):
    if coll is None:
        continue
    got = coll.get(include=["documents", "metadatas", "embeddings"])
    rows += sorted(zip(got["ids"], got["documents"],
                       [json.dumps(m, sort_keys=True) for m in got["metadatas"]],
                       [[round(float(x), 6) for x in e] for e in got["embeddings"]]))
print(json.dumps({"count": store.count(), "rows": len(rows),
                  "digest": hashlib.sha256(json.dumps(rows).encode()).hexdigest()}))
"""


def env(home: Path, **extra: str) -> dict[str, str]:
    return {"RAG_HOME": str(home), **extra}


def index_state(cwd: Path, home: Path) -> dict[str, object]:
    """Chunk count and a digest of every chunk (id, text, metadata, vector), read by a fresh
    process, plus what `rag papers --json` prints."""
    out = subprocess.run([sys.executable, "-c", STATE], cwd=cwd, env={**os.environ, "RAG_HOME": str(home)},
                         capture_output=True, text=True, timeout=120, check=True)
    state = json.loads(out.stdout)
    papers = run_rag("papers", "--json", cwd=cwd, env=env(home))
    assert papers.returncode == 0, papers.stderr
    state["papers"] = papers.stdout
    return state


def tree_digest(directory: Path) -> str:
    """Byte-for-byte fingerprint of a directory (names and contents)."""
    h = hashlib.sha256()
    for f in sorted(p for p in directory.rglob("*") if p.is_file()):
        h.update(f.relative_to(directory).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def small_corpus(path: Path, tag: str, n: int = 2) -> Path:
    return jsonl(path, [{"id": f"{tag}-{i}", "title": f"{tag.title()} paper {i}",
                         "abstract": f"We propose {tag.title()}{i}, a system for topic {tag} number {i}. "
                                     "It is evaluated on small inputs."} for i in range(n)])


# -- bad input ------------------------------------------------------------------------------------


@dataclass
class BadRun:
    path: Path
    proc: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A project directory with an index over seeds/000_* (5 papers)."""
    cwd = tmp_path_factory.mktemp("project")
    home = cwd / ".rag"
    report = ingest([S000], Settings(home=home), show_progress=False)
    assert report.new == 5
    return cwd, home


@pytest.fixture(scope="module")
def bad_runs(base: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[dict[str, BadRun], dict[str, object], dict[str, object]]:
    cwd, home = base
    before = index_state(cwd, home)
    gen = tmp_path_factory.mktemp("generated")
    (gen / "long_abstract.txt").write_text("Abstract:" + "word " * 6_000 + "\n", encoding="utf-8")
    line = "Abstract:" + "word " * 200 + "\n"
    with (gen / "fifty_mb.txt").open("w", encoding="utf-8") as fh:
        fh.write(line * (50 * 2**20 // len(line) + 1))
    (gen / "empty_dir").mkdir()
    (gen / "empty_dir" / "notes.docx").write_bytes(b"PK\x03\x04")  # a kind rag reads no format of
    paths = [BAD / name for name in BAD_FILES] + [gen / name for name in GENERATED]
    # a good new file named together with a bad one: neither may land
    good = small_corpus(gen / "good_new.jsonl", "fresh")
    jobs = {p.name: (p, [str(p)]) for p in paths}
    jobs["good+bad"] = (good, [str(good), str(BAD / "jsonl_not_object.jsonl")])
    tree_before = tree_digest(home / "chroma")
    # none of these may touch the index, so they can run side by side
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = pool.map(lambda job: run_rag("ingest", "-q", *job[1], cwd=cwd, env=env(home)),
                        jobs.values())
        procs = dict(zip(jobs, done, strict=True))
    runs = {name: BadRun(path, procs[name]) for name, (path, _) in jobs.items()}
    (gen / "fifty_mb.txt").unlink()
    assert tree_digest(home / "chroma") == tree_before, "a bad ingest changed the index directory"
    return runs, before, index_state(cwd, home)


def test_bad_files_are_all_listed_in_the_readme() -> None:
    files = {p.name for p in BAD.iterdir() if p.name != "README.md"}
    assert files == set(BAD_FILES)
    assert len(files) >= 15
    readme = (BAD / "README.md").read_text(encoding="utf-8")
    for name in files:
        assert f"`{name}`" in readme, name
    for name, (_, line) in BAD_FILES.items():
        row = next(r for r in readme.splitlines() if r.startswith(f"| `{name}`"))
        assert (f"(line {line})" in row) == (line is not None), row


@pytest.mark.parametrize("name", [*BAD_FILES, *GENERATED])
def test_bad_input_exits_2_naming_file_and_line(bad_runs, name: str) -> None:  # type: ignore[no-untyped-def]
    run = bad_runs[0][name]
    message, line = {**BAD_FILES, **GENERATED}[name]
    err = run.proc.stderr
    assert run.proc.returncode == 2, err
    assert "Traceback" not in err
    assert err.startswith("error: ")
    where = f"{run.path.resolve()}:{line}: " if line else f"{run.path.resolve()}: "
    assert where in err, err
    assert message in err, err
    assert "hint: " in err
    assert run.proc.stdout == ""


def test_good_file_named_with_a_bad_one_is_not_ingested(bad_runs) -> None:  # type: ignore[no-untyped-def]
    run = bad_runs[0]["good+bad"]
    assert run.proc.returncode == 2
    assert "jsonl_not_object.jsonl:2: " in run.proc.stderr
    assert "fresh-0" not in bad_runs[2]["papers"]


def test_bad_input_leaves_the_index_exactly_as_it_was(bad_runs) -> None:  # type: ignore[no-untyped-def]
    # byte-for-byte: checked on the index directory in the fixture; here its content as
    # seen by a fresh process (every chunk's id, text, metadata and vector) and `rag papers`
    _, before, after = bad_runs
    assert after == before
    assert before["count"] > 5  # the index was not empty to begin with
    assert len(json.loads(str(after["papers"]))["papers"]) == 5


# -- incremental ingest -----------------------------------------------------------------------------


def test_second_ingest_says_0_new_0_changed_and_embeds_nothing(workdir: Path) -> None:
    home = workdir / ".rag"
    first = run_rag("ingest", "-q", f"seeds/{S000.name}", cwd=workdir, env=env(home))
    assert first.returncode == 0, first.stderr
    assert "5 papers: 5 new, 0 changed, 0 unchanged, 0 removed" in first.stdout
    n = int(re.search(r"; (\d+) chunks\b", first.stdout).group(1))  # type: ignore[union-attr]
    assert n >= 5
    second = run_rag("ingest", "-q", f"seeds/{S000.name}", cwd=workdir, env=env(home))
    assert second.returncode == 0, second.stderr
    assert "0 new, 0 changed, 5 unchanged, 0 removed; 0 chunks" in second.stdout
    assert "embedding" not in second.stderr


def _chunks(settings: Settings) -> dict[str, list[tuple[str, str]]]:
    """paper_id -> [(chunk id, text)] as stored."""
    ids, docs, metas = Store(settings).chunks()
    out: dict[str, list[tuple[str, str]]] = {}
    for cid, doc, meta in sorted(zip(ids, docs, metas, strict=True)):
        out.setdefault(meta["paper_id"], []).append((cid, doc))
    return out


def test_changed_abstract_replaces_its_chunks(tmp_path: Path, fresh_settings: Settings) -> None:
    dump = tmp_path / "export.txt"
    shutil.copy(S004, dump)
    dump.chmod(0o644)
    first = ingest([dump], fresh_settings, show_progress=False)
    assert (first.new, first.papers) == (10, 10)
    before = _chunks(fresh_settings)
    assert len(before["2305.04241"]) >= 2  # Vcc: a long abstract, several chunks
    total = sum(len(c) for c in before.values())
    assert Store(fresh_settings).count() == total == first.chunks

    text = dump.read_text(encoding="utf-8")
    old = next(line for line in text.splitlines() if line.startswith("Transformer models are foundational"))
    dump.write_text(text.replace(old, "We propose Zeugma, a short replacement abstract."), encoding="utf-8")
    second = ingest([dump], fresh_settings, show_progress=False)
    assert (second.new, second.changed, second.unchanged, second.removed) == (0, 1, 9, 0)
    assert second.chunks == 1

    after = _chunks(fresh_settings)
    assert after["2305.04241"] == [("2305.04241#0", "We propose Zeugma, a short replacement abstract.")]
    assert {k: v for k, v in after.items() if k != "2305.04241"} == \
        {k: v for k, v in before.items() if k != "2305.04241"}
    assert Store(fresh_settings).count() == total - len(before["2305.04241"]) + 1
    assert not any("VIP-token" in doc for chunks in after.values() for _, doc in chunks)
    paper = Store(fresh_settings).paper("2305.04241")
    assert paper is not None and paper.label == "Zeugma"


def test_an_ingest_moves_the_index_version_once_at_each_end(tmp_path: Path, fresh_settings: Settings) -> None:
    # A running server reads the index again whenever its version moves: an ingest of many
    # writes (one per group of papers) moves it when it starts and when it ends, not per write.
    settings = fresh_settings.model_copy(update={"embed_batch": 1})  # a write per 16 texts
    first = ingest([SEEDS / "004_45b4c899aff0502c.txt"], settings, show_progress=False)
    start = Store(settings).version
    more = ingest([SEEDS / "000_1d593446947ebb0f.txt"], settings, show_progress=False)
    assert more.new > 1 and more.chunks + more.sentences > 16 * 3  # several writes
    assert Store(settings).version == start + 2
    again = ingest([SEEDS / "000_1d593446947ebb0f.txt"], settings, show_progress=False)
    assert (again.new, again.changed) == (0, 0) and first.new
    assert Store(settings).version == start + 2  # nothing written: nothing moved


def test_a_running_reader_reads_the_index_again_once_per_ingest_not_per_write(
        tmp_path: Path, fresh_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    # What a running `rag serve` or `rag mcp` does: between an ingest's writes it answers, and
    # reads the whole index again (its snapshot) whenever the index's version has moved.
    import rag.retrieve.hybrid as hybrid
    import rag.store.collection as collection
    from rag.retrieve.hybrid import Retriever

    settings = fresh_settings.model_copy(update={"embed_batch": 1})  # a write per 16 texts
    ingest([S004], settings, show_progress=False)
    monkeypatch.setattr(collection, "VERSION_TTL", -1.0)  # the reader sees each move at once
    reader = Retriever(settings, Store(settings))
    before = len(reader.snapshot().papers)
    builds: list[int] = []
    build = hybrid.snapshots.build
    monkeypatch.setattr(hybrid.snapshots, "build",
                        lambda store, *a: (builds.append(store.version), build(store, *a))[1])
    writes: list[int] = []
    write = Store.write

    def write_then_read(self: Store, *a, **k) -> None:  # type: ignore[no-untyped-def]
        write(self, *a, **k)
        writes.append(1)
        reader.snapshot()

    monkeypatch.setattr(Store, "write", write_then_read)
    report = ingest([S000], settings, show_progress=False)
    assert report.new > 1 and len(writes) >= 3
    assert len(builds) == 1  # once, at the first write; not after each of the others
    assert len(reader.snapshot().papers) == before + report.new  # once more at the end
    assert len(builds) == 2


def test_changed_abstract_without_an_id_replaces_the_old_paper(
        tmp_path: Path, fresh_settings: Settings) -> None:
    dump = tmp_path / "lines.txt"
    shutil.copy(S000, dump)
    dump.chmod(0o644)
    ingest([dump], fresh_settings, show_progress=False)
    old_ids = {p.paper_id for p in Store(fresh_settings).papers()}
    text = dump.read_text(encoding="utf-8")
    dump.write_text(text.replace("We propose Skrull, a dynamic data scheduler",
                                 "We propose Skrull2, a dynamic data scheduler"), encoding="utf-8")
    report = ingest([dump], fresh_settings, show_progress=False)
    assert (report.new, report.changed, report.unchanged, report.removed) == (1, 0, 4, 1)
    papers = Store(fresh_settings).papers()
    assert len(papers) == 5
    assert [p.label for p in papers][0] == "Skrull2"
    assert len(old_ids - {p.paper_id for p in papers}) == 1
    assert not any("Skrull, a dynamic" in doc for doc in Store(fresh_settings).chunks()[1])


def test_paper_removed_from_a_file_disappears_on_reingest(tmp_path: Path, fresh_settings: Settings) -> None:
    dump = tmp_path / "export.txt"
    shutil.copy(S004, dump)
    dump.chmod(0o644)
    ingest([dump], fresh_settings, show_progress=False)
    count = Store(fresh_settings).count()
    pascl_chunks = len(_chunks(fresh_settings)["2207.01160"])
    text = dump.read_text(encoding="utf-8")
    dump.write_text(text[: text.index("Existing out-of-distribution (OOD)")], encoding="utf-8")
    report = ingest([dump], fresh_settings, show_progress=False)
    assert (report.new, report.changed, report.unchanged, report.removed, report.chunks) == (0, 0, 9, 1, 0)
    store = Store(fresh_settings)
    assert store.paper("2207.01160") is None
    assert "2207.01160" not in {p.paper_id for p in store.papers()}
    assert store.count() == count - pascl_chunks


def test_prune_removes_papers_whose_source_is_gone(tmp_path: Path, fresh_settings: Settings) -> None:
    a = small_corpus(tmp_path / "a.jsonl", "alpha")
    b = small_corpus(tmp_path / "b.jsonl", "beta", n=3)
    ingest([a, b], fresh_settings, show_progress=False)
    b.unlink()
    report = ingest([a], fresh_settings, show_progress=False)  # without --prune: kept
    assert report.removed == 0
    assert len(Store(fresh_settings).papers()) == 5
    report = ingest([a], fresh_settings, prune=True, show_progress=False)
    assert (report.removed, report.unchanged) == (3, 2)
    assert sorted(p.paper_id for p in Store(fresh_settings).papers()) == ["alpha-0", "alpha-1"]
    assert all(cid.startswith("alpha-") for cid in Store(fresh_settings).chunks()[0])


def test_same_paper_in_two_files_is_stored_once_with_merged_fields(
        tmp_path: Path, fresh_settings: Settings) -> None:
    listing = tmp_path / "a_listing.txt"
    shutil.copy(S003, listing)
    extra = jsonl(tmp_path / "b_extra.jsonl", [{
        "abstract": "Another rendering of the Buff paper.", "arxiv_id": "2401.09149",
        "title": "InternEvo: Efficient Long-sequence LLM Training", "authors": ["Qiaoling Chen"]}])
    report = ingest([listing, extra], fresh_settings, show_progress=False)
    assert report.papers == 10
    store = Store(fresh_settings)
    assert len(store.papers()) == 10
    buff = store.paper("2401.09149")
    assert buff is not None
    assert buff.title == buff.label == "InternEvo: Efficient Long-sequence LLM Training"
    assert buff.authors == ["Qiaoling Chen"]
    assert buff.abstract.startswith("Large language models (LLMs) with long sequences")
    assert buff.source.endswith("a_listing.txt")


# -- chunk settings and separate indexes ------------------------------------------------------------


def test_other_chunk_size_builds_a_new_collection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / ".rag"
    dump = tmp_path / "two.txt"  # two long abstracts from the arXiv export
    dump.write_text("\n".join(S004.read_text(encoding="utf-8").splitlines()[:14]) + "\n", encoding="utf-8")
    first = ingest([dump], Settings(home=home), show_progress=False)
    assert (first.new, first.papers) == (2, 2)
    default = Store(Settings(home=home))
    before = default.chunks()

    monkeypatch.setenv("RAG_CHUNK_SIZE", "64")
    small_settings = Settings(home=home)
    assert small_settings.chunk_size == 64
    small = ingest([dump], small_settings, show_progress=False)
    assert (small.new, small.unchanged) == (2, 0)  # nothing reused from the other collection
    monkeypatch.delenv("RAG_CHUNK_SIZE")
    again = ingest([dump], Settings(home=home), show_progress=False)
    assert (again.new, again.changed, again.unchanged, again.chunks) == (0, 0, 2, 0)

    chunked = Store(small_settings)
    assert default.name != chunked.name
    assert {default.name, chunked.name} <= {c.name for c in default.client.list_collections()}
    assert chunked.collection.metadata["chunk_size"] == 64
    assert default.collection.metadata["chunk_size"] == 200
    assert Store(Settings(home=home)).chunks() == before  # the first collection is untouched
    assert chunked.count() > default.count() >= 2
    tok = get_embedder(small_settings.model_cache).tokenizer
    assert all(len(tok.encode(doc, add_special_tokens=False).ids) <= 64 for doc in chunked.chunks()[1])


def test_index_option_keeps_corpora_apart(workdir: Path) -> None:
    home = workdir / ".rag"
    small_corpus(workdir / "a.jsonl", "alpha")
    small_corpus(workdir / "b.jsonl", "beta")
    alpha = run_rag("ingest", "-q", "a.jsonl", "--index", "alpha", cwd=workdir, env=env(home))
    assert alpha.returncode == 0, alpha.stderr
    beta = run_rag("ingest", "-q", "b.jsonl", cwd=workdir, env=env(home, RAG_INDEX="beta"))
    assert beta.returncode == 0, beta.stderr
    assert "2 papers: 2 new" in alpha.stdout and "2 papers: 2 new" in beta.stdout
    listed = run_rag("papers", "--json", "--index", "alpha", cwd=workdir, env=env(home))
    assert listed.returncode == 0, listed.stderr
    assert sorted(p["paper_id"] for p in json.loads(listed.stdout)["papers"]) == ["alpha-0", "alpha-1"]
    assert sorted(p.paper_id for p in Store(Settings(home=home, index="beta")).papers()) == \
        ["beta-0", "beta-1"]
    assert Store(Settings(home=home)).count() == 0  # the default index got neither


def test_device_is_chosen_automatically_and_a_missing_gpu_is_a_clear_error(workdir: Path) -> None:
    home = workdir / ".rag"
    small_corpus(workdir / "a.jsonl", "alpha")
    first = run_rag("ingest", "a.jsonl", cwd=workdir, env=env(home))
    assert first.returncode == 0, first.stderr
    assert "embedding (cpu)" in first.stderr  # auto on a machine without a usable GPU
    before = tree_digest(home)
    small_corpus(workdir / "b.jsonl", "beta")
    forced = run_rag("ingest", "b.jsonl", cwd=workdir, env=env(home, RAG_DEVICE="cuda"))
    assert forced.returncode == 2, forced.stderr
    assert "RAG_DEVICE=cuda" in forced.stderr and "CUDA build of torch" in forced.stderr
    assert "Traceback" not in forced.stderr
    wrong = run_rag("ingest", "b.jsonl", cwd=workdir, env=env(home, RAG_DEVICE="tpu"))
    assert wrong.returncode == 2 and "RAG_DEVICE" in wrong.stderr, wrong.stderr
    assert tree_digest(home) == before


@pytest.mark.parametrize("index", ["bad name", "../escape", "-dash", "x" * 42])
def test_invalid_index_name_exits_2(workdir: Path, index: str) -> None:
    small_corpus(workdir / "a.jsonl", "alpha")
    proc = run_rag("ingest", "-q", "a.jsonl", "--index", index, cwd=workdir, env=env(workdir / ".rag"))
    assert proc.returncode == 2, proc.stderr
    assert f"index name {index!r} is not allowed" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (workdir / "escape").exists()


# -- good and bad records in one file -------------------------------------------------------------


def test_file_with_good_and_bad_records(workdir: Path) -> None:
    home = workdir / ".rag"
    (workdir / "mixed.jsonl").write_text(
        '{"id": "g1", "abstract": "We propose Goodie, a system."}\n'
        '{"id": "b1", "title": "no abstract"}\n'
        '{"id": "g2", "abstract": "We propose Goodier, another system."}\n'
        '["not an object"]\n', encoding="utf-8")
    refused = run_rag("ingest", "-q", "mixed.jsonl", cwd=workdir, env=env(home))
    assert refused.returncode == 2
    assert "mixed.jsonl:2: 2 good and 2 bad record(s); first: record has no `abstract`" in refused.stderr
    assert "--skip-bad" in refused.stderr
    assert not (home / "chroma").exists()  # nothing was written

    skipped = run_rag("ingest", "-q", "--skip-bad", "mixed.jsonl", cwd=workdir, env=env(home))
    assert skipped.returncode == 0, skipped.stderr
    assert "2 papers: 2 new" in skipped.stdout
    assert "skipped 2 bad record(s)" in skipped.stdout
    assert "skipped: mixed.jsonl:2: record has no `abstract`" in skipped.stderr
    assert "skipped: mixed.jsonl:4: expected a JSON object, got list" in skipped.stderr
    listed = run_rag("papers", "--json", cwd=workdir, env=env(home))
    assert sorted(p["paper_id"] for p in json.loads(listed.stdout)["papers"]) == ["g1", "g2"]


def test_an_unreadable_file_in_a_folder_says_how_to_ingest_the_others(workdir: Path) -> None:
    home = workdir / ".rag"
    library = workdir / "library"
    library.mkdir()
    (library / "papers.jsonl").write_text('{"id": "g1", "abstract": "We propose Goodie, a system."}\n',
                                          encoding="utf-8")
    (library / "README.txt").write_text("Exports of my library, updated monthly.\n", encoding="utf-8")
    refused = run_rag("ingest", "-q", "library", cwd=workdir, env=env(home))
    assert refused.returncode == 2
    assert "README.txt: content is in no known layout" in refused.stderr
    assert "pass --skip-bad to ingest the other 1 file(s) without it" in refused.stderr
    assert not (home / "chroma").exists()  # nothing was written
    skipped = run_rag("ingest", "-q", "--skip-bad", "library", cwd=workdir, env=env(home))
    assert skipped.returncode == 0, skipped.stderr
    assert "1 papers: 1 new" in skipped.stdout and "skipped 1 bad record(s)/file(s)" in skipped.stdout


# -- first use -------------------------------------------------------------------------------------


def test_search_on_an_empty_index_ingests_seeds_first(workdir: Path) -> None:
    for f in (workdir / "seeds").iterdir():  # keep it small: just the 5 papers of 000
        if not f.name.startswith("000_"):
            f.unlink()
    home = workdir / ".rag"
    first = run_rag("search", "long-context fine-tuning data scheduler", "--json", cwd=workdir, env=env(home))
    assert first.returncode == 0, first.stderr
    assert "index 'demo' is empty: ingesting seeds/ first" in first.stderr  # the demo papers apart
    assert "5 papers: 5 new" in first.stderr
    results = json.loads(first.stdout)["results"]
    assert results[0]["label"] == "Skrull"
    assert {r["source"] for r in results} == {f"seeds/{S000.name}"}
    second = run_rag("search", "compiler auto-tuning", "--json", cwd=workdir, env=env(home))
    assert second.returncode == 0, second.stderr
    assert "ingesting" not in second.stderr
    assert json.loads(second.stdout)["results"][0]["label"] == "FamilySeer"


def test_prune_works_from_another_directory(workdir: Path, tmp_path: Path) -> None:
    """--prune judges a source by where it was when ingested, not by the working directory."""
    home = workdir / ".rag"
    env = {"RAG_HOME": str(home)}
    ok = run_rag("ingest", "-q", "seeds/000_1d593446947ebb0f.txt", "seeds/001_081bc128d00d0de2.txt",
                 cwd=workdir, env=env)
    assert ok.returncode == 0, ok.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workdir / "seeds" / "001_081bc128d00d0de2.txt").unlink()
    res = run_rag("ingest", "-q", "--prune", str(workdir / "seeds" / "000_1d593446947ebb0f.txt"),
                  cwd=elsewhere, env=env)
    assert res.returncode == 0, res.stderr
    assert "10 removed" in res.stdout  # 001's ten papers, and not 000's five
    listed = json.loads(run_rag("papers", "--json", cwd=workdir, env=env).stdout)["papers"]
    assert len(listed) == 5


def test_folder_readme_is_not_a_corpus_file(workdir: Path) -> None:
    (workdir / "seeds" / "README.md").write_text("# My abstracts\n\nSome notes.\n")
    res = run_rag("ingest", "-q", "seeds", cwd=workdir, env={"RAG_HOME": str(workdir / ".rag")})
    assert res.returncode == 0, res.stderr
    assert "60 papers" in res.stdout
