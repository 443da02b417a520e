#!/usr/bin/env python3
"""Validate the unsafe/benign question set (tune.jsonl, test.jsonl).

Standard library only. Exits 1 and lists every problem found; exits 0 and
prints counts per file / language / label / kind when both files are valid.
Run: python3 bench/questions/unsafe/check.py
"""

import json
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = {"tune": HERE / "tune.jsonl", "test": HERE / "test.jsonl"}
FIELDS = {"id", "query", "lang", "unsafe", "kind"}
PER_FILE = 60
PER_LABEL = 30  # unsafe and benign each
ZH_MIN, ZH_MAX = 15, 25  # "about a third" of 60, per file
ZH_MIN_PER_LABEL = 7  # each label needs a real share of Chinese
UNSAFE_KINDS = {
    "auth-bypass",
    "permission-bypass",
    "signature-skip",
    "rate-limit-evasion",
    "audit-evasion",
    "privilege",
    "secret-dump",
    "credential-exfil",
}
CJK = re.compile(r"[\u4e00-\u9fff]")
KIND_RE = re.compile(r"^[a-z][a-z0-9-]{1,40}$")


def check_file(split, path, problems, seen_ids, seen_queries):
    rows = []
    if not path.is_file():
        problems.append(f"{path}: missing")
        return rows
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{path.name}:{n}"
        if not line.strip():
            problems.append(f"{where}: blank line")
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"{where}: bad JSON ({e})")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{where}: not a JSON object")
            continue
        keys = set(obj)
        if keys != FIELDS:
            problems.append(f"{where}: fields {sorted(keys)} != {sorted(FIELDS)}")
            continue
        qid, q, lang, unsafe, kind = (obj[k] for k in ("id", "query", "lang", "unsafe", "kind"))
        if not isinstance(qid, str) or not re.fullmatch(rf"u-{split}-\d{{3}}", qid):
            problems.append(f"{where}: id {qid!r} is not u-{split}-NNN")
        elif qid in seen_ids:
            problems.append(f"{where}: duplicate id {qid} (also {seen_ids[qid]})")
        else:
            seen_ids[qid] = where
        if not isinstance(q, str) or len(q.strip()) < 5:
            problems.append(f"{where}: empty or too short query")
            q = ""
        norm = " ".join(q.lower().split())
        if norm and norm in seen_queries:
            problems.append(f"{where}: duplicate query (also {seen_queries[norm]})")
        elif norm:
            seen_queries[norm] = where
        if lang not in ("en", "zh"):
            problems.append(f"{where}: lang {lang!r} not en/zh")
        elif lang == "zh" and not CJK.search(q):
            problems.append(f"{where}: lang zh but no Chinese characters")
        elif lang == "en" and CJK.search(q):
            problems.append(f"{where}: lang en but contains Chinese characters")
        if not isinstance(unsafe, bool):
            problems.append(f"{where}: unsafe must be true/false, got {unsafe!r}")
        if not isinstance(kind, str) or not KIND_RE.match(kind):
            problems.append(f"{where}: bad kind {kind!r}")
        elif isinstance(unsafe, bool):
            if unsafe and kind not in UNSAFE_KINDS:
                problems.append(
                    f"{where}: unsafe=true but kind {kind!r} not in {sorted(UNSAFE_KINDS)}"
                )
            if not unsafe and not kind.startswith("benign-"):
                problems.append(f"{where}: unsafe=false but kind {kind!r} lacks 'benign-' prefix")
        rows.append(obj)
    return rows


def main():
    problems, seen_ids, seen_queries = [], {}, {}
    summary = {}
    for split, path in FILES.items():
        rows = check_file(split, path, problems, seen_ids, seen_queries)
        ok_rows = [
            r for r in rows if isinstance(r.get("unsafe"), bool) and r.get("lang") in ("en", "zh")
        ]
        label = Counter("unsafe" if r["unsafe"] else "benign" for r in ok_rows)
        lang = Counter(r["lang"] for r in ok_rows)
        cell = Counter(("unsafe" if r["unsafe"] else "benign", r["lang"]) for r in ok_rows)
        kinds = Counter(r["kind"] for r in ok_rows)
        if len(rows) != PER_FILE:
            problems.append(f"{path.name}: {len(rows)} rows, expected {PER_FILE}")
        for lab in ("unsafe", "benign"):
            if label[lab] != PER_LABEL:
                problems.append(f"{path.name}: {label[lab]} {lab}, expected {PER_LABEL}")
            if cell[(lab, "zh")] < ZH_MIN_PER_LABEL:
                zh = cell[(lab, "zh")]
                problems.append(f"{path.name}: only {zh} zh {lab}, expected >= {ZH_MIN_PER_LABEL}")
        if not ZH_MIN <= lang["zh"] <= ZH_MAX:
            problems.append(f"{path.name}: {lang['zh']} zh rows, expected {ZH_MIN}..{ZH_MAX}")
        summary[split] = (len(rows), label, lang, cell, kinds)
    # the two splits must use the same categories
    if "tune" in summary and "test" in summary:
        a, b = set(summary["tune"][4]), set(summary["test"][4])
        if a != b:
            problems.append(
                f"kinds differ between splits: only tune {sorted(a - b)}, only test {sorted(b - a)}"
            )
    for split, (n, label, lang, cell, kinds) in summary.items():
        parts = [
            f"{lab} {label[lab]} (en {cell[(lab, 'en')]}, zh {cell[(lab, 'zh')]})"
            for lab in ("unsafe", "benign")
        ]
        print(f"{split}: {n} rows | " + " | ".join(parts) + f" | zh total {lang['zh']}")
        print("   kinds: " + ", ".join(f"{k}={v}" for k, v in sorted(kinds.items())))
    if problems:
        print(f"\n{len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
