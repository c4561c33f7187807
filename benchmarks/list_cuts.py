"""Where a "which papers" list is cut: rag's bound on P(member) against other cut rules, on
the member model's own probabilities. Prints a table; not a test, and nothing here ships.

    nice .venv/bin/python benchmarks/list_cuts.py [--home /tmp/rag-relevance]   # ~5 min, 2 cores

Fits the relevance models as `scripts/fit_relevance.py` does (same indexes under `--home`,
same cached features), then, for each cut rule, chooses its parameters on the out-of-fold
probabilities of the fit split's list questions (mean F1, as the shipped bound is chosen)
and reports mean recall, precision and F1 per corpus on the fit and held-out splits. The
rules are fitted on seeds/ and PubMedQA together and on each alone, so each corpus is also
reported with parameters chosen on the other (SciFact has no list questions). Rules:

- `bound`: P >= t (the shipped rule; at least the top candidate).
- `bound+ratio`: P >= t and P >= r * the top candidate's P.
- `gap`: cut after the first drop in P of at least g below a candidate with P >= t.
- `expected F1`: the prefix of the ranking that maximises the expected F1 under the
  probabilities (the plug-in rule of Jansche 2007 and Ye et al., ICML 2012: 2 * sum of the
  prefix's P / (prefix length + sum of all P)), after recalibrating P as sigmoid(a * logit P +
  b): the member model is fitted with each question's members and non-members weighed
  equally, so its probabilities are not the base rates the rule needs.

The last line per corpus and split is the oracle: the best cut of each question's ranking
chosen with the answers known, the most any cut rule could reach on this ranking.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ("seeds", "pubmedqa")
SPLITS = ("fit", "heldout")


def load_fit_relevance() -> Any:
    spec = importlib.util.spec_from_file_location("fit_relevance", ROOT / "scripts" / "fit_relevance.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["fit_relevance"] = module
    spec.loader.exec_module(module)
    return module


def ranked(it: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """A list question's probabilities, highest first, and whether each is a member."""
    p = np.asarray(it["paper_probs"])
    order = np.argsort(-p, kind="stable")
    return p[order], np.array([it["hits"][i].paper.paper_id in it["relevant"] for i in order])


def figures(k: int, members: np.ndarray) -> tuple[float, float, float]:
    hit = float(members[:k].sum())
    n = float(members.sum())
    return hit / n, hit / k, (2 * hit / (k + n) if hit else 0.0)


def at_least_one(n: int) -> int:
    return max(1, n)


def bound(p: np.ndarray, t: float) -> int:
    return at_least_one(int((p >= t).sum()))


def bound_ratio(p: np.ndarray, t: float, r: float) -> int:
    return at_least_one(int(((p >= t) & (p >= r * p[0])).sum()))


def gap(p: np.ndarray, t: float, g: float) -> int:
    for i in range(len(p) - 1):
        if p[i] >= t and p[i] - p[i + 1] >= g:
            return i + 1
    return bound(p, t)


def expected_f1(p: np.ndarray, a: float, b: float) -> int:
    z = np.log(np.clip(p, 1e-9, 1 - 1e-9) / np.clip(1 - p, 1e-9, 1.0))
    q = 1.0 / (1.0 + np.exp(-(a * z + b)))
    k = np.arange(1, len(q) + 1)
    return int(np.argmax(2 * np.cumsum(q) / (k + q.sum()))) + 1


RULES: dict[str, tuple[list[tuple[float, ...]], Callable[..., int]]] = {
    "bound": ([(t,) for t in np.linspace(0.05, 0.95, 91)], bound),
    "bound+ratio": ([(t, r) for t in np.linspace(0.05, 0.95, 46) for r in np.linspace(0.0, 1.0, 21)],
                    bound_ratio),
    "gap": ([(t, g) for t in np.linspace(0.05, 0.95, 19) for g in np.linspace(0.02, 0.4, 20)], gap),
    "expected F1": ([(a, b) for a in (0.5, 0.75, 1.0, 1.5, 2.0, 3.0) for b in np.linspace(-6, 2, 33)],
                    expected_f1),
}


def score(rule: Callable[..., int], params: tuple[float, ...],
          part: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float, float]:
    got = np.array([figures(rule(p, *params), members) for p, members in part])
    return float(got[:, 0].mean()), float(got[:, 1].mean()), float(got[:, 2].mean())


def three(values: tuple[float, float, float]) -> str:
    return " / ".join(f"{v:.3f}" for v in values)


def best_cut(part: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """Mean F1 of each ranking's best cut, chosen with the answers known."""
    return float(np.mean([max(figures(k, m)[2] for k in range(1, len(m) + 1)) for _, m in part]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=Path("/tmp/rag-relevance"),
                    help="fit_relevance's scratch home (indexes and cached features)")
    args = ap.parse_args()
    fr = load_fit_relevance()
    rels: dict[str, Any] = {}
    for _, _, index in fr.RUNS:
        if index not in rels:
            settings = fr.settings_for(index, args.home, None)
            fr.ensure_index(settings)
            rels[index] = fr.relevance_for(settings)
    items = fr.extracted(rels, args.home / "fit-relevance-features.pickle")
    sents: list[dict[str, Any]] = []
    for index, rel in rels.items():
        sents += fr.sentence_data(rel, [it for it in items if it["index"] == index])
    # sets every question's paper_probs: out-of-fold for fit questions, as thresholds see them
    models = fr.fit_models(rels, items, [it for it in items if it["split"] == "fit"],
                           [s for s in sents if s["split"] == "fit"])
    lists = {(c, s): [ranked(it) for it in items if it["list"] and it["relevant"]
                      and it["corpus"] == c and it["split"] == s] for c in CORPORA for s in SPLITS}
    lists = {key: [(p, m) for p, m in part if m.any()] for key, part in lists.items()}
    print(f"shipped recipe's bound: {models['member']['threshold']:.2f}; list questions: "
          + ", ".join(f"{c} {s} {len(part)}" for (c, s), part in lists.items()))
    print(f"\n{'rule':<13}{'chosen on':<17}{'parameters':<16}"
          + "".join(f"{c + ' ' + s + ' R / P / F1':>28}" for c in CORPORA for s in SPLITS))
    for name, (grid, rule) in RULES.items():
        for chosen_on in (CORPORA, ("seeds",), ("pubmedqa",)):
            def mean_f1(params: tuple[float, ...], on: tuple[str, ...] = chosen_on,
                        r: Callable[..., int] = rule) -> float:
                return float(np.mean([score(r, params, lists[(c, "fit")])[2] for c in on]))

            best = max(grid, key=mean_f1)
            cells = "".join(f"{three(score(rule, best, lists[(c, s)])):>28}"
                            for c in CORPORA for s in SPLITS)
            params = ", ".join(f"{x:.2f}" for x in best)
            print(f"{name:<13}{'+'.join(chosen_on):<17}{params:<16}{cells}")
    oracle = "".join(f"{'F1 ' + format(best_cut(lists[(c, s)]), '.3f'):>28}"
                     for c in CORPORA for s in SPLITS)
    print(f"{'oracle cut':<46}{oracle}")


if __name__ == "__main__":
    main()
