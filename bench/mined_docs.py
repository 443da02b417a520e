"""Doc comments of mined code bases (``bench/mine.py``): each definition's doc comment blanked
in place (line numbers kept) and its first sentence kept as a question when it says more than the
definition's name; Python docstrings and the comments the parser reads as the doc of Go, Java,
JavaScript, TypeScript, Rust and C definitions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node, QueryCursor

from bench.mined_zh import DROPPED, FUNCTION_WORDS, WORD
from coderag_parser.definitions import Definition, find_definitions
from coderag_parser.languages import load_query, parser
from coderag_retriever.selfcheck import first_sentence
from coderag_retriever.text import STOP_WORDS, split_identifier, stem

MAX_QUERY_CHARS = 300
"""Longer first sentences are paragraphs without a full stop, not questions."""

BOILERPLATE = re.compile(
    r"^(see\b|deprecated|todo\b|fixme\b|xxx\b|hack\b|note\b|copyright|licensed\b|spdx|"
    r"this file\b|generated\b|auto-?generated|do not edit|@|\{@inheritdoc\}|inherit|overrides?\b|"
    r"implements?\b|nolint|go:|\+build|eslint|prettier|istanbul|ts-)",
    re.IGNORECASE,
)
"""First sentences that say nothing about what the definition does."""

LICENSE = re.compile(
    r"\b(license|licence|copyright|warranty|all rights reserved|apache|mit license)\b",
    re.IGNORECASE,
)
"""License text, wherever it sits in a sentence."""

_MARKUP = [
    (re.compile(r"\{@(?:code|link|linkplain|literal|value)\s+([^}]*)\}"), r"\1"),
    (re.compile(r"</?[A-Za-z][^>]*>"), " "),
    (
        re.compile(r":(?:py:)?(?:func|meth|class|attr|mod|obj|data|exc|const|ref):`~?([^`]*)`"),
        r"\1",
    ),
    (re.compile(r"\[`?([^\]`]+)`?\](?:\([^)]*\)|\[[^\]]*\])?"), r"\1"),
    (re.compile(r"`+([^`]*)`+"), r"\1"),
    (re.compile(r"\*\*([^*]+)\*\*|__([^_]+)__"), r"\1\2"),
]
"""Doc markup (Javadoc, HTML, Sphinx roles, Markdown links and code spans) -> its plain text."""

FUNCTION_KINDS = frozenset({"function", "method"})
"""Definition kinds a test can be said to test."""


@dataclass
class Doc:
    """A documented definition: its first sentence and where its unit must be found."""

    name: str
    row: int
    """0-based row of the definition's own node (the same in the blanked copy)."""
    sentence: str


@dataclass
class FileMined:
    """One file's blanked text, its doc questions' definitions and its function definitions."""

    text: str
    docs: list[Doc] = field(default_factory=list)
    functions: list[tuple[str, int]] = field(default_factory=list)
    """(name, 0-based row) of each function or method, for test questions."""


def walk(defs: list[Definition]) -> list[Definition]:
    """Every definition with its members, in source order."""
    out: list[Definition] = []
    for d in defs:
        out.append(d)
        out += walk(d.children)
    return out


def definitions(language: str, data: bytes) -> tuple[Node, list[Definition]]:
    """The parse tree's root and the project's definitions of one file."""
    tree = parser(language).parse(data)
    matches = QueryCursor(load_query(language)).matches(tree.root_node)
    defs, _ = find_definitions(matches, language)
    return tree.root_node, walk(defs)


def docstring_node(d: Definition) -> Node | None:
    """A Python definition's docstring: the string its body starts with."""
    if d.body is None or not d.body.named_children:
        return None
    first = d.body.named_children[0]
    if first.type == "expression_statement" and first.named_children:
        string = first.named_children[0]
        if string.type in ("string", "concatenated_string"):
            return string
    return None


def doc_comments(d: Definition, comments: list[Node]) -> list[Node]:
    """The comments between a definition's start (its doc) and its own node: what the parser
    reads as its doc; inner docs (``//!``, ``/*!``) document the enclosing module instead."""
    first, last = d.start, d.node.start_point[0] - 1
    return [
        c
        for c in comments
        if first <= c.start_point[0]
        and last_row(c) <= last
        and not (c.text or b"").startswith((b"//!", b"/*!"))
    ]


def last_row(node: Node) -> int:
    """The last row a node really occupies (a Rust ``///`` comment ends at column 0 of the next
    row)."""
    row, col = node.end_point
    return row - 1 if col == 0 and row > node.start_point[0] else row


def clean_doc(raw: str) -> str:
    """Comment markers and doc markup stripped, one line per source line."""
    lines = []
    for line in raw.splitlines():
        line = re.sub(r'^\s*(?:///?|/\*\*?|\*/|\*|#|[rRuUbB]?"""|\'\'\')\s?', "", line)
        line = re.sub(r'\s*(?:\*/|"""|\'\'\')\s*$', "", line)
        if re.match(r"^\s*[@:]\w+", line):  # Javadoc/Sphinx tags start the tag section
            break
        lines.append(line.rstrip())
    text = "\n".join(lines).strip()
    for pattern, repl in _MARKUP:
        text = pattern.sub(repl, text)
    return text


def name_words(name: str) -> set[str]:
    """The lower-case words of an identifier, stemmed."""
    return {stem(w) for w in split_identifier(name)}


def keep_sentence(sentence: str | None, name: str) -> str | None:
    """The first sentence if it makes a question: at least four words, not boilerplate or
    license text, not code, and saying more than the definition's own name."""
    if not sentence:
        return None
    sentence = " ".join(sentence.split())
    head, _, tail = sentence.partition(" ")
    if head.strip(",:") == name and tail:
        # Go's and Rust's convention ("SetLevel sets the level"): the name would answer it alone
        sentence = tail[0].upper() + tail[1:]
    words = WORD.findall(sentence)
    if len(words) < 4 or len(sentence) > MAX_QUERY_CHARS:
        return None
    if BOILERPLATE.match(sentence) or LICENSE.search(sentence):
        return None
    if sum(ch in "{}[]();=<>|&" for ch in sentence) > 4:
        return None  # a code sample, not prose
    own = name_words(name)
    rest = {stem(w.lower()) for w in words} - own - STOP_WORDS - DROPPED - set(FUNCTION_WORDS)
    if len(rest) < 2:
        return None  # "Foo returns a Foo": nothing to learn beyond the name
    return sentence


def blank_range(data: bytearray, start: int, end: int, keep: bytes = b"") -> None:
    """Replace ``data[start:end]`` by ``keep`` and the range's newlines (line numbers kept)."""
    newlines = data[start:end].count(b"\n")
    data[start:end] = keep + b"\n" * newlines


def mine_file(language: str, source: str) -> FileMined:
    """Blank the doc comments of one file's definitions; their first sentences and the file's
    functions come back with the blanked text."""
    data = source.encode("utf-8")
    root, defs = definitions(language, data)
    comments = top_comments(root) if language != "python" else []
    edits: dict[tuple[int, int], bytes] = {}
    found = FileMined(source)
    for d in defs:
        if d.kind in FUNCTION_KINDS:
            found.functions.append((d.name, d.node.start_point[0]))
        if language == "python":
            node = docstring_node(d)
            nodes = [node] if node is not None else []
            raw = (node.text or b"").decode("utf-8", "replace") if node is not None else ""
            keep = b'""'  # an empty literal keeps the body a valid suite
        else:
            nodes = doc_comments(d, comments)
            raw = "\n".join((n.text or b"").decode("utf-8", "replace") for n in nodes)
            keep = b""
        if not nodes:
            continue
        for n in nodes:
            edits[(n.start_byte, n.end_byte)] = keep
        sentence = keep_sentence(first_sentence(clean_doc(raw)), d.name)
        if sentence:
            found.docs.append(Doc(d.name, d.node.start_point[0], sentence))
    if not edits:
        return found
    out = bytearray(data)
    blanked_rows: set[int] = set()
    for (start, end), keep in sorted(edits.items(), reverse=True):
        first = data.count(b"\n", 0, start)
        blanked_rows.update(range(first, first + data.count(b"\n", start, end) + 1))
        blank_range(out, start, end, keep)
    lines = out.decode("utf-8", "replace").split("\n")
    for row in blanked_rows:  # what is left of a blanked line is indentation: make it empty
        if row < len(lines) and not lines[row].strip():
            lines[row] = ""
    found.text = "\n".join(lines)
    return found


def top_comments(root: Node) -> list[Node]:
    """The comment nodes of a tree, without the parts some grammars nest in them (Rust's
    ``doc_comment`` inside a ``line_comment``), so no range is blanked twice."""
    return [
        n
        for n in iter_nodes(root)
        if "comment" in n.type and (n.parent is None or "comment" not in n.parent.type)
    ]


def iter_nodes(root: Node) -> list[Node]:
    """Every node of a tree in document order (iteratively: deep trees exceed the recursion
    limit)."""
    out: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.children))
    return out


def unit_of(units: list, name: str, row: int) -> tuple[int, int] | None:
    """The (start, end) lines of the unit the parser made of definition ``name`` whose node
    starts at 0-based ``row``: a function's whole unit, a class's header unit; None when it is
    split into parts or is no unit of its own."""
    for u in units:
        if u.kind in ("block", "file") or not (u.start_line - 1 <= row <= u.end_line - 1):
            continue
        symbol = u.symbol
        if "[part " in symbol:
            return None
        if symbol.rsplit(".", 1)[-1] == name:
            return u.start_line, u.end_line
    return None
