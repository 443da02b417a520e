"""How well parser units line up with the definitions a reader names, on a real code base.

Usage::

    python -m bench.units ROOT [ROOT ...] [--misses N]

For each ROOT (a source tree: a corpus from ``bench/fetch.py``, an unpacked ``npm pack`` or
``apt-get download`` archive) it prints the number of units by kind, the share of lines in
blank-line ``block`` units, how many blocks reach 20 lines, and *named coverage*: of the exported
definitions a plain per-language regex finds (as a reader scanning the file would: ``func Foo``,
``export function foo``, ``pub fn foo``, ``public class Foo``...), the share that one non-block
unit covers with a symbol ending in that name. ``.d.ts`` files are skipped.
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

from coderag_parser.languages import has_grammar, language_of
from coderag_parser.units import parse_source

NAMED: dict[str, list[str]] = {
    "go": [
        r"^func (?:\([^)]*\) )?([A-Z]\w*)",
        r"^type ([A-Z]\w*)",
        r"^(?:var|const) ([A-Z]\w*)",
        r"^\t([A-Z]\w*) (?:struct|interface)\b",
    ],
    "typescript": [
        r"^export (?:default )?(?:async )?function\*? (\w+)",
        r"^export (?:declare )?(?:const )?enum (\w+)",
        r"^export (?:const|let) (\w+)",
        r"^export (?:default )?(?:abstract )?class (\w+)",
        r"^export (?:interface|type|enum) (\w+)",
        r"^  (?:public |static |protected |async |readonly )*(?:get |set )?(\w+)(?:<[^>]*>)?\(.*\)"
        r"[^;]*\{\s*$",
    ],
    "rust": [
        r"^pub (?:fn|struct|enum|trait|const|static|type|union) (\w+)",
        r"^macro_rules! (\w+)",
        r"^    pub fn (\w+)",
    ],
    "java": [
        r"^public (?:final |abstract |sealed )*(?:class|interface|enum|record) (\w+)",
        r"^    public (?:static |final |abstract |synchronized |default )*[\w<>\[\], ?.]+ (\w+)\(",
    ],
}
"""Per language, regexes whose group 1 is the name of an exported definition on that line."""

NOT_NAMES = {"if", "for", "while", "switch", "constructor", "return", "catch"}
"""Keywords the method regex can pick up."""


def measure(root: Path, misses: int) -> None:
    """Print unit statistics and named coverage for one source tree."""
    kinds: collections.Counter[str] = collections.Counter()
    lines_of: collections.Counter[str] = collections.Counter()
    total = files = named = hit = big = 0
    missed: list[str] = []
    for p in sorted(root.rglob("*")):
        lang = language_of(p.name) if p.is_file() and not p.name.endswith(".d.ts") else None
        if not lang or not has_grammar(lang):
            continue
        text = p.read_text(errors="replace")
        rows = text.splitlines()
        units = parse_source("r", str(p.relative_to(root)), lang, text).units
        files, total = files + 1, total + len(rows)
        for u in units:
            n = u.end_line - u.start_line + 1
            kinds[u.kind] += 1
            lines_of[u.kind] += n
            big += u.kind == "block" and n >= 20
        for i, line in enumerate(rows, 1):
            m = next((m for pat in NAMED.get(lang, []) if (m := re.match(pat, line))), None)
            if m is None or m.group(1) in NOT_NAMES:
                continue
            tail = re.compile(r"(^|[.)\]])" + re.escape(m.group(1)) + r"$")
            ok = any(
                u.kind not in ("block", "file")
                and u.start_line <= i <= u.end_line
                and tail.search(u.symbol)
                for u in units
            )
            named, hit = named + 1, hit + ok
            if not ok:
                missed.append(f"{p.relative_to(root)}:{i}: {line.strip()[:80]}")
    print(f"## {root}\nfiles {files} lines {total} units {sum(kinds.values())}")
    for kind, count in kinds.most_common():
        share = lines_of[kind] / total
        print(f"  {kind:10s} {count:6d} units {lines_of[kind]:7d} lines ({share:.1%})")
    print(f"blocks of 20+ lines: {big}")
    if named:
        print(f"named definitions {named}, one unit each {hit} ({hit / named:.1%})")
    for line in missed[:misses]:
        print(f"  miss {line}")


def main() -> None:
    """Measure every root given on the command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="+", type=Path)
    ap.add_argument("--misses", type=int, default=0, help="list this many missed definitions")
    args = ap.parse_args()
    for root in args.roots:
        measure(root, args.misses)


if __name__ == "__main__":
    main()
