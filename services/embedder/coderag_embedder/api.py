"""POST /embed: vectors for texts, from the same encoder that indexes the units."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import APIRouter, FastAPI
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from coderag.deps import UserDep
from coderag.responses import errors
from coderag.settings import get_settings
from coderag_embedder.encoder import get_encoder

MAX_TEXTS = 256
"""Most texts one /embed call takes."""

MAX_TEXT_CHARS = 20_000
"""Longest text /embed takes; the encoder reads only its first tokens anyway."""

router = APIRouter(tags=["embedder"])


@asynccontextmanager
async def lifespan(_: FastAPI):
    """Load the encoder now: a bad model directory stops startup, not the first index."""
    await run_in_threadpool(get_encoder, get_settings())
    yield


class EmbedRequest(BaseModel):
    """Texts to encode."""

    texts: list[Annotated[str, Field(max_length=MAX_TEXT_CHARS)]] = Field(
        min_length=1, max_length=MAX_TEXTS
    )


class EmbedResponse(BaseModel):
    """One normalised vector per text, and the encoder's fingerprint."""

    model: str
    dim: int
    vectors: list[list[float]]


@router.post("/embed", responses=errors(503))
async def embed(body: EmbedRequest, _user: UserDep) -> EmbedResponse:
    """Encode texts."""
    encoder = get_encoder()
    vectors = await run_in_threadpool(encoder.encode, body.texts)
    return EmbedResponse(model=encoder.name, dim=encoder.dim, vectors=vectors.tolist())
