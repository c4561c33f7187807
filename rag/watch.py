"""Keeping an index in step with folders of abstract files (`rag ingest --watch`,
`rag mcp --watch`).

Each pass brings the index up to date with the files under the watched paths: every file is
parsed on its own first, and a bad one is reported and left out (its papers stay as they
were indexed); the good ones go through the incremental ingest (unchanged papers cost
nothing); papers whose file under a watched path is gone leave the index, unless a file
still there holds them. Changes are noticed by `watchfiles` (inotify on Linux; its own
debounce groups a burst of writes into one pass).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rag.config import Settings
from rag.corpus import expand_paths, read_file
from rag.errors import InputError, RagError
from rag.ingest import IngestReport, ingest, ingest_lock
from rag.store import Store

log = logging.getLogger(__name__)


@dataclass
class Pass:
    """What one pass did: the ingest's report (None when nothing was ingested), the papers
    removed with their files, and the files (or the pass) that failed."""

    report: IngestReport | None = None
    removed: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [self.report.summary()] if self.report else []
        if self.removed:
            parts.append(f"{self.removed} paper(s) of deleted files removed")
        return "; ".join(parts) or "nothing to ingest"


def _files(roots: list[Path]) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        if not root.exists():
            continue  # a watched file that was deleted: its papers go below
        try:
            out.extend(expand_paths([root]))
        except InputError:
            if not root.is_dir():
                raise
            # a folder emptied of abstract files: its papers go below
    return out


def _readable(files: list[Path], problems: list[str]) -> list[Path]:
    """The files that parse without a bad record; each other one is named in problems."""
    good = []
    for path in files:
        try:
            result = read_file(path)
        except RagError as exc:
            problems.append(f"{exc.message} (left as indexed)")
            continue
        if result.problems:
            problems.append(f"{result.problems[0].message} and {len(result.problems) - 1} more "
                            "bad record(s) (left as indexed)" if len(result.problems) > 1
                            else f"{result.problems[0].message} (left as indexed)")
            continue
        if result.papers:
            good.append(path)
    return good


def _under(path: str, roots: list[Path]) -> bool:
    p = Path(path).resolve()
    return any(p == r or p.is_relative_to(r) for r in roots)


def sync(paths: Iterable[Path], settings: Settings, store: Store | None = None) -> Pass:
    """One pass over the watched paths (see the module's docstring); never raises RagError:
    what failed is in Pass.problems and the index is as it was before the failing step."""
    roots = [Path(p).resolve() for p in paths]
    done = Pass()
    try:
        good = _readable(_files(roots), done.problems)
        if good:
            done.report = ingest(good, settings, store=store, show_progress=False)
        with ingest_lock(settings):
            owned = store is None
            target = store or Store(settings)
            try:
                gone = {pid for pid, source in target.source_paths().items()
                        if _under(source, roots) and not Path(source).exists()}
                if gone:  # a paper merged from several files stays while one of them is there
                    gone -= {p.paper_id for p in target.papers() if p.paper_id in gone and any(
                        Path(str(e.get("source", ""))).exists() for e in p.sources)}
                if gone:
                    target.write([], delete_papers=gone)
                done.removed = len(gone)
            finally:
                if owned:
                    target.close()
    except RagError as exc:
        done.problems.append(exc.one_line())
    return done


def watch(paths: list[Path], settings: Settings, say: Callable[[Pass], None],
          stop: threading.Event | None = None, store: Store | None = None) -> None:
    """Sync now, then after every change under the paths until `stop` is set (or Ctrl-C)."""
    import watchfiles

    say(sync(paths, settings, store))
    for _changes in watchfiles.watch(*paths, stop_event=stop, raise_interrupt=False):
        say(sync(paths, settings, store))


async def awatch(paths: list[Path], settings: Settings, say: Callable[[Pass], None],
                 store: Store | None = None) -> None:
    """`watch` for an event loop (`rag mcp --watch`): each pass runs in a worker thread."""
    import anyio
    import watchfiles

    async for _changes in watchfiles.awatch(*paths):
        say(await anyio.to_thread.run_sync(lambda: sync(paths, settings, store)))


def tell(done: Pass, echo: Callable[[str], None]) -> None:
    """A pass as lines on stderr: what changed, then each problem."""
    echo(f"watch: {done.summary()}")
    for problem in done.problems:
        echo(f"watch: error: {problem}")
