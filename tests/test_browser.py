"""The chat page in real headless Chromium (Debian's /usr/bin/chromium driven by Playwright)
against a real `rag serve`, with Ollama played by the Ollama-protocol test server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.rag_server import RagServer, serving

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOT = Path("/tmp/rag-chat-page.png")
FACT_Q = "How much faster is Skrull than DeepSpeed?"
STREAM_Q = "How do systems train with long sequences?"  # two papers: several sentences to stream

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"{CHROMIUM} is not installed (apt-get install chromium; .ci/run installs it)",
)

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=2">'
INJECTION = {
    "id": "pwnbench-2024",
    "title": "Pwnbench: measuring markup in paper abstracts",
    "authors": ["Mallory Example"], "venue": "TestConf", "year": 2024,
    "abstract": (
        "We present Pwnbench, a benchmark of paper abstracts that carry markup. "
        f"Pwnbench abstracts embed {SCRIPT} script tags and {IMG} image tags inside ordinary "
        "sentences. Readers must show such abstracts as plain text."
    ),
}


@pytest.fixture(scope="module")
def server(seeded_settings, ollama, tmp_path_factory) -> Iterator[RagServer]:  # type: ignore[no-untyped-def]
    """rag serve over the seeds plus one abstract full of markup."""
    from rag.ingest import ingest

    base = tmp_path_factory.mktemp("browser")
    extra = base / "injection.jsonl"
    extra.write_text(json.dumps(INJECTION) + "\n", encoding="utf-8")

    def add_injection(home: Path) -> None:
        ingest([extra], seeded_settings.model_copy(update={"home": home}), show_progress=False)

    with serving(seeded_settings.home, base, {"OLLAMA_HOST": ollama.url}, add_injection) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture()
def page(browser, server: RagServer) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    # bypass_csp: Playwright's waits evaluate strings, which the page's CSP forbids. It also
    # makes the injection test stricter: nothing but the page's own text handling stops markup.
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.goto(server.url + "/")
    pg.wait_for_function("document.getElementById('corpus-size').textContent !== 'the'")
    try:
        yield pg
    finally:
        context.close()
    assert not errors, errors  # no JavaScript errors on the page


def ask(page: Any, question: str, llm: str) -> None:
    page.select_option("#llm", llm)
    page.fill("#question", question)
    page.press("#question", "Enter")


def test_streamed_answer_citation_and_abstract(page, ollama) -> None:  # type: ignore[no-untyped-def]
    ollama.token_delay = 0.1
    try:
        assert page.text_content("#corpus-size") == "61"
        assert "llama3.2 ready" in page.text_content("#status")
        ask(page, STREAM_Q, "auto")
        # Words appear while the answer is still streaming ...
        page.wait_for_selector(".answer.streaming .answer-text:not(:empty)", timeout=20_000)
        partial = page.text_content(".answer.streaming .answer-text")
        # ... and the final answer replaces them, with clickable citations.
        page.wait_for_selector(".answer.final", timeout=30_000)
    finally:
        ollama.token_delay = 0.0
    final = page.text_content(".answer.final .answer-text")
    assert partial and len(partial) < len(final)
    assert final.startswith(partial.rstrip()[:20])
    assert page.locator(".offline-note").count() == 0
    assert "llama3.2" in page.text_content(".answer-meta")
    assert page.locator(".answer.final .references li").count() >= 1

    page.locator(".answer-text button.cite").first.click()
    viewer = page.locator("#viewer")
    viewer.wait_for(state="visible")
    mark = page.locator("#viewer-abstract mark.quote")
    assert mark.count() == 1 and mark.is_visible()
    quote = mark.text_content()
    assert len(quote) > 20 and quote in page.text_content("#viewer-abstract")
    assert page.locator(".sentence.active").count() == 1
    page.screenshot(path=str(SCREENSHOT), full_page=True)


def test_offline_answer_is_noted_and_unsupported_sentences_marked(page, ollama) -> None:  # type: ignore[no-untyped-def]
    ask(page, FACT_Q, "none")
    page.wait_for_selector(".answer.final", timeout=30_000)
    note = page.locator(".offline-note")
    assert note.is_visible() and "offline" in note.text_content()
    assert "3.76x" in page.text_content(".answer.final .answer-text")
    # a reference opens its abstract too
    page.locator(".references button.cite").last.click()
    assert page.locator("#viewer-abstract mark.quote").is_visible()

    # The test model adds a sentence no abstract supports: it is marked on the page. (A new
    # conversation, so that the question is not condensed by the test model first.)
    page.click("#new-chat")
    assert page.locator(".turn").count() == 0
    ollama.behaviour = "uncited"
    try:
        ask(page, FACT_Q, "ollama")
        page.wait_for_selector(".answer.final", timeout=30_000)
    finally:
        ollama.behaviour = "cited"
    second = page.locator(".turn").first
    bad = second.locator(".sentence.unsupported")
    assert bad.count() == 1 and "energy" in bad.text_content()
    assert bad.locator(".badge").is_visible()
    assert second.locator(".unsupported-note").is_visible()
    assert second.locator(".sentence.supported").count() >= 1


def test_markup_in_an_abstract_is_shown_as_text(page, server: RagServer) -> None:  # type: ignore[no-untyped-def]
    stored = httpx.get(f"{server.url}/papers/pwnbench-2024", timeout=10).json()
    assert SCRIPT in stored["abstract"] and IMG in stored["abstract"]  # the test is meaningful
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    scripts_before = page.evaluate("document.scripts.length")

    ask(page, "What do Pwnbench abstracts embed?", "none")
    page.wait_for_selector(".answer.final", timeout=30_000)
    answer = page.text_content(".answer.final .answer-text")
    assert SCRIPT in answer  # the markup is in the answer, as visible text
    page.locator(".answer-text button.cite").first.click()
    page.locator("#viewer").wait_for(state="visible")
    shown = page.text_content("#viewer-abstract")
    assert SCRIPT in shown and IMG in shown
    assert page.text_content("#viewer-title") == INJECTION["title"]

    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("document.scripts.length") == scripts_before
    assert page.evaluate("document.querySelectorAll('.answer script, #viewer script').length") == 0
    assert not any(u.rstrip("/").endswith("/x") for u in requests)


COMPARE_Q = "Compare the speedups reported by Skrull, HEAT and FuseFPS"


def test_comparison_is_a_table_with_clickable_citations_and_bibtex(page) -> None:  # type: ignore[no-untyped-def]
    ask(page, COMPARE_Q, "none")
    page.wait_for_selector(".answer.final table.comparison", timeout=30_000)
    rows = page.locator("table.comparison tbody tr")
    assert [rows.nth(i).locator("th").text_content() for i in range(rows.count())] == \
        ["Skrull", "HEAT", "FuseFPS"]
    # each row cites its own paper: the figure from the abstract, and a button opening it
    assert "3.76x" in rows.nth(0).text_content() and "45.2X" in rows.nth(1).text_content()
    rows.nth(2).locator("button.cite").first.click()
    page.locator("#viewer").wait_for(state="visible")
    assert "FuseFPS" in page.text_content("#viewer-abstract")

    page.click(".answer.final .copy-bibtex")
    page.wait_for_selector("pre.bibtex:not([hidden])", timeout=10_000)
    bib = page.text_content("pre.bibtex")
    assert bib.count("@") == 3 and "eprint = {2309.05017}" in bib


def test_abstention_shows_the_closest_passages(page) -> None:  # type: ignore[no-untyped-def]
    ask(page, "What is the boiling point of ethanol at sea level?", "none")
    page.wait_for_selector(".answer.final.abstained", timeout=30_000)
    near = page.locator(".answer.final .nearest li")
    assert near.count() >= 1
    assert "do not answer" in page.text_content(".answer.final .nearest h3")
    quote = near.first.locator("q").text_content()
    assert len(quote) > 20
    near.first.locator("button").click()  # opens that paper's abstract at the passage
    page.locator("#viewer").wait_for(state="visible")
    assert page.text_content("#viewer-abstract mark.quote") == quote
    assert "does not answer" in page.text_content("#viewer-quote-note")


def test_stop_keeps_a_question_sent_meanwhile_and_new_chat_forgets_the_answer(page, ollama) -> None:  # type: ignore[no-untyped-def]
    bodies: list[dict[str, Any]] = []
    page.on("request", lambda r: bodies.append(json.loads(r.post_data)) if r.url.endswith("/chat") else None)
    ollama.held.clear()
    ollama.gate.clear()  # the model's answer stops after its first chunk
    try:
        ask(page, STREAM_Q, "ollama")
        assert ollama.held.wait(30)
        # A question sent while the answer streams stays in the box: it was emptied, unsent.
        page.fill("#question", FACT_Q)
        page.press("#question", "Enter")
        assert page.input_value("#question") == FACT_Q
        page.click("#stop")
        page.wait_for_selector(".answer.stopped", timeout=10_000)
        assert "stopped" in page.text_content(".answer.stopped .notes").lower()
        page.select_option("#llm", "none")
        page.press("#question", "Enter")  # Ask works again: the kept question is sent
        page.wait_for_selector(".answer.final", timeout=30_000)
        assert "3.76x" in page.text_content(".answer.final .answer-text")

        # New chat while an answer streams: that answer is no part of the new conversation.
        ollama.held.clear()
        page.click("#new-chat")
        ask(page, STREAM_Q, "ollama")
        assert ollama.held.wait(30)
        page.click("#new-chat")
        ollama.gate.set()
        ask(page, FACT_Q, "none")
        page.wait_for_selector(".answer.final", timeout=30_000)
    finally:
        ollama.gate.set()
    assert page.locator(".turn").count() == 1
    assert [m["content"] for m in bodies[-1]["messages"]] == [FACT_Q]


def test_a_marker_says_which_passage_supports_its_sentence_and_never_claims_more(page, ollama) -> None:  # type: ignore[no-untyped-def]
    # [1] Skrull states the first sentence, [2] DeepSpeed-Ulysses does not; no abstract says 97%.
    ollama.replies = ["Skrull outperforms DeepSpeed by 3.76x on average [1, 2]. It is 97% faster [1]."]
    ask(page, STREAM_Q, "ollama")
    page.wait_for_selector(".answer.final", timeout=30_000)
    first, second = page.locator(".answer.final .sentence").nth(0), page.locator(".answer.final .sentence").nth(1)
    assert "supported" in first.get_attribute("class").split() and "unsupported" in second.get_attribute("class")
    first.locator("button.cite").nth(0).click()
    assert "3.76x" in page.text_content("#viewer-abstract mark.quote")
    assert "supports the sentence you clicked" in page.text_content("#viewer-quote-note")

    first.locator("button.cite").nth(1).click()  # [2]: nothing there supports the sentence
    assert page.text_content("#viewer-title") == "DeepSpeed-Ulysses"
    assert page.locator("#viewer-abstract mark").count() == 0
    assert "source [1]" in page.text_content("#viewer-quote-note")

    second.locator("button.cite").click()  # an unsupported sentence: at most its closest passage
    note = page.text_content("#viewer-quote-note")
    assert "does not support" in note and "supports the sentence" not in note


def test_an_answer_cut_off_keeps_its_citations_clickable(page, ollama) -> None:  # type: ignore[no-untyped-def]
    ollama.behaviour = "cut"
    try:
        ask(page, STREAM_Q, "ollama")
        page.wait_for_selector(".answer.failed", timeout=30_000)
    finally:
        ollama.behaviour = "cited"
    failed = page.locator(".answer.failed")
    assert "incomplete" in failed.locator(".error").text_content()
    assert failed.locator(".references li").count() == 1
    failed.locator(".answer-text button.cite").first.click()
    assert page.text_content("#viewer-title") == "Skrull"
    assert page.locator("#viewer-abstract mark.quote").is_visible()


def test_a_comparison_table_stays_readable_on_a_phone(page) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 375, "height": 740})
    ask(page, COMPARE_Q, "none")
    page.wait_for_selector(".answer.final table.comparison", timeout=30_000)
    # The papers' names each on one line (they were broken a few letters a line: 'S/kr/ul/l').
    lines = page.evaluate("""() => [...document.querySelectorAll(
        'table.comparison thead th:first-child, table.comparison th.row-label')].map((th) => {
          const range = document.createRange();
          range.selectNodeContents(th);
          return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
        })""")
    assert lines == [1, 1, 1, 1]
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_a_filter_that_leaves_no_paper_is_said_once(page) -> None:  # type: ignore[no-untyped-def]
    page.fill("#year", "3000")
    ask(page, "Which papers study mixture-of-experts training?", "none")
    page.wait_for_selector(".answer.final", timeout=30_000)
    assert page.text_content(".answer.final").count("No papers match the filters: year 3000.") == 1


def test_the_author_box_answers_from_that_authors_papers(page) -> None:  # type: ignore[no-untyped-def]
    page.fill("#author", "Trevor Gale")
    ask(page, "Which papers study mixture-of-experts training?", "none")
    page.wait_for_selector(".answer.final", timeout=30_000)
    text = page.text_content(".answer.final")
    assert "MegaBlocks" in text and "Tutel" not in text


def test_the_page_follows_an_ingest_while_serving_and_says_when_the_server_is_gone(
        browser, seeded_settings, ollama, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rag.ingest import ingest

    new = {"id": "quokka-2025", "title": "Quokka: cheerful pipelines for tiny GPUs", "authors": ["Bea Wombat"],
           "venue": "QuokkaConf", "year": 2025,
           "abstract": "We present Quokka, a pipeline scheduler. Quokka cuts pipeline bubbles by 63% on four GPUs."}
    (tmp_path / "new.jsonl").write_text(json.dumps(new) + "\n", encoding="utf-8")
    with serving(seeded_settings.home, tmp_path, {"OLLAMA_HOST": ollama.url}) as srv:
        context = browser.new_context(bypass_csp=True)
        page = context.new_page()
        loaded: list[str] = []
        page.on("response", lambda r: loaded.append(r.text()) if r.request.resource_type == "fetch" else None)
        page.goto(srv.url + "/")
        page.wait_for_function("document.querySelectorAll('#venues option').length > 0")
        # /health (which asks Ollama too) and /venues load side by side: either may come first
        page.wait_for_function("document.getElementById('corpus-size').textContent !== 'the'")
        assert page.text_content("#corpus-size") == "60"
        # The page loads the venue names, not every paper's record (a large index's abstracts).
        assert not any("Skrull outperforms DeepSpeed" in body for body in loaded)

        ingest([tmp_path / "new.jsonl"], seeded_settings.model_copy(update={"home": srv.home}), show_progress=False)
        # The server reads the index's version at most once a second (rag.store's VERSION_TTL):
        # a question sent within it may still be answered from the 60 papers. Ask once the
        # server counts 61, as a user would after a second or two.
        for _ in range(300):
            if httpx.get(srv.url + "/health", timeout=10).json()["papers"] == 61:
                break
            page.wait_for_timeout(100)
        ask(page, "By how much does Quokka cut pipeline bubbles?", "none")
        page.wait_for_selector(".answer.final", timeout=30_000)
        assert "63%" in page.text_content(".answer.final .answer-text")
        page.wait_for_function("document.getElementById('corpus-size').textContent === '61'")
        page.wait_for_function("[...document.querySelectorAll('#venues option')].some(o => o.value === 'QuokkaConf')")

        srv.stop()
        ask(page, FACT_Q, "none")
        page.wait_for_selector(".answer.failed", timeout=30_000)
        page.wait_for_function("document.getElementById('status').textContent === 'server not reachable'")
        assert page.input_value("#question") == FACT_Q  # kept, to be sent again
        context.close()


def test_a_reload_keeps_the_conversation(page) -> None:  # type: ignore[no-untyped-def]
    ask(page, FACT_Q, "none")
    page.wait_for_selector(".answer.final", timeout=30_000)
    page.reload()
    page.wait_for_function("document.getElementById('corpus-size').textContent !== 'the'")
    assert page.locator(".turn").count() == 1 and "3.76x" in page.text_content(".answer.final .answer-text")
    page.locator(".answer-text button.cite").first.click()
    assert "3.76x" in page.text_content("#viewer-abstract mark.quote")
    with page.expect_request(lambda r: r.url.endswith("/chat")) as sent:
        ask(page, "What does it build on?", "none")  # a follow-up: the earlier turn goes with it
    assert [m["role"] for m in json.loads(sent.value.post_data)["messages"]] == ["user", "assistant", "user"]
    page.wait_for_selector(".turn:nth-child(2) .answer.final", timeout=30_000)
    page.click("#new-chat")
    page.reload()
    page.wait_for_function("document.getElementById('corpus-size').textContent !== 'the'")
    assert page.locator(".turn").count() == 0


def test_a_pasted_question_over_the_limit_is_refused_whole_not_cut(page) -> None:  # type: ignore[no-untyped-def]
    long_q = FACT_Q + " Context: " + "the sequence lengths vary a lot. " * 70
    page.select_option("#llm", "none")
    page.focus("#question")
    page.keyboard.insert_text(long_q)  # as a paste does
    page.press("#question", "Enter")
    page.wait_for_selector(".answer.failed", timeout=30_000)
    assert f"{len(long_q.strip())} characters; at most 2000" in page.text_content(".answer.failed .error")
    assert page.input_value("#question") == long_q.strip()  # all of it, to be shortened


def test_the_abstract_viewer_by_keyboard(page) -> None:  # type: ignore[no-untyped-def]
    ask(page, FACT_Q, "none")
    page.wait_for_selector(".answer.final", timeout=30_000)
    page.focus(".answer-text button.cite")
    page.keyboard.press("Enter")
    page.locator("#viewer").wait_for(state="visible")
    assert page.evaluate("document.getElementById('viewer').contains(document.activeElement)")
    page.keyboard.press("Escape")  # closes it, and the reader is back where they were
    assert page.locator("#viewer").is_hidden()
    assert page.evaluate("document.activeElement.matches('.answer-text button.cite')")
