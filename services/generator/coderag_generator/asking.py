"""The ask use case: one question from its request to its events, with the session's earlier
turns, the retrieval, git facts for who/when questions, the checked answer, each citation's last
commit and the audit row. /ask (JSON and server-sent events), ``coderag ask`` and MCP's ``ask``
(which calls /ask) all answer through ``ask``, so they cite alike."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import UTC, datetime

from starlette.concurrency import iterate_in_threadpool, run_in_threadpool

from coderag import audit
from coderag.deps import require_query
from coderag.errors import CoderagError
from coderag.redact import redact
from coderag.schemas import AskRequest, Citation, HistoryResponse, Hit, LineRange, RangeHistory
from coderag.settings import Settings
from coderag.store import refs
from coderag.store.catalog import Catalog
from coderag_generator import chronicle, conversation, window
from coderag_generator.answer import Answer, Done, Event, Sampling, Streamed, answer_events
from coderag_generator.backends import get_backend
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
    history = (
        await parser.history(
            repo,
            chronicle.ranges(units),
            log=True,
            since=_iso(win.since if win else None),
            until=_iso(win.until if win else None),
        )
        if units
        else HistoryResponse(repo=repo, has_history=False, ranges=[])
    )
    return chronicle.GitFacts(units, history, win)


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


async def ask(
    request: AskRequest, asker: Asker, report_errors: bool = False, carried: Carried | None = None
) -> AsyncGenerator[Streamed]:
    """The events of one answer: ``retrieval`` once the question is accepted (bad input, an
    unknown repository or session owner, or a retriever that is down raise before it), then the
    answer's ``prompt``, ``token`` and ``retry``, then ``Done`` with the answer and its time. An
    error while answering is raised, or with ``report_errors`` (a stream, whose status is
    already sent) written to the audit log and yielded as an ``error`` event. ``carried`` gives the
    earlier turns and sampling of a chat request, which has no stored session."""
    start = time.perf_counter()
    settings, catalog = asker.settings, asker.catalog
    try:
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
        missing, hits = found.routes_missing, found.results
        git = await git_facts(asker.parser, repo, query, hits) if about_history and hits else None
        backend = await run_in_threadpool(get_backend, settings)
    except BaseException:
        await asker.parser.aclose()
        raise

    def record(status: str, input_tokens: int) -> float:
        """Write the audit row; the milliseconds since the request came."""
        took = (time.perf_counter() - start) * 1000
        audit.record(
            catalog,
            user=asker.user,
            endpoint=carried.endpoint if carried else "ask",
            repo=refs.label(request.repo, request.ref),
            query=redact(query)[0],  # a pasted secret stays out of the log
            files=list(dict.fromkeys(h.file for h in hits)),
            input_tokens=input_tokens,
            response_ms=took,
            status=status,
        )
        return took

    def finish(answer: Answer) -> Done:
        took = record("refused" if answer.refused else "ok", answer.input_tokens)
        if session:
            conversation.append(
                catalog,
                session,
                repo,
                question=query,
                query=retrieval_query,
                answer=answer.answer,
                symbols=conversation.cited_symbols(answer.citations, hits),
            )
        return Done(answer.model_copy(update={"session_id": session}), round(took, 2))

    events = answer_events(
        query,
        hits,
        backend,
        settings,
        lambda path: catalog.file_lines(repo, path),
        conversation.prompt_history(turns),
        git,
        missing,
        carried.sampling if carried else Sampling(),
        found.below_gate,
        found.looked_for,
    )
    try:
        yield Event(
            "retrieval",
            {
                "query": retrieval_query,
                "results": [h.model_dump(include=set(HIT_FIELDS)) for h in hits],
            },
        )
        async for event in iterate_in_threadpool(events):
            if isinstance(event, Done):
                event = finish(await with_commits(asker.parser, repo, event.answer, git))
            yield event
    except CoderagError as exc:
        if not report_errors:
            raise
        record("error", 0)
        yield Event("error", {"detail": exc.detail})
    finally:
        await asker.parser.aclose()
        # A closed stream stops generation at the next token; if the pool thread is still
        # inside next(), the generator is simply dropped after that token.
        with contextlib.suppress(ValueError):
            events.close()
