"""Issue 41's frozen sets through /ask on a real server: how many harmless questions that look
dangerous are refused (by any mechanism, with the reason) and how many unsafe requests are
declined.

    python -m bench.refusals_ask [--wait-complete 600] [--no-history] [--out ANSWERS.jsonl]

Starts ``coderag serve`` on a free loopback port with a throwaway data directory, registers the
12 code bases of ``bench/written/harmless.json`` (fetched and verified by ``bench.fetch``),
waits until each is searchable (and, within ``--wait-complete`` seconds, has its vectors), then
asks every question of ``bench/questions/harmless/`` and prints, per language, the harmless
questions refused (and why) and the unsafe requests declined. Each code base is registered as a
git repository of one commit holding its release archive (a fixed author and date), as a team's
repository has a history: a who/when question is then refused only if a refusal rule declines
it, not for the archive's missing ``.git`` (``--no-history`` registers the bare folders, as runs
before 2026-12-07 did; their who/when questions were refused ``no_history``). Each question
also goes to ``/search``, the chat route and MCP's ``ask`` tool (streamable HTTP): how often
``below_gate`` agrees with /ask refusing it as absent, and the chat route's and MCP's refusal
(with its reason) with /ask's. ``--out`` keeps each question's outcome.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.fetch import corpus_root, load_corpora
from bench.refusals import QUESTIONS, read_jsonl
from harness.mcp import mcp_tool
from harness.serve import serving


def _env(data: Path, roots: str) -> dict[str, str]:
    """This process's environment without its coderag settings, with a throwaway data
    directory and the code bases' folders as the only repository roots."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODERAG_")}
    env.update(CODERAG_DATA_DIR=str(data), CODERAG_REPO_ROOTS=roots)
    return env


ABSENT = ("no_hits", "score_gate", "absent_term")
"""/ask's reasons for "the code does not hold the answer": what /search calls ``below_gate``."""

COMMITTER = {
    "GIT_AUTHOR_NAME": "Release Archive",
    "GIT_AUTHOR_EMAIL": "release@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-15T12:00:00+00:00",
    "GIT_COMMITTER_NAME": "Release Archive",
    "GIT_COMMITTER_EMAIL": "release@example.invalid",
    "GIT_COMMITTER_DATE": "2026-01-15T12:00:00+00:00",
}
"""Who made the one commit of each code base's repository, and when (fixed: runs compare)."""


def as_repository(source: Path, target: Path, version: str) -> Path:
    """A copy of ``source`` as a git repository with one commit holding every file."""
    shutil.copytree(source, target, symlinks=True)
    env = {**os.environ, **COMMITTER}
    for command in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A", "-f"],
        ["git", "commit", "-q", "--no-verify", "-m", f"Import release {version}"],
    ):
        subprocess.run(command, cwd=target, env=env, check=True, capture_output=True)
    return target


def main(argv: list[str]) -> int:
    """Index, ask, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wait-complete", type=float, default=600)
    ap.add_argument("--no-history", action="store_true", help="register the bare folders")
    ap.add_argument("--out", type=Path, help="write each question's outcome here (JSON lines)")
    args = ap.parse_args(argv)
    entries = load_corpora(Path(__file__).parent / "written" / "harmless.json")
    roots = {e["name"]: corpus_root(e["name"]) for e in entries}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        if not args.no_history:
            roots = {
                e["name"]: as_repository(
                    roots[e["name"]], Path(tmp) / "repos" / e["name"], e["version"]
                )
                for e in entries
            }
        env = _env(data, ",".join(str(r) for r in roots.values()))
        # its log lies beside the data directory and goes with it
        with (
            serving(env, log=data.parent / "serve.log", cwd=None, timeout=300) as server,
            httpx.Client(base_url=server.base, timeout=300) as http,
        ):
            for name, root in roots.items():
                r = http.post("/repos", json={"name": name, "path": str(root)})
                assert r.status_code == 202, r.text
            deadline = time.monotonic() + args.wait_complete
            for name in roots:
                while True:
                    state = http.get(f"/repos/{name}").json()
                    assert state["status"] != "error", state
                    if state["status"] == "ready" and (
                        state["complete"] or time.monotonic() > deadline
                    ):
                        break
                    time.sleep(1)
                print(f"{name}: {state['units']} units, complete {state['complete']}")
            harmless = [
                (p.stem, row)
                for p in sorted((QUESTIONS / "harmless").glob("h_*.jsonl"))
                for row in read_jsonl(p)
            ]
            requests = read_jsonl(QUESTIONS / "harmless" / "unsafe.jsonl")
            unsafe = [(row["corpus"], row) for row in requests]
            out: dict[str, list[tuple[str, dict]]] = {"harmless": [], "unsafe": []}
            kept: list[dict] = []
            agree: dict[str, list[tuple[bool | None, bool, bool]]] = {"harmless": [], "unsafe": []}
            for label, rows in (("harmless", harmless), ("unsafe", unsafe)):
                for repo, row in rows:
                    body = http.post("/ask", json={"query": row["query"], "repo": repo}).json()
                    out[label].append((row["lang"], body))
                    search = {"query": row["query"], "repo": repo, "top_k": 5}
                    below = http.post("/search", json=search).json()["below_gate"]
                    chat = {"model": f"coderag/{repo}",
                            "messages": [{"role": "user", "content": row["query"]}]}  # fmt: skip
                    chatted = http.post("/v1/chat/completions", json=chat).json()["coderag"]
                    tool = {"query": row["query"], "repo": repo}
                    mcp = mcp_tool(server.base, {}, "ask", tool)
                    mcp_same = (mcp.get("refused"), mcp.get("reason")) == (
                        body.get("refused"), body.get("reason")
                    )  # fmt: skip
                    absent = bool(body.get("refused")) and body.get("reason") in ABSENT
                    # a request declined as unsafe is no verdict on the code: /search has none
                    same = None if body.get("reason") == "unsafe" else below == absent
                    agree[label].append(
                        (same, chatted.get("refused") == body.get("refused"), mcp_same)
                    )
                    kept.append({"set": label, "repo": repo, "query": row["query"],
                                 "lang": row["lang"], "refused": body.get("refused"),
                                 "reason": body.get("reason"), "doubtful": body.get("doubtful"),
                                 "search_below_gate": below,
                                 "chat_refused": chatted.get("refused"),
                                 "mcp_refused": mcp.get("refused"),
                                 "mcp_reason": mcp.get("reason")})  # fmt: skip
    print("| set | lang | n | refused | reasons |")
    print("| --- | --- | --- | --- | --- |")
    for label, answers in out.items():
        for lang in ("en", "zh"):
            part = [b for lg, b in answers if lg == lang]
            if label == "unsafe":
                hit = [b for b in part if b.get("reason") == "unsafe"]
            else:
                hit = [b for b in part if b.get("refused")]
            why = collections.Counter(b.get("reason") or "-" for b in hit)
            rate = len(hit) / len(part) if part else 0.0
            print(f"| {label} | {lang} | {len(part)} | {rate:.3f} ({len(hit)}) | {dict(why)} |")
    for label, pairs in agree.items():
        judged = [a for a, _, _ in pairs if a is not None]
        chat = sum(c for _, c, _ in pairs)
        mcp_agrees = sum(m for _, _, m in pairs)
        print(f"{label}: /search's below_gate agrees with /ask's refusal as absent on "
              f"{sum(judged)} of {len(judged)} (those not declined as unsafe), the chat "
              f"route's refusal with /ask's on {chat} of {len(pairs)}, MCP ask's refusal and "
              f"reason on {mcp_agrees} of {len(pairs)}")  # fmt: skip
    doubt = [b for _, b in out["harmless"] if b.get("doubtful")]
    print(f"harmless answered with the doubt sentence: {len(doubt)} of {len(out['harmless'])}")
    print(json.dumps({k: len(v) for k, v in out.items()}))
    if args.out is not None:
        args.out.write_text("".join(json.dumps(k, ensure_ascii=False) + "\n" for k in kept))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
