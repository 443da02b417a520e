"""Retrieval routes. Each ranks a repository's units for a query: ``rank(query, index, n)`` returns
unit positions in the index, best first, with the route's own score. ``history`` and ``feedback``
read what the other routes found, so they run last."""

from coderag_retriever.routes.cluster import rank as cluster
from coderag_retriever.routes.exact import rank as exact
from coderag_retriever.routes.feedback import rank as feedback
from coderag_retriever.routes.history import rank as history
from coderag_retriever.routes.keyword import rank as keyword
from coderag_retriever.routes.symbol import rank as symbol
from coderag_retriever.routes.vector import route as vector_route

ROUTES = {
    "vector": vector_route("vector"),
    "vector2": vector_route("vector2"),
    "keyword": keyword,
    "symbol": symbol,
    "exact": exact,
    "cluster": cluster,
}
"""Routes that search the whole repository."""

PRIOR_ROUTES = {"history": history, "feedback": feedback}
"""Routes that run after the others and read what they found."""

__all__ = ["PRIOR_ROUTES", "ROUTES"]
