"""From retrieved hits to a checked answer, as a stream of events: ``retrieval``, ``prompt``,
``token`` (and ``retry``), then ``done`` with the final JSON.

Before the model is called, ``refusal`` declines unsafe questions, answers vague ones with a
clarifying question, and refuses when the hits cannot hold the answer (no hits, the retriever's
verdict that the code does not hold it, a named term no hit mentions). An answer keeps only
citations that pass the check; one without any is retried once with a corrective instruction,
then refused. A refusal from the model ends in
the refusal sentence of the question's language. ``done`` says why in ``reason`` (empty for an
answer) and marks clarifying answers with ``clarify``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from coderag.language import language
from coderag.schemas import Hit
from coderag.settings import Settings
from coderag_generator import chronicle, premise, prompts, refusal, window
from coderag_generator.backends import Backend
from coderag_generator.citations import check
from coderag_generator.context import BUDGET_SHARE, Snippet, assemble
from coderag_generator.conversation import HISTORY_SHARE, fit_history

ATTEMPTS = 2
"""One answer and one corrective retry."""


@dataclass
class Event:
    """One server-sent event."""

    name: str
    data: dict[str, Any] = field(default_factory=dict)


REFUSED_BY_MODEL, NO_CITATION = "model", "no_citation"
"""Reasons of refusals after the model answered: it said so, or it cited nothing valid."""

PREMISE = "premise"
"""The ``reason`` of an answer that corrects the question's contradicted premise (type C)."""


@dataclass(frozen=True)
class Sampling:
    """A caller's own generation settings (an OpenAI-compatible chat request's): an instruction
    added to the system prompt, and temperature and answer length in place of the settings'."""

    instruction: str = ""
    temperature: float | None = None
    max_tokens: int | None = None


def _done(
    answer: str,
    citations: list,
    refused: bool,
    input_tokens: int,
    output_tokens: int,
    backend: str,
    reason: str = "",
    clarify: bool = False,
) -> Event:
    return Event(
        "done",
        {
            "answer": answer,
            "citations": [c.model_dump() for c in citations],
            "refused": refused,
            "clarify": clarify,
            "reason": reason,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "backend": backend,
        },
    )


def answer_events(
    query: str,
    hits: list[Hit],
    backend: Backend,
    settings: Settings,
    file_lines: Callable[[str], int | None],
    history: Sequence[dict[str, str]] = (),
    git: chronicle.GitFacts | None = None,
    missing: Sequence[str] = (),
    sampling: Sampling = Sampling(),
    below_gate: bool = False,
    looked_for: Sequence[str] = (),
) -> Generator[Event]:
    """Generate the events of one answer from the retriever's hits; ``history`` holds earlier
    turns of the session as chat messages, the most recent of which go into the prompt; ``git``,
    given for who/when questions, answers them from the repository's history instead;
    ``missing``, the routes left out while their vectors are written, is said in the answer;
    ``sampling`` carries a caller's instruction, temperature and length for a model;
    ``below_gate`` is the retriever's verdict that the code probably does not hold the answer,
    ``looked_for`` the words it searched by (what a refusal says it looked for)."""
    lang = language(query)
    events = _events(
        query,
        hits,
        backend,
        settings,
        file_lines,
        history,
        git,
        missing,
        sampling,
        below_gate,
        looked_for,
    )
    for event in events:
        if event.name == "done" and missing:
            note = prompts.load("partial", lang).format(routes=", ".join(missing))
            sep = "\n\n" if event.data["answer"] else ""
            event = Event("done", {**event.data, "answer": event.data["answer"] + sep + note})
        yield event


def _events(
    query: str,
    hits: list[Hit],
    backend: Backend,
    settings: Settings,
    file_lines: Callable[[str], int | None],
    history: Sequence[dict[str, str]],
    git: chronicle.GitFacts | None,
    missing: Sequence[str],
    sampling: Sampling,
    below_gate: bool,
    looked_for: Sequence[str],
) -> Iterator[Event]:
    lang = language(query)
    # a who/when question is gated on what it asks about, not on "who changed it last month"
    about = window.subject(query) if git is not None else query
    verdict = refusal.screen(query, lang)
    # a contradicted premise is answered before the gate: a claim about a unit that is found
    # may name a callee the code lacks, which the gate would refuse as absent
    fixed = premise.correct(query, hits, lang) if verdict is None else None
    if fixed:
        cited = check(fixed, [(h.file, h.start_line, h.end_line) for h in hits], file_lines)
        if cited.valid:
            yield _done(cited.text, cited.valid, False, 0, 0, backend.name, reason=PREMISE)
            return
    # a who/when question's words differ from what was searched (its subject): say its own
    searched = looked_for if git is None else ()
    verdict = verdict or refusal.gate(about, hits, lang, below_gate, searched)
    if verdict is not None:  # decided by rules: the model is never asked
        yield _done(
            verdict.answer,
            [],
            verdict.refused,
            0,
            0,
            backend.name,
            reason=verdict.reason,
            clarify=verdict.clarify,
        )
        return
    if git is not None and git.units:
        text = chronicle.compose(git.units, git.history, git.window, lang)
        units = [(u.file, u.start_line, u.end_line) for u in git.units]
        checked = check(text, units, file_lines)
        known = bool(git.history.get("has_history"))
        reason = "" if known else chronicle.NO_HISTORY
        yield _done(checked.text, checked.valid, not known, 0, 0, backend.name, reason=reason)
        return
    snippets = [Snippet.from_hit(h) for h in hits[: settings.context_units]]
    budget = int(backend.window * BUDGET_SHARE)
    context_text, kept = assemble(snippets, backend.count_tokens, budget)
    context = [(s.file, s.start_line, s.end_line) for s in kept]
    # the prompt shows callers first; backends get the shown hits in rank order, best first
    by_key = {(s.file, s.start_line, s.symbol): s for s in kept}
    shown = [
        h.model_copy(update={"start_line": k.start_line, "end_line": k.end_line})
        for h in hits[: settings.context_units]
        if (k := by_key.get((h.file, h.start_line, h.symbol))) is not None
    ]
    earlier = fit_history(list(history), backend.count_tokens, int(backend.window * HISTORY_SHARE))
    system = prompts.load("system", lang)
    if sampling.instruction:  # the caller's own wishes come after coderag's rules, not instead
        system += (
            "\n\nThe user's instruction (the rules above still hold):\n" + sampling.instruction
        )
    messages = [
        {"role": "system", "content": system},
        *earlier,
        {
            "role": "user",
            "content": prompts.load("user", lang).format(query=query, context=context_text),
        },
    ]
    input_tokens = output_tokens = 0
    for attempt in range(1, ATTEMPTS + 1):
        prompt = backend.render(messages)
        prompt.context = shown
        prompt.lang = lang
        prompt.query = query
        input_tokens += prompt.tokens
        yield Event(
            "prompt",
            {
                "attempt": attempt,
                "input_tokens": prompt.tokens,
                "window": backend.window,
                "snippets": [s.anchor for s in kept],
            },
        )
        room = backend.window - prompt.tokens - 8
        if room < 16:
            break
        text = ""
        for piece in backend.stream(
            prompt,
            temperature=(
                settings.temperature if sampling.temperature is None else sampling.temperature
            ),
            top_p=settings.top_p,
            max_tokens=min(sampling.max_tokens or settings.max_new_tokens, room),
        ):
            text += piece
            yield Event("token", {"text": piece})
        output_tokens += backend.count_tokens(text) if text else 0
        if prompts.is_refusal(text):
            yield _done(
                prompts.load("refusal", lang),
                [],
                True,
                input_tokens,
                output_tokens,
                backend.name,
                reason=REFUSED_BY_MODEL,
            )
            return
        checked = check(text, context, file_lines)
        if checked.valid:
            yield _done(
                checked.text.strip(),
                checked.valid,
                False,
                input_tokens,
                output_tokens,
                backend.name,
            )
            return
        if attempt < ATTEMPTS:
            yield Event("retry", {"reason": "no valid citation", "invalid": checked.invalid})
            example = f"{kept[0].file}:{kept[0].start_line}-{kept[0].end_line}"
            messages = [
                *messages,
                {"role": "assistant", "content": text},
                {"role": "user", "content": prompts.load("retry", lang).format(example=example)},
            ]
    yield _done(
        prompts.load("refusal", lang),
        [],
        True,
        input_tokens,
        output_tokens,
        backend.name,
        reason=NO_CITATION,
    )
