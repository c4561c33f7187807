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

import json
import logging
import math
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag.judge import content_words

log = logging.getLogger(__name__)

STATS_FORMAT = 1  # bump when IndexStats changes shape or meaning: old caches are recomputed
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

    def idf(self, term: str) -> float:
        """Smoothed inverse document frequency; a term no paper has gets the largest value."""
        return math.log((self.papers + 1) / (self.df.get(term, 0) + 0.5))

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
    if len(compared) < 2 or not asking:
        return IndexStats(len(papers), df, 0.2, 0.1, 0.4, 0.1, 0.6, 0.1)
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
    except (OSError, ValueError, TypeError):
        pass
    stats: IndexStats = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"format": STATS_FORMAT, **asdict(stats)}), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        log.warning("could not cache the relevance statistics: %s", exc)
    return stats
