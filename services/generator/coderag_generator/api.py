"""POST /ask: JSON, or server-sent events with ``Accept: text/event-stream``; an adapter of the
ask use case (``asking``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Header, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from coderag import audit
from coderag.deps import CatalogDep, SettingsDep, UserDep
from coderag.responses import errors
from coderag.schemas import AskRequest, AskResponse
from coderag.settings import get_settings
from coderag_generator import asking
from coderag_generator.answer import Done, Streamed
from coderag_generator.asking import Asker
from coderag_generator.backends import get_backend
from coderag_generator.client import ParserClient, RetrieverClient, connect

router = APIRouter(tags=["ask"])


@asynccontextmanager
async def lifespan(_: FastAPI):
    """Load the answer backend now, so a missing model stops startup with a clear error."""
    await run_in_threadpool(get_backend, get_settings())
    yield


def asker(request: Request, settings: SettingsDep, catalog: CatalogDep, user: UserDep) -> Asker:
    """The caller with the retriever and parser at their URLs, or in this very app; the
    caller's authorization goes along."""
    auth = request.headers.get("authorization")
    headers = {"authorization": auth} if auth else {}
    # the retriever in another process writes no row for the /retrieve this /ask makes
    inner = {audit.INNER_HEADER: audit.inner_header(settings, auth or "")}
    return Asker(
        user,
        connect(RetrieverClient, settings.retriever_url, request.app, headers | inner),
        connect(ParserClient, settings.parser_url, request.app, headers),
        catalog,
        settings,
    )


def _sse(event: Streamed) -> str:
    return f"event: {event.name}\ndata: {json.dumps(event.payload(), ensure_ascii=False)}\n\n"


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
    who: Annotated[Asker, Depends(asker)],
    accept: Annotated[str | None, Header()] = None,
):
    """Answer a question with checked citations, or refuse; with a ``session_id``, as a follow-up
    of that session's earlier questions (an unknown id starts a session)."""
    if not (accept and "text/event-stream" in accept):
        async with aclosing(asking.ask(body, who)) as events:
            done = [e async for e in events if isinstance(e, Done)]
        return AskResponse.model_validate(done[-1].payload())
    events = asking.ask(body, who, report_errors=True)
    first = await anext(events)  # a rejected question is an HTTP error, not a stream

    async def stream() -> AsyncIterator[str]:
        async with aclosing(events):
            yield _sse(first)
            async for event in events:
                yield _sse(event)

    return StreamingResponse(stream(), media_type="text/event-stream")
