"""POST /ask: JSON, or server-sent events with ``Accept: text/event-stream``."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

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
from coderag_generator import sessions
from coderag_generator.answer import Event, answer_events
from coderag_generator.backends import get_backend
from coderag_generator.client import RetrieverClient

RETRIEVE_K = 10
"""Hits asked of the retriever; the best ``context_units`` of them go into the prompt."""

router = APIRouter(tags=["ask"])


@asynccontextmanager
async def lifespan(_: FastAPI):
    """Load the answer backend now, so a missing model stops startup with a clear error."""
    await run_in_threadpool(get_backend, get_settings())
    yield


def retriever_client(request: Request, settings: SettingsDep) -> RetrieverClient:
    """Over HTTP when ``CODERAG_RETRIEVER_URL`` is set, else into this very app in-process."""
    headers = {}
    if auth := request.headers.get("authorization"):
        headers["authorization"] = auth
    if settings.retriever_url:
        return RetrieverClient(settings.retriever_url, headers=headers)
    return RetrieverClient("http://localhost", httpx.ASGITransport(app=request.app), headers)


RetrieverDep = Annotated[RetrieverClient, Depends(retriever_client)]


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
    retrieval_query = sessions.rewrite(query, turns)
    if len(retrieval_query) > settings.max_query_chars:  # the added terms must not make it invalid
        retrieval_query = query
    try:
        hits = await retriever.retrieve(body.repo, retrieval_query, RETRIEVE_K)
    finally:
        await retriever.aclose()
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
        return {**done, "took_ms": round(took, 2), "session_id": session}

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
    events = answer_events(query, hits, backend, settings, lines_of, history)

    if accept and "text/event-stream" in accept:

        async def stream() -> AsyncIterator[str]:
            yield _sse(retrieval)
            try:
                async for event in iterate_in_threadpool(events):
                    if event.name == "done":
                        data = finish(event.data, "refused" if event.data["refused"] else "ok")
                        event = Event("done", data)
                    yield _sse(event)
            except CoderagError as exc:
                finish({}, "error")
                yield _sse(Event("error", {"detail": exc.detail}))
            finally:
                # A closed stream stops generation at the next token; if the pool thread is
                # still inside next(), the generator is simply dropped after that token.
                with contextlib.suppress(ValueError):
                    events.close()

        return StreamingResponse(stream(), media_type="text/event-stream")

    done: dict = {}
    for event in await run_in_threadpool(list, events):
        if event.name == "done":
            done = event.data
    return AskResponse(**finish(done, "refused" if done["refused"] else "ok"))
