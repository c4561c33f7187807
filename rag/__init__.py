"""rag: cited answers over research-paper abstracts, offline."""

__version__ = "0.1.0"
