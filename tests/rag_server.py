"""A real `rag serve` subprocess on 127.0.0.1 for the tests that need one (API, browser, faults)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import RAG, SEEDS
from tests.serving import wait_until_answers


def reserve_port() -> socket.socket:
    """A localhost port for a server started in a subprocess, held by the returned socket
    (its port: `.getsockname()[1]`) until that is closed.

    A port found free, closed and handed on can be taken in the seconds the server needs to
    start (the kernel gives it to any other socket that binds port 0 or connects out): the
    server then fails to bind. This socket stays bound, never listening, with SO_REUSEADDR:
    the kernel gives the port to no one else, and a server that binds it with SO_REUSEADDR
    too (uvicorn, `chroma run`, rag's own port check) listens on it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class RagServer:
    """`rag serve --port FREE` in a subprocess over RAG_HOME=home; stop() always ends it."""

    def __init__(self, home: Path, workdir: Path, env: dict[str, str]) -> None:
        self.home, self.workdir, self.extra_env = home, workdir, env
        self._port_hold: socket.socket | None = reserve_port()
        self.port = self._port_hold.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "serve.log"

    def start(self, timeout: float = 90.0) -> RagServer:
        env = {**os.environ, "RAG_HOME": str(self.home), "RAG_SEEDS": str(SEEDS), **self.extra_env}
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [RAG, "serve", "--port", str(self.port)], cwd=self.workdir, env=env,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )
        why = wait_until_answers(f"{self.url}/health", self.proc, timeout)
        if why is None:
            return self
        self.stop()
        raise RuntimeError(f"rag serve {why}:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        try:
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        finally:
            hold, self._port_hold = self._port_hold, None
            if hold is not None:
                hold.close()


def copy_home(seeded_home: Path, dest: Path) -> Path:
    """A private copy of the session's seeded index (ingesting afresh takes ~5-20 s)."""
    shutil.copytree(seeded_home, dest)
    return dest


@contextlib.contextmanager
def serving(seeded_home: Path, base: Path, env: dict[str, str],
            prepare: Callable[[Path], None] | None = None) -> Iterator[RagServer]:
    """A started `rag serve` over a private copy of the seeded index (prepared by `prepare`
    before the server opens it); stopped on exit."""
    home = copy_home(seeded_home, base / "home")
    if prepare:
        prepare(home)
    srv = RagServer(home, base, env)
    try:
        yield srv.start()
    finally:
        srv.stop()


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """(event, data) for each server-sent event of a whole response body."""
    out = []
    for block in text.strip().split("\n\n"):
        lines = block.split("\n")
        kind = next(ln[6:].strip() for ln in lines if ln.startswith("event:"))
        out.append((kind, json.loads("\n".join(ln[5:].lstrip() for ln in lines if ln.startswith("data:")))))
    return out


def sse_events(resp: httpx.Response) -> Iterator[tuple[str, Any, float]]:
    """(event, data, arrival time) for each server-sent event of a streaming response."""
    event, data = "message", list[str]()
    for line in resp.iter_lines():
        if line == "":
            if data:
                yield event, json.loads("\n".join(data)), time.monotonic()
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
