"""Several rag replicas share one index through a real Chroma server (`chroma run`)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import SEEDS
from tests.rag_server import reserve_port


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    hold = reserve_port()  # held until the server is stopped: no one else gets the port
    port = hold.getsockname()[1]
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
        hold.close()


def test_replicas_share_one_index(chroma_url: str, tmp_path: Path) -> None:
    """Two replicas (own RAG_HOME each) of the real CLI, one index on the Chroma server."""
    import json

    from tests.conftest import run_rag

    def replica(name: str, *args: str) -> str:
        # replica a is told by RAG_CHROMA_URL, replica b by --chroma-url
        env = {"RAG_INDEX": "shared", "RAG_HOME": str(tmp_path / name)}
        if name == "a":
            env["RAG_CHROMA_URL"] = chroma_url
        else:
            args = ("--chroma-url", chroma_url, *args)
        res = run_rag(*args, cwd=tmp_path, env=env)
        assert res.returncode == 0, res.stderr
        return res.stdout

    def top(name: str, query: str) -> str:
        return str(json.loads(replica(name, "search", query, "-k", "1", "--json"))["results"][0]["label"])

    replica("a", "ingest", "-q", str(SEEDS / "000_1d593446947ebb0f.txt"))
    assert top("b", "dynamic data scheduler for long-context SFT") == "Skrull"
    assert len(json.loads(replica("b", "papers", "--json"))["papers"]) == 5
    # the writer adds a file: the other replica's BM25 and paper list follow the shared store
    replica("a", "ingest", "-q", str(SEEDS / "001_081bc128d00d0de2.txt"))
    assert len(json.loads(replica("b", "papers", "--json"))["papers"]) == 15
    assert top("b", "DeepSpeed-Ulysses sequence parallelism all-to-all") == "DeepSpeed-Ulysses"
    # nothing of the index lives in the replicas' own directories
    assert not (tmp_path / "a" / "chroma").exists() and not (tmp_path / "b" / "chroma").exists()
