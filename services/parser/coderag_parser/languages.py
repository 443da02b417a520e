"""Which language a file is in, and that language's grammar and query.

Adding a language is data: a row in ``GRAMMARS`` and ``EXTENSIONS``, a ``queries/<lang>.scm``
using the shared capture names, and a fixture under ``tests/fixtures/``.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib import resources
from pathlib import PurePosixPath

from tree_sitter import Language, Parser, Query

GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "go": ("tree_sitter_go", "language"),
    "java": ("tree_sitter_java", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "rust": ("tree_sitter_rust", "language"),
    "c": ("tree_sitter_c", "language"),
}
"""Language name -> (grammar module, function returning the grammar pointer)."""

QUERY_FILE = {"tsx": "typescript"}
"""Languages that share another language's query file."""

EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".go": "go",
    ".java": "java",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
}
"""File extension -> language with a grammar."""

TEXT_LANGUAGES: dict[str, str] = {
    ".md": "markdown",
    ".rst": "rst",
    ".txt": "text",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".cfg": "ini",
    ".ini": "ini",
    ".sh": "shell",
    ".bash": "shell",
    ".sql": "sql",
    ".html": "html",
    ".css": "css",
    ".proto": "protobuf",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".rb": "ruby",
    ".php": "php",
    ".cs": "csharp",
    ".kt": "kotlin",
    ".swift": "swift",
    ".scala": "scala",
    ".lua": "lua",
    ".r": "r",
    ".scm": "query",
    ".mk": "make",
}
"""Extensions indexed as blank-line blocks until a grammar and query are added for them."""

TEXT_FILENAMES = {"Makefile": "make", "Dockerfile": "dockerfile", "README": "text"}
"""Extension-less file names that are indexed as text."""


def language_of(path: str) -> str | None:
    """The language of a repository path, or None for files that are not indexed by kind."""
    p = PurePosixPath(path)
    suffix = p.suffix.lower()
    return EXTENSIONS.get(suffix) or TEXT_LANGUAGES.get(suffix) or TEXT_FILENAMES.get(p.name)


def has_grammar(language: str) -> bool:
    """Whether tree-sitter parses this language (else it is split into blocks)."""
    return language in GRAMMARS


@cache
def grammar(language: str) -> Language:
    """The tree-sitter Language object."""
    module, func = GRAMMARS[language]
    return Language(getattr(importlib.import_module(module), func)())


@cache
def parser(language: str) -> Parser:
    """A tree-sitter parser for the language (one per process)."""
    return Parser(grammar(language))


@cache
def load_query(language: str) -> Query:
    """The compiled ``queries/<lang>.scm`` of a language."""
    name = QUERY_FILE.get(language, language)
    source = resources.files("coderag_parser").joinpath(f"queries/{name}.scm").read_text()
    return Query(grammar(language), source)


EXPORTED: dict[str, tuple[str, str]] = {
    "go": ("name", r"^[A-Z]"),
    "java": ("signature", r"\bpublic\b"),
    "rust": ("signature", r"^\s*pub\b"),
    "c": ("signature", r"^(?!\s*static\b)"),
}
"""How a language marks a definition exported: (field, regex) over its name or signature; other
languages treat names without a leading ``_`` or ``#`` as exported."""

DEFAULT_EXPORTED = ("name", r"^[^_#]")
"""The export rule of languages not in ``EXPORTED``."""

_PY_TYPE = r"""["']?(?:(?:typing\.)?Optional\[)?(?P<type>[A-Za-z_][\w.]*)"""
_NEW_TYPE = r"new\s+(?P<type>[A-Za-z_][\w.]*)"
_TS_NEW = r"(?:const|let|var)\s+(?P<name>\w+)(?:\s*:\s*[\w.<>]+)?\s*=\s*" + _NEW_TYPE
_TS_FIELD = r"\bthis\.(?P<name>\w+)\s*=\s*" + _NEW_TYPE
_TS_PARAM = (
    r"(?:^|[(,])\s*(?:(?:public|private|protected|readonly)\s+)*"
    r"(?P<name>\w+)\??\s*:\s*(?P<type>[A-Za-z_][\w.]*)"
)

TYPED_NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "python": {
        "params": (rf"(?:^|[(,])\s*\*{{0,2}}(?P<name>\w+)\s*:\s*{_PY_TYPE}",),
        "locals": (
            r"^[ \t]*(?P<name>\w+)[ \t]*(?::[^=\n]+)?=[ \t]*(?P<type>[A-Z]\w*(?:\.[A-Z]\w*)*)\(",
            rf"^[ \t]*(?P<name>\w+)[ \t]*:[ \t]*{_PY_TYPE}",
        ),
        "fields": (
            r"\bself\.(?P<name>\w+)\s*(?::\s*[^=\n]+)?=\s*(?P<type>[A-Z]\w*(?:\.[A-Z]\w*)*)\(",
            rf"\bself\.(?P<name>\w+)[ \t]*:[ \t]*{_PY_TYPE}",
        ),
    },
    "typescript": {"params": (_TS_PARAM,), "locals": (_TS_NEW,), "fields": (_TS_FIELD,)},
    "tsx": {"params": (_TS_PARAM,), "locals": (_TS_NEW,), "fields": (_TS_FIELD,)},
    "javascript": {"params": (), "locals": (_TS_NEW,), "fields": (_TS_FIELD,)},
    "java": {
        "params": (r"(?:^|[(,])\s*(?:final\s+)?(?P<type>[A-Z]\w*)(?:<[^>]*>)?\s+(?P<name>\w+)",),
        "locals": (r"\b(?P<type>[A-Z]\w*)(?:<[^>]*>)?\s+(?P<name>\w+)\s*=\s*new\b",),
        "fields": (r"\bthis\.(?P<name>\w+)\s*=\s*new\s+(?P<type>[A-Z]\w*)",),
    },
}
"""Where a language says a name's type, as regexes with ``name`` and ``type`` groups, so a call
on that name resolves to its type's method (issue 43: ``mount.handle()`` was said to call every
``handle``): ``params`` over a definition's parameter list (``router: Router``), ``locals``
over its body, line by line (``r = Route()``, ``const r = new Route()``), ``fields`` over every
method of its class (``self.main = Route()`` makes ``self.main.handle()`` Route's)."""
