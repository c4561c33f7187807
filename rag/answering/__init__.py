"""The answering core: choose sources -> write (model or offline) -> check -> Answer.

`Pipeline` (rag.answering.pipeline) only orchestrates; each stage is a module of its own.
"""

from rag.answering.pipeline import Pipeline

__all__ = ["Pipeline"]
