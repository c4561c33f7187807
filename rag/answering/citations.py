"""Citation markers in answer text: parse, normalise other styles, drop invalid ones, renumber."""

from __future__ import annotations

import re

_GROUP = re.compile(r"\[(\s*\d+(?:\s*,\s*\d+)*\s*)\]")
_TRAILING = re.compile(r"([.!?])\s*((?:\[\s*\d+(?:\s*,\s*\d+)*\s*\]\s*)+)(?=\s|$)")
# "claim. [1]": markers after the full stop, which the checker moves before it.
TRAILING_MARKERS = _TRAILING


def numbers_in(text: str) -> list[int]:
    out: list[int] = []
    for group in _GROUP.findall(text):
        for n in group.split(","):
            if int(n) not in out:
                out.append(int(n))
    return out


# One number or a range ("1-3", "1–3"); a list of them joined by "," ";" "and" "&", each
# optionally repeated with its "Source" word ("[Source 1, Source 2]").
_SRC = r"(?:sources?|src|refs?|references?|papers?|docs?|documents?|abstracts?|articles?)"
_ITEM = r"\d+(?:\s*[-–]\s*\d+)?"
_LIST = rf"{_ITEM}(?:\s*(?:,|;|and|&)\s*(?:{_SRC}\s*:?\s*)?{_ITEM})*"
_STYLE = re.compile(
    rf"\[\s*(?:{_SRC}\s*:?\s*)?(?P<sq>{_LIST})\s*\]"  # [1] [1-3] [Source 1] [source: 1]
    rf"|\[\^(?P<fn>\d+)\]"  # [^1] (markdown footnote)
    rf"|【\s*(?:{_SRC}\s*:?\s*)?(?P<lent>{_LIST})(?:[†:][^】\n]*)?\s*】"  # 【1】 【1†source】
    rf"|\(\s*{_SRC}\s*:?\s*(?P<src>{_LIST})\s*\)"  # (Source 1)
    r"|\((?P<bare>\d+(?:\s*,\s*\d+)*)\)",  # (1): only where it cannot be a plain number
    re.I,
)
_PLAIN = re.compile(r"\[\s*\d+(?:\s*,\s*\d+)*\s*\]")  # already canonical: never rewritten
# "Source 1: claim." at the start of a line or sentence: the claim, cited at its end.
_PREFIX_BODY = rf"[ \t]*(?:\*\*)?\[?{_SRC}\s+(?P<nums>{_LIST})\]?(?:\*\*)?[ \t]*[:—–-][ \t]*(?:\*\*)?[ \t]*"
_PREFIX = re.compile(rf"(?:^|(?<=\n)|(?<=[.!?] )){_PREFIX_BODY}", re.I)
# The same prefix where the claim of another one starts ("Source 1: Source 2: claim."): folded
# into the first, or the claim would start with a prefix the next pass rewrites again.
_INNER = re.compile(_PREFIX_BODY, re.I)
# Words after which "(2)" names a thing, not a source: "Equation (2)", "step (3)".
_NOT_BEFORE = re.compile(
    r"(?:eq|eqs|equation|equations|fig|figure|figures|table|tables|step|steps|section|sec|"
    r"chapter|appendix|item|items|part|line|lines|phase|stage|type|class|case|group|model|"
    r"version|rule|lemma|theorem|formula|condition|hypothesis|question|option|no|number)\.?[ \t]*$",
    re.I,
)


def _numbers(spec: str, n_sources: int) -> list[int] | None:
    """The numbers of a marker's list, ranges expanded; None when a range is not one of
    sources ("[2019-2021]" stays text)."""
    out: list[int] = []
    for item in re.findall(r"\d+(?:\s*[-–]\s*\d+)?", spec):
        ends = [int(x) for x in re.findall(r"\d+", item)]
        if len(ends) == 2:
            if not 1 <= ends[0] < ends[1] <= n_sources:
                return None
            ends = list(range(ends[0], ends[1] + 1))
        out += [n for n in ends if n not in out]
    return out


def _bare_is_citation(text: str, m: re.Match[str], nums: list[int], n_sources: int,
                      end: bool) -> bool:
    """Is "(1)" a citation? Only when every number is a source's, it follows a word on the
    same line (not "(1) first step" opening a list item), no word like "Equation" or "step"
    comes right before it, and a clause ends right after it (punctuation, line end, or the
    end of a complete text), so "values (1) and (2) differ" stays as it is."""
    if not nums or any(not 1 <= n <= n_sources for n in nums):
        return False
    line = text[: m.start()].rsplit("\n", 1)[-1]
    if not line.strip() or line.rstrip().endswith(":") or _NOT_BEFORE.search(line):
        return False
    if not line.endswith((" ", "\t")) and not line.endswith((".", "!", "?")):
        return False  # "f(1)", "x(2)": an argument, not a citation
    after = text[m.end():]
    return bool(re.match(r"[ \t]*[.;,!?:)]|[ \t]*\n", after)) or (end and not after.strip())


def _prefix_styles(text: str, n_sources: int, end: bool, rewrites: list[dict[str, str]]) -> str:
    """ "Source 1: claim." -> "claim [1]." once the claim's sentence has ended."""
    out, at = [], 0
    for m in _PREFIX.finditer(text):
        if m.start() < at:
            continue
        nums = _numbers(m.group("nums"), n_sources)
        stop = re.compile(r"(?<!\d)[.!?](?=\s|$)" if end else r"[.!?](?=\s)").search(text, m.end())
        if not nums or stop is None or "\n" in text[m.end(): stop.start()]:
            continue
        claim = m.end()
        while inner := _INNER.match(text, claim, stop.start()):
            more = _numbers(inner.group("nums"), n_sources)
            if not more:
                break
            nums += [n for n in more if n not in nums]
            claim = inner.end()
        marker = "[" + ", ".join(map(str, nums)) + "]"
        rewrites.append({"from": text[m.start(): claim].strip(), "to": marker})
        out += [text[at: m.start()], text[claim: stop.start()].rstrip(), " ", marker]
        at = stop.start()
    return "".join(out) + text[at:]


def normalize_citations(text: str, n_sources: int, end: bool = False
                        ) -> tuple[str, list[dict[str, str]]]:
    """Citation styles other than [n] rewritten to [n] / [1, 2], and what was rewritten.

    Rewritten: [1-3] (a range of sources, expanded), [1][2] and [1] [2] (merged), [Source 1],
    [Sources 1, 2], [source: 1], (Source 1), "Source 1: claim." (the claim, then [1]), 【1】
    and 【1†source】, [^1], and (1) where it cannot be a plain number (see _bare_is_citation).
    Left alone: canonical markers (also [2023]: clean_markers later drops numbers that are no
    source's), ranges that are not of sources ("[2019-2021]"), (n) above the source count.
    A style-word marker ([Source 7]) is rewritten whatever its number: it is a citation, and
    clean_markers drops it if no source has that number.

    Text that is still being streamed is normalised again as more arrives, so this is
    idempotent on its own output, reports each rewrite once (canonical text yields none),
    and decides nothing at the end of the text unless `end` says the text is complete
    ("claim (1" or "(Sour" is completed by a later call).
    """
    rewrites: list[dict[str, str]] = []
    text = _prefix_styles(text, n_sources, end, rewrites)
    out, at = [], 0
    run: list[tuple[re.Match[str], list[int]]] = []

    def close_run() -> None:
        nonlocal at
        if not run:
            return
        start, stop = run[0][0].start(), run[-1][0].end()
        original = text[start:stop]
        if len(run) == 1 and _PLAIN.fullmatch(original):
            run.clear()
            return  # canonical already (spacing inside is left as written)
        nums: list[int] = []
        for _, ns in run:
            nums += [n for n in ns if n not in nums]
        marker = "[" + ", ".join(map(str, nums)) + "]"
        if marker != original:
            rewrites.append({"from": original, "to": marker})
        out.extend([text[at:start], marker])
        at = stop
        run.clear()

    for m in _STYLE.finditer(text):
        spec = m.group("sq") or m.group("fn") or m.group("lent") or m.group("src") or m.group("bare")
        nums = _numbers(spec, n_sources)
        if nums is not None and m.group("bare") is not None:
            nums = nums if _bare_is_citation(text, m, nums, n_sources, end) else None
        if nums is None:
            close_run()
            continue
        if run and not re.fullmatch(r"[ \t]*", text[run[-1][0].end(): m.start()]):
            close_run()
        run.append((m, nums))
    close_run()
    return "".join(out) + text[at:], rewrites


def clean_markers(text: str, valid: set[int]) -> tuple[str, int]:
    """Remove markers that point at no source; returns the text and how many were dropped."""
    dropped = 0

    def fix(m: re.Match[str]) -> str:
        nonlocal dropped
        nums = [int(n) for n in m.group(1).split(",")]
        keep = [n for n in nums if n in valid]
        dropped += len(nums) - len(keep)
        return "[" + ", ".join(str(n) for n in keep) + "]" if keep else ""

    text = _GROUP.sub(fix, text)
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", text), dropped


def renumber(text: str, order: dict[int, int]) -> str:
    def fix(m: re.Match[str]) -> str:
        nums = sorted({order[int(n)] for n in m.group(1).split(",")})
        return "[" + ", ".join(str(n) for n in nums) + "]"

    return _GROUP.sub(fix, text)
