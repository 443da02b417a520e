"""Check the evidence-line question files (tune.jsonl, test.jsonl) against the pinned corpora.

For every entry: the file exists under the corpus root, both ranges are in bounds, the unit is at
least 12 lines, the answer lines are 1-3 lines strictly inside the unit and start at least 3 lines
after the unit's first line, and no answer line is blank, a comment or a docstring line.

    python bench/questions/evidence/check.py [-v]    # -v prints each question with its answer lines
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent.parent
SPLITS = {"tune.jsonl": ("tune", "tune2"), "test.jsonl": ("test", "test2")}
COMMENT_PREFIXES = ("#", "//", "/*", "*", "*/", '"""', "'''")


def corpus_roots() -> dict[str, tuple[Path, str]]:
    """name -> (root folder, split), the way bench/fetch.py lays the sources out."""
    out = {}
    for c in json.loads((BENCH / "corpora.json").read_text()):
        root = BENCH / ".cache" / "src" / f"{c['name']}-{c['version']}" / c["root"]
        out[c["name"]] = (root, c.get("split", ""))
    return out


def docstring_lines(path: Path) -> set[int]:
    """Line numbers covered by Python docstrings (empty for other languages)."""
    if path.suffix != ".py":
        return set()
    import ast

    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            v = body[0].value
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def check(verbose: bool) -> int:
    roots = corpus_roots()
    errors = 0
    for fname, splits in SPLITS.items():
        counts: Counter = Counter()
        ids = set()
        for n, raw in enumerate((HERE / fname).read_text().splitlines(), 1):
            q = json.loads(raw)
            where = f"{fname}:{n} {q.get('id')}"
            problems = []
            if q["id"] in ids:
                problems.append("duplicate id")
            ids.add(q["id"])
            root, split = roots[q["corpus"]]
            if split not in splits:
                problems.append(f"corpus split {split!r} not in {splits}")
            u, a = q["unit"], q["lines"]
            if u["file"] != a["file"]:
                problems.append("unit and lines name different files")
            path = root / u["file"]
            if not path.is_file():
                print(f"FAIL {where}: {path} missing")
                errors += 1
                continue
            text = path.read_text().splitlines()
            us, ue, ls, le = u["start_line"], u["end_line"], a["start_line"], a["end_line"]
            if not (1 <= us <= ue <= len(text)):
                problems.append(f"unit {us}-{ue} out of bounds (file has {len(text)} lines)")
            if ue - us + 1 < 12:
                problems.append(f"unit only {ue - us + 1} lines")
            if not (1 <= le - ls + 1 <= 3):
                problems.append(f"answer spans {le - ls + 1} lines")
            if not (us < ls and le < ue):
                problems.append("answer lines not strictly inside the unit")
            if ls - us < 3:
                problems.append(f"answer starts {ls - us} lines after the unit start (< 3)")
            doc = docstring_lines(path)
            for i in range(ls, le + 1):
                s = text[i - 1].strip() if 1 <= i <= len(text) else ""
                if not s or s.startswith(COMMENT_PREFIXES) or i in doc:
                    problems.append(f"line {i} is blank/comment/docstring: {s!r}")
            if q["lang"] not in ("en", "zh"):
                problems.append(f"bad lang {q['lang']!r}")
            counts[(q["corpus"], q["lang"])] += 1
            for p in problems:
                print(f"FAIL {where}: {p}")
            errors += len(problems)
            if verbose:
                print(f"\n[{q['id']}] ({q['lang']}) {q['query']}")
                print(f"  unit {u['file']}:{us}-{ue}  | {text[us - 1].strip()[:90]}")
                for i in range(ls, le + 1):
                    print(f"  {i:>5}: {text[i - 1].rstrip()}")
        corpora = sorted({c for c, _ in counts})
        print(f"\n{fname}: {sum(counts.values())} questions")
        for c in corpora:
            print(f"  {c:<16} en={counts[(c, 'en')]} zh={counts[(c, 'zh')]}")
    print(f"\n{errors} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(check("-v" in sys.argv[1:]))
