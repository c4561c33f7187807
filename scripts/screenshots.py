"""Screenshots of the chat page for the documentation, taken the way the browser tests drive it.

Builds an index of seeds/ in a temporary RAG_HOME, starts `rag serve` on 127.0.0.1 with the
offline answerer (no Ollama), drives Debian's Chromium headless through Playwright
(tests/test_browser.py does the same) and writes:

    docs/images/chat-answer.png       a cited answer, its first citation opened
    docs/images/comparison-table.png  a comparison answered as a table

    .venv/bin/python scripts/screenshots.py [--out docs/images]   # about a minute on 2 cores
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.rag_server import RagServer  # noqa: E402

RAG = str(Path(sys.executable).parent / "rag")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ANSWER_Q = "Which systems target long-sequence training?"
TABLE_Q = "Compare the speedups reported by Skrull, HEAT and FuseFPS"
MAX_BYTES = 300_000  # what a picture in the repository may weigh


def ask(page: object, question: str) -> None:
    page.select_option("#llm", "none")  # type: ignore[attr-defined]
    page.fill("#question", question)  # type: ignore[attr-defined]
    page.press("#question", "Enter")  # type: ignore[attr-defined]
    page.wait_for_selector(".answer.final", timeout=60_000)  # type: ignore[attr-defined]


def save(png: bytes, path: Path) -> None:
    """Write the screenshot, reduced to a palette of 256 colours when it would be too heavy."""
    if len(png) > MAX_BYTES:
        import io

        from PIL import Image

        image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", optimize=True)
        png = buffer.getvalue()
    path.write_bytes(png)
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {len(png) / 1000:.0f} kB")


def shoot(url: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            # bypass_csp: Playwright's waits evaluate strings, which the page's CSP forbids.
            context = browser.new_context(viewport={"width": 1280, "height": 800}, bypass_csp=True)
            page = context.new_page()
            page.goto(url + "/")
            page.wait_for_function("document.getElementById('corpus-size').textContent !== 'the'")

            ask(page, ANSWER_Q)
            page.locator(".answer.final .answer-text button.cite").nth(1).click()
            page.locator("#viewer-abstract mark.quote").wait_for(state="visible")
            save(page.screenshot(), out / "chat-answer.png")

            page.click("#new-chat")
            ask(page, TABLE_Q)
            page.wait_for_selector(".answer.final table.comparison")
            if page.locator("#viewer").is_visible():
                page.keyboard.press("Escape")
            save(page.screenshot(), out / "comparison-table.png")
            context.close()
        finally:
            browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is not installed: apt-get install chromium")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rag-screenshots-") as tmp:
        home, env = Path(tmp) / ".rag", {"RAG_LLM": "none", "OLLAMA_HOST": "http://127.0.0.1:9", "NO_COLOR": "1"}
        subprocess.run([RAG, "-q", "ingest", str(ROOT / "seeds")], cwd=ROOT, check=True,
                       env={**os.environ, "RAG_HOME": str(home), **env})
        server = RagServer(home, Path(tmp), env).start(timeout=120)  # the browser tests' server
        try:
            shoot(server.url, args.out.resolve())
        finally:
            server.stop()

if __name__ == "__main__":
    main()
