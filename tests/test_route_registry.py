"""One route registry (issue 22): the settings, the retriever's route table, the learned ranker,
the vector stages and the self-check all read their route names from ``coderag.routes``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from coderag import chain, routes
from coderag.settings import Settings
from coderag_retriever import learned, selfscore
from coderag_retriever.routes import CODE, PRIOR_ROUTES, ROUTES
from coderag_retriever.search import routes_run


def test_every_registered_route_has_code_and_runs_once() -> None:
    assert set(CODE) == set(routes.NAMES)
    assert [*ROUTES, *PRIOR_ROUTES] == [*routes.SEARCH, *routes.PRIOR]
    assert sorted([*ROUTES, *PRIOR_ROUTES]) == sorted(routes.NAMES)
    assert list(PRIOR_ROUTES) == ["history", "feedback"]  # feedback reads history's ranks too


def test_the_other_lists_derive_from_the_registry() -> None:
    ranked = ("vector", "vector2", "keyword", "symbol", "exact", "feedback")
    assert ranked == learned.RANKED_ROUTES  # ranker.json's feature columns, in this order
    assert learned.FEATURES[: len(routes.RANKED)] == tuple(f"rr_{r}" for r in routes.RANKED)
    assert selfscore.DOC_ROUTES == routes.DOC
    assert set(chain.VECTOR_ROUTES.values()) <= {"vector", "vector2"}
    assert set(chain.VECTOR_ROUTES) == {r.name for r in routes.REGISTRY if r.space}


def test_settings_name_exactly_the_registered_routes() -> None:
    every = ",".join(f"{name}:1" for name in routes.NAMES)
    settings = Settings(route_weights=every)
    assert list(settings.weights()) == list(routes.NAMES)
    assert routes_run(settings) == [*routes.SEARCH, *routes.PRIOR]
    with pytest.raises(ValidationError, match="unknown route 'bm25'"):
        Settings(route_weights="bm25:1")


def test_the_defaults_and_rewrite_order_come_from_the_registry() -> None:
    default = Settings.model_fields["route_weights"].default
    assert (
        default
        == routes.DEFAULT_WEIGHTS
        == (
            "vector:0.5,vector2:1.0,keyword:1.0,symbol:0.5,exact:2.0,feedback:0.0,cluster:0.0,"
            "history:0.0"
        )
    )
    assert Settings().weights() == {r.name: r.weight for r in routes.REGISTRY}
    assert routes.parse_weights(routes.format_weights(Settings().weights())) == Settings().weights()
    assert routes.REWRITE == (
        "keyword",
        "vector",
        "vector2",
    )  # the fusion's order for extra queries
