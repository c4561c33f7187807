"""The claim verifier: does a source passage support a claim, contradict it, or not say?

A cross-encoder fine-tuned from all-MiniLM-L6-v2's weights on SciFact's training claims and on
pairs made by transforming abstract sentences (negations, reversed directions, changed
numbers, swapped names, added details), as FactCC did: `scripts/train_verifier.py` trains it
and writes `model.onnx` (int8 weights) with its `manifest.json` (recipe, seed, data);
`scripts/fit_verifier.py` fits the thresholds in `params.json` on a SciFact fold the shipped
model never saw. It runs with onnxruntime on the CPU (no torch) and reads pairs with the
embedding model's own tokenizer (the same WordPiece vocabulary), from the model cache.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from rag.errors import RagError

LABELS = ("supported", "contradicted", "not_supported")
SUPPORTED, CONTRADICTED, NOT_SUPPORTED = LABELS
MAX_TOKENS = 160  # claim + one or two sentences (scripts/train_verifier.py trains at this length)


def _here() -> Path:
    return Path(str(resources.files("rag.verify")))


@dataclass(frozen=True)
class Params:
    """What decides a verdict from the model's probabilities (params.json, fitted)."""

    support: float  # P(supported) of the best passage at least this: the verifier supports it
    contradict: float  # P(contradicted) of the most contradicting passage at least this: contradicted
    veto: float = 1.01  # P(contradicted) at least this: never supported
    # The similarity judge's pass (embedding and word overlap, rag.judge.THRESHOLD) supports
    # a claim too, short of the veto: a paraphrase the verifier misses.
    similarity: bool = False


@lru_cache(maxsize=1)
def params() -> Params:
    path = _here() / "params.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Params(float(data["support"]), float(data["contradict"]), float(data.get("veto", 1.01)),
                      bool(data.get("similarity", False)))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RagError(f"the verifier's thresholds in {path} cannot be read: {exc}",
                       "reinstall rag, or refit them with scripts/fit_verifier.py") from exc


class Verifier:
    """Three-way probabilities (supported, contradicted, not_supported) for (claim, passage)."""

    def __init__(self, tokenizer_file: Path, threads: int = 0, model_file: Path | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model_file = model_file or _here() / "model.onnx"
        if not model_file.exists():
            raise RagError(f"the claim verifier's model {model_file} is missing",
                           "reinstall rag (the file ships with the package)")
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(MAX_TOKENS, strategy="longest_first")
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        self._lock = threading.Lock()  # one tokenizer call at a time
        self._memo: dict[tuple[str, str], np.ndarray] = {}

    def probabilities(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """One row of (supported, contradicted, not_supported) per (claim, passage) pair."""
        out = np.zeros((len(pairs), len(LABELS)), dtype=np.float32)
        todo = []
        with self._lock:
            for i, pair in enumerate(pairs):
                hit = self._memo.get(pair)
                if hit is None:
                    todo.append(i)
                else:
                    out[i] = hit
            if not todo:
                return out
            enc = self.tokenizer.encode_batch([pairs[i] for i in todo])
        width = max(len(e.ids) for e in enc)
        ids = np.zeros((len(enc), width), dtype=np.int64)
        types, mask = np.zeros_like(ids), np.zeros_like(ids)
        for row, e in enumerate(enc):
            n = len(e.ids)
            ids[row, :n], types[row, :n], mask[row, :n] = e.ids, e.type_ids, 1
        logits = self.session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = z / z.sum(axis=1, keepdims=True)
        with self._lock:
            if len(self._memo) > 50000:
                self._memo.clear()
            for row, i in enumerate(todo):
                out[i] = probs[row]
                self._memo[pairs[i]] = probs[row]
        return out


_verifiers: dict[tuple[Path, int], Verifier] = {}
_make_lock = threading.Lock()


def get_verifier(tokenizer_file: Path, threads: int = 0) -> Verifier:
    """One verifier per process (loading it takes about 0.1 s)."""
    with _make_lock:
        key = (tokenizer_file, threads)
        if key not in _verifiers:
            _verifiers[key] = Verifier(tokenizer_file, threads)
        return _verifiers[key]


__all__ = ["CONTRADICTED", "LABELS", "NOT_SUPPORTED", "SUPPORTED", "Params", "Verifier", "get_verifier", "params"]
