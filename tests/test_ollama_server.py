"""Self-test of the Ollama stand-in: the real ``ollama`` client against real HTTP.

These tests also pin down which exceptions the ``ollama`` client (0.6.x, on
httpx 0.28) raises for each failure mode, so the project's error handling can
rely on them:

=============  ======================================  ==========================
failure        stream=True (raised while iterating)    stream=False
=============  ======================================  ==========================
unknown model  ollama.ResponseError, status_code 404   same
error500       ollama.ResponseError, status_code 500   same
cut            httpx.RemoteProtocolError, after some   httpx.RemoteProtocolError
               done=False chunks, never a done chunk
stall          httpx.ReadTimeout                       httpx.ReadTimeout
hang           httpx.ReadTimeout (/api/show too)       same
html           json.JSONDecodeError (/api/show too)    same
html502        ollama.ResponseError, status_code 502   same
hangup         httpx.RemoteProtocolError, no reply     same
refused        httpx.ConnectError                      builtin ConnectionError
=============  ======================================  ==========================

With stream=True nothing is sent until the returned generator is first
iterated, so even connection errors surface there, not at ``client.chat``.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import ollama
import pytest

# Import the server under one name, tests.ollama_server, however pytest set
# up sys.path: while tests/ has no __init__.py it adds tests/ itself rather
# than the project root.
_PROJECT_ROOT = str(Path(__file__).resolve().parents[1])
if _PROJECT_ROOT not in sys.path:
    sys.path.insert(0, _PROJECT_ROOT)

from tests.ollama_server import (  # noqa: E402
    CITATION_STYLES,
    INVENTED_NUMBER_CLAIM,
    NO_ANSWER,
    THINKING,
    UNCITED_CLAIM,
    OllamaTestServer,
    free_port_with_nothing_listening,
    parse_sources,
    scripted_reply,
    split_chunks,
)

# pyproject.toml turns warnings (so also leaked-socket ResourceWarnings) into errors.
pytestmark = pytest.mark.timeout(20)

MODEL = "llama3.2"  # no tag: the server must treat it as llama3.2:latest

SKRULL_ABSTRACT = (
    "Long-context supervised fine-tuning is an important stage of training large language "
    "models. Existing schedulers handle mixed sequence lengths poorly. We propose Skrull, a "
    "dynamic data scheduler that improves training throughput by 3.76 times on average. "
    "It is open source."
)
# Lowercase first sentence: the sentence with the number is the one quoted.
TINY_ABSTRACT = (
    "small models can be strong. On ARC the model reaches 43 percent accuracy with "
    "7 million parameters."
)


def source_block(n, label, abstract):
    """A source in the project's prompt format (the abstract runs to the closing tag)."""
    return (
        f'<source n="{n}">\n'
        f"label: {label}\n"
        f"title: A paper called {label}\n"
        f"authors: A. Author, B. Author\n"
        f"venue/year: arXiv 2025\n"
        f"abstract:\n"
        f"{abstract}\n"
        f"</source>"
    )


# Built the way the project builds its prompt: sources in the last user message.
PROMPT = "\n\n".join(
    [
        "Answer using only the sources below and cite them as [n].",
        source_block(1, "Skrull", SKRULL_ABSTRACT),
        source_block(2, "Tiny", TINY_ABSTRACT),
        source_block(3, "Third", "A third source is never quoted, not even 1000 times."),
        "Question: How does Skrull speed up fine-tuning?",
    ]
)

EXPECTED_CITED = (
    "We propose Skrull, a dynamic data scheduler that improves training throughput by 3.76 "
    "times on average [1]. On ARC the model reaches 43 percent accuracy with 7 million "
    "parameters [2]."
)

MESSAGES = [
    {"role": "system", "content": "You are a careful research assistant."},
    {"role": "user", "content": "An earlier question without sources."},
    {"role": "assistant", "content": "An earlier answer."},
    {"role": "user", "content": PROMPT},
]


@pytest.fixture
def server():
    with OllamaTestServer() as srv:
        yield srv


@pytest.fixture
def client(server):
    with ollama.Client(host=server.url, timeout=5) as cl:
        yield cl


def stream_chat(client, messages=MESSAGES, model=MODEL):
    return list(
        client.chat(model=model, messages=messages, stream=True, options={"temperature": 0})
    )


def content_of(parts):
    return "".join(p.message.content for p in parts)


# -- plain endpoints ------------------------------------------------------------


def test_root_and_version(server):
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/").text == "Ollama is running"
        assert http.head("/").status_code == 200
        assert http.get("/api/version").json() == {"version": "0.6.0"}
        assert http.get("/api/nothing").status_code == 404


def test_url_and_free_port(server):
    assert server.url == f"http://127.0.0.1:{server.port}"
    assert server.port != 0


def test_list(client):
    models = client.list().models
    assert [m.model for m in models] == ["llama3.2:latest"]
    assert models[0].details.family == "llama"
    assert models[0].size > 0 and len(models[0].digest) == 64


def test_list_configured_models():
    with (
        OllamaTestServer(models=("qwen2.5:7b", "llama3.2:latest")) as srv,
        ollama.Client(host=srv.url) as cl,
    ):
        assert [m.model for m in cl.list().models] == ["qwen2.5:7b", "llama3.2:latest"]
        cl.show("qwen2.5:7b")
        with pytest.raises(ollama.ResponseError):
            cl.show("qwen2.5")  # means qwen2.5:latest, which is not served


@pytest.mark.parametrize("name", ["llama3.2", "llama3.2:latest"])
def test_show_known_model(client, name):
    info = client.show(name)
    assert info.details.parameter_size == "3.2B"
    assert info.modelinfo["llama.context_length"] == 131072
    assert "completion" in info.capabilities


def test_show_unknown_model_is_404(client):
    with pytest.raises(ollama.ResponseError) as caught:
        client.show("mistral")
    assert caught.value.status_code == 404
    assert caught.value.error == "model 'mistral' not found"


# -- chat / generate, "cited" -----------------------------------------------------


def test_chat_streaming(client, server):
    parts = stream_chat(client)
    assert len(parts) > 3  # really split into several chunks
    assert all(not p.done for p in parts[:-1])
    last = parts[-1]
    assert last.done and last.done_reason == "stop"
    assert last.eval_count == len(parts) - 1 and last.total_duration > 0
    assert last.model == MODEL
    assert content_of(parts) == EXPECTED_CITED


def test_chat_non_streaming(client):
    reply = client.chat(model=MODEL, messages=MESSAGES, stream=False)
    assert reply.done and reply.done_reason == "stop"
    assert reply.message.role == "assistant"
    assert reply.message.content == EXPECTED_CITED


def test_generate_streaming_and_not(client):
    parts = list(client.generate(model=MODEL, prompt=PROMPT, stream=True))
    assert len(parts) > 3 and parts[-1].done and not any(p.done for p in parts[:-1])
    assert "".join(p.response for p in parts) == EXPECTED_CITED
    reply = client.generate(model=MODEL, prompt=PROMPT, stream=False)
    assert reply.done and reply.response == EXPECTED_CITED


def test_stream_defaults_to_true(server):
    # Real Ollama streams NDJSON when "stream" is absent.
    body = {"model": MODEL, "messages": MESSAGES}
    with (
        httpx.Client() as http,
        http.stream("POST", server.url + "/api/chat", json=body) as response,
    ):
        assert response.headers["transfer-encoding"] == "chunked"
        assert response.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in response.iter_lines()]
    assert len(lines) > 3 and lines[-1]["done"] is True and lines[-1]["done_reason"] == "stop"


def test_no_sources_means_no_answer(client):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    assert content_of(stream_chat(client, messages)) == NO_ANSWER


def test_requests_record_the_exact_prompt(client, server):
    stream_chat(client)
    request = server.requests[-1]
    assert request["path"] == "/api/chat" and request["method"] == "POST"
    assert request["body"]["messages"] == MESSAGES
    assert request["body"]["options"] == {"temperature": 0}
    assert request["body"]["stream"] is True
    assert server.last_prompt == PROMPT
    client.list()
    assert server.requests[-1] == {"method": "GET", "path": "/api/tags", "body": None}


def test_token_delay(client, server):
    server.token_delay = 0.05
    started = time.monotonic()
    parts = stream_chat(client)
    assert time.monotonic() - started >= 0.05 * (len(parts) - 2)


# -- scripted misbehaviour ------------------------------------------------------


def test_wrong_citation(client, server):
    server.behaviour = "wrong_citation"
    assert content_of(stream_chat(client)) == EXPECTED_CITED.replace("[2].", "[99].")


def test_wrong_number(client, server):
    server.behaviour = "wrong_number"
    answer = content_of(stream_chat(client))
    # Only the first number of the first sentence with a digit changes.
    first, second = answer.split(" [1]. ")
    assert "3.76" not in first and "times on average" in first
    assert second == "On ARC the model reaches 43 percent accuracy with 7 million parameters [2]."
    new_number = first.split("by ")[1].split(" ")[0]
    assert new_number not in parse_sources(PROMPT)[0][1]
    assert answer == EXPECTED_CITED.replace("3.76", new_number)


def test_wrong_number_without_digits_invents_one():
    prompt = (
        '<source n="1">\nlabel: X\nabstract:\nWe study Widgets carefully. Nothing more.\n</source>'
    )
    assert (
        scripted_reply("wrong_number", prompt)
        == f"We study Widgets carefully [1]. {INVENTED_NUMBER_CLAIM}"
    )


def test_wrong_number_avoids_numbers_in_the_abstract():
    # Shifting 3 by 6 gives 9, which the abstract already contains.
    prompt = '<source n="1">\nabstract:\nIt scores 3 points. Others score 9 points.\n</source>'
    answer = scripted_reply("wrong_number", prompt)
    assert answer.startswith("It scores ") and answer.endswith(" points [1].")
    assert answer.split()[2] not in {"3", "9"}


def test_uncited(client, server):
    server.behaviour = "uncited"
    assert content_of(stream_chat(client)) == f"{EXPECTED_CITED} {UNCITED_CLAIM}"


def test_sentence_choice_and_single_source():
    # No number and no capitalised name anywhere: the first sentence is used.
    prompt = '<source n="4">\nabstract:\nwe find that scaling helps. it also costs more.\n</source>'
    assert scripted_reply("cited", prompt) == "we find that scaling helps. it also costs more [4]."
    assert scripted_reply("cited", "") == NO_ANSWER


def test_error500(client, server):
    server.behaviour = "error500"
    for stream in (True, False):
        with pytest.raises(ollama.ResponseError) as caught:
            reply = client.chat(model=MODEL, messages=MESSAGES, stream=stream)
            if stream:
                list(reply)
        assert caught.value.status_code == 500
        assert caught.value.error == "llama runner process has terminated"


@pytest.mark.parametrize(
    "behaviour", ["cited", "wrong_citation", "wrong_number", "uncited", "cut", "stall", "error500"]
)
@pytest.mark.parametrize("stream", [True, False])
def test_unknown_model_is_404_for_every_behaviour(client, server, behaviour, stream):
    server.behaviour = behaviour
    server.replies = ["recorded"]
    with pytest.raises(ollama.ResponseError) as caught:
        reply = client.chat(model="mistral", messages=MESSAGES, stream=stream)
        if stream:
            list(reply)
    assert caught.value.status_code == 404
    assert caught.value.error == "model 'mistral' not found"
    assert server.replies == ["recorded"]  # a 404 does not consume a recorded reply


def test_cut_streaming(client, server):
    server.behaviour = "cut"
    received = []
    # What actually happens: the complete lines sent before the hang-up are
    # yielded (all done=False), then httpx raises RemoteProtocolError
    # ("incomplete chunked read"), which the ollama client does not wrap.
    with pytest.raises(httpx.RemoteProtocolError):
        for part in client.chat(model=MODEL, messages=MESSAGES, stream=True):
            received.append(part)
    assert received and not any(p.done for p in received)
    full = split_chunks(EXPECTED_CITED)
    assert content_of(received) == "".join(full[: len(full) // 2])


def test_cut_non_streaming(client, server):
    server.behaviour = "cut"
    # No response at all -> httpx.RemoteProtocolError("Server disconnected
    # without sending a response."), not wrapped by the ollama client.
    with pytest.raises(httpx.RemoteProtocolError):
        client.chat(model=MODEL, messages=MESSAGES, stream=False)
    with pytest.raises(httpx.RemoteProtocolError):
        client.generate(model=MODEL, prompt=PROMPT, stream=False)


@pytest.mark.parametrize("stream", [True, False])
def test_stall_times_out(server, stream):
    server.behaviour = "stall"
    with ollama.Client(host=server.url, timeout=1) as slow:
        # The other endpoints keep answering immediately.
        assert slow.list().models and slow.show(MODEL).details
        # The stall (30 s) outlasts the client's timeout (1 s): only that timeout ends it.
        with pytest.raises(httpx.ReadTimeout):  # not wrapped by the ollama client
            reply = slow.chat(model=MODEL, messages=MESSAGES, stream=stream)
            if stream:
                list(reply)


@pytest.mark.parametrize("stream", [True, False])
def test_servers_that_are_not_ollama(server, stream):
    def chat(client):
        reply = client.chat(model=MODEL, messages=MESSAGES, stream=stream)
        return list(reply) if stream else reply

    with ollama.Client(host=server.url, timeout=1) as quick:
        server.behaviour = "hang"  # every request, the model's details too
        for call in (lambda: quick.show(MODEL), lambda: chat(quick)):
            with pytest.raises(httpx.ReadTimeout):
                call()
        server.behaviour = "html"
        for call in (lambda: quick.show(MODEL), lambda: chat(quick)):
            with pytest.raises(json.JSONDecodeError) as caught:
                call()
            assert "Welcome to nginx!" in caught.value.doc
        server.behaviour = "html502"
        with pytest.raises(ollama.ResponseError) as caught:
            chat(quick)
        assert caught.value.status_code == 502 and "<title>502 Bad Gateway" in caught.value.error
        server.behaviour = "hangup"
        assert quick.show(MODEL).details
        with pytest.raises(httpx.RemoteProtocolError):
            chat(quick)


@pytest.mark.parametrize("stream", [True, False])
def test_refused_port(stream):
    port = free_port_with_nothing_listening()
    with ollama.Client(host=f"http://127.0.0.1:{port}", timeout=2) as dead:
        if stream:
            # The streaming path does not translate httpx errors.
            with pytest.raises(httpx.ConnectError):
                list(dead.chat(model=MODEL, messages=MESSAGES, stream=True))
        else:
            # The non-streaming path turns httpx.ConnectError into the builtin
            # ConnectionError (not a subclass of httpx.ConnectError).
            with pytest.raises(ConnectionError) as caught:
                dead.chat(model=MODEL, messages=MESSAGES, stream=False)
            assert not isinstance(caught.value, httpx.HTTPError)
            with pytest.raises(ConnectionError):
                dead.list()


def test_stop_interrupts_a_stall_and_does_not_hang():
    srv = OllamaTestServer(behaviour="stall").start()
    srv.stall_seconds = 120  # far longer than stop() waits for its handlers
    outcome = []

    def ask():
        with ollama.Client(host=srv.url, timeout=60) as cl:
            try:
                cl.chat(model=MODEL, messages=MESSAGES, stream=False)
            except Exception as exc:  # noqa: BLE001 - recorded for the assertion below
                outcome.append(exc)

    asker = threading.Thread(target=ask)
    asker.start()
    deadline = time.monotonic() + 30
    while not srv.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    handlers = list(srv._connections.values())
    assert handlers
    srv.stop(timeout=30)
    # stop() waits for the handlers with a bound; they ended because it interrupted the stall
    assert not any(thread.is_alive() for thread in handlers)
    asker.join(30)
    assert not asker.is_alive()
    # The stalled request is hung up on without a response.
    assert len(outcome) == 1 and isinstance(outcome[0], httpx.RemoteProtocolError)
    srv.stop()  # idempotent


def test_behaviour_is_validated(server):
    with pytest.raises(ValueError):
        server.behaviour = "cheerful"
    with pytest.raises(ValueError):
        OllamaTestServer(behaviour="nope")


# -- recorded replies -----------------------------------------------------------


def test_recorded_replies_are_consumed_in_order(client, server):
    server.behaviour = "error500"  # recorded replies win over the behaviour
    server.replies = [
        "First recorded answer [1].",
        "Second one, which is a bit longer [2].",
        "Third.",
    ]
    assert content_of(stream_chat(client)) == "First recorded answer [1]."
    assert (
        client.generate(model=MODEL, prompt="x", stream=False).response
        == "Second one, which is a bit longer [2]."
    )
    assert client.chat(model=MODEL, messages=MESSAGES, stream=False).message.content == "Third."
    assert server.replies == []
    with pytest.raises(ollama.ResponseError):
        client.chat(model=MODEL, messages=MESSAGES, stream=False)  # back to the behaviour


def test_split_chunks_round_trip():
    for text in ["", "one", "  leading and trailing  ", EXPECTED_CITED, "a\nb  c\td e f g"]:
        assert "".join(split_chunks(text)) == text
    assert len(split_chunks(EXPECTED_CITED)) > 3


# -- command line -----------------------------------------------------------------


def test_cli_serves_recorded_replies(tmp_path):
    replies = tmp_path / "replies.jsonl"
    replies.write_text(
        json.dumps({"reply": "From the file [1]."})
        + "\n\n"
        + json.dumps({"reply": "Second."})
        + "\n"
    )
    port = free_port_with_nothing_listening()
    script = Path(__file__).with_name("ollama_server.py")  # run by path, as documented
    with subprocess.Popen(
        [sys.executable, str(script), "--port", str(port), "--replies-file", str(replies)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    ) as proc:
        try:
            assert proc.stdout.readline().strip() == f"http://127.0.0.1:{port}"
            with ollama.Client(host=f"http://127.0.0.1:{port}", timeout=5) as cl:
                assert content_of(stream_chat(cl)) == "From the file [1]."
                assert (
                    cl.chat(model=MODEL, messages=MESSAGES, stream=False).message.content
                    == "Second."
                )
                assert (
                    cl.chat(model=MODEL, messages=MESSAGES, stream=False).message.content
                    == EXPECTED_CITED
                )
        finally:
            proc.send_signal(signal.SIGINT)  # Ctrl-C
            try:
                code = proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()  # never leave it running
                raise
            assert code == 0


# -- reasoning models, citation styles, token limits, structured output ----------------------


def test_think_tags_are_cut_between_chunks(client, server):
    server.behaviour = "think_tags"
    parts = stream_chat(client)
    text = content_of(parts)
    assert text == f"<think>\n{THINKING}\n</think>\n\n{EXPECTED_CITED}"
    assert "<think>" not in [p.message.content for p in parts]  # the tag arrives in pieces


def test_unterminated_think_stops_at_the_token_limit(client, server):
    server.behaviour = "think_unterminated"
    parts = stream_chat(client)
    assert content_of(parts) == f"<think>\n{THINKING}" and parts[-1].done_reason == "length"


def test_close_only_comes_with_a_template_that_opens_the_block(client, server):
    server.behaviour = "think_close_only"
    assert client.show(MODEL).template.endswith("<think>\n")
    assert content_of(stream_chat(client)) == f"{THINKING}\n</think>\n\n{EXPECTED_CITED}"
    server.behaviour = "cited"
    assert "<think>" not in client.show(MODEL).template


def test_think_inline_sits_between_two_sentences(client, server):
    server.behaviour = "think_inline"
    first, second = EXPECTED_CITED.split(". ", 1)
    assert content_of(stream_chat(client)) == f"{first}. <think>{THINKING}</think> {second}"


@pytest.mark.parametrize(("think", "thinking", "content"), [
    (True, THINKING, EXPECTED_CITED),  # Ollama >= 0.9: apart, in message.thinking
    (None, "", f"<think>{THINKING}</think>\n\n{EXPECTED_CITED}"),  # no `think`: in the content
    (False, "", EXPECTED_CITED),  # reasoning turned off
])
def test_think_field_follows_the_think_option(client, server, think, thinking, content):
    server.behaviour = "think_field"
    parts = list(client.chat(model=MODEL, messages=MESSAGES, stream=True, think=think))
    assert "".join(p.message.thinking or "" for p in parts) == thinking
    assert content_of(parts) == content
    assert all(not p.message.content for p in parts if p.message.thinking)  # thinking comes first


@pytest.mark.parametrize(("style", "expected"), [
    ("cite_source_brackets", "[Source 1]"), ("cite_source_parens", "(Source 1)"),
    ("cite_lenticular", "【1】"), ("cite_footnote", "[^1]"), ("cite_range", "[1-3]"),
    ("cite_adjacent", "[1][2]"), ("cite_bare_parens", "(1)"), ("cite_sources_list", "[Sources 1]"),
    ("cite_source_colon", "Source 1: We propose Skrull"),
])
def test_each_citation_style(client, server, style, expected):
    assert style in CITATION_STYLES
    server.behaviour = style
    text = content_of(stream_chat(client))
    assert expected in text and "3.76" in text
    assert "[1]" not in text or style == "cite_adjacent"  # "[1][2]" holds a canonical marker


def test_cite_reversed_cites_the_third_source_first(client, server):
    server.behaviour = "cite_reversed"
    text = content_of(stream_chat(client))
    assert text.index("[3]") < text.index("[1]") and "[2]" not in text


def test_num_predict_and_length_cut_the_answer_with_done_reason_length(client, server):
    parts = list(client.chat(model=MODEL, messages=MESSAGES, stream=True, options={"num_predict": 4}))
    assert len(parts) == 5 and parts[-1].done_reason == "length" and parts[-1].eval_count == 4
    server.behaviour = "length"
    parts = stream_chat(client)
    assert parts[-1].done_reason == "length" and content_of(parts) in EXPECTED_CITED + " " + EXPECTED_CITED
    assert content_of(parts) != EXPECTED_CITED


def test_final_chunk_counts_prompt_and_answer(client):
    parts = stream_chat(client)
    tokens = sum(len(m["content"]) // 4 + 8 for m in MESSAGES)  # the stand-in's count
    assert parts[-1].prompt_eval_count == tokens and parts[-1].eval_count == len(parts) - 1


def test_structured_output_answers_the_judges_schema(client):
    schema = {"type": "object", "properties": {"supported": {"type": "boolean"},
                                               "quote": {"type": "string"}}}
    ask = ("<source>\n" + SKRULL_ABSTRACT + "\n</source>\n<claim>\n{}\n</claim>").format
    yes = client.chat(model=MODEL, messages=[{"role": "user", "content": ask(
        "Skrull improves training throughput by 3.76 times.")}], format=schema)
    assert json.loads(yes.message.content) == {"supported": True, "quote": SKRULL_ABSTRACT.split(". ")[2] + "."}
    no = client.chat(model=MODEL, messages=[{"role": "user", "content": ask(
        "Quantum annealing halves memory bandwidth.")}], format=schema)
    assert json.loads(no.message.content) == {"supported": False, "quote": ""}
