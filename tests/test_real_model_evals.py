"""`rag eval` with a real model in the loop, through both paths (the Ollama-protocol relay
and llama.cpp's OpenAI-compatible server): the real-model set passes its own thresholds
(evals/realmodel/thresholds.yaml), and the report says, per question, how the model's answer
ended, what it read and wrote, and how long it took."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_rag

SET = ROOT / "evals/realmodel/questions.yaml"


@pytest.mark.timeout(900)  # about 2 minutes each on 2 idle cores (evals/README.md)
@pytest.mark.parametrize("path", ["ollama", "openai"])
def test_a_real_model_passes_the_real_model_evals(seeded_settings: Any, llama: Any, relay: Any,
                                                  tmp_path: Path, path: str) -> None:
    env = {"RAG_HOME": str(seeded_settings.home), "RAG_K": "2", "RAG_NUM_PREDICT": "128"}
    env |= {"OLLAMA_HOST": relay.url, "RAG_MODEL": "smollm2:135m"} if path == "ollama" else \
        {"RAG_OPENAI_BASE_URL": f"{llama.url}/v1"}
    res = run_rag("eval", "--set", str(SET), "--llm", path, "--out", str(tmp_path), cwd=ROOT,
                  env=env, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = json.loads(next(tmp_path.glob("eval-*.json")).read_text())
    assert report["model"] in ("smollm2:135m", "SmolLM2-135M-Instruct")
    assert f"answerer {path}:{report['model']}" in res.stdout  # not "ollama:" for every server
    assert report["metrics"]["runaway_rate"]["value"] == 0.0, report["metrics"]["stopped_rate"]
    for row in report["questions"]:
        assert row["answerer"].startswith(f"{path}:") or row["answerer"] == "extractive"
        assert row["finish_reason"] in ("stop", "length") and isinstance(row["seconds"], float)
        assert isinstance(row["incomplete"], bool) and row["incomplete"] == (row["finish_reason"] == "length")
        if row["answerer"] != "extractive" and not row["abstained"]:
            assert row["budget"]["max_tokens"] > 0
            if row["usage"] is not None:  # the server's counts (none when rag stopped the stream)
                assert row["usage"]["prompt_tokens"] > 0 and row["usage"]["completion_tokens"] >= 0
