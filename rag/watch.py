"""Keeping an index in step with folders of abstract files (`rag ingest --watch`,
`rag mcp --watch`).

Each pass brings the index up to date with the files under the watched paths: every file is
parsed on its own first, and a bad one is reported and left out (its papers stay as they
were indexed); the good ones go through the incremental ingest (unchanged papers cost
nothing); papers whose file under a watched path is gone (deleted, or replaced by a folder)
leave the index, unless a file still there holds them. A watched path that is gone itself, or
holds no abstract files, is said and keeps its papers (one `rm -r` or `mv`, or a sync tool
recreating the folder, emptied the index): with `prune` they leave. Changes are noticed by
`watchfiles` (inotify on Linux; its own debounce groups a burst of writes into one pass);
inotify follows a folder's inode, not its name, so each watched path's identity is checked
every POLL_S seconds and the watch starts again on the path's new folder or file.
"""

from __future__ import annotations

import logging
import os
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

# How often each watched path is checked to still be the folder or file being watched, and
# how soon a vanished one is seen back: a second is quick to a person, and one stat() a
# second costs nothing.
POLL_S = 1.0


@dataclass
class Pass:
    """What one pass did: the ingest's report (None when nothing was ingested), the papers
    removed with their files, the files (or the pass) that failed, and what became of the
    watched paths themselves (gone, back, replaced, their papers kept)."""

    report: IngestReport | None = None
    removed: int = 0
    problems: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [self.report.summary()] if self.report else []
        if self.removed:
            parts.append(f"{self.removed} paper(s) of deleted files removed")
        return "; ".join(parts) or "nothing to ingest"


def _files(roots: list[Path]) -> tuple[list[Path], list[Path]]:
    """The abstract files under the roots, and the roots that are gone or hold none."""
    out: list[Path] = []
    vanished: list[Path] = []
    for root in roots:
        if not root.exists():
            vanished.append(root)
            continue
        try:
            out.extend(expand_paths([root]))
        except InputError:
            if not root.is_dir():
                raise
            vanished.append(root)  # emptied: as a sync tool's recreated folder is at first
    return out, vanished


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


def sync(paths: Iterable[Path], settings: Settings, store: Store | None = None,
         prune: bool = False) -> Pass:
    """One pass over the watched paths (see the module's docstring); never raises RagError:
    what failed is in Pass.problems and the index is as it was before the failing step."""
    roots = [Path(p).resolve() for p in paths]
    done = Pass()
    try:
        files, vanished = _files(roots)
        good = _readable(files, done.problems)
        if good:
            done.report = ingest(good, settings, store=store, show_progress=False)
        with ingest_lock(settings):
            owned = store is None
            target = store or Store(settings)
            try:
                sources = target.source_paths()
                # is_file(): a file replaced by a folder of its name holds no papers
                gone = {pid for pid, source in sources.items()
                        if _under(source, roots) and not Path(source).is_file()}
                if gone:  # a paper merged from several files stays while one of them is there
                    gone -= {p.paper_id for p in target.papers() if p.paper_id in gone and any(
                        Path(str(e.get("source", ""))).is_file() for e in p.sources)}
                for root in vanished:
                    held = {pid for pid in gone if _under(sources[pid], [root])}
                    done.notices.append(_vanished(root, len(held), prune))
                    if not prune:
                        gone -= held
                if gone:
                    target.write([], delete_papers=gone)
                done.removed = len(gone)
            finally:
                if owned:
                    target.close()
    except RagError as exc:
        done.problems.append(exc.one_line())
    return done


def _vanished(root: Path, papers: int, prune: bool) -> str:
    what, back = (("holds no abstract files", "its files are") if root.is_dir()
                  else ("is gone (deleted or moved)", "it is"))
    if prune:
        return f"{root} {what}: its {papers} paper(s) left the index (--prune)"
    return (f"{root} {what}: its {papers} paper(s) stay in the index until {back} back "
            "(watch with --prune to remove them)")


def _identity(path: Path) -> tuple[int, int] | None:
    """Which folder or file a path names now (device, inode); None when it names none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _moves(before: dict[Path, tuple[int, int] | None],
           after: dict[Path, tuple[int, int] | None]) -> list[str]:
    said = []
    for root, now in after.items():
        if before[root] is None and now is not None:
            said.append(f"{root} is back: following it again")
        elif before[root] is not None and now is not None and now != before[root]:
            said.append(f"{root} was replaced: following the new one")
    return said


def follow(paths: list[Path], settings: Settings, say: Callable[[Pass], None],
           stop: threading.Event, store: Store | None = None, prune: bool = False) -> None:
    """Sync once the watch is set up (a change made before it would go unheard), then after
    every change under the paths and every time a path is deleted, moved, replaced or back,
    until `stop` is set."""
    import watchfiles

    roots = [Path(p).resolve() for p in paths]

    def now() -> dict[Path, tuple[int, int] | None]:
        return {r: _identity(r) for r in roots}

    seen, pending, notices = now(), True, list[str]()

    def sync_now() -> None:
        nonlocal pending, notices
        done = sync(roots, settings, store, prune)
        done.notices[:0] = notices
        notices, pending = [], False
        say(done)

    def moved() -> bool:
        nonlocal seen, pending
        current = now()
        if current == seen:
            return False
        notices.extend(_moves(seen, current))
        seen, pending = current, True
        return True

    while not stop.is_set():
        watched = [r for r in roots if seen[r] is not None]
        try:
            if watched:  # its first yield comes once the watch is set up (or with changes)
                for changes in watchfiles.watch(*watched, stop_event=stop, yield_on_timeout=True,
                                                rust_timeout=int(POLL_S * 1000)):
                    if moved():
                        break  # a new watch, on what the paths name now
                    if pending or changes:
                        sync_now()
                else:  # the watch ended by itself: not in a busy loop
                    stop.wait(POLL_S)
            else:  # every path is gone: say so, and wait for one to come back
                if pending:
                    sync_now()
                while not stop.wait(POLL_S) and not moved():
                    pass
        except OSError:  # a path vanished as its watch began
            if not stop.wait(POLL_S):
                moved()


def watch(paths: list[Path], settings: Settings, say: Callable[[Pass], None],
          stop: threading.Event | None = None, store: Store | None = None,
          prune: bool = False) -> None:
    """`rag ingest --watch`: sync now, then follow the paths until `stop` is set or Ctrl-C."""
    for p in paths:
        if not p.exists():
            raise InputError(f"{p}: no such file or directory", "check the path")
    try:
        follow(paths, settings, say, stop or threading.Event(), store, prune)
    except KeyboardInterrupt:
        return


async def awatch(paths: list[Path], settings: Settings, say: Callable[[Pass], None],
                 store: Store | None = None, prune: bool = False) -> None:
    """`follow` for an event loop (`rag mcp --watch`), in a worker thread; cancelled, it
    stops the thread and waits for a pass under way to end. Its first pass catches what
    changed while the server loaded (the index was synced before it opened)."""
    import anyio

    stop = threading.Event()

    async def stopper() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stopper)
        await anyio.to_thread.run_sync(lambda: follow(paths, settings, say, stop, store, prune))
        tg.cancel_scope.cancel()


def tell(done: Pass, echo: Callable[[str], None]) -> None:
    """A pass as lines on stderr: what became of the watched paths, what changed, then each
    problem."""
    for notice in done.notices:
        echo(f"watch: {notice}")
    echo(f"watch: {done.summary()}")
    for problem in done.problems:
        echo(f"watch: error: {problem}")
