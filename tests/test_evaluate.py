"""`rag eval`: the offline answerer passes the thresholds on the full set; recorded model
answers served by the Ollama test server pass when faithful and fail (exit 5) when not;
malformed sets and unit pieces of the metrics.

Re-record the model answers (after a change to retrieval or the prompt moved the sources):
    RAG_HOME=.rag .venv/bin/python -m tests.test_evaluate record
then hand-edit evals/recorded/*.jsonl again (see evals/README.md).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_rag

EVALS = ROOT / "evals"
RECORDED = EVALS / "recorded"
_LABEL = re.compile(r'<source n="(\d+)">\nlabel: (.*)')
# What a model's condense step returns for each follow-up (the recorder needs these to go on).
CONDENSED = {
    "followup-ulysses-comm":
        "How does DeepSpeed-Ulysses's communication volume behave as sequence length grows?",
    "followup-solar-speedup":
        "What speedup does SOLAR, the data loader for training scientific CNN surrogates, get over the PyTorch data loader?",
    "followup-sylvie-speedup":
        "What is the maximum throughput boost reported by Sylvie, the framework that uses one-bit quantization for distributed GNN training?",
}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


CITATION_ERRORS = ("wrong_citation", "citation_to_no_source")


def chat_prompts(server: Any) -> list[str]:
    return [r["body"]["messages"][-1]["content"] for r in server.requests if r["path"] == "/api/chat"]


def source_labels(prompt: str) -> list[str]:
    return [label for _, label in _LABEL.findall(prompt)]


# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rag_home(seeded_settings: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the seeded index, for `rag` subprocesses (they must not share the original)."""
    home = tmp_path_factory.mktemp("eval-home") / ".rag"
    shutil.copytree(seeded_settings.home, home)
    return home


def run_recorded(settings: Any, server: Any, replies_file: Path, out: Path,
                 capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    from rag.eval.run import run_cli

    entries = read_jsonl(replies_file)
    server.replies = [e["reply"] for e in entries]
    code = run_cli(settings.model_copy(update={"ollama_host": server.url}),
                   set_path=RECORDED / "questions.yaml", llm="ollama", model=None,
                   judge="default", out=out)
    printed = capsys.readouterr().out
    # Every recorded reply was asked for, each with the sources it was written against.
    assert server.replies == [], "fewer model calls than recorded replies: re-record (see module doc)"
    prompts = chat_prompts(server)
    assert len(prompts) == len(entries)
    for entry, prompt in zip(entries, prompts, strict=True):
        assert source_labels(prompt) == entry["sources"], (
            f"{entry['id']} turn {entry['turn']}: rag now sends other sources than the recorded "
            "answer cites: re-record (see module doc)")
    report = json.loads(next(out.glob("eval-*.json")).read_text(encoding="utf-8"))
    return code, report, printed


# -- the CI runs --------------------------------------------------------------------------


def test_offline_answerer_passes_thresholds_on_full_set(rag_home: Path, workdir: Path) -> None:
    out = workdir / "reports"
    proc = run_rag("eval", "--set", str(EVALS / "questions.yaml"), "--llm", "none", "--out", str(out),
                   cwd=workdir, env={"RAG_HOME": str(rag_home)}, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "faithfulness" in proc.stdout and "BELOW THRESHOLD" not in proc.stdout
    (json_path,) = out.glob("eval-*.json")
    (md_path,) = out.glob("eval-*.md")
    report = json.loads(json_path.read_text(encoding="utf-8"))
    assert report["questions_n"] == 211 and report["failures"] == []
    assert set(report["thresholds"]) >= {"faithfulness", "fact_recall", "citation_precision"}
    md = md_path.read_text(encoding="utf-8")
    assert "| fact-skrull-speedup | fact | no |" in md and "## Metric history" in md


@pytest.mark.filterwarnings("ignore::ResourceWarning")  # see collect_model_clients
def test_recorded_faithful_answers_pass(seeded_settings: Any, ollama_server: Any, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, report, printed = run_recorded(seeded_settings, ollama_server, RECORDED / "faithful.jsonl",
                                         tmp_path, capsys)
    assert code == 0, printed
    m = report["metrics"]
    assert m["citation_validity"]["value"] == 1.0
    assert m["fact_recall"]["value"] == 1.0 and m["abstention_accuracy"]["value"] == 1.0
    assert all(r["answerer"].startswith("ollama:") for r in report["questions"])
    # Both unanswerable questions reach the model (nothing is declined before it has read the
    # sources), which declines them. The claim verifier vetoes the only sentences of two
    # faithful answers (HALOC's accuracy and FLOPs, MegaBlocks' speedup over Tutel: it reads
    # their comparisons as possibly contradicted), which then end declined: a known miss
    # (docs/evaluation.md, "The claim verifier"), bounded by evals/recorded/thresholds.yaml.
    declined = {r["id"] for r in report["questions"] if r["abstained"]}
    assert {"unanswerable-skrull-license", "unanswerable-fha-kitchens-license"} <= declined
    assert len(declined) <= 4


@pytest.mark.filterwarnings("ignore::ResourceWarning")  # see collect_model_clients
def test_recorded_unfaithful_answers_fail(seeded_settings: Any, ollama_server: Any, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, report, printed = run_recorded(seeded_settings, ollama_server,
                                         RECORDED / "unfaithful.jsonl", tmp_path, capsys)
    assert code == 5, printed
    assert "BELOW THRESHOLD" in printed and "faithfulness" in " ".join(report["failures"])
    # The judge caught every planted error: each one is in a sentence it marks unsupported.
    planted = {e["id"]: e["errors"] for e in read_jsonl(RECORDED / "unfaithful.jsonl") if e.get("errors")}
    rows = {r["id"]: r for r in report["questions"]}
    for qid, errors in planted.items():
        unsupported = " ".join(s["text"] for s in rows[qid]["sentences"] if not s["supported"])
        # a citation to the wrong source, to none or missing is replaced by rag with the
        # source that supports the sentence, and marked as added by rag
        corrected = " ".join(s["text"] for s in rows[qid]["sentences"] if s.get("attributed"))
        for err in errors:
            caught = unsupported + (" " + corrected if err["kind"] in CITATION_ERRORS else "")
            assert err["text"] in caught, f"{qid}: the judge missed {err}"
    assert report["metrics"]["citation_validity"]["value"] < 1.0


@pytest.mark.filterwarnings("ignore::ResourceWarning")  # see collect_model_clients
def test_ollama_judge_gives_the_verdicts(seeded_settings: Any, ollama_server: Any, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from rag.eval.run import run_cli

    subset = tmp_path / "two.yaml"  # no thresholds.yaml next to it: nothing checked
    subset.write_text(
        '- id: fact-skrull\n  kind: fact\n  question: "What speedup does Skrull report over DeepSpeed?"\n'
        '  papers: ["seeds/000_1d593446947ebb0f.txt#1"]\n  facts: ["3.76"]\n')
    # One verdict: the citation scores take the answer's own (each pair is judged once).
    ollama_server.replies = ['{"supported": false, "quote": ""}']
    code = run_cli(seeded_settings.model_copy(update={"ollama_host": ollama_server.url}),
                   set_path=subset, llm="none", judge="ollama", out=tmp_path / "out")
    assert code == 0 and "nothing checked" in capsys.readouterr().out
    report = json.loads(next((tmp_path / "out").glob("eval-*.json")).read_text())
    prompts = chat_prompts(ollama_server)
    assert len(prompts) == 1 and all("claim" in p.lower() and "Skrull" in p for p in prompts)
    m = report["metrics"]
    assert report["judge"] == "ollama" and m["faithfulness"]["value"] == 0.0
    assert m["citation_recall"]["value"] == 0.0 and m["fact_recall"]["value"] == 1.0


# -- malformed input ----------------------------------------------------------------------


def test_malformed_set_is_a_clear_input_error(rag_home: Path, workdir: Path) -> None:
    bad = workdir / "bad.yaml"
    bad.write_text('- id: fact-one\n  kind: fact\n  question: "What?"\n  papers: "seeds/x.txt#1"\n')
    proc = run_rag("eval", "--set", str(bad), "--out", str(workdir / "r"), cwd=workdir,
                   env={"RAG_HOME": str(rag_home)})
    assert proc.returncode == 2, proc.stderr
    assert "question 'fact-one': field `papers` must be a list" in proc.stderr
    assert not (workdir / "r").exists()


@pytest.mark.parametrize(("text", "message"), [
    ("- id: q1\n  kind: trivia\n  question: x\n  papers: []\n", "question 'q1': field `kind`"),
    ("- id: q1\n  kind: followup\n  turns: [only one]\n  papers: ['seeds/a.txt#1']\n",
     "question 'q1': field `turns` needs at least two"),
    ("- id: q1\n  kind: fact\n  question: x\n  papers: ['seeds/a.txt']\n",
     "question 'q1': field `papers` has 'seeds/a.txt'"),
    ("- id: q1\n  kind: fact\n  question: x\n  paper: ['seeds/a.txt#1']\n",
     "question 'q1': field `paper` is not a known field"),
    ("- id: q1\n  kind: unanswerable\n  question: x\n  papers: ['seeds/a.txt#1']\n",
     "field `papers` must be []"),
    ("- kind: fact\n  question: x\n  papers: []\n", "question #1 (no id): field `id`"),
    ("- id: q1\n  kind: fact\n  question: x\n  papers: ['seeds/a.txt#1']\n- id: q1\n  kind: fact\n"
     "  question: y\n  papers: ['seeds/a.txt#2']\n", "used by an earlier question"),
    ("- id: q1\n  kind: fact\n  question: [unclosed\n", "bad.yaml:4: not valid YAML"),
    ("{}\n", "non-empty YAML list"),
    ("- id: q1\n  kind: fact\n  question: x\n  papers: ['seeds/a.txt#1']\n  off_topic: true\n",
     "field `off_topic` is only for unanswerable questions"),
    ("- id: q1\n  kind: unanswerable\n  question: x\n  papers: []\n  names_paper: 'no'\n",
     "field `names_paper` must be true or false"),
    ("- id: q1\n  kind: fact\n  question: x\n  papers: ['seeds/a.txt#1']\n  answer_sentence: ''\n",
     "field `answer_sentence` must be the answering sentence"),
])
def test_set_validation_names_question_and_field(tmp_path: Path, text: str, message: str) -> None:
    from rag.errors import InputError
    from rag.eval.run import load_set

    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        load_set(path)
    assert message in str(exc.value)
    assert exc.value.exit_code == 2


@pytest.mark.parametrize(("text", "message"), [
    ("- id: q1\n  kind: fact\n  question: x\n  papers: ['seeds/a.txt#1']\n"
     "- id: q2\n  note: the kind is misspelt\n  kind: facts\n  question: y\n  papers: []\n",
     "bad.yaml:7: question 'q2': field `kind` is 'facts'"),
    ("- id: q1\n  kind: fact\n  question: x\n  papers: ['seeds/a.txt#1']\n"
     "- id: q2\n  kind: fact\n  papers: ['seeds/a.txt#2']\n",
     "bad.yaml:5: question 'q2': field `question` must be a non-empty string"),
    ("- id: q1\n  kind: fact\n  question: x\n  papers: ['seeds/a.txt#1']\n  paper: []\n",
     "bad.yaml:5: question 'q1': field `paper` is not a known field"),
    ("- id: q1\n  kind: fact\n  question: x\n  papers: ['seeds/a.txt#1']\n- just text\n",
     "bad.yaml:5: item 2 is a str, not a mapping"),
])
def test_set_errors_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    """In a set of 211 questions the error says where: FILE:LINE, then the question and field."""
    from rag.errors import InputError
    from rag.eval.run import load_set

    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        load_set(path)
    assert str(exc.value).startswith(f"{path.parent}/{message}")


def test_a_paper_not_in_the_index_names_its_line(retriever: Any, tmp_path: Path) -> None:
    from rag.errors import InputError
    from rag.eval.run import load_set, resolve_refs

    path = tmp_path / "set.yaml"
    path.write_text("- id: q1\n  kind: fact\n  question: What is Skrull?\n\n"
                    "  papers: ['seeds/000_1d593446947ebb0f.txt#99']\n")
    with pytest.raises(InputError) as exc:
        resolve_refs(load_set(path), retriever.papers(), path, "default")
    assert str(exc.value).startswith(f"{path}:5: question 'q1': field `papers` names "
                                     "seeds/000_1d593446947ebb0f.txt#99, which is not in the index")
    assert "rag eval --index NAME" in exc.value.hint  # a set of another corpus: the index is wrong


def test_full_sets_load_and_resolve(retriever: Any) -> None:
    from rag.eval.run import load_set, resolve_refs

    papers = retriever.papers()
    for path in (EVALS / "questions.yaml", RECORDED / "questions.yaml"):
        qs = load_set(path)
        refs = resolve_refs(qs, papers, path, "default")
        assert len(set(refs.values())) == len(refs)
    assert len(load_set(EVALS / "questions.yaml")) == 211


def test_blind_sets_load_with_their_labels_and_a_drawn_split(retriever: Any) -> None:
    """The sets written blind carry the answering sentence, off-topic and names-paper labels,
    and half of each kind is held out (scripts/split_questions.py --redraw); the seeds/ ones
    resolve against an index of seeds/."""
    from rag.eval.run import load_set, resolve_refs

    for name, n in (("seeds-a", 70), ("seeds-b", 70), ("scifact-c", 80), ("pubmedqa-d", 80)):
        qs = load_set(EVALS / "blind" / f"{name}.yaml")
        assert len(qs) == n
        facts = [q for q in qs if q.kind == "fact"]
        assert all(q.answer_sentence for q in facts) and any(q.off_topic for q in qs)
        assert all(q.names_paper is not None for q in qs)
        for kind in {q.kind for q in qs}:
            held = [q.split for q in qs if q.kind == kind]
            assert set(held) == {"fit", "heldout"} and abs(held.count("fit") - held.count("heldout")) <= 1
        if name.startswith("seeds"):
            refs = resolve_refs(qs, retriever.papers(), EVALS / "blind" / f"{name}.yaml", "default")
            assert len(refs) >= 30


# -- metric pieces ------------------------------------------------------------------------


def test_fact_matching_normalises() -> None:
    from rag.eval.run import fact_found

    assert fact_found("3.76", "Skrull is 3.76× faster [1].")
    assert fact_found("4X", "trains 2.5x faster with 4x longer sequences")
    assert fact_found("ICCV'23|ICCV", "MAS appeared at ICCV 2023")
    assert fact_found("AdaCM", "AdaCM² cuts memory")
    assert fact_found("Breadth-First Pipeline Parallelism", "Breadth\u2011First Pipeline  Parallelism")
    assert not fact_found("7.54", "3.76x on average")


def test_retrieval_scores() -> None:
    from rag.eval.run import retrieval_scores

    s = retrieval_scores(["a", "x", "b", "y"], {"a", "b"})
    assert s["recall@1"] == 0.5 and s["recall@5"] == 1.0 and s["mrr"] == 1.0
    assert s["ndcg@10"] == pytest.approx((1 + 1 / 2) / (1 + 1 / 1.5849625), abs=1e-6)
    assert retrieval_scores(["x", "y"], {"a"})["mrr"] == 0.0


def test_thresholds_file_is_checked(tmp_path: Path) -> None:
    from rag.errors import InputError
    from rag.eval.report import check_thresholds, load_thresholds

    path = tmp_path / "thresholds.yaml"
    path.write_text("none:\n  min: {faithfulness: 0.9}\n  max: {false_abstention_rate: 0.1}\n")
    t = load_thresholds(path, "none")
    metrics = {"faithfulness": {"value": 0.85}, "false_abstention_rate": {"value": 0.05}}
    assert check_thresholds(metrics, t) == ["faithfulness 0.850 is below the minimum 0.900"]
    assert load_thresholds(path, "ollama") == {}
    path.write_text("none:\n  min: {false_abstention_rate: 0.9}\n")
    with pytest.raises(InputError, match="not a minimum metric"):
        load_thresholds(path, "none")


@pytest.mark.parametrize(("text", "message"), [
    ("nnone:\n  min: {faithfulness: 0.99}\n", "1: `nnone` is not a section (none, ollama, openai, judge)"),
    ("- none\n", "1: a thresholds file must be a mapping of sections"),
    # the line of the field at fault, as the question sets' errors give it
    ("none:\n  min: {faithfulness: 0.9}\n  heldout:\n    max:\n      fact_recall: 0.2\n",
     "5: none.heldout.max.fact_recall is not a maximum metric"),
    ("none:\n  min:\n    faithfulness: 0.9\n    fact_recall: 90\n",
     "4: none.min.fact_recall must be a number in [0, 1]"),
    ("none:\n  mni: {faithfulness: 0.9}\n", "2: none.mni is not `min`, `max` or a split"),
])
def test_a_bad_thresholds_file_is_an_error_naming_its_line_not_an_open_gate(tmp_path: Path, text: str,
                                                                    message: str) -> None:
    """CI gates on this file: a section name with a typo checked nothing and exited 0."""
    from rag.errors import InputError
    from rag.eval.report import load_split_thresholds

    path = tmp_path / "thresholds.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        load_split_thresholds(path, "none")
    assert str(exc.value).startswith(f"{path}:{message}")


def test_an_out_that_cannot_hold_reports_is_refused_before_the_questions_run(
        rag_home: Path, workdir: Path, tmp_path: Path) -> None:
    """It ran every question, then failed on writing: 'unexpected FileExistsError', exit 1."""
    subset = tmp_path / "two.yaml"
    subset.write_text("- id: fact-one\n  kind: fact\n  question: What speedup does Skrull report?\n"
                      "  papers: ['seeds/000_1d593446947ebb0f.txt#1']\n")
    out = tmp_path / "report.txt"
    out.write_text("a file\n")
    proc = run_rag("eval", "--set", str(subset), "--out", str(out), cwd=workdir,
                   env={"RAG_HOME": str(rag_home)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: --out {out} is a file, not a directory")
    assert "[1/1]" not in proc.stderr  # no question was run


def test_heldout_thresholds_gate_separately(tmp_path: Path) -> None:
    from rag.errors import InputError
    from rag.eval.report import check_all, load_split_thresholds

    path = tmp_path / "thresholds.yaml"
    path.write_text("none:\n  min: {fact_recall: 0.5}\n  heldout:\n    min: {fact_recall: 0.9}\n"
                    "    max: {false_abstention_rate: 0.05}\n")
    t = load_split_thresholds(path, "none")
    whole = {"fact_recall": {"value": 0.95}, "false_abstention_rate": {"value": 0.0}}
    splits = {"fit": {"fact_recall": {"value": 1.0}, "false_abstention_rate": {"value": 0.0}},
              "heldout": {"fact_recall": {"value": 0.8}, "false_abstention_rate": {"value": 0.1}}}
    # The whole set passes; the questions no parameter was fitted on do not.
    assert check_all(whole, splits, t) == [
        "heldout: fact_recall 0.800 is below the minimum 0.900",
        "heldout: false_abstention_rate 0.100 is above the maximum 0.050"]
    path.write_text("none:\n  held_out:\n    min: {fact_recall: 0.9}\n")
    with pytest.raises(InputError, match="held_out is not"):
        load_split_thresholds(path, "none")


def test_offline_eval_reports_each_split(rag_home: Path, workdir: Path, tmp_path: Path) -> None:
    qs = tmp_path / "set"
    qs.mkdir()
    (qs / "questions.yaml").write_text(
        "- id: a\n  kind: fact\n  split: fit\n  question: What speedup does Skrull report over DeepSpeed?\n"
        "  papers: [seeds/000_1d593446947ebb0f.txt#1]\n  facts: ['3.76']\n"
        "- id: b\n  kind: unanswerable\n  split: heldout\n  question: Which studies are about laparoscopy?\n"
        "  papers: []\n")
    (qs / "thresholds.yaml").write_text("none:\n  heldout:\n    min: {abstention_accuracy: 1.0}\n")
    proc = run_rag("eval", "--set", str(qs / "questions.yaml"), "--llm", "none", "--out", str(tmp_path / "r"),
                   cwd=workdir, env={"RAG_HOME": str(rag_home)}, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header = next(line for line in proc.stdout.splitlines() if line.startswith("metric"))
    assert header.split()[:6] == ["metric", "all", "n", "fit", "n", "heldout"]
    report = json.loads(next((tmp_path / "r").glob("eval-*.json")).read_text(encoding="utf-8"))
    assert report["splits"]["heldout"]["abstention_accuracy"]["value"] == 1.0
    assert report["splits"]["fit"]["fact_recall"]["value"] == 1.0


def test_history_chart_appears_from_second_report(tmp_path: Path) -> None:
    from rag.eval.report import write_reports
    from rag.eval.run import METRICS

    def report(value: float, ts: float) -> dict[str, Any]:
        return {"set": "s.yaml", "set_name": "x-s", "llm": "none", "model": None, "judge": "default",
                "index": "default", "created": "2025-01-01T00:00:00", "timestamp": ts, "seconds": 1.0,
                "questions_n": 0, "failures": [], "thresholds": {}, "questions": [],
                "metrics": {m: {"value": value, "n": 1} for m in METRICS}}

    _, md1 = write_reports(report(0.2, 1.0), tmp_path)
    assert "No earlier report" in md1.read_text()
    _, md2 = write_reports(report(0.9, 2.0), tmp_path)
    text = md2.read_text()
    assert md1 != md2 and "| faithfulness | `▂█` | 0.200 | 0.200 | 0.900 | +0.700 |" in text


# -- re-recording (not a test) -------------------------------------------------------------


def record(out: Path) -> None:
    """Run the recorded set through the pipeline against the Ollama test server (behaviour
    "cited") and write every model call's reply with the sources it was given, as the
    skeleton of faithful.jsonl. Condense calls get the CONDENSED questions above."""
    from rag.answering import Pipeline
    from rag.config import get_settings
    from rag.eval.run import load_set
    from rag.schema import AskOptions
    from tests.ollama_server import OllamaTestServer, scripted_reply

    entries = []
    with OllamaTestServer(behaviour="cited") as server, Pipeline(
            get_settings().model_copy(update={"ollama_host": server.url})) as pipeline:
        for q in load_set(RECORDED / "questions.yaml"):
            history: list[dict[str, str]] = []
            for turn_no, turn in enumerate(q.turns, 1):
                server.replies = [CONDENSED[q.id]] if turn_no > 1 else []
                before = len(chat_prompts(server))
                ans = pipeline.answer(turn, AskOptions(llm="ollama"), history=history)
                for prompt in chat_prompts(server)[before:]:
                    role = "answer" if "<source" in prompt else "condense"
                    reply = scripted_reply("cited", prompt) if role == "answer" else CONDENSED[q.id]
                    entries.append({"id": q.id, "turn": turn_no, "role": role,
                                    "sources": source_labels(prompt), "reply": reply})
                history += [{"role": "user", "content": turn},
                            {"role": "assistant", "content": ans.answer}]
    out.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries), encoding="utf-8")
    print(f"wrote {len(entries)} replies to {out}")


if __name__ == "__main__" and sys.argv[1:2] == ["record"]:
    record(Path(sys.argv[2]) if len(sys.argv) > 2 else RECORDED / "faithful.jsonl")
