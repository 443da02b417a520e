"""POST /v1/chat/completions: an OpenAI-compatible adapter of the ask use case."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from coderag_app.v1 import serving
from coderag_app.v1.errors import responses
from coderag_app.v1.schemas import ChatCompletion, ChatRequest
from coderag_generator.api import asker
from coderag_generator.asking import Asker

router = APIRouter(tags=["openai"])


@router.post(
    "/v1/chat/completions",
    response_model=ChatCompletion,
    responses={
        200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}},
        **responses(403, 404, 409, 503),
    },
)
async def chat_completions(body: ChatRequest, who: Annotated[Asker, Depends(asker)]):
    """Answer the last user message about the model's repository, with the earlier messages as
    the conversation; ``stream`` sends ``chat.completion.chunk`` events ending in ``[DONE]``."""
    return await serving.complete(body, who)
