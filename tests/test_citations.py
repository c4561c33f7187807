"""Citation markers: parsing, invalid ones removed and counted, renumbering, claim units."""

from __future__ import annotations

from rag.citations import (
    clean_markers,
    first_use_order,
    join_units,
    numbers_in,
    renumber,
    split_units,
)


def test_marker_forms() -> None:
    assert numbers_in("a [1] b [2, 3] c [3][4]") == [1, 2, 3, 4]


def test_markers_to_no_source_are_removed_and_counted() -> None:
    text, dropped = clean_markers("Fast [1, 7]. Slow [9]. Done [2].", {1, 2})
    assert text == "Fast [1]. Slow. Done [2]." and dropped == 2


def test_renumbering_follows_first_use() -> None:
    text = "B is good [3]. A too [1][3]."
    assert renumber(text, first_use_order(text)) == "B is good [1]. A too [2][1]."


def test_units_keep_trailing_markers_and_bullets() -> None:
    units = split_units("3 of 60 match:\n- Skrull: schedules data. [1]\nIt is fast [2]. It is new.")
    assert [u.meta for u in units] == [True, False, False, False]
    assert units[1].text == "Skrull: schedules data [1]." and units[1].bullet == "-"
    assert units[2].citations == [2] and units[3].citations == []
    assert join_units(units).splitlines()[1] == "- Skrull: schedules data [1]."
