"""A scripted stand-in for the Ollama HTTP API, for tests.

The production code talks to Ollama through the official ``ollama`` client
over real HTTP.  Rather than mocking that client, tests point it at an
:class:`OllamaTestServer`: a real ``http.server`` on 127.0.0.1 that speaks the
parts of the Ollama protocol the project uses (``/api/tags``, ``/api/show``,
``/api/chat``, ``/api/generate``, ``/api/version``) and answers chat/generate
requests according to a scripted *behaviour* (see :data:`BEHAVIOURS`) or with
recorded replies (:attr:`OllamaTestServer.replies`), or, in relay mode
(``OllamaTestServer(relay=URL)``), with real generations from llama.cpp's server at URL
(tests/ollama_relay.py, which lists how the relay differs from Ollama). Recorded replies
and the failure behaviours stay available in relay mode: a reply or a behaviour other than
"cited" answers instead of the model.

Typical use::

    with OllamaTestServer(behaviour="cited") as server:
        client = ollama.Client(host=server.url, timeout=5)
        ...
        server.requests[-1]["body"]["messages"]   # exactly what was sent

Standard library only.  Import it as ``tests.ollama_server`` or load it by
path; run it directly for a manual server (``python tests/ollama_server.py
--help``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import signal
import socket
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "BEHAVIOURS",
    "HTML_PAGES",
    "NOT_OLLAMA",
    "NO_ANSWER",
    "UNCITED_CLAIM",
    "OllamaTestServer",
    "free_port_with_nothing_listening",
    "parse_sources",
    "scripted_reply",
    "split_chunks",
]

#: Accepted values of :attr:`OllamaTestServer.behaviour`.
BEHAVIOURS = ("cited", "wrong_citation", "wrong_number", "uncited", "cut", "stall", "error500")
#: Reasoning models, as their documented formats put it: <think> before the answer
#: (DeepSeek-R1, Qwen3 on older Ollama), left open (a model that runs out of tokens while
#: reasoning), closed only (a template that opens the block in the prompt: /api/show's
#: template then ends in <think>), between two sentences, and apart in message.thinking
#: when the request sets ``think`` (Ollama >= 0.9; without ``think`` it comes in <think>).
REASONING = ("think_tags", "think_unterminated", "think_close_only", "think_inline", "think_field")
#: Citation styles models use instead of ``[n]`` (see :func:`cite_in_style`), a model that
#: cites its second claim's source first, and a long answer cut by num_predict.
CITATION_STYLES = ("cite_source_brackets", "cite_source_parens", "cite_source_colon",
                   "cite_lenticular", "cite_footnote", "cite_range", "cite_adjacent",
                   "cite_bare_parens", "cite_sources_list")
BEHAVIOURS += REASONING + CITATION_STYLES + ("cite_reversed", "length")
#: Servers that are not (or no longer) a working Ollama: every POST (/api/show too) says
#: nothing for ``stall_seconds`` ("hang"), or gets a web server's page ("html": 200,
#: "html502": a proxy's 502); "hangup": chat/generate close the connection without a reply.
NOT_OLLAMA = ("hang", "html", "html502")
BEHAVIOURS += NOT_OLLAMA + ("hangup",)
#: The pages "html" and "html502" send, as nginx does.
HTML_PAGES = {
    "html": (200, "<html><head><title>Welcome to nginx!</title></head><body><h1>Welcome to "
                  "nginx!</h1><p>If you see this page, the nginx web server is successfully "
                  "installed and working.</p></body></html>\n"),
    "html502": (502, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
                     "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.24.0"
                     "</center>\r\n</body>\r\n</html>\r\n" + "<!-- padding -->\r\n" * 20),
}
#: The reasoning every reasoning behaviour writes: sentences a judge would check, a
#: citation of a source that does not exist, and a number.
THINKING = ("Okay, the user asks about these papers. Source [7] looks relevant, so maybe "
            "I cite it. Wait, 5 of the abstracts mention something; let me check again.")

#: The "cited" reply when the prompt holds no ``<source>`` blocks.
NO_ANSWER = "The provided abstracts do not answer this question."
#: The sentence the "uncited" behaviour appends.
UNCITED_CLAIM = "It also reduces energy use by half."
#: What "wrong_number" appends when the answer holds no digit to corrupt.
INVENTED_NUMBER_CLAIM = "It is 97% faster [1]."
#: Error text of a crashed runner, as real Ollama reports it.
RUNNER_ERROR = "llama runner process has terminated"

_WORDS_PER_CHUNK = 3
_MODIFIED_AT = "2025-01-15T10:20:30.123456Z"
_DETAILS = {
    "parent_model": "",
    "format": "gguf",
    "family": "llama",
    "families": ["llama"],
    "parameter_size": "3.2B",
    "quantization_level": "Q4_K_M",
}

# An embedding model as Ollama's library has them (nomic-embed-text, mxbai-embed-large):
# /api/tags lists it beside the chat models.
_EMBED_DETAILS = {**_DETAILS, "family": "nomic-bert", "families": ["nomic-bert"],
                  "parameter_size": "137M", "quantization_level": "F16"}


def _is_embedding(name: str) -> bool:
    return "embed" in name


# ---------------------------------------------------------------------------
# Scripted replies (pure functions, usable by tests to compute expectations)
# ---------------------------------------------------------------------------

_SOURCE_RE = re.compile(r'<source n="(\d+)">(.*?)</source>', re.S)
_ABSTRACT_RE = re.compile(r"^abstract:[ \t]*(.*)", re.S | re.M)
# A sentence ends at . ! or ? followed by whitespace and something that can
# start a sentence.  Requiring that next character keeps "3.76" and "e.g. the"
# in one piece.
_SENTENCE_BREAK_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")


def parse_sources(prompt: str) -> list[tuple[int, str]]:
    """Return ``(n, abstract)`` for each ``<source n="...">`` block in *prompt*.

    The abstract is the text between the ``abstract:`` line and the closing
    tag, stripped.  Blocks without an ``abstract:`` line get ``""``.
    """
    sources = []
    for match in _SOURCE_RE.finditer(prompt):
        abstract = _ABSTRACT_RE.search(match.group(2))
        sources.append((int(match.group(1)), abstract.group(1).strip() if abstract else ""))
    return sources


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_BREAK_RE.split(text.strip()) if s]


def _has_capitalised_name(sentence: str) -> bool:
    # The sentence's first word is capitalised anyway, so it does not count.
    return any(
        word.lstrip("(\"'[").startswith(tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
        for word in sentence.split()[1:]
    )


def _pick_sentence(abstract: str) -> str:
    """The abstract's first sentence with a number or a name, else its first."""
    sentences = _sentences(abstract)
    for sentence in sentences:
        if re.search(r"\d", sentence) or _has_capitalised_name(sentence):
            return sentence
    return sentences[0]


def _strip_final_period(sentence: str) -> str:
    sentence = sentence.rstrip()
    return sentence[:-1] if sentence.endswith(".") else sentence


def _claims(prompt: str) -> list[tuple[int, str, str]]:
    """``(n, abstract, sentence-without-final-period)`` for the first 2 usable sources."""
    claims = []
    for n, abstract in parse_sources(prompt):
        if abstract:
            claims.append((n, abstract, _strip_final_period(_pick_sentence(abstract))))
        if len(claims) == 2:
            break
    return claims


def _join(claims: list[tuple[int, str, str]]) -> str:
    return " ".join(f"{sentence} [{n}]." for n, _, sentence in claims)


def _different_number(number: str, abstract: str) -> str:
    """A number that differs from *number* and does not occur in *abstract*.

    Every digit is shifted by the same amount (3.76 -> 9.32 with a shift of
    6), so the result has the same shape and differs in every digit.
    """
    taken = set(_NUMBER_RE.findall(abstract))
    for shift in (6, 5, 4, 3, 2, 1, 7, 8, 9):
        candidate = "".join(str((int(c) + shift) % 10) if c.isdigit() else c for c in number)
        integer_part = candidate.split(".")[0]
        if len(integer_part) > 1 and integer_part.startswith("0"):
            continue  # "09" would read oddly; try another shift
        if candidate not in taken:
            return candidate
    candidate = number + "7"  # practically unreachable: every shift is in the abstract
    while candidate in taken:
        candidate += "7"
    return candidate


def cite_in_style(style: str, claims: list[tuple[int, str, str]], n_sources: int) -> str:
    """The claims (``(n, abstract, sentence)``) cited in one of :data:`CITATION_STYLES`."""
    first = claims[0][0]
    if style == "cite_range":  # the first claim's source and the ones after it, as a range
        last = min(first + 2, n_sources)
        return _join(claims[1:]) if last == first else " ".join(
            [f"{claims[0][2]} [{first}-{last}]."] + [f"{s} [{n}]." for n, _, s in claims[1:]])
    if style == "cite_adjacent":  # every claim's source cited on the first claim, [1][2]
        marks = "".join(f"[{n}]" for n, _, _ in claims)
        return " ".join([f"{claims[0][2]} {marks}."] + [f"{s} [{n}]." for n, _, s in claims[1:]])
    if style == "cite_source_colon":
        return "\n".join(f"Source {n}: {s}." for n, _, s in claims)
    form = {"cite_source_brackets": "[Source {n}]", "cite_source_parens": "(Source {n})",
            "cite_lenticular": "【{n}】", "cite_footnote": "[^{n}]", "cite_bare_parens": "({n})",
            "cite_sources_list": "[Sources {n}]"}[style]
    return " ".join(f"{s} {form.format(n=n)}." for n, _, s in claims)


def scripted_verdict(prompt: str) -> dict:
    """A judge's structured reply ({"supported", "quote"}) to a prompt holding a <source>
    block and a <claim> block: supported when 80% of the claim's words of 4+ letters are in
    the abstract; the quote is the abstract sentence sharing most of them."""
    source = re.search(r"<source>\s*(.*?)\s*</source>", prompt, re.S)
    claim = re.search(r"<claim>\s*(.*?)\s*</claim>", prompt, re.S)
    if not source or not claim:
        return {"supported": False, "quote": ""}

    def words(text: str) -> set[str]:
        return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 4}

    wanted = words(claim.group(1))
    sentences = _sentences(source.group(1)) or [""]
    best = max(sentences, key=lambda x: len(wanted & words(x)))
    supported = bool(wanted) and len(wanted & words(source.group(1))) >= 0.8 * len(wanted)
    return {"supported": supported, "quote": best if supported else ""}


def scripted_thinking(behaviour: str) -> str:
    """The reasoning a behaviour writes (not part of :func:`scripted_reply`'s answer text)."""
    return THINKING if behaviour in REASONING else ""


def scripted_reply(behaviour: str, prompt: str) -> str:
    """The full answer text a behaviour produces for *prompt*.

    *prompt* is the text holding the ``<source>`` blocks (the last user
    message for chat, ``prompt`` for generate).  "cut", "stall" and
    "error500" answer (or start answering) with the "cited" text.
    """
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"unknown behaviour {behaviour!r}; expected one of {BEHAVIOURS}")
    claims = _claims(prompt)
    if behaviour in CITATION_STYLES:
        return cite_in_style(behaviour, claims, len(parse_sources(prompt))) if claims else NO_ANSWER
    if behaviour == "cite_reversed":  # cites its third source first, its first second
        sources = parse_sources(prompt)
        picked = [(n, a, _strip_final_period(_pick_sentence(a))) for n, a in sources if a]
        if len(picked) >= 2:
            return _join([picked[min(2, len(picked) - 1)], picked[0]])
    if behaviour == "length":  # long: every usable source, cut by num_predict in _complete
        sources = [(n, a, _strip_final_period(_pick_sentence(a))) for n, a in parse_sources(prompt) if a]
        return _join(sources) or NO_ANSWER
    if behaviour == "think_unterminated":  # ran out of tokens while reasoning: no answer
        return f"<think>\n{THINKING}"
    if behaviour in ("think_tags", "think_close_only", "think_inline"):
        answer = _join(claims) or NO_ANSWER
        if behaviour == "think_tags":
            return f"<think>\n{THINKING}\n</think>\n\n{answer}"
        if behaviour == "think_close_only":
            return f"{THINKING}\n</think>\n\n{answer}"
        first, _, rest = answer.partition(". ")  # after the first sentence, or at the end
        return f"{first}. <think>{THINKING}</think> {rest}" if rest else f"{answer} <think>{THINKING}</think>"
    if behaviour == "wrong_citation":
        if not claims:
            return NO_ANSWER  # no source to cite, so nothing to cite wrongly
        n, abstract, sentence = claims[-1]
        claims[-1] = (99, abstract, sentence)
        return _join(claims)
    if behaviour == "wrong_number":
        for i, (n, abstract, sentence) in enumerate(claims):
            match = _NUMBER_RE.search(sentence)
            if match:
                new = _different_number(match.group(), abstract)
                claims[i] = (n, abstract, sentence[: match.start()] + new + sentence[match.end() :])
                return _join(claims)
        return f"{_join(claims) or NO_ANSWER} {INVENTED_NUMBER_CLAIM}"
    cited = _join(claims) or NO_ANSWER
    if behaviour == "uncited":
        return f"{cited} {UNCITED_CLAIM}"
    return cited


def split_chunks(text: str, words_per_chunk: int = _WORDS_PER_CHUNK) -> list[str]:
    """Split *text* into streamed pieces of a few words; they join back to *text*."""
    words = re.findall(r"\s*\S+\s*", text)
    if not words:
        return [text]
    return ["".join(words[i : i + words_per_chunk]) for i in range(0, len(words), words_per_chunk)]


def _prompt_text(path: str, body: dict) -> str:
    """The text the sources are read from: the last user message, or ``prompt``."""
    if path == "/api/generate":
        return str(body.get("prompt") or "")
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def _prompt_tokens(path: str, body: dict) -> int:
    """What prompt_eval_count counts here: a token per four characters of every message (a
    stand-in for a tokenizer; English prose runs at 4 to 5), cut to half of num_ctx when it
    exceeds num_ctx, as Ollama cuts a prompt."""
    if path == "/api/generate":
        texts = [str(body.get("prompt") or "")]
    else:
        texts = [str(m.get("content") or "") for m in body.get("messages") or [] if isinstance(m, dict)]
    tokens = sum(len(t) // 4 + 8 for t in texts)
    num_ctx = (body.get("options") or {}).get("num_ctx")
    return num_ctx // 2 + 2 if isinstance(num_ctx, int) and tokens > num_ctx else tokens


def _normalise_model(name: str) -> str:
    # Ollama treats a name without a tag as "<name>:latest".  Only look for
    # the tag in the last path segment: "host:port/ns/model" has a colon too.
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def _now() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


# ---------------------------------------------------------------------------
# HTTP plumbing
# ---------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that tracks its connections so stop() can end them."""

    daemon_threads = True

    def __init__(self, owner: OllamaTestServer, address: tuple[str, int]):
        self.owner = owner
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind() calls socket.getfqdn(), a reverse DNS
        # lookup that can take seconds on a machine without network.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def process_request(self, request, client_address) -> None:
        # Same as ThreadingMixIn.process_request, but the thread and socket
        # are registered before the thread starts, so stop() cannot miss one.
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            daemon=True,
            name=f"ollama-test-server-conn-{client_address[1]}",
        )
        self.owner._track(request, thread)
        thread.start()

    def shutdown_request(self, request) -> None:
        self.owner._untrack(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address) -> None:
        # A client hanging up (timeouts, cut tests, stop()) is expected here;
        # only report real bugs in the handler.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 is needed for chunked transfer encoding (and gives keep-alive,
    # like the real server).
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    @property
    def owner(self) -> OllamaTestServer:
        return self.server.owner

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib name)
        if self.owner.verbose:
            super().log_message(format, *args)

    # -- dispatch ----------------------------------------------------------

    def do_HEAD(self) -> None:
        path = urlsplit(self.path).path
        self.owner._record("HEAD", path, None)
        if path == "/":
            self._send_headers(200, "text/plain; charset=utf-8", len(b"Ollama is running"))
        else:
            self._send_headers(404, "text/plain; charset=utf-8", 0)

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self.owner._record("GET", path, None)
        if path == "/":
            self._send_text(200, "Ollama is running")
        elif path == "/api/version":
            self._send_json(200, {"version": "0.6.0"})
        elif path == "/api/tags":
            self._send_json(200, {"models": [self.owner._tag_entry(m) for m in self.owner.models]})
        else:
            self._send_text(404, "404 page not found")

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError as exc:
            self.owner._record("POST", path, None)
            self._send_json(400, {"error": f"invalid request body: {exc}"})
            return
        self.owner._record("POST", path, body)
        if self.owner.behaviour in NOT_OLLAMA:
            self._not_ollama()
        elif not isinstance(body, dict):
            self._send_json(400, {"error": "request body must be a JSON object"})
        elif path == "/api/show":
            self._show(body)
        elif path in ("/api/chat", "/api/generate") and self._relayed(body):
            self._relay(path, body)
        elif path in ("/api/chat", "/api/generate"):
            self._complete(path, body)
        else:
            self._send_text(404, "404 page not found")

    # -- endpoints ---------------------------------------------------------

    def _relayed(self, body: dict) -> bool:
        """Does the real model answer this request (relay mode, no recorded reply waiting,
        no failure asked for, a model the server has)?"""
        owner = self.owner
        return (owner.relay is not None and owner.behaviour == "cited" and not owner.replies
                and owner._find_model(str(body.get("model") or "")) is not None)

    def _relay(self, path: str, body: dict) -> None:
        owner = self.owner
        assert owner.relay is not None
        model = str(body.get("model"))
        stream = body.get("stream", True) is not False
        with owner._relay_lock:  # llama.cpp's one slot: one request at a time, as queued
            try:
                if stream:
                    self._send_headers(200, "application/x-ndjson", chunked=True)
                text = []
                for piece, final in owner.relay.generate(path, body):
                    if final is None:
                        text.append(piece)
                        if stream:
                            self._write_chunk(self._piece(path, model, piece))
                        continue
                    out = self._piece(path, model, "" if stream else "".join(text))
                    out.update(final, done=True)
                    if stream:
                        self._write_chunk(out)
                        self.wfile.write(b"0\r\n\r\n")
                    else:
                        self._send_json(200, out)
            except (OSError, ValueError) as exc:  # the client hung up, or llama.cpp failed
                if not stream:
                    self._send_json(500, {"error": f"relay: {exc}"})
                else:
                    self._abort()
            finally:
                with owner._streams_changed:
                    owner.ended_streams += 1
                    owner._streams_changed.notify_all()

    def _show(self, body: dict) -> None:
        name = str(body.get("model") or body.get("name") or "")  # "name" is the legacy field
        if self.owner._find_model(name) is None:
            self._send_json(404, {"error": f"model '{name}' not found"})
            return
        if self.owner.relay is not None:
            self._send_json(200, self.owner.relay.show(name))
            return
        self._send_json(
            200,
            {
                "license": "LLAMA 3.2 COMMUNITY LICENSE AGREEMENT (test stand-in)",
                "modelfile": f"# Modelfile generated by OllamaTestServer\nFROM {name}\n",
                "parameters": 'stop                           "<|eot_id|>"',
                "template": self.owner.template,
                "details": _EMBED_DETAILS if _is_embedding(name) else _DETAILS,
                "model_info": {
                    "general.architecture": "llama",
                    "general.parameter_count": 3212749888,
                    "llama.context_length": 131072,
                    "llama.embedding_length": 3072,
                },
                # what Ollama (0.6+) reports: an embedding model cannot write text
                "capabilities": ["embedding"] if _is_embedding(name) else ["completion", "tools"],
                "modified_at": _MODIFIED_AT,
            },
        )

    def _not_ollama(self) -> None:
        behaviour = self.owner.behaviour
        if behaviour == "hang":
            self.owner._stop_event.wait(self.owner.stall_seconds)
            self._abort()
            return
        status, page = HTML_PAGES[behaviour]
        data = page.encode()
        self._send_headers(status, "text/html", len(data))
        self.wfile.write(data)

    def _complete(self, path: str, body: dict) -> None:
        """/api/chat and /api/generate: the scripted part of the server."""
        owner = self.owner
        model = str(body.get("model") or "")
        if not model:
            self._send_json(400, {"error": "model is required"})
            return
        # Checked before anything else: an unknown model is a 404 whatever
        # the behaviour, and does not consume a recorded reply.
        if owner._find_model(model) is None:
            self._send_json(404, {"error": f"model '{model}' not found"})
            return
        stream = body.get("stream", True) is not False  # Ollama streams by default

        recorded = owner._pop_reply()
        behaviour = "recorded" if recorded is not None else owner.behaviour
        if behaviour == "error500":
            self._send_json(500, {"error": RUNNER_ERROR})
            return
        if behaviour == "hangup":
            self._abort()
            return
        # "stall" says nothing (not even headers) so the client's read timeout
        # fires.  Event.wait rather than sleep so that stop() interrupts it.
        if behaviour == "stall" and owner._stop_event.wait(owner.stall_seconds):
            self._abort()
            return
        pieces = recorded if isinstance(recorded, list) else None  # streamed as cut
        if recorded is not None:
            text = "".join(pieces) if pieces is not None else recorded
        elif isinstance(body.get("format"), dict):  # structured output: the judge's verdict
            text = json.dumps(scripted_verdict(_prompt_text(path, body)))
        else:
            text = scripted_reply(behaviour, _prompt_text(path, body))
        started = time.monotonic_ns()

        if not stream:
            if behaviour == "cut":
                self._abort()  # close without sending any response at all
                return
            self._send_json(
                200, self._final(path, model, text, started, eval_count=len(split_chunks(text)))
            )
            return

        thinking = scripted_thinking(behaviour)
        think = body.get("think")
        if behaviour == "think_field" and think in (None, False):
            # Without `think`, Ollama < 0.9 (and >= 0.9 for some models) leaves the
            # reasoning in the content; `think: false` turns it off.
            text = f"<think>{thinking}</think>\n\n{text}" if think is None else text
            thinking = ""
        # Reasoning models' tags are cut anywhere between chunks ("<th" + "ink>").
        chunks = pieces if pieces is not None \
            else [text[i : i + 5] for i in range(0, len(text), 5)] if behaviour in REASONING \
            else split_chunks(text)
        thought = split_chunks(thinking) if behaviour == "think_field" else []
        try:
            self._stream(path, model, body, behaviour, chunks, thought, started)
        finally:  # read to its end, cut, or the client hung up (tests of cancellation)
            with owner._streams_changed:
                owner.ended_streams += 1
                owner._streams_changed.notify_all()

    def _stream(self, path: str, model: str, body: dict, behaviour: str, chunks: list[str],
                thought: list[str], started: int) -> None:
        owner = self.owner
        self._send_headers(200, "application/x-ndjson", chunked=True)
        if behaviour == "cut":
            chunks = chunks[: max(1, len(chunks) // 2)]
        done_reason = "length" if behaviour in ("think_unterminated", "length") else "stop"
        limit = (body.get("options") or {}).get("num_predict")
        if behaviour == "length":
            chunks = chunks[: max(1, len(chunks) // 2)]
        if isinstance(limit, int) and 0 < limit < len(thought) + len(chunks):
            thought = thought[:limit]
            chunks = chunks[: max(0, limit - len(thought))]
            done_reason = "length"
        pieces = [self._piece(path, model, "", thinking=t) for t in thought]
        pieces += [self._piece(path, model, c) for c in chunks]
        for i, piece in enumerate(pieces):
            if i and owner.token_delay and owner._stop_event.wait(owner.token_delay):
                self._abort()
                return
            if i == 1 and not owner.gate.is_set():
                owner.held.set()
                owner.gate.wait(owner.stall_seconds)  # stop() opens it
            self._write_chunk(piece)
        if behaviour == "cut":
            # Drop the connection mid-body: no done:true line and no
            # terminating zero-length chunk, like a runner that died.
            self._abort()
            return
        final = self._final(path, model, "", started, eval_count=len(pieces))
        final["done_reason"] = done_reason
        final["prompt_eval_count"] = owner.prompt_eval_count or _prompt_tokens(path, body)
        self._write_chunk(final)
        self.wfile.write(b"0\r\n\r\n")
        with owner._streams_changed:  # a stream the client read to its end
            owner.completed_streams += 1

    # -- response shapes (as in Ollama 0.6) -----------------------------------

    @staticmethod
    def _piece(path: str, model: str, text: str, thinking: str = "") -> dict:
        out: dict[str, Any] = {"model": model, "created_at": _now()}
        if path == "/api/chat":
            out["message"] = {"role": "assistant", "content": text}
            if thinking:
                out["message"]["thinking"] = thinking
        else:
            out["response"] = text
        out["done"] = False
        return out

    def _final(self, path: str, model: str, text: str, started_ns: int, eval_count: int) -> dict:
        out = self._piece(path, model, text)
        total = max(time.monotonic_ns() - started_ns, 1_000_000)
        out.update(
            {
                "done_reason": "stop",
                "done": True,
                "total_duration": total,
                "load_duration": total // 10,
                "prompt_eval_count": 26,
                "prompt_eval_duration": total // 5,
                "eval_count": eval_count,
                "eval_duration": total // 2,
            }
        )
        if path == "/api/generate":
            out["context"] = [128006, 882, 128007, 271]  # a token list, as Ollama sends
        return out

    # -- low-level writing -------------------------------------------------

    def _send_headers(
        self, status: int, content_type: str, length: int = 0, chunked: bool = False
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _send_text(self, status: int, text: str) -> None:
        data = text.encode()
        self._send_headers(status, "text/plain; charset=utf-8", len(data))
        self.wfile.write(data)

    def _send_json(self, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self._send_headers(status, "application/json; charset=utf-8", len(data))
        self.wfile.write(data)

    def _write_chunk(self, obj: dict) -> None:
        line = json.dumps(obj).encode() + b"\n"  # NDJSON: one object per line
        self.wfile.write(b"%X\r\n%s\r\n" % (len(line), line))

    def _abort(self) -> None:
        """Hang up abruptly; nothing more is written on this connection."""
        self.close_connection = True
        with contextlib.suppress(OSError):  # the client may be gone already
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        # socketserver closes the socket after the handler returns.


# ---------------------------------------------------------------------------
# Public server object
# ---------------------------------------------------------------------------


class OllamaTestServer:
    """A real HTTP server on 127.0.0.1 that imitates Ollama with scripted replies.

    Attributes (all may be changed while the server runs):

    ``behaviour``
        One of :data:`BEHAVIOURS`; decides how chat/generate answer.
    ``replies``
        Recorded answers.  While non-empty, each chat/generate request pops
        the first one and answers with exactly that text (streamed or not, as
        asked), whatever ``behaviour`` says (stall/error500/cut included).  A
        reply given as a list of strings is streamed one string per chunk.
    ``requests``
        Every request received, in order, as ``{"method", "path", "body"}``
        (``body`` is the parsed JSON, ``None`` for GET/HEAD).
    ``stall_seconds``
        How long "stall" and "hang" wait before answering (``stop()`` cuts it short).
    ``token_delay``
        Seconds between streamed chunks.
    ``prompt_eval_count``
        When set, the prompt token count every streamed answer reports (a server that read
        less than it was sent).
    ``gate``, ``held``
        While ``gate`` (an Event, open at first) is cleared, a streamed answer stops after
        its first chunk, sets ``held`` and goes on when ``gate`` is set again (or by
        ``stop()``, or after ``stall_seconds``): a test can act while a stream is open.
    ``completed_streams``, ``ended_streams``
        Streamed answers read to their end, and all that ended (completed, cut, or hung
        up on by the client); ``wait_for_ended_streams`` waits for the latter.
    ``models``
        Model names served by /api/tags and accepted elsewhere.
    """

    def __init__(
        self,
        models=("llama3.2:latest",),
        behaviour: str = "cited",
        *,
        port: int = 0,
        verbose: bool = False,
        relay: str | None = None,
    ):
        self.relay = _relay_to(relay) if relay else None
        self._relay_lock = threading.Lock()
        self.models = list(models)
        self.behaviour = behaviour
        self.replies: list[str | list[str]] = []
        self.requests: list[dict] = []
        self.stall_seconds: float = 30
        self.token_delay: float = 0.0
        self.prompt_eval_count: int | None = None  # reported instead of the prompt's count
        self.completed_streams = 0
        self.ended_streams = 0
        self.gate = threading.Event()
        self.gate.set()
        self.held = threading.Event()
        self.verbose = verbose
        self._port = port
        self._lock = threading.Lock()
        self._streams_changed = threading.Condition()
        self._stop_event = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._connections: dict[socket.socket, threading.Thread] = {}

    # -- configuration -----------------------------------------------------

    @property
    def behaviour(self) -> str:
        return self._behaviour

    @behaviour.setter
    def behaviour(self, value: str) -> None:
        # Validate here so that a typo fails in the test, not as a puzzling reply.
        if value not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {value!r}; expected one of {BEHAVIOURS}")
        self._behaviour = value

    @property
    def template(self) -> str:
        """The chat template /api/show reports: one that opens a <think> block in the prompt
        for "think_close_only" (as QwQ's and some DeepSeek-R1 builds' do)."""
        return "{{ .Prompt }}<think>\n" if self.behaviour == "think_close_only" else "{{ .Prompt }}"

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server is not running")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server is not running")
        return self._httpd.server_address[1]

    @property
    def last_prompt(self) -> str:
        """The source-bearing text of the latest chat/generate request ("" if none)."""
        with self._lock:
            for request in reversed(self.requests):
                if request["path"] in ("/api/chat", "/api/generate") and request["body"]:
                    return _prompt_text(request["path"], request["body"])
        return ""

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> OllamaTestServer:
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._stop_event.clear()
        self._httpd = _HTTPServer(self, ("127.0.0.1", self._port))
        # A short poll interval keeps shutdown() (and so stop()) quick.
        self._serve_thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="ollama-test-server",
            daemon=True,
        )
        self._serve_thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Stop serving, end open connections and wait (bounded) for handlers.

        Safe to call twice.  Never hangs: stalls and token delays wait on an
        event set here, and sockets are shut down under blocked readers.
        """
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        if self.relay is not None:
            self.relay.close()
        self._stop_event.set()
        self.gate.set()
        httpd.shutdown()
        httpd.server_close()
        if self._serve_thread is not None:
            self._serve_thread.join(timeout)
        with self._lock:
            connections = list(self._connections.items())
        for sock, _ in connections:
            # Wakes a handler blocked reading the next keep-alive request.
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for _, thread in connections:
            thread.join(max(0.0, deadline - time.monotonic()))

    def wait_for_ended_streams(self, count: int, timeout: float = 60) -> bool:
        """Whether `count` streamed answers have ended (see ``ended_streams``) within
        `timeout` seconds."""
        with self._streams_changed:
            return self._streams_changed.wait_for(lambda: self.ended_streams >= count, timeout)

    def __enter__(self) -> OllamaTestServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- used by the handler -----------------------------------------------

    def _record(self, method: str, path: str, body: Any) -> None:
        with self._lock:
            self.requests.append({"method": method, "path": path, "body": body})

    def _pop_reply(self) -> str | list[str] | None:
        with self._lock:
            return self.replies.pop(0) if self.replies else None

    def _find_model(self, name: str) -> str | None:
        if not name:
            return None
        wanted = _normalise_model(name)
        return next((m for m in self.models if _normalise_model(m) == wanted), None)

    def _tag_entry(self, name: str) -> dict:
        digest = hashlib.sha256(name.encode()).hexdigest()
        return {
            "name": name,
            "model": name,
            "modified_at": _MODIFIED_AT,
            "size": 2019393189,
            "digest": digest,
            "details": _EMBED_DETAILS if _is_embedding(name) else _DETAILS,
        }

    def _track(self, sock: socket.socket, thread: threading.Thread) -> None:
        with self._lock:
            self._connections[sock] = thread

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.pop(sock, None)


def _relay_to(url: str):  # type: ignore[no-untyped-def]
    try:
        from tests.ollama_relay import Relay
    except ImportError:  # loaded by path, as `python tests/ollama_server.py`
        import os

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from ollama_relay import Relay  # type: ignore[no-redef]
    return Relay(url)


def free_port_with_nothing_listening() -> int:
    """A localhost port that refuses connections (for "Ollama is not running").

    The port was free a moment ago; another process could grab it, which is
    unlikely enough for tests.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def _load_replies(path: str) -> list[str]:
    replies = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                replies.append(json.loads(line)["reply"])
    return replies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Serve a scripted imitation of the Ollama API on 127.0.0.1."
    )
    parser.add_argument("--port", type=int, default=11435)
    parser.add_argument("--behaviour", choices=BEHAVIOURS, default="cited")
    parser.add_argument(
        "--replies-file", help='JSONL of {"reply": "..."} answered in order before the behaviour'
    )
    parser.add_argument(
        "--model",
        action="append",
        dest="models",
        help="model name to serve (repeatable; default llama3.2:latest)",
    )
    parser.add_argument("--token-delay", type=float, default=0.0)
    parser.add_argument("--stall-seconds", type=float, default=30)
    parser.add_argument("--verbose", action="store_true", help="log each request to stderr")
    parser.add_argument("--relay", metavar="URL",
                        help="answer with real generations from llama.cpp's server at URL")
    args = parser.parse_args(argv)

    server = OllamaTestServer(
        models=args.models or ("llama3.2:latest",),
        behaviour=args.behaviour,
        port=args.port,
        verbose=args.verbose,
        relay=args.relay,
    )
    if args.replies_file:
        server.replies = _load_replies(args.replies_file)
    server.token_delay = args.token_delay
    server.stall_seconds = args.stall_seconds
    # Ctrl-C and SIGTERM only set an event: a KeyboardInterrupt could land anywhere (before
    # the wait, or inside stop()) and leave the process hanging.
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    with server:
        print(server.url, flush=True)
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
