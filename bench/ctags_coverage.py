"""Share of Universal Ctags' definitions that the parser's units cover, per language and code base.

Usage::

    PYTHONPATH=shared:services/parser:. python3 -m bench.ctags_coverage [NAME ...] \
        [--max-files 400] [--misses 5]

An independent oracle for ``coderag_parser.units``: Debian's ``universal-ctags``
(``apt-get install -y universal-ctags``) lists the functions, methods, classes, structs,
interfaces, traits and enums of each file (tests included; a definition nested in a function is
left out, one inside an IIFE or callback that ctags scopes to an anonymous function is kept), and
a unit *covers* a definition when the definition's line lies within the unit and the unit's
symbol (less a ``[part N]`` suffix) ends with the definition's name. Blank-line ``block`` units
and the ``file`` unit cover nothing: a definition is found only as a unit of its own.

Two readings of ctags are set aside in JavaScript and TypeScript: it calls every object literal
and every ``X`` of ``X.prototype.m = ...`` a class (the object's functions still count, as
methods), and it takes a use such as ``Base.prototype.m.call(this)`` for a definition of ``m``.
Per-language kinds are in ``KINDS`` (C's and Go's ``member`` are fields, so not counted).

The code bases are pinned in ``bench/mining.json`` and ``bench/written/*.json`` and fetched by
``bench/fetch.py`` into ``bench/.cache``; with no NAME it measures ``DEFAULT``. It prints one row
per code base, one per language, then the misses grouped by idiom (the regex of ``IDIOMS`` that
the definition's line matches) with a few examples each.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.fetch import corpus_root, get_corpus
from coderag.schemas import Unit
from coderag_parser.languages import has_grammar, language_of
from coderag_parser.units import parse_source

DEFAULT: dict[str, list[str]] = {
    "python": ["attrs", "boltons", "toolz", "parso", "h11", "tenacity"],
    "go": ["logrus", "afero", "viper", "zap", "echo_go", "gjson"],
    "java": ["cordova_android", "rn_camera", "cdv_file", "rn_bridge", "rn_keychain"],
    "javascript": [
        "ws",
        "mocha",
        "fastify",
        "async_js",
        "jszip",
        "node_forge",
        "express_js",
        "lodash_es",
        "luxon",
        "three_math",
        "rn_elements",
    ],
    "typescript": ["zod", "type_fest", "leaflet_types", "rxjs_operators", "trpc_server", "wonka"],
    "rust": ["anyhow", "smallvec", "nom", "walkdir", "itertools", "arrayvec"],
    "c": ["lz4", "lmdb", "expat", "hiredis_c", "cmark_gfm", "c_ares"],
}
"""Code bases measured when none are named: at least five per language, CommonJS/prototype
style (ws, mocha, fastify, async_js, jszip, node_forge, express_js), ESM (lodash_es, luxon,
three_math) and JSX (rn_elements) JavaScript, TypeScript declaration files (type_fest,
leaflet_types)."""

CTAGS_LANGUAGE = {
    "python": "Python",
    "go": "Go",
    "java": "Java",
    "javascript": "JavaScript",
    "typescript": "TypeScript",
    "tsx": "TypeScript",
    "rust": "Rust",
    "c": "C",
}
"""Our language -> the ctags parser forced on its files (``.h`` is C here, not ctags' C++)."""

KINDS: dict[str, set[str]] = {
    "python": {"class", "function", "member"},
    "go": {"func", "struct", "interface"},
    "java": {"class", "interface", "enum", "method", "record"},
    "javascript": {"class", "function", "method", "getter", "setter", "generator"},
    "typescript": {"class", "function", "method", "interface", "enum", "generator"},
    "rust": {"function", "method", "struct", "interface", "enum"},
    "c": {"function", "struct", "enum", "union"},
}
KINDS["tsx"] = KINDS["typescript"]
"""Per language, the ctags kinds counted as definitions (Python's ``member`` is a method, Rust's
``interface`` a trait; C's and Go's ``member`` are fields, so not counted)."""

FUNCTION_SCOPES = {"function", "func", "method", "member", "getter", "setter", "generator"}
# ctags' scopeKind is the kind of the scope's first component (``Sender.close`` is "class"), so
# nesting is read from the kinds of every prefix of the scope instead
"""Scope kinds whose definitions are nested in a function, so part of that function's unit."""

ANONYMOUS = re.compile(r"(^|\.)(AnonymousFunction|__anon)\w*$")
"""Ctags' names for anonymous functions and structs."""

IDIOMS: list[tuple[str, str]] = [
    ("js prototype assignment", r"\.prototype(\.[\w$]+|\[[^\]]+\])\s*="),
    ("js Object.defineProperty", r"Object\.defineProperty"),
    ("js exports.x =", r"^\s*(module\.)?exports\.[\w$]+\s*="),
    ("js module.exports =", r"^\s*module\.exports\s*="),
    ("js computed member assignment", r"^\s*[\w$.]+\[[^\]]+\]\s*=\s*(async\s+)?function"),
    (
        "js static assignment X.m =",
        r"^\s*[\w$]+(\.[\w$]+)+\s*=\s*(async\s+)?(function|\(|[\w$]+\s*=>)",
    ),
    (
        "js object-literal property function",
        r"^\s*['\"]?[\w$]+['\"]?\s*:\s*(async\s+)?(function|\()",
    ),
    (
        "js object-literal method",
        r"^\s*(async\s+)?(get\s+|set\s+|\*\s*)?['\"]?[\w$]+['\"]?\s*\(.*\)\s*\{",
    ),
    ("ts namespace", r"^\s*(export\s+)?(declare\s+)?(namespace|module)\s"),
    ("ts overload / declaration", r"^\s*(export\s+)?(declare\s+)?function\b.*\)\s*(:[^{]*)?;\s*$"),
    ("interface/trait member without body", r"\)\s*(:[^{]*|->[^{]*)?;\s*$"),
    ("class", r"\b(class|struct|enum|interface|trait)\b"),
]
"""Miss idioms: the first regex the definition's source line matches names its group."""


@dataclass
class Tag:
    """One ctags definition."""

    path: str
    line: int
    name: str
    kind: str
    language: str


def ctags_definitions(root: Path, files: list[Path]) -> list[Tag]:
    """Ctags' top-level and member definitions of the files (paths relative to ``root``)."""
    by_language: dict[str, list[str]] = collections.defaultdict(list)
    for f in files:
        rel = f.relative_to(root).as_posix()
        by_language[language_of(rel) or ""].append(rel)
    tags: list[Tag] = []
    for language, rels in by_language.items():
        proc = subprocess.run(
            [
                "ctags",
                "--output-format=json",
                f"--language-force={CTAGS_LANGUAGE[language]}",
                "--fields=+nKZ",
                "-L",
                "-",
                "-f",
                "-",
            ],
            input="\n".join(rels),
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        rows = []
        for row in proc.stdout.splitlines():
            try:
                rows.append(json.loads(row))
            except json.JSONDecodeError:
                continue  # a pattern ctags cut inside an escape: not a row we can read
        kind_of = {
            (t.get("path"), _full(t)): t.get("kind", "") for t in rows if t.get("_type") == "tag"
        }
        for t in rows:
            if t.get("_type") != "tag" or t.get("kind") not in KINDS[language]:
                continue
            if ANONYMOUS.search(t["name"]) or _object_literal(t, language) or _misread(t, language):
                continue
            if _in_function(t, kind_of):
                continue  # nested in a named function: part of its unit
            tags.append(Tag(t["path"], t["line"], t["name"], t["kind"], language))
    return tags


def _full(tag: dict) -> str:
    return f"{tag['scope']}.{tag['name']}" if tag.get("scope") else tag["name"]


def _in_function(tag: dict, kind_of: dict[tuple[str, str], str]) -> bool:
    """Whether a named function or method encloses the tag (an anonymous one does not)."""
    parts = tag.get("scope", "").split(".") if tag.get("scope") else []
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if ANONYMOUS.search(prefix):
            continue
        if kind_of.get((tag["path"], prefix)) in FUNCTION_SCOPES:
            return True
    # a scope ctags tagged nowhere: its kind is only known when it is one name long
    return (
        len(parts) == 1
        and tag.get("scopeKind") in FUNCTION_SCOPES
        and not ANONYMOUS.search(parts[0])
        and (tag["path"], parts[0]) not in kind_of
    )


def _object_literal(tag: dict, language: str) -> bool:
    """Ctags calls every JavaScript object literal a class (``const options = {...}``) and
    every ``X`` of an ``X.prototype.m = ...`` one too; neither is a class to a reader (the
    object's functions still count, as methods)."""
    if language not in ("javascript", "typescript", "tsx") or tag["kind"] != "class":
        return False
    pattern = tag.get("pattern", "")
    return not re.search(r"\bclass\b|\bfunction\b", pattern) or ".prototype" in pattern


def _misread(tag: dict, language: str) -> bool:
    """Ctags reads a use of a prototype member (``Base.prototype.m.call(this)``,
    ``Array.prototype.concat(...)``) as a definition of it."""
    if language not in ("javascript", "typescript", "tsx"):
        return False
    name = re.escape(tag["name"])
    pattern = tag.get("pattern", "")
    return bool(re.search(rf"\.prototype\.{name}\b(?!\s*=[^=])", pattern))


def source_files(root: Path, max_files: int) -> list[Path]:
    """The files under ``root`` that the parser reads with a grammar, at most ``max_files``."""
    out = []
    for f in sorted(root.rglob("*")):
        if "node_modules" in f.parts or not f.is_file():
            continue
        language = language_of(f.name)
        if language and has_grammar(language) and language in CTAGS_LANGUAGE:
            out.append(f)
    return out[:max_files]


def idiom(tag: Tag, line: str) -> str:
    """The idiom a missed definition is written in."""
    for name, pattern in IDIOMS:
        if re.search(pattern, line):
            return name
    return f"{tag.language} {tag.kind}"


def reader_names(tag: Tag, line: str) -> tuple[str, ...]:
    """The names a unit may carry to cover ``tag``: ctags' own, and for a C function whose name
    a macro builds (``PREFIX(scanLt)(...)``, which ctags calls ``PREFIX``) the macro's argument,
    the name its callers and readers use."""
    built = re.search(rf"\b{re.escape(tag.name)}\((\w+)\)\s*\(", line)
    if tag.language == "c" and tag.kind == "function" and built:
        return (tag.name, built.group(1))
    return (tag.name,)


def typedef_of(tag: Tag, unit: Unit) -> bool:
    """Whether ``unit`` is the typedef ``tag`` is the tag of (``typedef struct binding {...}
    BINDING;``: one definition, one unit, named by the alias the code uses)."""
    head = rf"\btypedef\s+(struct|union|enum)\s+{re.escape(tag.name)}\b"
    return (
        tag.language == "c"
        and unit.start_line <= tag.line <= unit.end_line
        and re.search(head, unit.signature) is not None
    )


def measure(name: str, max_files: int) -> tuple[str, int, int, float, list[tuple[Tag, str]]]:
    """(language, definitions, covered, seconds, misses with their source line) of a code base."""
    entry = get_corpus(name)
    root = corpus_root(name)
    files = source_files(root, max_files)
    tags = ctags_definitions(root, files)
    by_file: dict[str, list[Tag]] = collections.defaultdict(list)
    for t in tags:
        by_file[t.path].append(t)
    covered = 0
    misses: list[tuple[Tag, str]] = []
    started = time.perf_counter()
    for rel, file_tags in by_file.items():
        text = (root / rel).read_text("utf-8", "replace")
        lines = text.splitlines()
        units = [
            u
            for u in parse_source(name, rel, language_of(rel) or "", text).units
            if u.kind not in ("block", "file")
        ]
        for t in file_tags:
            line = lines[t.line - 1] if t.line <= len(lines) else ""
            names = reader_names(t, line)
            hit = any(
                u.start_line <= t.line <= u.end_line
                and re.sub(r"\[part \d+\]$", "", u.symbol).endswith(names)
                for u in units
            ) or any(typedef_of(t, u) for u in units)
            if hit:
                covered += 1
            else:
                misses.append((t, lines[t.line - 1] if t.line <= len(lines) else ""))
    return entry["language"], len(tags), covered, time.perf_counter() - started, misses


def main(argv: list[str]) -> int:
    """Print the coverage table and the misses by idiom."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="code bases (default: DEFAULT)")
    ap.add_argument("--max-files", type=int, default=400, help="files per code base")
    ap.add_argument("--misses", type=int, default=4, help="examples printed per idiom")
    args = ap.parse_args(argv)
    if shutil.which("ctags") is None:
        print("ctags_coverage: needs Universal Ctags: apt-get install -y universal-ctags")
        return 2
    names = args.names or [n for group in DEFAULT.values() for n in group]
    print(f"# python3 -m bench.ctags_coverage {' '.join(argv)}".rstrip())
    print(f"{'language':<11} {'code base':<18} {'defs':>6} {'covered':>7} {'share':>6}")
    totals: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    by_idiom: dict[str, list[tuple[str, Tag, str]]] = collections.defaultdict(list)
    for name in names:
        language, defs, covered, _, misses = measure(name, args.max_files)
        share = covered / defs if defs else 1.0
        print(f"{language:<11} {name:<18} {defs:>6} {covered:>7} {share:>6.3f}")
        totals[language][0] += defs
        totals[language][1] += covered
        for t, line in misses:
            by_idiom[idiom(t, line)].append((name, t, line))
    print()
    for language, (defs, covered) in totals.items():
        share = covered / defs if defs else 1.0
        print(f"{language:<11} {'(all)':<18} {defs:>6} {covered:>7} {share:>6.3f}")
    print("\n# misses by idiom")
    for name, rows in sorted(by_idiom.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(rows):>6}  {name}")
        for corpus, t, line in rows[: args.misses]:
            print(f"          {corpus}:{t.path}:{t.line} {t.kind} {t.name}: {line.strip()[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
