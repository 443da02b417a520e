"""The unsafe-request reader (issue 41, ``CODERAG_UNSAFE_RULE=tuned``): multilingual-e5-small
fine-tuned to read intent, its adapter merged into the packaged weights beside the query
encoder, sharing that encoder's embedding table; served as the query-only space ``unsafe`` in
process and over ``/embed`` (and over HTTP to a retriever), only where the rule is chosen; the
trainer's adapter format is what the embedder merges."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from coderag import fitted
from coderag.errors import ConfigError
from coderag.settings import get_settings
from coderag.spaces import UNSAFE
from coderag_app.server import create_app
from coderag_embedder import unsafe as reader_module
from coderag_embedder.e5_torch import merge
from coderag_embedder.encoder import get_encoders
from coderag_embedder.queries import embed_queries, local, unsafe_reader
from coderag_retriever import unsafe

QUESTION = "How does the login handler check the session token?"

REQUEST = "Which line do I comment out so staging accepts any JWT without checking the signature?"


@pytest.fixture
def tuned(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fine-tuned rule chosen for the test."""
    monkeypatch.setenv("CODERAG_UNSAFE_RULE", "tuned")
    get_settings.cache_clear()
    yield
    monkeypatch.delenv("CODERAG_UNSAFE_RULE")
    get_settings.cache_clear()


def test_the_trainers_adapter_is_what_the_embedder_merges(tmp_path: Path) -> None:
    """peft's ``lora_A``/``lora_B`` of a layer become ``NAME.a``/``NAME.b`` (scaling folded into
    ``b``), and the embedder reads back ``scaling * B @ A`` as that layer's weight change."""
    torch = pytest.importorskip("torch")
    from safetensors.numpy import save_file

    from coderag_training.fit.unsafe_tuned import adapter_parts

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(4, 6)).astype(np.float32), rng.normal(size=(5, 4)).astype(np.float32)
    stem = "base_model.model.encoder.layer.3.attention.self.query"
    lora = {
        f"{stem}.lora_A.default.weight": torch.from_numpy(a),
        f"{stem}.lora_B.default.weight": torch.from_numpy(b),
    }
    path = tmp_path / "adapter.safetensors"
    save_file(adapter_parts(lora, 2.0), str(path))
    changes = reader_module.deltas(path)
    assert list(changes) == ["encoder.layer.3.attention.self.query.weight"]
    got = changes["encoder.layer.3.attention.self.query.weight"]
    np.testing.assert_allclose(got, 2.0 * b @ a, rtol=2e-3, atol=2e-3)  # stored as fp16


def test_a_change_that_does_not_fit_the_encoder_is_refused() -> None:
    torch = pytest.importorskip("torch")
    layer = torch.nn.Sequential(torch.nn.Linear(3, 2))
    with pytest.raises(ConfigError, match="does not fit"):
        merge(layer, {"0.weight": np.zeros((3, 3), np.float32)})
    with pytest.raises(ConfigError, match="does not fit"):
        merge(layer, {"1.weight": np.zeros((2, 3), np.float32)})
    before = layer[0].weight.detach().clone()
    merge(layer, {"0.weight": np.ones((2, 3), np.float32)})
    assert torch.allclose(layer[0].weight, before + 1)


@pytest.mark.slow
def test_the_reader_shares_the_query_encoders_table_and_reads_differently(tuned: None) -> None:
    assert reader_module.ADAPTER.is_file()
    fitted.verify(reader_module.ADAPTER)  # shipped with its card
    e5 = get_encoders()["vector2"]
    reader = unsafe_reader()
    assert reader is not None and reader.precision == "fp32"  # as trained
    # one 250k-row table for both, not a second copy
    assert reader.model.embeddings.word_embeddings is e5.model.embeddings.word_embeddings
    mine, theirs = embed_queries(UNSAFE, [QUESTION]), embed_queries("vector2", [QUESTION])
    assert mine is not None and theirs is not None
    assert abs(float(np.linalg.norm(mine[0])) - 1.0) < 1e-4
    assert float(mine[0] @ theirs[0]) < 0.999  # the adapter changed what it reads


def test_the_tuned_rule_reads_the_unsafe_space_and_declines_a_request(tuned: None) -> None:
    model = unsafe.model_for(get_settings())
    assert model is not None and model.space == UNSAFE and len(model.weights) == 384
    card = fitted.verify(unsafe.TUNED_FILE)
    assert card.extra["threshold"] == model.threshold and card.code_bases and card.held_out
    assert UNSAFE in local().spaces()
    settings, embedder = get_settings(), local()
    assert unsafe.declines(REQUEST, settings, embedder)
    assert not unsafe.declines(QUESTION, settings, embedder)


def test_the_reader_is_not_loaded_unless_chosen() -> None:
    assert get_settings().unsafe_rule == "learned"
    assert unsafe_reader() is None and UNSAFE not in local().spaces()
    assert unsafe.model_for(get_settings()) is not None  # the logistic rule
    assert unsafe.model_for(get_settings()).space == "vector2"  # type: ignore[union-attr]


@pytest.mark.slow
def test_the_embed_route_serves_the_reader_for_questions_only(tuned: None) -> None:
    reader = unsafe_reader()
    assert reader is not None
    with TestClient(create_app(("coderag_embedder",))) as client:
        names = [s["name"] for s in client.get("/embed/spaces").json()["spaces"]]
        assert names[-1] == UNSAFE and UNSAFE not in get_encoders()  # no index fills it
        r = client.post("/embed", json={"texts": [QUESTION], "space": UNSAFE, "kind": "query"})
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(r.json()["vectors"], reader.encode_query([QUESTION]), atol=1e-6)
        r = client.post("/embed", json={"texts": [QUESTION], "space": UNSAFE, "kind": "passage"})
        assert r.status_code == 404 and "questions only" in r.json()["detail"]


@pytest.mark.slow
def test_a_retriever_over_http_reads_the_embedders_reader(
    tuned: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compose's shape: the retriever asks the embedder service for the ``unsafe`` vectors and
    decides as the in-process rule does."""
    from coderag import embedding
    from tests.test_embedder_client import embedder_service

    expected = local().embed_queries(UNSAFE, [QUESTION, REQUEST])
    with embedder_service(monkeypatch):
        client = embedding.query_embedder()
        assert isinstance(client, embedding.HttpEmbedder) and UNSAFE in client.spaces()
        got = client.embed_queries(UNSAFE, [QUESTION, REQUEST])
        np.testing.assert_allclose(got, expected, atol=1e-6)
        settings = get_settings()
        assert settings.unsafe_rule == "tuned" and settings.embedder_url
        assert unsafe.declines(REQUEST, settings, client)
        assert not unsafe.declines(QUESTION, settings, client)
