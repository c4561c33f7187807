"""Ingest on an NVIDIA GPU: all-MiniLM-L6-v2 through sentence-transformers on CUDA torch.

Why this and not onnxruntime-gpu: that package replaces onnxruntime, so no test environment
here ever ran it, and it never ran anywhere. This path is the same code on any torch: the
tests run it on the CPU build of torch (the development environment has one) and check its
vectors against the ONNX path; on a GPU only the device differs. torch is imported only when
a CUDA build of it is installed and the machine has an NVIDIA device, so neither the query
path nor a CPU-only ingest pays for importing it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag.embed import DIM, MAX_TOKENS, MODEL_NAME, model_path, tokenizer_path
from rag.errors import InputError

SLICE = 4096  # texts per encode() call: progress moves, and memory for token ids stays small
GPU_BATCH = 256  # RAG_EMBED_BATCH's default (32) is sized for CPU cores; a GPU wants more


def torch_build() -> str | None:
    """The installed torch's version ("2.13.0+cpu"), read without importing it."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def cuda_torch() -> bool:
    """A CUDA build of torch that sees a GPU, and sentence-transformers to run on it."""
    build = torch_build()
    if build is None or build.endswith("+cpu") or not Path("/dev/nvidia0").exists() or \
            importlib.util.find_spec("sentence_transformers") is None:
        return False  # decided without importing torch (seconds) on a CPU-only machine
    import torch

    return bool(torch.cuda.is_available())


def choose_device(setting: str) -> str:
    """cpu or cuda for RAG_DEVICE: auto takes the GPU when CUDA torch can use one."""
    if setting == "cpu":
        return "cpu"
    if cuda_torch():
        return "cuda"
    if setting == "cuda":
        raise InputError(
            f"RAG_DEVICE=cuda, but no CUDA build of torch sees a GPU here (torch: {torch_build() or 'not installed'})",
            "on a machine with an NVIDIA GPU install torch==2.13.0 from the CUDA wheel index and "
            "sentence-transformers; or set RAG_DEVICE=auto or cpu",
        )
    return "cpu"


class TorchEmbedder:
    """The Embedder interface (embed, tokenizer, device) on sentence-transformers."""

    name = MODEL_NAME
    dim = DIM

    def __init__(self, cache_dir: Path, device: str = "cuda") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from tokenizers import Tokenizer

        self.device = device
        self.model: Any = SentenceTransformer(str(model_path()), device=device)
        self.model.max_seq_length = MAX_TOKENS  # what the ONNX path truncates at
        # The chunker counts tokens with the `tokenizers` object the ONNX path has.
        tok_file = tokenizer_path(cache_dir)
        self.tokenizer = Tokenizer.from_file(
            str(tok_file if tok_file.exists() else model_path() / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()

    def embed(self, texts: Sequence[str], batch: int = 256,
              progress: Callable[[int], None] | None = None) -> np.ndarray:
        if self.device != "cpu":
            batch = max(batch, GPU_BATCH)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for start in range(0, len(texts), SLICE):
            part = list(texts[start : start + SLICE])
            out[start : start + len(part)] = self.model.encode(
                part, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True,
                show_progress_bar=False)
            if progress:
                progress(len(part))
        return out

    def embed_sums(self, texts: Sequence[str], batch: int = 256,
                   progress: Callable[[int], None] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As rag.embed.onnx.Embedder.embed_sums: the vectors, and each text's content
        tokens' summed states (without [CLS] and [SEP]) and their count."""
        if self.device != "cpu":
            batch = max(batch, GPU_BATCH)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        sums = np.zeros((len(texts), DIM), dtype=np.float32)
        counts = np.zeros(len(texts), dtype=np.float32)
        for start in range(0, len(texts), SLICE):
            part = list(texts[start : start + SLICE])
            states = self.model.encode(part, batch_size=batch, output_value="token_embeddings",
                                       convert_to_numpy=False, show_progress_bar=False)
            for j, s in enumerate(states):
                s = s.float().cpu().numpy()
                mean = s.mean(0)
                out[start + j] = mean / max(float(np.linalg.norm(mean)), 1e-12)
                sums[start + j] = s[1:-1].sum(0)
                counts[start + j] = len(s) - 2
            if progress:
                progress(len(part))
        return out, sums, counts


_loaded: dict[tuple[Path, str], TorchEmbedder] = {}


def get_torch_embedder(cache_dir: Path, device: str = "cuda") -> TorchEmbedder:
    """One model per process and device."""
    key = (cache_dir, device)
    if key not in _loaded:
        _loaded[key] = TorchEmbedder(cache_dir, device)
    return _loaded[key]
