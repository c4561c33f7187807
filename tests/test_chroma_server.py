"""Several rag replicas share one index through a real Chroma server (`chroma run`)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import SEEDS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    path = tmp_path_factory.mktemp("chroma-server")
    chroma = Path(sys.executable).parent / "chroma"
    proc = subprocess.Popen([str(chroma), "run", "--path", str(path), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("chroma run did not start")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_replicas_share_one_index(chroma_url: str, tmp_path: Path) -> None:
    from rag.config import Settings
    from rag.ingest import ingest
    from rag.retrieve import Retriever

    writer = Settings(home=tmp_path / "a", chroma_url=chroma_url, index="shared")
    reader = Settings(home=tmp_path / "b", chroma_url=chroma_url, index="shared")
    ingest([SEEDS / "000_1d593446947ebb0f.txt"], writer, show_progress=False)
    replica = Retriever(reader)
    assert replica.search("dynamic data scheduler for long-context SFT", 1)[0].paper.label == "Skrull"
    assert len(replica.papers()) == 5
    # the writer adds a file: the other replica's BM25 and paper list follow the shared store
    ingest([SEEDS / "001_081bc128d00d0de2.txt"], writer, show_progress=False)
    assert len(replica.papers()) == 15
    top = replica.search("DeepSpeed-Ulysses sequence parallelism all-to-all", 1)[0]
    assert top.paper.label == "DeepSpeed-Ulysses"
    # nothing of the index lives in the replicas' own directories
    assert not (tmp_path / "a" / "chroma").exists() and not (tmp_path / "b" / "chroma").exists()
    replica.store.close()
