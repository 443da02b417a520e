"""From retrieved hits to a checked answer, as a stream of events: ``retrieval``, ``prompt``,
``token`` (and ``retry``), then ``done`` with the typed ``Answer``.

Before the model is called, ``refusal`` declines unsafe questions, answers vague ones with a
clarifying question, and refuses when the hits cannot hold the answer (no hits, the retriever's
verdict that the code does not hold it, a named term no hit mentions). An answer keeps only
citations that pass the check; one without any is retried once with a corrective instruction,
then refused. A refusal from the model ends in
the refusal sentence of the question's language. ``done`` says why in ``reason`` (empty for an
answer) and marks clarifying answers with ``clarify``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from coderag.language import language
from coderag.schemas import Citation, Freshness, Hit, RetrieveResponse
from coderag.settings import Settings
from coderag_generator import chronicle, conversation, premise, prompts, refusal, window
from coderag_generator.backends import Backend
from coderag_generator.backends.base import Grounding, Prompt
from coderag_generator.citations import check
from coderag_generator.context import BUDGET_SHARE, Snippet, assemble
from coderag_generator.conversation import HISTORY_SHARE, fit_history

ATTEMPTS = 2
"""One answer and one corrective retry."""


class Answer(BaseModel):
    """A checked answer or refusal: what /ask returns, less its timing."""

    model_config = ConfigDict(frozen=True)

    answer: str
    citations: list[Citation] = Field(default_factory=list)
    refused: bool = False
    clarify: bool = False
    reason: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    backend: str = ""
    session_id: str | None = None
    routes_missing: list[str] = Field(default_factory=list)
    doubtful: bool = False
    freshness: Freshness | None = None


@dataclass(frozen=True)
class Event:
    """One server-sent event before the answer: ``retrieval``, ``prompt``, ``token``, ``retry``,
    or ``error``."""

    name: str
    data: dict[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """The event's JSON object."""
        return self.data


@dataclass(frozen=True)
class Done:
    """The last event: the answer, with the milliseconds it took once the ask use case has
    timed it."""

    answer: Answer
    took_ms: float | None = None
    name: str = "done"

    def payload(self) -> dict[str, Any]:
        """The answer's JSON object, ``took_ms`` where /ask has always put it (after
        ``backend``)."""
        data = self.answer.model_dump()
        if self.took_ms is None:
            return data
        tail = {k: data.pop(k) for k in ("session_id", "routes_missing", "freshness")}
        return {**data, "took_ms": self.took_ms, **tail}


Streamed = Event | Done
"""What an answer streams: events, then one ``Done``."""


REFUSED_BY_MODEL, NO_CITATION = "model", "no_citation"
"""Reasons of refusals after the model answered: it said so, or it cited nothing valid."""

PREMISE = "premise"
"""The ``reason`` of an answer that corrects the question's contradicted premise (type C)."""

NO_ANTECEDENT = "no_antecedent"
"""The ``reason`` of a clarifying answer to "who last changed it?" asked with no earlier turn."""


@dataclass(frozen=True)
class Sampling:
    """A caller's own generation settings (an OpenAI-compatible chat request's): an instruction
    added to the system prompt, and temperature and answer length in place of the settings'."""

    instruction: str = ""
    temperature: float | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Question:
    """A question as its answer needs it: the text; the session's earlier turns as chat messages
    (the most recent that fit go into the prompt); the git facts of a who/when question (it is
    answered from the repository's history instead); a caller's instruction, temperature and
    length for the model."""

    query: str
    history: Sequence[dict[str, str]] = ()
    git: chronicle.GitFacts | None = None
    sampling: Sampling = Sampling()


@dataclass(frozen=True)
class _Case:
    """One answer in the making: the question, its language, what the retriever found and
    decided, and what answers it."""

    question: Question
    lang: str
    found: RetrieveResponse
    backend: Backend
    settings: Settings
    file_lines: Callable[[str], int | None]

    @property
    def query(self) -> str:
        """The question's text."""
        return self.question.query

    @property
    def hits(self) -> list[Hit]:
        """The retriever's hits, best first."""
        return self.found.results


@dataclass(frozen=True)
class _Context:
    """What the prompt shows: its text, the snippets kept, their ranges (what citations may
    name) and the hits they came from, cut to the lines shown, best first."""

    text: str
    kept: list[Snippet]
    ranges: list[tuple[str, int, int]]
    shown: list[Hit]


def answer_events(
    question: Question,
    found: RetrieveResponse,
    *,
    backend: Backend,
    settings: Settings,
    file_lines: Callable[[str], int | None],
) -> Generator[Streamed]:
    """Generate the events of one answer to ``question`` from what the retriever ``found``: its
    hits, and its verdicts that the code probably does not hold the answer (``below_gate``), may
    still not hold it (``doubtful``: the answer says so first) or that the question asks to get
    around a security control (``unsafe``); a refusal names the words it ``looked_for``, and the
    answer says which ``routes_missing`` were left out while their vectors are written.
    ``file_lines`` counts a file's lines, what citations are checked against."""
    q = _Case(question, language(question.query), found, backend, settings, file_lines)
    answer = yield from _events(q)
    missing = found.routes_missing
    if missing:
        note = prompts.load("partial", q.lang).format(routes=", ".join(missing))
        sep = "\n\n" if answer.answer else ""
        answer = answer.model_copy(
            update={"answer": answer.answer + sep + note, "routes_missing": list(missing)}
        )
    yield Done(answer)


def _events(q: _Case) -> Generator[Event, None, Answer]:
    decided = _by_rules(q)
    if decided is not None:
        return decided
    git = q.question.git
    if git is not None and git.units:
        return _from_history(q, git)
    if not q.found.doubtful and not refusal.doubts(q.query, q.hits):
        return (yield from _from_model(q))
    # the rule still doubts the code holds it: the answer says so before what the code does
    note = prompts.load("doubt", q.lang)
    yield Event("token", {"text": note + "\n\n"})
    answer = yield from _from_model(q)
    if answer.refused:
        return answer
    return answer.model_copy(update={"answer": f"{note}\n\n{answer.answer}", "doubtful": True})


def _by_rules(q: _Case) -> Answer | None:
    """An answer decided without the model: an unsafe or vague question, a corrected premise,
    or hits that cannot hold the answer; None when the model must answer."""
    verdict = refusal.screen(q.query, q.lang, q.found.unsafe)
    said = conversation.needs_antecedent(q.query) if not q.question.history else None
    if verdict is None and said:
        # "And who last changed it?" opening a session: no turn says what "it" is, and an
        # answer about whatever the words found reads as confident and wrong (the fourth trial)
        # the example names a file of this repository, not one of another (the fifth trial)
        example = q.hits[0].file if q.hits else "src/main.py"
        text = prompts.load("antecedent", q.lang).format(said=said, file=example)
        return Answer(answer=text, clarify=True, reason=NO_ANTECEDENT, backend=q.backend.name)
    # a contradicted premise is answered before the gate: a claim about a unit that is found
    # may name a callee the code lacks, which the gate would refuse as absent
    fixed = premise.correct(q.query, q.hits, q.lang) if verdict is None else None
    if fixed:
        units = [(h.file, h.start_line, h.end_line) for h in q.hits]
        cited = check(fixed, units, q.file_lines)
        if cited.valid:
            return Answer(
                answer=cited.text, citations=cited.valid, reason=PREMISE, backend=q.backend.name
            )
    # a who/when question is gated on what it asks about, not on "who changed it last month",
    # and its words differ from what was searched (its subject): say its own
    about_history = q.question.git is not None
    about = window.subject(q.query) if about_history else q.query
    searched = () if about_history else q.found.looked_for
    verdict = verdict or refusal.gate(
        about, q.hits, q.lang, q.found.below_gate, searched, q.found.weak
    )
    if verdict is None:
        return None
    return Answer(
        answer=verdict.answer,
        refused=verdict.refused,
        clarify=verdict.clarify,
        reason=verdict.reason,
        backend=q.backend.name,
    )


def _from_history(q: _Case, git: chronicle.GitFacts) -> Answer:
    """A who/when answer, from the history of the units it is about."""
    text = chronicle.compose(
        git.units, git.history, git.window, q.lang, git.origin, git.pickaxe, git.earlier
    )
    units = [(u.file, u.start_line, u.end_line) for u in git.units]
    checked = check(text, units, q.file_lines)
    known = git.history.has_history
    return Answer(
        answer=checked.text,
        citations=checked.valid,
        refused=not known,
        reason="" if known else chronicle.NO_HISTORY,
        backend=q.backend.name,
    )


def _context(q: _Case) -> _Context:
    """The best hits that fit the model's share of its window."""
    snippets = [Snippet.from_hit(h) for h in q.hits[: q.settings.context_units]]
    budget = int(q.backend.window * BUDGET_SHARE)
    text, kept = assemble(snippets, q.backend.count_tokens, budget)
    # the prompt shows callers first; backends get the shown hits in rank order, best first
    by_key = {(s.file, s.start_line, s.symbol): s for s in kept}
    shown = [
        h.model_copy(update={"start_line": k.start_line, "end_line": k.end_line})
        for h in q.hits[: q.settings.context_units]
        if (k := by_key.get((h.file, h.start_line, h.symbol))) is not None
    ]
    ranges = [(s.file, s.start_line, s.end_line) for s in kept]
    return _Context(text, kept, ranges, shown)


def _messages(q: _Case, context: _Context) -> list[dict[str, str]]:
    """The chat: rules (and the caller's instruction), earlier turns that fit, the question."""
    room = int(q.backend.window * HISTORY_SHARE)
    earlier = fit_history(list(q.question.history), q.backend.count_tokens, room)
    system = prompts.load("system", q.lang)
    instruction = q.question.sampling.instruction
    if instruction:  # the caller's own wishes come after coderag's rules, not instead
        system += "\n\nThe user's instruction (the rules above still hold):\n" + instruction
    user = prompts.load("user", q.lang).format(query=q.query, context=context.text)
    return [{"role": "system", "content": system}, *earlier, {"role": "user", "content": user}]


def _generate(
    q: _Case, prompt: Prompt, grounding: Grounding, room: int
) -> Generator[Event, None, str]:
    """Stream the model's text for ``prompt``, grounded in ``grounding``, as ``token`` events;
    the whole text."""
    settings, sampling = q.settings, q.question.sampling
    text = ""
    for piece in q.backend.stream(
        prompt,
        temperature=settings.temperature if sampling.temperature is None else sampling.temperature,
        top_p=settings.top_p,
        max_tokens=min(sampling.max_tokens or settings.max_new_tokens, room),
        grounding=grounding,
    ):
        text += piece
        yield Event("token", {"text": piece})
    return text


def _corrected(
    q: _Case, messages: list[dict[str, str]], text: str, context: _Context
) -> list[dict[str, str]]:
    """The chat again with the answer that cited nothing valid and an instruction to cite."""
    first = context.kept[0]
    example = f"{first.file}:{first.start_line}-{first.end_line}"
    retry = prompts.load("retry", q.lang).format(example=example)
    return [*messages, {"role": "assistant", "content": text}, {"role": "user", "content": retry}]


def _from_model(q: _Case) -> Generator[Event, None, Answer]:
    """The model's answer with its citations checked; one corrective retry when none passes,
    then a refusal."""
    backend = q.backend
    context = _context(q)
    messages = _messages(q, context)
    # the extractive backend answers from these hits alone, llama.cpp cites only them
    grounding = Grounding(q.query, q.lang, tuple(context.shown))
    input_tokens = output_tokens = 0
    reason = NO_CITATION
    for attempt in range(1, ATTEMPTS + 1):
        prompt = backend.render(messages)
        input_tokens += prompt.tokens
        yield Event(
            "prompt",
            {
                "attempt": attempt,
                "input_tokens": prompt.tokens,
                "window": backend.window,
                "snippets": [s.anchor for s in context.kept],
            },
        )
        room = backend.window - prompt.tokens - 8
        if room < 16:
            break
        text = yield from _generate(q, prompt, grounding, room)
        output_tokens += backend.count_tokens(text) if text else 0
        if prompts.is_refusal(text):
            reason = REFUSED_BY_MODEL
            break
        checked = check(text, context.ranges, q.file_lines)
        if checked.valid:
            return Answer(
                answer=checked.text.strip(),
                citations=checked.valid,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                backend=backend.name,
            )
        if attempt < ATTEMPTS:
            yield Event("retry", {"reason": "no valid citation", "invalid": checked.invalid})
            messages = _corrected(q, messages, text, context)
    return Answer(
        answer=prompts.load("refusal", q.lang),
        refused=True,
        reason=reason,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        backend=backend.name,
    )
