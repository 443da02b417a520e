"""Retrieval routes. Each ranks a repository's units for a query: ``rank(query, index, n)`` returns
unit positions in the index, best first, with the route's own score. ``history`` and ``feedback``
read what the other routes found, so they run last. Which routes exist, and in what order they
run, is ``coderag.routes``'s registry; this table gives each its code."""

from collections.abc import Callable
from typing import Any

from coderag import routes, spaces
from coderag_retriever.routes.cluster import rank as cluster
from coderag_retriever.routes.exact import rank as exact
from coderag_retriever.routes.feedback import rank as feedback
from coderag_retriever.routes.history import rank as history
from coderag_retriever.routes.keyword import rank as keyword
from coderag_retriever.routes.symbol import rank as symbol
from coderag_retriever.routes.vector import route as vector_route

CODE: dict[str, Callable[..., Any]] = {
    **{space: vector_route(space) for space in spaces.NAMES},  # a route per vector space
    "keyword": keyword,
    "symbol": symbol,
    "exact": exact,
    "cluster": cluster,
    "history": history,
    "feedback": feedback,
}
"""Each registered route's ranking function."""

ROUTES = {name: CODE[name] for name in routes.SEARCH}
"""Routes that search the whole repository."""

PRIOR_ROUTES = {name: CODE[name] for name in routes.PRIOR}
"""Routes that run after the others, in their running order, and read what they found."""

__all__ = ["PRIOR_ROUTES", "ROUTES"]
