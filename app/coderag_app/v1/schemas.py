"""The request and response bodies of the /v1 routes: the fields of OpenAI's chat API that
coderag reads or writes, plus the ``coderag`` extension that carries what only coderag knows."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from coderag.schemas import Citation, Freshness


class ErrorDetail(BaseModel):
    """OpenAI's error object: what was wrong, its kind, the field at fault, a code to branch on."""

    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """Every error of a /v1 route, in the shape OpenAI's clients parse."""

    error: ErrorDetail


class ModelState(BaseModel):
    """What a model (a repository or one of its refs) is: its name, ref and index state."""

    repo: str
    ref: str | None = Field(None, description="The branch or tag; null for the registered one.")
    status: str
    searchable: bool = Field(description="Questions are answered (keyword and symbol search).")
    complete: bool = Field(description="Every stage is done, vectors included.")
    commit: str | None = None


class Model(BaseModel):
    """One entry of ``GET /v1/models``."""

    id: str = Field(description="``coderag/<repository>`` or ``coderag/<repository>@<ref>``.")
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "coderag"
    coderag: ModelState


class ModelList(BaseModel):
    """``GET /v1/models``: every repository and ref the caller may ask."""

    object: Literal["list"] = "list"
    data: list[Model]


class TextPart(BaseModel):
    """One part of a message given as a list of parts; only text parts are read."""

    model_config = ConfigDict(extra="allow")

    type: str
    text: str = ""


class ChatMessage(BaseModel):
    """One message of the conversation."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        """The message's text (text parts joined, other parts left out)."""
        if isinstance(self.content, list):
            return "\n".join(p.text for p in self.content if p.type == "text")
        return self.content or ""


class StreamOptions(BaseModel):
    """``stream_options``: accepted; usage is always in the last chunk."""

    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatRequest(BaseModel):
    """``POST /v1/chat/completions``; fields coderag has no use for (``top_p``, ``user``, tools)
    are accepted and ignored so that clients which always send them work."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, description="An id from GET /v1/models.")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, gt=0)
    max_completion_tokens: int | None = Field(None, gt=0)
    n: int = Field(1, ge=1, le=1, description="One answer per request.")


class Usage(BaseModel):
    """Tokens under the answer backend's tokenizer."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class Cited(BaseModel):
    """The ``coderag`` extension of a completion: what /ask answers besides the text."""

    citations: list[Citation]
    refused: bool
    reason: str = ""
    clarify: bool = False
    routes_missing: list[str] = Field(default_factory=list)
    backend: str = ""
    freshness: Freshness | None = None


class AnswerMessage(BaseModel):
    """The assistant's message."""

    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    """The one answer."""

    index: int = 0
    message: AnswerMessage
    finish_reason: Literal["stop", "length"] = "stop"
    logprobs: None = None


class ChatCompletion(BaseModel):
    """A whole answer (``stream`` false)."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    coderag: Cited
