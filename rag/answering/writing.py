"""The model's turn of an answer: its stream read under the answer's deadline and a bound on
its text, fed to the checker as it comes, and what stopped it said."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from rag.answering.budget import Fitted, floor
from rag.answering.check import Checker
from rag.answering.generate import Ending, model_text, repeating
from rag.errors import LLMError
from rag.llm import ModelClient, StreamBroken
from rag.llm.guard import Deadline, DeadlinePassed
from rag.question import Question
from rag.schema import Event, NoticeEvent, ProgressEvent, TokenEvent

# The most answer text read per token of the answer's budget: a token of any tokenizer is a
# few characters (English averages about 4); a server that sends more ignored the budget.
CHARS_PER_TOKEN, MIN_ANSWER_TOKENS = 16, 1024


@dataclass
class Run:
    """What one answer accumulates besides its text."""

    question: Question
    notices: list[str] = field(default_factory=list)
    answerer: str = "extractive"
    incomplete: bool = False
    error: dict[str, str] | None = None
    ending: Ending | None = None
    stopped: str = ""  # why rag stopped the model: "repetition: ...", "deadline" or "size"
    fitted: Fitted | None = None  # the prompt the model was sent
    timings: dict[str, float] = field(default_factory=dict)
    deadline: Deadline = field(default_factory=Deadline)

    def notice(self, message: str) -> NoticeEvent:
        self.notices.append(message)
        return NoticeEvent(message)


def write_with_model(client: ModelClient, fitted: Fitted, checker: Checker, run: Run,
                     seconds: float) -> Iterator[Event]:
    """The model's answer, fed to `checker` as it streams, under the answer's deadline (of
    `seconds`) and a bound on its text; what stopped it said as a notice."""
    run.answerer = f"{client.kind}:{client.model}"
    wrote = 0
    text: list[str] = []
    # What is read of the answer's text, whatever the server was asked: a server that
    # ignores max_tokens (or sends one huge delta) is cut here, before the checker.
    room = CHARS_PER_TOKEN * max(fitted.max_tokens or 0, MIN_ANSWER_TOKENS)
    stream = model_text(client, fitted.messages, fitted.max_tokens, run.deadline)
    try:
        for item in stream:
            if isinstance(item, Ending):
                run.ending = item
            elif isinstance(item, ProgressEvent):
                yield item
            else:
                if len(item) >= room:
                    item, run.stopped = item[:room], "size"
                room -= len(item)
                wrote += len(item.strip())
                text.append(item)
                yield TokenEvent(item)
                yield from checker.feed(item)
                if run.stopped:
                    break
                if run.deadline.passed():
                    run.stopped = "deadline"
                    break
                if len(text) % 16 == 0 and (loop := repeating("".join(text))):
                    run.stopped = f"repetition: {loop[:60]}"
                    break
    except DeadlinePassed:
        run.stopped = "deadline"
    except StreamBroken as exc:  # what came was fed to the checker as it came
        run.incomplete, run.error = True, {"message": exc.message, "hint": exc.hint}
        yield run.notice(f"{exc.message} — the answer is incomplete")
        return
    finally:
        stream.close()  # ends the model's request when rag stopped reading
    if run.stopped:
        run.incomplete = True
        yield run.notice(_stopped_notice(run, client, seconds))
        return
    if not wrote and not (run.ending and run.ending.reason == "length"):
        # Nothing is not a refusal: "the abstracts do not answer this" would be rag's claim.
        raise LLMError(f"the model '{client.model}' sent an empty answer",
                       "ask again, pick another model with --model, or use --llm none")
    yield from _ending_notices(run, fitted)


def _stopped_notice(run: Run, client: ModelClient, seconds: float) -> str:
    if run.stopped == "deadline":
        if run.deadline.cancelled.is_set():
            return "the client went away, so the model was stopped — the answer is incomplete"
        return (f"the answer was not done after {seconds:g} s "
                "(RAG_ANSWER_TIMEOUT) and the model was stopped — the answer is incomplete")
    if run.stopped == "size":
        return (f"the server at {client.host} sent more answer text than its budget allows "
                f"({CHARS_PER_TOKEN} characters a token) and was stopped — the answer is incomplete")
    return (f"the model kept repeating itself (\"{run.stopped[12:].strip()}\") and was "
            "stopped — the answer is incomplete")


def _ending_notices(run: Run, fitted: Fitted) -> Iterator[Event]:
    """What the model's end says of its answer: the server cut the prompt to fit its context,
    or the model stopped at its budget or its context (the answer is incomplete)."""
    ending = run.ending
    if ending and ending.prompt_tokens and ending.prompt_tokens < floor(fitted.messages):
        yield run.notice(
            f"the server read {ending.prompt_tokens} tokens of a prompt of at least "
            f"{floor(fitted.messages)}: it cut the prompt to fit its context, so the model "
            "did not see all of it (raise RAG_NUM_CTX, or the server's context size)")
    if ending and ending.reason == "length":
        run.incomplete = True
        used = (ending.prompt_tokens or 0) + (ending.completion_tokens or 0)
        if fitted.context_bound or (fitted.window and used >= fitted.window - 8):
            said = (f"the model filled its context of {fitted.window} tokens (RAG_NUM_CTX, or "
                    "the model's own when smaller)")
        else:
            said = (f"the model stopped at its answer budget of {fitted.max_tokens} tokens "
                    "(RAG_NUM_PREDICT)")
        yield run.notice(f"{said} — the answer is incomplete")
