"""Running git on code we do not trust: never with a repository's own config (``coderag.gitsafe``'s
views), no prompts, and clones or fetches stopped past a time or size limit."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Generator, Iterable
from pathlib import Path

from coderag import gitsafe
from coderag.errors import InvalidInput

POLL_SECONDS = 0.5
"""How often a running clone or fetch is checked against its limits."""


def output_lines(args: list[str], root: Path, stdin: str = "") -> Generator[str]:
    """Lines ``git args`` writes to stdout, run on the view of the repository at ``root``; none
    if it fails or ``root`` is not in a repository."""
    try:
        env = gitsafe.view(root).env
    except gitsafe.NotARepository:
        return
    proc = subprocess.Popen(
        ["git", *args],
        cwd=root,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        # git reads all of stdin before it writes, so this write cannot deadlock on its output
        with proc.stdin:
            proc.stdin.write(stdin)
        for line in proc.stdout:
            yield line.rstrip("\n")
    except BrokenPipeError:
        return  # git stopped before reading its input (a bad argument): nothing to report
    finally:
        # a caller that has what it needs closes the generator early: stop git's walk there
        proc.kill()
        proc.stdout.close()
        proc.wait()


def tree_bytes(root: Path) -> int:
    """Bytes of every regular file under ``root`` (links not followed)."""
    total = 0
    stack = [root]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return total


def run_limited(
    args: list[str],
    *,
    cwd: Path,
    watch: Path,
    kinds: Iterable[str],
    timeout: float,
    max_bytes: int,
) -> None:
    """Run ``git args`` with the safe environment (in a clone the product made, or none: a local
    source is given as ``gitsafe.upload_source``); InvalidInput if it fails, runs past
    ``timeout`` seconds or grows ``watch`` past ``max_bytes``."""
    env = gitsafe.process_env(kinds)
    # a file, not a pipe: a chatty git must never block on a full pipe while we poll
    with tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(
            ["git", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
        )
        deadline = time.monotonic() + timeout
        why = ""
        while proc.poll() is None:
            if time.monotonic() > deadline:
                why = f"took longer than {timeout:g} s (CODERAG_GIT_TIMEOUT)"
            elif watch.exists() and tree_bytes(watch) > max_bytes:
                why = f"grew past {max_bytes} bytes (CODERAG_MAX_CLONE_BYTES)"
            if why:
                proc.kill()
                proc.wait()
                raise InvalidInput(f"git {args[0]} stopped: it {why}")
            time.sleep(POLL_SECONDS)
        stderr.seek(0)
        err = stderr.read().strip()
    if proc.returncode != 0:
        last = err.splitlines()[-1] if err else f"exit status {proc.returncode}"
        raise InvalidInput(f"git {args[0]} failed: {last}")
    if tree_bytes(watch) > max_bytes:
        raise InvalidInput(f"git {args[0]} grew past {max_bytes} bytes (CODERAG_MAX_CLONE_BYTES)")
