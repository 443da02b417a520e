"""Units line up with what a reader calls "the definition": doc comment to end, one per name."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from coderag.schemas import Unit
from coderag_parser.languages import language_of
from coderag_parser.parsed import ParsedFile
from coderag_parser.units import extract_units, parse_source

FIXTURES = Path(__file__).parent / "fixtures"


def _parse(lang_dir: str, name: str) -> ParsedFile:
    src = (FIXTURES / lang_dir / name).read_text()
    return parse_source("r", name, language_of(name) or "", src)


def _one(units: list[Unit], symbol: str) -> Unit:
    found = [u for u in units if u.symbol == symbol]
    assert len(found) == 1, f"{symbol}: {[(u.kind, u.start_line) for u in found]}"
    return found[0]


def test_typescript_overloads_merge_into_their_implementation() -> None:
    units = _parse("typescript", "sample.ts").units
    parse_id = _one(units, "parseId")
    assert (parse_id.kind, parse_id.start_line, parse_id.end_line) == ("function", 34, 39)
    assert parse_id.doc == "Parses an id from text or a number."
    assert parse_id.signature == "function parseId(v: string | number): UserId"
    evict = _one(units, "Cache.evict")
    assert (evict.kind, evict.start_line, evict.end_line) == ("method", 55, 61)
    assert evict.doc == "Drops one item, or every item."
    track = _one(units, "track")  # an ambient declaration alone is its own definition
    assert (track.kind, track.start_line) == ("function", 41)


def test_typescript_class_members_accessors_and_arrow_consts() -> None:
    units = _parse("typescript", "sample.ts").units
    size = [u for u in units if u.symbol == "Cache.size"]
    assert [u.signature.split()[0] for u in size] == ["get", "set"]
    assert size[0].doc == "Number of cached items." and size[0].start_line == 46
    on_load = _one(units, "Cache.onLoad")
    assert (on_load.kind, on_load.doc) == ("method", "Called when an item is loaded.")
    assert _one(units, "Cache.load").signature == "abstract load(key: string): Promise<T>"
    assert _one(units, "Cache.[Symbol.iterator]").kind == "method"
    fmt = _one(units, "formatUser")
    assert (fmt.kind, fmt.start_line, fmt.doc) == ("function", 31, "Formats a user for display.")
    header = _one(units, "Cache")
    assert "private items" in header.text and header.end_line == 45
    cleared = _one(units, "Cache.clearedAt")  # a documented field between methods
    assert (cleared.kind, cleared.start_line, cleared.end_line) == ("variable", 63, 64)


def test_exported_documented_or_long_constants_are_units_others_stay_in_blocks() -> None:
    go = _parse("go", "sample.go")
    err = _one(go.units, "ErrInvalid")
    assert err.kind == "variable"
    assert err.doc == "ErrInvalid is returned for a request without a user."
    group = _one(go.units, "ErrClosed")  # a parenthesised group is one unit of all its specs
    assert (group.start_line, group.end_line) == (29, 33) and "ErrBusy" in group.text
    assert _one(go.units, "retries").kind == "block"  # lower case: not exported
    names = Counter(s["name"] for s in go.symbols)
    assert names["ErrClosed"] == names["ErrBusy"] == names["ErrInvalid"] == 1
    ts = _parse("typescript", "sample.ts").units
    assert (_one(ts, "PAGE_SIZE").kind, _one(ts, "PAGE_SIZE").doc) == (
        "constant",
        "Default page size.",
    )
    assert _one(ts, "retries").kind == "variable"  # exported: a unit even on one line
    assert _one(ts, "attempts").kind == "block"  # neither exported, documented nor long
    assert _one(_parse("rust", "sample.rs").units, "MAX_AMOUNT").kind == "constant"  # `pub`
    fees = _one(_parse("rust", "sample.rs").units, "FEES")
    assert (fees.kind, fees.start_line, fees.end_line) == ("constant", 46, 49)


def test_go_type_groups_receivers_and_doc_comments() -> None:
    units = _parse("go", "sample.go").units
    req, db = _one(units, "OrderRequest"), _one(units, "DB")
    assert (req.kind, req.start_line) == ("type", 40)
    assert req.doc == "OrderRequest is what a client sends."
    assert (db.kind, db.start_line, db.doc) == ("interface", 45, "DB stores orders.")
    assert not any(u.text.strip() == "type (" for u in units)
    add = _one(units, "Set.Add")  # a generic value receiver names the bare type
    assert (add.kind, add.doc) == ("method", "Add puts v in the set.")
    src = "package p\n\n// Section: helpers\n\nfunc helper() {}\n"
    helper = _one(extract_units("r", "h.go", "go", src), "helper")
    assert (helper.start_line, helper.doc) == (5, "")  # a plain comment a blank line up is not doc


def test_doc_comment_a_blank_line_above_still_belongs() -> None:
    units = _parse("java", "Sample.java").units
    line = _one(units, "Line")
    assert (line.kind, line.start_line, line.doc) == ("class", 25, "A priced line of an order.")
    assert _one(units, "Line.total").doc == "Total price in cents."


def test_interface_trait_and_abstract_methods_macros_and_fields() -> None:
    java = _parse("java", "Sample.java").units
    assert _one(java, "Repo.save").signature == "Order save(Order o) throws IOException"
    check = _one(java, "BaseService.check")
    assert (check.kind, check.doc) == ("method", "Checks one order.")
    assert _one(java, "BaseService.MAX_AMOUNT").doc == "Largest order amount."
    assert _one(java, "BaseService.seen").kind == "variable"
    assert _one(java, "BaseService").end_line == 39  # the header stops before the nested class
    rust = _parse("rust", "sample.rs").units
    assert (_one(rust, "Ledger.record").kind, _one(rust, "Ledger.record").start_line) == (
        "method",
        14,
    )
    fail = _one(rust, "fail")
    assert (fail.start_line, fail.end_line) == (38, 44)
    assert fail.doc == "Fails the current function with a ledger error."
    error = _one(rust, "LedgerError")
    assert (error.kind, error.doc) == ("type", "Why a payment could not be recorded.")


def test_symbol_rows_name_each_definition_once_with_its_kind() -> None:
    java = Counter((s["name"], s["kind"]) for s in _parse("java", "Sample.java").symbols)
    assert java[("MAX_AMOUNT", "constant")] == 1 and ("MAX_AMOUNT", "variable") not in java
    assert java[("Counter", "class")] == 1 and java[("seen", "variable")] == 1
    ts = Counter((s["name"], s["kind"]) for s in _parse("typescript", "sample.ts").symbols)
    assert ts[("onLoad", "method")] == 1 and ("onLoad", "variable") not in ts
    assert ts[("parseId", "function")] == 1


def test_javascript_class_fields_holding_functions_and_computed_names() -> None:
    units = _parse("javascript", "sample.js").units
    add = _one(units, "Cart.add")
    assert (add.kind, add.start_line, add.end_line, add.doc) == ("method", 21, 24, "Adds an item.")
    assert (_one(units, "Cart.items").kind, _one(units, "Cart.items").doc) == (
        "variable",
        "Items in the cart.",
    )
    assert _one(units, "Cart.[Symbol.iterator]").kind == "method"


def test_exported_fields_above_the_first_method_are_members_not_header() -> None:
    units = _parse("java", "Sample.java").units
    assert (_one(units, "Limits").start_line, _one(units, "Limits").end_line) == (56, 57)
    field = _one(units, "Limits.MAX_LINES")
    assert (field.kind, field.start_line, field.doc) == ("constant", 58, "Most lines in one order.")
    assert "private final Repo repo;" in _one(units, "OrderService").text  # plain fields stay


def test_a_class_doc_longer_than_a_split_leaves_the_header_small() -> None:
    doc = "/**\n" + "".join(f" * Line {i} of a long class comment.\n" for i in range(600)) + " */\n"
    src = doc + "public class Big {\n    int size() { return 0; }\n}\n"
    units = extract_units("r", "Big.java", "java", src)
    big = _one(units, "Big")
    assert (big.start_line, big.end_line) == (603, 603)
    assert big.doc.startswith("Line 0 of a long class comment.")
    assert all(u.end_line - u.start_line < 510 for u in units)


def test_export_is_read_from_the_declaration_not_its_value() -> None:
    src = 'class A {\n    void f() {}\n\n    private static final String MODE = "public";\n}\n'
    units = extract_units("r", "A.java", "java", src)
    assert not any(u.symbol == "A.MODE" for u in units)
    assert any(u.kind == "block" and "MODE" in u.text for u in units)
