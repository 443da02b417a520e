"""Unit tests of the gold-range rules the benchmark checker applies to TypeScript, Java, Rust."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import check_questions, gold_syntax


@pytest.mark.parametrize(
    ("language", "line", "expected"),
    [
        ("typescript", "export function hashKey(queryKey: QueryKey): string {", True),
        ("typescript", "export const isServer = typeof window === 'undefined'", True),
        ("typescript", "const noop = () => {}", True),
        ("typescript", "  async fetch(options?: FetchOptions): Promise<TData> {", True),
        ("typescript", "  #dispatch(action: Action): void {", True),
        ("typescript", "  defaultQueryOptions<", True),
        ("typescript", "export interface QueryState<TData> {", True),
        ("typescript", "if (value) {", False),
        ("typescript", "return fetchFn(context)", False),
        ("typescript", "const plain = 3", False),
        ("java", "public static synchronized JPypeContext getInstance()", True),
        ("java", "private JPypeClassLoader(ClassLoader parent)", True),
        ("java", "public class TypeManager", True),
        ("java", "public static <T extends Executable>", True),
        ("java", "return new TypeManager(context);", False),
        ("java", "throw new RuntimeException(msg);", False),
        ("rust", "pub fn from_str<T>(s: &'a str) -> Result<T, Error>", True),
        ("rust", "impl<'a> Deserializer<'a> {", True),
        ("rust", "pub(crate) const fn new() -> Self {", True),
        ("rust", "macro_rules! toml {", True),
        ("rust", "let x = 3;", False),
    ],
)
def test_starts_definition(language: str, line: str, expected: bool) -> None:
    """Definition heads are recognised and statements are not."""
    assert gold_syntax.starts_definition(language, line) is expected


def test_rust_lifetimes_and_char_literals_do_not_hide_brackets() -> None:
    """A lifetime is not a quote; a '{' char literal is not a bracket."""
    text = "fn f<'a>(s: &'a str) -> char {\n    let c = '{';\n    c\n}"
    assert gold_syntax.bracket_depths(text, "rust") == (0, 0)


def test_ts_template_literal_brackets_are_skipped() -> None:
    """Brackets inside a template literal (outside ${}) do not count."""
    text = "function f(x) {\n  return `{${x.map((y) => `[${y}`)}`\n}"
    assert gold_syntax.bracket_depths(text, "typescript") == (0, 0)


def test_range_closing_below_its_start_is_reported() -> None:
    """A range that starts inside one body and ends in the next dips below zero."""
    text = "  }\n  bar() {\n"
    net, low = gold_syntax.bracket_depths(text, "typescript")
    assert (net, low) == (0, -1)


def test_attributes_are_skipped_before_the_definition() -> None:
    """Rust attributes and Java annotations sit before the definition line."""
    rust = ["#[derive(", "    Debug, Clone", ")]", "pub struct Value {", "}"]
    assert gold_syntax.skip_attributes("rust", rust, 1, 5) == 4
    java = ['@SuppressWarnings("unchecked")', "@Override", "public int size()", "{", "}"]
    assert gold_syntax.skip_attributes("java", java, 1, 5) == 3


def test_checker_reports_a_range_cut_inside_a_body(tmp_path: Path) -> None:
    """check_questions accepts a whole method and rejects one cut before its closing brace."""
    source = "class A {\n  run(x: number): number {\n    return x\n  }\n}\n"
    (tmp_path / "a.ts").write_text(source, encoding="utf-8")
    checker = check_questions.Checker(fetch_sources=False)
    checker.check_gold("whole", {"file": "a.ts", "start_line": 2, "end_line": 4}, tmp_path)
    assert checker.errors == []
    checker.check_gold("cut", {"file": "a.ts", "start_line": 2, "end_line": 3}, tmp_path)
    checker.check_gold("stmt", {"file": "a.ts", "start_line": 3, "end_line": 3}, tmp_path)
    assert [e.split(":")[0] for e in checker.errors] == ["cut", "stmt"]
