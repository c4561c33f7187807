"""Fit the answer-relevance check (rag/relevance/addresses.json): does a sentence address what
the question asks?

    nice -n 10 .venv/bin/python scripts/fit_addresses.py [--home /tmp/rag-relevance]
        [--data ../shared/benchmarks] [--write] [--transfer] [--resample N] [--report]

Uses the indexes and the extracted questions of scripts/fit_relevance.py (the same --home;
built there when missing; run it first when its models change: the answers below are its
models'). Three kinds of labelled (question, sentence) pairs, each with its question's split:

- drawn from the labelled sets: an answerable fact question with each sentence of a paper that
  answers it holding one of its facts (PubMedQA: a conclusion sentence; SciFact: a rationale
  sentence; a blind set: its `answer_sentence`): addresses it; with the answering paper's other
  sentences nearest in meaning (not in PubMedQA, whose results answer as well as its
  conclusions) and with the sentence nearest in meaning of each of the two best papers that do
  not answer it: does not. An unanswerable question (a near miss, off-topic, one corpus's
  question asked of the other's index) with the two sentences nearest in meaning of each of its
  two best papers: none addresses it;
- answered: what the offline answerer (`rag ask --llm none`, the check off) quotes for the
  fact and unanswerable questions of the sets in ANSWERED: a quote for an unanswerable question
  does not address it, one holding an answerable question's fact does (other quotes are left
  out: nobody labelled them);
- labelled by hand (evals/relevance/pairs.jsonl): what the offline answerer showed on
  2026-11-27, each label given by reading; those from CHECKED_FROM on were drawn from answers
  the check had already filtered, and are reported, never fitted on.

A logistic regression over rag.relevance.addresses.FEATURES (numpy; L2 by 5-fold
cross-validation over questions; each corpus, and within it each label, weighs the same), on
the fit split's pairs. Its bound is chosen on the answered fit questions, as the check is used
(an answer is kept when one of its quotes reaches the bound): the highest at which, in every
corpus (a blind set with its corpus), at most MAX_REJECTED of the answerable questions lose
every quote that holds their answer, from out-of-fold probabilities (the answer model's bound on false abstention). Prints precision and recall of "addresses" per corpus, split and
kind of pair, and those two shares per corpus and split; `--transfer`: each corpus left out of
the fit (model and bound); `--resample N`: the held-out figures over N refits on 80% of the
fit questions. `--write` stores the model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import fit_relevance as fr  # noqa: E402

from rag.relevance.addresses import FEATURES, AnswerRelevance  # noqa: E402
from rag.relevance.features import Model  # noqa: E402

PAIRS = ROOT / "evals" / "relevance" / "pairs.jsonl"
OUT = ROOT / "rag" / "relevance" / "addresses.json"
MAX_REJECTED = fr.FALSE_ABSTENTION
# Hand-labelled pairs from this one on were drawn from answers the check had already passed or
# turned into abstentions: what they hold depends on the check, so they measure it and are
# never fitted on (their kind is "checked").
CHECKED_FROM = 322
NEAREST = 2  # sentences of each of the best papers paired with a question they do not answer
CORPUS_OF_SET = {s: c for c, s, _ in fr.RUNS}
INDEX_OF_SET = {s: i for _, s, i in fr.RUNS}
# (set, questions drawn (0: all)) answered offline for the `answered` pairs
ANSWERED = [("evals/questions.yaml", 0), ("evals/blind/seeds-a.yaml", 0), ("evals/blind/seeds-b.yaml", 0),
            ("evals/blind/scifact-c.yaml", 0), ("evals/blind/pubmedqa-d.yaml", 0),
            ("evals/pubmedqa/questions.yaml", 120), ("evals/scifact/questions.yaml", 120),
            ("evals/cross/seeds-on-pubmedqa.yaml", 80), ("evals/cross/pubmedqa-on-seeds.yaml", 80)]


# -- pairs --------------------------------------------------------------------------------


def drawn(rel: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pairs drawn from labelled questions (see the module docstring), unscored."""
    out = []
    for it in items:
        if it["list"] or it["kind"] in ("metadata", "followup") or it["id"].endswith("~without-own"):
            continue
        papers = {h.paper.paper_id: h.paper for h in it["hits"]}
        # the sentence vectors stored at ingest, not embedded again
        rel.prime([h.paper for h in it["hits"][:3]] + [papers[p] for p in it["relevant"] if p in papers])
        qvec = rel.retriever.embed_query(it["question"])
        pairs: list[tuple[str, Any, bool]] = []
        if it["relevant"]:
            for pid in it["relevant"]:
                if pid in papers:
                    sents, _ = rel.judge.sentences(papers[pid].abstract)
                    pairs += [(s, papers[pid], True) for s in sents if holds_answer(it, s)]
            if not pairs:
                continue  # no sentence holds a fact (a metadata fact, a title): nothing to learn
            # the answering paper's other sentences nearest the question: faithful, about the
            # paper asked of, and saying something else. Not in PubMedQA: its abstracts' results
            # answer the question as well as the conclusion the labels name.
            gold = {s for s, _, _ in pairs}
            for pid in {p.paper_id for _, p, _ in pairs} if not it["corpus"].startswith("pubmedqa") else ():
                pairs += [(s, papers[pid], False) for s in nearest(rel, qvec, papers[pid], NEAREST + 1)
                          if s not in gold][:NEAREST]
            others = [h.paper for h in it["hits"] if h.paper.paper_id not in it["relevant"]][:2]
            pairs += [(s, p, False) for p in others for s in nearest(rel, qvec, p, 1)]
        else:
            pairs += [(s, h.paper, False) for h in it["hits"][:2] for s in nearest(rel, qvec, h.paper, NEAREST)]
        out += [pair(it["id"], it["corpus"], it["split"], it["question"], s, p, label, "drawn", it["index"])
                for s, p, label in pairs]
    return out


def pair(qid: str, corpus: str, split: str, question: str, sentence: str, paper: Any, label: bool,
         kind: str, index: str) -> dict[str, Any]:
    return {"key": qid + corpus, "corpus": corpus, "split": split, "question": question,
            "sentence": sentence, "paper": paper, "label": label, "kind": kind, "index": index}


def holds_answer(it: dict[str, Any], sentence: str) -> bool:
    """Whether `sentence` answers the labelled question `it` (a blind set's answer sentence, or
    one holding a fact: rationale and conclusion sentences whole, seeds/ facts as substrings)."""
    answer = it.get("answer_sentence")
    if answer:
        return fr._is_answer("blind", sentence, [answer])
    return bool(it["facts"]) and fr._is_answer(it["corpus"].removesuffix("-blind"), sentence, it["facts"])


def nearest(rel: Any, qvec: np.ndarray, paper: Any, n: int) -> list[str]:
    sents, vecs = rel.judge.sentences(paper.abstract)
    return [sents[i] for i in np.argsort(-(vecs @ qvec))[:n]]


def hand_labelled(rels: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for line in PAIRS.read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        index = INDEX_OF_SET[d["set"]]
        paper = rels[index].retriever.snapshot().papers[d["paper"]]
        corpus = CORPUS_OF_SET[d["set"]]
        qid = f"{Path(d['set']).stem}/{d['question_id']}" if corpus.endswith("-blind") else d["question_id"]
        kind = "checked" if int(d["id"].removeprefix("rp-")) >= CHECKED_FROM else "hand"
        out.append(pair(qid, corpus, d["split"], d["question"], d["sentence"], paper, bool(d["addresses"]),
                        kind, index))
    return out


def answered(home: Path, scifact_home: Path | None, cache: Path) -> list[dict[str, Any]]:
    """The offline answerer's quotes for the questions of ANSWERED, the check off, labelled
    where the labels say (see the module docstring); kept in `cache` while the code, the
    fitted relevance models and the sets are unchanged."""
    from rag.eval.sets import load_set
    from rag.question.patterns import is_list_question

    files = [p for p in sorted((ROOT / "rag").rglob("*.py")) if p.name != "addresses.py"]
    files += [ROOT / "rag" / "relevance" / "params.json"] + [ROOT / s for s, _ in ANSWERED]
    key = hashlib.sha1(b"".join(p.read_bytes() for p in files)).hexdigest()
    try:
        with cache.open("rb") as fh:
            stored, rows = pickle.load(fh)
        if stored == key:
            return rows  # type: ignore[no-any-return]
    except (OSError, ValueError, EOFError, pickle.UnpicklingError):
        pass
    rows = []
    for set_path, sample in ANSWERED:
        corpus, index = CORPUS_OF_SET[set_path], INDEX_OF_SET[set_path]
        questions = [q for q in load_set(ROOT / set_path) if q.kind in ("fact", "unanswerable")
                     and not is_list_question(q.turns[0])]
        if sample:
            questions = random.Random(5).sample(questions, min(sample, len(questions)))
        t0 = time.perf_counter()
        with _pipeline(fr.settings_for(index, home, scifact_home)) as pipeline:
            papers = {p.paper_id: p for p in pipeline.retriever.papers()}
            refs = fr.resolve_refs(questions, list(papers.values()), ROOT / set_path, index)
            for q in questions:
                it = {"facts": q.facts, "answer_sentence": q.answer_sentence, "corpus": corpus}
                qid = f"{Path(set_path).stem}/{q.id}" if corpus.endswith("-blind") else q.id
                ans = pipeline.answer(q.turns[0])
                if ans.abstained:
                    continue
                relevant = {refs[r] for r in q.papers}
                for s in ans.sentences:
                    for n in s.citations[:1]:
                        paper = ans.sources[n - 1].paper
                        text = AnswerRelevance.plain(s.text, paper)
                        label = False if q.kind == "unanswerable" else (
                            True if paper.paper_id in relevant and holds_answer(it, text) else None)
                        if label is not None:
                            rows.append(pair(qid, corpus, q.split, q.turns[0], text, paper, label,
                                             "answered", index))
        print(f"{set_path}: {len(questions)} questions answered offline, {time.perf_counter() - t0:.0f} s",
              file=sys.stderr)
    with cache.open("wb") as fh:
        pickle.dump((key, rows), fh)
    return rows


def _pipeline(settings: Any) -> Any:
    """The offline pipeline with the check passing every sentence (the model may not exist yet)."""
    import rag.relevance.addresses as addresses
    from rag.answering import Pipeline

    names = ("cos",)
    passing = Model(names, np.zeros(1), np.ones(1), np.zeros(1), 0.0, 0.0, 0.0)
    shipped = addresses.load_model
    addresses.load_model = lambda path=None: passing  # type: ignore[assignment]
    try:
        return Pipeline(settings)
    finally:
        addresses.load_model = shipped  # type: ignore[assignment]


def with_rows(rels: dict[str, Any], pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pairs the check judges, each with its features (`row`)."""
    check = {i: AnswerRelevance(rel, None) for i, rel in rels.items()}  # type: ignore[arg-type]
    kept = []
    for p in pairs:
        rows = check[p["index"]].rows(p["question"], [p["sentence"]], p["paper"])
        if rows is not None:
            kept.append({**p, "row": rows[0]})
    return kept


# -- the model and its bound --------------------------------------------------------------


def fit_data(pairs: list[dict[str, Any]]) -> tuple[list[dict[str, float]], list[float], list[float], list[str]]:
    """Rows, labels, weights (each corpus, and within it each label, weighs the same), groups."""
    count: dict[tuple[str, bool], int] = defaultdict(int)
    for p in pairs:
        count[(p["corpus"], p["label"])] += 1
    return ([p["row"] for p in pairs], [float(p["label"]) for p in pairs],
            [1.0 / count[(p["corpus"], p["label"])] for p in pairs], [p["key"] for p in pairs])


def out_of_fold(pairs: list[dict[str, Any]], l2: float) -> np.ndarray:
    """What a model fitted without each pair's question's fold (5 folds) says of it."""
    keys = sorted({p["key"] for p in pairs})
    fold = {k: i % 5 for i, k in enumerate(np.random.default_rng(12).permutation(keys))}
    oof = np.zeros(len(pairs))
    for k in range(5):
        train = [p for p in pairs if fold[p["key"]] != k]
        m = fr.fit_model(FEATURES, *fit_data(train), l2=l2)
        idx = [i for i, p in enumerate(pairs) if fold[p["key"]] == k]
        oof[idx] = fr.probs(m, [pairs[i]["row"] for i in idx])
    return oof


def fit(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """The model and its bound, from these (fit) pairs."""
    model = fr.fit_model(FEATURES, *fit_data(pairs))
    model["threshold"] = bound(out_of_fold(pairs, model["l2"]), pairs)
    return model


def print_curve(pairs: list[dict[str, Any]], l2: float) -> None:
    """Per bound, out-of-fold on the fit questions: each corpus's answerable answers kept and
    unanswerable ones suppressed (the trade the bound picks)."""
    outcomes = question_outcomes(out_of_fold(pairs, l2), pairs)
    corpora = sorted({c for c, _ in outcomes})
    print("\nfit questions answered offline, out-of-fold, per bound: answerable kept / unanswerable suppressed")
    print(f"{'bound':>6}" + "".join(f"{c:>22}" for c in corpora))
    for t in np.arange(0.05, 0.96, 0.05):
        cells = kept_shares(outcomes, float(t))
        print(f"{t:>6.2f}" + "".join(f"{cells[c][0]:>11.3f}{cells[c][1]:>11.3f}" for c in corpora))


def question_outcomes(p: np.ndarray, pairs: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[bool, np.ndarray]]:
    """(corpus, question) -> (answerable, the probabilities of its quotes that hold its answer,
    or of all its quotes when it is unanswerable), from the `answered` pairs."""
    out: dict[tuple[str, str], tuple[bool, list[float]]] = {}
    for q, pi in zip(pairs, p, strict=True):
        if q["kind"] == "answered":
            ok, vals = out.setdefault((q["corpus"], q["key"]), (q["label"], []))
            vals.append(float(pi))
    return {k: (ok, np.array(v)) for k, (ok, v) in out.items()}


def kept_shares(outcomes: dict[tuple[str, str], tuple[bool, np.ndarray]], t: float) -> dict[str, tuple[float, float, int, int]]:
    """Per corpus: answerable answers kept, unanswerable answers suppressed, and their counts."""
    by: dict[str, tuple[list[bool], list[bool]]] = defaultdict(lambda: ([], []))
    for (corpus, _), (ok, vals) in outcomes.items():
        kept = bool((vals >= t).any())
        by[corpus][0 if ok else 1].append(kept if ok else not kept)
    return {c: (float(np.mean(a)) if a else float("nan"), float(np.mean(u)) if u else float("nan"), len(a), len(u))
            for c, (a, u) in sorted(by.items())}


def bound(p: np.ndarray, pairs: list[dict[str, Any]]) -> float:
    """The highest bound at which, in every corpus, the answerable fit questions that lose
    their answer (every quote holding it rejected) are at most MAX_REJECTED: a rejected answer
    becomes an abstention, so the check is held to the answer model's bound on false
    abstention, per corpus as it is. A blind set counts with the other questions of its corpus
    (one with nine answered questions alone would allow none). Averaged over the corpora
    instead, the bound let the check cost PubMedQA's held-out answers 3.5 points of false
    abstention (0.025 -> 0.060) while SciFact's and seeds/' carried the average."""
    outcomes = question_outcomes(p, pairs)
    answerable: dict[str, list[np.ndarray]] = defaultdict(list)
    for (corpus, _), (ok, vals) in outcomes.items():
        if ok:
            answerable[corpus.removesuffix("-blind")].append(vals)
    best = 0.0
    for t in np.linspace(0.01, 0.98, 98):
        lost = [float(np.mean([not (v >= t).any() for v in vals])) for vals in answerable.values()]
        if lost and max(lost) <= MAX_REJECTED:
            best = float(t)
    return round(best, 2)


# -- figures ------------------------------------------------------------------------------


def figures(model: dict[str, Any], pairs: list[dict[str, Any]]) -> dict[tuple[str, str, str], tuple[float, float, float, int, int]]:
    """(corpus, split, kind of pair) -> precision, recall, accuracy, pairs that address, pairs."""
    m = Model.from_dict(model)
    groups: dict[tuple[str, str, str], list[tuple[bool, bool]]] = defaultdict(list)
    p = m.probabilities([q["row"] for q in pairs])
    for q, pi in zip(pairs, p, strict=True):
        groups[(q["corpus"], q["split"], q["kind"])].append((bool(pi >= m.threshold), q["label"]))
    out = {}
    for key, v in sorted(groups.items()):
        said = [y for s, y in v if s]
        pos = [s for s, y in v if y]
        out[key] = (float(np.mean(said)) if said else float("nan"), float(np.mean(pos)) if pos else float("nan"),
                    float(np.mean([s == y for s, y in v])), len(pos), len(v))
    return out


def print_figures(title: str, model: dict[str, Any], pairs: list[dict[str, Any]]) -> None:
    print(f"\n{title}\n{'corpus':<16}{'split':<9}{'pairs':<10}{'precision':>10}{'recall':>8}{'accuracy':>10}"
          f"{'address':>8}{'n':>6}")
    for (c, s, h), (prec, rec, acc, pos, n) in figures(model, pairs).items():
        print(f"{c:<16}{s:<9}{h:<10}{prec:>10.3f}{rec:>8.3f}{acc:>10.3f}{pos:>8}{n:>6}")
    p = Model.from_dict(model).probabilities([q["row"] for q in pairs])
    print(f"answers through the check at {model['threshold']:.2f}: answerable ones keeping a quote that "
          "holds the answer / unanswerable ones keeping none")
    for split in sorted({q["split"] for q in pairs}):
        part = [i for i, q in enumerate(pairs) if q["split"] == split]
        shares = kept_shares(question_outcomes(p[part], [pairs[i] for i in part]), model["threshold"])
        for c, (a, u, na, nu) in shares.items():
            print(f"  {c:<16}{split:<9}answerable kept {a:.3f} ({na})  unanswerable suppressed {u:.3f} ({nu})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=Path("/tmp/rag-relevance"))
    ap.add_argument("--scifact-home", type=Path)
    ap.add_argument("--data", type=Path, default=fr.SHARED)
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    ap.add_argument("--transfer", action="store_true", help="also fit with each corpus left out")
    ap.add_argument("--resample", type=int, default=0, metavar="N")
    ap.add_argument("--curve", action="store_true", help="also print the fit questions' trade per bound")
    ap.add_argument("--fit-only", action="store_true", help="print the fit split's figures only")
    ap.add_argument("--report", action="store_true",
                    help=f"fit nothing: the shipped {OUT.relative_to(ROOT)} on the hand-labelled pairs")
    args = ap.parse_args()
    started = time.perf_counter()
    fr.CORPORA.update(pubmedqa=args.data / "pubmedqa" / "corpus.jsonl",
                      scifact=args.data / "scifact" / "corpus.jsonl")
    rels: dict[str, Any] = {}
    for _, _, index in fr.RUNS:
        if index not in rels:
            settings = fr.settings_for(index, args.home, args.scifact_home)
            fr.ensure_index(settings)
            rels[index] = fr.relevance_for(settings)
    if args.report:
        shipped = json.loads(OUT.read_text(encoding="utf-8"))["model"]
        hand = with_rows(rels, hand_labelled(rels))
        print_figures(f"shipped {OUT.relative_to(ROOT)} on {PAIRS.relative_to(ROOT)} (hand: fit split "
                      "fitted on; checked: never fitted on)", shipped, hand)
        m = Model.from_dict(shipped)
        for name, part in (("held-out split", [p for p in hand if p["split"] == "heldout" and p["kind"] == "hand"]),
                           ("checked", [p for p in hand if p["kind"] == "checked"])):
            said = m.probabilities([p["row"] for p in part]) >= m.threshold
            y = np.array([p["label"] for p in part])
            print(f"all {name} pairs: precision {y[said].mean():.3f} ({said.sum()}), recall "
                  f"{said[y].mean():.3f} ({y.sum()}), accuracy {(said == y).mean():.3f} ({len(part)})")
        return
    items = fr.extracted(rels, args.home / "fit-relevance-features.pickle")
    pairs: list[dict[str, Any]] = []
    for index, rel in rels.items():
        pairs += drawn(rel, [it for it in items if it["index"] == index])
    pairs += answered(args.home, args.scifact_home, args.home / "fit-addresses-answers.pickle")
    pairs = with_rows(rels, pairs + hand_labelled(rels))
    fit_pairs = [p for p in pairs if p["split"] == "fit" and p["kind"] != "checked"]
    model = fit(fit_pairs)
    top = sorted(zip(model["names"], model["coef"], strict=True), key=lambda t: -abs(t[1]))
    print(f"threshold {model['threshold']:.2f}  l2 {model['l2']}  pairs {model['n']}\n  "
          + ", ".join(f"{n} {c:+.2f}" for n, c in top))
    print_figures("fitted on every corpus's fit pairs (fit: in-sample)", model,
                  fit_pairs if args.fit_only else pairs)
    if args.curve:
        print_curve(fit_pairs, model["l2"])
    if args.transfer:
        for field in ("seeds", "pubmedqa", "scifact"):
            index = {"seeds": "default"}.get(field, field)
            loco = fit([p for p in fit_pairs if p["index"] != index])
            print_figures(f"{field} left out: fitted on the other corpora's fit pairs, shown on "
                          f"{field}'s index (cross: the other field's questions asked of it)", loco,
                          [p for p in pairs if p["split"] == "heldout" and p["index"] == index])
    if args.resample:
        spread: dict[tuple[str, str, str], list[tuple[float, float]]] = defaultdict(list)
        for seed in range(args.resample):
            keys = sorted({p["key"] for p in fit_pairs})
            keep = set(random.Random(seed).sample(keys, round(0.8 * len(keys))))
            m = fit([p for p in fit_pairs if p["key"] in keep])
            for k, v in figures(m, [p for p in pairs if p["split"] == "heldout"]).items():
                spread[k].append((v[0], v[1]))
        print(f"\nrefit noise: held-out precision / recall over {args.resample} refits on 80% of the fit questions")
        for (c, s, h), v in sorted(spread.items()):
            a = np.array(v)
            print(f"{c:<16}{s:<9}{h:<10} precision {np.nanmean(a[:, 0]):.3f} ± {np.nanstd(a[:, 0], ddof=1):.3f}"
                  f"  recall {np.nanmean(a[:, 1]):.3f} ± {np.nanstd(a[:, 1], ddof=1):.3f}")
    if args.write:
        digest = hashlib.sha256(PAIRS.read_bytes()).hexdigest()[:16]
        OUT.write_text(json.dumps({
            "format": 1, "model": model,
            "fitted": {"by": "scripts/fit_addresses.py", "date": time.strftime("%Y-%m-%d"),
                       "pairs": {f"{c} {s} {k}": sum(p["corpus"] == c and p["split"] == s and p["kind"] == k
                                                     for p in pairs)
                                 for c in sorted({p["corpus"] for p in pairs}) for s in ("fit", "heldout")
                                 for k in ("drawn", "answered", "hand")},
                       "hand_labelled": f"{PAIRS.relative_to(ROOT)} sha256:{digest}"}}, indent=1) + "\n",
            encoding="utf-8")
        print(f"wrote {OUT.relative_to(ROOT)}")
    print(f"{time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
