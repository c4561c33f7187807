"""Reading the fitted files of rag/relevance (params.json, addresses.json)."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from rag.errors import RagError


class RelevanceParamsError(RagError):
    """The fitted parameters are missing or unreadable: the installation is broken."""


def read_fitted(path: Path | None, name: str, what: str, script: str, fmt: int,
                check: Callable[[dict[str, Any]], Any]) -> Any:
    """A fitted file of rag/relevance (`name`, or `path`), read and checked by `check`; a file
    missing, unreadable or corrupt is refused naming it, `what` it holds and the `script`
    that refits it."""
    where = str(path) if path else f"rag/relevance/{name}"
    hint = f"reinstall rag, or refit the file with `python scripts/{script}` (see evals/README.md)"
    try:
        text = path.read_text(encoding="utf-8") if path else \
            resources.files("rag.relevance").joinpath(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise RelevanceParamsError(f"{where}: cannot read {what} ({exc.strerror or exc})", hint) from None
    try:
        data = json.loads(text)
        if data.get("format") != fmt:
            raise ValueError(f"format {data.get('format')!r}, expected {fmt}")
        return check(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RelevanceParamsError(f"{where}: {what} is corrupt ({exc})", hint) from None
