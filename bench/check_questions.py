"""Validate the retrieval benchmark question sets in ``bench/questions/*.jsonl``.

Each file is named after a corpus of ``bench/corpora.json`` and holds one JSON object per
line::

    {"id": "requests-001", "lang": "en"|"zh", "type": "lookup"|"descriptive"|"chain"|"absent",
     "query": "...", "gold": [{"file": "src/requests/sessions.py",
                               "start_line": 120, "end_line": 185}, ...]}

An optional ``"style"`` field names how the question is phrased: one of ``symptom``,
``behaviour``, ``example_input``, ``half_name``, ``qualified_name``, ``flow``, ``absent``,
``plain``. ``absent`` goes only with type ``absent`` and ``flow`` only with type ``chain``.

Checks: schema, unique ids, gold files exist under the fetched corpus root, ranges lie
inside the file with ``start_line <= end_line``, Python ranges start (after any decorators)
at a def/class or an assignment and span exactly one of them; Go, TypeScript, JavaScript,
Java, Rust and C ranges (rules in ``bench/gold_syntax.py``) start, after any doc comment,
comment, annotation or attribute directly above, at a definition of that language, keep
their brackets balanced and never closed below the start, and end on the line that closes
the definition (not on a blank line, comment or definition after it); ``absent`` questions
have no gold and ``chain`` questions have at least two links. It also enforces the question mix
(at least a quarter Chinese per non-absent type, at least six chain and one absent question
per corpus), prints counts per corpus x type x lang and exits non-zero on any error.

The written-questions program (issue 44) keeps its questions in ``bench/questions/written/``,
one ``<code base>.jsonl`` per code base of ``bench/mining.json`` or ``bench/written/*.json``;
``--written`` checks those instead, with a mix per code base of at least a quarter Chinese
overall, two chain questions and one absent question.

Usage::

    python -m bench.check_questions [--no-fetch]
    python -m bench.check_questions --written [NAME ...] [--no-fetch]

``--no-fetch`` skips checks that need the corpus sources when they are not already cached.
"""

from __future__ import annotations

import ast
import collections
import json
import pathlib
import re
import sys

from bench import fetch, gold_syntax
from coderag.language import has_han

BENCH_DIR = pathlib.Path(__file__).resolve().parent
QUESTIONS_DIR = BENCH_DIR / "questions"

TYPES = ("lookup", "descriptive", "chain", "absent")
LANGS = ("en", "zh")
KEYS = {"id", "lang", "type", "query", "gold"}
OPTIONAL_KEYS = {"style"}
STYLES = (
    "symptom",
    "behaviour",
    "example_input",
    "half_name",
    "qualified_name",
    "flow",
    "absent",
    "plain",
)
"""Values of the optional ``style`` field: how a question is phrased."""
GOLD_KEYS = {"file", "start_line", "end_line"}
MIN_ZH_SHARE = 0.25
MIN_CHAIN = 6
MIN_ABSENT = 1
WRITTEN_DIR = QUESTIONS_DIR / "written"
WRITTEN_MIN_CHAIN = 2
NON_CORPUS_FILES = ("traps", "history")
"""Question files of other benchmarks, skipped here."""

DEF_START = re.compile(
    r"^(?:async\s+def|def|class)\s+\w+"  # Python definitions
    r"|^[A-Za-z_][\w.]*\s*(?::[^=]+)?=(?!=)"  # assignment, optionally annotated
)

ID_RE = re.compile(r"^[a-z0-9_]+-\d{3,}$")


class Checker:
    """Collects errors while validating all question files."""

    def __init__(self, fetch_sources: bool, written: bool = False) -> None:
        """Set up empty error and count tables."""
        self.fetch_sources = fetch_sources
        self.written = written
        self.errors: list[str] = []
        self.counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self.style_counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self.file_cache: dict[pathlib.Path, list[str]] = {}
        self.py_spans: dict[pathlib.Path, set[tuple[int, int]]] = {}

    def error(self, where: str, message: str) -> None:
        """Record one error."""
        self.errors.append(f"{where}: {message}")

    def lines_of(self, path: pathlib.Path) -> list[str]:
        """Return the lines of a source file (cached)."""
        if path not in self.file_cache:
            text = path.read_text(encoding="utf-8", errors="replace")
            self.file_cache[path] = text.splitlines()
        return self.file_cache[path]

    def python_spans(self, path: pathlib.Path) -> set[tuple[int, int]]:
        """Return the (start, end) spans of every def, class and assignment in a file."""
        if path not in self.py_spans:
            spans: set[tuple[int, int]] = set()
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    end = node.end_lineno or node.lineno
                    spans.add((node.lineno, end))
                    if node.decorator_list:
                        first = min(d.lineno for d in node.decorator_list)
                        spans.add((first, end))
                elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                    spans.add((node.lineno, node.end_lineno or node.lineno))
            self.py_spans[path] = spans
        return self.py_spans[path]

    def check_file(self, path: pathlib.Path, corpora: dict[str, dict], seen: set[str]) -> None:
        """Validate one ``<corpus>.jsonl`` file."""
        corpus = path.stem
        if corpus not in corpora:
            where = "bench/mining.json or bench/written/" if self.written else "bench/corpora.json"
            self.error(str(path), f"no corpus named {corpus!r} in {where}")
            return
        root = self.corpus_root(corpus)
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.name}:{number}"
            if not raw.strip():
                self.error(where, "blank line")
                continue
            try:
                question = json.loads(raw)
            except json.JSONDecodeError as exc:
                self.error(where, f"invalid JSON: {exc}")
                continue
            self.check_question(where, corpus, question, root, seen)

    def corpus_root(self, corpus: str) -> pathlib.Path | None:
        """Return the corpus root, fetching it unless --no-fetch was given."""
        entry = fetch.get_corpus(corpus)
        cached = fetch.extracted_dir(entry) / entry["root"]
        if cached.is_dir():
            return cached
        if not self.fetch_sources:
            print(f"note: {corpus} not fetched; skipping source checks", file=sys.stderr)
            return None
        try:
            return fetch.corpus_root(corpus)
        except fetch.FetchError as exc:
            self.error(corpus, f"cannot fetch corpus: {exc}")
            return None

    def check_question(
        self,
        where: str,
        corpus: str,
        q: object,
        root: pathlib.Path | None,
        seen: set[str],
    ) -> None:
        """Validate the schema and gold ranges of one question."""
        if not isinstance(q, dict):
            self.error(where, "not a JSON object")
            return
        if not KEYS <= set(q) <= KEYS | OPTIONAL_KEYS:
            self.error(
                where,
                f"keys must be {sorted(KEYS)} plus optionally {sorted(OPTIONAL_KEYS)},"
                f" got {sorted(q)}",
            )
            return
        qid, lang, qtype, query, gold = q["id"], q["lang"], q["type"], q["query"], q["gold"]
        if not isinstance(qid, str) or not ID_RE.match(qid) or not qid.startswith(f"{corpus}-"):
            self.error(where, f"bad id {qid!r} (want '{corpus}-NNN')")
        elif qid in seen:
            self.error(where, f"duplicate id {qid}")
        else:
            seen.add(qid)
        where = f"{where} ({qid})"
        if lang not in LANGS:
            self.error(where, f"lang must be one of {LANGS}")
        if qtype not in TYPES:
            self.error(where, f"type must be one of {TYPES}")
        if "style" in q:
            self.check_style(where, q["style"], qtype)
            if q["style"] in STYLES:
                self.style_counts[(corpus, q["style"])] += 1
        if not isinstance(query, str) or not query.strip():
            self.error(where, "query must be a non-empty string")
        elif lang == "zh" and not has_han(query):
            self.error(where, "lang is zh but the query has no Chinese characters")
        if not isinstance(gold, list):
            self.error(where, "gold must be a list")
            return
        if qtype == "absent" and gold:
            self.error(where, "absent questions must have an empty gold list")
        if qtype in ("lookup", "descriptive") and not gold:
            self.error(where, "gold must not be empty")
        if qtype == "chain" and len(gold) < 2:
            self.error(where, "chain questions need at least two gold links")
        for index, item in enumerate(gold):
            self.check_gold(f"{where} gold[{index}]", item, root)
        if lang in LANGS and qtype in TYPES:
            self.counts[(corpus, str(qtype), str(lang))] += 1

    def check_style(self, where: str, style: object, qtype: object) -> None:
        """Validate the optional ``style`` field against STYLES and the question type."""
        if style not in STYLES:
            self.error(where, f"style must be one of {STYLES}, got {style!r}")
        elif (style == "absent") != (qtype == "absent"):
            self.error(where, "style 'absent' goes with type 'absent' and only with it")
        elif style == "flow" and qtype != "chain":
            self.error(where, "style 'flow' goes only with type 'chain'")

    def check_gold(self, where: str, item: object, root: pathlib.Path | None) -> None:
        """Validate one gold range against the corpus source."""
        if not isinstance(item, dict) or set(item) != GOLD_KEYS:
            self.error(where, f"must be an object with keys {sorted(GOLD_KEYS)}")
            return
        rel, start, end = item["file"], item["start_line"], item["end_line"]
        if (
            not isinstance(rel, str)
            or not rel
            or "\\" in rel
            or rel.startswith("/")
            or ".." in rel.split("/")
        ):
            self.error(where, f"file must be a relative '/'-separated path, got {rel!r}")
            return
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end))
        if not ints or start < 1 or end < start:
            self.error(where, f"need integers 1 <= start_line <= end_line, got {start}-{end}")
            return
        if root is None:
            return
        path = root / rel
        if not path.is_file():
            self.error(where, f"{rel} does not exist under {root}")
            return
        lines = self.lines_of(path)
        if end > len(lines):
            self.error(where, f"{rel}:{start}-{end} beyond end of file ({len(lines)} lines)")
            return
        language = gold_syntax.language_of(rel)
        if language is not None:
            self.check_braced(where, rel, lines, start, end, language)
            return
        head = skip_decorators(lines, start, end)
        if head is None or not DEF_START.match(lines[head - 1].strip()):
            self.error(where, f"{rel}:{start} does not start a definition or assignment")
            return
        if rel.endswith(".py"):
            try:
                spans = self.python_spans(path)
            except SyntaxError as exc:
                self.error(where, f"{rel} does not parse: {exc}")
                return
            if (start, end) not in spans:
                self.error(where, f"{rel}:{start}-{end} is not exactly one def/class/assignment")

    def check_braced(
        self, where: str, rel: str, lines: list[str], start: int, end: int, language: str
    ) -> None:
        """Check a range in a brace language: a definition start (after doc comments,
        annotations or attributes), whole brackets, and an end on the line that closes it."""
        head = gold_syntax.skip_attributes(language, lines, start, end)
        if head is None or not gold_syntax.definition_at(language, lines, head):
            self.error(where, f"{rel}:{start} does not start a {language} definition")
            return
        if gold_syntax.is_blank_or_comment(lines[end - 1]):
            self.error(where, f"{rel}:{end} ends on a blank or comment line, not the definition")
            return
        net, low = gold_syntax.bracket_depths("\n".join(lines[start - 1 : end]), language)
        if net != 0 or low < 0:
            self.error(where, f"{rel}:{start}-{end} has unbalanced brackets ({net:+d}, low {low})")
            return
        closed = gold_syntax.closed_before_end("\n".join(lines[head - 1 : end]), language)
        if closed is not None:
            self.error(
                where,
                f"{rel}:{start}-{end} runs past the end of its definition"
                f" (closed on line {head + closed - 1})",
            )

    def check_mix(self) -> None:
        """Enforce the per-corpus question mix."""
        corpora = sorted({corpus for corpus, _, _ in self.counts})
        if self.written:
            self.check_written_mix(corpora)
            return
        for corpus in corpora:
            for qtype in TYPES:
                en = self.counts[(corpus, qtype, "en")]
                zh = self.counts[(corpus, qtype, "zh")]
                if qtype != "absent" and en + zh and zh < MIN_ZH_SHARE * (en + zh):
                    self.error(corpus, f"{qtype}: only {zh} of {en + zh} questions are zh")
            chain = sum(self.counts[(corpus, "chain", lang)] for lang in LANGS)
            absent = sum(self.counts[(corpus, "absent", lang)] for lang in LANGS)
            if chain < MIN_CHAIN:
                self.error(corpus, f"only {chain} chain questions (need {MIN_CHAIN})")
            if absent < MIN_ABSENT:
                self.error(corpus, "no absent questions")

    def check_written_mix(self, corpora: list[str]) -> None:
        """Enforce the looser mix of the written program: per code base, not per type."""
        for corpus in corpora:
            zh = sum(self.counts[(corpus, t, "zh")] for t in TYPES)
            total = zh + sum(self.counts[(corpus, t, "en")] for t in TYPES)
            if zh < MIN_ZH_SHARE * total:
                self.error(corpus, f"only {zh} of {total} questions are zh")
            chain = sum(self.counts[(corpus, "chain", lang)] for lang in LANGS)
            if chain < WRITTEN_MIN_CHAIN:
                self.error(corpus, f"only {chain} chain questions (need {WRITTEN_MIN_CHAIN})")
            if not sum(self.counts[(corpus, "absent", lang)] for lang in LANGS):
                self.error(corpus, "no absent questions")

    def report(self) -> None:
        """Print the corpus x type x lang count table."""
        corpora = sorted({corpus for corpus, _, _ in self.counts})
        header = f"{'corpus':<16}" + "".join(
            f"{t + '/' + lang:>15}" for t in TYPES for lang in LANGS
        )
        print(header + f"{'total':>8}")
        grand = 0
        for corpus in corpora:
            row = [self.counts[(corpus, t, lang)] for t in TYPES for lang in LANGS]
            grand += sum(row)
            print(f"{corpus:<16}" + "".join(f"{n:>15}" for n in row) + f"{sum(row):>8}")
        totals = [sum(self.counts[(c, t, lang)] for c in corpora) for t in TYPES for lang in LANGS]
        print(f"{'all':<16}" + "".join(f"{n:>15}" for n in totals) + f"{grand:>8}")
        styled = sorted({corpus for corpus, _ in self.style_counts})
        if styled:
            print("\n" + f"{'style':<16}" + "".join(f"{s:>15}" for s in STYLES))
            for corpus in styled:
                row = [self.style_counts[(corpus, s)] for s in STYLES]
                print(f"{corpus:<16}" + "".join(f"{n:>15}" for n in row))


def skip_decorators(lines: list[str], start: int, end: int) -> int | None:
    """Return the first line number at or after ``start`` that is not part of a decorator."""
    line_no = start
    while line_no <= end:
        text = lines[line_no - 1].strip()
        if not text.startswith("@"):
            return line_no
        depth = text.count("(") - text.count(")")
        line_no += 1
        while depth > 0 and line_no <= end:
            text = lines[line_no - 1]
            depth += text.count("(") - text.count(")")
            line_no += 1
    return None


def main(argv: list[str]) -> int:
    """Run every check, print the count table and return the exit status."""
    fetch_sources = "--no-fetch" not in argv
    written = "--written" in argv
    names = [arg for arg in argv if not arg.startswith("--")]
    checker = Checker(fetch_sources, written)
    try:
        entries = fetch.load_mining() + fetch.load_written() if written else fetch.load_corpora()
        corpora = {entry["name"]: entry for entry in entries}
    except (fetch.FetchError, OSError, ValueError) as exc:
        print(f"check_questions.py: error: {exc}", file=sys.stderr)
        return 1
    if written:
        files = sorted(WRITTEN_DIR.glob("*.jsonl"))
        if names:
            files = [p for p in files if p.stem in names]
    else:
        # traps.jsonl (answer benchmark) and history.jsonl (who/when benchmark) have no corpus
        files = sorted(p for p in QUESTIONS_DIR.glob("*.jsonl") if p.stem not in NON_CORPUS_FILES)
    if not files:
        checker.error(str(QUESTIONS_DIR), "no question files")
    seen: set[str] = set()
    for path in files:
        checker.check_file(path, corpora, seen)
    checker.check_mix()
    checker.report()
    for message in checker.errors:
        print(f"ERROR {message}", file=sys.stderr)
    if checker.errors:
        print(f"{len(checker.errors)} error(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
