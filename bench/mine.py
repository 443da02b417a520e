"""Training questions mined from many pinned code bases in neither split (``bench/mining.json``).

The generalisation of ``bench/docquestions.py`` to every language the parser supports:

* ``doc``: a doc comment's first sentence -> the definition it documents (Python docstrings;
  the comments directly above Go, Java, JavaScript, TypeScript, Rust and C definitions);
* ``test``: a test's name, turned into words -> the one function of the code base that the test
  calls and whose name the test's name contains (``test_parse_header_quotes`` -> ``parse_header``);
* Chinese: about a third of the questions are put into Chinese word by word through the project's
  own vocabulary (``vocab_zh.tsv``, then CC-CEDICT read backwards), identifiers kept in Latin
  letters, and only where the retriever's own Chinese->English mapping recovers most content words.

Commit subjects -> changed units are not mined: package archives carry no git history. The
doc comments are read and blanked by ``mined_docs.py``, the tests by ``mined_tests.py``, the
Chinese made by ``mined_zh.py``; this script walks one code base and writes its questions.

Each code base gets a copy with every definition's doc comment blanked (line numbers kept), so a
question cannot be answered by matching its own words, and each gold range is the exact range of
the unit the project's parser makes of that definition in the blanked copy (decorators and
attributes included where the unit includes them), so it matches what the index holds::

    python -m bench.mine NAME ... | --all   # bench/.cache/src/NAME-nodoc/ (the copy to index)
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
from pathlib import Path

HERE = Path(__file__).resolve().parent

from bench.fetch import corpus_root, load_mining  # noqa: E402
from bench.mined_docs import mine_file, unit_of  # noqa: E402
from bench.mined_tests import Case, cases_in, tested_function  # noqa: E402
from bench.mined_zh import TOKEN, is_identifier, translate  # noqa: E402
from coderag_parser.languages import EXTENSIONS  # noqa: E402
from coderag_parser.units import is_test_path, parse_source  # noqa: E402

OUT = HERE / ".cache" / "mined"
"""Where the question files go."""

CAP = 150
"""Most questions kept per code base."""

TEST_CAP = 50
"""Most test-name questions among them (the rest are doc questions)."""

ZH_SHARE = 0.3
"""Share of each code base's questions put into Chinese (where the translation holds)."""

SKIP_DIRS = re.compile(r"(^|/)(node_modules|vendor|third_party|build|dist|examples?)/")
"""Paths whose code is not the code base's own."""


def seeded(name: str, salt: str) -> random.Random:
    """A generator seeded by the code base's name (not by Python's per-process hash seed)."""
    return random.Random(int(hashlib.sha256(f"{name}:{salt}".encode()).hexdigest()[:16], 16))


def question_type(query: str, name: str, source: str) -> str:
    """``lookup`` when the query contains an identifier: one written as code, or the gold
    definition's own name; a test's name always names its function (in words). Else
    ``descriptive``."""
    if source == "test":
        return "lookup"
    tokens = TOKEN.findall(query)
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
