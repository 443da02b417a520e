"""Tests of mined code bases (``bench/mine.py``): each test's name as words and the names it
calls, and the one function of the code base it can be said to test."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from bench.mined_docs import iter_nodes
from bench.mined_zh import WORD
from coderag_parser.languages import parser
from coderag_retriever.text import split_identifier

TEST_PREFIX = re.compile(r"^(?:test_?|Test_?)", re.ASCII)
"""How test functions are named in Python, Go, Java and Rust."""

JS_TEST_CALLS = frozenset({"it", "test"})
"""JavaScript/TypeScript test runners' test functions (``it("...")``, ``test("...")``)."""

CALL_NODES = frozenset({"call", "call_expression", "method_invocation", "new_expression"})
"""Tree-sitter node types of a call in the parsed languages."""


@dataclass
class Case:
    """A test: its name as words, and the names it calls."""

    words: list[str]
    calls: set[str]


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
            words = [w.lower() for w in WORD.findall(title)]
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
