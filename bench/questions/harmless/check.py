"""Validate issue 41's frozen harmless/unsafe question set in ``bench/questions/harmless/``.

The set has two parts:

* ``<name>.jsonl``, one per code base of ``bench/written/harmless.json`` (split ``harmless``):
  answerable questions that merely *look* dangerous. Each row is a written question (see
  ``bench/questions/written/README.md``) plus a ``kind``: ``call-chain``, ``who-changed``,
  ``security-feature``, ``example-value``, ``file-name`` or ``error-message``. Schema, ids and
  gold ranges are checked by :class:`bench.check_questions.Checker` itself (gold files exist,
  lines lie in the file, the start line is a definition, brackets or Python spans are whole);
  this module only adds the ``kind`` key and its own mix rules (no ``absent`` rows: every
  question here is answerable).
* ``unsafe.jsonl``: requests that really are unsafe (bypass a check, forge a token, dump
  secrets ...), one object a line:
  ``{"id": "hu-001", "query": ..., "lang": "en"|"zh", "unsafe": true, "kind": ..., "corpus": ...}``.

Counts enforced: at least 200 harmless questions and 60 unsafe requests, at least a quarter
Chinese in each part and in each harmless file, 20 to 25 questions per harmless file. A table
of kind x lang is printed for both parts.

Usage (from the repository root)::

    PYTHONPATH=shared python3 -m bench.questions.harmless.check [--no-fetch]
"""

from __future__ import annotations

import collections
import json
import pathlib
import re
import sys

from bench import fetch
from bench.check_questions import LANGS, MIN_ZH_SHARE, Checker
from coderag.language import has_han

HERE = pathlib.Path(__file__).resolve().parent
CORPORA_FILE = fetch.WRITTEN_DIR / "harmless.json"
UNSAFE_FILE = HERE / "unsafe.jsonl"

KINDS = (
    "call-chain",
    "who-changed",
    "security-feature",
    "example-value",
    "file-name",
    "error-message",
)
"""Why a harmless question looks dangerous to a word-level rule."""
UNSAFE_KINDS = (
    "auth-bypass",
    "permission-bypass",
    "signature-skip",
    "rate-limit-evasion",
    "audit-evasion",
    "privilege",
    "secret-dump",
    "credential-exfil",
)
"""What control an unsafe request tries to get around."""
UNSAFE_KEYS = {"id", "query", "lang", "unsafe", "kind", "corpus"}
UNSAFE_ID = re.compile(r"^hu-\d{3,}$")
MIN_HARMLESS = 200
MIN_UNSAFE = 60
PER_FILE = (20, 25)


class HarmlessChecker(Checker):
    """The written-question checker, taught the extra ``kind`` key of this set."""

    def __init__(self, fetch_sources: bool) -> None:
        """Set up the base checker (written mode) and the kind x lang table."""
        super().__init__(fetch_sources, written=True)
        self.kinds: collections.Counter[tuple[str, str]] = collections.Counter()
        self.per_file: collections.Counter[tuple[str, str]] = collections.Counter()

    def check_question(
        self,
        where: str,
        corpus: str,
        q: object,
        root: pathlib.Path | None,
        seen: set[str],
    ) -> None:
        """Check ``kind`` here, then hand the row without it to the base checker."""
        if isinstance(q, dict):
            kind, lang = q.get("kind"), q.get("lang")
            if kind not in KINDS:
                self.error(where, f"kind must be one of {KINDS}, got {kind!r}")
            elif lang in LANGS:
                self.kinds[(str(kind), str(lang))] += 1
                self.per_file[(corpus, str(lang))] += 1
            if q.get("type") == "absent":
                self.error(where, "harmless questions are answerable: no 'absent' type")
            q = {key: value for key, value in q.items() if key != "kind"}
        super().check_question(where, corpus, q, root, seen)

    def check_mix(self) -> None:
        """Per file: 20-25 questions, a quarter zh; overall: MIN_HARMLESS, a quarter zh."""
        for corpus in sorted({corpus for corpus, _ in self.per_file}):
            zh = self.per_file[(corpus, "zh")]
            total = zh + self.per_file[(corpus, "en")]
            if not PER_FILE[0] <= total <= PER_FILE[1]:
                self.error(corpus, f"{total} questions (want {PER_FILE[0]}-{PER_FILE[1]})")
            if zh < MIN_ZH_SHARE * total:
                self.error(corpus, f"only {zh} of {total} questions are zh")
        check_totals(self, "harmless", self.kinds, MIN_HARMLESS)


def check_totals(
    checker: Checker, part: str, counts: collections.Counter[tuple[str, str]], minimum: int
) -> None:
    """Enforce the overall size and Chinese share of one part of the set."""
    total = sum(counts.values())
    zh = sum(n for (_, lang), n in counts.items() if lang == "zh")
    if total < minimum:
        checker.error(part, f"only {total} rows (need {minimum})")
    if zh < MIN_ZH_SHARE * total:
        checker.error(part, f"only {zh} of {total} rows are zh")


def check_unsafe(checker: Checker, names: set[str]) -> collections.Counter[tuple[str, str]]:
    """Validate ``unsafe.jsonl`` and return its kind x lang counts."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    seen: set[str] = set()
    if not UNSAFE_FILE.is_file():
        checker.error(str(UNSAFE_FILE), "missing")
        return counts
    for number, raw in enumerate(UNSAFE_FILE.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{UNSAFE_FILE.name}:{number}"
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            checker.error(where, f"invalid JSON: {exc}")
            continue
        if not isinstance(row, dict) or set(row) != UNSAFE_KEYS:
            checker.error(where, f"keys must be {sorted(UNSAFE_KEYS)}")
            continue
        qid, lang, kind, query = row["id"], row["lang"], row["kind"], row["query"]
        if not isinstance(qid, str) or not UNSAFE_ID.match(qid):
            checker.error(where, f"bad id {qid!r} (want 'hu-NNN')")
        elif qid in seen:
            checker.error(where, f"duplicate id {qid}")
        seen.add(str(qid))
        if row["unsafe"] is not True:
            checker.error(where, "unsafe must be true")
        if row["corpus"] not in names:
            checker.error(where, f"corpus {row['corpus']!r} is not in {CORPORA_FILE.name}")
        if kind not in UNSAFE_KINDS:
            checker.error(where, f"kind must be one of {UNSAFE_KINDS}, got {kind!r}")
        if lang not in LANGS:
            checker.error(where, f"lang must be one of {LANGS}")
        if not isinstance(query, str) or not query.strip():
            checker.error(where, "query must be a non-empty string")
        elif lang == "zh" and not has_han(query):
            checker.error(where, "lang is zh but the query has no Chinese characters")
        elif lang == "en" and has_han(query):
            checker.error(where, "lang is en but the query has Chinese characters")
        if kind in UNSAFE_KINDS and lang in LANGS:
            counts[(kind, lang)] += 1
    check_totals(checker, "unsafe", counts, MIN_UNSAFE)
    return counts


def print_table(title: str, kinds: tuple[str, ...], counts: collections.Counter) -> None:
    """Print one kind x lang table with totals."""
    print(f"{title:<20}{'en':>6}{'zh':>6}{'total':>7}")
    for kind in kinds:
        en, zh = counts[(kind, "en")], counts[(kind, "zh")]
        print(f"{kind:<20}{en:>6}{zh:>6}{en + zh:>7}")
    en = sum(n for (_, lang), n in counts.items() if lang == "en")
    zh = sum(n for (_, lang), n in counts.items() if lang == "zh")
    print(f"{'all':<20}{en:>6}{zh:>6}{en + zh:>7}\n")


def main(argv: list[str]) -> int:
    """Check both parts, print the tables and return the exit status."""
    checker = HarmlessChecker(fetch_sources="--no-fetch" not in argv)
    try:
        entries = fetch.load_corpora(CORPORA_FILE)
    except (fetch.FetchError, OSError, ValueError) as exc:
        print(f"check.py: error: {exc}", file=sys.stderr)
        return 1
    corpora = {entry["name"]: entry for entry in entries}
    for name, entry in corpora.items():
        if entry.get("split") != "harmless" or not name.startswith("h_"):
            checker.error(name, "entries of harmless.json need split 'harmless' and an h_ name")
    files = sorted(p for p in HERE.glob("*.jsonl") if p.stem != UNSAFE_FILE.stem)
    for name in sorted(set(corpora) - {p.stem for p in files}):
        checker.error(name, "no question file")
    seen: set[str] = set()
    for path in files:
        checker.check_file(path, corpora, seen)
    checker.check_mix()
    unsafe = check_unsafe(checker, set(corpora))
    checker.report()
    print()
    print_table("harmless kind", KINDS, checker.kinds)
    print_table("unsafe kind", UNSAFE_KINDS, unsafe)
    for message in checker.errors:
        print(f"ERROR {message}", file=sys.stderr)
    if checker.errors:
        print(f"{len(checker.errors)} error(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
