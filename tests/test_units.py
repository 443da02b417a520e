"""Parser units against the per-language fixtures (a language is a query file plus a fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coderag_parser.definitions import CONTAINERS
from coderag_parser.languages import EXTENSIONS, GRAMMARS, language_of, load_query
from coderag_parser.units import PART_LINES, SPLIT_LINES, extract_units, is_test_path

FIXTURES = Path(__file__).parent / "fixtures"
CASES = sorted(p for p in FIXTURES.iterdir() if (p / "expected.json").exists())


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_fixture_units(case: Path) -> None:
    src = next(p for p in case.iterdir() if p.name != "expected.json")
    lang = language_of(src.name)
    units = extract_units("r", src.name, lang, src.read_text())
    got = [
        {"symbol": u.symbol, "kind": u.kind, "start_line": u.start_line, "end_line": u.end_line}
        for u in units
    ]
    assert got == json.loads((case / "expected.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_units_never_overlap_and_quote_their_lines(case: Path) -> None:
    src = next(p for p in case.iterdir() if p.name != "expected.json")
    text = src.read_text()
    lines = text.splitlines()
    units = extract_units("r", src.name, language_of(src.name), text)
    covered: set[int] = set()
    for u in units:
        span = set(range(u.start_line, u.end_line + 1))
        assert not covered & span, f"{u.symbol} overlaps another unit"
        covered |= span
        quoted = "\n".join(lines[u.start_line - 1 : u.end_line])
        if u.kind in CONTAINERS | {"file"}:  # code plus a summary
            assert u.text.startswith(quoted)
        else:
            assert u.text == quoted


def test_every_grammar_has_a_query_and_extension() -> None:
    for lang in GRAMMARS:
        assert load_query(lang).pattern_count > 0
        assert lang in EXTENSIONS.values()


def test_docstrings_signatures_and_comments() -> None:
    src = (FIXTURES / "python" / "sample.py").read_text()
    create = next(
        u for u in extract_units("r", "a.py", "python", src) if u.symbol.endswith("create")
    )
    assert create.doc == "Create an order."
    assert create.signature == "def create(user_id, items)"
    go = (FIXTURES / "go" / "sample.go").read_text()
    proc = next(u for u in extract_units("r", "a.go", "go", go) if "ProcessOrder" in u.symbol)
    assert proc.doc == "ProcessOrder validates and stores an order."
    assert proc.signature.startswith("func (s *Service) ProcessOrder(ctx context.Context")


def test_long_functions_are_split_short_ones_never() -> None:
    body = "\n".join(
        f"    x{i} = {i}" + ("\n" if i % 40 == 0 else "") for i in range(SPLIT_LINES + 100)
    )
    src = f"def big():\n{body}\n    return x1\n\ndef small():\n    return 1\n"
    units = extract_units("r", "a.py", "python", src)
    parts = [u for u in units if u.symbol.startswith("big")]
    assert len(parts) >= 2
    assert all(u.end_line - u.start_line + 1 <= PART_LINES + PART_LINES // 4 for u in parts)
    assert parts[0].start_line == 1 and parts[-1].end_line == max(u.end_line for u in parts)
    assert [u.symbol for u in units if u.symbol == "small"] == ["small"]


def test_unparseable_and_unknown_files_fall_back_to_blocks() -> None:
    text = "alpha beta\ngamma\n\n\ndelta epsilon\n"
    units = extract_units("r", "notes.md", "markdown", text)
    assert [(u.kind, u.start_line, u.end_line) for u in units] == [("block", 1, 5)]
    broken = "def (((\n  oops\n\nclass\n"
    assert all(u.kind == "block" for u in extract_units("r", "b.py", "python", broken))


def test_test_paths() -> None:
    assert is_test_path("tests/test_x.py") and is_test_path("pkg/x_test.go")
    assert is_test_path("web/a.spec.ts") and not is_test_path("src/contest.py")


def test_blocks_never_swallow_a_unit_between_them() -> None:
    units = extract_units("r", "m.py", "python", "xx = 1\ndef f(): return 1\nyy = 2\n")
    spans = [(u.kind, u.start_line, u.end_line) for u in units]
    assert ("function", 2, 2) in spans
    assert all(not (s <= 2 <= e) for k, s, e in spans if k != "function")
