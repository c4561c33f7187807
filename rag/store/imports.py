"""Importing chromadb at the cost of what rag uses of it."""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Any

_lock = threading.Lock()


def import_chromadb() -> Any:
    """chromadb, imported without the `overrides` package's signature checks.

    chromadb marks its methods @override, and `overrides` checks each against its base class
    while the class is created: half of chromadb's import (0.2-0.3 s of every cold `rag ask`)
    goes to checking chromadb's own class hierarchy, which its release passed already. The
    checks are off only while chromadb is imported; nothing else of `overrides` changes.
    """
    with _lock:
        if "chromadb" in sys.modules:
            return sys.modules["chromadb"]
        try:
            checks = importlib.import_module("overrides.overrides")
            check = checks._overrides
        except (ImportError, AttributeError):  # another `overrides`: imported as it is
            return importlib.import_module("chromadb")

        def mark(method: Any, check_signature: bool, check_at_runtime: bool) -> Any:
            method.__override__ = True  # what EnforceOverrides looks for
            return method

        checks._overrides = mark  # type: ignore[attr-defined]
        try:
            return importlib.import_module("chromadb")
        finally:
            checks._overrides = check  # type: ignore[attr-defined]
