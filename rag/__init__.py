"""rag: cited answers over research-paper abstracts, offline."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rag.judge import Support

__version__ = "0.1.0"


def check(claim: str, abstract: str, title: str = "") -> Support:
    """Does the abstract support the claim? `.verdict` is "supported", "contradicted" or
    "not_supported"; `.score` the verifier's probability of support; `.quote` the abstract's
    sentence that decided it (for "contradicted": the one that contradicts it)."""
    from rag.judge import check_claim

    return check_claim(claim, abstract, title)
