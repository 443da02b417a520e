"""POST /embed: vectors for texts, from the same encoders that index the units (passages, or
queries for the retriever); GET /embed/spaces lists them; POST /embed/rerank scores pairs with
the cross-encoder."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Annotated, Literal

from fastapi import APIRouter, FastAPI
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from coderag.deps import SettingsDep, UserDep
from coderag.embedding import MAX_TEXT_CHARS, MAX_TEXTS
from coderag.errors import Conflict, NotFound
from coderag.responses import errors
from coderag.settings import get_settings
from coderag.spaces import MAIN, UNSAFE
from coderag_embedder.encoder import get_encoders
from coderag_embedder.queries import encoder_of, unsafe_reader
from coderag_embedder.rerank import score

router = APIRouter(tags=["embedder"])

Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]


@asynccontextmanager
async def lifespan(_: FastAPI):
    """Load the encoders now (the packaged e5 is converted on the first start): a bad model
    directory stops startup, and the first index does not wait for a model to load."""
    await run_in_threadpool(get_encoders, get_settings())
    await run_in_threadpool(unsafe_reader)  # beside them: the first question reads it
    yield


class EmbedRequest(BaseModel):
    """Texts to encode, in one vector space, as passages (units) or queries (questions)."""

    texts: list[Text] = Field(min_length=1, max_length=MAX_TEXTS)
    # spaces.NAMES and spaces.UNSAFE (tests/test_settings_groups.py)
    space: Literal["vector", "vector2", "unsafe"] = Field(
        "vector",
        description="`vector`: the main encoder; `vector2`: the second encoder; `unsafe`: the "
        "unsafe-request reader (queries only).",
    )
    kind: Literal["passage", "query"] = Field(
        "passage",
        description="`query` encodes questions (e5's `query: ` prefix) and never waits for an "
        "indexing batch; `passage` encodes code as the units are.",
    )


class EmbedResponse(BaseModel):
    """One normalised vector per text, and the encoder's fingerprint."""

    model: str
    dim: int
    space: str = MAIN
    kind: str = "passage"
    vectors: list[list[float]]


class Space(BaseModel):
    """A vector space and the encoder that feeds it."""

    name: str
    model: str
    dim: int


class SpacesResponse(BaseModel):
    """The vector spaces this embedder encodes."""

    spaces: list[Space]


class RerankRequest(BaseModel):
    """A question and the texts to score against it."""

    query: Text
    texts: list[Text] = Field(min_length=1, max_length=MAX_TEXTS)


class RerankResponse(BaseModel):
    """The cross-encoder's score per text."""

    model: str
    scores: list[float]


@router.post("/embed", responses=errors(404, 503))
async def embed(body: EmbedRequest, _user: UserDep) -> EmbedResponse:
    """Encode texts."""
    if body.space == UNSAFE and body.kind != "query":
        # no encoder makes passages of this space: as for a space no encoder feeds
        raise NotFound("no encoder feeds unsafe passages: the unsafe space reads questions only")
    encoder = await run_in_threadpool(encoder_of, body.space)
    if encoder is None:
        raise NotFound(
            f"no encoder feeds {body.space}: "
            + (
                "CODERAG_EMBED_MODEL_2 is not e5-small"
                if body.space == UNSAFE
                else "CODERAG_EMBED_MODEL_2 is empty"
            )
        )
    run = encoder.encode_query if body.kind == "query" else encoder.encode
    vectors = await run_in_threadpool(run, body.texts)
    return EmbedResponse(
        model=encoder.name,
        dim=encoder.dim,
        space=body.space,
        kind=body.kind,
        vectors=vectors.tolist(),
    )


@router.get("/embed/spaces", responses=errors(503))
async def spaces(_user: UserDep) -> SpacesResponse:
    """The vector spaces, each with its encoder's fingerprint and dimension."""
    encoders = dict(await run_in_threadpool(get_encoders))
    reader = await run_in_threadpool(unsafe_reader)
    if reader is not None:
        encoders[UNSAFE] = reader
    return SpacesResponse(
        spaces=[Space(name=n, model=e.name, dim=e.dim) for n, e in encoders.items()]
    )


@router.post("/embed/rerank", responses=errors(409, 503))
async def rerank(body: RerankRequest, settings: SettingsDep, _user: UserDep) -> RerankResponse:
    """Score each text against the query with the cross-encoder of ``CODERAG_RERANK_MODEL``."""
    if not settings.rerank_model:
        raise Conflict("this embedder has no cross-encoder: set CODERAG_RERANK_MODEL")
    scores = await run_in_threadpool(score, settings.rerank_model, body.query, body.texts)
    return RerankResponse(model=settings.rerank_model, scores=scores)
