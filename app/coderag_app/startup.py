"""What the server is loading while it starts (issue 43): each stage says so in the log when it
begins and ends, and ``/health`` says which one is running, so the first minute is not silent.

Standard library only: ``coderag serve`` imports it before it binds its port."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

log = logging.getLogger("coderag.startup")
"""The start-up log: one line as each stage begins and one as it ends."""


@dataclass(frozen=True)
class Snapshot:
    """The start-up as /health reports it: what is loading now, what is loaded (each with its
    seconds), the seconds since the process began loading, and the error that stopped it."""

    loading: str
    loaded: list[str]
    elapsed_s: float
    ready: bool
    error: str | None


@dataclass
class Progress:
    """The stages of one process's start-up, shared by the thread that loads and the requests
    that ask how far it is."""

    started: float = field(default_factory=time.monotonic)
    current: list[str] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)
    ready: bool = False
    error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> Snapshot:
        """A consistent copy for one answer."""
        with self.lock:
            return Snapshot(
                loading=self.current[-1] if self.current else "getting ready",
                loaded=list(self.loaded),
                elapsed_s=round(time.monotonic() - self.started, 1),
                ready=self.ready,
                error=self.error,
            )

    @contextmanager
    def stage(self, what: str, doing: str = "loading", done: str = "loaded") -> Iterator[None]:
        """Log ``loading WHAT ...`` now and ``loaded WHAT in N s`` once the block is done (or
        what stopped it); /health names it meanwhile (``doing``/``done``: other verbs)."""
        begun = time.monotonic()
        said = f"{doing} {what}"
        log.info("%s ...", said)
        with self.lock:
            self.current.append(said)
        try:
            yield
        except Exception as exc:
            log.error("%s failed: %s", said, str(exc) or type(exc).__name__)
            raise
        except BaseException:  # cancelled: the server is stopping before it was ready
            log.info("%s stopped", said)
            raise
        finally:
            with self.lock:
                self.current.remove(said)
        took = time.monotonic() - begun
        with self.lock:
            self.loaded.append(f"{what} ({took:.1f} s)")
        log.info("%s %s in %.1f s", done, what, took)

    def finish(self, error: str | None = None) -> None:
        """Mark the start-up done: ready, or stopped by ``error``."""
        with self.lock:
            self.ready = error is None
            self.error = error
        if error is None:
            log.info("ready in %.1f s", time.monotonic() - self.started)


PROGRESS = Progress()
"""This process's start-up (a server is one per process)."""


def show_log() -> None:
    """Print the start-up log, and each repository's index when complete, to stderr as uvicorn
    prints its own (``INFO:     ...``), once."""
    if log.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s:     coderag: %(message)s"))
    for shown in (log, logging.getLogger("coderag.index")):  # and when an index is complete
        shown.addHandler(handler)
        shown.setLevel(logging.INFO)
        shown.propagate = False  # a library's handler on the root logger would print it twice
