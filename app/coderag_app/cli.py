"""``coderag`` command line: index, search, ask, serve, worker, export-audit, settings; repos,
reindex, health, mcp and copy-database (``commands.py``)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from coderag.settings import get_settings
from coderag_app import running, tryout
from coderag_app.commands import add_commands
from coderag_app.settings_groups import markdown_table

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from fastapi import FastAPI

    from coderag_generator.answer import Streamed


def _repo_name(path: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", path.resolve().name).strip("-._") or "repo"
    return name[:64]


def cmd_index(args: argparse.Namespace) -> int:
    """Index (or incrementally reindex) a local directory, with progress bars."""
    # imported here so that `coderag --help` and every other command start fast
    from tqdm import tqdm

    from coderag import chain
    from coderag.errors import NotFound
    from coderag.jobs import IndexRepo
    from coderag.queue import run_now
    from coderag.store import get_catalog
    from coderag_app.server import load_jobs

    load_jobs()
    root = Path(args.path).expanduser()
    if not root.is_dir():
        print(f"error: {args.path} is not a directory", file=sys.stderr)
        return 2
    name = args.name or _repo_name(root)
    catalog = get_catalog()
    try:
        catalog.get_repo(name)
    except NotFound:
        catalog.create_repo(name, str(root.resolve()), None, None)
    bars: dict[str, tqdm] = {}

    def show(_repo: str, stage: str, done: int, total: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            bar = bars[stage] = tqdm(
                total=total,
                desc=stage,
                unit="file" if stage in ("parsing", "blaming") else "unit",
                leave=True,
            )
        bar.total = total
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()

    stop = chain.listen(show)
    try:
        run_now(IndexRepo(repo=name))
    finally:
        stop()
        for bar in bars.values():
            bar.close()
    repo = catalog.get_repo(name)
    print(
        f"{repo.name}: {repo.status}, {repo.files} files, {repo.units} units, "
        f"{repo.skipped} skipped, commit {repo.commit or '-'}"
    )
    return 0 if repo.status == "ready" else 1


def _embed_in_process() -> None:
    """Queries of this command are embedded by the embedder's own functions, in this process
    (unless CODERAG_EMBEDDER_URL names an embedder service)."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag import embedding
    from coderag_embedder.queries import local

    embedding.use_local(local())


def cmd_search(args: argparse.Namespace) -> int:
    """Print the best units for a query."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag.deps import require_query, require_searchable
    from coderag.store import get_catalog
    from coderag_retriever.retrieval import retrieve

    settings = get_settings()
    query = require_query(args.query, settings)
    state = get_catalog().get_repo(args.repo)
    require_searchable(state)
    _embed_in_process()
    found = retrieve(args.repo, query, args.top_k, settings, state=state)
    for h in found.hits:
        print(f"{h.score:.3f}  {h.file}:{h.start_line}-{h.end_line}  {h.symbol}  ({h.kind})")
    if found.absent_terms:
        print(f"(none of these mentions {', '.join(found.absent_terms)}: the code probably does "
              "not answer this)")  # fmt: skip
    elif found.below_gate:
        print("(below the score gate: the code probably does not answer this)")
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    """Answer a question, streaming the tokens (``--json``: print /ask's JSON instead), through
    the running server when one answers, else from the index in this data directory."""
    settings = get_settings()
    url = args.url.rstrip("/") if args.url else running.find(settings)
    if url:
        return running.ask(url, args.query, args.repo, args.json, _cli_identity()[1])
    if running.local_index(settings) is None:
        print(f"error: {running.nowhere(settings, 'ask')}", file=sys.stderr)
        return 2
    return asyncio.run(_ask(args.query, args.repo, args.json))


def _cli_identity() -> tuple[str, dict[str, str]]:
    """The user this command's questions are audited as, and the headers that let it through the
    API: the first configured token's user, else the OS user."""
    principals = get_settings().principals()
    for token, principal in principals.items():
        return principal.user, {"authorization": f"Bearer {token}"}
    try:
        return "cli-" + getpass.getuser(), {}
    except (KeyError, OSError):
        return "cli", {}


async def _ask(query: str, repo: str, as_json: bool) -> int:
    """One question through the ask use case that /ask runs, against the services at their URLs
    or an app in this process."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag import audit
    from coderag.schemas import AskRequest
    from coderag.store import get_catalog
    from coderag_app.server import create_app
    from coderag_generator.asking import Asker, ask
    from coderag_generator.client import ParserClient, RetrieverClient, connect

    settings = get_settings()
    app = create_app()  # also embeds this command's queries in this process
    user, headers = _cli_identity()
    asker = Asker(
        user,
        connect(RetrieverClient, settings.retriever_url, app, headers),
        connect(ParserClient, settings.parser_url, app, headers),
        get_catalog(),
        settings,
    )
    # unvalidated, so a blank or long question gets /ask's own message
    request = AskRequest.model_construct(query=query, repo=repo, session_id=None)
    printer = running.Printer(as_json)
    # the question is the request: the /retrieve it makes in this process writes no row
    call = audit.current_call.set(audit.Call(user))
    try:
        return await _print_events(ask(request, asker, report_errors=True), printer)
    finally:
        audit.current_call.reset(call)


async def _print_events(events: AsyncIterator[Streamed], printer: running.Printer) -> int:
    """Print an answer's events as they come; 2 after an error event."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag_generator.answer import Done

    async for event in events:
        if isinstance(event, Done):
            printer.done(json.loads(json.dumps(event.payload(), default=str)))
        elif event.name == "error":
            print(f"error: {event.data['detail']}", file=sys.stderr)
            return 2
        elif event.name == "token":
            printer.token(event.data["text"])
        elif event.name == "retry":
            printer.retry()
    return 0


SERVICE_NAMES = ("parser", "embedder", "retriever", "generator")
"""The services ``serve --service`` may name, in ``server.SERVICES``' order (not imported here:
the port is bound before the services' code is loaded)."""


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the HTTP server (all services, or the ones named): the port is bound at once, the
    services load behind it (``/health`` says what is loading) and serve once warmed."""
    # imported here so that `coderag --help` and every other command start fast
    import uvicorn

    from coderag_app import grants_http, startup, stopping
    from coderag_app.booting import Boot
    from coderag_app.hosts import listen_token

    whole = tuple(f"coderag_{s}" for s in SERVICE_NAMES)
    services = tuple(f"coderag_{s}" for s in args.service) if args.service else whole
    root = Path(args.index).expanduser() if args.index else None
    if root is not None:
        _allow_root(root)
    if args.host:
        os.environ["CODERAG_HOST"] = args.host  # the Host-header check reads where we listen
    get_settings.cache_clear()
    settings = get_settings()
    host, port = settings.host, args.port or settings.port
    try:
        token = listen_token(host, settings, services == whole)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if token:
        os.environ["CODERAG_API_TOKENS"] = f"admin:{token}:admin"
        get_settings.cache_clear()
        print(
            f"coderag listens on {host} without CODERAG_API_TOKENS, so it made one admin token "
            f"for this run:\n\n    Authorization: Bearer {token}\n",
            flush=True,
        )
    grants_http.check(get_settings())  # a broken grants file stops start-up before the port
    if root is not None:
        if not root.is_dir():
            raise SystemExit(f"error: {root} is not a directory")
        tryout.print_tryout(_repo_name(root), f"http://{host}:{port}")

    def build() -> FastAPI:
        """The app, made on the boot's thread once the port is bound."""
        # imported here, behind the bound port: the services' code takes seconds to import
        from coderag_app.server import create_app, load_jobs

        if root is not None:
            load_jobs(services)
            name = _register(root)  # queued before the start-up heal runs, as it always was
            threading.Thread(
                target=tryout.print_examples_when_indexed,
                args=(name, f"http://{host}:{port}"),
                name="coderag-examples",
                daemon=True,
            ).start()
        return create_app(services)

    async def warm(app: FastAPI) -> None:
        # imported here, behind the bound port: it imports the store and the app's clients
        from coderag_app import warmup

        await warmup.warm(app, services, get_settings())

    startup.show_log()
    boot = Boot(build, warm)
    with running.announced(running.url_of(host, port), settings) as withdraw:
        server = stopping.server(
            uvicorn.Config(boot, host=host, port=port, log_level="info"), withdraw
        )
        boot.on_failure = lambda: setattr(server, "should_exit", True)
        server.run()
    if boot.error is not None:
        raise boot.error  # main() says what a setting or model got wrong, as before the boot
    return 0 if server.started else 3  # 3: uvicorn's own code for a port it could not bind


def _allow_root(root: Path) -> None:
    """Let ``POST /repos`` register paths under ``root`` too (``serve --index`` and make run)."""
    current = os.environ.get("CODERAG_REPO_ROOTS")
    base = str(Path.cwd()) if current is None else current
    os.environ["CODERAG_REPO_ROOTS"] = ",".join(p for p in (base, str(root.resolve())) if p)


def _register(root: Path) -> str:
    """Add a directory as a repository (or reindex it) and queue its indexing."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag.errors import NotFound
    from coderag.jobs import IndexRepo
    from coderag.queue import enqueue
    from coderag.store import get_catalog

    if not root.is_dir():
        raise SystemExit(f"error: {root} is not a directory")
    name = _repo_name(root)
    catalog = get_catalog()
    try:
        catalog.get_repo(name)
    except NotFound:
        catalog.create_repo(name, str(root.resolve()), None, None)
    enqueue(IndexRepo(repo=name))
    return name


def cmd_worker(args: argparse.Namespace) -> int:
    """Run an rq worker for one service's queue (needs REDIS_URL)."""
    # imported here so that `coderag --help` and every other command start fast
    import threading

    from redis import Redis
    from redis.exceptions import AuthenticationError
    from rq import Queue, Worker

    from coderag.queue import heal_forever
    from coderag_app.server import load_jobs

    settings = get_settings()
    if not settings.redis_url:
        print("error: set REDIS_URL to run a worker", file=sys.stderr)
        return 2
    load_jobs(tuple(f"coderag_{q}" for q in args.queues))  # only the services this worker runs
    conn = Redis.from_url(settings.redis_url)
    try:
        conn.ping()
    except AuthenticationError as exc:  # Redis has a password (compose's --requirepass)
        print(
            f"error: Redis refused this worker ({exc}): give REDIS_URL the server's password, "
            "redis://:PASSWORD@host:6379/0",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()  # every worker also restarts indexing whose worker died
    threading.Thread(target=heal_forever, args=(settings, stop), daemon=True).start()
    try:
        queues = [Queue(q, connection=conn) for q in args.queues]
        Worker(queues, connection=conn, name=args.name).work(with_scheduler=True, burst=args.burst)
    finally:
        stop.set()
    return 0


def cmd_export_audit(args: argparse.Namespace) -> int:
    """Write the audit log as CSV."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag.audit import export_csv
    from coderag.store import get_catalog

    chunks = export_csv(get_catalog(), args.since, args.until)
    if not args.output:
        sys.stdout.writelines(chunks)
        return 0
    with open(args.output, "w", encoding="utf-8", newline="") as out:
        out.writelines(chunks)
    return 0


def cmd_finetune_embedder(args: argparse.Namespace) -> int:
    """Contrastively fine-tune the encoder on the repository's own history (E5)."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag_training.embedder.finetune import main as finetune

    _embed_in_process()  # hard negatives are mined by searching
    return finetune(args.rest)


def cmd_finetune_generator(args: argparse.Namespace) -> int:
    """Train a LoRA adapter on trap samples built from an indexed repository (G6)."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag_training.generator.finetune import main as finetune

    return finetune(args.rest)


def cmd_eval(args: argparse.Namespace) -> int:
    """Self-check: questions from the repository's own commits and doc comments, scored as
    R@1/R@5/MRR@10 for coderag and for BM25 over units, beside the benchmark's own figures."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag.deps import require_searchable
    from coderag.errors import InvalidInput
    from coderag.store import get_catalog
    from coderag_parser import trees
    from coderag_retriever.selfscore import evaluate, load_reference, render

    if args.limit < 1:
        raise InvalidInput("--limit must be at least 1")
    reference = load_reference()  # before the search: a malformed file fails at once
    settings = get_settings()
    if running.local_index(settings) is None:
        # eval reads the index itself: a server running elsewhere lends its data directory,
        # else say what to do (an empty ./data blamed the repository: issue 43's second trial)
        served = next(iter(running.running_servers(settings)), None)
        if served is None:
            print(f"error: {running.nowhere(settings, 'eval')}", file=sys.stderr)
            return 2
        print(
            f"reading the index of the server at {served.url} ({served.data_dir})", file=sys.stderr
        )
        os.environ["CODERAG_DATA_DIR"] = served.data_dir
        get_settings.cache_clear()
        settings = get_settings()
    catalog = get_catalog()
    require_searchable(catalog.get_repo(args.name))
    _embed_in_process()  # commit questions run the whole search
    root = trees.root(catalog, settings, args.name)  # this host's clone, made if it has none
    report = evaluate(args.name, root if root.is_dir() else None, args.limit, settings)
    if args.json:
        print(json.dumps(report.to_json(reference), ensure_ascii=False, indent=2))
    else:
        print(render(report, reference))
    return 0


def cmd_settings(_: argparse.Namespace) -> int:
    """Print every setting as a markdown table."""
    print(markdown_table())
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; settings come from the environment (see `coderag settings`)."""
    p = argparse.ArgumentParser(
        prog="coderag",
        description="Questions about your own code base, answered with checked citations.",
        epilog="Settings are environment variables; `coderag settings` lists them.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("index", help=cmd_index.__doc__)
    s.add_argument("path")
    s.add_argument("--name", help="repository name (default: the directory's name)")
    s.set_defaults(func=cmd_index)
    s = sub.add_parser("search", help=cmd_search.__doc__)
    s.add_argument("query")
    s.add_argument("--repo", required=True)
    s.add_argument("-k", "--top-k", type=int, default=10)
    s.set_defaults(func=cmd_search)
    s = sub.add_parser("ask", help=cmd_ask.__doc__)
    s.add_argument("query")
    s.add_argument("--repo", required=True)
    s.add_argument("--json", action="store_true", help="print the answer as /ask's JSON")
    s.add_argument("--url", help="a running coderag server (default: the one at HOST:PORT)")
    s.set_defaults(func=cmd_ask)
    s = sub.add_parser("serve", help=cmd_serve.__doc__)
    s.add_argument("--host")
    s.add_argument("--port", type=int)
    s.add_argument("--service", action="append", choices=SERVICE_NAMES)
    s.add_argument("--index", metavar="PATH", help="also index this directory in the background")
    s.set_defaults(func=cmd_serve)
    s = sub.add_parser("worker", help=cmd_worker.__doc__)
    s.add_argument("queues", nargs="+", choices=["parser", "embedder", "retriever", "generator"])
    s.add_argument("--burst", action="store_true", help="exit when the queues are empty")
    s.add_argument(
        "--name", help="the worker's name in Redis (unique; default a random one), e.g. its host's"
    )
    s.set_defaults(func=cmd_worker)
    s = sub.add_parser("export-audit", help=cmd_export_audit.__doc__)
    s.add_argument("--since")
    s.add_argument("--until")
    s.add_argument("-o", "--output")
    s.set_defaults(func=cmd_export_audit)
    for name, func in (
        ("finetune-embedder", cmd_finetune_embedder),
        ("finetune-generator", cmd_finetune_generator),
    ):
        s = sub.add_parser(name, help=func.__doc__, add_help=False)
        s.add_argument("rest", nargs=argparse.REMAINDER, help="options; see --help")
        s.set_defaults(func=func)
    add_commands(sub)
    s = sub.add_parser("eval", help=cmd_eval.__doc__)
    s.add_argument("name")
    s.add_argument("--limit", type=int, default=100, help="most questions (default 100)")
    s.add_argument("--json", action="store_true", help="print JSON, with every question's ranks")
    s.set_defaults(func=cmd_eval)
    s = sub.add_parser("settings", help=cmd_settings.__doc__)
    s.set_defaults(func=cmd_settings)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``coderag`` command."""
    # imported here so that `coderag --help` and every other command start fast
    from pydantic import ValidationError

    from coderag.errors import CoderagError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CoderagError as exc:
        print(f"error: {exc.detail}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ()))
            name = f"CODERAG_{where.upper()}: " if where else ""
            print(f"error: {name}{err.get('msg')}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
