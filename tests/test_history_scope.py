"""Who/when questions answer about what they name, through the real /ask route over a real git
repository with several files and commits by different authors: a path ("Who last changed
webkit/middleware/cors.py?"), a file named by its base name, a subsystem named by its file
("the routing code") and a symbol; each answer leads with the newest commit of what it names and
mentions no other file's commits."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from coderag_app.server import create_app
from tests.conftest import wait_ready

ROUTING = '''"""URL routing: routes, mounts and the router that dispatches to them."""

import re

PARAM = re.compile(r"{([a-zA-Z_][a-zA-Z0-9_]*)}")


class Route:
    """One path pattern bound to an endpoint."""

    def __init__(self, path, endpoint, methods=None):
        self.path = path
        self.endpoint = endpoint
        self.methods = set(methods or ["GET"])
        self.regex = re.compile("^" + PARAM.sub(r"(?P<\\1>[^/]+)", path) + "$")

    def matches(self, path, method):
        """Whether this route takes ``method`` on ``path``; the path parameters when it does."""
        found = self.regex.match(path)
        if found is None or method not in self.methods:
            return None
        return found.groupdict()


class Router:
    """The routes of an application, tried in order."""

    def __init__(self):
        self.routes = []

    def add_route(self, path, endpoint, methods=None):
        """Append a route for ``path``."""
        self.routes.append(Route(path, endpoint, methods))

    def route(self, path, methods=None):
        """A decorator that adds the function it wraps as a route."""

        def decorator(func):
            self.add_route(path, func, methods)
            return func

        return decorator

    def dispatch(self, path, method):
        """The endpoint and parameters of the first route that matches."""
        for route in self.routes:
            params = route.matches(path, method)
            if params is not None:
                return route.endpoint, params
        raise LookupError(f"no route for {method} {path}")
'''

APPLICATIONS = '''"""The application object users create."""

from webkit.routing import Router


class App:
    """A web application: a router and its middleware."""

    def __init__(self, debug=False):
        self.debug = debug
        self.router = Router()
        self.middleware = []

    def route(self, path, methods=None):
        """Register the decorated function for ``path``."""
        return self.router.route(path, methods)

    def add_middleware(self, cls, **options):
        """Wrap the application in middleware ``cls``."""
        self.middleware.append((cls, options))
'''

CORS = '''"""Cross-origin resource sharing: which origins may call the application."""

ALL_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")
SAFELISTED_HEADERS = {"Accept", "Accept-Language", "Content-Language", "Content-Type"}


class CORSMiddleware:
    """Answers preflight requests and adds CORS headers to simple ones."""

    def __init__(self, app, allow_origins=(), allow_methods=("GET",), max_age=600):
        self.app = app
        self.allow_origins = list(allow_origins)
        self.allow_methods = ALL_METHODS if "*" in allow_methods else tuple(allow_methods)
        self.max_age = max_age

    def is_allowed_origin(self, origin):
        """Whether ``origin`` may call the application."""
        if "*" in self.allow_origins:
            return True
        return origin in self.allow_origins

    def preflight_headers(self, origin):
        """The headers of a preflight response for ``origin``."""
        return {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": ", ".join(self.allow_methods),
            "Access-Control-Max-Age": str(self.max_age),
        }
'''

GZIP = '''"""Response compression."""

import gzip


class GZipMiddleware:
    """Compresses responses larger than a minimum size when the client accepts gzip."""

    def __init__(self, app, minimum_size=500, level=9):
        self.app = app
        self.minimum_size = minimum_size
        self.level = level

    def compress(self, body):
        """The body gzipped, or as it is when it is small."""
        if len(body) < self.minimum_size:
            return body
        return gzip.compress(body, compresslevel=self.level)
'''

FILES = {
    "webkit/routing.py": ROUTING,
    "webkit/applications.py": APPLICATIONS,
    "webkit/middleware/cors.py": CORS,
    "webkit/middleware/gzip.py": GZIP,
}


def _git(root: Path, *args: str, when: datetime | None = None, who: str = "Ada") -> str:
    stamp = (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": who,
        "GIT_COMMITTER_NAME": who,
        "GIT_AUTHOR_EMAIL": f"{who.split()[0].lower()}@webkit.example",
        "GIT_COMMITTER_EMAIL": f"{who.split()[0].lower()}@webkit.example",
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
    }
    out = subprocess.run(
        ["git", "-C", str(root), *args], env=env, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new))


def _commit(root: Path, message: str, days_ago: float, who: str) -> str:
    _git(root, "add", "-A")
    when = datetime.now(UTC) - timedelta(days=days_ago)
    _git(root, "commit", "-qm", message, when=when, who=who)
    return _git(root, "rev-parse", "--short=7", "HEAD")


def build_webkit(root: Path) -> dict[str, str]:
    """A small web framework with five commits by five authors, the newest last: each names a
    file its commit alone touches after the first."""
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    _git(root, "init", "-q", "-b", "main")
    shas = {"initial": _commit(root, "Initial webkit", 200, "Ada Lovelace")}
    # the CORS change touches the module's constants, outside any method
    _edit(root, "webkit/middleware/cors.py", '"Content-Type"}', '"Content-Type", "Range"}')
    shas["cors"] = _commit(root, "CORS: Range is a safelisted header", 12, "Bob Barker")
    _edit(root, "webkit/middleware/gzip.py", "level=9", "level=6")
    shas["gzip"] = _commit(root, "GZip: default to level 6", 8, "Carol Danvers")
    # the routing change touches the module's pattern, not any method named route
    _edit(root, "webkit/routing.py", "[a-zA-Z0-9_]*)}", "[a-zA-Z0-9_]*)(?::[a-z]+)?}")
    shas["routing"] = _commit(root, "Routing: path parameters take a converter", 6, "Dan Brown")
    _edit(root, "webkit/applications.py", "return self.router.route(path, methods)",
          "return self.router.route(path, methods or ['GET'])")  # fmt: skip
    shas["app_route"] = _commit(root, "App.route defaults to GET", 3, "Erin Brockovich")
    return shas


@contextmanager
def _served(root: Path) -> Iterator[TestClient]:
    """The app with the repository at ``root`` registered as webkit and indexed."""
    with TestClient(create_app()) as client:
        reply = client.post("/repos", json={"name": "webkit", "path": str(root)})
        assert reply.status_code == 202, reply.text
        assert wait_ready(client, "webkit", timeout=600)["status"] == "ready"
        yield client


@pytest.fixture
def webkit(tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """The app with the webkit repository registered and indexed; the commits' short hashes."""
    yield from _webkit_then(tmp_path, ())


Change = tuple[str, str, str, str, str, float, str]
"""One more commit: (key, file, old, new, message, days ago, author); no ``old`` writes the
file anew."""


def _webkit_then(
    tmp_path: Path, changes: tuple[Change, ...]
) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """webkit with more commits on top, registered and indexed; every commit's short hash."""
    root = tmp_path / "webkit"
    shas = build_webkit(root)
    for key, rel, old, new, message, days_ago, who in changes:
        if old:
            _edit(root, rel, old, new)
        else:
            (root / rel).write_text(new)
        shas[key] = _commit(root, message, days_ago, who)
    with _served(root) as client:
        yield client, shas


def ask(client: TestClient, query: str) -> dict[str, Any]:
    """The JSON answer of /ask."""
    reply = client.post("/ask", json={"query": query, "repo": "webkit"})
    assert reply.status_code == 200, reply.text
    return reply.json()


def answered(client: TestClient, query: str) -> str:
    """The answer /ask gives, which must not be a refusal."""
    body = ask(client, query)
    assert body["refused"] is False, (query, body)
    return body["answer"]


def first_commit(answer: str) -> str:
    """The short hash of the first commit an answer lists."""
    line = next(ln for ln in answer.splitlines() if ln.startswith("- `"))
    return line.split("`")[1]


@pytest.mark.slow
def test_history_questions_answer_about_what_they_name(
    webkit: tuple[TestClient, dict[str, str]],
) -> None:
    client, shas = webkit
    others = {k: v for k, v in shas.items() if k not in ("cors", "initial")}

    for query in (
        "Who last changed webkit/middleware/cors.py?",
        "What changed in webkit/middleware/cors.py recently?",
        "Who last changed cors.py?",
    ):
        body = ask(client, query)
        answer = body["answer"]
        assert body["refused"] is False, (query, body)
        assert first_commit(answer) == shas["cors"], (query, answer)
        assert "Bob Barker" in answer, (query, answer)
        assert not any(sha in answer for sha in others.values()), (query, answer)
        assert "gzip.py" not in answer and "routing.py" not in answer, (query, answer)
        assert body["citations"], (query, body)
        assert {c["file"] for c in body["citations"]} == {"webkit/middleware/cors.py"}, body
    # with no window, the first citation is the line the newest commit changed
    assert (body["citations"][0]["start_line"], body["citations"][0]["end_line"]) == (4, 4), body
    assert "webkit/middleware/cors.py line 4" in body["answer"], body["answer"]  # not "lines 4"

    body = ask(client, "Who last changed the routing code and when?")
    answer = body["answer"]
    assert body["refused"] is False, body
    assert first_commit(answer) == shas["routing"], answer
    assert "Dan Brown" in answer.splitlines()[1], answer
    assert shas["app_route"] not in answer, "applications.py is not the routing code"
    assert {c["file"] for c in body["citations"]} == {"webkit/routing.py"}, body

    # a symbol named exactly is scoped to that unit: only Erin's commit changed App.route since
    body = ask(client, "When was App.route last modified?")
    answer = body["answer"]
    assert first_commit(answer) == shas["app_route"], answer
    assert shas["routing"] not in answer and shas["cors"] not in answer, answer


@pytest.mark.slow
def test_a_range_past_the_end_of_its_file_reads_to_its_last_line(
    webkit: tuple[TestClient, dict[str, str]],
) -> None:
    client, shas = webkit
    lines = len(CORS.splitlines())
    reply = client.post(
        "/repos/webkit/history",
        json={
            "ranges": [
                {"file": "webkit/middleware/cors.py", "start_line": 1, "end_line": 10**9},
                {"file": "webkit/nothere.py", "start_line": 1, "end_line": 10**9},
            ],
            "log": True,
        },
    )
    assert reply.status_code == 200, reply.text
    whole, absent = reply.json()["ranges"]
    assert whole["end_line"] == lines, whole
    assert [c["commit"] for c in whole["changes"]] == [shas["cors"], shas["initial"]], whole
    assert whole["last"]["commit"] == shas["cors"], whole
    assert absent["end_line"] == 10**9 and absent["changes"] == [] and absent["last"] is None


def test_a_named_path_stays_whole_in_what_is_searched() -> None:
    from coderag_generator.window import named_paths, subject

    assert subject("Who last changed src/log/history.py?") == "src/log/history.py"
    assert subject("What changed in starlette/middleware/ last week?") == "starlette/middleware"
    assert named_paths("谁最后修改了 cors.py？") == ["cors.py"]
    assert named_paths("Who last changed the routing code and when?") == []
    assert named_paths("When was App.route last modified?") == []


@pytest.fixture
def webkit_later(tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """webkit with three more commits, all before the last two days: a middleware package file,
    a commit that only deletes lines of gzip.py, and the newest, a change to that package file."""
    package = "webkit/middleware/__init__.py"
    yield from _webkit_then(
        tmp_path,
        (
            ("package", package, "", '"""Middleware."""\n\nVERSION = "1"\n',
             "Middleware package", 2.9, "Fay Wray"),
            ("deletion", "webkit/middleware/gzip.py", '"""Response compression."""\n\n', "",
             "GZip: drop the module docstring", 2.6, "Gus Grissom"),
            ("version", package, '"1"', '"2"', "Middleware 2", 2.3, "Hal Jordan"),
        ),
    )  # fmt: skip


@pytest.mark.slow
def test_a_folder_and_a_deletion_count_as_changes(
    webkit_later: tuple[TestClient, dict[str, str]],
) -> None:
    client, shas = webkit_later
    # blame credits nothing to a commit that only deleted lines: the file's log does (issue 43's
    # trial: "what changed recently" named an older commit as the last change)
    answer = answered(client, "What changed in webkit/middleware/gzip.py in the last 2 days?")
    assert "No commit" in answer and f"`{shas['deletion']}` by Gus Grissom" in answer, answer

    # a folder is every indexed file inside it, whichever of them the search found
    answer = answered(client, "Who last changed webkit/middleware?")
    assert first_commit(answer) == shas["version"], answer
    assert "the folder `webkit/middleware`" in answer, answer
    for key in ("deletion", "package", "gzip", "cors"):
        assert shas[key] in answer, (key, answer)
    for key in ("routing", "app_route"):
        assert shas[key] not in answer, (key, answer)
    body = ask(client, "What changed recently in the middleware/ folder, in the last 2 days?")
    answer = body["answer"]
    assert "No commit" in answer and f"`{shas['version']}` by Hal Jordan" in answer, answer
    # a quiet window still lists the latest changes, not one commit alone (the third trial)
    assert "The latest changes before it:" in answer, answer
    assert first_commit(answer) == shas["version"], answer
    assert shas["deletion"] in answer and shas["package"] in answer, answer

    # the route itself: a folder's commits with the files they changed there
    reply = client.post(
        "/repos/webkit/history",
        json={"ranges": [{"file": "webkit/middleware", "start_line": 1, "end_line": 10**9}],
              "log": True},
    )  # fmt: skip
    assert reply.status_code == 200, reply.text
    (folder,) = reply.json()["ranges"]
    assert folder["folder"] is True and folder["last"]["commit"] == shas["version"], folder
    assert folder["changes"][1]["files"] == ["webkit/middleware/gzip.py"], folder
    assert [c["commit"] for c in folder["changes"]][:3] == [
        shas["version"], shas["deletion"], shas["package"]
    ], folder  # fmt: skip


@pytest.mark.slow
def test_who_added_it_leads_with_the_commit_that_added_it(
    webkit: tuple[TestClient, dict[str, str]],
) -> None:
    client, shas = webkit
    # issue 43's second trial: "who added X" listed the newest changes, not the commit adding X
    for query in ("Who added App.route and when?", "谁添加了 App.route？"):
        answer = answered(client, query)
        assert first_commit(answer) == shas["initial"], (query, answer)
        assert "Ada Lovelace" in answer.splitlines()[1], (query, answer)
        assert shas["app_route"] in answer, "the later changes follow"
    body = ask(client, "Who last changed App.route?")
    assert first_commit(body["answer"]) == shas["app_route"], body["answer"]


def test_origin_questions_are_told_from_last_change_questions() -> None:
    from coderag_generator.window import asks_origin

    for query in (
        "Who added the rate limiting and when?",
        "When was App.route introduced?",
        "who first wrote parse_args?",
        "谁添加了限流？",
        "限流是什么时候引入的？",
    ):
        assert asks_origin(query), query
    for query in (
        "Who last changed App.route?",
        "Who changed the CORS middleware recently?",
        "What was added in the last 2 weeks?",
        "最近谁添加了限流？",
        "Where is the rate limiter created?",
    ):
        assert not asks_origin(query), query


@pytest.mark.slow
def test_who_added_a_name_leads_with_the_commit_that_brought_it_in(
    webkit: tuple[TestClient, dict[str, str]],
) -> None:
    client, shas = webkit
    # "Range" came into the CORS module with Bob's commit, long after the module itself
    # (issue 43's third trial named the commit that created the file)
    answer = answered(client, "Who added Range to the safelisted CORS headers, and when?")
    assert "`Range`" in answer.splitlines()[0], answer
    assert first_commit(answer) == shas["cors"] and "Bob Barker" in answer, answer
    assert shas["initial"] not in answer, "the commit before Range is no commit that added it"
    assert " lines " not in answer, "an old commit's line numbers are not today's"
    # quoted code is what was added: the fifth trial's "Who added the `age < 0` check" was told
    # the enclosing method's oldest commit
    for query in (
        "Who added `level=6` to the GZip middleware?",
        "谁在 GZip 中间件里加了 `level=6`？",
    ):
        answer = answered(client, query)
        assert "`level=6`" in answer.splitlines()[0], (query, answer)
        assert first_commit(answer) == shas["gzip"] and "Carol Danvers" in answer, (query, answer)


@pytest.fixture
def webkit_renamed(tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """webkit whose GZip ``compress`` became ``compress_if_large`` in a later commit that kept
    its body: the unit's lines began with the first commit, its name with the rename."""
    yield from _webkit_then(
        tmp_path,
        (
            ("rename", "webkit/middleware/gzip.py", "def compress(", "def compress_if_large(",
             "GZip: say when it compresses", 1.5, "Ivy Lee"),
        ),
    )  # fmt: skip


@pytest.mark.slow
def test_who_added_a_distinctive_unit_name_leads_with_the_commit_that_brought_the_name_in(
    webkit_renamed: tuple[TestClient, dict[str, str]],
) -> None:
    client, shas = webkit_renamed
    # issue 43's fourth trial: "Who added genLevelComparison?" named the 2018 commit its lines
    # came from, not the 2024 commit that wrote the function under that name
    for query in ("Who added compress_if_large, and when?", "谁添加了 compress_if_large？"):
        answer = answered(client, query)
        head = answer.splitlines()[0]
        assert "`compress_if_large`" in head and "`webkit/middleware/gzip.py`" in head, head
        assert head.count("compress_if_large") == 1, "brought into its file, not into itself"
        assert first_commit(answer) == shas["rename"] and "Ivy Lee" in answer, (query, answer)
        assert shas["initial"] not in answer, (query, answer)


def test_a_pickaxe_is_for_names_rarely_anything_else() -> None:
    from coderag_generator.chronicle import distinctive

    for name in ("genLevelComparison", "compress_if_large", "MixedAnnotatedAndDefaultStyleError"):
        assert distinctive(name), name
    for name in ("route", "child", "write", "_private", "Router"):
        assert not distinctive(name), name


@pytest.mark.slow
def test_it_with_no_earlier_turn_is_asked_back(webkit: tuple[TestClient, dict[str, str]]) -> None:
    client, shas = webkit
    # issue 43's fourth trial: "And who last changed it?" opening a session listed commits of
    # whatever units its words found, as if "it" were known
    for query, said in (("And who last changed it?", '"it"'), ("它是谁最后改的？", "“它”")):
        body = ask(client, query)
        assert body["clarify"] is True and body["refused"] is False, (query, body)
        assert body["reason"] == "no_antecedent" and not body["citations"], (query, body)
        assert said in body["answer"].split("?")[0].split("？")[0], body  # asked back first
        assert "- `" not in body["answer"], body
        # its example is a file of this repository (the fifth trial was shown pino's)
        assert "webkit/" in body["answer"] and "proto.js" not in body["answer"], body
    # the same follow-up in a session that said what "it" is gets its history
    turn = {"repo": "webkit", "session_id": "antecedent"}
    first = client.post("/ask", json={**turn, "query": "Where does the CORS middleware decide "
                                       "whether an origin is allowed?"})  # fmt: skip
    assert first.status_code == 200, first.text
    body = client.post("/ask", json={**turn, "query": "And who last changed it?"}).json()
    assert body["clarify"] is False and body["reason"] == "", body
    # "it" is the unit the first answer cited, untouched since the first commit
    assert "is_allowed_origin" in body["answer"].splitlines()[0], body["answer"]
    assert first_commit(body["answer"]) == shas["initial"], body["answer"]


def test_a_question_needs_an_earlier_turn_only_when_it_names_nothing_else() -> None:
    from coderag_generator.conversation import needs_antecedent

    for query in (
        "And who last changed it?",
        "What does it return?",
        "How does it work?",
        "Who added this function?",
        "它是谁最后改的？",
        "它在哪里被调用？",
        "这个函数是做什么的？",
    ):
        assert needs_antecedent(query), query
    for query in (
        "How does it parse the config file?",
        "And what about its error handling?",
        "Who last changed lib/proto.js?",
        "What does parse_args return?",
        "Does it support YAML?",
        "它是怎么解析配置文件的？",
        "What is this project for?",
    ):
        assert needs_antecedent(query) is None, query
