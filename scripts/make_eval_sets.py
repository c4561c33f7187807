"""Write the labelled sets over PubMedQA and SciFact, and the cross-corpus abstention sets.

    .venv/bin/python scripts/make_eval_sets.py [--data ../shared/benchmarks]

Writes (each set with a seeded fit/held-out split, stratified by kind; rag.eval.sets):
- evals/pubmedqa/questions.yaml: the 500 PubMedQA questions (Jin et al. 2019), each answered
  by its own abstract, whose conclusion sentences are the accepted answers (`facts`: one fact,
  any conclusion sentence quoted counts, so fact recall = the conclusion-quote rate); and
  "Which studies are about <MeSH heading>?" lists whose complete sets are the papers NLM's
  indexers gave that heading (topic headings with at least 5 papers; check tags, age groups,
  places, study designs and statistics are not topics a reader asks about, see NOT_TOPICS).
- evals/scifact/questions.yaml: the 505 SciFact training claims with rationale sentences
  (Wadden et al. 2020): papers = the abstracts holding evidence, facts = the rationale
  sentences (any one quoted counts).
- evals/cross/seeds-on-pubmedqa.yaml and evals/cross/pubmedqa-on-seeds.yaml: every question
  of one corpus about its own field (follow-ups and off-topic questions aside: see crossed())
  as an unanswerable question for an index of the other; each keeps the split of the
  question it copies.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag.corpus.text import split_sentences  # noqa: E402
from rag.eval.sets import assign_splits, load_set  # noqa: E402

MIN_LIST = 5  # a topic list has at least this many papers
MIN_WORDS = 4  # a conclusion sentence shorter than this ("Yes.") proves nothing when quoted
# MeSH headings that are not topics: check tags, demographics, places, study designs, statistics
# and the care process. Matched as whole headings or as a word of the heading.
NOT_TOPICS = re.compile(
    r"^(Humans|Animals|Male|Female|Adult|Aged|Aged, 80 and over|Middle Aged|Young Adult|Adolescent|"
    r"Child|Child, Preschool|Infant|Infant, Newborn|Mice|Rats|Dogs|Swine|Rabbits|Cattle|"
    r"United States|United Kingdom|England|Netherlands|Canada|Japan|China|Germany|France|Italy|"
    r"Israel|Australia|Sweden|Taiwan|Spain|Brazil|Switzerland|Turkey|India|Korea|Scotland|"
    r"North Carolina|Time Factors|Age Factors|Sex Factors|Risk Factors|Prognosis|Incidence|"
    r"Prevalence|Recurrence|Registries|Reference Values|Probability|Data Collection|Acute Disease|"
    r"Chronic Disease|Comorbidity|Disease Progression|Treatment Outcome|Health Status|Pilot Projects|"
    r"Random Allocation|Double-Blind Method|Reproducibility of Results|Sensitivity and Specificity|"
    r"Predictive Value of Tests|False Positive Reactions|Confidence Intervals|Odds Ratio|"
    r"Follow-Up Studies|Severity of Illness Index|Patient Selection|Length of Stay|Hospitalization|"
    r"Survival Rate|Survival Analysis|Disease-Free Survival|Patient Satisfaction|Parity|"
    r"Gestational Age|Diagnosis, Differential|Combined Modality Therapy|Internship and Residency|"
    r"Dose-Response Relationship, Drug|Patient Acceptance of Health Care|Clinical Competence|"
    r"Algorithms|Patients|Rats, Wistar|Rats, Sprague-Dawley|Equipment Design|Prosthesis Design|"
    r"Drug Administration Schedule|Hydrogen-Ion Concentration|"
    r"Image Interpretation, Computer-Assisted)$"
    r"|\b(Studies|Analysis|Statistics|Models|Distribution|Questionnaires|Surveys|Ancestry|Group|"
    r"Interviews|Attitude|Attitudes|Practice Patterns|Guidelines|Outcome Assessment|Assessment|"
    r"Socioeconomic|Feasibility|Cost|Costs|Economics)\b", re.I)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _readable(heading: str) -> str:
    """'Tomography, X-Ray Computed' -> 'x-ray computed tomography', 'HIV Infections' -> 'HIV
    infections': MeSH's inverted order undone, acronyms kept."""
    words = " ".join(reversed(heading.split(", "))).split()
    return " ".join(w if re.search(r"[A-Z]{2}|^[A-Z]-", w) else w.lower() for w in words)


def _fact(sentences: list[str]) -> str:
    alts = [s.strip().rstrip(".").replace("|", "/") for s in sentences if len(s.split()) >= MIN_WORDS]
    return "|".join(a for a in alts if a)


def _dump(path: Path, header: str, items: list[dict[str, Any]]) -> None:
    splits = assign_splits([(i["id"], i["kind"]) for i in items], {})
    for item in items:
        item.setdefault("split", splits[item["id"]])
    order = ("id", "kind", "split", "question", "papers", "facts", "near_miss", "note")
    body = yaml.safe_dump([{k: i[k] for k in order if k in i} for i in items], sort_keys=False,
                          allow_unicode=True, width=100)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"# {line}\n".replace("# \n", "#\n") for line in header.splitlines())
                    + "\n" + body, encoding="utf-8")
    load_set(path)
    print(f"{path.relative_to(ROOT)}: {len(items)} questions")


def pubmedqa(data: Path) -> list[dict[str, Any]]:
    corpus = {json.loads(x)["id"]: json.loads(x) for x in (data / "corpus.jsonl").open(encoding="utf-8")}
    items, by_heading = [], {}
    for line in (data / "questions.jsonl").open(encoding="utf-8"):
        q = json.loads(line)
        abstract = corpus[q["paper_id"]]["abstract"]
        quoted = [s for s in split_sentences(q["conclusion"]) if s.strip() in abstract]
        fact = _fact(quoted)
        items.append({"id": f"pubmedqa-{q['id']}", "kind": "fact", "question": q["question"].strip(),
                      "papers": [f"id:{q['paper_id']}"], "facts": [fact] if fact else []})
        for heading in q["mesh"]:
            by_heading.setdefault(heading, []).append(q["paper_id"])
    for heading, ids in sorted(by_heading.items()):
        if len(ids) >= MIN_LIST and not NOT_TOPICS.search(heading):
            items.append({"id": f"mesh-{_slug(heading)}", "kind": "list",
                          "question": f"Which studies are about {_readable(heading)}?",
                          "papers": [f"id:{i}" for i in sorted(ids)],
                          "note": f"MeSH heading '{heading}': every paper NLM's indexers gave it."})
    return items


def scifact(data: Path) -> list[dict[str, Any]]:
    docs = {d["doc_id"]: d for d in map(json.loads, (data / "corpus_sentences.jsonl").open(encoding="utf-8"))}
    items = []
    for line in (data / "claims_train.jsonl").open(encoding="utf-8"):
        c = json.loads(line)
        if not c["evidence"]:
            continue
        rationale = [docs[int(d)]["abstract"][i] for d, evs in c["evidence"].items()
                     for ev in evs for i in ev["sentences"]]
        fact = _fact(rationale)
        items.append({"id": f"scifact-{c['id']}", "kind": "fact", "question": c["claim"].strip(),
                      "papers": [f"id:{d}" for d in c["evidence"]], "facts": [fact] if fact else []})
    return items


def crossed(items: list[dict[str, Any]], origin: str) -> list[dict[str, Any]]:
    """The origin's questions about its own field, as unanswerable for the other index. Left
    out: follow-ups, and the origin's off-topic questions (unanswerable there and not a near
    miss), which were written about other fields and may be answered by the other corpus
    ("Which studies compare laparoscopic with open surgery?" is, by PubMedQA)."""
    return [{"id": f"x-{i['id']}", "kind": "unanswerable", "split": i["split"],
             "question": i["question"], "papers": [], "note": f"from {origin}"}
            for i in items if i["kind"] != "followup" and (i["kind"] != "unanswerable" or i.get("near_miss"))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    args = ap.parse_args()
    evals = ROOT / "evals"
    pm = pubmedqa(args.data / "pubmedqa")
    _dump(evals / "pubmedqa" / "questions.yaml",
          "PubMedQA (Jin et al. 2019, EMNLP; MIT licence): generated by scripts/make_eval_sets.py, do not\n"
          "edit. Run against an index of ../shared/benchmarks/pubmedqa/corpus.jsonl:\n"
          "  rag ingest ../shared/benchmarks/pubmedqa/corpus.jsonl --index pubmedqa\n"
          "  rag eval --set evals/pubmedqa/questions.yaml --index pubmedqa\n"
          "fact: a question, its own abstract, its conclusion sentences (fact recall = quote rate);\n"
          "list: 'Which studies are about <MeSH heading>?', every paper carrying the heading.", pm)
    sf = scifact(args.data / "scifact")
    _dump(evals / "scifact" / "questions.yaml",
          "SciFact training claims with rationale sentences (Wadden et al. 2020; claims CC BY 4.0,\n"
          "abstracts ODC-By 1.0): generated by scripts/make_eval_sets.py, do not edit.\n"
          "  rag ingest ../shared/benchmarks/scifact/corpus.jsonl --index scifact\n"
          "  rag eval --set evals/scifact/questions.yaml --index scifact", sf)
    seeds = [{"id": q.id, "kind": q.kind, "split": q.split, "question": q.turns[0],
              "near_miss": q.near_miss}
             for q in load_set(evals / "questions.yaml")]
    _dump(evals / "cross" / "seeds-on-pubmedqa.yaml",
          "Every question of evals/questions.yaml about its own field (follow-ups and the questions\n"
          "written about other fields aside) asked of the PubMedQA index, where none has an\n"
          "answer: generated by scripts/make_eval_sets.py, do not edit.\n"
          "  rag eval --set evals/cross/seeds-on-pubmedqa.yaml --index pubmedqa",
          crossed(seeds, "evals/questions.yaml"))
    _dump(evals / "cross" / "pubmedqa-on-seeds.yaml",
          "Every PubMedQA question and MeSH list asked of the seeds/ index, where none has an\n"
          "answer: generated by scripts/make_eval_sets.py, do not edit.\n"
          "  rag eval --set evals/cross/pubmedqa-on-seeds.yaml",
          crossed(pm, "evals/pubmedqa/questions.yaml"))


if __name__ == "__main__":
    main()
