"""A repository whose own git configuration names programs runs none of them (issue 30, finding 1).

A real repository in a temp folder gets a catalogue of config keys and attributes that make git
run a command (filter and diff drivers, ``diff.external``, ``include.path`` and ``includeIf``,
``core.fsmonitor``, ``core.pager``, ``core.sshCommand``, hooks, credential helper, gpg program,
upload-pack hooks...), each a command that leaves a mark file. Every git call the product makes
is then driven through the real components: register by path and by file:// URL, the dirty check
after an edit, the blame stage, ``POST /repos/{name}/history``, a who/when ``/ask``, a reindex,
a ref, a webhook push, a reader's clone and the eval's self-check. No mark may appear, and each
feature must still give the right answer. A control at the end runs plain git in the same
repository and sees the marks appear, so the catalogue is live.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag import queue
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag_app.server import create_app
from coderag_parser import trees
from coderag_retriever import selfcheck
from tests.conftest import wait_ready
from tests.test_answers import _commit, _git, build_shop
from tests.test_webhooks import SECRET, github_push

HOOKS = (
    "pre-commit",
    "post-checkout",
    "post-merge",
    "post-rewrite",
    "post-index-change",
    "reference-transaction",
    "pre-auto-gc",
    "fsmonitor-watchman",
    "push-to-checkout",
    "pre-push",
    "post-update",
    "update",
    "pre-receive",
    "post-receive",
)
"""Hooks git may run; each is planted in ``.git/hooks`` and in ``core.hooksPath``."""


def _mark(marks: Path, name: str) -> str:
    return f"touch {marks / name}"


def _hostile_config(marks: Path, included: Path, hooks: Path) -> str:
    """Every key that makes git run a command, each leaving the mark named after it."""

    def m(name: str) -> str:
        return _mark(marks, name)

    return f"""
[core]
	fsmonitor = {m("core-fsmonitor")}
	pager = {m("core-pager")}
	editor = {m("core-editor")}
	askPass = {m("core-askpass")}
	sshCommand = {m("core-sshcommand")}
	gitProxy = {m("core-gitproxy")}
	hooksPath = {hooks}
	alternateRefsCommand = {m("core-alternaterefscommand")}
[filter "evil"]
	clean = {m("filter-clean")}; cat
	smudge = {m("filter-smudge")}; cat
	required = false
[filter "evilproc"]
	process = {m("filter-process")}
[diff "evil"]
	textconv = {m("diff-textconv")}; cat
	command = {m("diff-command")}
[diff]
	external = {m("diff-external")}
[merge "evil"]
	driver = {m("merge-driver")}
[pager]
	log = {m("pager-log")}
	blame = {m("pager-blame")}
	status = {m("pager-status")}
	diff = {m("pager-diff")}
[credential]
	helper = !{m("credential-helper")}
[gpg]
	program = {m("gpg-program")}
[log]
	showSignature = true
[uploadpack]
	packObjectsHook = {m("uploadpack-packobjectshook")}
[remote "origin"]
	url = https://example.com/acme/shop.git
	uploadpack = {m("remote-uploadpack")}
	receivepack = {m("remote-receivepack")}
[url "ext::sh -c {m("url-ext").replace(" ", "% ")}% #"]
	insteadOf = https://example.com/
[protocol "ext"]
	allow = always
[interactive]
	diffFilter = {m("interactive-difffilter")}
[sequence]
	editor = {m("sequence-editor")}
[include]
	path = {included}
[includeIf "gitdir:/"]
	path = {included}.if
"""


def plant(root: Path, marks: Path) -> None:
    """Make the repository at ``root`` hostile: attributes committed in its tree, the config
    and hooks in its ``.git``."""
    hooks = root.parent / "hooks"
    hooks.mkdir()
    for where in (hooks, root / ".git" / "hooks"):
        where.mkdir(exist_ok=True)
        for hook in HOOKS:
            script = where / hook
            script.write_text(f"#!/bin/sh\n{_mark(marks, 'hook-' + hook)}\n")
            script.chmod(script.stat().st_mode | stat.S_IEXEC)
    included = root.parent / "included.config"
    included.write_text(
        f'[filter "inc"]\n\tclean = {_mark(marks, "include-filter-clean")}; cat\n'
        f'[diff "inc"]\n\ttextconv = {_mark(marks, "include-diff-textconv")}; cat\n'
    )
    Path(f"{included}.if").write_text(
        f'[filter "incif"]\n\tclean = {_mark(marks, "includeif-filter-clean")}; cat\n'
    )
    with (root / ".git" / "config").open("a") as config:
        config.write(_hostile_config(marks, included, hooks))


ATTRIBUTES = "*.py filter=evil diff=evil merge=evil\n*.md filter=inc diff=inc\n*.txt filter=incif\n"
ATTRIBUTES += "*.js filter=evilproc\n"


def build(root: Path) -> dict[str, str]:
    """The shop repository of ``tests.test_answers`` plus ``.gitattributes`` that send every file
    to a driver, a ``feature`` branch and a few more files; short hashes by name."""
    _, shas = build_shop(root)
    (root / ".gitattributes").write_text(ATTRIBUTES)
    (root / "shop" / "util.py").write_text(
        'def shout(text):\n    """Upper-case."""\n    return text.upper()\n'
    )
    (root / "notes.txt").write_text("notes\n")
    (root / "web.js").write_text("function greet() { return 1; }\n")
    now = datetime.now(UTC)
    shas["attributes"] = _commit(root, "Attributes", now - timedelta(minutes=4), "Ada Lovelace")
    _git(root, "checkout", "-q", "-b", "feature")
    (root / "shop" / "refunds.py").write_text(
        'def refund_order(order):\n    """Refund a paid order."""\n    return order["total"]\n'
    )
    shas["feature"] = _commit(root, "Refunds", now - timedelta(minutes=3), "Chen Wei")
    _git(root, "checkout", "-q", "main")
    return shas


def marks_left(marks: Path) -> list[str]:
    return sorted(p.name for p in marks.iterdir())


@pytest.mark.slow
def test_no_program_a_repository_configures_ever_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODERAG_URL_SCHEMES", "https,file")
    monkeypatch.setenv("CODERAG_WEBHOOK_SECRET", SECRET)
    get_settings.cache_clear()
    root, marks = tmp_path / "shop", tmp_path / "marks"
    marks.mkdir()
    shas = build(root)
    plant(root, marks)
    # a file whose stat changed but whose bytes did not: git status must hash it again, through
    # the clean filter if one were configured
    util = root / "shop" / "util.py"
    later = time.time() + 5
    os.utime(util, (later, later))

    with TestClient(create_app()) as client:
        # register by path: walk, dirty check, blame stage, history counts
        r = client.post("/repos", json={"name": "shop", "path": str(root)})
        assert r.status_code == 202, r.text
        repo = wait_ready(client, "shop", timeout=600)
        assert repo["status"] == "ready" and repo["commit"], repo
        assert repo["commit"].startswith(shas["attributes"]), (repo["commit"], shas)
        assert marks_left(marks) == [], "registering ran the repository's programs"
        units = get_catalog().units("shop", ["shop/orders.py"])
        timeout_fn = next(u for u in units if u.symbol == "order_timeout_seconds")
        assert timeout_fn.last_author == "Dana Scully", timeout_fn

        # an edit, then a reindex: the diff since the indexed commit and the dirty check
        orders = root / "shop" / "orders.py"
        orders.write_text(
            orders.read_text() + '\n\ndef order_total(order):\n    """Sum."""\n    return 1\n'
        )
        assert client.post("/repos/shop/reindex").status_code == 202
        assert wait_ready(client, "shop", timeout=600)["status"] == "ready"
        assert "shop/orders.py" in get_catalog().dirty_files("shop")
        symbols = {u.symbol for u in get_catalog().units("shop", ["shop/orders.py"])}
        assert "order_total" in symbols
        assert marks_left(marks) == [], "the dirty check or reindex ran the repository's programs"

        # history of a range (blame -L and log -L), then a who/when question
        line = next(
            i
            for i, text in enumerate(orders.read_text().splitlines(), 1)
            if "def order_timeout_seconds" in text
        )
        body = {
            "ranges": [{"file": "shop/orders.py", "start_line": line, "end_line": line + 3}],
            "log": True,
        }
        r = client.post("/repos/shop/history", json=body)
        assert r.status_code == 200, r.text
        ranged = r.json()["ranges"][0]
        assert ranged["last"]["author"] == "Dana Scully", ranged
        assert [c["commit"] for c in ranged["changes"]] == [shas["timeout"], shas["initial"]]
        r = client.post(
            "/ask",
            json={"query": "Who changed the order timeout logic last month?", "repo": "shop"},
        )
        assert r.status_code == 200, r.text
        assert f"`{shas['timeout']}` by Dana Scully" in r.json()["answer"], r.json()
        assert marks_left(marks) == [], "history or /ask ran the repository's programs"

        # a ref: checked against the repository, cloned from it, indexed
        r = client.post("/repos/shop/refs", json={"ref": "feature"})
        assert r.status_code == 202, r.text
        wait_ready(client, "shop", timeout=600)
        ref = client.get("/repos/shop/refs/feature").json()
        assert ref["status"] == "ready" and ref["complete"], ref
        assert ref["commit"].startswith(shas["feature"]), ref
        assert marks_left(marks) == [], "the ref ran the repository's programs"

        # a webhook push for the repository's origin reindexes it
        payload = {
            "ref": "refs/heads/main",
            "after": repo["commit"],
            "repository": {"clone_url": "https://example.com/acme/shop.git"},
        }
        status, answer, _ = github_push(client, payload)
        assert (status, answer["status"], answer.get("repos")) == (202, "queued", ["shop"]), answer
        assert wait_ready(client, "shop", timeout=600)["status"] == "ready"
        assert marks_left(marks) == [], "the webhook's reindex ran the repository's programs"

        # the same repository registered by file:// URL: cloned, indexed, a reader's clone
        r = client.post("/repos", json={"name": "shopurl", "url": root.as_uri(), "branch": "main"})
        assert r.status_code == 202, r.text
        by_url = wait_ready(client, "shopurl", timeout=600)
        assert by_url["status"] == "ready" and by_url["commit"] == repo["commit"], by_url
        tree = trees.reader_tree(get_catalog().get_repo("shopurl"), get_settings())
        assert (tree / "shop" / "orders.py").is_file()
        assert marks_left(marks) == [], "a clone by URL ran the repository's programs"

    # the eval's self-check questions read blame and log of the work tree
    assert selfcheck.blame(root, "shop/orders.py")
    questions = selfcheck.commit_questions(root, [])
    assert isinstance(questions, list)
    assert marks_left(marks) == [], "the self-check ran the repository's programs"
    queue.drain()

    # control: plain git in the same repository runs them (the catalogue is live)
    env = {**os.environ, "GIT_PAGER": ""}
    for args in (
        ["status", "--porcelain"],
        ["diff", "HEAD~1", "--", "shop/util.py", "README.md"],
        ["log", "-p", "-1", "--", "shop/util.py"],
    ):
        # a git of the server's last job may still hold index.lock on a loaded machine: wait
        # for it (bounded) rather than read a control that never ran as proof of nothing
        for _ in range(20):
            done = subprocess.run(
                ["git", "-C", str(root), *args], env=env, capture_output=True, check=False
            )
            if "index.lock" not in done.stderr.decode(errors="replace"):
                break
            time.sleep(0.5)
    fired = set(marks_left(marks))
    assert {"core-fsmonitor", "filter-clean", "diff-external"} <= fired, fired
