"""Per-repository grants (issue 45), in-process: the grants file's forms and its errors, a file
read again when it changes (the last good version kept when the new one is broken), and an app
that will not start on a grants file it cannot use. The real servers are walked in
tests/test_grants_live.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag.auth import (
    REF_SEPARATOR,
    Grants,
    GrantsError,
    Principal,
    current_grants,
    read_grants,
)
from coderag.errors import ConfigError
from coderag.settings import get_settings
from coderag.store import refs
from coderag_app.server import create_app
from tests.liveserver import ROOT

TEAMS = """
[groups]
team-a = ["alice", "carol"]

[grants]
team-a = ["alpha-*", "shared"]
bob = "bravo-vault"
"*" = ["handbook"]
"""


def _write(path: Path, text: str) -> Path:
    """Replace ``path`` whole, as an editor or config tool does (a new inode each time)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def test_users_groups_everyone_and_refs(tmp_path: Path) -> None:
    grants = read_grants(_write(tmp_path / "grants.toml", TEAMS))
    assert grants.patterns_of("carol") == ("handbook", "alpha-*", "shared")
    assert grants.allows("alice", "alpha-pay") and grants.allows("carol", "shared")
    assert grants.allows("alice", refs.ref_key("alpha-pay", "release/2.x"))  # with its repository
    assert REF_SEPARATOR == refs.SEPARATOR
    assert not grants.allows("alice", "bravo-vault") and not grants.allows("alice", "alphapay")
    assert not grants.allows("alice", "bravo-vault@alpha-x")
    assert grants.allows("bob", "bravo-vault") and not grants.allows("bob", "bravo-vault2")
    assert grants.allows("dave", "handbook") and not grants.allows("dave", "shared")
    as_json = {
        "groups": {"team-a": ["alice", "carol"]},
        "grants": {"team-a": ["alpha-*", "shared"], "bob": "bravo-vault", "*": ["handbook"]},
    }
    assert read_grants(_write(tmp_path / "grants.json", json.dumps(as_json))) == grants
    assert not Grants().allows("alice", "alpha-pay")  # an empty file grants nothing


def test_principals_read_what_they_are_granted(tmp_path: Path) -> None:
    path = _write(tmp_path / "grants.toml", TEAMS)
    assert Principal("alice", "reader").may_read("bravo-vault")  # no grants file: as today
    assert Principal("root", "admin", path).may_read("bravo-vault")  # an admin reads all
    alice = Principal("alice", "reader", path)
    assert alice.may_read("alpha-pay") and not alice.may_read("bravo-vault")
    assert not Principal("mallory", "reader", path).may_read("alpha-pay")


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("g.toml", "[grants\nx = 1", "is not valid UTF-8 TOML"),
        ("g.json", "{'grants': {}}", "is not valid UTF-8 JSON"),
        ("g.json", "[1, 2]", "the top level must be a table"),
        ("g.toml", "[grant]\na = ['x']", "unknown table 'grant'"),
        ("g.toml", "[grants]\na = 3", "grants.a must be a list of strings"),
        ("g.toml", "grants = ['x']", "grants must be a table"),
        ("g.toml", "[grants]\na = ['svc@main']", "its refs come with it"),
        ("g.toml", "[grants]\na = ['../etc']", "a pattern is a repository name"),
        ("g.toml", "[groups]\nt = ['a b']", "group 't' lists 'a b', which is no user name"),
        ("g.yaml", "grants: {}", "must end in .toml or .json"),
        ("g.toml", None, "cannot be read"),
    ],
)
def test_a_malformed_file_says_what_to_fix(
    tmp_path: Path, name: str, text: str | None, words: str
) -> None:
    path = tmp_path / name
    if text is not None:
        _write(path, text)
    with pytest.raises(GrantsError, match="CODERAG_GRANTS") as caught:
        read_grants(path)
    assert words in str(caught.value) and str(path) in str(caught.value)


def test_special_files_are_refused_unread(tmp_path: Path) -> None:
    fifo = tmp_path / "grants.toml"
    os.mkfifo(fifo)  # reading it would block the request's thread forever
    with pytest.raises(GrantsError, match="must be a regular file"):
        read_grants(fifo)


def test_changes_take_effect_and_a_broken_version_keeps_the_last_good(tmp_path: Path) -> None:
    path = _write(tmp_path / "grants.toml", TEAMS)
    alice = Principal("alice", "reader", path)
    assert not alice.may_read("bravo-vault")
    _write(path, TEAMS.replace('"shared"]', '"shared", "bravo-*"]'))
    assert alice.may_read("bravo-vault")
    _write(path, "[grants\n")  # broken: what was in force stays
    assert alice.may_read("bravo-vault") and alice.may_read("alpha-pay")
    _write(path, TEAMS)
    assert not alice.may_read("bravo-vault")
    never = tmp_path / "never.toml"
    _write(never, "[grants")
    assert current_grants(never) == Grants()  # never good: nobody reads anything


def _settings(monkeypatch: pytest.MonkeyPatch, grants: Path, tokens: str) -> None:
    monkeypatch.setenv("CODERAG_GRANTS", str(grants))
    monkeypatch.setenv("CODERAG_API_TOKENS", tokens)
    get_settings.cache_clear()


def test_the_app_will_not_start_on_grants_it_cannot_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = "root:root-token:admin,alice:alice-token:reader"
    _settings(monkeypatch, _write(tmp_path / "g.toml", "[grants]\na = 1"), tokens)
    with pytest.raises(ConfigError, match=r"grants\.a must be a list of strings"):
        create_app(("coderag_parser",))
    _settings(monkeypatch, tmp_path / "missing.toml", tokens)
    with pytest.raises(ConfigError, match="cannot be read"):
        create_app(("coderag_parser",))
    _settings(monkeypatch, _write(tmp_path / "g.toml", TEAMS), "")
    with pytest.raises(ConfigError, match="CODERAG_GRANTS needs CODERAG_API_TOKENS"):
        create_app(("coderag_parser",))


def test_serve_prints_the_grants_error_and_exits(tmp_path: Path) -> None:
    path = _write(tmp_path / "grants.toml", "[grants]\nteam = ['a@b']")
    env = {
        **os.environ,
        "CODERAG_DATA_DIR": str(tmp_path / "data"),
        "CODERAG_API_TOKENS": "root:root-secret-x:admin",
        "CODERAG_GRANTS": str(path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "coderag_app.cli", "serve", "--service", "parser"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "error: grants file" in done.stderr and "its refs come with it" in done.stderr
    assert "root-secret-x" not in done.stderr


def test_a_broken_file_after_start_up_is_no_500_and_admins_see_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "grants.toml", TEAMS)
    _settings(monkeypatch, path, "root:root-token:admin,alice:alice-token:reader")
    (tmp_path / "alpha").mkdir()
    admin, alice = {"Authorization": "Bearer root-token"}, {"Authorization": "Bearer alice-token"}
    with TestClient(create_app(("coderag_parser",))) as client:
        body = {"name": "alpha-pay", "path": str(tmp_path / "alpha")}
        assert client.post("/repos", json=body, headers=admin).status_code == 202
        assert client.get("/health", headers=admin).json()["grants"] == "ok"
        _write(path, "[grants]\nteam-a = 7\n")
        r = client.get("/repos", headers=alice)
        assert r.status_code == 200 and [x["name"] for x in r.json()] == ["alpha-pay"]
        problem = client.get("/health", headers=admin).json()["grants"]
        assert "grants.team-a must be a list of strings" in problem, problem
        assert "grants" not in client.get("/health", headers=alice).json()
        _write(path, "[grants]\nbob = ['alpha-pay']\n")
        assert client.get("/repos", headers=alice).json() == []
        r = client.get("/repos/alpha-pay", headers=alice)
        assert r.status_code == 404
        assert r.json() == {"detail": "no repository named 'alpha-pay'; POST /repos to add it"}
        assert client.get("/health", headers=admin).json()["grants"] == "ok"
