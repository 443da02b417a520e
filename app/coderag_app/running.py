"""The coderag server a command talks to: the one it names, else one listening where ``coderag
serve`` listens (``CODERAG_URL``, else ``HOST``/``PORT``), else none, and then what to do.

A command started beside a running server uses it: building the whole app in-process beside it
took 35 s a question, and from another folder it opened an empty data directory and blamed the
repository (issue 43)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from coderag.settings import Settings

PROBE_TIMEOUT_S = 1.0
"""How long a server may take to answer ``/health`` before the command looks elsewhere."""

_ANY_ADDRESS = ("", "0.0.0.0", "::", "[::]")


def default_url(settings: Settings) -> str:
    """Where ``coderag serve`` listens with these settings (an any-address as loopback)."""
    host = "127.0.0.1" if settings.host in _ANY_ADDRESS else settings.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


def candidates(settings: Settings) -> list[str]:
    """The URLs tried, in order: ``CODERAG_URL`` when set, then the serve default."""
    named = os.environ.get("CODERAG_URL", "").strip().rstrip("/")
    return list(dict.fromkeys([u for u in (named, default_url(settings)) if u]))


def answers(url: str) -> bool:
    """Whether a coderag server answers ``/health`` at ``url`` (up or degraded)."""
    try:
        r = httpx.get(f"{url}/health", timeout=PROBE_TIMEOUT_S)
        body = r.json()
    except (httpx.HTTPError, ValueError):
        return False
    return isinstance(body, dict) and "status" in body


def find(settings: Settings) -> str | None:
    """The first candidate URL a coderag server answers at, or None."""
    return next((url for url in candidates(settings) if answers(url)), None)


def local_index(settings: Settings) -> Path | None:
    """The data directory when it already holds an index (or a database is configured), so an
    in-process command has repositories to read; None where it would start empty."""
    data = settings.data_dir.expanduser().resolve()
    if settings.database_url or (data / "coderag.db").is_file():
        return data
    return None


def nowhere(settings: Settings, command: str) -> str:
    """What to do when no server answers and no index is here, said exactly."""
    tried = ", ".join(candidates(settings))
    data = settings.data_dir.expanduser().resolve()
    return (
        f"no coderag server answers at {tried}, and {data} holds no index.\n"
        f"Start one in another terminal:  coderag serve --index /path/to/your/repo\n"
        f"then run `coderag {command}` again (it finds the server at {default_url(settings)}), "
        f"or point it at one: --url http://HOST:PORT (or CODERAG_URL), "
        f"or at an index on disk: CODERAG_DATA_DIR=/path/to/data."
    )
