"""``coderag chroma``: the Chroma server of compose and of a deployment's main host, run as
``chroma run`` in a child process with its folder swept of deleted collections' segment folders
every few seconds (Chroma 1.x leaves them: ``coderag.store.vectors.sweep_segments``). The
process that deletes a repository talks to the server over HTTP and cannot reach its folder;
this process owns it."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from coderag.store.vectors import sweep_segments

SWEEP_EVERY_S = 5.0
"""How often the folder is swept (a listing and one read of Chroma's segments table)."""


def chroma_binary() -> str:
    """The ``chroma`` command of this environment."""
    return shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")


def serve(path: Path, host: str, port: int, sweep_every: float = SWEEP_EVERY_S) -> int:
    """Run ``chroma run`` on ``path`` until it exits or this process is told to stop (SIGTERM or
    SIGINT, passed on to the server); its exit code."""
    path.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen(
        [chroma_binary(), "run", "--path", str(path), "--host", host, "--port", str(port)]
    )

    def stop(signum: int, _frame: FrameType | None) -> None:
        if server.poll() is None:
            server.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    while server.poll() is None:
        try:
            removed = sweep_segments(path)
        except Exception as error:  # Chroma's database busy or being created: the next sweep
            print(f"coderag chroma: sweep skipped: {error}", file=sys.stderr, flush=True)
        else:
            if removed:
                print(
                    f"coderag chroma: removed {len(removed)} deleted collections' segment folders",
                    file=sys.stderr,
                    flush=True,
                )
        deadline = time.monotonic() + sweep_every
        while server.poll() is None and time.monotonic() < deadline:
            time.sleep(min(0.2, sweep_every))
    return server.returncode or 0
