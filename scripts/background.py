"""Write rag/relevance/background.json: what the corpora the relevance models were fitted on
look like to the features that compare a question with the rest of its index.

    nice -n 10 .venv/bin/python scripts/background.py [--home /tmp/rag-relevance]
        [--scifact-home DIR] [--write]

Uses (and builds, if missing) the indexes scripts/fit_relevance.py fits on: seeds/, 500
PubMedQA abstracts and SciFact's 5,183. Records, over the three together, how many papers
contain each content word (document frequencies, words in fewer than MIN_DF papers left
out: they count as in none, an IDF at most log(MIN_DF) off), and per corpus what is normal
in it (rag.relevance.stats.IndexStats: how close a pseudo-question's best sentence is to its
own paper, to the closest other one, to any other one), with their mean over the corpora.

Why: the relevance features weigh a question's words by their IDF in the index asked, and
measure a sentence's cosine against what is normal in that index. In an index smaller than
any the models were fitted on, both mean something else: in an index of one paper every
question word its abstract lacks ("much", "faster") gets the largest IDF, and there is no
other paper to measure "normal" with, so half of what such an index plainly says was
declined (benchmarks/small_indexes.py). There the index is made up to the size of the
smallest fitted one with this background (rag.relevance.Relevance.stats).

Data: PubMedQA (Jin et al. 2019, MIT licence) and SciFact (Wadden et al. 2020, abstracts
ODC-By 1.0) from ../shared/benchmarks/.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from fit_relevance import ensure_index, relevance_for, settings_for  # noqa: E402

OUT = ROOT / "rag" / "relevance" / "background.json"
INDEXES = ("default", "pubmedqa", "scifact")
STATS = ("bg_mean", "bg_std", "top_mean", "top_std", "self_mean", "self_std")
MIN_DF = 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, default=Path("/tmp/rag-relevance"))
    ap.add_argument("--scifact-home", type=Path)
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = ap.parse_args()
    df: dict[str, int] = {}
    corpora = {}
    for index in INDEXES:
        settings = settings_for(index, args.home, args.scifact_home)
        ensure_index(settings)
        st = relevance_for(settings).stats()
        corpora[index] = {"papers": st.papers, **{k: round(getattr(st, k), 4) for k in STATS}}
        for term, n in st.df.items():
            df[term] = df.get(term, 0) + n
        print(f"{index:<9} {corpora[index]}")
    papers = sum(c["papers"] for c in corpora.values())
    prior = {k: round(sum(c[k] for c in corpora.values()) / len(corpora), 4) for k in STATS}
    kept = {t: n for t, n in sorted(df.items()) if n >= MIN_DF}
    print(f"mean      {prior}\n{papers} papers; {len(df)} words, {len(kept)} in at least {MIN_DF}")
    if args.write:
        out = {"by": "scripts/background.py", "papers": papers, "stats": prior,
               "corpora": corpora, "min_df": MIN_DF, "df": kept}
        OUT.write_text(json.dumps(out, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
