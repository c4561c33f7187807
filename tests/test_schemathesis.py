"""Schemathesis against the app's own OpenAPI schema: no request, valid or not, gets a 5xx.

The app is the real one (real Chroma index over seeds/, real embedding model), called in
process through schemathesis' ASGI transport, so nothing leaves the test process. Answers come
from the offline answerer: the app's default is llm "none", and generated requests that would
ask Ollama for an answer are pointed back at the offline answerer (a missing Ollama is a
documented 503, not the bug this test hunts). Bounded: at most MAX_EXAMPLES cases per operation.

Hypothesis only generates valid Unicode; the 500 that was found (a lone UTF-16 surrogate in a
chat message crashing the tokenizer) is pinned by the plain tests at the end.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

MAX_EXAMPLES = 25
BASE_URL = "http://testserver"  # schemathesis' in-process ASGI client: no socket at all


def _openapi() -> dict[str, Any]:
    """The app's OpenAPI document, taken without starting the app (its start-up loads the
    index); the same app is built over the seeded index for the calls (`client`)."""
    from rag.api.app import create_app
    from rag.config import Settings

    return create_app(Settings(llm="none")).openapi()


# schemathesis.pytest.from_fixture would build the schema from the seeded fixture directly, but
# it reads `request.node._nodeid`, which pytest 9 no longer has: the calls go through a fixture's
# in-process ASGI client instead.
OPENAPI = _openapi()
schema = schemathesis.openapi.from_dict(OPENAPI)
# Valid requests to the answering endpoints, most of which the whole schema's cases (valid or
# not) reject before anything is answered: here each one is answered.
answers = schemathesis.openapi.from_dict(
    OPENAPI, config=schemathesis.Config.from_dict({"generation": {"mode": "positive"}}),
).include(method="POST", path_regex=r"^/(ask|chat|v1/chat/completions)$")


@pytest.fixture(scope="module")
def client(seeded_settings):  # type: ignore[no-untyped-def]
    from schemathesis.python import asgi

    from rag.api.app import create_app, load_pipeline

    app_settings = seeded_settings.model_copy(update={"llm": "none"})
    app = create_app(app_settings, pipeline=load_pipeline(app_settings))
    with asgi.get_client(app) as session:
        yield session


def offline(case: Any) -> None:
    """Keep generated answer requests on the offline answerer (no Ollama in this test)."""
    body = case.body
    if not isinstance(body, dict):
        return
    if "llm" in body:
        body["llm"] = "none"
    if body.get("judge") == "ollama":  # the model judge needs Ollama too: 503 is its answer
        body["judge"] = "default"
    model = body.get("model")
    if case.path == "/v1/chat/completions" and isinstance(model, str) and model.startswith("rag:"):
        body["model"] = "rag-offline"


def a_question_last(case: Any) -> None:
    """A generated conversation ends with the user's question, as the endpoints require."""
    messages = case.body.get("messages") if isinstance(case.body, dict) else None
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        last = messages[-1]
        last["role"] = "user"
        if not isinstance(last.get("content"), str) or not last["content"].strip():
            last["content"] = "How does pipeline parallelism work?"


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(case: Any, client: Any) -> None:
    offline(case)
    case.call_and_validate(session=client, base_url=BASE_URL, checks=[not_a_server_error])


@answers.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_valid_question_gets_a_server_error(case: Any, client: Any) -> None:
    offline(case)
    a_question_last(case)
    response = case.call_and_validate(session=client, base_url=BASE_URL,
                                      checks=[not_a_server_error])
    assert response.status_code < 500


@pytest.mark.parametrize(("path", "body", "field"), [
    # content is `str | list[part] | None`: such unions let a lone surrogate through, and the
    # tokenizer raised TypeError on it (a 500)
    ("/v1/chat/completions", '{"model": "rag-offline", "messages": '
     '[{"role": "user", "content": "What is Skrull? \\ud83d"}]}', "messages.0.content"),
    ("/v1/chat/completions", '{"model": "rag-offline", "stream": true, "messages": [{"role": '
     '"user", "content": [{"type": "text", "text": "What is \\ud83d?"}]}]}', "messages.0.content.0.text"),
    ("/v1/chat/completions", '{"model": "rag:\\udfff", "messages": '
     '[{"role": "user", "content": "What is Skrull?"}]}', "model"),
    ("/ask", '{"question": "What is Skrull?", "year": "\\ud800"}', "year"),
    ("/chat", '{"messages": [{"role": "user", "content": "What is Skrull? \\ud83d"}]}',
     "messages.0.content"),
])
def test_lone_surrogates_are_bad_input_not_a_crash(client: Any, path: str, body: str,
                                                    field: str) -> None:
    """Hypothesis generates only valid Unicode, so schemathesis never sends these."""
    response = client.post(f"{BASE_URL}{path}", data=body.encode(),
                           headers={"Content-Type": "application/json"})
    # OpenAI's clients expect 400 for a malformed request; rag's own endpoints say 422
    assert response.status_code == (400 if path.startswith("/v1/") else 422), response.text
    error = response.json()["error"]
    message = error["message"] if isinstance(error, dict) else error
    assert f"{field}: the text holds a lone UTF-16 surrogate" in message


def test_surrogate_pairs_are_text(client: Any) -> None:
    response = client.post(f"{BASE_URL}/ask", headers={"Content-Type": "application/json"},
                           data=b'{"question": "What is Skrull? \\ud83d\\ude00", "llm": "none"}')
    assert response.status_code == 200, response.text
    assert response.json()["question"]["text"] == "What is Skrull? \U0001f600"
