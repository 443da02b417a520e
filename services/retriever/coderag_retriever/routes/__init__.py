"""Retrieval routes. Each ranks a repository's units for a query: ``rank(query, index, n)`` returns
unit positions in the index, best first, with the route's own score. ``history`` only reorders the
candidates the other routes found, so it runs last."""

from coderag_retriever.routes.cluster import rank as cluster
from coderag_retriever.routes.exact import rank as exact
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

PRIOR_ROUTES = {"history": history}
"""Routes that reorder the candidates of the others."""

__all__ = ["PRIOR_ROUTES", "ROUTES"]
