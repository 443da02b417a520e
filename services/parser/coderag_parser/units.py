"""Source text -> units, with no I/O and no per-language code: the query's captures decide.

Code units never overlap. ``definitions.py`` finds what a reader would call the definitions (each
from its doc comment to its end, overload signatures merged). Functions, methods, and documented
or multi-line top-level constants are units of their own (nested functions stay in their parent);
a class becomes a unit of its header (up to its first member) plus a summary of its public
methods, and so do an interface, a TypeScript namespace or ambient module (``namespace A`` holds
``A.f``) and an object literal holding functions (``const methods = { push() {} }`` holds
``methods.push``); a top-level variable holding definitions (an IIFE) is cut between them, so
they stay units; whatever lines remain (module code, undocumented fields between methods) become
blank-line blocks. Functions over ``SPLIT_LINES`` are split into parts; files without a grammar,
or whose parse finds nothing, become blank-line blocks. ``facts.py`` adds each unit's facts."""

from __future__ import annotations

import re

from tree_sitter import QueryCursor

from coderag.schemas import Unit
from coderag_parser.definitions import (
    CONTAINERS,
    METHOD_CONTAINERS,
    SYMBOL_ONLY,
    Definition,
    find_definitions,
    keyed_aliases,
)
from coderag_parser.facts import DEPRECATED_MARKERS, collect_facts
from coderag_parser.languages import has_grammar, load_query, parser
from coderag_parser.parsed import ParsedFile

SPLIT_LINES = 500
"""Functions longer than this many lines are split into parts."""

PART_LINES = 200
"""Target length of each part of a split function."""

BLOCK_LINES = 60
"""Blank-line blocks are merged up to about this many lines."""

TEST_PATH = re.compile(
    r"(^|/)(tests?|__tests__|testing|spec)/|(^|/)test_[^/]*\.py$|_test\.(py|go)$|"
    r"\.(test|spec)\.[jt]sx?$|(^|/)src/test/|Tests?\.java$"
)
"""Paths of test code."""

_ASSIGNED = re.compile(
    r"^\s*(?:export\s+)?(?:(?:const|let|var|final|static|public|private|protected|readonly)\s+)*"
    r"([A-Za-z_$][\w$]*)\s*(?::[^=]+)?=[^=]"
)


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
        defs, symbols = find_definitions(matches, language)
        if defs or not tree.root_node.has_error:
            units, owners = _code_units(repo, path, language, data, lines, is_test, defs)
            rows = _symbol_rows(defs) + symbols
            parsed = ParsedFile(units, symbols=rows + keyed_aliases(matches, rows))
            collect_facts(parsed, matches, language, owners, markers)
            return parsed
    return ParsedFile(_blocks(repo, path, language, lines, range(len(lines)), is_test))


def _symbol_rows(defs: list[Definition], scope: tuple[str, ...] = ()) -> list[dict]:
    rows = []
    for d in defs:
        if d.kind in SYMBOL_ONLY:
            # the query's own symbol rows name every constant of a group; what a top-level
            # variable holds (an IIFE's definitions) is named as if it stood alone
            rows += _symbol_rows(d.children, scope)
            continue
        qualified = _qualify(d, list(scope))
        rows.append(
            {
                "name": d.name,
                "qualified": qualified,
                "kind": _member_kind(d),
                "start_line": d.start + 1,
                "end_line": d.end + 1,
            }
        )
        rows += _symbol_rows(d.children, (qualified,))
    return rows


def _member_kind(d: Definition) -> str:
    """A definition's kind, ``method`` for a function of a class, interface or object."""
    in_methods = d.parent is not None and d.parent.kind in METHOD_CONTAINERS
    return "method" if in_methods and d.kind not in CONTAINERS | SYMBOL_ONLY else d.kind


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
            # plain fields stay in the header; exported or documented ones are members
            header_end = max(min((c.start for c in d.children), default=d.end + 1) - 1, d.start)
            start = d.start
            if header_end - start + 1 > SPLIT_LINES:
                start = d.node.start_point[0]  # a doc this long is read as blocks of its own
            header = "\n".join(lines[start : header_end + 1])
            methods = [c for c in d.children if c.kind not in CONTAINERS | SYMBOL_ONLY]
            listed = [f"  {_signature(m, data)}" for m in methods if not m.name.startswith("_")]
            text = header + ("\n# public methods:\n" + "\n".join(listed) if listed else "")
            emit(d.kind, symbol, start, header_end, d, text)
            for child in d.children:
                if child.start > header_end:
                    walk(child, [symbol])  # `Base.cursor = {...}`'s members are Base.cursor's
            return
        kind = _member_kind(d)
        if d.kind in SYMBOL_ONLY and d.children:
            # a variable holding definitions (an IIFE) is cut between them, not across them:
            # each definition is its own unit, the variable's own lines around them its units
            own = _segments(lines, d.start, d.end, [(c.start, c.end) for c in d.children])
            ranges = [
                r
                for s, e in own
                for r in (_split(lines, s, e, True) if e - s >= SPLIT_LINES else [(s, e)])
            ]
            for part, (s, e) in enumerate(ranges, start=1):
                emit(kind, symbol if len(ranges) == 1 else f"{symbol}[part {part}]", s, e, d)
            for child in d.children:
                walk(child, scope)
            return
        if d.end - d.start + 1 <= SPLIT_LINES:
            emit(kind, symbol, d.start, d.end, d)
            return
        literal = d.kind in SYMBOL_ONLY
        for part, (s, e) in enumerate(_split(lines, d.start, d.end, literal), start=1):
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
    owners = {new: o for new, old in enumerate(order) if (o := owner_of[old]) is not None}
    return [units[i] for i in order], owners


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


def _signature(d: Definition, data: bytes) -> str:
    end = d.body.start_byte if d.body is not None else d.node.end_byte
    if d.body is not None and d.kind == "type":
        end = d.body.end_byte if d.body.end_byte - d.node.start_byte < 200 else d.body.start_byte
    sig = data[d.node.start_byte : end].decode("utf-8", "replace")
    sig = re.sub(r"\s+", " ", sig).strip().rstrip("{:=;").strip()
    return sig[:300]


def _qualify(d: Definition, scope: list[str]) -> str:
    if d.receiver:
        recv = re.sub(r"[()]", "", d.receiver).split()
        rtype = recv[-1] if recv else ""
        rtype = re.sub(r"\[.*\]$", "", rtype)
        return f"({rtype}).{d.name}" if rtype.startswith("*") else f"{rtype}.{d.name}"
    return ".".join([*scope, d.name])


def _split(lines: list[str], start: int, end: int, members: bool = False) -> list[tuple[int, int]]:
    """Cut a long function or block into parts of about PART_LINES, at blank lines where
    possible; with ``members`` (a long literal: an object's keys, a table's rows) between its
    first-level members (the lines at the least indentation inside it) where possible,
    preferring a blank line there."""
    member = min((_indent(lines[r]) for r in range(start + 1, end) if lines[r].strip()), default=0)

    def opens_member(row: int) -> bool:
        text = lines[row]
        return bool(text.strip()) and _indent(text) == member and text.lstrip()[0] not in ")]}"

    def before_member(row: int) -> bool:
        return row < end and opens_member(row + 1)

    def blank(row: int) -> bool:
        return not lines[row].strip()

    parts: list[tuple[int, int]] = []
    s = start
    while s <= end:
        e = min(s + PART_LINES - 1, end)
        if end - e < PART_LINES // 4:
            e = end
        else:
            window = range(e, s + PART_LINES // 2, -1)
            tries = (lambda r: blank(r) and before_member(r), before_member, blank)
            for fits in tries if members else (blank,):
                row = next((r for r in window if fits(r)), None)
                if row is not None:
                    e = row
                    break
        parts.append((s, e))
        s = e + 1
    return parts


def _segments(
    lines: list[str], start: int, end: int, taken: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The runs of rows from ``start`` to ``end`` outside the ``taken`` ranges, trimmed of blank
    rows, that hold a word (a lone ``})();`` carries nothing to search for)."""
    free = [True] * (end - start + 1)
    for s, e in taken:
        for row in range(max(s, start), min(e, end) + 1):
            free[row - start] = False
    runs: list[tuple[int, int]] = []
    row = start
    while row <= end:
        if not free[row - start] or not lines[row].strip():
            row += 1
            continue
        s = row
        while row <= end and free[row - start]:
            row += 1
        e = row - 1
        while not lines[e].strip():
            e -= 1
        if re.search(r"\w{2,}", " ".join(lines[s : e + 1])):
            runs.append((s, e))
    return runs


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


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
        words = re.findall(r"\w{2,}", " ".join(lines[r] for r in g))
        if not words or (len(g) == 1 and len(words) == 1):
            continue  # braces, or a group's lone `type (`, carry nothing to search for
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
