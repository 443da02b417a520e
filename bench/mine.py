"""Training questions mined from many pinned code bases in neither split (``bench/mining.json``).

The generalisation of ``bench/docquestions.py`` to every language the parser supports:

* ``doc``: a doc comment's first sentence -> the definition it documents (Python docstrings;
  the comments directly above Go, Java, JavaScript, TypeScript, Rust and C definitions);
* ``test``: a test's name, turned into words -> the one function of the code base that the test
  calls and whose name the test's name contains (``test_parse_header_quotes`` -> ``parse_header``);
* Chinese: about a third of the questions are put into Chinese word by word through the project's
  own vocabulary (``vocab_zh.tsv``, then CC-CEDICT read backwards), identifiers kept in Latin
  letters, and only where the retriever's own Chinese->English mapping recovers most content words.

Commit subjects -> changed units are not mined: package archives carry no git history.

Each code base gets a copy with every definition's doc comment blanked (line numbers kept), so a
question cannot be answered by matching its own words, and each gold range is the exact range of
the unit the project's parser makes of that definition in the blanked copy (decorators and
attributes included where the unit includes them), so it matches what the index holds::

    python bench/mine.py NAME ... | --all   # bench/.cache/src/NAME-nodoc/ (the copy to index)
                                            # bench/.cache/mined/NAME.jsonl (its questions)

Outputs are byte-identical for the same pinned inputs: files are read in sorted order and every
sample is drawn from a generator seeded by the code base's name.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tree_sitter import Node, QueryCursor

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fetch import corpus_root, load_mining  # noqa: E402

from coderag_parser.definitions import Definition, find_definitions  # noqa: E402
from coderag_parser.languages import EXTENSIONS, load_query, parser  # noqa: E402
from coderag_parser.units import is_test_path, parse_source  # noqa: E402
from coderag_retriever import dictionary as cedict  # noqa: E402
from coderag_retriever.selfcheck import first_sentence  # noqa: E402
from coderag_retriever.text import STOP_WORDS, split_identifier, stem, zh_terms  # noqa: E402

OUT = HERE / ".cache" / "mined"
"""Where the question files go."""

CAP = 150
"""Most questions kept per code base."""

TEST_CAP = 50
"""Most test-name questions among them (the rest are doc questions)."""

ZH_SHARE = 0.3
"""Share of each code base's questions put into Chinese (where the translation holds)."""

ZH_MIN_RECOVERED = 0.6
"""Share of a question's content words the retriever must get back from its Chinese version."""

MAX_QUERY_CHARS = 300
"""Longer first sentences are paragraphs without a full stop, not questions."""

SKIP_DIRS = re.compile(r"(^|/)(node_modules|vendor|third_party|build|dist|examples?)/")
"""Paths whose code is not the code base's own."""

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

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_']*")
_TOKEN = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|#|->)[A-Za-z_$][\w$]*)*(?:\(\))?|\S")
_CODE_TOKEN = re.compile(r"_|[a-z][A-Z]|[A-Z]{2,}[a-z]|(?:\.|::|#|->)[A-Za-z_]|\(\)$")
"""What makes a token an identifier: snake_case, camelCase, a qualified name, a call."""

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

TEST_PREFIX = re.compile(r"^(?:test_?|Test_?)", re.ASCII)
"""How test functions are named in Python, Go, Java and Rust."""

JS_TEST_CALLS = frozenset({"it", "test"})
"""JavaScript/TypeScript test runners' test functions (``it("...")``, ``test("...")``)."""

CALL_NODES = frozenset({"call", "call_expression", "method_invocation", "new_expression"})
"""Tree-sitter node types of a call in the parsed languages."""

FUNCTION_KINDS = frozenset({"function", "method"})
"""Definition kinds a test can be said to test."""

FUNCTION_WORDS = dict(
    re.findall(
        r"(\w+)=(\S+)",
        "if=如果 when=当 whether=是否 not=不 no=没有 without=不带 with=带 and=和 or=或 "
        "for=为 from=从 into=到 by=通过 before=之前 after=之后 all=所有 each=每个 "
        "every=每个 this=这个 that=该 it=它 its=它的 which=哪个 only=只 also=也 can=可以 "
        "may=可能 must=必须 should=应该 will=将 than=比 as=作为 of=的 in=在 on=在 at=在 "
        "to=到 is=是 are=是 be=是 has=有 have=有 same=相同 any=任何 more=更多 one=一个 "
        "two=两个 given=给定 using=使用 until=直到 between=之间",
    )
)
"""English function words -> Chinese; they are not content words, so they never count for or
against a translation."""

DROPPED = frozenset({"a", "an", "the", "do", "does", "did", "was", "were", "been", "being"})
"""English words left out of a Chinese question (articles and auxiliaries)."""


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


@dataclass
class Case:
    """A test: its name as words, and the names it calls."""

    words: list[str]
    calls: set[str]


# --- doc comments -------------------------------------------------------------------------


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
    words = _WORD.findall(sentence)
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


# --- tests --------------------------------------------------------------------------------


def words_of_test(name: str) -> list[str]:
    """A test function's name as lower-case words without its ``test`` prefix."""
    return split_identifier(TEST_PREFIX.sub("", name))


def callee(node: Node) -> str | None:
    """The name a call node calls (``f``, ``obj.f``, ``T::f``, ``new T``)."""
    target = (
        node.child_by_field_name("function")
        or node.child_by_field_name("name")
        or node.child_by_field_name("constructor")
    )
    while target is not None and target.type not in ("identifier", "field_identifier"):
        if target.type in ("type_identifier", "property_identifier"):
            break
        nxt = (
            target.child_by_field_name("attribute")
            or target.child_by_field_name("field")
            or target.child_by_field_name("property")
            or target.child_by_field_name("name")
            or target.child_by_field_name("function")
        )
        if nxt is None:
            return None
        target = nxt
    return (target.text or b"").decode() if target is not None else None


def calls_in(node: Node) -> set[str]:
    """Names called anywhere inside ``node``."""
    return {name for n in iter_nodes(node) if n.type in CALL_NODES if (name := callee(n))}


def cases_in(language: str, source: str) -> list[Case]:
    """The tests of one test file: Python ``test_*``, Go ``Test*``, Java ``@Test``/``test*``
    methods, Rust ``#[test]`` functions, JavaScript/TypeScript ``it("...")``/``test("...")``."""
    data = source.encode("utf-8")
    root = parser(language).parse(data).root_node
    out: list[Case] = []
    for node in iter_nodes(root):
        if language in ("javascript", "typescript", "tsx") and node.type == "call_expression":
            fn = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            if fn is None or args is None or (fn.text or b"").decode() not in JS_TEST_CALLS:
                continue
            first = args.named_children[0] if args.named_children else None
            if first is None or first.type not in ("string", "template_string"):
                continue
            title = (first.text or b"").decode("utf-8", "replace").strip("'\"`")
            words = [w.lower() for w in _WORD.findall(title)]
            out.append(Case(words, calls_in(args)))
            continue
        if node.type not in (
            "function_definition",
            "function_declaration",
            "method_declaration",
            "function_item",
        ):
            continue
        name_node = node.child_by_field_name("name")
        name = (name_node.text or b"").decode() if name_node is not None else ""
        if not is_test_function(language, node, name):
            continue
        words = words_of_test(name)
        if words:
            out.append(Case(words, calls_in(node)))
    return out


def is_test_function(language: str, node: Node, name: str) -> bool:
    """Whether a function node is a test by its language's convention."""
    if language == "python":
        return name.startswith("test_")
    if language == "go":
        return bool(re.match(r"^Test[A-Z_]", name))
    if language == "java":
        text = (node.text or b"")[:400].decode("utf-8", "replace")
        return "@Test" in text or bool(re.match(r"^test[A-Z_]", name))
    if language == "rust":
        prev = node.prev_named_sibling
        while prev is not None and prev.type in ("attribute_item", "line_comment"):
            if b"test" in (prev.text or b""):
                return True
            prev = prev.prev_named_sibling
        return False
    return False


def tested_function(case: Case, functions: dict[str, int]) -> str | None:
    """The code-base function the test calls whose name's words appear, in order, in the test's
    name (``functions``: name -> how many definitions carry it). The longest such name wins
    (``AddHook`` over ``Add``); None when it is ambiguous (two names, or several definitions of
    it), or when the test's name says nothing beyond the function's name."""
    hits: list[tuple[int, str]] = []
    for name in sorted(case.calls):
        if not functions.get(name):
            continue
        words = split_identifier(name)
        n = len(words)
        if any(case.words[i : i + n] == words for i in range(len(case.words) - n + 1)):
            hits.append((n, name))
    if not hits:
        return None
    longest = max(n for n, _ in hits)
    top = [name for n, name in hits if n == longest]
    if len(top) != 1 or functions[top[0]] != 1 or len(case.words) <= longest:
        return None
    return top[0]


# --- Chinese ------------------------------------------------------------------------------


@cache
def en_to_zh() -> dict[str, str]:
    """English word (stemmed) -> Chinese word. In order of preference: a hand-vocabulary term
    whose English list starts with the word (shorter list, shorter term, file order first); one
    that lists it further on (the hand vocabulary is about code, the dictionary is not); a
    CC-CEDICT entry one of whose glosses is exactly the word (computing senses, then words that
    are part of more compounds, earlier glosses, fewer glosses, shorter words first), since a
    looser match picks senses code never means ("intermediate" -> an egret)."""
    from coderag_retriever.text import zh_vocabulary

    best: dict[str, tuple] = {}

    def offer(word: str, key: tuple) -> None:
        if word not in best or key < best[word]:
            best[word] = key

    for order, (term, english) in enumerate(zh_vocabulary().items()):
        for pos, word in enumerate(english):
            offer(stem(word), (0 if pos == 0 else 1, len(english), len(term), order, term))
    rows = [
        m
        for line in cedict.source().read_text("utf-8").splitlines()
        if (m := cedict._LINE.match(line))
    ]
    exact: list[tuple[str, str, int, int, bool]] = []
    for m in rows:
        if not cedict.MIN_CHARS <= len(m.group(1)) <= cedict.MAX_CHARS:
            continue
        glosses = [g for g in m.group(2).split("/") if g and not cedict.SKIP_GLOSS.search(g)]
        computing = any(cedict.COMPUTING.search(g) for g in glosses)
        for pos, gloss in enumerate(glosses):
            plain = re.sub(r"^to ", "", cedict._PAREN.sub(" ", gloss).strip().lower()).strip()
            if re.fullmatch(r"[a-z]+", plain):
                exact.append((stem(plain), m.group(1), pos, len(glosses), computing))
    # how many headwords contain a word: common words are parts of many compounds (a frequency
    # list the dictionary does not ship), so "standard" becomes 标准, not 本位
    wanted = {zh for _, zh, _, _, _ in exact}
    compounds: Counter[str] = Counter()
    for m in rows:
        head = m.group(1)
        for size in range(cedict.MIN_CHARS, min(len(head), cedict.MAX_CHARS) + 1):
            for i in range(len(head) - size + 1):
                if head[i : i + size] in wanted:
                    compounds[head[i : i + size]] += 1
    for word, zh, pos, n, computing in exact:
        offer(word, (2 if computing else 3, -compounds[zh], pos, n, len(zh), zh))
    return {word: key[-1] for word, key in best.items()}


def is_identifier(token: str) -> bool:
    """Whether a token is written as code: snake_case, camelCase, a qualified name, a call."""
    return bool(_CODE_TOKEN.search(token))


def keeps_latin(token: str, index: int) -> bool:
    """Whether a token stays in Latin letters in a Chinese question: identifiers, acronyms and
    proper nouns (capitalised past the first word: Linux, JSON, Logrus)."""
    return (
        is_identifier(token)
        or (len(token) > 1 and token.isupper())
        or (index > 0 and token[0].isupper())
        or any(ch.isdigit() for ch in token)
    )


def translate(query: str) -> str | None:
    """The query in Chinese, word by word through the dictionary, identifiers kept in Latin
    letters; None unless the retriever's own Chinese->English mapping gets back at least
    ``ZH_MIN_RECOVERED`` of the content words."""
    table = en_to_zh()
    pieces: list[str] = []
    content: list[str] = []
    for index, token in enumerate(_TOKEN.findall(query)):
        if not re.match(r"[A-Za-z_$]", token):
            pieces.append({",": "，", ".": "。", "?": "？", ":": "：", ";": "；"}.get(token, ""))
            continue
        low = token.lower()
        if keeps_latin(token, index):
            pieces.append(f" {token} ")
        elif low in FUNCTION_WORDS:
            pieces.append(FUNCTION_WORDS[low])
        elif low in DROPPED or low in STOP_WORDS:
            continue
        else:
            content.append(stem(low))
            zh = table.get(stem(low)) or table.get(low)
            pieces.append(zh if zh else f" {token} ")
    if not content:
        return None
    text = re.sub(r" +", " ", "".join(pieces)).strip()
    text = re.sub(r" ([，。？：；])", r"\1", text)
    back = {stem(w) for w in zh_terms(text, hand=True, dictionary=True)}
    recovered = sum(w in back for w in content)
    if recovered / len(content) < ZH_MIN_RECOVERED:
        return None
    return text


# --- one code base ------------------------------------------------------------------------


def seeded(name: str, salt: str) -> random.Random:
    """A generator seeded by the code base's name (not by Python's per-process hash seed)."""
    return random.Random(int(hashlib.sha256(f"{name}:{salt}".encode()).hexdigest()[:16], 16))


def question_type(query: str, name: str, source: str) -> str:
    """``lookup`` when the query contains an identifier: one written as code, or the gold
    definition's own name; a test's name always names its function (in words). Else
    ``descriptive``."""
    if source == "test":
        return "lookup"
    tokens = _TOKEN.findall(query)
    return "lookup" if any(is_identifier(t) or t == name for t in tokens) else "descriptive"


def source_files(root: Path) -> list[tuple[str, str]]:
    """(relative path, language) of each parsed-language file under ``root``, sorted."""
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        language = EXTENSIONS.get(path.suffix.lower())
        if path.is_file() and not path.is_symlink() and language and not SKIP_DIRS.search(rel):
            if rel.endswith((".min.js", ".bundle.js")):
                continue
            out.append((rel, language))
    return out


def build(entry: dict) -> dict:
    """Write the blanked copy and the questions of one code base; its figures for the report."""
    name = entry["name"]
    src = corpus_root(name)
    dest = HERE / ".cache" / "src" / f"{name}-nodoc"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, symlinks=True)
    files = source_files(dest)
    lines = 0
    unit_count = 0
    docs: list[dict] = []
    functions: dict[str, list[tuple[str, int]]] = {}
    blanked_text: list[str] = []
    tests: list[tuple[str, Case]] = []
    units_of: dict[str, list] = {}
    for rel, language in files:
        path = dest / rel
        source = path.read_text("utf-8", errors="replace")
        lines += source.count("\n") + (0 if source.endswith("\n") or not source else 1)
        if is_test_path(rel):
            tests += [(rel, case) for case in cases_in(language, source)]
            continue
        mined = mine_file(language, source)
        if mined.text != source:
            path.write_text(mined.text, "utf-8")
        units = parse_source(name, rel, language, mined.text).units
        units_of[rel] = units
        unit_count += len(units)
        blanked_text.append(mined.text)
        for fname, row in mined.functions:
            functions.setdefault(fname, []).append((rel, row))
        for doc in mined.docs:
            span = unit_of(units, doc.name, doc.row)
            if span is not None:
                docs.append({"query": doc.sentence, "file": rel, "span": span, "name": doc.name})
    # a sentence still found anywhere in the blanked copy (a README, a twin overload) would be
    # answered by its own words
    haystack = " ".join(" ".join(blanked_text).lower().split())
    for other in sorted(dest.rglob("*")):
        if other.is_file() and other.suffix.lower() in (".md", ".rst", ".txt"):
            haystack += " " + " ".join(other.read_text("utf-8", "replace").lower().split())
    docs = [q for q in docs if q["query"].lower() not in haystack]
    counts = {fname: len(rows) for fname, rows in functions.items()}
    test_qs: list[dict] = []
    for rel, case in tests:
        target = tested_function(case, counts)
        if target is None:
            continue
        ((trel, row),) = functions[target]
        span = unit_of(units_of[trel], target, row)
        if span is not None:
            test_qs.append(
                {
                    "query": " ".join(case.words),
                    "file": trel,
                    "span": span,
                    "name": target,
                    "test": rel,
                }
            )
    questions = select(name, docs, test_qs)
    records = finish(name, questions)
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / f"{name}.jsonl").open("w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return {
        "name": name,
        "language": entry["language"],
        "version": entry["version"],
        "lines": lines,
        "units": unit_count,
        "by_kind": dict(sorted(Counter(r["source"] for r in records).items())),
        "by_lang": dict(sorted(Counter(r["lang"] for r in records).items())),
        "candidates": {"doc": len(docs), "test": len(test_qs)},
    }


def select(name: str, docs: list[dict], tests: list[dict]) -> list[dict]:
    """Up to ``CAP`` questions, ``TEST_CAP`` of them at most from tests, sampled with a seeded
    generator; a query asked of two different definitions is dropped as ambiguous."""
    golds: dict[str, set] = {}
    for q in docs + tests:
        golds.setdefault(q["query"].lower(), set()).add((q["file"], q["span"]))
    unique: dict[str, dict] = {}
    for kind, pool in (("doc", docs), ("test", tests)):
        for q in pool:
            key = q["query"].lower()
            if len(golds[key]) == 1 and key not in unique:
                unique[key] = {**q, "source": kind}
    pools = {k: [q for q in unique.values() if q["source"] == k] for k in ("doc", "test")}
    test_keep = seeded(name, "test").sample(pools["test"], min(TEST_CAP, len(pools["test"])))
    room = CAP - len(test_keep)
    doc_keep = seeded(name, "doc").sample(pools["doc"], min(room, len(pools["doc"])))
    chosen = doc_keep + test_keep
    chosen.sort(key=lambda q: (q["source"], q["file"], q["span"], q["query"]))
    return chosen


def finish(name: str, questions: list[dict]) -> list[dict]:
    """The question records, about ``ZH_SHARE`` of them in Chinese (chosen by a seeded shuffle
    among those whose translation holds)."""
    order = list(range(len(questions)))
    seeded(name, "zh").shuffle(order)
    want = round(ZH_SHARE * len(questions))
    zh: dict[int, str] = {}
    for i in order:
        if len(zh) >= want:
            break
        text = translate(questions[i]["query"])
        if text:
            zh[i] = text
    records = []
    for i, q in enumerate(questions, 1):
        query = zh.get(i - 1, q["query"])
        records.append(
            {
                "id": f"{name}-{q['source']}-{i:03d}",
                "lang": "zh" if i - 1 in zh else "en",
                "type": question_type(q["query"], q["name"], q["source"]),
                "query": query,
                "gold": [{"file": q["file"], "start_line": q["span"][0], "end_line": q["span"][1]}],
                "source": q["source"],
            }
        )
    return records


def main(argv: list[str]) -> int:
    """Mine the named code bases of ``bench/mining.json`` (``--all``: every one)."""
    entries = {e["name"]: e for e in load_mining()}
    names = sorted(entries) if argv == ["--all"] else argv
    if not names:
        raise SystemExit("usage: mine.py NAME ... | --all")
    for n in names:
        if n not in entries:
            raise SystemExit(f"{n} is not in bench/mining.json")
    for n in names:
        r = build(entries[n])
        print(
            f"{r['name']} ({r['language']} {r['version']}): {r['lines']} lines, "
            f"{r['units']} units; "
            f"questions by kind {r['by_kind']}, by language {r['by_lang']} "
            f"(candidates {r['candidates']})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
