"""The ask use case: one question from its request to its events, with the session's earlier
turns, the retrieval, git facts for who/when questions, the checked answer, each citation's last
commit, the index's freshness (its commit, and how far HEAD has moved since) and the audit row.
/ask (JSON and server-sent events), ``coderag ask`` and MCP's ``ask`` (which calls /ask) all
answer through ``ask``, so they cite alike."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass
from datetime import UTC, datetime

from starlette.concurrency import iterate_in_threadpool, run_in_threadpool

from coderag import audit
from coderag.deps import require_query
from coderag.errors import CoderagError
from coderag.history import HistoryResponse, LineRange, RangeHistory
from coderag.redact import redact
from coderag.schemas import AskRequest, Citation, Hit, RetrieveResponse
from coderag.settings import Settings
from coderag.store import refs
from coderag.store.catalog import Catalog
from coderag_generator import chronicle, conversation, window
from coderag_generator.answer import (
    Answer,
    Done,
    Event,
    Question,
    Sampling,
    Streamed,
    answer_events,
)
from coderag_generator.backends import Backend, get_backend
from coderag_generator.client import ParserClient, RetrieverClient

RETRIEVE_K = 10
"""Hits asked of the retriever; the best ``context_units`` of them go into the prompt."""

HIT_FIELDS = ("file", "start_line", "end_line", "symbol", "kind", "score")
"""What the ``retrieval`` event shows of each hit."""


@dataclass(frozen=True)
class Asker:
    """Who asks and what answers: the caller named in the audit row, the retriever and the
    parser (over HTTP or into an app in this process), the catalog and the settings."""

    user: str
    retriever: RetrieverClient
    parser: ParserClient
    catalog: Catalog
    settings: Settings


@dataclass(frozen=True)
class Carried:
    """A conversation the request carries itself (an OpenAI-compatible chat's earlier messages)
    in place of a stored session, the caller's sampling, and the endpoint its audit row names."""

    turns: list[conversation.Turn]
    sampling: Sampling
    endpoint: str = "chat"


def plan_retrieval(query: str, turns: list[conversation.Turn], max_chars: int) -> tuple[str, bool]:
    """What to search for a question (a follow-up made standalone from the session's ``turns``;
    a who/when question's subject) and whether it asks about history."""
    retrieval_query = conversation.rewrite(query, turns)
    if len(retrieval_query) > max_chars:  # the added terms must not make it invalid
        retrieval_query = query
    about_history = window.is_history_question(query)
    if about_history:  # search the code for the subject, not for "who changed it last month"
        retrieval_query = window.subject(retrieval_query)
    return retrieval_query, about_history


def _iso(stamp: datetime | None) -> str | None:
    return stamp.isoformat() if stamp else None


async def git_facts(
    parser: ParserClient, repo: str, query: str, hits: list[Hit]
) -> chronicle.GitFacts:
    """The history of the units a who/when question is about, within its window."""
    units = chronicle.targets(query, hits)
    win = window.window(query, datetime.now(UTC))
    origin = window.asks_origin(query)
    # "who added Annotated support?": the commit that brought the name in, not the unit's
    # oldest (issue 43's third trial named the commit that created the file)
    pickaxe = chronicle.introduced_term(query, units) if origin else None
    history = (
        await parser.history(
            repo,
            chronicle.ranges(units),
            log=True,
            since=_iso(win.since if win else None),
            until=_iso(win.until if win else None),
            oldest_first=origin,
            pickaxe=pickaxe,
        )
        if units
        else HistoryResponse(repo=repo, has_history=False, ranges=[])
    )
    earlier = None
    if win is not None and history.has_history and not any(r.changes for r in history.ranges):
        # the commits before the window began: "the latest changes before it"
        earlier = await parser.history(
            repo, chronicle.ranges(units), log=True, until=_iso(win.since)
        )
    return chronicle.GitFacts(units, history, win, origin, pickaxe, earlier)


def _span(r: Citation | RangeHistory) -> tuple[str, int, int]:
    return r.file, r.start_line, r.end_line


def _dated(cite: Citation, history: RangeHistory | None) -> Citation:
    """``cite`` with the last commit of its lines, when their history is known."""
    if history is None:
        return cite
    last = history.last
    return cite.model_copy(
        update={
            "last_commit": last.commit if last else None,
            "last_author": last.author if last else None,
            "last_date": last.date if last else None,
        }
    )


async def with_commits(
    parser: ParserClient, repo: str, answer: Answer, git: chronicle.GitFacts | None = None
) -> Answer:
    """The answer with its citations each carrying the last commit that touched its lines (X7);
    ranges whose history ``git`` (a who/when answer's) already holds are not asked of the parser
    again, so it is called once per answer."""
    cites = answer.citations
    if not cites:
        return answer
    known = {_span(r): r for r in git.history.ranges} if git else {}
    if git and not git.history.has_history and git.units:
        return answer  # no history to tell: the parser would answer no ranges
    asked = [c for c in cites if _span(c) not in known]
    if asked:
        ranges = [LineRange(file=f, start_line=a, end_line=b) for f, a, b in map(_span, asked)]
        history = await parser.history(repo, ranges)
        known |= {_span(c): r for c, r in zip(asked, history.ranges, strict=False)}
    dated = [_dated(c, known.get(_span(c))) for c in cites]
    return answer.model_copy(update={"citations": dated})


@dataclass(frozen=True)
class Asked:
    """A question accepted for answering: the checked query, its session, the key of the
    repository or ref searched, the earlier turns, what was searched for and found, the git facts
    of a who/when question, the backend that answers, and what its audit row names."""

    query: str
    session: str | None
    repo: str
    turns: list[conversation.Turn]
    retrieval_query: str
    found: RetrieveResponse
    git: chronicle.GitFacts | None
    backend: Backend
    label: str
    endpoint: str
    start: float


async def accept(request: AskRequest, asker: Asker, carried: Carried | None, start: float) -> Asked:
    """Check the question, claim its session, resolve its ref once, read the earlier turns, ask
    the retriever, the parser (who/when questions) and load the backend; raises before any
    event for bad input, an unknown repository or session owner, or a service that is down."""
    settings, catalog = asker.settings, asker.catalog
    query = require_query(request.query, settings)
    session = None
    if request.session_id is not None:
        session = conversation.check_session_id(request.session_id)
    if session:
        await run_in_threadpool(conversation.claim, catalog, session, asker.user)
    repo = await run_in_threadpool(refs.resolve, catalog, request.repo, request.ref)
    turns = (
        await run_in_threadpool(conversation.recent, catalog, session, repo)
        if session
        else (carried.turns if carried else [])
    )
    retrieval_query, about_history = plan_retrieval(query, turns, settings.max_query_chars)
    try:
        found = await asker.retriever.retrieve(repo, retrieval_query, RETRIEVE_K)
    finally:
        await asker.retriever.aclose()
    hits = found.results
    git = await git_facts(asker.parser, repo, query, hits) if about_history and hits else None
    backend = await run_in_threadpool(get_backend, settings)
    label = refs.label(request.repo, request.ref)
    endpoint = carried.endpoint if carried else "ask"
    return Asked(
        query, session, repo, turns, retrieval_query, found, git, backend, label, endpoint, start
    )


def refusal_reason(answer: Answer | None) -> str:
    """Why the question was not answered (a refusal's or a clarifying answer's reason), or ""."""
    return answer.reason if answer and (answer.refused or answer.clarify) else ""


def cited_ranges(answer: Answer | None) -> list[str]:
    """The ``FILE:start-end`` ranges the answer cites, as the audit log writes them."""
    cites = answer.citations if answer else []
    return [audit.span(c.file, c.start_line, c.end_line) for c in cites]


def record(asked: Asked, asker: Asker, status: str, answer: Answer | None = None) -> float:
    """Write the question's audit row, with the answer's refusal reason, cited ranges and input
    tokens; the milliseconds since the request came."""
    took = (time.perf_counter() - asked.start) * 1000
    audit.record(
        asker.catalog,
        user=asker.user,
        endpoint=asked.endpoint,
        repo=asked.label,
        query=redact(asked.query)[0],  # a pasted secret stays out of the log
        files=list(dict.fromkeys(h.file for h in asked.found.results)),
        input_tokens=answer.input_tokens if answer else 0,
        response_ms=took,
        status=status,
        refusal=refusal_reason(answer),
        cited=cited_ranges(answer),
    )
    return took


def finish(asked: Asked, asker: Asker, answer: Answer) -> Done:
    """The last event: the answer with its session and time, once its audit row and its turn
    of the session are written."""
    took = record(asked, asker, "refused" if answer.refused else "ok", answer)
    if asked.session:
        conversation.append(
            asker.catalog,
            asked.session,
            asked.repo,
            question=asked.query,
            query=asked.retrieval_query,
            answer=answer.answer,
            symbols=conversation.cited_symbols(answer.citations, asked.found.results),
        )
    return Done(answer.model_copy(update={"session_id": asked.session}), round(took, 2))


def answering(asked: Asked, asker: Asker, carried: Carried | None) -> Generator[Streamed]:
    """The answer's events (``answer.answer_events``) over the accepted question's hits."""
    catalog = asker.catalog
    question = Question(
        asked.query,
        history=conversation.prompt_history(asked.turns),
        git=asked.git,
        sampling=carried.sampling if carried else Sampling(),
    )
    return answer_events(
        question,
        asked.found,
        backend=asked.backend,
        settings=asker.settings,
        file_lines=lambda path: catalog.file_lines(asked.repo, path),
    )


def retrieval_event(asked: Asked) -> Event:
    """The first event: what was searched for and the hits found."""
    results = [h.model_dump(include=set(HIT_FIELDS)) for h in asked.found.results]
    return Event("retrieval", {"query": asked.retrieval_query, "results": results})


async def ask(
    request: AskRequest, asker: Asker, report_errors: bool = False, carried: Carried | None = None
) -> AsyncGenerator[Streamed]:
    """The events of one answer: ``retrieval`` once the question is accepted (bad input, an
    unknown repository or session owner, or a retriever that is down raise before it), then the
    answer's ``prompt``, ``token`` and ``retry``, then ``Done`` with the answer and its time. An
    error while answering is raised, or with ``report_errors`` (a stream, whose status is
    already sent) written to the audit log and yielded as an ``error`` event. ``carried`` gives the
    earlier turns and sampling of a chat request, which has no stored session."""
    try:
        asked = await accept(request, asker, carried, time.perf_counter())
    except BaseException:
        await asker.parser.aclose()
        raise
    events = answering(asked, asker, carried)
    try:
        yield retrieval_event(asked)
        async for event in iterate_in_threadpool(events):
            if isinstance(event, Done):
                dated = await with_commits(asker.parser, asked.repo, event.answer, asked.git)
                fresh = await asker.parser.freshness(asked.repo)
                event = finish(asked, asker, dated.model_copy(update={"freshness": fresh}))
            yield event
    except CoderagError as exc:
        if not report_errors:
            raise
        record(asked, asker, "error")
        yield Event("error", {"detail": exc.detail})
    finally:
        await asker.parser.aclose()
        # A closed stream stops generation at the next token; if the pool thread is still
        # inside next(), the generator is simply dropped after that token.
        with contextlib.suppress(ValueError):
            events.close()
