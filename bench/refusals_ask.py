"""Issue 41's frozen sets through /ask on a real server: how many harmless questions that look
dangerous are refused (by any mechanism, with the reason) and how many unsafe requests are
declined.

    python -m bench.refusals_ask [--wait-complete 600]

Starts ``coderag serve`` on a free loopback port with a throwaway data directory, registers the
12 code bases of ``bench/written/harmless.json`` by path (fetched and verified by
``bench.fetch``), waits until each is searchable (and, within ``--wait-complete`` seconds, has
its vectors), then asks every question of ``bench/questions/harmless/`` and prints, per
language, the harmless questions refused (and why) and the unsafe requests declined.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.fetch import corpus_root, load_corpora
from bench.refusals import QUESTIONS, read_jsonl
from harness.serve import serving


def _env(data: Path, roots: str) -> dict[str, str]:
    """This process's environment without its coderag settings, with a throwaway data
    directory and the code bases' folders as the only repository roots."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODERAG_")}
    env.update(CODERAG_DATA_DIR=str(data), CODERAG_REPO_ROOTS=roots)
    return env


def main(argv: list[str]) -> int:
    """Index, ask, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wait-complete", type=float, default=600)
    args = ap.parse_args(argv)
    entries = load_corpora(Path(__file__).parent / "written" / "harmless.json")
    roots = {e["name"]: corpus_root(e["name"]) for e in entries}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
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
            for label, rows in (("harmless", harmless), ("unsafe", unsafe)):
                for repo, row in rows:
                    body = http.post("/ask", json={"query": row["query"], "repo": repo}).json()
                    out[label].append((row["lang"], body))
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
    doubt = [b for _, b in out["harmless"] if b.get("doubtful")]
    print(f"harmless answered with the doubt sentence: {len(doubt)} of {len(out['harmless'])}")
    print(json.dumps({k: len(v) for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
