"""uvicorn's server for ``coderag serve``, with a hook that runs once it stops serving."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import uvicorn


def server(config: uvicorn.Config, on_exit: Callable[[], None]) -> uvicorn.Server:
    """uvicorn's server, calling ``on_exit`` once it has stopped serving: stopped by a signal,
    it raises that signal again to end the process, past any ``finally`` of its caller (a
    server's announcement outlived a clean stop: issue 43's fourth trial)."""

    class Server(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                try:
                    yield
                finally:
                    on_exit()

    return Server(config)
