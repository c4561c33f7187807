"""One logging configuration for the `rag` command and `rag serve`, and ingest's progress.

The library modules only log through `getLogger(__name__)`; the command configures logging
once (level from RAG_LOG_LEVEL, moved by `rag -v`/`-q`), and `rag serve` hands the same
dictConfig to uvicorn, so its loggers and rag's write one format to stderr. Progress is
information: it shows at INFO, as a bar on a terminal and as a line now and then elsewhere
(a log file or CI gets a few lines, not thousands of redrawn frames).
"""

from __future__ import annotations

import logging
import logging.config
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from rag.errors import InputError

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
PROGRESS_EVERY = 10.0  # seconds between progress lines when stderr is not a terminal
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

log = logging.getLogger("rag.progress")


def level_for(setting: str, verbosity: int = 0) -> str:
    """RAG_LOG_LEVEL moved by -v (one step more) and -q (one step less)."""
    base = setting.strip().upper()
    if base not in LEVELS:
        raise InputError(f"RAG_LOG_LEVEL={setting!r} is not a log level",
                         "use debug, info, warning or error")
    at = min(max(LEVELS.index(base) - verbosity, 0), len(LEVELS) - 1)
    return LEVELS[at]


def use_color(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


class Formatter(logging.Formatter):
    """The one format; the level name coloured on a terminal that wants colour."""

    COLORS = {"WARNING": "yellow", "ERROR": "red", "CRITICAL": "red", "DEBUG": "blue"}

    def __init__(self, fmt: str = FORMAT, datefmt: str | None = None, color: bool = False) -> None:
        super().__init__(fmt, datefmt)
        self.color = color

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        if self.color and record.levelname in self.COLORS:
            import click

            record = logging.makeLogRecord(record.__dict__)
            record.levelname = click.style(record.levelname, fg=self.COLORS[record.levelname])
        return super().formatMessage(record)


def log_config(level: str) -> dict[str, Any]:
    """The dictConfig for rag's and uvicorn's loggers (other libraries: warnings, or all
    at DEBUG)."""
    handler = {"class": "logging.StreamHandler", "formatter": "rag", "stream": "ext://sys.stderr"}
    named = {"level": level, "handlers": ["stderr"], "propagate": False}
    # A level on the libraries' handler, not only on the root logger: some (bm25s) set their
    # own logger to DEBUG, and records pass the root logger's level on their way up.
    libraries = {**handler, "level": "DEBUG" if level == "DEBUG" else "WARNING"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"rag": {"()": Formatter, "color": use_color(sys.stderr)}},
        "handlers": {"stderr": handler, "libraries": libraries},
        "loggers": {"rag": named, "uvicorn": named,
                    "uvicorn.error": {"level": level, "propagate": True},
                    "uvicorn.access": named},
        "root": {"level": libraries["level"], "handlers": ["libraries"]},
    }


def configure(setting: str = "INFO", verbosity: int = 0) -> str:
    """Configure logging for this process; returns the level (uvicorn gets the same)."""
    level = level_for(setting, verbosity)
    logging.config.dictConfig(log_config(level))
    return level


@contextmanager
def progress(total: int, desc: str, unit: str = "text", enabled: bool = True,
             stream: TextIO | None = None) -> Iterator[Callable[[int], None]]:
    """An update(n) callable: a tqdm bar on a terminal, else a line every PROGRESS_EVERY s
    and one at the end; nothing when disabled or when rag's log level is above INFO."""
    stream = stream or sys.stderr
    if not enabled or not log.isEnabledFor(logging.INFO):
        yield lambda n: None
        return
    if stream.isatty():
        from tqdm import tqdm

        # A terminal that reports no size (a bare pty, `script`, some CI runners) makes tqdm
        # hide the bar (it is "below" a screen of 0 rows): assume 80x24 there.
        try:
            size = os.get_terminal_size(stream.fileno())
        except (OSError, ValueError, AttributeError):
            size = os.terminal_size((0, 0))
        sized = size.columns > 0 and size.lines > 0
        with tqdm(total=total, unit=unit, desc=desc, file=stream, dynamic_ncols=sized,
                  ncols=None if sized else 80, nrows=None if sized else 24) as bar:
            yield bar.update
        return
    # tqdm's own non-terminal mode (mininterval) still writes `\r` frames on one line, which
    # a log file keeps as one ever-growing line: here each report is a log record.
    done, started = 0, time.monotonic()
    last = started

    def update(n: int) -> None:
        nonlocal done, last
        done += n
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY and done < total:
            last = now
            log.info("%s: %d/%d %ss (%d%%)", desc, done, total, unit, 100 * done // max(total, 1))

    yield update
    log.info("%s: %d/%d %ss in %.1f s", desc, done, total, unit, time.monotonic() - started)
