"""POST /ask: JSON, or server-sent events with ``Accept: text/event-stream``."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Annotated, TypeVar

import httpx
from fastapi import APIRouter, Depends, FastAPI, Header, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool

from coderag import audit
from coderag.deps import CatalogDep, SettingsDep, UserDep, require_query
from coderag.errors import CoderagError
from coderag.redact import redact
from coderag.responses import errors
from coderag.schemas import AskRequest, AskResponse
from coderag.settings import get_settings
from coderag_generator import chronicle, sessions, window
from coderag_generator.answer import Event, answer_events
from coderag_generator.backends import get_backend
from coderag_generator.client import ParserClient, RetrieverClient, ServiceClient
from coderag_generator.details import enrich

C = TypeVar("C", bound=ServiceClient)

RETRIEVE_K = 10
"""Hits asked of the retriever; the best ``context_units`` of them go into the prompt."""

router = APIRouter(tags=["ask"])


def plan_retrieval(query: str, turns: list[sessions.Turn], max_chars: int) -> tuple[str, bool]:
    """What to search for a question (a follow-up made standalone from the session's ``turns``;
    a who/when question's subject) and whether it asks about history."""
    retrieval_query = sessions.rewrite(query, turns)
    if len(retrieval_query) > max_chars:  # the added terms must not make it invalid
        retrieval_query = query
    about_history = window.is_history_question(query)
    if about_history:  # search the code for the subject, not for "who changed it last month"
        retrieval_query = window.subject(retrieval_query)
    return retrieval_query, about_history


@asynccontextmanager
async def lifespan(_: FastAPI):
    """Load the answer backend now, so a missing model stops startup with a clear error."""
    await run_in_threadpool(get_backend, get_settings())
    yield


def _client(cls: type[C], url: str | None, request: Request) -> C:
    """A client of another service: over HTTP at ``url`` when set, else into this very app
    in-process; the caller's authorization goes along."""
    headers = {}
    if auth := request.headers.get("authorization"):
        headers["authorization"] = auth
    if url:
        return cls(url, headers=headers)
    return cls("http://localhost", httpx.ASGITransport(app=request.app), headers)


def retriever_client(request: Request, settings: SettingsDep) -> RetrieverClient:
    """The retriever at ``CODERAG_RETRIEVER_URL``, or in-process."""
    return _client(RetrieverClient, settings.retriever_url, request)


RetrieverDep = Annotated[RetrieverClient, Depends(retriever_client)]


def parser_client(request: Request, settings: SettingsDep) -> ParserClient:
    """The parser at ``CODERAG_PARSER_URL``, or in-process."""
    return _client(ParserClient, settings.parser_url, request)


ParserDep = Annotated[ParserClient, Depends(parser_client)]


def _iso(stamp: datetime | None) -> str | None:
    return stamp.isoformat() if stamp else None


async def git_facts(
    parser: ParserClient, repo: str, query: str, hits: list[dict]
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
        else {"has_history": False, "ranges": []}
    )
    return chronicle.GitFacts(units, history, win)


async def with_commits(parser: ParserClient, repo: str, done: dict) -> dict:
    """The answer's citations, each with the last commit that touched its lines (X7)."""
    cites = done.get("citations") or []
    if not cites:
        return done
    ranges = [{k: c[k] for k in ("file", "start_line", "end_line")} for c in cites]
    history = await parser.history(repo, ranges)
    for c, r in zip(cites, history.get("ranges") or [], strict=False):
        last = r.get("last") or {}
        c.update(last_commit=last.get("commit"), last_author=last.get("author"),
                 last_date=last.get("date"))  # fmt: skip
    return done


def _sse(event: Event) -> str:
    return f"event: {event.name}\ndata: {json.dumps(event.data, ensure_ascii=False)}\n\n"


@router.post(
    "/ask",
    response_model=AskResponse,
    responses={
        200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}},
        **errors(400, 403, 404, 409, 503),
    },
)
async def ask(
    body: AskRequest,
    settings: SettingsDep,
    catalog: CatalogDep,
    user: UserDep,
    retriever: RetrieverDep,
    parser: ParserDep,
    accept: Annotated[str | None, Header()] = None,
):
    """Answer a question with checked citations, or refuse; with a ``session_id``, as a follow-up
    of that session's earlier questions (an unknown id starts a session)."""
    start = time.perf_counter()
    query = require_query(body.query, settings)
    session = sessions.check_session_id(body.session_id) if body.session_id is not None else None
    if session:
        await run_in_threadpool(sessions.claim, catalog.db, session, user)
    turns = (
        await run_in_threadpool(sessions.recent, catalog.db, session, body.repo) if session else []
    )
    retrieval_query, about_history = plan_retrieval(query, turns, settings.max_query_chars)
    try:
        found = await retriever.retrieve(body.repo, retrieval_query, RETRIEVE_K)
    finally:
        await retriever.aclose()
    missing: list[str] = found.get("routes_missing", [])
    hits = await run_in_threadpool(enrich, catalog, body.repo, found["results"])
    git = await git_facts(parser, body.repo, query, hits) if about_history and hits else None
    backend = await run_in_threadpool(get_backend, settings)

    def lines_of(path: str) -> int | None:
        return catalog.file_lines(body.repo, path)

    def finish(done: dict, status: str) -> dict:
        took = (time.perf_counter() - start) * 1000
        audit.record(
            catalog,
            user=user,
            endpoint="ask",
            repo=body.repo,
            query=redact(query)[0],  # a pasted secret stays out of the log
            files=list(dict.fromkeys(h["file"] for h in hits)),
            input_tokens=done.get("input_tokens", 0),
            response_ms=took,
            status=status,
        )
        if session and "answer" in done:
            sessions.append(
                catalog.db,
                session,
                body.repo,
                question=query,
                query=retrieval_query,
                answer=done["answer"],
                symbols=sessions.cited_symbols(done["citations"], hits),
            )
        return {
            **done,
            "took_ms": round(took, 2),
            "session_id": session,
            "routes_missing": missing,
        }

    retrieval = Event(
        "retrieval",
        {
            "query": retrieval_query,
            "results": [
                {k: h[k] for k in ("file", "start_line", "end_line", "symbol", "kind", "score")}
                for h in hits
            ],
        },
    )
    history = sessions.prompt_history(turns)
    events = answer_events(query, hits, backend, settings, lines_of, history, git, missing)

    if accept and "text/event-stream" in accept:

        async def stream() -> AsyncIterator[str]:
            yield _sse(retrieval)
            try:
                async for event in iterate_in_threadpool(events):
                    if event.name == "done":
                        data = await with_commits(parser, body.repo, event.data)
                        data = finish(data, "refused" if data["refused"] else "ok")
                        event = Event("done", data)
                    yield _sse(event)
            except CoderagError as exc:
                finish({}, "error")
                yield _sse(Event("error", {"detail": exc.detail}))
            finally:
                await parser.aclose()
                # A closed stream stops generation at the next token; if the pool thread is
                # still inside next(), the generator is simply dropped after that token.
                with contextlib.suppress(ValueError):
                    events.close()

        return StreamingResponse(stream(), media_type="text/event-stream")

    done: dict = {}
    for event in await run_in_threadpool(list, events):
        if event.name == "done":
            done = event.data
    try:
        done = await with_commits(parser, body.repo, done)
    finally:
        await parser.aclose()
    return AskResponse(**finish(done, "refused" if done["refused"] else "ok"))
