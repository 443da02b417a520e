"""Unit tests of the question miner's pure logic (``bench/mine.py``) on small inline sources."""

from __future__ import annotations

import pytest

from bench import mine, mined_docs, mined_tests, mined_zh
from coderag_parser.units import parse_source

PYTHON = '''import functools


@functools.cache
def parse_header(value):
    """Split a header value into its parameters and their values.

    More words that must go as well.
    """
    return value.split(";")


class Reader:
    """Reads frames from a socket until the peer closes it."""

    def close(self):
        return None
'''

GO = """package cron

// ParseDuration reads a duration string such as 1h30m into seconds.
// It accepts the units h, m and s.
func ParseDuration(s string) int {
	return len(s)
}

// Entry holds one scheduled job and its next run time.
type Entry struct {
	Next int
}
"""

RUST = """/// Creates a fresh cell holding no value yet.
#[inline]
pub fn empty_cell() -> Cell {
    Cell { inner: None }
}

#[derive(Debug)]
/// A cell that can be written to only once.
pub struct Cell {
    inner: Option<u8>,
}
"""

JAVA = """package org.example;

public class Store {
    /**
     * Opens the backing file and maps it into memory for reading.
     * @param path the file
     */
    @Override
    public void open(String path) {
        load(path);
    }
}
"""

TYPESCRIPT = """/**
 * Removes every listener attached to the given event name.
 */
export function removeListeners(name: string): void {
  registry.delete(name)
}
"""


PATHS = {"python": "a.py", "go": "a.go", "rust": "a.rs", "java": "A.java", "typescript": "a.ts"}
"""A file name of each language, for the parser."""


def mined(language: str, source: str) -> mined_docs.FileMined:
    """The miner's result for one inline file."""
    return mined_docs.mine_file(language, source)


@pytest.mark.parametrize(
    ("language", "source", "gone"),
    [
        ("python", PYTHON, ["Split a header", "More words", "Reads frames"]),
        ("go", GO, ["reads a duration", "accepts the units", "holds one scheduled"]),
        ("rust", RUST, ["Creates a fresh", "written to only once"]),
        ("java", JAVA, ["Opens the backing", "@param"]),
        ("typescript", TYPESCRIPT, ["Removes every listener"]),
    ],
)
def test_blanking_keeps_line_numbers_and_code(language: str, source: str, gone: list[str]) -> None:
    out = mined(language, source)
    before, after = source.split("\n"), out.text.split("\n")
    assert len(after) == len(before)
    for words in gone:
        assert words not in out.text
    for old, new in zip(before, after, strict=True):
        # every line is either kept as it was or blanked (Python's docstring: an empty literal)
        assert new == old or new.strip() in ("", '""')


def test_python_docstring_becomes_an_empty_literal_that_still_parses() -> None:
    out = mined("python", PYTHON)
    lines = out.text.split("\n")
    assert lines[5] == '    ""' and lines[6:9] == ["", "", ""]
    compile(out.text, "x.py", "exec")


def gold(language: str, source: str, name: str) -> tuple[int, int] | None:
    """The gold range the miner gives the definition ``name`` of an inline file."""
    out = mined(language, source)
    units = parse_source("r", PATHS[language], language, out.text).units
    doc = next(d for d in out.docs if d.name == name)
    return mined_docs.unit_of(units, doc.name, doc.row)


def unit_lines(language: str, text: str, symbol: str) -> tuple[int, int]:
    """The lines of the unit the parser makes of ``symbol`` in ``text``."""
    unit = next(
        u for u in parse_source("r", PATHS[language], language, text).units if u.symbol == symbol
    )
    return unit.start_line, unit.end_line


def test_gold_is_the_units_lines_in_the_blanked_copy() -> None:
    py = mined("python", PYTHON).text
    # the decorator belongs to the unit; the blanked docstring does not shift anything
    assert gold("python", PYTHON, "parse_header") == unit_lines("python", py, "parse_header")
    assert gold("python", PYTHON, "parse_header") == (4, 10)
    assert gold("python", PYTHON, "Reader") == unit_lines("python", py, "Reader")
    go = mined("go", GO).text
    assert gold("go", GO, "ParseDuration") == unit_lines("go", go, "ParseDuration") == (5, 7)
    assert gold("go", GO, "Entry") == unit_lines("go", go, "Entry")
    rust = mined("rust", RUST).text
    # the attribute stays with the function once the doc above it is blank
    assert gold("rust", RUST, "empty_cell") == unit_lines("rust", rust, "empty_cell") == (2, 5)
    java = mined("java", JAVA).text
    assert gold("java", JAVA, "open") == unit_lines("java", java, "Store.open")
    assert gold("java", JAVA, "open")[0] == 8  # the annotation's line
    ts = mined("typescript", TYPESCRIPT).text
    assert gold("typescript", TYPESCRIPT, "removeListeners") == unit_lines(
        "typescript", ts, "removeListeners"
    )


def test_first_sentences_become_questions_without_the_leading_name() -> None:
    queries = {d.name: d.sentence for d in mined("go", GO).docs}
    assert queries["ParseDuration"] == "Reads a duration string such as 1h30m into seconds."
    assert mined("python", PYTHON).docs[0].sentence == (
        "Split a header value into its parameters and their values."
    )
    java = {d.name: d.sentence for d in mined("java", JAVA).docs}
    assert java["open"] == "Opens the backing file and maps it into memory for reading."


@pytest.mark.parametrize(
    ("sentence", "name", "kept"),
    [
        ("Returns the foo value for a key.", "foo", True),
        ("Foo.", "Foo", False),
        ("Foo is a Foo.", "Foo", False),
        ("New creates a new Foo.", "NewFoo", False),
        ("See the package documentation for details.", "x", False),
        ("Deprecated: use Other instead of this one.", "x", False),
        ("TODO make this faster one day soon.", "x", False),
        ("Licensed under the Apache License, Version 2.0.", "x", False),
        ("Copyright 2020 The Authors, all rights kept.", "x", False),
        ("if (a) { b(); } else { c(); } return d;", "x", False),
    ],
)
def test_sentence_filters(sentence: str, name: str, kept: bool) -> None:
    assert (mined_docs.keep_sentence(sentence, name) is not None) == kept


def test_doc_markup_is_reduced_to_its_text() -> None:
    raw = "/**\n * Returns the {@code Foo} for {@link Bar#baz} keys.\n * @return it\n */"
    assert mined_docs.clean_doc(raw) == "Returns the Foo for Bar#baz keys."
    assert mined_docs.clean_doc("/// Like [`set`](Self::set), but returns `x`.") == (
        "Like set, but returns x."
    )


@pytest.mark.parametrize(
    ("test_name", "words"),
    [
        ("test_parse_header_with_quotes", ["parse", "header", "with", "quotes"]),
        ("TestParseDuration", ["parse", "duration"]),
        ("TestDial_BadScheme", ["dial", "bad", "scheme"]),
        ("testOpenFileTwice", ["open", "file", "twice"]),
    ],
)
def test_test_names_become_words(test_name: str, words: list[str]) -> None:
    assert mined_tests.words_of_test(test_name) == words


def test_tested_function_is_the_one_named_and_called() -> None:
    functions = {"parse_header": 1, "parse": 1, "AddHook": 1, "Add": 1, "Dial": 3, "quote": 1}
    case = mined_tests.Case(
        ["parse", "header", "with", "quotes"], {"parse_header", "parse", "strip"}
    )
    assert mined_tests.tested_function(case, functions) == "parse_header"  # the longest name wins
    case = mined_tests.Case(["add", "hook", "race"], {"AddHook", "Add"})
    assert mined_tests.tested_function(case, functions) == "AddHook"
    # several definitions share the name: ambiguous
    assert (
        mined_tests.tested_function(mined_tests.Case(["dial", "timeout"], {"Dial"}), functions)
        is None
    )
    # the test's name says nothing beyond the function's name
    assert (
        mined_tests.tested_function(
            mined_tests.Case(["parse", "header"], {"parse_header"}), functions
        )
        is None
    )
    # called, but not named by the test
    assert (
        mined_tests.tested_function(mined_tests.Case(["split", "values"], {"quote"}), functions)
        is None
    )


def test_tests_are_found_with_the_names_they_call() -> None:
    py = "def test_parse_header_quotes():\n    assert parse_header('a') == helper.strip('a')\n"
    (case,) = mined_tests.cases_in("python", py)
    assert case.words == ["parse", "header", "quotes"] and case.calls == {"parse_header", "strip"}
    go = 'package x\n\nfunc TestParseDuration(t *testing.T) {\n\td := ParseDuration("1h")\n}\n'
    (case,) = mined_tests.cases_in("go", go)
    assert case.words == ["parse", "duration"] and "ParseDuration" in case.calls
    rust = '#[test]\nfn parse_empty_string() {\n    let v = Version::parse("");\n}\n'
    (case,) = mined_tests.cases_in("rust", rust)
    assert case.words == ["parse", "empty", "string"] and "parse" in case.calls
    js = "describe('x', () => {\n  it('removes listeners on close', () => removeListeners())\n})"
    (case,) = mined_tests.cases_in("javascript", js)
    assert case.words == ["removes", "listeners", "on", "close"]
    assert "removeListeners" in case.calls


def test_chinese_keeps_identifiers_and_needs_most_words_back() -> None:
    zh = mined_zh.translate("Returns the error message for a request timeout in parse_header.")
    assert zh is not None
    assert "parse_header" in zh
    assert all(not ("a" <= ch <= "z") for ch in zh.replace("parse_header", ""))
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh)
    # words the dictionaries lack stay English: too few content words come back
    assert mined_zh.translate("Frobnicates the quuxes of wibbly zorblax.") is None
    assert mined_zh.translate("parse_header of getValue") is None  # no content word to translate


def test_question_type() -> None:
    assert mine.question_type("Opens the backing file.", "open", "doc") == "descriptive"
    assert mine.question_type("Calls parse_header on each value.", "x", "doc") == "lookup"
    assert mine.question_type("Sends a ping to the peer.", "ping", "doc") == "lookup"
    assert mine.question_type("parse header with quotes", "parse_header", "test") == "lookup"


def test_selection_is_capped_deterministic_and_drops_ambiguous_queries() -> None:
    docs = [
        {"query": f"Question number {i} about code.", "file": "a.py", "span": (i, i), "name": "f"}
        for i in range(300)
    ]
    docs.append({"query": "Question number 1 about code.", "file": "b.py", "span": (1, 2)})
    tests = [{"query": f"t {i}", "file": "a.py", "span": (i, i), "name": "f"} for i in range(80)]
    first = mine.select("demo", docs, tests)
    assert first == mine.select("demo", docs, tests)
    assert len(first) == mine.CAP
    assert sum(q["source"] == "test" for q in first) == mine.TEST_CAP
    assert all(q["query"] != "Question number 1 about code." for q in first)
    assert mine.finish("demo", first) == mine.finish("demo", first)
