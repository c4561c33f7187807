"""The speed-and-scale plot of the documentation, drawn from benchmarks/figures.json.

Four panels: GET /search latency and `rag serve`'s memory by corpus size, ingest throughput,
and HNSW recall@10 by ef_search. The figures are those the benchmarks/ scripts printed; update
them in benchmarks/figures.json when you measure again, then:

    .venv/bin/python scripts/plot_speed.py [--data benchmarks/figures.json] [--out docs/images/speed-and-scale.png]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def plot(figures: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.spines.top": False, "axes.spines.right": False})
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.6))
    (lat, mem), (ing, rec) = axes

    rows = figures["search_latency_ms"]
    for key, style in (("p50", "o-"), ("p95", "s--")):
        pts = [(r["abstracts"], r[key]) for r in rows if r[key] is not None]
        lat.plot(*zip(*pts, strict=True), style, label=key)
    for r in rows:  # under the lower line, where it does not cross the upper one
        lat.annotate(r["corpus"], (r["abstracts"], r["p50"] or r["p95"]), textcoords="offset points",
                     xytext=(0, -14), ha="center", fontsize=8)
    lat.set(xscale="log", title="GET /search, warm server", xlabel="abstracts in the index",
            ylabel="ms", ylim=(0, max(r["p95"] for r in rows) * 1.3))
    lat.legend(frameon=False)

    rows = figures["serve_memory_mb"]
    mem.plot([r["abstracts"] for r in rows], [r["mb"] for r in rows], "o-", color="tab:purple")
    for r in rows:
        mem.annotate(f"{r['mb']:,} MB", (r["abstracts"], r["mb"]), textcoords="offset points",
                     xytext=(0, 7), ha="center", fontsize=8)
    mem.set(xscale="log", title="rag serve, resident memory", xlabel="abstracts in the index",
            ylabel="MB", ylim=(0, max(r["mb"] for r in rows) * 1.2))

    rows = figures["ingest_abstracts_per_s"]
    colours = ["tab:green" if r["device"] == "gpu" else "tab:blue" for r in rows]
    bars = ing.bar(range(len(rows)), [r["rate"] for r in rows], color=colours)
    spread = [(i, r) for i, r in enumerate(rows) if "low" in r]  # a range of runs
    if spread:
        ing.errorbar([i for i, _ in spread], [r["rate"] for _, r in spread], fmt="none",
                     yerr=[[r["rate"] - r["low"] for _, r in spread], [r["high"] - r["rate"] for _, r in spread]],
                     ecolor="black", capsize=3, linewidth=1)
    labels = [f"{r['low']:g}–{r['high']:g}" if "low" in r else f"{r['rate']:g}" for r in rows]
    ing.bar_label(bars, labels=labels, padding=8, fontsize=8)
    ing.set_xticks(range(len(rows)), [r["what"] for r in rows], fontsize=8)
    ing.set(title="Ingest (blue: 2 CPU cores; green: one GPU)", ylabel="abstracts / s",
            ylim=(0, max(r.get("high", r["rate"]) for r in rows) * 1.2))

    for r, style in zip(figures["hnsw_recall_at_10"], ("o-", "s--"), strict=False):
        rec.plot(r["ef_search"], r["recall"], style, label=r["collection"])
    targets = figures["targets"]
    rec.axhline(targets["hnsw_recall"], color="grey", linewidth=0.8, linestyle=":")
    rec.annotate(f"target {targets['hnsw_recall']}", (10, targets["hnsw_recall"]),
                 textcoords="offset points", xytext=(2, 3), fontsize=8, color="grey")
    rec.axvline(targets["rag_ef_search"], color="grey", linewidth=0.8, linestyle=":")
    rec.annotate("rag's ef_search", (targets["rag_ef_search"], 0.86), textcoords="offset points",
                 xytext=(-4, 0), ha="right", fontsize=8, color="grey")
    rec.set(xscale="log", title="HNSW recall@10 against exact search", xlabel="ef_search",
            ylabel="recall@10", ylim=(0.85, 1.005))
    steps = sorted({e for r in figures["hnsw_recall_at_10"] for e in r["ef_search"]})
    rec.set_xticks(steps, [str(e) for e in steps])
    rec.minorticks_off()
    rec.legend(frameon=False, fontsize=8, loc="center right")

    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, metadata={"Software": None})  # the same file for the same figures
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT / "benchmarks" / "figures.json")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "speed-and-scale.png")
    args = ap.parse_args()
    plot(json.loads(args.data.read_text()), args.out)
    print(f"{args.out}: {args.out.stat().st_size / 1000:.0f} kB")


if __name__ == "__main__":
    main()
