"""The generator's clients of the other services (the retriever's /retrieve, the parser's
/repos/{name}/history and /repos/{name}/freshness): over HTTP in compose, in-process through
``httpx.ASGITransport`` in the all-in-one server; the same code either way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import httpx
from starlette.types import ASGIApp

from coderag.errors import Unavailable, raise_for
from coderag.history import HistoryResponse, LineRange
from coderag.schemas import Freshness, RetrieveResponse


class ServiceClient:
    """An HTTP client of one service, closed after the request that made it."""

    def __init__(
        self,
        base_url: str,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url, transport=transport, timeout=60.0, headers=headers or {}
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()


C = TypeVar("C", bound=ServiceClient)


def connect(cls: type[C], url: str | None, app: ASGIApp, headers: dict[str, str]) -> C:
    """A client of another service: over HTTP at ``url`` when set, else into ``app`` in this
    process."""
    if url:
        return cls(url, headers=headers)
    return cls("http://localhost", httpx.ASGITransport(app=app), headers)


class RetrieverClient(ServiceClient):
    """Calls the retriever's /retrieve."""

    async def retrieve(self, repo: str, query: str, top_k: int) -> RetrieveResponse:
        """/retrieve's answer: ``results`` (typed hits with code, best first) and
        ``routes_missing``; the retriever's 4xx errors are re-raised as such."""
        try:
            resp = await self.http.post(
                "/retrieve", json={"repo": repo, "query": query, "top_k": top_k}
            )
        except httpx.HTTPError as exc:
            raise Unavailable(f"retriever unreachable: {exc}") from exc
        raise_for(resp)
        return RetrieveResponse.model_validate_json(resp.content)


class ParserClient(ServiceClient):
    """Calls the parser's /repos/{name}/history (git facts over line ranges) and
    /repos/{name}/freshness."""

    async def freshness(self, repo: str) -> Freshness | None:
        """The commit the index of ``repo`` (a repository or ref key) was built from and how far
        HEAD has moved since; None when the parser cannot say (an answer never fails for it)."""
        try:
            resp = await self.http.get(f"/repos/{repo}/freshness")
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        try:
            return Freshness.model_validate_json(resp.content)
        except ValueError:  # a parser of another version: the answer goes without it
            return None

    async def history(
        self,
        repo: str,
        ranges: Sequence[LineRange],
        log: bool = False,
        since: str | None = None,
        until: str | None = None,
        oldest_first: bool = False,
        pickaxe: str | None = None,
    ) -> HistoryResponse:
        """The history of the ranges: ``log=True`` adds the commits that changed them, within
        ``since``/``until`` (ISO 8601) when given, oldest first with ``oldest_first``."""
        # the parser validates the request (and says what is wrong), so it is not built here
        body = {
            "ranges": [r.model_dump() for r in ranges],
            "log": log,
            "since": since,
            "until": until,
            "oldest_first": oldest_first,
            "pickaxe": pickaxe,
        }
        try:
            resp = await self.http.post(f"/repos/{repo}/history", json=body)
        except httpx.HTTPError as exc:
            raise Unavailable(f"parser unreachable: {exc}") from exc
        raise_for(resp)
        return HistoryResponse.model_validate_json(resp.content)
