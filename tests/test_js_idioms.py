"""JavaScript and TypeScript idioms are units named as a reader names them (issue 42).

The fixtures under ``tests/fixtures/js_*``, ``jsx`` and ``ts_*`` are also checked unit by unit
against their ``expected.json`` by ``test_units.py``; these tests pin what each idiom means to a
reader: the name, the kind, the doc comment, the symbol row, and that nothing overlaps."""

from __future__ import annotations

from pathlib import Path

from coderag.schemas import Unit
from coderag_parser.languages import language_of
from coderag_parser.parsed import ParsedFile
from coderag_parser.units import PART_LINES, SPLIT_LINES, extract_units, parse_source

FIXTURES = Path(__file__).parent / "fixtures"


def _parse(case: str) -> ParsedFile:
    src = next(p for p in (FIXTURES / case).iterdir() if p.name != "expected.json")
    return parse_source("r", src.name, language_of(src.name) or "", src.read_text())


def _one(units: list[Unit], symbol: str) -> Unit:
    found = [u for u in units if u.symbol == symbol]
    assert len(found) == 1, f"{symbol}: {[(u.symbol, u.kind, u.start_line) for u in units]}"
    return found[0]


def _qualified(parsed: ParsedFile) -> dict[str, str]:
    return {row["qualified"]: row["kind"] for row in parsed.symbols}


def test_prototype_methods_are_methods_of_their_type() -> None:
    parsed = _parse("js_prototype")
    save = _one(parsed.units, "Model.save")
    assert (save.kind, save.start_line, save.end_line) == ("method", 12, 17)
    assert save.doc == "Saves the document."
    assert save.signature == "Model.prototype.save = function save(options, fn)"
    assert _one(parsed.units, "Model.validate").kind == "method"  # an arrow function
    assert _one(parsed.units, "Model.persist").doc == "An alias kept for old callers."
    assert _one(parsed.units, "Model.store").kind == "method"  # X.prototype.a = X.prototype.b = f
    bulk = _one(parsed.units, "Model.bulkSave")  # a static assignment
    assert (bulk.kind, bulk.doc) == ("function", "Saves many documents at once.")
    is_new = _one(parsed.units, "Model.isNew")  # Object.defineProperty(X.prototype, 'isNew')
    assert (is_new.kind, is_new.start_line, is_new.end_line) == ("method", 33, 37)
    # `Query.prototype = { orFail() {}, exec: function () {} }`: Query's methods
    assert _one(parsed.units, "Query.orFail").doc == "Fails when nothing matches."
    assert _one(parsed.units, "Query.exec").kind == "method"
    symbols = _qualified(parsed)
    assert symbols["Model.save"] == "method" and symbols["Query.orFail"] == "method"


def test_this_in_a_prototype_method_is_its_type() -> None:
    parsed = _parse("js_prototype")
    save = _one(parsed.units, "Model.save")
    calls = [c for c in parsed.calls if c["caller"] == save.id and c["callee"] == "validate"]
    assert [(c["receiver"], c["receiver_type"]) for c in calls] == [("this", "Model")]


def test_commonjs_exports_are_named_by_what_they_export() -> None:
    units = _parse("js_commonjs").units
    canon = _one(units, "canonicalize")  # exports.canonicalize = function canonicalize
    assert (canon.kind, canon.doc) == ("function", "Turns a value into a canonical string.")
    assert _one(units, "cwd").kind == "function"  # exports.cwd = () => ...
    assert _one(units, "isPath").kind == "function"  # module.exports.isPath = function
    assert _one(units, "Timer").kind == "class"  # exports.Timer = class Timer
    assert _one(units, "Timer.start").kind == "method"
    assert not [u for u in units if "__esModule" in u.symbol]  # a descriptor of no code
    server = _parse("js_export_function").units
    create = _one(server, "createServer")  # module.exports = function createServer
    assert (create.kind, create.start_line, create.doc) == ("function", 5, "Creates the server.")
    assert _one(server, "listen").kind == "function"


def test_module_exports_object_members_stand_alone() -> None:
    units = _parse("js_module_object").units
    connect = _one(units, "connect")
    assert (connect.kind, connect.doc) == ("method", "Connects to the server.")
    assert {u.symbol for u in units if u.kind == "method"} == {"connect", "close", "retry"}
    assert not [u for u in units if u.symbol.startswith("module.")]


def test_object_literal_methods_are_members_of_the_object() -> None:
    parsed = _parse("js_object_literal")
    push = _one(parsed.units, "methods.push")
    assert (push.kind, push.doc, push.start_line) == ("method", "Appends values.", 7)
    assert _one(parsed.units, "methods.toString").kind == "method"  # key: function () {}
    assert _one(parsed.units, "methods.nested.deep").kind == "method"
    assert _one(parsed.units, "handlers.onOpen").kind == "method"  # key: () => ...
    assert _one(parsed.units, "handlers.on-close").kind == "method"  # 'on-close'() {}
    head = _one(parsed.units, "methods")
    assert head.kind == "object" and "push(...values)" in head.text  # its member summary
    assert _qualified(parsed)["methods.pop"] == "method"


def test_definitions_inside_an_iife_stay_units() -> None:
    units = _parse("js_iife").units
    legacy = [u for u in units if u.symbol.startswith("Legacy") and "." not in u.symbol]
    assert [(u.symbol, u.kind, u.start_line, u.end_line) for u in legacy] == [
        ("Legacy[part 1]", "variable", 1, 3),  # `var Legacy = (function () {` ...
        ("Legacy", "function", 5, 8),
        ("Legacy[part 2]", "variable", 18, 19),  # ... `return Legacy;` around its definitions
    ]
    assert _one(units, "Legacy.run").kind == "method"
    assert _one(units, "helper").kind == "function"
    assert _one(units, "attach").kind == "function"  # `(function (root) {...})(this)`
    assert _one(units, "host").kind == "function"  # defineGetter(..., function host() {})
    # `var baseCreate = (function () { function object() {} return function (proto) {...} }())`
    create = [u for u in units if u.symbol.startswith("baseCreate")]
    assert [(u.kind, u.start_line, u.end_line) for u in create] == [
        ("variable", 33, 34),
        ("variable", 36, 40),
    ]
    assert create[0].doc == "Creates an object with the given prototype."
    assert _one(units, "object").kind == "function"
    get_tag = [u for u in units if u.symbol == "getTag" and u.kind == "function"]
    assert [u.start_line for u in get_tag] == [45]  # `getTag = function (value) {...}`


def test_class_static_blocks_and_jsx() -> None:
    static = _one(_parse("js_static_block").units, "Registry.static")
    assert (static.kind, static.start_line, static.end_line) == ("method", 4, 7)
    units = _parse("jsx").units
    assert _one(units, "Button").kind == "function"
    assert _one(units, "Toolbar.render").kind == "method"
    assert _one(units, "Toolbar.reset").kind == "method"
    assert _one(units, "styles.active").kind == "method"


def test_typescript_namespaces_hold_functions_not_methods() -> None:
    parsed = _parse("ts_namespace")
    is_string = _one(parsed.units, "Validation.isString")
    assert (is_string.kind, is_string.doc) == ("function", "Checks a string.")
    assert _one(parsed.units, "Validation").kind == "namespace"
    assert _one(parsed.units, "Validation.Numbers.isInteger").kind == "function"
    assert _one(parsed.units, "Internal.log").kind == "function"
    assert _qualified(parsed)["Validation.Numbers.isInteger"] == "function"


def test_typescript_declare_module_and_interface_members() -> None:
    units = _parse("ts_declare_module").units
    assert _one(units, "express-serve-static-core").kind == "namespace"
    login = _one(units, "express-serve-static-core.Request.login")  # two signatures, one unit
    assert (login.kind, login.start_line, login.end_line) == ("method", 7, 9)
    assert login.doc == "Logs a user in."
    assert _one(units, "express-serve-static-core.json").kind == "function"
    assert _one(units, "Express.session").kind == "function"  # declare namespace


def test_typescript_overloads_are_one_unit_with_their_implementation() -> None:
    units = _parse("ts_overloads").units
    parse_id = _one(units, "parseId")
    assert (parse_id.kind, parse_id.start_line, parse_id.end_line) == ("function", 3, 9)
    assert parse_id.doc == "Parses an id from text."
    assert parse_id.signature == "function parseId(v: string | number): Id"
    get = _one(units, "Store.get")
    assert (get.kind, get.start_line, get.end_line) == ("method", 12, 17)
    track = _one(units, "track")  # declarations alone: one unit of them all
    assert (track.start_line, track.end_line) == (20, 21)


def test_typescript_abstract_members() -> None:
    units = _parse("ts_abstract").units
    area = _one(units, "Shape.area")
    assert (area.kind, area.doc, area.signature) == (
        "method",
        "Area of the shape.",
        "abstract area(): number",
    )
    assert _one(units, "Shape.scale").signature == "abstract scale(by: number): Shape"
    assert _one(units, "Square.area").kind == "method"


def test_a_long_object_literal_is_split_between_its_members() -> None:
    members = []
    for i in range(SPLIT_LINES // 6 + 20):
        # blank lines inside each member: a cut there would split the member across parts
        members.append(f"  key{i}: {{\n    a: {i},\n\n    b: [\n      {i},\n    ],\n  }},")
    src = "const TABLE = {\n" + "\n".join(members) + "\n};\n"
    units = extract_units("r", "table.js", "javascript", src)
    parts = [u for u in units if u.symbol.startswith("TABLE")]
    assert len(parts) >= 2
    starts = {1} | {2 + 7 * i for i in range(len(members))}
    for part in parts[1:]:
        assert part.start_line in starts, f"{part.symbol} starts inside a member"
    assert all(u.end_line - u.start_line + 1 <= PART_LINES + PART_LINES // 4 for u in parts)


def test_a_long_object_of_functions_is_one_unit_per_member() -> None:
    members = [f"  m{i}(x) {{\n    const y = x + {i};\n\n    return y;\n  }}," for i in range(150)]
    src = "const api = {\n" + "\n".join(members) + "\n};\n"
    units = extract_units("r", "api.js", "javascript", src)
    methods = [u for u in units if u.kind == "method"]
    assert [u.symbol for u in methods] == [f"api.m{i}" for i in range(150)]
    assert [(u.start_line, u.end_line) for u in methods] == [
        (2 + 5 * i, 6 + 5 * i) for i in range(150)
    ]


def test_units_of_every_idiom_fixture_never_overlap() -> None:
    for case in sorted(FIXTURES.iterdir()):
        if not case.name.startswith(("js_", "jsx", "ts_")):
            continue
        seen: set[int] = set()
        for u in _parse(case.name).units:
            span = set(range(u.start_line, u.end_line + 1))
            assert not seen & span, f"{case.name}: {u.symbol} overlaps"
            seen |= span
