"""The model judge (`--judge model`): the answering model asked, claim by claim, whether the
abstract supports it, as structured output; its "supported" counts only with a quote the
record holds and never over the hard checks or a contradiction the verifier found."""

from __future__ import annotations

import copy
import re
import threading

from rag.corpus.tokens import at_most
from rag.corpus.words import claim_of
from rag.embed import Embedder
from rag.errors import LLMError
from rag.judge.core import Judge, Support
from rag.verify import CONTRADICTED

# What the model judge must answer: Ollama constrains the reply to this JSON schema
# (structured output), so nothing is parsed out of free text.
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"supported": {"type": "boolean"}, "quote": {"type": "string"}},
    "required": ["supported", "quote"],
}


_CLAIM_WORD = re.compile(r"[^\W\d_]{2,}")


def parse_verdict(reply: str) -> tuple[bool, str] | None:
    """(supported, quote) from the model's JSON reply; None when it is not that JSON."""
    import json

    try:
        data = json.loads(reply)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("supported"), bool):
        return None
    return data["supported"], str(data.get("quote") or "")


class OllamaJudge(Judge):
    """Claim-by-claim verdicts from the answering model (`--judge model`; Ollama or an
    OpenAI-compatible server), as structured output: {"supported": bool, "quote": str}. Each
    (claim, abstract) pair is asked once per judge: the answer's check and the eval's
    citation scores share the verdict."""

    name = "model"
    MEMO = 20000  # verdicts kept; a long eval run asks far fewer

    def __init__(self, embedder: Embedder, llm: object) -> None:
        super().__init__(embedder)
        from rag.prompts import templates

        self.llm = llm
        self.template = templates()["judge"]
        self._asked = [0]  # requests sent to the model (shared by the views of `within`)
        self._verdicts: dict[tuple[str, str, str], tuple[bool, str] | None] = {}
        self._memo_lock = threading.Lock()
        self.deadline: object | None = None  # the answer's (rag.llm.guard.Deadline)
        self.fallbacks: list[str] = []  # why the verifier decided instead of the model, this answer

    @property
    def asked(self) -> int:
        return self._asked[0]

    def within(self, deadline: object) -> OllamaJudge:
        """This judge for one answer: its model calls end with the answer's deadline, and it
        keeps its own list of the sentences its model could not judge (its memo is shared)."""
        view = copy.copy(self)
        view.deadline, view.fallbacks = deadline, []
        return view

    def _verdict(self, claim: str, title: str, abstract: str) -> tuple[bool, str] | None:
        from rag.prompts import fence

        key = (claim, title, abstract)
        with self._memo_lock:
            if key in self._verdicts:
                return self._verdicts[key]
        # Fenced as in the answer prompt: an abstract cannot close its <source> block.
        prompt = self.template.render(abstract=fence(f"{title}\n{abstract}".strip()),
                                      claim=fence(claim))
        # A verdict's quote is a sentence of the record: its reply has no more tokens than the
        # record and the JSON around it (a small model otherwise may write until the timeout).
        room = at_most(f'{{"supported": false, "quote": "{title}\n{abstract}"}}')
        if self.deadline is not None and self.deadline.passed():  # type: ignore[attr-defined]
            raise LLMError("the answer's deadline passed before the model was asked to judge",
                           "raise RAG_ANSWER_TIMEOUT, or leave out --judge model")
        with self._memo_lock:
            self._asked[0] += 1  # counted when sent: a request the deadline cuts was still asked
        reply = self.llm.complete([{"role": "user", "content": prompt}],  # type: ignore[attr-defined]
                                  format=VERDICT_SCHEMA, max_tokens=room, deadline=self.deadline)
        verdict = parse_verdict(reply)
        with self._memo_lock:
            if len(self._verdicts) >= self.MEMO:
                self._verdicts.clear()
            self._verdicts[key] = verdict
        return verdict

    def check(self, sentence: str, abstracts: list[tuple[str, str]]) -> Support:
        base = super().check(sentence, abstracts)  # for the quote and a score
        claim = claim_of(sentence)
        if not claim or not _CLAIM_WORD.search(claim):
            return base  # nothing to ask about: no model is asked to judge an empty claim
        unreadable = unquoted = readable = False
        refused: list[str] = []
        for i, (title, abstract) in enumerate(abstracts):
            try:
                verdict = self._verdict(claim, title, abstract)
            except LLMError as exc:  # the deadline, a server gone: rag's verifier decides
                self.fallbacks.append(exc.message)
                return base
            if verdict is None:
                unreadable = True
                continue
            readable = True
            if verdict[0]:
                # A "supported" counts only with its evidence: a small model says yes with the
                # prompt's placeholder for a quote, or with words the abstract does not hold;
                # and never over the hard checks (a number or name the record lacks) or a
                # contradiction the verifier found.
                quote = verdict[1].strip()
                own = self.score_one(claim, self.embedder.embed([claim])[0], abstract, title)
                hard = [r for r in own.reasons if r.startswith(("number ", "name "))]
                if own.verdict == CONTRADICTED or hard:
                    refused = hard or own.reasons
                    continue
                if _quoted(quote, f"{title}\n{abstract}"):
                    return Support(True, base.score, quote, i, [])
                unquoted = True
        if refused:
            return Support(False, base.score, base.quote, base.source,
                           ["the model called it supported, but " + "; ".join(refused)], base.verdict)
        if not readable:  # no verdict at all: said, and rag's verifier decides
            self.fallbacks.append("its verdict was not the JSON asked for")
            return base
        reason = "the model's verdict was not the JSON asked for" if unreadable else \
            "the model called it supported but quoted nothing the abstract says" if unquoted else \
            "the model judged it unsupported"
        return Support(False, base.score, base.quote, base.source, [reason])


def _quoted(quote: str, text: str) -> bool:
    """The quote, a few words at least, is in the text (case and spacing aside)."""
    squash = lambda t: " ".join(t.lower().split())  # noqa: E731
    return len(quote.split()) >= 3 and squash(quote).strip(" .\"'") in squash(text)


