"""Query matches -> the definitions a reader would name, with their doc comments and extent.

No per-language code: the query's capture names decide the kind, and the node-type sets below
are data. A definition starts at its doc comment (and attributes, decorators, ``export``) and
ends where its node ends; overload signatures merge into the definition they overload; top-level
constants and variables that carry a doc comment or span several lines stand as definitions of
their own, the others only enter the symbol table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

from coderag.index_rows import BINDING_KIND
from coderag_parser.languages import EXPORTED

CONTAINERS = {"class", "interface", "object", "namespace"}
"""Definition kinds that hold member definitions: a unit of their header, one per member."""

METHOD_CONTAINERS = {"class", "interface", "object"}
"""Containers whose functions are methods (a namespace's functions stay functions); ``object``
is an object literal holding functions (``const methods = { push() {} }``)."""

SYMBOL_ONLY = {"constant", "variable"}
"""Definition kinds that become units only when exported, documented or long (else symbols only)."""

OVERLOAD = "overload"
"""Kind of a bodiless signature that merges with the same-named definition after it."""

CONSTANT_UNIT_LINES = 3
"""An undocumented constant or variable spanning at least this many lines is a unit."""

EXPORT_KEYWORD = ("text", r"^export\b")
"""How languages outside ``languages.EXPORTED`` mark a constant exported: an ``export`` statement
(so Python's module constants stay in blocks unless documented or long)."""

WRAPPERS = {
    "decorated_definition",
    "export_statement",
    "ambient_declaration",
    "type_declaration",
}
"""Parent nodes that belong to the one definition they wrap (decorators, ``export``, Go's
``type``); a wrapper holding several definitions (a Go ``type (...)`` group) belongs to none."""

ATTRIBUTES = {"attribute_item", "decorator"}
"""Sibling nodes above a definition that belong to it (Rust ``#[...]`` attributes)."""

DOC_COMMENT = re.compile(r"^(/\*\*[^/]|///[^/])")
"""Doc comments (``/** */``, ``///``) that stay attached across blank lines (Javadoc style)."""

DOC_GAP = 2
"""Blank lines a doc comment may leave between itself and its definition."""


@dataclass
class Definition:
    """A definition the query found; ``start``/``end`` are 0-based rows including wrappers."""

    node: Node
    kind: str
    name: str
    start: int
    end: int
    body: Node | None
    doc: str
    receiver: str = ""
    params: str = ""
    returns: str = ""
    parent: Definition | None = None
    children: list[Definition] = field(default_factory=list)


def find_definitions(matches: list, language: str) -> tuple[list[Definition], list[dict]]:
    """Top-level unit definitions (containers hold their methods) and symbol-only rows."""
    found: dict[tuple[int, int], Definition] = {}
    symbols: dict[tuple[int, int, str], dict] = {}
    for _, caps in matches:
        kind_key = next((k for k in caps if k.startswith("definition.")), None)
        if kind_key is None or "name" not in caps:
            continue
        node = caps[kind_key][0]
        kind = kind_key.split(".", 1)[1]
        key = (node.start_byte, node.end_byte)
        seen = found.get(key)
        if seen is not None and seen.kind == kind and seen.name == _text(caps["name"][0]):
            continue  # an object literal matches once per function it holds: read it once
        d, outer = _definition(node, kind, caps)
        if kind in SYMBOL_ONLY:
            row = {
                "name": d.name,
                "qualified": d.name,
                "kind": kind,
                "start_line": node.start_point[0] + 1,
                "end_line": node.end_point[0] + 1,
            }
            symbols.setdefault((*key, d.name), row)  # the first pattern's kind wins
            if d.doc or d.end - d.start + 1 >= CONSTANT_UNIT_LINES or _exported(language, d, outer):
                found.setdefault(key, d)  # a group's first name names it; a function wins
            continue
        found[key] = d
    ordered = sorted(found.values(), key=lambda d: (d.node.start_byte, -d.node.end_byte))
    rows = [  # a field holding a function is named by its method row, not twice
        row
        for (start, end, _), row in symbols.items()
        if (start, end) not in found or found[(start, end)].kind in SYMBOL_ONLY
    ]
    return _nest(ordered), rows


def keyed_aliases(matches: list, rows: list[dict]) -> list[dict]:
    """Symbol rows for the functions a file stores under a computed key (``{ [writeSym]: write
    }``, ``proto[writeSym] = write``), so that ``this[writeSym](...)`` resolves to them: the
    key, ``[writeSym]``, named as a method over the lines of a function the file defines, or,
    for a name the file defines no function by (an imported ``asJson``), a ``binding`` row at
    the key's line whose ``qualified`` is that name (the call graph resolves it at read
    time)."""
    functions: dict[str, dict] = {}
    for r in sorted(rows, key=lambda r: r["kind"] != "function"):  # a function before a method
        if r["kind"] in ("function", "method"):
            functions.setdefault(r["name"], r)
    out: dict[tuple[str, int], dict] = {}
    for _, caps in matches:
        if "alias" not in caps:
            continue
        key = "[" + _text(caps["alias.key"][0]).strip("[] \t\n") + "]"
        target = _text(caps["alias.target"][0])
        row = functions.get(target)
        # an imported function: a binding at the key's own line, resolved when read
        line = caps["alias"][0].start_point[0] + 1
        start, end = (row["start_line"], row["end_line"]) if row else (line, line)
        out.setdefault(
            (key, start if row else -line),
            {
                "name": key,
                "qualified": key if row else target,
                "kind": "method" if row else BINDING_KIND,
                "start_line": start,
                "end_line": end,
            },
        )
    return list(out.values())


def _exported(language: str, d: Definition, outer: Node) -> bool:
    field, pattern = EXPORTED.get(language, EXPORT_KEYWORD)
    declared = _text(outer).split("=", 1)[0]  # not a `public` inside the value
    return bool(re.search(pattern, d.name if field == "name" else declared))


def _definition(node: Node, kind: str, caps: dict) -> tuple[Definition, Node]:
    parent = node.parent
    wraps = (
        parent is not None
        and parent.type in WRAPPERS
        and sum("comment" not in c.type and c.type not in ATTRIBUTES for c in parent.named_children)
        == 1
    )
    outer = parent if wraps and parent is not None else node
    leading = _leading(outer)
    doc = _doc_text(_text(caps["doc"][0])) if "doc" in caps else _comment_doc(leading)
    definition = Definition(
        node=node,
        kind=kind,
        name=_text(caps["name"][0]),
        start=leading[-1].start_point[0] if leading else outer.start_point[0],
        end=outer.end_point[0],
        body=caps["body"][0] if "body" in caps else None,
        doc=doc,
        receiver=_text(caps["receiver"][0]) if "receiver" in caps else "",
        params=_text(caps["params"][0]) if "params" in caps else "",
        returns=_text(caps["returns"][0]) if "returns" in caps else "",
    )
    return definition, outer


def _nest(ordered: list[Definition]) -> list[Definition]:
    """Put methods and members into their containers; drop what is nested in a function."""
    roots: list[Definition] = []
    stack: list[Definition] = []
    for d in ordered:
        while stack and stack[-1].node.end_byte < d.node.end_byte:
            stack.pop()
        parent = stack[-1] if stack else None
        if parent is None:
            roots.append(d)
        elif parent.kind in CONTAINERS or _see_through(parent, d):
            # a top-level variable is see-through: what an IIFE or a call's object argument
            # defines (`var X = (function () { function X() {} ... })()`) stays a definition
            d.parent = parent
            parent.children.append(d)
        else:
            continue  # nested in a function or a class's field: part of that unit
        stack.append(d)
    for d in ordered:
        d.children = merge_overloads(d.children)
    return merge_overloads(roots)


def _see_through(parent: Definition, d: Definition) -> bool:
    """Whether ``d`` stands as a definition inside the top-level variable ``parent``: it begins
    on a later line, in the value (C's `typedef struct T {...} U;` is one definition)."""
    return (
        parent.kind in SYMBOL_ONLY
        and parent.parent is None
        and d.node.start_point[0] > parent.node.start_point[0]
    )


def merge_overloads(defs: list[Definition]) -> list[Definition]:
    """Fold each run of same-named overload signatures into the definition that follows it
    (TypeScript's implementation signature), or into one declaration where none follows."""
    out: list[Definition] = []
    run: list[Definition] = []
    for d in [*defs, None]:
        if run and (d is None or d.name != run[0].name):
            last = run[-1]
            in_methods = last.parent is not None and last.parent.kind in METHOD_CONTAINERS
            last.kind = "method" if in_methods else "function"
            last.start, last.doc = run[0].start, next((r.doc for r in run if r.doc), "")
            out.append(last)
            run = []
        if d is None:
            break
        if d.kind == OVERLOAD:
            run.append(d)
        elif run and d.name == run[0].name:
            d.start = run[0].start
            d.doc = d.doc or next((r.doc for r in run if r.doc), "")
            out.append(d)
            run = []
        else:
            out.append(d)
    return out


def _last_row(node: Node) -> int:
    """Last row a node really occupies (a Rust ``///`` comment ends at column 0 of the next)."""
    row, col = node.end_point
    return row - 1 if col == 0 and row > node.start_point[0] else row


def _leading(node: Node) -> list[Node]:
    """Comments and attributes directly above a node, nearest first; the nearest may be a doc
    comment separated by up to ``DOC_GAP`` blank lines."""
    out: list[Node] = []
    start = node.start_point[0]
    prev = node.prev_sibling
    while prev is not None and ("comment" in prev.type or prev.type in ATTRIBUTES):
        gap = start - 1 - _last_row(prev)
        if gap > 0 and not (not out and gap <= DOC_GAP and DOC_COMMENT.match(_text(prev))):
            break
        out.append(prev)
        start = prev.start_point[0]
        prev = prev.prev_sibling
    return out


def _comment_doc(leading: list[Node]) -> str:
    parts = [_text(n) for n in reversed(leading) if "comment" in n.type]
    return _doc_text("\n".join(parts))


_DOC_OPEN = re.compile(r'^[ \t]*(?:///?|/\*\*?|\*/|\*|#|"""|\'\'\')[ \t]?', re.MULTILINE)
_DOC_CLOSE = re.compile(r'(?:\*/|"""|\'\'\')[ \t]*$', re.MULTILINE)
_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)


def _doc_text(raw: str) -> str:
    # whole-text passes, not per line: JSDoc-heavy files have thousands of comment lines
    text = "\n".join(raw.splitlines())
    text = _DOC_CLOSE.sub("", _DOC_OPEN.sub("", text))
    return _TRAILING.sub("", text).strip()[:2000]


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")
