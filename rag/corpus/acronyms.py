"""Acronyms as a corpus defines them: "Federated learning (FL)" makes "FL" mean federated
learning in every abstract of that index (questions and topics use these to match papers that
write a name out)."""

from __future__ import annotations

import re
from collections.abc import Iterable


def singular(acronym: str) -> str:
    """"GNNs" -> "GNN": the acronym without a plural's "s"."""
    return acronym[:-1] if acronym.endswith("s") and len(acronym) > 2 else acronym


def is_acronym(name: str) -> bool:
    """"FL", "GNNs", "MoE", "DLRM": one short word, mostly capitals (a plural's "s" aside);
    not a system's name such as "FairScale"."""
    core = singular(name)
    letters = [c for c in core if c.isalpha()]
    return (" " not in name and 2 <= len(core) <= 8 and core[0].isupper() and bool(letters)
            and sum(c.isupper() for c in letters) * 2 > len(letters))


def long_forms(acronym: str, texts: Iterable[str]) -> list[str]:
    """What the texts spell `acronym` out as where they define it ("Federated learning (FL)"
    -> "federated learning"), lower-cased: the most frequent definition (several if tied),
    [] if none defines it. The long form is found as Schwartz and Hearst's algorithm finds it
    (A Simple Algorithm for Identifying Abbreviation Definitions in Biomedical Text, 2003):
    the shortest run of the words before the parenthesis, at most min(n + 5, 2n) of them
    for an n-letter acronym, in which the acronym's letters appear in order, the first at the
    start of a word. Written here: none of the named libraries reads abbreviations."""
    core = singular(acronym)
    marks = (f"({core})", f"({core}s)")
    span = min(len(core) + 5, 2 * len(core))
    counts: dict[str, int] = {}
    for text in texts:
        if marks[0] not in text and marks[1] not in text:
            continue  # cheap: most texts never write it
        for m in re.finditer(rf"\({re.escape(core)}s?\)", text):
            words = re.findall(r"\w[\w'-]*", text[:m.start()])[-span:]
            form = long_form(core, " ".join(words))
            if form and form.lower() != core.lower():
                counts[form.lower()] = counts.get(form.lower(), 0) + 1
    top = max(counts.values(), default=0)
    return sorted(f for f, n in counts.items() if n == top)


def long_form(short: str, before: str) -> str | None:
    """Schwartz and Hearst's best long form of `short` ending `before` (None if none)."""
    s, i = len(short) - 1, len(before) - 1
    while s >= 0:
        c = short[s].lower()
        if not c.isalnum():
            s -= 1
            continue
        while i >= 0 and (before[i].lower() != c or (s == 0 and i > 0 and before[i - 1].isalnum())):
            i -= 1
        if i < 0:
            return None
        i -= 1
        s -= 1
    start = before.rfind(" ", 0, i + 1) + 1
    return before[start:].strip(" ,;:") or None


def acronym_pattern(acronym: str, forms: list[str]) -> re.Pattern[str]:
    """Matches `acronym` as written (or its singular, "GNN" for "GNNs"), alone or heading a
    compound, or one of its long forms in any case, singular or plural ("graph neural
    network")."""
    core = singular(acronym)
    alts = [rf"{re.escape(core)}s?"]
    for form in forms:
        # a hyphen and a space join a long form's words alike ("mixture-of-experts")
        words = re.split(r"[\s-]+", form[:-1] if form.endswith("s") and not form.endswith("ss") else form)
        if words:
            alts.append("(?i:" + r"[\s-]+".join(re.escape(w) for w in words) + "s?)")
    return re.compile(rf"(?<![\w-])(?:{'|'.join(alts)})(?!\w)")
