"""The cross-encoder: reads a question together with a sentence, or with a paper (title and the
start of its abstract), and gives one logit for "this text answers / is about the question".

all-MiniLM-L6-v2's six layers with a one-logit head on the mean of the last hidden states,
fine-tuned by scripts/train_reranker.py on the fit splits of seeds/, PubMedQA and SciFact
(rag/relevance/reranker/manifest.json: data, recipe, seed, figures), exported to ONNX and
quantised to int8 weights; run with onnxruntime and the embedding model's own WordPiece
tokenizer, as rag.embed runs the bi-encoder. Not yet read at answer time: relevance models
refitted with its scores as features (selected by leave-one-corpus-out loss) lost on seeds/
through the whole pipeline (held-out unanswerable declined 0.958 -> 0.875, fact recall
0.808 -> 0.765), so the shipped models do without it; scripts/train_reranker.py scores it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from rag.errors import RagError

SENTENCE_TOKENS = 96  # question + one sentence: nearly every abstract sentence fits
PAPER_TOKENS = 128  # question + title + the start of the abstract
BATCH = 32
CACHE_PAIRS = 20000  # an answer scores the same (question, text) pairs more than once


def model_file() -> Path:
    return Path(str(resources.files("rag.relevance").joinpath("reranker", "model.onnx")))


def paper_text(title: str | None, abstract: str) -> str:
    """What the cross-encoder reads of a paper (the training script reads the same)."""
    title = (title or "").strip()
    return f"{title}. {abstract}" if title else abstract


class PairTokenizer:
    """[CLS] query [SEP] text [SEP] in WordPiece ids and type ids; the text is cut to the
    budget, never the query. The training script encodes with this same class."""

    def __init__(self, tokenizer_file: Path) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.no_padding()
        self._lock = threading.Lock()  # truncation is a setting of the shared tokenizer

    def encode(self, query: str, texts: Sequence[str], max_tokens: int) -> list[np.ndarray]:
        """A (2, tokens) array per pair: token ids, then type ids."""
        with self._lock:
            self.tokenizer.enable_truncation(max_tokens, strategy="only_second")
            enc = self.tokenizer.encode_batch([(query, t) for t in texts])
        return [np.asarray([e.ids, e.type_ids], dtype=np.int64) for e in enc]


class Reranker:
    """Scores (query, text) pairs with the shipped model."""

    def __init__(self, tokenizer_file: Path, model: Path | None = None, threads: int = 0) -> None:
        import onnxruntime as ort

        model = model or model_file()
        if not model.is_file():
            raise RagError(f"the cross-encoder model is missing: {model}",
                           "reinstall rag (the model ships with the package)")
        self.pairs = PairTokenizer(tokenizer_file)
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str, int], float] = OrderedDict()

    def score(self, query: str, texts: Sequence[str], max_tokens: int = SENTENCE_TOKENS) -> np.ndarray:
        """One logit per text (higher: the text answers or is about the query)."""
        out = np.zeros(len(texts), dtype=np.float32)
        todo = []
        with self._lock:
            for i, t in enumerate(texts):
                hit = self._cache.get((query, t, max_tokens))
                if hit is None:
                    todo.append(i)
                else:
                    out[i] = hit
        if not todo:
            return out
        pairs = self.pairs.encode(query, [texts[i] for i in todo], max_tokens)
        order = sorted(range(len(todo)), key=lambda j: pairs[j].shape[1])  # little padding
        for start in range(0, len(order), BATCH):
            idx = order[start:start + BATCH]
            width = max(pairs[j].shape[1] for j in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            types = np.zeros_like(ids)
            mask = np.zeros_like(ids)
            for row, j in enumerate(idx):
                n = pairs[j].shape[1]
                ids[row, :n], types[row, :n], mask[row, :n] = pairs[j][0], pairs[j][1], 1
            logits = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": types})[0]
            for row, j in enumerate(idx):
                out[todo[j]] = float(logits[row])
        with self._lock:
            for i in todo:
                self._cache[(query, texts[i], max_tokens)] = float(out[i])
            while len(self._cache) > CACHE_PAIRS:
                self._cache.popitem(last=False)
        return out


@lru_cache(maxsize=2)
def get_reranker(tokenizer_file: Path, threads: int = 0) -> Reranker:
    """One model per process (rag serve loads it once)."""
    return Reranker(tokenizer_file, threads=threads)
