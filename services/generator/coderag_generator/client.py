"""The generator's client of the retriever: over HTTP in compose, in-process through
``httpx.ASGITransport`` in the all-in-one server; the same code either way."""

from __future__ import annotations

import httpx

from coderag.errors import (
    CoderagError,
    Conflict,
    InvalidInput,
    NotFound,
    Unauthorized,
    Unavailable,
)

_ERRORS: dict[int, type[CoderagError]] = {
    400: InvalidInput,
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    422: InvalidInput,
}


class RetrieverClient:
    """Calls the retriever's /retrieve."""

    def __init__(
        self,
        base_url: str,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url, transport=transport, timeout=60.0, headers=headers or {}
        )

    async def retrieve(self, repo: str, query: str, top_k: int) -> list[dict]:
        """Hits with code, best first; the retriever's 4xx errors are re-raised as such."""
        try:
            resp = await self.http.post(
                "/retrieve", json={"repo": repo, "query": query, "top_k": top_k}
            )
        except httpx.HTTPError as exc:
            raise Unavailable(f"retriever unreachable: {exc}") from exc
        if resp.status_code >= 400:
            detail = resp.json().get("detail", resp.text) if resp.content else resp.reason_phrase
            raise _ERRORS.get(resp.status_code, Unavailable)(str(detail))
        return resp.json()["results"]

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()
