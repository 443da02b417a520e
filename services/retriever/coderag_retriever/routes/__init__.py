"""Retrieval routes. Each ranks a repository's units for a query: ``rank(query, index, n)`` returns
unit positions in the index, best first, with the route's own score."""

from coderag_retriever.routes.keyword import rank as keyword
from coderag_retriever.routes.symbol import rank as symbol
from coderag_retriever.routes.vector import rank as vector

ROUTES = {"vector": vector, "keyword": keyword, "symbol": symbol}
"""Route name -> ranking function."""

__all__ = ["ROUTES"]
