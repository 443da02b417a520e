"""What ``coderag serve --index`` (``make run``) prints for a new user: the banner while the
repository is indexed, then, once its index is complete, questions about its own code to try
(fixed questions about coderag itself were refused on another repository: issue 43's second
trial)."""

from __future__ import annotations

import json
import shlex
import time


def print_tryout(name: str, base: str) -> None:
    """The banner of ``serve --index``: where to look while the repository is indexed."""
    print(
        f"""
coderag is indexing {name!r} in the background (only what changed, when it was indexed before).
Open {base}/?repo={name} in a browser, or try:

  curl -s {base}/repos/{name}
  curl -s '{base}/audit/export.csv?since=2020-01-01T00:00:00Z'
  curl -s {base}/repos/{name}/health
  curl -s {base}/metrics
  MCP for coding agents: {base}/mcp (streamable HTTP), or `coderag mcp` over stdio

Questions to ask it follow once the index is complete (about its own code).
""",
        flush=True,
    )


EXAMPLES_WAIT_S = 7200.0
"""Longest the server waits for its --index repository before giving up on example questions."""


def _curl(base: str, route: str, query: str, repo: str, stream: bool = False) -> str:
    """A curl line posting ``query`` about ``repo`` to ``route``, quoted for a POSIX shell."""
    body = json.dumps({"query": query, "repo": repo}, ensure_ascii=False)
    sse = " -N -H 'Accept: text/event-stream'" if stream else ""
    return (
        f"  curl -s{sse} {base}/{route} -H 'Content-Type: application/json' -d {shlex.quote(body)}"
    )


def print_examples_when_indexed(name: str, base: str) -> None:
    """Once ``name``'s index is complete, print questions about its own code to try (the
    banner's fixed questions were about coderag itself: issue 43's second trial)."""
    # imported here so that `coderag --help` and every other command start fast
    from coderag.errors import NotFound
    from coderag.store import get_catalog

    deadline = time.monotonic() + EXAMPLES_WAIT_S
    while time.monotonic() < deadline:
        try:
            repo = get_catalog().get_repo(name)
        except NotFound:
            return
        if repo.status == "error":
            return
        if repo.status == "ready" and repo.complete:
            break
        time.sleep(1.0)
    else:
        return
    landmarks = get_catalog().symbols.most_called(name, 1)
    lines = [f"\n{name!r} is indexed. Ask it about its own code:\n"]
    if landmarks:
        s = landmarks[0]
        lines += [
            _curl(base, "ask", f"How does {s.qualified} work?", name),
            _curl(base, "ask", f"Who last changed {s.file}?", name),
            _curl(base, "ask", f"{s.qualified} 是怎么实现的？", name, stream=True),
            _curl(base, "search", s.name.replace("_", " "), name),
        ]
    else:
        lines.append(_curl(base, "ask", "What changed recently?", name))
    print("\n".join(lines) + "\n", flush=True)
