"""`rag eval` reports: thresholds (for the whole set and per split), the summary table, the JSON
and Markdown files, the metric history; and the judge's report on labelled cases
(evals/judge_cases.jsonl).

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
from rag.eval.metrics import METRICS
from rag.eval.sets import KINDS, SPLITS, match_ref

BARS = "▁▂▃▄▅▆▇█"
HISTORY = 20  # runs shown in the chart


# -- thresholds ---------------------------------------------------------------------------


_HINT = ("write e.g. `none: {min: {faithfulness: 0.9}, max: {false_abstention_rate: 0.05}, "
         "heldout: {min: {fact_recall: 0.9}}}`")
Bounds = dict[str, tuple[str, float]]
SECTIONS = ("none", "ollama", "openai", "judge")  # one per `rag eval --llm`; judge: tests/test_judge.py's


def _key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line of every key of a YAML file, by its path of keys (("none", "min",
    "faithfulness"): 3), so that an error names the line as the question sets' errors do."""
    out: dict[tuple[str, ...], int] = {}

    def walk(node: Any, keys: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                out[(*keys, str(key.value))] = key.start_mark.line + 1
                walk(value, (*keys, str(key.value)))
    walk(yaml.compose(text, Loader=yaml.SafeLoader), ())
    return out


def _bounds(at: Any, keys: tuple[str, ...], section: Any) -> Bounds:
    where = ".".join(keys)
    if not isinstance(section, dict) or any(not isinstance(section.get(op) or {}, dict)
                                            for op in ("min", "max")):
        raise InputError(f"{at(*keys)}: section `{where}` must map `min`/`max` to metric: bound", _HINT)
    out: Bounds = {}
    for op in ("min", "max"):
        for name, bound in (section.get(op) or {}).items():
            if METRICS.get(name) != op:
                raise InputError(f"{at(*keys, op, name)}: {where}.{op}.{name} is not a {op}imum metric",
                                 f"{op} metrics: " + ", ".join(k for k, v in METRICS.items() if v == op))
            if not isinstance(bound, (int, float)) or not 0 <= bound <= 1:
                raise InputError(f"{at(*keys, op, name)}: {where}.{op}.{name} must be a number in [0, 1]",
                                 _HINT)
            out[name] = (op, float(bound))
    return out


def load_split_thresholds(path: Path, llm: str) -> dict[str, Bounds]:
    """{"all": bounds for the whole set, "fit"/"heldout": bounds for that split} for this --llm
    from a thresholds.yaml ({} if none). CI gates on `heldout`: figures on questions that no
    parameter was fitted to. Errors name the file and the line."""
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text) or {}
        lines = _key_lines(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({exc})", "see evals/README.md") from None

    def at(*keys: str) -> str:
        return f"{path}:{lines[keys]}" if keys in lines else str(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}:1: a thresholds file must be a mapping of sections", _HINT)
    unknown = sorted(map(str, set(data) - set(SECTIONS)))
    if unknown:  # a misspelt section would leave the gate with nothing to check
        raise InputError(f"{at(unknown[0])}: `{unknown[0]}` is not a section ({', '.join(SECTIONS)})", _HINT)
    section = data.get(llm)
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise InputError(f"{at(llm)}: section `{llm}` must be a mapping", _HINT)
    unknown = sorted(set(map(str, section)) - {"min", "max", *SPLITS})
    if unknown:
        raise InputError(f"{at(llm, unknown[0])}: {llm}.{unknown[0]} is not `min`, `max` or a split "
                         f"({', '.join(SPLITS)})", _HINT)
    out = {"all": _bounds(at, (llm,), section)} if {"min", "max"} & set(section) else {}
    for split in SPLITS:
        if split in section:
            out[split] = _bounds(at, (llm, split), section[split])
    return out


def load_thresholds(path: Path, llm: str) -> Bounds:
    """metric -> ("min"|"max", bound) for the whole set under this --llm ({} if none)."""
    return load_split_thresholds(path, llm).get("all", {})


def check_thresholds(metrics: dict[str, dict[str, Any]], thresholds: Bounds) -> list[str]:
    failures = []
    for name, (op, bound) in thresholds.items():
        value = metrics[name]["value"]
        if value is None:
            continue  # no question of the set is scored on it
        if (op == "min" and value < bound) or (op == "max" and value > bound):
            word = "below the minimum" if op == "min" else "above the maximum"
            failures.append(f"{name} {value:.3f} is {word} {bound:.3f}")
    return failures


def check_all(metrics: dict[str, dict[str, Any]], splits: dict[str, dict[str, dict[str, Any]]],
              thresholds: dict[str, Bounds]) -> list[str]:
    """Failures for the whole set, then per split ("heldout: fact_recall 0.8 is below ...")."""
    failures = check_thresholds(metrics, thresholds.get("all", {}))
    for split in SPLITS:
        if split in thresholds and split in splits:
            failures += [f"{split}: {f}" for f in check_thresholds(splits[split], thresholds[split])]
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


def _checks(report: dict[str, Any], name: str) -> list[tuple[str, dict[str, Any], float | None]]:
    """(scope, threshold, value) of every bound on this metric: the whole set, then splits."""
    out = []
    if name in report["thresholds"]:
        out.append(("", report["thresholds"][name], report["metrics"][name]["value"]))
    for split, bounds in report.get("split_thresholds", {}).items():
        if name in bounds and split in report.get("splits", {}):
            out.append((split, bounds[name], report["splits"][split][name]["value"]))
    return out


def _status(report: dict[str, Any], name: str) -> tuple[str, str]:
    checks = _checks(report, name)
    if not checks:
        return "", ""
    bound = ", ".join(f"{scope + ' ' if scope else ''}{'≥' if t['op'] == 'min' else '≤'} "
                      f"{t['bound']:.2f}" for scope, t, _ in checks)
    verdicts = [None if v is None else (v >= t["bound"] if t["op"] == "min" else v <= t["bound"])
                for _, t, v in checks]
    if all(v is None for v in verdicts):
        return bound, "n/a"
    return bound, "FAIL" if False in verdicts else "ok"


def _split_cells(report: dict[str, Any], name: str) -> list[tuple[str, int]]:
    return [(fmt(report["splits"][s][name]["value"]), report["splits"][s][name]["n"])
            for s in SPLITS if s in report.get("splits", {})]


def answerer(report: dict[str, Any]) -> str:
    """Who answered: the model's server and name, as its answers say (`openai:MODEL`)."""
    return next((q["answerer"] for q in report.get("questions", []) if ":" in q.get("answerer", "")),
                report["llm"] if report["llm"] == "none" else f"{report['llm']}:{report['model']}")


def summary_table(report: dict[str, Any]) -> str:
    """The plain-text table `rag eval` prints: the whole set, then each split."""
    who = answerer(report)
    splits = [s for s in SPLITS if s in report.get("splits", {})]
    head = f"{'metric':<22}{'all':>7}{'n':>5}" + "".join(f"{s:>9}{'n':>5}" for s in splits)
    lines = [f"rag eval  {report['set']}  ({report['questions_n']} questions, answerer {who}, "
             f"judge {report['judge']}, {report['seconds']:.0f} s)", "",
             f"{head}  {'threshold':<24}status"]
    for name in METRICS:
        m = report["metrics"][name]
        bound, status = _status(report, name)
        cells = "".join(f"{v:>9}{n:>5}" for v, n in _split_cells(report, name))
        lines.append(f"{name:<22}{fmt(m['value']):>7}{m['n']:>5}{cells}  {bound:<24}{status}")
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
    who = "offline extractive" if report["llm"] == "none" else answerer(report)
    out = [f"# rag eval: {report['set']}", "",
           f"{report['created']} · {report['questions_n']} questions · answerer {who} · judge "
           f"{report['judge']} · index `{report['index']}` · {report['seconds']:.0f} s", "",
           "Metric definitions and thresholds: evals/README.md. n = questions (citation validity: "
           "citation markers) the metric applies to.", ""]
    if report["failures"]:
        out += ["**Below threshold:**", ""] + [f"- {f}" for f in report["failures"]] + [""]
    else:
        checked = report["thresholds"] or report.get("split_thresholds")
        out += ["All thresholds hold." if checked else "No thresholds checked.", ""]
    splits = [s for s in SPLITS if s in report.get("splits", {})]
    out += ["## Summary", "", "Per split: `fit` questions may have been used to fit a parameter, "
            "`heldout` ones never were.", "",
            "| metric | all | n | " + "".join(f"{s} | n | " for s in splits) + "threshold | status |",
            "|---|---|---|" + "---|---|" * len(splits) + "---|---|"]
    for name in METRICS:
        m = report["metrics"][name]
        bound, status = _status(report, name)
        cells = "".join(f"{v} | {n} | " for v, n in _split_cells(report, name))
        out.append(f"| {name} | {fmt(m['value'])} | {m['n']} | {cells}{bound} | {status} |")
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
            "| id | kind | abstained | faithfulness | fact recall | completeness | answer | split |",
            "|---|---|---|---|---|---|---|---|"]
    for r in report["questions"]:
        m = r["metrics"]
        flag = "yes" if r["abstained"] else "no"
        if r["kind"] == "unanswerable" and not r["abstained"]:
            flag = "**no** (should)"
        elif r["kind"] != "unanswerable" and r["abstained"]:
            flag = "**yes** (should not)"
        out.append(f"| {r['id']} | {r['kind']} | {flag} | {fmt(m['faithfulness'])} | "
                   f"{fmt(m['fact_recall'])} | {fmt(m['list_completeness'])} | {_cell(r['answer'], 160)} | "
                   f"{r.get('split') or ''} |")
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


def check_out(out: Path) -> None:
    """`--out` is a directory the reports can be written to (made if missing): checked before
    the questions run, not found out when they have."""
    import tempfile

    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file, not a directory",
                         "name a directory to write the reports to (default: evals/reports)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=out).close()
    except OSError as exc:
        raise InputError(f"--out {out}: cannot write the reports there ({exc.strerror or exc})",
                         "name a directory to write them to (default: evals/reports)") from None


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
