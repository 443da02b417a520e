"""Symbol table, call graph, import graph, reference counts and test coverage hints."""

from __future__ import annotations

from pathlib import Path

from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.store import get_catalog


def _index(root: Path, files: dict[str, str], name: str = "g") -> dict[str, str]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    get_catalog().create_repo(name, str(root), None, None)
    run_now(IndexRepo(repo=name))
    return {u.symbol: u.id for u in get_catalog().units(name)}


def test_python_calls_imports_refs_and_tests(tmp_path: Path) -> None:
    ids = _index(
        tmp_path,
        {
            "pkg/a.py": (
                "LIMIT = 3\n\n\ndef helper():\n    return LIMIT\n\n\n"
                "class Service:\n    def run(self):\n        self.step()\n"
                "        return helper()\n\n"
                "    def step(self):\n        return 1\n"
            ),
            "pkg/b.py": "from pkg.a import helper\n\n\ndef main():\n    return helper()\n",
            "tests/test_a.py": (
                "from pkg.a import helper\n\n\ndef test_helper():\n    assert helper()\n"
            ),
        },
    )
    graph = get_catalog().graph()
    callees = {e.callee for e in graph.callees("g", ids["Service.run"])}
    assert callees == {ids["Service.step"], ids["helper"]}
    callers = {e.caller for e in graph.callers("g", ids["helper"])}
    assert callers == {ids["Service.run"], ids["main"], ids["test_helper"]}
    assert graph.tested("g") == {ids["helper"]}
    refs = graph.file_references("g")
    assert refs["pkg/a.py"] == 4  # two imports and two calls from other files
    assert graph.unit_references("g", [ids["helper"]]) == {ids["helper"]: 3}
    near = graph.neighbourhood("g", [ids["main"]], depth=2)
    assert near[ids["helper"]] == 1 and near[ids["Service.run"]] == 2
    rows = get_catalog().db.read("SELECT name, kind FROM symbols WHERE repo='g' ORDER BY name")
    assert ("LIMIT", "constant") in [tuple(r) for r in rows]
    assert ("run", "method") in [tuple(r) for r in rows]


def test_go_receiver_types_pick_the_right_method(tmp_path: Path) -> None:
    ids = _index(
        tmp_path,
        {
            "svc.go": (
                "package svc\n\ntype Service struct{}\ntype Other struct{}\n\n"
                "func (s *Service) ProcessOrder() {\n\ts.logOrderProcessed()\n}\n\n"
                "func (s *Service) logOrderProcessed() {}\n\n"
                "func (o *Other) logOrderProcessed() {}\n"
            ),
        },
        name="go",
    )
    graph = get_catalog().graph()
    targets = {e.callee for e in graph.callees("go", ids["(*Service).ProcessOrder"])}
    assert targets == {ids["(*Service).logOrderProcessed"]}


def test_symbols_and_calls_over_http(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from coderag_app.server import create_app

    _index(
        tmp_path,
        {
            "a.py": "def helper():\n    return 1\n\n\ndef main():\n    return helper()\n",
            "tests/test_a.py": (
                "from a import helper\n\n\ndef test_helper():\n    assert helper()\n"
            ),
        },
    )
    with TestClient(create_app(("coderag_parser",))) as client:
        rows = client.get("/repos/g/symbols", params={"q": "hel"}).json()
        assert [(r["qualified"], r["references"], r["tested"]) for r in rows] == [
            ("helper", 2, True)
        ]
        graph = client.get("/repos/g/calls", params={"symbol": "helper"}).json()
        assert {c["symbol"] for c in graph["callers"]} == {"main", "test_helper"}
        assert client.get("/repos/g/calls", params={"symbol": "nope"}).status_code == 404
        assert client.get("/repos/x/symbols").status_code == 404
        assert client.get("/repos/g/symbols", params={"limit": 0}).status_code == 422
        # a parameter the route does not take is an error naming the ones it does, not a filter
        # silently dropped (issue 43's fourth trial: ?prefix= listed the alphabet's first)
        reply = client.get("/repos/g/symbols", params={"prefix": "hel"})
        assert reply.status_code == 400, reply.text
        assert "'prefix'" in reply.text and "kind, limit, q, ref" in reply.text, reply.text
        reply = client.get("/repos/g/calls", params={"symbol": "helper", "depth": 2})
        assert reply.status_code == 400 and "'depth'" in reply.text, reply.text
        assert client.get("/repos/g/symbols", params={"q": "hel", "ref": ""}).status_code != 400


ROUTING = """class Router:
    def app(self, scope):
        return scope

    def url_path_for(self, name):
        return "/" + name


class Route:
    def __init__(self, app):
        self.app = app

    def handle(self, scope):
        return self.app(scope)

    def url_path_for(self, name):
        return "/r/" + name


class Mount:
    def handle(self, scope):
        return self.app(scope)

    def url_path_for(self, name):
        return "/m/" + name


class Host:
    def url_path_for(self, name):
        return "/h/" + name
"""


def test_self_calls_stay_in_their_class_and_tests_cover_the_methods_they_import(
    tmp_path: Path,
) -> None:
    ids = _index(
        tmp_path,
        {
            "routing.py": ROUTING,
            "tests/test_routing.py": (
                "from routing import Router\n\n\ndef test_paths(router):\n"
                "    assert router.url_path_for('home') == '/home'\n"
            ),
            "other.py": "def url_path_for(name):\n    return name\n",
        },
    )
    graph = get_catalog().graph()
    # each handle calls its own self.app (an attribute), never Router.app
    assert graph.callers("g", ids["Router.app"]) == []
    assert graph.callees("g", ids["Route.handle"]) == []
    assert graph.callees("g", ids["Mount.handle"]) == []
    # url_path_for has five definitions: the test calls (on a fixture of unknown type) the
    # ones of the module it imports
    tested = graph.tested("g")
    for owner in ("Router", "Route", "Mount", "Host"):
        assert ids[f"{owner}.url_path_for"] in tested, owner
    assert ids["url_path_for"] not in tested


def test_references_count_the_calls_that_resolve_to_each_unit(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from coderag_app.server import create_app

    ids = _index(
        tmp_path,
        {
            "routing.py": (
                "class Route:\n    def url_path_for(self, name):\n        return '/r/' + name\n\n"
                "    def path(self):\n        return self.url_path_for('x')\n\n\n"
                "class Mount:\n    def url_path_for(self, name):\n        return '/m/' + name\n\n\n"
                "class Host:\n    def url_path_for(self, name):\n        return '/h/' + name\n\n\n"
                "class Router:\n    def url_path_for(self, name):\n        return '/' + name\n"
            ),
            "other.py": "def url_path_for(name):\n    return name\n",
            "main.py": (
                "from other import url_path_for\n\n\ndef main():\n"
                "    return url_path_for('a') + url_path_for('b')\n"
            ),
        },
    )
    # five definitions share the name: each counts only the calls that can mean it (issue 43:
    # each reported all three before)
    want = {
        "Route.url_path_for": 1,
        "Mount.url_path_for": 0,
        "Host.url_path_for": 0,
        "Router.url_path_for": 0,
        "url_path_for": 2,
    }
    refs = get_catalog().graph().unit_references("g", [ids[q] for q in want])
    assert {q: refs[ids[q]] for q in want} == want
    with TestClient(create_app(("coderag_parser",))) as client:
        rows = client.get("/repos/g/symbols", params={"q": "url_path"}).json()
        assert {r["qualified"]: r["references"] for r in rows} == want


def test_a_bare_call_never_calls_another_files_method(tmp_path: Path) -> None:
    ids = _index(
        tmp_path,
        {
            "app/lifespan.py": (
                "class LifespanOn:\n    async def main(self):\n        return 1\n\n"
                "    async def startup(self):\n        return await self.main()\n"
            ),
            "app/cli.py": "def main():\n    return 0\n",
            "app/__main__.py": "from app.cli import main\n\n\ndef run():\n    return main()\n",
            "app/Worker.java": (
                "class Worker {\n    void main() {}\n\n"
                "    void start() {\n        main();\n    }\n}\n"
            ),
        },
    )
    graph = get_catalog().graph()
    # __main__'s main() is the command-line function, not LifespanOn's method (issue 43's
    # second trial); the method is called by its own class through self
    assert {e.caller for e in graph.callers("g", ids["LifespanOn.main"])} == {
        ids["LifespanOn.startup"]
    }
    assert {e.caller for e in graph.callers("g", ids["main"])} == {ids["run"]}
    # a bare call in Java calls its own class's method (implicit this)
    assert {e.callee for e in graph.callees("g", ids["Worker.start"])} == {ids["Worker.main"]}


def test_a_method_on_another_object_is_one_the_caller_can_see(tmp_path: Path) -> None:
    ids = _index(
        tmp_path,
        {
            "srv/server.py": (
                "from srv.lifespan import Lifespan\n\n\nclass Server:\n"
                "    def __init__(self):\n        self.lifespan = Lifespan()\n\n"
                "    def shutdown(self):\n        return self.lifespan.shutdown()\n"
            ),
            "srv/lifespan.py": "class Lifespan:\n    def shutdown(self):\n        return 0\n",
            "sup/process.py": "class Process:\n    def start(self):\n        return 1\n",
            "sup/reload.py": (
                "from sup.process import Process\n\n\ndef restart():\n    p = Process()\n"
                "    return p.start()\n"
            ),
            "util/threads.py": (
                "import threading\n\n\ndef touch_soon():\n"
                "    t = threading.Thread(target=print)\n    t.start()\n"
            ),
        },
    )
    graph = get_catalog().graph()
    # self.lifespan is another object: its shutdown is Lifespan's, never Server's own
    # (issue 43's second trial)
    assert {e.callee for e in graph.callees("g", ids["Server.shutdown"])} == {
        ids["Lifespan.shutdown"]
    }
    # t.start() in a file that neither imports nor sits beside Process is a thread's start
    assert {e.caller for e in graph.callers("g", ids["Process.start"])} == {ids["restart"]}


def test_module_calls_and_super_name_no_like_named_definition(tmp_path: Path) -> None:
    ids = _index(
        tmp_path,
        {
            "typer/main.py": "def run(function):\n    return function()\n",
            "typer/completion.py": (
                "import subprocess\n\n\ndef install_powershell():\n"
                "    return subprocess.run(['pwsh'])\n"
            ),
            "app.py": "import typer\n\n\ndef start():\n    return typer.run(print)\n",
            "typer/params.py": (
                "class ParameterInfo:\n    def __init__(self):\n        self.x = 1\n\n\n"
                "class OptionInfo(ParameterInfo):\n    def __init__(self):\n"
                "        super().__init__()\n\n\n"
                "class Config:\n    def __init__(self):\n        self.y = 2\n"
            ),
        },
    )
    graph = get_catalog().graph()
    # subprocess.run() is no call of typer's run; typer.run() is (issue 43's third trial)
    assert {e.caller for e in graph.callers("g", ids["run"])} == {ids["start"]}
    # super().__init__() names the parent, which the call site cannot: no edge to a like-named
    # __init__ of another class
    assert graph.callees("g", ids["OptionInfo.__init__"]) == []


def test_symbol_keyed_dispatch_calls_the_function_its_key_names(tmp_path: Path) -> None:
    # `this[writeSym](...)` is how pino-style loggers dispatch: before, such a call named no
    # callee and `write` had neither callers nor callees (issue 43's fourth trial)
    ids = _index(
        tmp_path,
        {
            "lib/symbols.js": (
                "const writeSym = Symbol('demo.write')\n"
                "const formatSym = Symbol('demo.format')\n"
                "const flushSym = Symbol('demo.flush')\n"
                "const asJsonSym = Symbol('demo.asJson')\n\n"
                "module.exports = { writeSym, formatSym, flushSym, asJsonSym }\n"
            ),
            "lib/proto.js": (
                "const { writeSym, formatSym, asJsonSym } = require('./symbols')\n"
                "const { asJson } = require('./tools')\n\n"
                "function format (obj) {\n  return JSON.stringify(obj)\n}\n\n"
                "function write (obj) {\n  const line = this[formatSym](obj)\n"
                "  this.stream.write(this[asJsonSym](line) + '\\n')\n}\n\n"
                "const proto = {\n  [writeSym]: write,\n  [formatSym]: format,\n"
                "  [asJsonSym]: asJson\n}\n\n"
                "module.exports = proto\n"
            ),
            "lib/tools.js": (
                "function asJson (line) {\n  return '{' + line + '}'\n}\n\n"
                "module.exports = { asJson }\n"
            ),
            "lib/levels.js": (
                "const { writeSym } = require('./symbols')\n\n"
                "function makeLevel (level) {\n  return function (obj) {\n"
                "    this[writeSym]({ level, ...obj })\n  }\n}\n\n"
                "module.exports = { makeLevel }\n"
            ),
            "lib/sink.js": (
                "const { flushSym } = require('./symbols')\n\n"
                "class Sink {\n  [flushSym] () {\n    return this.buffer.length\n  }\n\n"
                "  end () {\n    return this[flushSym]()\n  }\n}\n\n"
                "module.exports = Sink\n"
            ),
        },
        name="keyed",
    )
    graph = get_catalog().graph()
    # asJson is imported: the key names it through a binding row, resolved when read
    assert {e.callee for e in graph.callees("keyed", ids["write"])} == {
        ids["format"],
        ids["asJson"],
    }
    assert {e.caller for e in graph.callers("keyed", ids["asJson"])} == {ids["write"]}
    assert {e.caller for e in graph.callers("keyed", ids["write"])} == {ids["makeLevel"]}
    assert {e.callee for e in graph.callees("keyed", ids["Sink.end"])} == {ids["Sink.[flushSym]"]}
    # the key is a name of the function in the symbol table, as the call site wrote it
    rows = get_catalog().symbols.starting_with("keyed", "[writeSym]", None, 10)
    assert [(r.file, r.kind, r.unit_id) for r in rows] == [("lib/proto.js", "method", ids["write"])]
    (bound,) = get_catalog().symbols.starting_with("keyed", "[asJsonSym]", None, 10)
    assert (bound.qualified, bound.kind, bound.unit_id) == ("asJson", "binding", None), bound
    # /calls by the function's name is still the function, not its binding
    assert get_catalog().symbols.unit_of("keyed", "asJson") == ids["asJson"]


def test_a_call_resolves_to_the_code_not_to_its_typescript_declaration(tmp_path: Path) -> None:
    # pino's `pino(...)` was joined to pino.js's function and pino.d.ts's declaration alike
    # (issue 43's fourth trial); with no implementation, the declaration is still the callee
    ids = _index(
        tmp_path,
        {
            "pino.js": (
                "function pino (opts) {\n  return { level: opts.level }\n}\n\n"
                "module.exports = pino\n"
            ),
            "pino.d.ts": (
                "declare function pino(opts?: { level: string }): { level: string };\n\n"
                "declare function transport(target: string): object;\n\n"
                "export default pino;\n"
            ),
            "examples/server.js": (
                "const pino = require('..')\n\n"
                "function start () {\n  const log = pino({ level: 'info' })\n"
                "  return transport(log)\n}\n"
            ),
        },
        name="declared",
    )
    rows = get_catalog().symbols.starting_with("declared", "pino", None, 10)
    declared = {r.unit_id for r in rows if r.file == "pino.d.ts"}
    assert declared, "the declaration is a symbol of its own"
    graph = get_catalog().graph()
    callees = {e.callee for e in graph.callees("declared", ids["start"])}
    assert ids["pino"] in callees and not callees & declared, callees
    transport = get_catalog().symbols.starting_with("declared", "transport", None, 10)
    assert transport and {r.unit_id for r in transport} <= callees, "a lone declaration is called"


def test_a_name_with_overloads_is_the_unit_that_implements_it(tmp_path: Path) -> None:
    # itsdangerous's `/calls?symbol=TimestampSigner.unsign` showed the first @t.overload stub,
    # with no callees (the fifth trial)
    ids = _index(
        tmp_path,
        {
            "timed.py": (
                "import typing as t\n\n\nclass Timed:\n"
                "    @t.overload\n    def unsign(\n"
                "        self, value: bytes, stamp: t.Literal[False] = False\n"
                "    ) -> bytes: ...\n\n"
                "    @t.overload\n    def unsign(\n"
                "        self, value: bytes, stamp: t.Literal[True] = True\n"
                "    ) -> tuple[bytes, int]: ...\n\n"
                "    def unsign(self, value: bytes, stamp: bool = False):\n"
                "        age = self.age(value)\n        if age < 0:\n"
                "            raise ValueError(value)\n"
                "        return (value, age) if stamp else value\n\n"
                "    def age(self, value: bytes) -> int:\n        return len(value)\n"
            ),
        },
        name="overloads",
    )
    catalog = get_catalog()
    unit = catalog.symbols.unit_of("overloads", "Timed.unsign")
    (found,) = [u for u in catalog.units("overloads") if u.id == unit]
    assert "if age < 0" in found.text, found
    callees = {e.callee for e in catalog.graph().callees("overloads", unit)}
    assert callees == {ids["Timed.age"]}, callees


def test_a_call_on_a_typed_name_calls_its_types_method(tmp_path: Path) -> None:
    """Where the code states a name's type (a parameter's annotation, a constructor call, a
    field set in another method), a call on it is that type's method, not every method of the
    name the caller's file can see (issue 43: ``mount.handle()`` was said to call every
    ``handle``)."""
    ids = _index(
        tmp_path,
        {
            "web/routes.py": (
                "class Route:\n    def handle(self):\n        return 1\n\n\n"
                "class Mount:\n    def handle(self):\n        return 2\n"
            ),
            "web/app.py": (
                "from web.routes import Mount, Route\n\n\nclass Router:\n"
                "    def __init__(self):\n        self.main = Route()\n\n"
                "    def dispatch(self, mount: Mount, n: int = 0):\n"
                "        return mount.handle()\n\n"
                "    def first(self):\n        r = Route()\n        return r.handle()\n\n"
                "    def through_field(self):\n        return self.main.handle()\n\n"
                "    def unknown(self, thing):\n        return thing.handle()\n"
            ),
            "web/page.ts": (
                "class Page {\n  render(): number {\n    return 1;\n  }\n}\n\n"
                "class Panel {\n  render(): number {\n    return 2;\n  }\n}\n\n"
                "export function show(panel: Panel): number {\n  return panel.render();\n}\n\n"
                "export function build(): number {\n  const p = new Page();\n"
                "  return p.render();\n}\n"
            ),
        },
    )
    graph = get_catalog().graph()

    def callees(name: str) -> set[str]:
        return {e.callee for e in graph.callees("g", ids[name])}

    assert callees("Router.dispatch") == {ids["Mount.handle"]}
    assert callees("Router.first") == {ids["Route.handle"]}
    assert callees("Router.through_field") == {ids["Route.handle"]}
    # a name of unknown type still reaches both: nothing says which
    assert callees("Router.unknown") == {ids["Route.handle"], ids["Mount.handle"]}
    assert callees("show") == {ids["Panel.render"]}
    assert callees("build") == {ids["Page.render"]}
