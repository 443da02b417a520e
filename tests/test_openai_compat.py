"""The OpenAI-compatible routes through the official ``openai`` client: a real uvicorn server with
API tokens and a real indexed git repository; models, a cited answer, streaming, the protocol's
errors, a follow-up conversation and the audit rows."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.liveserver import live_server

ADMIN, READER = "admin-token", "reader-token"
TOKENS = f"ada:{ADMIN}:admin,bob:{READER}:reader"
QUESTION = "How does ProcessOrder validate the request's user id?"

pytestmark = pytest.mark.slow


def _wait_complete(base: str, name: str) -> None:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        body = httpx.get(
            f"{base}/repos/{name}", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=120
        )
        state = body.json()
        assert state["status"] != "error", state
        if state["status"] == "ready" and state["complete"]:
            return
        time.sleep(0.5)
    raise AssertionError("not complete in time")


def _error(exc: openai.APIStatusError) -> dict:
    """The OpenAI error object of a failed call, checked for the protocol's four fields."""
    body = exc.response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"]
    return body["error"]


def test_openai_client(sample_repo: Path, data_dir: Path) -> None:
    with live_server(data_dir, CODERAG_API_TOKENS=TOKENS) as base:
        r = httpx.post(
            f"{base}/repos",
            json={"name": "sample", "path": str(sample_repo)},
            headers={"Authorization": f"Bearer {ADMIN}"},
            timeout=120,
        )
        assert r.status_code == 202, r.text
        _wait_complete(base, "sample")
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=READER, max_retries=0, timeout=300)

        # Models: the repository, with its state in the extension field.
        models = client.models.list().data
        assert [m.id for m in models] == ["coderag/sample"]
        state = models[0].model_extra["coderag"]
        assert state["repo"] == "sample" and state["searchable"] and state["complete"]

        # A whole answer: the text cites the file in markdown, the extension the same ranges.
        reply = client.chat.completions.create(
            model="coderag/sample", messages=[{"role": "user", "content": QUESTION}]
        )
        text = reply.choices[0].message.content
        ext = reply.model_extra["coderag"]
        assert ext["refused"] is False and ext["citations"], ext
        cite = ext["citations"][0]
        assert cite["file"] == "src/go/sample.go"
        assert f"`{cite['file']}:{cite['start_line']}-{cite['end_line']}`" in text
        assert cite["last_commit"] and cite["last_author"]  # git facts ride along
        assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
        usage = reply.usage
        assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens

        # Streaming through the client: a role chunk first, text, then the extension and usage.
        chunks = list(
            client.chat.completions.create(
                model="coderag/sample",
                messages=[{"role": "user", "content": QUESTION}],
                stream=True,
            )
        )
        assert chunks[0].choices[0].delta.role == "assistant"
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
        assert streamed == text
        assert chunks[-1].choices[0].finish_reason == "stop"
        assert chunks[-1].model_extra["coderag"]["citations"] == ext["citations"]
        assert chunks[-1].usage.total_tokens == usage.total_tokens
        # ... and on the wire: chat.completion.chunk data lines ending in [DONE].
        with httpx.stream(
            "POST",
            f"{base}/v1/chat/completions",
            json={
                "model": "coderag/sample",
                "messages": [{"role": "user", "content": QUESTION}],
                "stream": True,
            },
            headers={"Authorization": f"Bearer {READER}"},
            timeout=120,
        ) as wire:
            assert wire.headers["content-type"].startswith("text/event-stream")
            lines = [line for line in wire.iter_lines() if line]
        assert all(line.startswith("data: ") for line in lines)
        assert lines[-1] == "data: [DONE]"
        assert {json.loads(x[6:])["object"] for x in lines[:-1]} == {"chat.completion.chunk"}

        # A system message is taken as an instruction and does not break the answer.
        instructed = client.chat.completions.create(
            model="coderag/sample",
            messages=[
                {"role": "system", "content": "Answer in one short paragraph."},
                {"role": "user", "content": QUESTION},
            ],
            temperature=0.2,
            max_tokens=200,
        )
        assert instructed.model_extra["coderag"]["citations"]

        # A follow-up: "it" is the earlier question's subject, found through the conversation.
        follow = client.chat.completions.create(
            model="coderag/sample",
            messages=[
                {"role": "user", "content": QUESTION},
                {"role": "assistant", "content": text},
                {"role": "user", "content": "What does it return when the user id is 0?"},
            ],
        )
        f_ext = follow.model_extra["coderag"]
        assert f_ext["refused"] is False, follow.choices[0].message.content
        assert f_ext["citations"][0]["file"] == "src/go/sample.go"

        # Errors in the protocol's shape, raised by the client as its own exception types.
        with pytest.raises(openai.NotFoundError) as nf:
            client.chat.completions.create(
                model="coderag/nope", messages=[{"role": "user", "content": QUESTION}]
            )
        assert _error(nf.value)["code"] == "model_not_found" and "nope" in str(nf.value)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": QUESTION}]
            )
        wrong = openai.OpenAI(base_url=f"{base}/v1", api_key="wrong", max_retries=0, timeout=300)
        with pytest.raises(openai.AuthenticationError) as bad_key:
            wrong.models.list()
        assert _error(bad_key.value)["type"] == "authentication_error"
        r = httpx.get(f"{base}/v1/models", timeout=120)
        assert r.status_code == 401 and "Authorization" in r.json()["error"]["message"]
        with pytest.raises(openai.BadRequestError) as empty:
            client.chat.completions.create(model="coderag/sample", messages=[])
        assert _error(empty.value)["param"] == "messages"
        with pytest.raises(openai.BadRequestError) as last:
            client.chat.completions.create(
                model="coderag/sample",
                messages=[
                    {"role": "user", "content": QUESTION},
                    {"role": "assistant", "content": "x"},
                ],
            )
        assert "must be the user's question" in _error(last.value)["message"]
        r = httpx.post(
            f"{base}/v1/chat/completions",
            content=b"{not json",
            headers={"Authorization": f"Bearer {READER}", "Content-Type": "application/json"},
            timeout=120,
        )
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
        r = httpx.post(
            f"{base}/v1/chat/completions",
            json={
                "model": "coderag/sample",
                "messages": [{"role": "user", "content": "x" * 2_000_000}],
            },
            headers={"Authorization": f"Bearer {READER}"},
            timeout=120,
        )
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"

        # Audit rows: the route, the caller, the model's repository, the question, the outcome.
        export = httpx.get(
            f"{base}/audit/export.csv", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=120
        ).text
        rows = [r for r in csv.DictReader(io.StringIO(export)) if r["endpoint"] == "chat"]
        ok = [r for r in rows if r["status"] == "ok"]
        assert len(ok) >= 5 and all(r["user"] == "bob" and r["repo"] == "sample" for r in ok)
        assert ok[0]["query"] == QUESTION
        assert "src/go/sample.go" in json.loads(ok[0]["retrieved_files"])
        assert any(r["status"] == "error 404" and r["repo"] == "nope" for r in rows)
