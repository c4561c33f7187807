"""`rag eval`: run a question set through the same pipeline as `rag ask`, and score it.

Loads and validates a set (rag.eval.sets; evals/README.md documents the format), resolves
its paper references against the index, answers every question (follow-ups with the earlier
turns as history) through `ask()`, the one call into the answering core, and scores
retrieval, citations (validity, ALCE-style precision and recall with the support judge),
faithfulness, fact recall, list completeness and abstention (rag.eval.metrics), over the
whole set and per split (fit / held-out). Thresholds come from `thresholds.yaml` next to the
set; a metric outside its bound makes run_cli return 5. Reports: rag.eval.report.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag.eval.metrics import (  # noqa: F401  (re-exported: the evals' public names)
    METRICS,
    aggregate,
    by_split,
    citation_scores,
    fact_found,
    normalise,
    retrieval_scores,
    score_answer,
)
from rag.eval.report import (
    check_all,
    check_out,
    load_split_thresholds,
    summary_table,
    write_reports,
)
from rag.eval.sets import (  # noqa: F401
    KINDS,
    SPLITS,
    Question,
    known_names,
    load_set,
    match_ref,
    resolve_refs,
    seed_papers,
)

EXIT_BELOW = 5


def make_pipeline(settings: Any) -> Any:
    """The pipeline `rag eval` scores: the one behind `rag ask`."""
    from rag.answering import Pipeline

    return Pipeline(settings)


def ask(pipeline: Any, question: str, options: Any, history: list[dict[str, str]]) -> Any:
    """The one call into the answering core; returns its Answer (`to_public()` is the JSON)."""
    return pipeline.answer(question, options, history=history)


def load_labels(path: Path) -> dict[tuple[str, str], bool]:
    """labels.jsonl beside a set: {(sentence as label_key reads it, paper_id): supported}
    for sentences a model wrote, labelled by reading the cited abstract ({} if none)."""
    import json

    from rag.errors import InputError
    from rag.eval.metrics import label_key

    if not path.exists():
        return {}
    out = {}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            for paper_id in row["paper_ids"]:
                out[label_key(row["sentence"]), str(paper_id)] = bool(row["supported"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path}:{i}: not a label ({exc})", "each line: {\"sentence\", "
                             "\"paper_ids\": [...], \"supported\": true|false, ...}; see evals/README.md") from None
    return out


def run_set(pipeline: Any, questions: list[Question], refs: dict[str, str], *, llm: str,
            model: str | None, judge: str,
            progress: Callable[[str], None] | None = None,
            labels: dict[tuple[str, str], bool] | None = None) -> list[dict[str, Any]]:
    """Answer every question as `rag ask`/`rag chat` do, and score it."""
    from rag.schema import AskOptions

    pipeline.refresh_names()
    checker = pipeline.judge
    if judge in ("model", "ollama"):  # the answers' own judge: no pair is asked twice
        checker = pipeline.model_judge(pipeline.client(model, llm))
    options = AskOptions(llm=llm, model=model, judge=judge)  # type: ignore[arg-type]
    s = getattr(pipeline, "settings", None)  # an answer past both limits ran away
    timeout = s.answer_timeout + s.llm_timeout if s is not None else float("inf")
    rows = []
    for i, q in enumerate(questions, 1):
        history: list[dict[str, str]] = []
        for turn in q.turns:
            ans = ask(pipeline, turn, options, history)
            history += [{"role": "user", "content": turn},
                        {"role": "assistant", "content": ans.answer}]
        ranked = [h.paper.paper_id for h in pipeline.retriever.search(ans.standalone_question, 50)]
        rows.append(score_answer(q, ans, ranked, refs, checker, labels=labels, timeout=timeout,
                                 with_model=llm in ("ollama", "openai")))
        if progress:
            progress(f"[{i}/{len(questions)}] {q.id}")
    return rows


def run_cli(settings: Any, *, set_path: Path, llm: str = "none", model: str | None = None,
            judge: str = "default", out: Path = Path("evals/reports"),
            pipeline_factory: Callable[[Any], Any] = make_pipeline) -> int:
    """`rag eval`: 0 when every threshold holds, 5 when one does not (InputError: bad set)."""
    started = time.perf_counter()
    questions = load_set(set_path)
    thresholds_path = set_path.parent / "thresholds.yaml"
    thresholds = load_split_thresholds(thresholds_path, llm)
    pipeline = pipeline_factory(settings)
    refs = resolve_refs(questions, pipeline.retriever.papers(), set_path, settings.index)
    check_out(out)

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    with pipeline:
        rows = run_set(pipeline, questions, refs, llm=llm, model=model, judge=judge,
                       progress=progress, labels=load_labels(set_path.parent / "labels.jsonl"))
    metrics, splits = aggregate(rows), by_split(rows)
    failures = check_all(metrics, splits, thresholds)
    report = {
        "set": set_path.as_posix(), "set_name": f"{set_path.parent.name}-{set_path.stem}",
        "llm": llm, "model": next((r["answerer"].split(":", 1)[1] for r in rows
                                   if ":" in r["answerer"]), None),
        "judge": judge, "index": settings.index, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "timestamp": time.time(),
        "seconds": round(time.perf_counter() - started, 1), "questions_n": len(rows),
        "metrics": metrics, "splits": splits,
        "thresholds": {k: {"op": op, "bound": b} for k, (op, b) in thresholds.get("all", {}).items()},
        "split_thresholds": {s: {k: {"op": op, "bound": b} for k, (op, b) in t.items()}
                             for s, t in thresholds.items() if s != "all"},
        "thresholds_file": thresholds_path.as_posix() if thresholds else None,
        "failures": failures, "questions": rows,
    }
    json_path, md_path = write_reports(report, out)
    print(summary_table(report))
    print(f"\nreports: {json_path} and {md_path}")
    if not thresholds:
        print(f"no thresholds for --llm {llm} in {thresholds_path}: nothing checked")
    if failures:
        print("\nBELOW THRESHOLD:\n" + "\n".join(f"  {f}" for f in failures))
        return EXIT_BELOW
    return 0
