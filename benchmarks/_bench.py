"""Helpers shared by the benchmark scripts (not a benchmark itself).

Servers and temporary directories started here are always stopped and removed, also when
a script is interrupted: use `temp_home()` and `serve()` as context managers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RAG = str(BIN / "rag")
PY = str(BIN / "python")
SCIFACT = ROOT.parent / "shared" / "benchmarks" / "scifact"
NO_OLLAMA = "http://127.0.0.1:9"  # nothing listens there


def load() -> str:
    """The 1-, 5- and 15-minute load averages, for the record under each table."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def wait_for_quiet(limit: float = 1.5, timeout: float = 0.0) -> None:
    """With timeout > 0, wait (at most that long) until the 1-minute load is below limit."""
    deadline = time.monotonic() + timeout
    while timeout and os.getloadavg()[0] >= limit and time.monotonic() < deadline:
        time.sleep(10)


def pct(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of unsorted values."""
    if not values:
        return float("nan")
    s = sorted(values)
    i = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[i]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


@contextlib.contextmanager
def temp_home(prefix: str = "rag-bench-") -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_env(home: Path | None = None, **extra: str) -> dict[str, str]:
    env = {**os.environ, "OLLAMA_HOST": NO_OLLAMA, "HF_HUB_OFFLINE": "1", **extra}
    # Bytecode as an installed rag has it (pip writes it): without it every cold process
    # compiled rag's modules from source again (0.1-0.3 s of a cold `rag ask`).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for key in ("RAG_SERVER_URL", "RAG_API_KEY", "RAG_CHROMA_URL"):
        if key not in extra:
            env.pop(key, None)
    if home is not None:
        env["RAG_HOME"] = str(home)
    return env


def run(cmd: list[str], env: dict[str, str], timeout: float = 3600) -> float:
    """Run a command from the repository root; wall seconds. Fails loudly."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return took


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB, from /proc/PID/status."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", float("nan")), fields.get("VmHWM", float("nan"))


class Server:
    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.proc, self.url, self.log = proc, url, log

    @property
    def pid(self) -> int:
        return self.proc.pid


@contextlib.contextmanager
def serve(env: dict[str, str], *args: str, timeout: float = 300, rag: str = RAG) -> Iterator[Server]:
    """A `rag serve` on a free port, waited for (/health), then stopped (SIGTERM, SIGKILL)."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="rag-bench-serve-", suffix=".log")[1])
    with log.open("wb") as fh:
        proc = subprocess.Popen([rag, "serve", "--port", str(port), *args], env=env, cwd=ROOT,
                                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"rag serve exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"rag serve did not come up in {timeout:.0f} s; see {log}")
            time.sleep(0.2)
        yield Server(proc, url, log)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.unlink(missing_ok=True)


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def verdict(value: float, target: float, higher_is_better: bool = False) -> str:
    ok = value >= target if higher_is_better else value <= target
    if ok:
        return "met"
    miss = (target - value) / target if higher_is_better else (value - target) / target
    return f"missed by {miss:.0%}"
