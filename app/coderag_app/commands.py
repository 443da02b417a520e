"""The CLI's repository, agent, access and database commands: ``repos``, ``reindex``, ``health``,
``mcp``, ``grants-sync``, ``copy-database`` and ``chroma``, each with ``--json`` where a script
reads the output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from coderag.settings import get_settings
from coderag_app import running


def _emit(args: argparse.Namespace, data: Any, lines: list[str]) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        print("\n".join(lines))


def cmd_repos(args: argparse.Namespace) -> int:
    """List the repositories with status, files, units and last commit."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag.store import get_catalog
    from coderag_parser.states import repo_out

    repos = get_catalog().list_repos()
    lines = [
        f"{r.name:<24} {r.status:<9} {r.files:>6} files {r.units:>7} units "
        f"{r.skipped:>5} skipped  {(r.commit or '-')[:12]}  {r.path or r.url or ''}"
        for r in repos
    ]
    _emit(
        args,
        [repo_out(r, git_detail=True).model_dump() for r in repos],
        lines or ["no repositories"],
    )
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    """Reindex a registered repository: now, or on the rq queue with REDIS_URL set."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag.jobs import IndexRepo
    from coderag.queue import enqueue, run_now
    from coderag.store import get_catalog
    from coderag_app.server import load_jobs
    from coderag_parser.states import repo_out

    catalog = get_catalog()
    catalog.get_repo(args.name)
    job = IndexRepo(repo=args.name)
    if get_settings().redis_url:
        job_id = enqueue(job)
        _emit(args, {"name": args.name, "queued": job_id}, [f"{args.name}: queued as {job_id}"])
        return 0
    load_jobs()
    run_now(job)
    repo = catalog.get_repo(args.name)
    line = (
        f"{repo.name}: {repo.status}, {repo.files} files, {repo.units} units, "
        f"commit {repo.commit or '-'}"
        + (f", error: {repo.error_detail or repo.error}" if repo.error else "")
    )
    _emit(args, repo_out(repo, git_detail=True).model_dump(), [line])
    return 0 if repo.status == "ready" else 1


def cmd_health(args: argparse.Namespace) -> int:
    """Health report of a repository: units against vectors per encoder, files, skip reasons,
    indexed commit against HEAD; exit 1 when it finds a problem."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag.store import get_catalog
    from coderag_parser.health import report

    h = report(get_catalog(), get_settings(), args.name)
    lines = [
        f"{h.repo}: {h.status}, {h.files} files, {h.units} units "
        f"(mean {h.mean_unit_lines} lines, {h.mean_unit_chars} chars, {h.empty_units} empty)",
        *(
            f"  {e.space:<8} {e.encoder}: {e.vectors} vectors, dimension {e.dimension}"
            f"{'' if e.agrees else '  MISMATCH'}"
            for e in h.encoders
        ),
        f"  skipped {h.skipped_total}: "
        + (", ".join(f"{k} {v}" for k, v in h.skipped.items()) or "none"),
        f"  indexed {h.indexed_commit or '-'}, HEAD {h.head_commit or '-'}"
        + ("" if h.up_to_date else "  (behind)"),
        *(f"  problem: {p}" for p in h.problems),
    ]
    _emit(args, h.model_dump(), lines)
    return 1 if h.problems else 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the MCP tools over stdio, for an editor or a terminal coding agent."""
    # imported here so that `coderag --help` and every other command start fast
    import anyio
    import httpx

    from coderag_app import mcp_server

    if args.token:
        mcp_server.STDIO_IDENTITY["authorization"] = f"Bearer {args.token}"
    mcp_server.STDIO_IDENTITY["x-user"] = args.user or mcp_server.stdio_user()
    settings = get_settings()
    url = args.url or running.find(settings)
    if url:
        server = mcp_server.build_server(
            lambda: httpx.AsyncClient(base_url=url, timeout=600), local_audit=False, remote=True
        )
        anyio.run(server.run_stdio_async)
        return 0
    if running.local_index(settings) is None:
        # an agent starts this from its own folder: an empty data/ there answers "no repository
        # named ..." to every call, the wrong cause (issue 43)
        print(f"error: {running.nowhere(settings, 'mcp')}", file=sys.stderr)
        return 2
    from coderag_app.server import create_app  # the services, only when served in-process

    app = create_app()
    server = mcp_server.build_server(
        lambda: httpx.AsyncClient(
            base_url="http://localhost", transport=httpx.ASGITransport(app=app), timeout=600
        )
    )

    async def serve() -> None:
        async with app.router.lifespan_context(app):
            await server.run_stdio_async()

    anyio.run(serve)
    return 0


def cmd_copy_database(args: argparse.Namespace) -> int:
    """Copy the catalog, audit log and sessions into a new, empty database (e.g. PostgreSQL)."""
    # imported here so that `coderag --help` and every other command start fast
    from pathlib import Path

    from coderag_app.transfer import copy_database

    source = args.source or get_settings().database
    if isinstance(source, str) and "://" not in source:
        source = Path(source).expanduser()
    if "://" not in args.to:
        print(
            "error: --to takes a database URL, e.g. postgresql://user@host/coderag", file=sys.stderr
        )
        return 2
    counts = copy_database(source, args.to)  # main() prints a CoderagError and exits 2
    lines = [f"{table:<20} {n:>9} rows" for table, n in counts.items()]
    lines.append(f"copied {sum(counts.values())} rows; set CODERAG_DATABASE_URL to the target")
    _emit(args, counts, lines)
    return 0


def cmd_chroma(args: argparse.Namespace) -> int:
    """Run the Chroma server on a folder, removing deleted collections' files from it."""
    # imported here so that `coderag --help` and every other command start fast
    from pathlib import Path

    from coderag.store.vectors import chroma_folder
    from coderag_app.chroma_server import SWEEP_EVERY_S, serve

    path = Path(args.path).expanduser() if args.path else chroma_folder(get_settings().data_dir)
    return serve(path, args.host, args.port, args.sweep_every or SWEEP_EVERY_S)


def cmd_grants_sync(args: argparse.Namespace) -> int:
    """Write the grants file from the teams of a GitHub or Gitea organization or a GitLab group
    (docs/ACCESS.md, Grants from the code host)."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag_app.grants_sync import run

    return run(args)


def add_commands(sub: Any) -> None:
    """Add this module's subcommands to the CLI's subparsers."""
    s = sub.add_parser("repos", help=cmd_repos.__doc__)
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=cmd_repos)
    s = sub.add_parser("reindex", help=cmd_reindex.__doc__)
    s.add_argument("name")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=cmd_reindex)
    s = sub.add_parser("health", help=cmd_health.__doc__)
    s.add_argument("name")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=cmd_health)
    s = sub.add_parser("mcp", help=cmd_mcp.__doc__)
    s.add_argument(
        "--url",
        help="a running coderag server (default: the one at HOST:PORT, else this data "
        "directory's index)",
    )
    s.add_argument("--token", help="API token for that server (CODERAG_API_TOKENS)")
    s.add_argument("--user", help="user name for the audit log (default: stdio-<OS user>)")
    s.set_defaults(func=cmd_mcp)
    s = sub.add_parser("copy-database", help=cmd_copy_database.__doc__)
    s.add_argument("--to", required=True, help="the target's URL: postgresql://user:pw@host/db")
    s.add_argument(
        "--from",
        dest="source",
        help="a SQLite file or database URL (default: this data directory's database)",
    )
    s.add_argument("--json", action="store_true", help="print the rows copied per table as JSON")
    s.set_defaults(func=cmd_copy_database)
    s = sub.add_parser("chroma", help=cmd_chroma.__doc__)
    s.add_argument("--path", help="Chroma's data folder (default: the data directory's chroma/)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--sweep-every", type=float, help="seconds between sweeps (default 5)")
    s.set_defaults(func=cmd_chroma)
    s = sub.add_parser("grants-sync", help=cmd_grants_sync.__doc__)
    s.add_argument("--host", required=True, choices=("github", "gitlab", "gitea"))
    s.add_argument(
        "--org", required=True, help="the organization (GitLab: the top group's path or id)"
    )
    s.add_argument(
        "--api-url",
        help="the API's root (default https://api.github.com, https://gitlab.com/api/v4; "
        "required for gitea: https://git.example.com/api/v1)",
    )
    s.add_argument(
        "--token-env",
        help="the environment variable holding the host's token (default GITHUB_TOKEN, "
        "GITLAB_TOKEN or GITEA_TOKEN)",
    )
    s.add_argument(
        "--users",
        help='a TOML file: [users] login = "coderag user", [repos] "org/name" = ["repo"]',
    )
    s.add_argument("--base", help="a grants file whose own entries the sync keeps")
    s.add_argument("--out", help="the grants file to write (default: CODERAG_GRANTS)")
    s.add_argument("--dry-run", action="store_true", help="print the file, write nothing")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.set_defaults(func=cmd_grants_sync)
