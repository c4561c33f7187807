"""`rag eval` reports: thresholds, the summary table, the JSON and Markdown files, the metric
history; and the judge's report on labelled cases (evals/judge_cases.jsonl).

The history chart is a Unicode sparkline per metric over the earlier JSON reports of the same
set, answerer and judge found in the output directory (oldest to newest, this run last), on
an absolute 0..1 scale so that a small wobble looks small.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from rag.corpus.paper import Paper
from rag.errors import InputError
from rag.evaluate import KINDS, METRICS, match_ref

BARS = "▁▂▃▄▅▆▇█"
HISTORY = 20  # runs shown in the chart


# -- thresholds ---------------------------------------------------------------------------


def load_thresholds(path: Path, llm: str) -> dict[str, tuple[str, float]]:
    """metric -> ("min"|"max", bound) for this --llm from a thresholds.yaml ({} if none)."""
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({exc})", "see evals/README.md") from None
    section = data.get(llm) if isinstance(data, dict) else None
    if section is None:
        return {}
    hint = "write e.g. `none: {min: {faithfulness: 0.9}, max: {false_abstention_rate: 0.05}}`"
    if not isinstance(section, dict) or any(not isinstance(section.get(op) or {}, dict)
                                            for op in ("min", "max")):
        raise InputError(f"{path}: section `{llm}` must map `min`/`max` to metric: bound", hint)
    out: dict[str, tuple[str, float]] = {}
    for op in ("min", "max"):
        for name, bound in (section.get(op) or {}).items():
            if METRICS.get(name) != op:
                raise InputError(f"{path}: {llm}.{op}.{name} is not a {op}imum metric",
                                 f"{op} metrics: " + ", ".join(k for k, v in METRICS.items() if v == op))
            if not isinstance(bound, (int, float)) or not 0 <= bound <= 1:
                raise InputError(f"{path}: {llm}.{op}.{name} must be a number in [0, 1]", hint)
            out[name] = (op, float(bound))
    return out


def check_thresholds(metrics: dict[str, dict[str, Any]],
                     thresholds: dict[str, tuple[str, float]]) -> list[str]:
    failures = []
    for name, (op, bound) in thresholds.items():
        value = metrics[name]["value"]
        if value is None:
            continue  # no question of the set is scored on it
        if (op == "min" and value < bound) or (op == "max" and value > bound):
            word = "below the minimum" if op == "min" else "above the maximum"
            failures.append(f"{name} {value:.3f} is {word} {bound:.3f}")
    return failures


# -- the judge on labelled cases (tests/test_judge.py, benchmarks/judge_calibration.py) ------


def load_judge_cases(path: Path) -> list[dict[str, Any]]:
    cases = []
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                cases.append(json.loads(line))
            except ValueError as exc:
                raise InputError(f"{path}:{no}: not JSON ({exc})", "one JSON object per line") from None
    return cases


def judge_cases(judge: Any, cases: list[dict[str, Any]], papers: list[Paper]) -> list[dict[str, Any]]:
    """The judge's verdict on each case, the cited paper given as the pipeline gives it."""
    from rag.schema import Source

    out = []
    for case in cases:
        paper = match_ref(case["paper"], papers)
        if paper is None:
            raise InputError(f"judge case {case['id']}: {case['paper']} is not among the papers",
                             "point at the seeds/ the cases were written against")
        s = judge.check(case["sentence"], [(Source(1, paper, 0.0).header(), paper.abstract)])
        out.append({**case, "predicted": s.supported, "score": s.score, "reasons": s.reasons})
    return out


def judge_summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    tp = sum(r["predicted"] and r["supported"] for r in results)
    fp = sum(r["predicted"] and not r["supported"] for r in results)
    fn = sum(not r["predicted"] and r["supported"] for r in results)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    by_kind: dict[str, list[bool]] = {}
    for r in results:
        by_kind.setdefault(r["kind"], []).append(r["predicted"] == r["supported"])
    return {
        "n": len(results), "precision": precision, "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "accuracy": sum(r["predicted"] == r["supported"] for r in results) / max(1, len(results)),
        "by_kind": {k: {"n": len(v), "accuracy": sum(v) / len(v)} for k, v in by_kind.items()},
    }


# -- reports ------------------------------------------------------------------------------


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _status(report: dict[str, Any], name: str) -> tuple[str, str]:
    t = report["thresholds"].get(name)
    if not t:
        return "", ""
    value = report["metrics"][name]["value"]
    bound = f"{'≥' if t['op'] == 'min' else '≤'} {t['bound']:.2f}"
    if value is None:
        return bound, "n/a"
    ok = value >= t["bound"] if t["op"] == "min" else value <= t["bound"]
    return bound, "ok" if ok else "FAIL"


def summary_table(report: dict[str, Any]) -> str:
    """The plain-text table `rag eval` prints."""
    who = report["llm"] if report["llm"] == "none" else f"ollama:{report['model']}"
    lines = [f"rag eval  {report['set']}  ({report['questions_n']} questions, answerer {who}, "
             f"judge {report['judge']}, {report['seconds']:.0f} s)", "",
             f"{'metric':<24}{'value':>8}{'n':>6}  {'threshold':<10}{'status'}"]
    for name in METRICS:
        m = report["metrics"][name]
        bound, status = _status(report, name)
        lines.append(f"{name:<24}{fmt(m['value']):>8}{m['n']:>6}  {bound:<10}{status}")
    return "\n".join(lines)


def _cell(text: Any, width: int = 0) -> str:
    text = re.sub(r"\s+", " ", str(text)).strip().replace("|", "\\|")
    return text if not width or len(text) <= width else text[: width - 1] + "…"


def sparkline(values: list[float | None]) -> str:
    return "".join(" " if v is None else BARS[min(len(BARS) - 1, int(max(0.0, v) * len(BARS)))]
                   for v in values)


def history(out: Path, report: dict[str, Any]) -> list[dict[str, Any]]:
    """Earlier reports of the same set, answerer and judge in `out`, oldest first."""
    runs = []
    for path in out.glob("eval-*.json"):
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if (isinstance(old, dict) and old.get("created") and old.get("set_name") == report["set_name"]
                and old.get("llm") == report["llm"] and old.get("judge") == report["judge"]):
            runs.append(old)
    return sorted(runs, key=lambda r: (r.get("timestamp") or 0.0, r["created"]))


def _history_md(runs: list[dict[str, Any]]) -> list[str]:
    if len(runs) < 2:
        return ["No earlier report of this set, answerer and judge in this directory yet: the "
                "chart appears from the second run on."]
    runs = runs[-HISTORY:]
    lines = [f"{len(runs)} runs, {runs[0]['created']} → {runs[-1]['created']}; each bar is one run "
             "(▁ = 0, █ = 1), this run last.", "",
             "| metric | history | first | previous | this run | change |", "|---|---|---|---|---|---|"]
    for name in METRICS:
        vals = [r.get("metrics", {}).get(name, {}).get("value") for r in runs]
        if all(v is None for v in vals):
            continue
        prev, cur = vals[-2], vals[-1]
        delta = f"{cur - prev:+.3f}" if cur is not None and prev is not None else ""
        lines.append(f"| {name} | `{sparkline(vals)}` | {fmt(vals[0])} | {fmt(prev)} | {fmt(cur)} | {delta} |")
    return lines


def markdown(report: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    who = "offline extractive" if report["llm"] == "none" else f"ollama:{report['model']}"
    out = [f"# rag eval: {report['set']}", "",
           f"{report['created']} · {report['questions_n']} questions · answerer {who} · judge "
           f"{report['judge']} · index `{report['index']}` · {report['seconds']:.0f} s", "",
           "Metric definitions and thresholds: evals/README.md. n = questions (citation validity: "
           "citation markers) the metric applies to.", ""]
    if report["failures"]:
        out += ["**Below threshold:**", ""] + [f"- {f}" for f in report["failures"]] + [""]
    else:
        out += ["All thresholds hold." if report["thresholds"] else "No thresholds checked.", ""]
    out += ["## Summary", "", "| metric | value | n | threshold | status |", "|---|---|---|---|---|"]
    for name in METRICS:
        m = report["metrics"][name]
        bound, status = _status(report, name)
        out.append(f"| {name} | {fmt(m['value'])} | {m['n']} | {bound} | {status} |")
    out += ["", "## By kind", "",
            "| kind | n | abstained | faithfulness | fact recall | recall@5 |", "|---|---|---|---|---|---|"]
    for kind in KINDS:
        rows = [r for r in report["questions"] if r["kind"] == kind]
        if rows:
            def mean(name: str, rows: list[dict[str, Any]] = rows) -> str:
                vals = [r["metrics"][name] for r in rows if r["metrics"].get(name) is not None]
                return fmt(sum(vals) / len(vals)) if vals else "n/a"
            out.append(f"| {kind} | {len(rows)} | {sum(r['abstained'] for r in rows)} | "
                       f"{mean('faithfulness')} | {mean('fact_recall')} | {mean('recall@5')} |")
    out += ["", "## Questions", "",
            "| id | kind | abstained | faithfulness | fact recall | completeness | answer |",
            "|---|---|---|---|---|---|---|"]
    for r in report["questions"]:
        m = r["metrics"]
        flag = "yes" if r["abstained"] else "no"
        if r["kind"] == "unanswerable" and not r["abstained"]:
            flag = "**no** (should)"
        elif r["kind"] != "unanswerable" and r["abstained"]:
            flag = "**yes** (should not)"
        out.append(f"| {r['id']} | {r['kind']} | {flag} | {fmt(m['faithfulness'])} | "
                   f"{fmt(m['fact_recall'])} | {fmt(m['list_completeness'])} | {_cell(r['answer'], 160)} |")
    problems = [(r, s) for r in report["questions"] for s in r["sentences"] if not s["supported"]]
    if problems:
        out += ["", "## Unsupported sentences", "", "| id | sentence | judge |", "|---|---|---|"]
        out += [f"| {r['id']} | {_cell(s['text'], 140)} | {_cell('; '.join(s['reasons']), 80)} |"
                for r, s in problems]
    missing = [r for r in report["questions"] if r["missing_facts"]]
    if missing:
        out += ["", "## Missing facts", "", "| id | missing |", "|---|---|"]
        out += [f"| {r['id']} | {_cell(', '.join(r['missing_facts']))} |" for r in missing]
    out += ["", "## Metric history", ""] + _history_md(runs) + [""]
    return "\n".join(out)


def write_reports(report: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """eval-<set>-<llm>-<time>.json and .md in `out`; returns both paths."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = report["created"].replace("-", "").replace(":", "")
    base = f"eval-{report['set_name']}-{report['llm']}-{stamp}"
    n = 1
    while (out / f"{base}.json").exists():
        n += 1
        base = f"eval-{report['set_name']}-{report['llm']}-{stamp}-{n}"
    report["file"] = f"{base}.json"
    runs = history(out, report) + [report]
    json_path, md_path = out / f"{base}.json", out / f"{base}.md"
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    md_path.write_text(markdown(report, runs), encoding="utf-8")
    return json_path, md_path
