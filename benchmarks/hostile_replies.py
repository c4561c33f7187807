"""What a hostile model server costs `rag ask`: one huge delta (5 MB and 50 MB, on both
protocols) and an endless stream of keep-alives, each answered by a real `rag ask` process
over an index of seeds/; prints the wall time, the exit code and the peak RSS of that
process. Not a test (tests/test_deadlines.py asserts the bounds, without the memory).

    .venv/bin/python benchmarks/hostile_replies.py            # RAG_ANSWER_TIMEOUT=15
    .venv/bin/python benchmarks/hostile_replies.py --deadline 5 --home DIR

The index is built in a temporary RAG_HOME unless --home names one that has it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile_servers import HostileServer, Script, delta, ollama_part  # noqa: E402

RAG = str(Path(sys.executable).parent / "rag")
# A parent of its own for each `rag ask`, so that RUSAGE_CHILDREN's peak is that process's.
_PEAK = ("import resource, subprocess, sys; d = subprocess.run(sys.argv[1:]); "
         "print('PEAK', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
         "sys.exit(d.returncode)")


def _script(protocol: str, case: str) -> Script:
    sse, nd = {"Content-Type": "text/event-stream"}, {"Content-Type": "application/x-ndjson"}
    headers = sse if protocol == "openai" else nd
    if case == "keep-alives":
        return Script(headers=sse, forever=(0.3, b": keep-alive\n\n")) if protocol == "openai" else \
            Script(headers=nd, forever=(0.3, ollama_part("")))
    size = int(case.split()[0]) * 1024 * 1024
    big = "Skrull is fast. " * (size // 16)
    return Script(headers=headers, parts=[(0, delta(content=big) if protocol == "openai" else ollama_part(big))])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deadline", type=float, default=15.0, help="RAG_ANSWER_TIMEOUT (s)")
    ap.add_argument("--home", type=Path, help="a RAG_HOME whose default index holds seeds/")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = args.home or Path(tmp) / "home"
        env = {**os.environ, "RAG_HOME": str(home), "HF_HUB_OFFLINE": "1"}
        subprocess.run([RAG, "ingest", str(ROOT / "seeds")], env=env, check=True, capture_output=True)
        print(f"RAG_ANSWER_TIMEOUT={args.deadline:g}; per case: wall s, exit code, peak RSS of rag ask")
        for protocol in ("openai", "ollama"):
            for case in ("5 MB delta", "50 MB delta", "keep-alives"):
                with HostileServer(lambda p, streamed, body, c=case: _script(p, c)) as server:
                    run_env = {**env, "RAG_OPENAI_BASE_URL": server.v1, "OLLAMA_HOST": server.url,
                               "RAG_MODEL": "m", "RAG_ANSWER_TIMEOUT": str(args.deadline)}
                    started = time.monotonic()
                    done = subprocess.run([sys.executable, "-c", _PEAK, RAG, "ask", "--llm", protocol,
                                           "--json", "What speedup does Skrull report over DeepSpeed?"],
                                          env=run_env, capture_output=True, text=True)
                    took = time.monotonic() - started
                    lines = done.stderr.strip().splitlines()
                    peak = int(lines[-1].split()[1]) if lines and lines[-1].startswith("PEAK") else 0
                    said = next((ln for ln in reversed(lines) if not ln.startswith("PEAK")), "")[:90]
                    print(f"{protocol:7} {case:12} {took:6.1f} s  exit {done.returncode}  "
                          f"{peak / 1024:6.0f} MB  {said}")


if __name__ == "__main__":
    main()
