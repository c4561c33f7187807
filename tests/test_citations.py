"""Citation markers: parsing, invalid ones removed and counted, renumbering."""

from __future__ import annotations

from rag.answering.citations import clean_markers, numbers_in, renumber


def test_marker_forms() -> None:
    assert numbers_in("a [1] b [2, 3] c [3][4]") == [1, 2, 3, 4]


def test_markers_to_no_source_are_removed_and_counted() -> None:
    text, dropped = clean_markers("Fast [1, 7]. Slow [9]. Done [2].", {1, 2})
    assert text == "Fast [1]. Slow. Done [2]." and dropped == 2


def test_renumbering_maps_every_marker() -> None:
    assert renumber("B is good [3]. A too [1][3].", {3: 1, 1: 2}) == "B is good [1]. A too [2][1]."
