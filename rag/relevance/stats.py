"""What is normal in one index: term document frequencies, and how similar a question's best
sentence usually is to papers that do not answer it.

Scores mean different things in different indexes: a biomedical abstract has more and longer
sentences than a systems one, so its best sentence is closer to any question by chance, and a
large index always holds some near neighbour. The relevance features are therefore also given
relative to this index's own distributions, measured with pseudo-questions taken from the
corpus itself (each sampled paper's title, or its first sentence when it has none; that
sentence is left out of its own abstract), so that an index nobody labelled is calibrated too.
Computed once per index version and cached next to the index.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rag.corpus.words import content_words

log = logging.getLogger(__name__)

STATS_FORMAT = 2  # bump when IndexStats changes shape or meaning: old caches are recomputed
SAMPLE_QUESTIONS = 200  # pseudo-questions per index
SAMPLE_PAPERS = 1000  # papers they are compared with
_SEED = 12


@dataclass
class IndexStats:
    papers: int
    df: dict[str, int]  # stemmed content word -> papers whose title + abstract contain it
    bg_mean: float  # best-sentence cosine of a pseudo-question to a paper that is not its own
    bg_std: float
    top_mean: float  # ... to the best of those papers (the closest wrong paper in the index)
    top_std: float
    self_mean: float  # ... to its own paper (what an answerable question looks like here)
    self_std: float
    # For an index smaller than any the models were fitted on (padded()): papers and df of
    # those corpora, and how many of their papers' worth make this index up to the smallest
    # of them. Not cached: set on the stats as they are used.
    padding: tuple[int, dict[str, int], int] | None = field(default=None, repr=False)

    def idf(self, term: str) -> float:
        """Smoothed inverse document frequency; a term no paper has gets the largest value.
        In a padded index a word counts in the papers of this index that have it, plus the
        padding's share of the fitted corpora's papers that have it."""
        # Memoised per padding (a list question asks it ~30,000 times of ~20 terms); kept off
        # the dataclass's fields, so that the cached statistics never hold it.
        memo: tuple[Any, dict[str, float]] | None = self.__dict__.get("_idf")
        if memo is None or memo[0] is not self.padding:
            memo = self.__dict__["_idf"] = (self.padding, {})
        value = memo[1].get(term)
        if value is None:
            df = float(self.df.get(term, 0))
            if self.padding:
                papers, bg_df, pad = self.padding
                df += pad * bg_df.get(term, 0) / papers
            value = memo[1][term] = math.log((self.size() + 1) / (df + 0.5))
        return value

    def size(self) -> float:
        return self.papers + (self.padding[2] if self.padding else 0)

    def idf_max(self) -> float:
        """The IDF of a term no paper has."""
        return math.log((self.size() + 1) / 0.5)

    def z_background(self, cos: float) -> float:
        return (cos - self.bg_mean) / self.bg_std

    def z_top(self, cos: float) -> float:
        return (cos - self.top_mean) / self.top_std

    def z_self(self, cos: float) -> float:
        return (cos - self.self_mean) / self.self_std


def compute(papers: list[Any], sentences: Any, embed: Any) -> IndexStats:
    """IndexStats of these papers. `sentences(ids)` gives {paper_id: (sentences, vectors)} as
    Store.sentences does; `embed(texts)` embeds titles used as pseudo-questions."""
    df: dict[str, int] = {}
    for p in papers:
        for term in content_words(f"{p.title or ''} {p.abstract}"):
            df[term] = df.get(term, 0) + 1
    rng = random.Random(_SEED)
    compared = rng.sample(papers, min(SAMPLE_PAPERS, len(papers)))
    asking = compared[:SAMPLE_QUESTIONS]
    stored: dict[str, tuple[list[str], np.ndarray]] = {}
    ids = [p.paper_id for p in compared]
    for i in range(0, len(ids), 200):
        stored.update(sentences(ids[i : i + 200]))
    compared = [p for p in compared if p.paper_id in stored]
    asking = [p for p in asking if p.paper_id in stored and len(stored[p.paper_id][0]) > 1]
    if len(compared) < 2 or not asking:  # nothing to compare with: unmeasured, not guessed
        nan = math.nan
        return IndexStats(len(papers), df, nan, nan, nan, nan, nan, nan)
    titled = [p for p in asking if p.title]
    title_vecs = dict(zip([p.paper_id for p in titled], embed([p.title for p in titled]), strict=True)) \
        if titled else {}
    owner = np.concatenate([[i] * len(stored[p.paper_id][0]) for i, p in enumerate(compared)])
    matrix = np.vstack([stored[p.paper_id][1] for p in compared])
    position = {p.paper_id: i for i, p in enumerate(compared)}
    background, top, own = [], [], []
    for p in asking:
        sents, vecs = stored[p.paper_id]
        qvec = title_vecs.get(p.paper_id)
        skip = -1
        if qvec is None:
            qvec, skip = vecs[0], 0  # the first sentence asks; it is not its own answer
        sims = matrix @ qvec
        best = np.full(len(compared), -1.0)
        np.maximum.at(best, owner, sims)
        me = position[p.paper_id]
        mine = vecs @ qvec
        if skip == 0:
            mine = mine[1:]
        own.append(float(mine.max()))
        others = np.delete(best, me)
        background += others.tolist()
        top.append(float(others.max()))
    return IndexStats(
        len(papers), df,
        float(np.mean(background)), float(np.std(background)) or 0.1,
        float(np.mean(top)), float(np.std(top)) or 0.1,
        float(np.mean(own)), float(np.std(own)) or 0.1,
    )


def cached(path: Path, build: Any) -> IndexStats:
    """The stats stored at `path`, or `build()` stored there (a broken cache is rebuilt)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.pop("format", None) == STATS_FORMAT:
            return IndexStats(**data)
    except (OSError, ValueError, TypeError, AttributeError):  # AttributeError: JSON not an object
        pass
    stats: IndexStats = build()
    data = {"format": STATS_FORMAT, **asdict(stats)}
    data.pop("padding")
    _store(path, lambda out: out.write(json.dumps(data).encode()), "the relevance statistics")
    return stats


def prune(folder: Path, pattern: str, keep: Path) -> None:
    """Remove the cache files in `folder` whose names match `pattern` (a regex: one index's
    files of other versions), but `keep`: an index's old versions are never read again."""
    import re

    with contextlib.suppress(OSError):
        for old in folder.iterdir():
            if old.name != keep.name and re.fullmatch(pattern, old.name) and old.is_file():
                old.unlink(missing_ok=True)


def _store(path: Path, write: Any, what: str) -> None:
    """Write a cache file atomically with `write(binary file)`; a failure is logged, not raised.
    A name of its own for each writer: concurrent answers (MCP calls, API requests, a second
    process) each build the cache of a new index version, and with one shared temporary name
    one writer's replace took the file another was still writing."""
    tmp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        tmp = Path(name)
        with os.fdopen(fd, "wb") as out:
            write(out)
        os.replace(tmp, path)  # atomic: a reader sees the old file or the whole new one
    except OSError as exc:
        log.warning("could not cache %s: %s", what, exc)
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def cached_probes(path: Path, build: Any) -> tuple[list[str], np.ndarray]:
    """The probes stored at `path` (NumPy arrays, no pickle), or `build()` stored there: embedded
    once per index version, not by every process (64 titles: 0.1-0.2 s of a cold question)."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            owners, vecs = [str(i) for i in saved["ids"]], np.array(saved["vecs"], dtype=np.float32)
        if vecs.ndim == 2 and len(owners) == len(vecs) and np.isfinite(vecs).all():
            return owners, vecs
    except Exception:  # noqa: BLE001 - empty (EOFError), not a zip, wrong arrays: embedded again
        pass
    owners, vecs = build()  # a read-only home: embedded again next time
    _store(path, lambda out: np.savez(out, ids=np.array(owners, dtype=str), vecs=vecs), "the relevance probes")
    return owners, vecs


_BACKGROUND: dict[str, Any] | None = None
_DISTRIBUTIONS = (("bg_mean", "bg_std"), ("top_mean", "top_std"), ("self_mean", "self_std"))


def background() -> dict[str, Any]:
    """The corpora the relevance models were fitted on, as these features see them
    (rag/relevance/background.json, written by scripts/background.py): papers, document
    frequencies `df`, and the mean over the corpora of what is normal in each, `stats`."""
    global _BACKGROUND
    if _BACKGROUND is None:
        from importlib import resources

        data = json.loads(resources.files("rag.relevance").joinpath("background.json")
                          .read_text(encoding="utf-8"))
        _BACKGROUND = {"papers": int(data["papers"]), "df": {str(k): int(v) for k, v in data["df"].items()},
                       "stats": {k: float(data["stats"][k]) for pair in _DISTRIBUTIONS for k in pair}}
    return _BACKGROUND


def padded(stats: IndexStats, size: int) -> IndexStats:
    """The stats of an index of fewer than `size` papers (the smallest index the models were
    fitted on), made up to that size with the fitted corpora (background()): its words are
    weighed with its own papers plus the corpora's word frequencies for the rest (`padding`,
    IndexStats.idf), and what is normal in it is the mixture of its own measurements (each
    paper counting one) and the corpora's (the rest); an index too small to measure any takes
    the corpora's. Weighed as measured, in an index of one paper every question word its
    abstract lacks had the largest IDF, and half of what it plainly says was declined
    (benchmarks/small_indexes.py). Written by hand: the weighing is this module's own."""
    bg = background()
    values: dict[str, float] = {}
    for mean_key, std_key in _DISTRIBUTIONS:
        m, s = getattr(stats, mean_key), getattr(stats, std_key)
        pm, ps = bg["stats"][mean_key], bg["stats"][std_key]
        own = 0.0 if math.isnan(m) or math.isnan(s) else stats.papers / size
        m, s = (m, s) if own else (pm, ps)  # unmeasured: the corpora's alone
        mix = own * m + (1 - own) * pm  # mixture of two distributions: its mean and spread
        values[mean_key] = mix
        values[std_key] = math.sqrt(own * (s * s + (m - mix) ** 2) + (1 - own) * (ps * ps + (pm - mix) ** 2))
    return IndexStats(stats.papers, stats.df, values["bg_mean"], values["bg_std"], values["top_mean"],
                      values["top_std"], values["self_mean"], values["self_std"],
                      padding=(bg["papers"], bg["df"], size - stats.papers))
