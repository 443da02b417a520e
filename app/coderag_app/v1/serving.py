"""The two use cases behind the /v1 routes: the repositories as models, and a chat request
answered through the ask use case (``coderag_generator.asking.ask``, as /ask and MCP answer),
whole or as ``chat.completion.chunk`` server-sent events."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from datetime import datetime
from typing import Any

from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from coderag.errors import InvalidInput, NotFound
from coderag.language import language
from coderag.schemas import AskRequest, Citation, Freshness
from coderag.store import refs
from coderag.store.repos import Repo
from coderag_app.v1 import errors
from coderag_app.v1.schemas import (
    AnswerMessage,
    ChatCompletion,
    ChatRequest,
    Choice,
    Cited,
    Model,
    ModelList,
    ModelState,
    Usage,
)
from coderag_generator import asking
from coderag_generator.answer import Answer, Done, Sampling
from coderag_generator.asking import Asker, Carried
from coderag_generator.backends import get_backend
from coderag_generator.conversation import Turn

PREFIX = "coderag/"
"""Every model id starts so, leaving room for a client's other providers."""

INSTRUCTION_ROLES = ("system", "developer")
"""Roles whose messages are the user's instruction to the answer backend."""


def model_id(repo: Repo) -> str:
    """``coderag/<name>``, or ``coderag/<name>@<ref>`` for a ref's row."""
    if repo.ref_of:
        return f"{PREFIX}{refs.label(repo.ref_of, repo.branch)}"
    return PREFIX + repo.name


def _created(stamp: str | None) -> int:
    try:
        return int(datetime.fromisoformat(stamp).timestamp()) if stamp else 0
    except ValueError:
        return 0


def models(rows: list[Repo]) -> ModelList:
    """Each repository and each of its refs as a model, repository first, then its refs."""
    out: list[Model] = []
    for repo, its_refs in refs.grouped(rows):
        pairs: list[tuple[Repo, str | None]] = [(repo, None)]
        pairs += [(r, r.branch or "") for r in its_refs]
        for row, ref in pairs:
            status, commit = row.status, row.commit
            out.append(
                Model(
                    id=model_id(repo) + (f"{refs.SEPARATOR}{ref}" if ref else ""),
                    created=_created(row.indexed_at),
                    coderag=ModelState(
                        repo=repo.name,
                        ref=ref,
                        status=status,
                        searchable=status == "ready" or bool(row.indexed_at),
                        complete=row.complete,
                        commit=commit,
                    ),
                )
            )
    return ModelList(data=out)


def parse_model(model: str) -> tuple[str, str | None]:
    """The repository and ref a model id names; NotFound for an id coderag does not serve."""
    if not model.startswith(PREFIX) or len(model) == len(PREFIX):
        raise NotFound(
            f"model {model!r} does not exist; models are named coderag/<repository> or "
            "coderag/<repository>@<ref> (GET /v1/models lists them)"
        )
    name, sep, ref = model[len(PREFIX) :].partition(refs.SEPARATOR)
    return name, (ref if sep else None)


def split(body: ChatRequest) -> tuple[str, list[Turn], str]:
    """The question (the last message, a user's), the earlier user and assistant turns, and the
    system and developer messages joined as the user's instruction."""
    last = body.messages[-1]
    if last.role != "user":
        raise InvalidInput(
            f"the last message is the {last.role!r}'s; it must be the user's question"
        )
    question = last.text().strip()
    if not question:
        raise InvalidInput("the last user message is empty; ask something about the code")
    turns = [
        Turn(m.role, m.text(), "")
        for m in body.messages[:-1]
        if m.role in ("user", "assistant") and m.text().strip()
    ]
    instruction = "\n\n".join(
        m.text().strip() for m in body.messages if m.role in INSTRUCTION_ROLES and m.text().strip()
    )
    return question, turns, instruction


def sources(citations: list[Citation]) -> str:
    """The citations as a markdown list under the answer, each with its last commit."""
    if not citations:
        return ""
    lines = ["", "", "**Sources**", ""]
    for c in citations:
        line = f"- `{c.file}:{c.start_line}-{c.end_line}`"
        if c.last_commit:
            line += f" — {c.last_commit[:12]}"
            if c.last_author:
                line += f" by {c.last_author}"
            if c.last_date:
                line += f", {c.last_date[:10]}"
        lines.append(line)
    return "\n".join(lines)


def freshness_line(fresh: Freshness | None, lang: str) -> str:
    """The index's commit and how far HEAD has moved since, as the answer's last line: a chat
    client shows only the text (the ``coderag`` field carries the same as numbers)."""
    if fresh is None or fresh.indexed_commit is None:
        return ""
    if lang == "zh":
        said = f"索引基于提交 {fresh.indexed_commit[:12]}"
        if fresh.commits_behind == 0:
            said += "（HEAD）"
        elif fresh.commits_behind and fresh.head_commit:
            said += (
                f"，落后 HEAD {fresh.commits_behind} 个提交（{fresh.head_commit[:12]}），"
                "重新索引可得到最新代码"
            )
        return f"\n\n_{said}。_"
    return f"\n\n_{fresh.note[:1].upper()}{fresh.note[1:]}._"


def text_of(done: Answer, question: str) -> str:
    """The assistant message: the answer, its sources and the index's freshness."""
    return (
        done.answer + sources(done.citations) + freshness_line(done.freshness, language(question))
    )


def _usage(done: Answer, question: str, turns: list[Turn], settings: Any) -> Usage:
    """The backend's own counts when a model answered; else the question, the turns and the
    answer counted under the backend's tokenizer (an answer decided without the model)."""
    prompt, completion = done.input_tokens, done.output_tokens
    if not prompt:
        count = get_backend(settings).count_tokens
        prompt = count(question) + sum(count(t.content) for t in turns)
        completion = completion or count(done.answer)
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def _cited(done: Answer) -> Cited:
    return Cited(
        citations=done.citations,
        refused=done.refused,
        reason=done.reason,
        clarify=done.clarify,
        routes_missing=done.routes_missing,
        backend=done.backend,
        freshness=done.freshness,
    )


def _chunk(ident: str, created: int, model: str, delta: dict, **extra: Any) -> str:
    data = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": extra.pop("finish", None)}],
        **extra,
    }
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def complete(body: ChatRequest, asker: Asker) -> ChatCompletion | StreamingResponse:
    """Answer a chat request with the ask use case: the last user message is the question, the
    earlier turns its conversation (a follow-up is rewritten as /ask sessions do)."""
    name, ref = parse_model(body.model)
    question, turns, instruction = split(body)
    await run_in_threadpool(refs.resolve, asker.catalog, name, ref)  # unknown: 404 before audit
    request = AskRequest(query=question, repo=name, ref=ref)
    carried = Carried(
        turns,
        Sampling(instruction, body.temperature, body.max_completion_tokens or body.max_tokens),
    )
    ident, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    if not body.stream:
        async with aclosing(asking.ask(request, asker, carried=carried)) as events:
            done = [e.answer async for e in events if isinstance(e, Done)][-1]
        return ChatCompletion(
            id=ident,
            created=created,
            model=body.model,
            choices=[Choice(message=AnswerMessage(content=text_of(done, question)))],
            usage=_usage(done, question, turns, asker.settings),
            coderag=_cited(done),
        )
    events = asking.ask(request, asker, report_errors=True, carried=carried)
    await anext(events)  # retrieval: a rejected question is an HTTP error, not a stream

    async def stream() -> AsyncIterator[str]:
        # the first chunk goes out as soon as retrieval is done, before the model starts
        yield _chunk(ident, created, body.model, {"role": "assistant", "content": ""})
        sent = held = ""
        async with aclosing(events):
            async for event in events:
                if isinstance(event, Done):
                    done = event.answer
                    final = text_of(done, question)
                    # the checked answer can differ from the tokens sent (a retry, a refusal,
                    # a dropped citation): then it follows them in full, after a rule
                    rest = final[len(sent) :] if final.startswith(sent) else "\n\n---\n\n" + final
                    if rest:
                        yield _chunk(ident, created, body.model, {"content": rest})
                    usage = _usage(done, question, turns, asker.settings)
                    yield _chunk(
                        ident,
                        created,
                        body.model,
                        {},
                        finish="stop",
                        usage=usage.model_dump(),
                        coderag=_cited(done).model_dump(),
                    )
                elif event.name == "token":
                    # trailing whitespace waits: the checked answer is stripped, and what was
                    # sent must stay a prefix of it
                    held += event.data["text"]
                    ready = held.rstrip()
                    if len(ready) > len(sent) and ready.startswith(sent):
                        yield _chunk(ident, created, body.model, {"content": ready[len(sent) :]})
                        sent = ready
                elif event.name == "error":
                    yield f"data: {json.dumps(errors.body(503, event.data['detail']))}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")
