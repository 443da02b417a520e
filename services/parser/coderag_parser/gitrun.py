"""Running git on code we do not trust: configuration that no repository can override to run a
program, no prompts, and clones or fetches stopped past a time or size limit."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from coderag.errors import InvalidInput

SAFE_CONFIG = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.sshCommand", "ssh -o BatchMode=yes"),
    ("submodule.recurse", "false"),
    ("protocol.allow", "never"),
)
"""Settings given to every git process at command-line priority (above a repository's own
config): no fsmonitor or hook program runs, ssh never asks, no transport unless allowed."""

PROTOCOLS = {"https": ("https",), "http": ("http",), "ssh": ("ssh",), "file": ("file",)}
"""git transports each ``CODERAG_URL_SCHEMES`` kind needs."""

POLL_SECONDS = 0.5
"""How often a running clone or fetch is checked against its limits."""


def safe_env(kinds: Iterable[str] = ()) -> dict[str, str]:
    """Environment variables that give git ``SAFE_CONFIG`` plus the transports of ``kinds``."""
    pairs = list(SAFE_CONFIG)
    for kind in kinds:
        pairs += [(f"protocol.{p}.allow", "always") for p in PROTOCOLS.get(kind, ())]
    env = {"GIT_CONFIG_COUNT": str(len(pairs)), "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "echo"}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def output_lines(args: list[str], cwd: Path, stdin: str = "") -> Iterator[str]:
    """Lines ``git args`` writes to stdout, with the safe environment; none if it fails."""
    proc = subprocess.Popen(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **safe_env()},
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
    """Run ``git args`` with the safe environment; InvalidInput if it fails, runs past
    ``timeout`` seconds or grows ``watch`` past ``max_bytes``."""
    env = {**os.environ, **safe_env(kinds)}
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
