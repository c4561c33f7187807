"""Waiting for a server the tests start in a subprocess (rag serve, llama.cpp's server)."""

from __future__ import annotations

import subprocess
import time

import httpx


def wait_until_answers(url: str, proc: subprocess.Popen[bytes], timeout: float, poll: float = 0.2) -> str | None:
    """None once GET `url` answers 200; else why not: "exited with CODE" when the process ended
    first, "did not come up within N s" when the time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"exited with {proc.returncode}"
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return None
        except httpx.HTTPError:
            pass
        time.sleep(poll)
    return f"did not come up within {timeout:.0f} s"
