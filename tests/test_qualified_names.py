"""A member named the way its language writes it (``Type::method``, ``(*T).Method``, ``T.Method``,
``pkg.Func``, ``Class#method``, ``obj->method``) is found under the dotted name the index stores,
and ranks above its type in the exact and symbol routes and in the full search: the five language
fixtures, indexed by the real parser."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from coderag import chain
from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag_parser import tasks
from coderag_retriever import index as repo_index
from coderag_retriever.query import Query
from coderag_retriever.search import rank
from coderag_retriever.text import qualified_names

ROUTES = {
    name: importlib.import_module(f"coderag_retriever.routes.{name}")
    for name in ("exact", "symbol")
}
"""The two routes that read names from the question (the package exports their ``rank`` only)."""

SPELLINGS = [
    (
        "How does PaymentService::settle record a payment?",
        "PaymentService.settle",
        "PaymentService",
    ),
    ("PaymentService::settle", "PaymentService.settle", "PaymentService"),
    ("PaymentService.settle", "PaymentService.settle", "PaymentService"),
    ("OrderService::create", "OrderService.create", "OrderService"),
    ("what does (*Service).ProcessOrder do?", "(*Service).ProcessOrder", "Service"),
    ("Service.ProcessOrder", "(*Service).ProcessOrder", "Service"),
    ("(Service).Name", "Service.Name", "Service"),
    ("orders.NewService", "NewService", None),
    ("UserStore#get", "UserStore.get", "UserStore"),
    ("UserStore->get", "UserStore.get", "UserStore"),
    ("UserClient::load", "UserClient.load", "UserClient"),
    ("Cart#add", "Cart.add", "Cart"),
    ("`Cache#evict()`", "Cache.evict", "Cache"),
]
"""(question, the member's unit symbol, its container's unit symbol or None for a package)."""


def test_member_spellings_read_as_dotted_names() -> None:
    assert qualified_names("Type::method and ns::Type::method") == "Type.method and ns.Type.method"
    assert qualified_names("(*T).M, (T).M, T#m, $obj->m") == "T.M, T.M, T.m, $obj.m"
    # JavaScript's prototype spelling is the method the parser names Model.save (issue 42)
    assert qualified_names("Model.prototype.save and A.prototype.b.c") == "Model.save and A.b.c"
    assert qualified_names("what is x.prototype for?") == "what is x.prototype for?"
    # prose and calls keep their punctuation
    for text in ("C# code", "issue #12", "a -> b", "fe80::1", "len(s).bit_length", "# Title"):
        assert qualified_names(text) == text


@pytest.fixture
def routes_index(sample_repo: Path, monkeypatch: pytest.MonkeyPatch) -> repo_index.RepoIndex:
    """The sample repository parsed by the real parser job (no vectors) and its retriever index."""
    queued: list[Any] = []
    monkeypatch.setattr(chain, "enqueue", queued.append)  # the keyword stage is all routes need
    catalog = get_catalog()
    catalog.create_repo("names", str(sample_repo), None, None)
    tasks.index_repo(IndexRepo(repo="names"))
    assert queued
    return repo_index.build(catalog, "names", 1)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_named_member_ranks_above_its_type_in_the_name_routes(
    routes_index: repo_index.RepoIndex, route: str
) -> None:
    for question, member, container in SPELLINGS:
        ranked = ROUTES[route].rank(Query("names", question), routes_index, 10)
        symbols = [routes_index.units[pos].symbol for pos, _ in ranked]
        assert symbols and symbols[0] == member, (route, question, symbols)
        if container in symbols:
            assert symbols.index(member) < symbols.index(container), (route, question, symbols)


@pytest.mark.slow
def test_a_named_member_is_the_first_search_result(sample_repo: Path) -> None:
    get_catalog().create_repo("names", str(sample_repo), None, None)
    run_now(IndexRepo(repo="names"))
    settings = get_settings()
    for question, member, _ in SPELLINGS:
        top = [r.unit.symbol for r in rank("names", question, 5, settings)]
        assert top[0] == member, (question, top)
