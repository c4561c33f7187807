"""A stand-in embedding model for scale benchmarks only: never used outside benchmarks/.

Building a 100,000-abstract index with all-MiniLM-L6-v2 takes about 4.4 hours on 2 cores
(benchmarks/scale_100k.py measured it, 82% of it in the model), so the question path at
100,000 (and 1,000,000) abstracts could not be measured in a session. This writes an ONNX
graph with the real model's inputs and output (`last_hidden_state`, 384 wide) that looks
each token up in a fixed random table: a bag-of-words random projection, deterministic (seeded)
and about a thousand times faster than the transformer. Pointed to by RAG_MODEL_CACHE, every
rag process of a benchmark (ingest, `rag ask`, `rag serve`) runs its real code path, tokenizer,
pooling and onnxruntime included, with only the model's weights swapped. The vectors keep
lexical similarity (texts sharing words are close), so retrieval and list pools behave like a
keyword retriever's, not like MiniLM's: figures measured with it are costs, never quality.

    .venv/bin/python benchmarks/standin_embedder.py DIR     # then RAG_MODEL_CACHE=DIR
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20261202


def write(cache_dir: Path, seed: int = SEED) -> Path:
    """The stand-in graph under both precisions' file names, and the tokenizer copy."""
    from rag.config import get_settings
    from rag.embed import onnx as real

    cache_dir.mkdir(parents=True, exist_ok=True)
    real_cache = get_settings().model_cache
    real.prepare(real_cache)
    shutil.copyfile(real.tokenizer_path(real_cache), real.tokenizer_path(cache_dir))
    vocab = 30522  # the MiniLM tokenizer's
    table = np.random.default_rng(seed).standard_normal((vocab, real.DIM)).astype(np.float32)
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
              for name in ("input_ids", "attention_mask", "token_type_ids")]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                           ["batch", "tokens", real.DIM])
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"], axis=0)],
        "standin", inputs, [output], initializer=[numpy_helper.from_array(table, "table")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    for precision in real.PRECISIONS:
        onnx.save_model(model, str(real.onnx_path(cache_dir, precision)))
    return cache_dir


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--seed", type=int, default=SEED)
    print(write(ap.parse_args().dir))
