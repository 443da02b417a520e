"""How /ask's pre-model refusals split answerable from absent questions on the indexed code
bases, by mechanism, and what another policy would do (issue 41).

    python -m bench.refusal_policy --split test --split test2 --split tune --split tune2 \\
        [--collect] [--policy today --policy soft]

``--collect`` retrieves every question of each split's code bases as ``/ask`` does (the
retriever's one path, the indexes of ``CODERAG_DATA_DIR``) and keeps, per question, what each
mechanism reads: the unsafe and vague rules' verdict, the learned refusal rule's probability
(and its verdict), and the named terms none of the hits mention
(``bench/.cache/w/refusal-<split>.jsonl``). Then each ``--policy`` is applied to those rows
and its table printed, the frozen splits (test, test2) first, English and Chinese apart:
answerable questions refused (by mechanism), absent questions refused, absent questions
answered with the doubt sentence first, answerable questions answered with it.

Policies (``POLICIES``): ``today`` is /ask as shipped; the others are candidates, each chosen on
the tuning splits (tune, tune2) only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.fetch import load_corpora
from coderag.terms import missing_terms, refusing

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "questions"
ROWS = HERE / ".cache" / "w"
FROZEN = ("test", "test2", "wtest")


def collect(split: str) -> list[dict[str, Any]]:
    """One row per question of ``split``'s code bases: what each refusal mechanism reads."""
    from coderag import embedding, words
    from coderag.language import language
    from coderag.settings import get_settings
    from coderag.store import get_catalog
    from coderag_embedder.queries import local
    from coderag_generator import refusal
    from coderag_generator.asking import RETRIEVE_K
    from coderag_retriever import retrieval
    from coderag_retriever.relevance import english

    embedding.use_local(local())
    settings = get_settings()
    rows = []
    for name, path in question_files(split):
        used = set().union(
            *(
                words.words(f"{u.symbol} {u.file} {u.doc} {u.text}")
                for u in get_catalog().units(name)
            )
        )
        for line in path.read_text("utf-8").splitlines():
            if not line.strip():
                continue
            q = json.loads(line)
            lang = language(q["query"])
            got = retrieval.retrieve(name, q["query"], RETRIEVE_K, settings)
            screened = refusal.screen(q["query"], lang, got.unsafe)
            rows.append(
                {
                    "id": q["id"],
                    "split": split,
                    "lang": lang,
                    "absent": q["type"] == "absent",
                    "screen": screened.reason if screened is not None else "",
                    "hits": len(got.hits),
                    "below": got.below_gate,
                    "doubtful": got.doubtful,
                    "p": got.p_absent,
                    "weak": got.weak,
                    "missing": missing_terms(q["query"], got.hits),
                    # the words it was searched by that no unit of the code base uses
                    "unknown": [
                        t
                        for t in words.terms(q["query"], english(q["query"], settings))
                        if t not in used
                    ],
                }
            )
    return rows


def question_files(split: str) -> list[tuple[str, Path]]:
    """(code base, its questions' file) of a split: the retrieval benchmark's (``tune``,
    ``tune2``, ``test``, ``test2``) or the written program's (``wtest``, ``wtrain``; the
    training code bases indexed in ``CODERAG_DATA_DIR`` only)."""
    if split not in ("wtest", "wtrain"):
        return [
            (c["name"], QUESTIONS / f"{c['name']}.jsonl")
            for c in load_corpora()
            if c["split"] == split
        ]
    from bench.written_retrieval import QUESTIONS as WRITTEN
    from bench.written_retrieval import code_bases
    from coderag.errors import NotFound
    from coderag.store import get_catalog

    catalog = get_catalog()
    out = []
    for entry in code_bases(split):
        try:
            if catalog.get_repo(entry["name"]).complete:
                out.append((entry["name"], WRITTEN / f"{entry['name']}.jsonl"))
        except NotFound:
            continue  # a training code base not indexed here
    return out


@dataclass(frozen=True)
class Outcome:
    """What /ask does with one question under a policy: refused (and why) or answered, with
    or without the doubt sentence."""

    reason: str
    doubtful: bool = False


def today(r: dict[str, Any]) -> Outcome:
    """/ask as shipped: the rules, no hits, a missing named term, the rule's verdict; else an
    answer, doubtful when the rule says so."""
    if r["screen"] == "unsafe":
        return Outcome("unsafe")
    if r["screen"]:  # a vague question is asked which sense it means: not a refusal
        return Outcome("")
    if not r["hits"]:
        return Outcome("no_hits")
    if r["missing"]:
        return Outcome("absent_term")
    if r["below"]:
        return Outcome("score_gate")
    return Outcome("", r["doubtful"])


FLOOR = 0.2
"""``CODERAG_ABSENT_TERM_FLOOR``'s default, which ``soft`` reads."""


def soft(r: dict[str, Any]) -> Outcome:
    """Issue 41's policy: a missing word refuses only when the hits are weak (the rule's
    probability at least ``FLOOR``, or below the gate); a missing identifier or acronym always;
    the rule's verdict as before; an answer is doubtful when the rule doubts it (its own
    floor, as before) or a named term is missing."""
    if r["screen"] == "unsafe":
        return Outcome("unsafe")
    if r["screen"]:
        return Outcome("")
    if not r["hits"]:
        return Outcome("no_hits")
    weak = r["p"] is not None and r["p"] >= FLOOR
    missing = r["missing"]
    if missing and (r["below"] or refusing(missing, weak)):
        return Outcome("absent_term")
    if r["below"]:
        return Outcome("score_gate")
    return Outcome("", r["doubtful"] or bool(missing))


def unknown_doubt(r: dict[str, Any]) -> Outcome:
    """A candidate tried for the fifth trial's absent features asked in plain words, not
    shipped (docs/BENCHMARKS.md): ``soft``, and the doubt sentence too when a word the question
    was searched by occurs in no unit of the code base."""
    o = soft(r)
    return o if o.reason else Outcome("", o.doubtful or bool(r.get("unknown")))


POLICIES: dict[str, Callable[[dict[str, Any]], Outcome]] = {
    "today": today,
    "soft": soft,
    "unknown_doubt": unknown_doubt,
}
"""The policies ``--policy`` names."""


def table(rows: list[dict[str, Any]], policy: Callable[[dict[str, Any]], Outcome]) -> list[str]:
    """The policy's figures per split and language, as Markdown rows."""
    out = [
        "| split | lang | answerable refused (by mechanism) | absent refused | absent answered "
        "with doubt | answerable answered with doubt |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    splits = sorted({r["split"] for r in rows}, key=lambda s: (s not in FROZEN, s))
    for split in splits:
        for lang in ("en", "zh", "all"):
            part = [r for r in rows if r["split"] == split and lang in ("all", r["lang"])]
            if not part:
                continue
            done = [(r, policy(r)) for r in part]
            ans = [o for r, o in done if not r["absent"]]
            absent = [o for r, o in done if r["absent"]]
            why: dict[str, int] = {}
            for o in ans:
                if o.reason:
                    why[o.reason] = why.get(o.reason, 0) + 1
            refused = sum(why.values())
            mech = ", ".join(f"{k} {v}" for k, v in sorted(why.items())) or "none"
            a_ref = sum(bool(o.reason) for o in absent)
            a_doubt = sum(not o.reason and o.doubtful for o in absent)
            ok_doubt = sum(not o.reason and o.doubtful for o in ans)
            out.append(
                f"| {split} | {lang} | {_share(refused, len(ans))} ({mech}) | "
                f"{_share(a_ref, len(absent))} | {a_doubt} of {len(absent) - a_ref} | "
                f"{ok_doubt} of {len(ans) - refused} |"
            )
    return out


def _share(n: int, of: int) -> str:
    return f"{n / of:.3f} ({n}/{of})" if of else "-"


def main(argv: list[str]) -> int:
    """Collect the rows where asked, then print each policy's table."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--split", action="append", required=True)
    ap.add_argument("--collect", action="store_true", help="retrieve again (else: saved rows)")
    ap.add_argument("--policy", action="append", choices=sorted(POLICIES))
    ap.add_argument("--rows", type=Path, default=ROWS, help="where the rows are kept")
    args = ap.parse_args(argv)
    args.rows.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for split in args.split:
        path = args.rows / f"refusal-{split}.jsonl"
        if args.collect or not path.exists():
            got = collect(split)
            path.write_text("".join(json.dumps(r) + "\n" for r in got), "utf-8")
        rows += [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    for name in args.policy or ["today"]:
        print(f"\n### policy {name}\n")
        print("\n".join(table(rows, POLICIES[name])))
    print(f"\ncommand: python -m bench.refusal_policy {' '.join(argv)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
