"""``llm`` (Simon Willison's command-line chat client) against the OpenAI-compatible /v1 routes: a
real uvicorn server with API tokens and a real indexed git repository, and the real ``llm``
command configured exactly as README's "Chat clients" section documents it
(``extra-openai-models.yaml``, ``llm keys set``): a cited answer, streamed and not, a follow-up in
a conversation (``llm -c``), a wrong key, and the audit rows."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import git
import httpx
import pytest
import yaml

from tests.conftest import FIXTURES, commit_all
from tests.liveserver import ROOT, live_server, wait_complete

ADMIN, READER = "admin-token", "reader-token"
TOKENS = f"ada:{ADMIN}:admin,bob:{READER}:reader"
QUESTION = "How does ProcessOrder validate the request's user id?"
FOLLOW_UP = "What does it return when the user id is 0?"
LLM = Path(sys.executable).with_name("llm")
"""The ``llm`` command the dev extra installs beside this interpreter."""
CITE = re.compile(r"`([^`\s]+):(\d+)-(\d+)`")
"""A ``path:start-end`` citation as the answer's text writes it."""

pytestmark = pytest.mark.slow


def readme_config() -> str:
    """The ``extra-openai-models.yaml`` block README's Chat clients section shows for ``llm``."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Chat clients (OpenAI-compatible)\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^`llm` .*?```yaml\n(.*?)```", section, re.M | re.S)
    assert block, "README's Chat clients section has no `llm` yaml block"
    return block.group(1)


def run_llm(home: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """``llm ARGS`` with its own configuration directory, no plugins and no OpenAI settings of
    the environment, so only the extra-openai-models.yaml entry under test answers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_"))}
    env |= {"LLM_USER_PATH": str(home), "LLM_LOAD_PLUGINS": ""}
    done = subprocess.run(
        [str(LLM), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if ok:
        assert done.returncode == 0, f"llm {args}: {done.stderr}"
    return done


def citations(answer: str) -> list[tuple[str, int, int]]:
    return [(f, int(a), int(b)) for f, a, b in CITE.findall(answer)]


def lines_of(text: str, start: str, end: str) -> tuple[int, int]:
    """The 1-based lines from the first line containing ``start`` to the next equal to ``end``."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if start in line)
    last = next(i for i in range(first, len(lines)) if lines[i] == end)
    return first + 1, last + 1


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    """A git repository of three language fixtures: the Go order service the questions are
    about, and JavaScript and Python code with user ids of their own."""
    root = tmp_path / "orders"
    for lang in ("go", "javascript", "python"):
        (root / "src" / lang).mkdir(parents=True)
        for src in (FIXTURES / lang).glob("sample.*"):
            (root / "src" / lang / src.name).write_bytes(src.read_bytes())
    commit_all(git.Repo.init(root), "initial")
    return root


def test_llm_cli(small_repo: Path, data_dir: Path, tmp_path: Path) -> None:
    assert LLM.exists(), f"{LLM} is missing: make install (or pip install -e '.[dev]') installs llm"
    documented = readme_config()
    [entry] = yaml.safe_load(documented)
    assert set(entry) == {"model_id", "model_name", "api_base", "api_key_name"}, entry
    assert entry["model_name"] == "coderag/svc", entry
    assert entry["api_base"] == "http://127.0.0.1:8000/v1", entry
    go = (small_repo / "src/go/sample.go").read_text()
    process_order = lines_of(go, "func (s *Service) ProcessOrder(", "}")

    with (
        live_server(data_dir, CODERAG_API_TOKENS=TOKENS) as base,
        httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=120
        ) as admin,
    ):
        r = admin.post("/repos", json={"name": "orders", "path": str(small_repo)})
        assert r.status_code == 202, r.text
        assert wait_complete(admin, "orders", timeout=1200)["status"] == "ready"

        # llm's configuration directory: README's block, word for word but for this server's
        # port and this repository's name, and the key stored the way README says
        # (`llm keys set <api_key_name>`).
        home = tmp_path / "llm"
        home.mkdir()
        config = (
            documented.replace("http://127.0.0.1:8000/v1", f"{base}/v1")
            .replace("coderag/svc", "coderag/orders")
            .replace("coderag-svc", "coderag-orders")
        )
        (home / "extra-openai-models.yaml").write_text(config)
        [model] = yaml.safe_load(config)
        assert model == {
            **entry,
            "model_id": entry["model_id"].replace("svc", "orders"),
            "model_name": "coderag/orders",
            "api_base": f"{base}/v1",
        }
        key_name = model["api_key_name"]
        run_llm(home, "keys", "set", key_name, "--value", READER)
        assert json.loads((home / "keys.json").read_text())[key_name] == READER

        # A one-shot prompt, streamed (llm's default): the answer cites ProcessOrder's lines.
        first = run_llm(home, "-m", model["model_id"], QUESTION).stdout
        cited = citations(first)
        assert cited, first
        path, start, end = cited[0]
        assert path == "src/go/sample.go", first
        assert process_order[0] - 1 <= start <= end <= process_order[1], (cited, process_order)
        assert "**Sources**" in first

        # A follow-up in the same conversation: llm sends the earlier turn, and "it" is found
        # through it (the server rewrites the follow-up from the conversation).
        follow = run_llm(home, "-c", FOLLOW_UP).stdout
        assert [c[0] for c in citations(follow)][:1] == ["src/go/sample.go"], follow

        # The same words alone, not streamed: a new conversation, where "it" names nothing
        # (which file it then cites is the ranking's business, not the protocol's); the
        # server's token counts below show the follow-up carried the earlier turn.
        alone = run_llm(home, "-m", model["model_id"], "--no-stream", FOLLOW_UP).stdout
        assert alone.strip(), alone

        # llm's own log: one conversation of two turns, then another; the streamed responses
        # were assembled from chat.completion.chunk events, --no-stream's is a chat.completion;
        # the server's usage reached llm, and counted the earlier turn in the follow-up's input.
        logs = run_llm(home, "logs", "-n", "0", "--json").stdout
        one, two, three = sorted(json.loads(logs), key=lambda r: r["datetime_utc"])
        assert [r["prompt"] for r in (one, two, three)] == [QUESTION, FOLLOW_UP, FOLLOW_UP]
        assert one["conversation_id"] == two["conversation_id"] != three["conversation_id"]
        assert [r["response"] for r in (one, two, three)] == [
            first.strip(),
            follow.strip(),
            alone.strip(),
        ]
        objects = [r["response_json"]["object"] for r in (one, two, three)]
        assert objects == ["chat.completion.chunk", "chat.completion.chunk", "chat.completion"]
        assert all(r["response_json"]["model"] == "coderag/orders" for r in (one, two, three))
        assert all(r["input_tokens"] > 0 and r["output_tokens"] > 0 for r in (one, two, three))
        assert two["input_tokens"] > three["input_tokens"]

        # A wrong key: llm exits non-zero with the server's 401 and its reason, and no answer.
        run_llm(home, "keys", "set", key_name, "--value", "not-a-token")
        wrong = run_llm(home, "-m", model["model_id"], QUESTION, ok=False)
        assert wrong.returncode != 0
        assert "401" in wrong.stderr and "unknown API token" in wrong.stderr, wrong.stderr
        assert not wrong.stdout.strip()

        # The audit log: bob's three chats with their questions, the follow-up's retrieval led
        # by the Go file and its input counting the earlier turn; the wrong key's refusal.
        export = admin.get("/audit/export.csv").text
        rows = [r for r in csv.DictReader(io.StringIO(export)) if r["endpoint"] == "chat"]
        ok = [r for r in rows if r["status"] == "ok"]
        assert [(r["user"], r["repo"], r["query"]) for r in ok] == [
            ("bob", "orders", QUESTION),
            ("bob", "orders", FOLLOW_UP),
            ("bob", "orders", FOLLOW_UP),
        ]
        assert json.loads(ok[1]["retrieved_files"])[0] == "src/go/sample.go"
        assert int(ok[1]["llm_input_tokens"]) > int(ok[2]["llm_input_tokens"])
        assert [r["status"] for r in rows if r["user"] != "bob"] == ["error 401"]
