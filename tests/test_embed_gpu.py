"""GPU ingest through sentence-transformers (rag.embed.gpu): the same code on the CPU build of
torch gives the ONNX path's vectors; the device choice imports no torch on a machine without
a GPU, and RAG_DEVICE=cuda there is a clear error. The GPU test runs only where CUDA torch
sees a GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag.config import Settings
from rag.corpus import expand_paths, merge_papers, read_file
from rag.embed import get_embedder
from rag.embed import gpu as embed_gpu
from rag.errors import InputError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def texts() -> list[str]:
    papers = merge_papers([p for f in expand_paths([ROOT / "seeds"]) for p in read_file(f).papers])
    long = " ".join(p.abstract for p in papers[:3])  # past 256 tokens: both truncate alike
    return [p.abstract for p in papers[:40]] + [long, "What is Skrull?", "MoE training on GPUs"]


@pytest.fixture(scope="module")
def onnx_vectors(texts: list[str]) -> np.ndarray:
    return get_embedder(Settings().model_cache, precision="fp32").embed(texts)  # torch computes fp32


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape and a.dtype == b.dtype == np.float32
    return float((a * b).sum(axis=1).min())  # both unit length


def test_torch_path_on_cpu_gives_the_onnx_vectors(texts: list[str], onnx_vectors: np.ndarray) -> None:
    torch_cpu = embed_gpu.TorchEmbedder(Settings().model_cache, device="cpu")
    seen: list[int] = []
    vectors = torch_cpu.embed(texts, batch=8, progress=seen.append)
    assert sum(seen) == len(texts)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert _min_cosine(vectors, onnx_vectors) >= 0.999
    # the chunker's token counts come from the same tokenizer as on the ONNX path
    assert torch_cpu.tokenizer.encode(texts[-3]).ids == \
        get_embedder(Settings().model_cache).tokenizer.encode(texts[-3]).ids


@pytest.mark.skipif(not embed_gpu.cuda_torch(), reason="needs CUDA torch and an NVIDIA GPU")
def test_gpu_gives_the_onnx_vectors(texts: list[str], onnx_vectors: np.ndarray) -> None:
    gpu = embed_gpu.get_torch_embedder(Settings().model_cache, "cuda")
    assert _min_cosine(gpu.embed(texts, batch=256), onnx_vectors) >= 0.999


def test_device_choice_without_a_gpu_imports_no_torch() -> None:
    code = ("import sys; from rag.embed.gpu import choose_device, cuda_torch; "
            "print(choose_device('auto'), choose_device('cpu'), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    if embed_gpu.cuda_torch():
        pytest.skip("this machine has a GPU for CUDA torch")
    assert out.stdout.split() == ["cpu", "cpu", "False"]


def test_forced_cuda_without_one_names_what_to_install() -> None:
    if embed_gpu.cuda_torch():
        pytest.skip("this machine has a GPU for CUDA torch")
    with pytest.raises(InputError, match="RAG_DEVICE=cuda") as err:
        embed_gpu.choose_device("cuda")
    assert "torch" in err.value.hint


@pytest.mark.parametrize("device", [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not embed_gpu.cuda_torch(),
                                                   reason="needs CUDA torch and an NVIDIA GPU")),
])
def test_torch_path_gives_the_onnx_token_sums(texts: list[str], device: str) -> None:
    """Pooled chunk vectors (RAG_CHUNK_VECTORS=sentences) are made of each text's content
    tokens' summed states: the GPU path must give what the ONNX path gives, or an index
    built on a GPU would hold other chunk vectors."""
    torch_path = embed_gpu.get_torch_embedder(Settings().model_cache, device)
    vectors, sums, counts = torch_path.embed_sums(texts, batch=8)
    o_vectors, o_sums, o_counts = get_embedder(Settings().model_cache, precision="fp32").embed_sums(texts)
    assert counts.tolist() == o_counts.tolist() and counts.min() >= 1
    assert _min_cosine(vectors, o_vectors) >= 0.999
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    assert _min_cosine(unit(sums), unit(o_sums)) >= 0.999
