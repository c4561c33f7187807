"""Late chunking: sentence vectors pooled from the chunk pass's token states, against today's
sentence vectors (each sentence read alone). Prints a table; not a test.

    .venv/bin/python benchmarks/late_chunking.py [--docs N] [--precision int8|fp32]
    .venv/bin/python benchmarks/late_chunking.py --build HOME [--contrast W]

(--build: the indexes scripts/fit_relevance.py reads, with late-chunked sentence vectors, for
a refit and `rag eval` on them; docs/evaluation-history.md, "Late chunking".)

Ingest reads every abstract twice: once as chunks ("Title. sentences ..." up to the chunk
size) and once sentence by sentence, for the judge and the relevance models. Late chunking
(Günther et al. 2024, "Late Chunking: Contextual Chunk Embeddings Using Long-Context
Embedding Models") reads the chunks only and takes a sentence's vector as the normalised mean
of the chunk's output token states over that sentence's tokens: half the tokens. What it
costs is measured where sentence vectors decide something, on SciFact's training claims
(Wadden et al. 2020; ODC-By 1.0 / CC BY 4.0, ../shared/benchmarks/scifact/):

  rationale@1   for a claim with rationale sentences in a cited abstract, the abstract's
                sentence most similar to the claim is one of them (the judge's and the
                relevance models' best-sentence pick)
  AUC           best-sentence cosine, (claim, cited abstract): abstracts with a SUPPORT
                rationale against cited abstracts of claims with no evidence (the judge's
                cosine half, as benchmarks/judge_calibration.py pairs them)
  sentence MRR  the claim against every sentence of the sampled abstracts: reciprocal rank of
                its first rationale sentence
  model s       the model's seconds for the texts each way, alternating, in this process

With --contrast W ..., also pooled vectors less W times their chunk's mean state (which gives
back what sets a sentence apart from its chunk's topic). SciFact only reports such a weight:
choosing one here would tune it on the corpus it is reported on.

Chunks here are the abstract's SciFact sentences packed greedily under the chunk size with the
title in front (rag's splitter also overlaps chunks by 30 tokens; a sentence in two chunks
would take the first). Only the training split is read.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
from _bench import ROOT, SCIFACT
from judge_calibration import roc_auc

sys.path.insert(0, str(ROOT))


def load(docs: int, seed: int) -> tuple[list[dict], dict[int, dict]]:
    claims = [json.loads(line) for line in (SCIFACT / "claims_train.jsonl").open(encoding="utf-8")]
    cited = sorted({d for c in claims for d in c["cited_doc_ids"]})
    corpus = {}
    for line in (SCIFACT / "corpus_sentences.jsonl").open(encoding="utf-8"):
        d = json.loads(line)
        corpus[int(d.get("doc_id", d.get("id")))] = d
    keep = set(random.Random(seed).sample(cited, min(docs, len(cited)))) if docs else set(cited)
    return claims, {d: corpus[d] for d in keep if d in corpus}


def pack(title: str, sentences: list[str], tok, size: int) -> list[tuple[str, list[tuple[int, int, int]]]]:
    """Chunks as (text, [(sentence index, start char, end char)]), the title first in each."""
    chunks, current, used = [], [], 0
    head = len(tok.encode(f"{title}. ", add_special_tokens=False).ids)
    for i, s in enumerate(sentences):
        n = len(tok.encode(s, add_special_tokens=False).ids)
        if current and head + used + n > size:
            chunks.append(current)
            current, used = [], 0
        current.append(i)
        used += n
    if current:
        chunks.append(current)
    out = []
    for idx in chunks:
        text, spans = f"{title}. ", []
        for i in idx:
            spans.append((i, len(text), len(text) + len(sentences[i])))
            text += sentences[i] + " "
        out.append((text.rstrip(), spans))
    return out


def late_vectors(embedder, chunks: list[tuple[str, list[tuple[int, int, int]]]], n_sent: int,
                 batch: int = 32, done: np.ndarray | None = None,
                 whole_out: np.ndarray | None = None, truncated_mean: bool = True
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Each sentence's vector from the token states of the first chunk holding it, and the
    unit mean of that chunk's token states (its context). A sentence no chunk holds keeps a
    zero row (`done` says which have one), as does one truncated away unless `truncated_mean`
    gives it the chunk's mean; `whole_out` gets each chunk's own vector (the mean of
    all its states, as rag.embed.onnx.Embedder pools it) when given."""
    encs = embedder.tokenizer.encode_batch([t for t, _ in chunks])
    out = np.zeros((n_sent, 384), np.float32)
    context = np.zeros((n_sent, 384), np.float32)
    done = np.zeros(n_sent, bool) if done is None else done
    order = sorted(range(len(chunks)), key=lambda i: len(encs[i].ids))
    for start in range(0, len(order), batch):
        idx = order[start : start + batch]
        width = max(len(encs[i].ids) for i in idx)
        ids = np.zeros((len(idx), width), np.int64)
        mask = np.zeros_like(ids)
        for r, i in enumerate(idx):
            ids[r, : len(encs[i].ids)] = encs[i].ids
            mask[r, : len(encs[i].ids)] = 1
        hidden = embedder.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(ids)})[0]
        for r, i in enumerate(idx):
            offsets = np.array(encs[i].offsets)
            special = np.array(encs[i].special_tokens_mask, bool)
            whole = hidden[r, : len(encs[i].ids)][~special].mean(0)
            whole /= max(np.linalg.norm(whole), 1e-12)
            if whole_out is not None:
                own = hidden[r, : len(encs[i].ids)].mean(0)
                whole_out[i] = own / max(np.linalg.norm(own), 1e-12)
            for s, a, b in chunks[i][1]:
                if done[s]:
                    continue
                sel = (~special) & (offsets[:, 0] >= a) & (offsets[:, 1] <= b) & (offsets[:, 1] > offsets[:, 0])
                if not sel.any():  # truncated away: the chunk's mean, or read alone later
                    if not truncated_mean:
                        continue
                    sel = ~special
                v = hidden[r, : len(encs[i].ids)][sel].mean(0)
                out[s] = v / max(np.linalg.norm(v), 1e-12)
                context[s] = whole
                done[s] = True
    return out, context


def build(home: Path, contrast: float) -> None:
    """The three indexes scripts/fit_relevance.py reads (seeds/ as `default`, PubMedQA,
    SciFact), built under `home` by rag's own ingest with its sentence vectors made by late
    chunking: the model reads each chunk ("Title. chunk", as rag embeds it) once, which gives
    the chunk's vector as always, and each sentence's vector is the mean of its tokens' states
    in the first chunk that holds it (less `contrast` times the chunk's mean state); a sentence
    no chunk holds verbatim is read alone. Only this process's ingest is changed."""
    import rag.ingest as ingest_module
    from rag.config import Settings

    sys.path.insert(0, str(ROOT / "scripts"))
    from fit_relevance import CORPORA

    original = ingest_module._embed_group

    def late_group(group, sentences, weights, embedder, batch, bar):
        if any(weights[p.paper_id] is not None for p, _ in group):  # pooled chunk vectors
            return original(group, sentences, weights, embedder, batch, bar)
        chunks, first = [], []
        n = 0
        for paper, cs in group:
            first.append(n)
            sents = sentences[paper.paper_id]
            for c in cs:
                text = ingest_module.embed_text(paper, c)
                at, spans = len(text) - len(c.text), []
                for k, sent in enumerate(sents):
                    where = text.find(sent, at)
                    if where >= 0:
                        spans.append((n + k, where, where + len(sent)))
                chunks.append((text, spans))
            n += len(sents)
        done = np.zeros(n, bool)
        whole = np.zeros((len(chunks), 384), np.float32)
        late, context = late_vectors(embedder, chunks, n, batch, done, whole, truncated_mean=False)
        if contrast:
            late = late - contrast * context
            late /= np.clip(np.linalg.norm(late, axis=1, keepdims=True), 1e-12, None)
        alone = [i for i in range(n) if not done[i]]
        flat = [s for p, _ in group for s in sentences[p.paper_id]]
        if alone:
            late[alone] = embedder.embed([flat[i] for i in alone], batch)
        if bar:
            bar(len(chunks) + n)
        rows, sent_rows, at = [], [], 0
        for (paper, cs), f in zip(group, first, strict=True):
            rows.append((paper, cs, whole[at : at + len(cs)]))
            at += len(cs)
            sents = sentences[paper.paper_id]
            sent_rows.append((paper.paper_id, sents, late[f : f + len(sents)]))
        return rows, sent_rows

    ingest_module._embed_group = late_group
    for index in ("default", "pubmedqa", "scifact"):
        settings = Settings(home=home, index=index, seeds=ROOT / "seeds", llm="none")
        started = time.perf_counter()
        report = ingest_module.ingest([CORPORA[index]], settings, show_progress=False)
        print(f"{index}: {report.papers} papers, {report.chunks} chunks, {report.sentences} "
              f"sentences embedded in {time.perf_counter() - started:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=0, help="cited abstracts to sample (0: all)")
    ap.add_argument("--precision", default="int8", choices=["int8", "fp32"])
    ap.add_argument("--chunk-size", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--contrast", type=float, nargs="*", default=[],
                    help="also: late vector minus this multiple of its chunk's mean state")
    ap.add_argument("--build", type=Path, metavar="HOME",
                    help="instead: build the indexes of scripts/fit_relevance.py under HOME with "
                         "late-chunked sentence vectors (less --contrast's first weight times "
                         "the chunk's mean state, if given)")
    args = ap.parse_args()
    if args.build:
        build(args.build, args.contrast[0] if args.contrast else 0.0)
        return

    from rag.config import Settings
    from rag.embed.onnx import get_embedder

    settings = Settings()
    emb = get_embedder(settings.model_cache, settings.embed_threads, precision=args.precision)
    claims, docs = load(args.docs, args.seed)
    ids = sorted(docs)
    sent_of: dict[int, tuple[int, int]] = {}  # doc -> (first row, count)
    all_sents: list[str] = []
    all_chunks: list[tuple[str, list[tuple[int, int, int]]]] = []
    for d in ids:
        sents = [s.strip() for s in docs[d]["abstract"]]
        sent_of[d] = (len(all_sents), len(sents))
        for text, spans in pack(docs[d]["title"], sents, emb.tokenizer, args.chunk_size):
            all_chunks.append((text, [(len(all_sents) + i, a, b) for i, a, b in spans]))
        all_sents += sents
    chunk_texts = [t for t, _ in all_chunks]
    tokens = {"chunks": sum(len(e.ids) for e in emb.tokenizer.encode_batch(chunk_texts)),
              "sentences": sum(len(e.ids) for e in emb.tokenizer.encode_batch(all_sents))}

    times = {"alone": 0.0, "late": 0.0}
    for _ in range(2):  # alternating, the second round counts
        t = time.perf_counter()
        emb._embed(chunk_texts, 32, None)
        alone = emb._embed(all_sents, 32, None)
        times["alone"] = time.perf_counter() - t
        t = time.perf_counter()
        late, context = late_vectors(emb, all_chunks, len(all_sents))
        times["late"] = time.perf_counter() - t

    claim_texts = [c["claim"] for c in claims]
    cv = emb._embed(claim_texts, 32, None)
    results = {}
    variants = [("alone", alone), ("late", late)]
    for lam in args.contrast:
        v = late - lam * context
        variants.append((f"late - {lam:g} x chunk", v / np.linalg.norm(v, axis=1, keepdims=True)))
    for name, vecs in variants:
        hits, pair_scores, pair_labels, rr = [], [], [], []
        for c, q in zip(claims, cv, strict=True):
            for d in c["cited_doc_ids"]:
                if d not in sent_of:
                    continue
                first, n = sent_of[d]
                sims = vecs[first : first + n] @ q
                ev = c["evidence"].get(str(d))
                if ev:
                    rationale = {s for e in ev for s in e["sentences"]}
                    hits.append(int(np.argmax(sims)) in rationale)
                    order = np.argsort(-(vecs @ q))
                    target = {first + s for s in rationale}
                    rank = next(k for k, row in enumerate(order) if row in target)
                    rr.append(1.0 / (rank + 1))
                    if any(e["label"] == "SUPPORT" for e in ev):
                        pair_scores.append(float(sims.max()))
                        pair_labels.append(True)
                elif not c["evidence"]:
                    pair_scores.append(float(sims.max()))
                    pair_labels.append(False)
        own = []  # does the vector still pick out its own sentence among its abstract's ones?
        for d in ids:
            first, n = sent_of[d]
            sim = vecs[first : first + n] @ alone[first : first + n].T
            own += list(np.argmax(sim, axis=1) == np.arange(n))
        results[name] = {"rationale@1": float(np.mean(hits)), "n_hits": len(hits), "own": float(np.mean(own)),
                         "auc": roc_auc(np.array(pair_scores), np.array(pair_labels)),
                         "n_pairs": len(pair_scores), "mrr": float(np.mean(rr))}

    print(f"SciFact training claims; {len(ids)} cited abstracts, {len(all_sents)} sentences, "
          f"{len(all_chunks)} chunks; model {args.precision}, chunk size {args.chunk_size}")
    print(f"model tokens per abstract: today {(tokens['chunks'] + tokens['sentences']) / len(ids):.0f} "
          f"(chunks {tokens['chunks'] / len(ids):.0f} + sentences {tokens['sentences'] / len(ids):.0f}), "
          f"late chunking {tokens['chunks'] / len(ids):.0f}")
    print(f"\n| sentence vectors | rationale@1 (n={results['alone']['n_hits']}) | "
          f"AUC (n={results['alone']['n_pairs']}) | sentence MRR | own sentence nearest | model s | speed |")
    print("|---|---|---|---|---|---|---|")
    for name, _ in variants:
        r = results[name]
        t = times["late" if name != "alone" else "alone"]
        print(f"| {name} | {r['rationale@1']:.3f} | {r['auc']:.3f} | {r['mrr']:.3f} | {r['own']:.3f} | "
              f"{t:.1f} | {times['alone'] / t:.2f}x |")


if __name__ == "__main__":
    main()
