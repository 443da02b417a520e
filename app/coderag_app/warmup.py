"""The ask path warmed while the server starts (issue 43): what loads lazily on first use (the
vector store's client, the encoders' first pass, the git views, the routers and validators, the
answer backend's first call) is paid before the server says it is ready, so the first question
after a restart is as fast as the tenth.

The warm-up asks the app itself, in this process, as a client would: a one-token chat completion
about the first searchable repository (the ask use case that /ask runs), else a query embedding.
Its audit rows are discarded and any failure is only logged: a warm-up never stops a start."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from coderag import audit
from coderag.settings import Settings
from coderag.store import get_catalog, get_vectors
from coderag.store.repos import Repo
from coderag_app import startup
from coderag_app.hosts import allowed_hosts

log = startup.log

QUESTION = "Where is the main entry point, and what does it call first?"
"""The warm-up's question: any question runs the whole path."""

TIMEOUT_S = 90.0
"""Longest the warm-up may hold the start back (a large model's first prompt on a CPU)."""


@dataclass(frozen=True)
class Call:
    """One in-process request of the warm-up."""

    path: str
    body: dict[str, Any]


@dataclass(frozen=True)
class Plan:
    """What one warm-up walks (in words) and the POST requests that walk it."""

    what: str
    calls: list[Call]


def first_searchable(repos: list[Repo]) -> Repo | None:
    """The repository questions will most likely go to: the first one that can be searched."""
    for repo in repos:
        if not repo.ref_of and (repo.status == "ready" or repo.indexed_at):
            return repo
    return None


def plan(services: tuple[str, ...], settings: Settings, repo: Repo | None) -> Plan | None:
    """The requests that walk the path this process serves: a chat completion of one token (the
    ask use case, with the retriever and parser in this process), a /retrieve, or the query
    encoders alone; None when nothing here loads lazily."""
    in_process = "coderag_retriever" in services and not settings.retriever_url
    if repo is not None and "coderag_generator" in services and in_process:
        body = {
            "model": f"coderag/{repo.name}",
            "messages": [{"role": "user", "content": QUESTION}],
            "max_tokens": 1,
        }
        return Plan(f"the ask path on {repo.name!r}", [Call("/v1/chat/completions", body)])
    if repo is not None and "coderag_retriever" in services:
        body = {"query": QUESTION, "repo": repo.name}
        return Plan(f"the search path on {repo.name!r}", [Call("/retrieve", body)])
    if "coderag_embedder" in services:
        body = {"texts": [QUESTION], "kind": "query"}
        spaces = [Call("/embed", {**body, "space": s}) for s in ("vector", "vector2")]
        return Plan("the query encoders", spaces)
    return None


def _client(app: FastAPI, settings: Settings) -> httpx.AsyncClient:
    """A client of ``app`` in this process, under a name and a token the app accepts."""
    allowed = allowed_hosts(settings)
    host = "localhost" if allowed is None or "localhost" in allowed else sorted(allowed)[0]
    if ":" in host:
        host = f"[{host}]"
    headers = {"x-user": "coderag-warm-up"}
    for token, principal in settings.principals().items():
        if principal.may("admin"):  # an admin reads every repository, grants or not
            headers = {"authorization": f"Bearer {token}"}
            break
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url=f"http://{host}",
        headers=headers,
        timeout=TIMEOUT_S,
    )


async def _ask(app: FastAPI, settings: Settings, chosen: Plan) -> None:
    """Send the plan's requests; a status that is not a success is logged, not raised."""
    async with _client(app, settings) as http:
        for call in chosen.calls:
            r = await http.post(call.path, json=call.body)
            if r.status_code >= 400 and call.path != "/embed":  # vector2 may be switched off
                log.warning("warm-up: %s answered %s: %s", call.path, r.status_code, r.text[:300])


async def warm(app: FastAPI, services: tuple[str, ...], settings: Settings) -> str | None:
    """Walk the path this process serves once, as a start-up stage, its audit rows discarded;
    what was warmed, or None when there was nothing to warm or it failed (logged)."""
    token = audit.current_call.set(audit.Call("coderag-warm-up", discard=True))
    try:
        with startup.PROGRESS.stage("the vector store's client"):
            # made on first use: /health and every search need it
            await run_in_threadpool(lambda: get_vectors(settings).heartbeat())
        repos = await run_in_threadpool(lambda: get_catalog().list_repos())
        chosen = plan(services, settings, first_searchable(repos))
        if chosen is None:
            return None
        with startup.PROGRESS.stage(chosen.what, "warming", "warmed"):
            await asyncio.wait_for(_ask(app, settings, chosen), TIMEOUT_S)
        return chosen.what
    except Exception as exc:  # a warm-up that fails only leaves the first question slower
        log.warning("warm-up skipped: %s", str(exc) or type(exc).__name__)
        return None
    finally:
        audit.current_call.reset(token)
