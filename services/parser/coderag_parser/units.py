"""Source text -> units, with no I/O and no per-language code: the query's captures decide.

Code units never overlap. Functions and methods are units of their own (nested functions stay in
their parent); a class becomes a unit of its header (up to its first method) plus a summary of its
public methods; whatever lines remain (module code, fields between methods) become blank-line
blocks. Functions over ``SPLIT_LINES`` are split into parts; files without a grammar, or whose parse
finds nothing, become blank-line blocks. ``facts.py`` adds each unit's semantic facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node, QueryCursor

from coderag.schemas import Unit
from coderag_parser.facts import DEPRECATED_MARKERS, collect_facts
from coderag_parser.languages import has_grammar, load_query, parser

SPLIT_LINES = 500
"""Functions longer than this many lines are split into parts."""

PART_LINES = 200
"""Target length of each part of a split function."""

BLOCK_LINES = 60
"""Blank-line blocks are merged up to about this many lines."""

CONTAINERS = {"class", "interface"}
"""Definition kinds whose functions are methods."""

SYMBOL_ONLY = {"constant", "variable"}
"""Definition kinds that enter the symbol table but stay inside blocks rather than units."""

WRAPPERS = {"decorated_definition", "export_statement"}
"""Parent nodes that belong to the definition they wrap (decorators, ``export``)."""

ATTRIBUTES = {"attribute_item", "decorator"}
"""Sibling nodes above a definition that belong to it (Rust ``#[...]`` attributes)."""

TEST_PATH = re.compile(
    r"(^|/)(tests?|__tests__|testing|spec)/|(^|/)test_[^/]*\.py$|_test\.(py|go)$|"
    r"\.(test|spec)\.[jt]sx?$|(^|/)src/test/|Tests?\.java$"
)
"""Paths of test code."""

_ASSIGNED = re.compile(
    r"^\s*(?:export\s+)?(?:(?:const|let|var|final|static|public|private|protected|readonly)\s+)*"
    r"([A-Za-z_$][\w$]*)\s*(?::[^=]+)?=[^=]"
)


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


@dataclass
class ParsedFile:
    """Everything the parser learns from one file."""

    units: list[Unit]
    symbols: list[dict] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)


def is_test_path(path: str) -> bool:
    """Whether a repository path holds test code."""
    return bool(TEST_PATH.search(path))


def extract_units(repo: str, path: str, language: str, source: str) -> list[Unit]:
    """Split one file's source into units."""
    return parse_source(repo, path, language, source).units


def parse_source(
    repo: str, path: str, language: str, source: str, markers: str = DEPRECATED_MARKERS
) -> ParsedFile:
    """Units with their semantic facts, plus the file's symbols, call sites and imports."""
    lines = source.splitlines()
    if not lines:
        return ParsedFile([])
    is_test = is_test_path(path)
    if has_grammar(language):
        data = source.encode("utf-8")
        tree = parser(language).parse(data)
        matches = QueryCursor(load_query(language)).matches(tree.root_node)
        defs, symbols = _definitions(matches, data)
        if defs or not tree.root_node.has_error:
            units, owners = _code_units(repo, path, language, data, lines, is_test, defs)
            parsed = ParsedFile(units, symbols=_symbol_rows(defs) + symbols)
            collect_facts(parsed, matches, language, owners, markers)
            return parsed
    return ParsedFile(_blocks(repo, path, language, lines, range(len(lines)), is_test))


def _symbol_rows(defs: list[Definition], scope: tuple[str, ...] = ()) -> list[dict]:
    rows = []
    for d in defs:
        in_container = d.parent is not None and d.parent.kind in CONTAINERS
        kind = "method" if in_container else d.kind
        rows.append(
            {
                "name": d.name,
                "qualified": _qualify(d, list(scope)),
                "kind": kind,
                "start_line": d.start + 1,
                "end_line": d.end + 1,
            }
        )
        rows += _symbol_rows(d.children, (*scope, d.name))
    return rows


def _code_units(
    repo: str,
    path: str,
    language: str,
    data: bytes,
    lines: list[str],
    is_test: bool,
    defs: list[Definition],
) -> tuple[list[Unit], dict[int, Definition]]:
    """Units of the definitions and of the lines between them, and unit index -> definition."""
    units: list[Unit] = []
    owner_of: list[Definition | None] = []
    covered = [False] * len(lines)

    def emit(kind: str, symbol: str, start: int, end: int, d: Definition, text: str = "") -> None:
        for row in range(start, end + 1):
            covered[row] = True
        units.append(
            Unit(
                repo=repo,
                file=path,
                start_line=start + 1,
                end_line=end + 1,
                symbol=symbol,
                kind=kind,
                language=language,
                signature=_signature(d, data),
                doc=d.doc,
                text=text or "\n".join(lines[start : end + 1]),
                is_test=is_test,
            )
        )
        owner_of.append(d)

    def walk(d: Definition, scope: list[str]) -> None:
        symbol = _qualify(d, scope)
        if d.kind in CONTAINERS:
            methods = [c for c in d.children if c.kind not in CONTAINERS]
            header_end = max(min((c.start for c in methods), default=d.end + 1) - 1, d.start)
            header = "\n".join(lines[d.start : header_end + 1])
            listed = [f"  {_signature(m, data)}" for m in methods if not m.name.startswith("_")]
            text = header + ("\n# public methods:\n" + "\n".join(listed) if listed else "")
            emit(d.kind, symbol, d.start, header_end, d, text)
            for child in d.children:
                walk(child, [*scope, d.name])
            return
        in_container = d.parent is not None and d.parent.kind in CONTAINERS
        kind = "method" if in_container or d.kind == "method" else d.kind
        if d.end - d.start + 1 <= SPLIT_LINES:
            emit(kind, symbol, d.start, d.end, d)
            return
        for part, (s, e) in enumerate(_split(lines, d.start, d.end), start=1):
            emit(kind, f"{symbol}[part {part}]", s, e, d)

    for d in defs:
        walk(d, [])
    rest = [row for row in range(len(lines)) if not covered[row]]
    blocks = _blocks(repo, path, language, lines, rest, is_test)
    if blocks and defs and blocks[0].start_line <= defs[0].start + 1:
        blocks[0] = _file_unit(blocks[0], defs, data)
    units += blocks
    owner_of += [None] * len(blocks)
    order = sorted(range(len(units)), key=lambda i: units[i].start_line)
    owners = {new: owner_of[old] for new, old in enumerate(order) if owner_of[old] is not None}
    return [units[i] for i in order], owners  # type: ignore[misc]


def _file_unit(head: Unit, defs: list[Definition], data: bytes) -> Unit:
    """The file's opening block (module doc, imports) as its file unit: what the file is for,
    summarised with its top-level definitions; the range stays the block's, so no overlap."""
    listed = "\n".join(f"  {_signature(d, data)}" for d in defs[:40])
    return head.model_copy(
        update={
            "kind": "file",
            "symbol": head.file,
            "text": f"{head.text}\n# defines:\n{listed}",
        }
    )


def _definitions(matches: list, data: bytes) -> tuple[list[Definition], list[dict]]:
    """Top-level unit definitions (containers hold their methods) and symbol-only rows."""
    found: dict[tuple[int, int], Definition] = {}
    symbols: list[dict] = []
    for _, caps in matches:
        kind_key = next((k for k in caps if k.startswith("definition.")), None)
        if kind_key is None or "name" not in caps:
            continue
        node = caps[kind_key][0]
        kind = kind_key.split(".", 1)[1]
        name = _text(caps["name"][0])
        if kind in SYMBOL_ONLY:
            symbols.append(
                {
                    "name": name,
                    "qualified": name,
                    "kind": kind,
                    "start_line": node.start_point[0] + 1,
                    "end_line": node.end_point[0] + 1,
                }
            )
            continue
        outer = node.parent if node.parent is not None and node.parent.type in WRAPPERS else node
        doc = _doc_text(caps["doc"][0]) if "doc" in caps else _comment_doc(outer)
        found[(node.start_byte, node.end_byte)] = Definition(
            node=node,
            kind=kind,
            name=name,
            start=_with_comments(outer),
            end=outer.end_point[0],
            body=caps["body"][0] if "body" in caps else None,
            doc=doc,
            receiver=_text(caps["receiver"][0]) if "receiver" in caps else "",
            params=_text(caps["params"][0]) if "params" in caps else "",
            returns=_text(caps["returns"][0]) if "returns" in caps else "",
        )
    ordered = sorted(found.values(), key=lambda d: (d.node.start_byte, -d.node.end_byte))
    roots: list[Definition] = []
    stack: list[Definition] = []
    for d in ordered:
        while stack and stack[-1].node.end_byte < d.node.end_byte:
            stack.pop()
        parent = stack[-1] if stack else None
        if parent is None:
            roots.append(d)
        elif parent.kind in CONTAINERS:
            d.parent = parent
            parent.children.append(d)
        else:
            continue  # nested in a function: part of that function's unit
        stack.append(d)
    return roots, symbols


def _last_row(node: Node) -> int:
    """Last row a node really occupies (a Rust ``///`` comment ends at column 0 of the next)."""
    row, col = node.end_point
    return row - 1 if col == 0 and row > node.start_point[0] else row


def _leading(node: Node) -> list[Node]:
    """Comments and attributes directly above a node, nearest first."""
    out: list[Node] = []
    start = node.start_point[0]
    prev = node.prev_sibling
    while (
        prev is not None
        and ("comment" in prev.type or prev.type in ATTRIBUTES)
        and _last_row(prev) >= start - 1
    ):
        out.append(prev)
        start = prev.start_point[0]
        prev = prev.prev_sibling
    return out


def _with_comments(node: Node) -> int:
    """First row of the node, extended over comments and attributes directly above it."""
    leading = _leading(node)
    return leading[-1].start_point[0] if leading else node.start_point[0]


def _comment_doc(node: Node) -> str:
    parts = [_text(n) for n in reversed(_leading(node)) if "comment" in n.type]
    return _doc_text_raw("\n".join(parts))


def _doc_text(node: Node) -> str:
    return _doc_text_raw(_text(node))


def _doc_text_raw(raw: str) -> str:
    cleaned = []
    for line in raw.splitlines():
        line = re.sub(r'^\s*(?:///?|/\*\*?|\*/|\*|#|"""|\'\'\')\s?', "", line)
        line = re.sub(r'(?:\*/|"""|\'\'\')\s*$', "", line)
        cleaned.append(line.rstrip())
    return "\n".join(cleaned).strip()[:2000]


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _signature(d: Definition, data: bytes) -> str:
    end = d.body.start_byte if d.body is not None else d.node.end_byte
    if d.body is not None and d.kind == "type":
        end = d.body.end_byte if d.body.end_byte - d.node.start_byte < 200 else d.body.start_byte
    sig = data[d.node.start_byte : end].decode("utf-8", "replace")
    sig = re.sub(r"\s+", " ", sig).strip().rstrip("{:=").strip()
    return sig[:300]


def _qualify(d: Definition, scope: list[str]) -> str:
    if d.receiver:
        recv = re.sub(r"[()]", "", d.receiver).split()
        rtype = recv[-1] if recv else ""
        rtype = re.sub(r"\[.*\]$", "", rtype)
        return f"({rtype}).{d.name}" if rtype.startswith("*") else f"{rtype}.{d.name}"
    return ".".join([*scope, d.name])


def _split(lines: list[str], start: int, end: int) -> list[tuple[int, int]]:
    """Cut a long function into parts of about PART_LINES, at blank lines where possible."""
    parts: list[tuple[int, int]] = []
    s = start
    while s <= end:
        e = min(s + PART_LINES - 1, end)
        if end - e < PART_LINES // 4:
            e = end
        else:
            for row in range(e, s + PART_LINES // 2, -1):
                if not lines[row].strip():
                    e = row
                    break
        parts.append((s, e))
        s = e + 1
    return parts


def _blocks(
    repo: str, path: str, language: str, lines: list[str], rows: range | list[int], is_test: bool
) -> list[Unit]:
    """Group the given rows into blank-line separated blocks of up to about BLOCK_LINES."""
    groups: list[list[int]] = []
    current: list[int] = []
    prev = -2
    for row in rows:
        blank = not lines[row].strip()
        if (blank or row != prev + 1) and current:
            groups.append(current)
            current = []
        if not blank:
            current.append(row)
        prev = row
    if current:
        groups.append(current)
    merged: list[list[int]] = []
    for g in groups:
        if not re.search(r"\w{2}", " ".join(lines[r] for r in g)):
            continue  # closing braces and the like carry nothing to search for
        gap = range(merged[-1][-1] + 1, g[0]) if merged else range(0)
        # merge only across blank lines: a unit between two groups must stay outside the block
        if (
            merged
            and len(merged[-1]) + len(g) <= BLOCK_LINES
            and len(gap) <= 2
            and not any(lines[r].strip() for r in gap)
        ):
            merged[-1].extend(g)
        else:
            merged.append(list(g))
    units = []
    for g in merged:
        for s, e in _split(lines, g[0], g[-1]) if g[-1] - g[0] >= SPLIT_LINES else [(g[0], g[-1])]:
            text = "\n".join(lines[s : e + 1])
            m = _ASSIGNED.match(lines[s])
            symbol = m.group(1) if m else path.rsplit("/", 1)[-1]
            units.append(
                Unit(
                    repo=repo,
                    file=path,
                    start_line=s + 1,
                    end_line=e + 1,
                    symbol=symbol,
                    kind="block",
                    language=language,
                    text=text,
                    is_test=is_test,
                )
            )
    return units
