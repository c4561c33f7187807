"""Error types: each carries a message, a hint saying what to do, and an exit code."""

from __future__ import annotations

# Exit codes, documented in docs/reference/exit-codes.md.
EXIT_OK = 0
EXIT_ERROR = 1  # unexpected failure
EXIT_INPUT = 2  # bad input file, bad argument, bad request
EXIT_INDEX = 3  # index missing, locked, corrupt or incompatible
EXIT_LLM = 4  # Ollama not running, model missing, timeout, broken stream
EXIT_EVAL = 5  # `rag eval`: a metric below its threshold
EXIT_UNSUPPORTED = 6  # `rag check`: a claim or draft sentence its papers do not support


class RagError(Exception):
    """A failure the user can act on."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message

    def one_line(self) -> str:
        """What is wrong, then what to do in brackets: for a reply or list of one line each."""
        return self.message + (f" ({self.hint})" if self.hint else "")


class InputError(RagError):
    """A file, argument or request that cannot be used as given."""

    exit_code = EXIT_INPUT


class ParseError(InputError):
    """A file whose content does not parse; names the file and line."""

    def __init__(self, path: str, line: int | None, message: str, hint: str = "") -> None:
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}", hint)
        self.path = path
        self.line = line


class Unreadable(ParseError):
    """A file that holds no paper rag can read (a scanned PDF, one with no abstract): in a
    folder it is named with the reason and passed over; given alone it is an error."""


class IndexStoreError(RagError):
    exit_code = EXIT_INDEX


class LLMError(RagError):
    exit_code = EXIT_LLM


class LLMUnavailable(LLMError):
    """Ollama is not reachable at all (the offline answerer can take over)."""


class ModelNotFound(LLMError):
    pass


class LLMTimeout(LLMError):
    pass
