"""The coderag server a command talks to, and asking it: the one it names, else one listening
where ``coderag serve`` listens (``CODERAG_URL``, else ``HOST``/``PORT``), else one a running
``coderag serve`` announced on this machine (any port; those serving this data directory
first), else none, and then what to do.

A command started beside a running server uses it: building the whole app in-process beside it
took 35 s a question, and from another folder it opened an empty data directory and blamed the
repository (issue 43)."""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from coderag.settings import Settings

LOADING_WAIT_S = 600.0
"""Longest ``coderag ask`` waits for a server that is still loading its models."""

PROBE_TIMEOUT_S = 1.0
"""How long a server may take to answer ``/health`` before the command looks elsewhere."""

_ANY_ADDRESS = ("", "0.0.0.0", "::", "[::]")

MAX_ANNOUNCEMENT_BYTES = 4096
"""Largest announcement file read (a file that is not ours is skipped)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Announced:
    """A running ``coderag serve`` as it announced itself: where it answers, its process, the
    data directory it serves and when it started."""

    url: str
    pid: int
    data_dir: str
    started: float


def announcements() -> Path:
    """The folder where servers announce themselves: ``$XDG_STATE_HOME/coderag/servers``
    (``~/.local/state/coderag/servers``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "coderag" / "servers"


@contextmanager
def announced(url: str, settings: Settings) -> Iterator[Callable[[], None]]:
    """While the block runs, announce a server at ``url`` for commands started anywhere on this
    machine (``coderag mcp`` from an agent's folder found nothing on another port: issue 43's
    second trial); a folder that cannot be written only costs the announcement. The block gets
    the withdrawal itself, for a server that ends its process before the block can end."""
    folder = announcements()
    path = folder / f"{os.getpid()}.json"
    record = {
        "url": url,
        "pid": os.getpid(),
        "data_dir": str(settings.data_dir.expanduser().resolve()),
        "started": time.time(),
    }
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as f:
            json.dump(record, f)
        os.replace(f.name, path)
    except OSError as exc:
        log.warning("cannot announce the server in %s: %s", folder, exc)

    def withdraw() -> None:
        with suppress(OSError):
            path.unlink()

    try:
        yield withdraw
    finally:
        withdraw()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, though not ours to use
    return True


def running_servers(settings: Settings) -> list[Announced]:
    """Servers announced on this machine whose process is alive: those serving this data
    directory first, then the newest first; a dead one's announcement is removed."""
    found: list[Announced] = []
    try:
        paths = sorted(announcements().glob("*.json"))
    except OSError:
        return []
    for path in paths:
        try:
            if path.stat().st_size > MAX_ANNOUNCEMENT_BYTES or not path.is_file():
                continue
            data = json.loads(path.read_text("utf-8"))
            server = Announced(
                str(data["url"]), int(data["pid"]), str(data["data_dir"]), float(data["started"])
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(server.pid):
            found.append(server)
        else:
            with suppress(OSError):
                path.unlink()
    ours = str(settings.data_dir.expanduser().resolve())
    return sorted(found, key=lambda a: (a.data_dir != ours, -a.started))


def default_url(settings: Settings) -> str:
    """Where ``coderag serve`` listens with these settings (an any-address as loopback)."""
    return url_of(settings.host, settings.port)


def url_of(host: str, port: int) -> str:
    """The URL a server listening on ``host``:``port`` answers at (an any-address as loopback)."""
    host = "127.0.0.1" if host in _ANY_ADDRESS else host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def candidates(settings: Settings) -> list[str]:
    """The URLs tried, in order: ``CODERAG_URL`` when set, the serve default, then the servers
    announced on this machine."""
    named = os.environ.get("CODERAG_URL", "").strip().rstrip("/")
    announced_urls = [a.url for a in running_servers(settings)]
    return list(dict.fromkeys([u for u in (named, default_url(settings), *announced_urls) if u]))


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


class Printer:
    """Prints an answer as it streams and, at the end, only what the stream did not already
    show (the answer once, not twice), then its citations and the index's freshness."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.streamed = ""

    def token(self, text: str) -> None:
        """One streamed piece of the answer."""
        if not self.as_json:
            self.streamed += text
            print(text, end="", flush=True)

    def retry(self) -> None:
        """The model is asked again: what streamed so far is not the answer."""
        if not self.as_json:
            self.streamed = ""
            print("\n[retrying: the answer had no valid citation]", flush=True)

    def done(self, payload: dict[str, Any]) -> None:
        """The final answer: its JSON, or its text where the stream differs, and citations."""
        if self.as_json:
            print(json.dumps(payload, ensure_ascii=False, indent=2))
            return
        answer = str(payload.get("answer", ""))
        shown = self.streamed.strip()
        if shown and answer.strip().startswith(shown):
            # what streamed is the answer's start: print only the rest (a note on routes)
            print(answer.strip()[len(shown) :])
        else:
            prefix = "REFUSED: " if payload.get("refused") else ""
            print(("\n\n" if self.streamed else "") + prefix + answer)
        for c in payload.get("citations", []):
            print(f"  cites {c['file']}:{c['start_line']}-{c['end_line']}")
        fresh = payload.get("freshness") or {}
        if fresh.get("note"):
            print(f"  {fresh['note']}")


def ask(url: str, query: str, repo: str, as_json: bool, headers: dict[str, str]) -> int:
    """One question through a running server's /ask, its events streamed as they come; a
    server still loading its models is waited for (it says so, with ``Retry-After``)."""
    printer = Printer(as_json)
    body = {"query": query, "repo": repo}
    deadline, told = time.monotonic() + LOADING_WAIT_S, False
    try:
        while True:
            with httpx.stream(
                "POST",
                f"{url}/ask",
                json=body,
                headers={**headers, "accept": "text/event-stream"},
                timeout=httpx.Timeout(10, read=600),
            ) as r:
                wait = _retry_after(r)
                if wait is None or time.monotonic() + wait > deadline:
                    return _events(url, r, printer)
                r.read()
                if not told:
                    print(f"waiting: {_detail(r)}", file=sys.stderr, flush=True)
                    told = True
            time.sleep(wait)
    except httpx.HTTPError as exc:
        print(f"error: the server at {url} stopped answering: {exc}", file=sys.stderr)
        return 2


def _retry_after(r: httpx.Response) -> float | None:
    """Seconds to wait before asking again, when the server is starting (a 503 with
    ``Retry-After``); None for any other answer."""
    try:
        return float(r.headers["retry-after"]) if r.status_code == 503 else None
    except (KeyError, ValueError):
        return None


def _events(url: str, r: httpx.Response, printer: Printer) -> int:
    """Print the events of an /ask response as they stream; 2 after an error."""
    if r.status_code >= 400:
        r.read()
        print(f"error: {url}/ask answered {r.status_code}: {_detail(r)}", file=sys.stderr)
        return 2
    name, data = "", ""
    for line in r.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif not line and name:
            event = json.loads(data) if data else {}
            if name == "token":
                printer.token(str(event.get("text", "")))
            elif name == "retry":
                printer.retry()
            elif name == "error":
                print(f"error: {event.get('detail', event)}", file=sys.stderr)
                return 2
            elif name == "done":
                printer.done(event)
            name, data = "", ""
    return 0


def _detail(r: Any) -> str:
    """An error response's ``detail``, else its text."""
    try:
        return str(r.json().get("detail", r.text))
    except ValueError:
        return str(r.text)[:500]
