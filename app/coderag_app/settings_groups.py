"""The settings grouped by concern, as ``coderag settings`` and the README print them
(``python -m coderag_app.settings_groups`` prints the README's tables)."""

from __future__ import annotations

from coderag.settings import ENV_PREFIX, Settings

GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Server and services",
        "Where the server listens, its database, queue and vector store, and the other services.",
        (
            "host",
            "port",
            "data_dir",
            "database_url",
            "redis_url",
            "chroma_url",
            "vector_search_ef",
            "retriever_url",
            "parser_url",
            "api_url",
            "embedder_url",
            "generator_url",
        ),
    ),
    (
        "Access and limits",
        "Who may call the API, which repositories may be registered, and the largest requests.",
        (
            "api_tokens",
            "grants",
            "webhook_secret",
            "repo_roots",
            "allowed_hosts",
            "url_schemes",
            "url_hosts",
            "git_timeout",
            "max_clone_bytes",
            "max_body_bytes",
            "max_webhook_bytes",
            "max_query_chars",
            "max_top_k",
        ),
    ),
    (
        "Indexing",
        "Parsing repositories and the indexing jobs.",
        (
            "parse_workers",
            "max_file_bytes",
            "exclude",
            "deprecated_markers",
            "job_lease_s",
            "job_retries",
        ),
    ),
    (
        "Encoders",
        "The encoders that fill the vector spaces and embed questions.",
        (
            "embed_model",
            "embed_model_2",
            "embed_pooling",
            "embed_max_length",
            "embed_batch_size",
            "embed_precision",
            "e5_max_tokens",
            "device",
        ),
    ),
    (
        "Retrieval",
        "The routes, their fusion, the learned ranker and the reranker.",
        (
            "search_slots",
            "route_weights",
            "route_depth",
            "fusion",
            "rrf_k",
            "ranker",
            "ranker_path",
            "zh_vocab",
            "zh_dictionary",
            "zh_repo_words",
            "wrapper_callee",
            "query_rewrite",
            "history_days",
            "test_penalty",
            "expand_depth",
            "mmr_lambda",
            "cluster_min_size",
            "silhouette_floor",
            "rerank_model",
            "rerank_top",
            "rerank_weight",
        ),
    ),
    (
        "Relevance",
        "Whether the code holds the answer: the score gate and the refusal rule.",
        (
            "score_gate",
            "refusal_rule",
            "absent_term_floor",
            "unsafe_rule",
        ),
    ),
    (
        "Answers",
        "The answer backend and its sampling.",
        (
            "llm_backend",
            "llm_model_path",
            "llm_hf_model",
            "llm_adapter_path",
            "llm_compile",
            "llm_base_url",
            "llm_model",
            "llm_api_key",
            "llm_context",
            "llm_threads",
            "llm_gpu_layers",
            "temperature",
            "top_p",
            "max_new_tokens",
            "context_units",
        ),
    ),
)
"""The settings by concern, in the order ``Settings`` declares them: (title, what they are
for, field names); ``coderag settings`` prints a table per group."""


def markdown_table() -> str:
    """Render the settings as the README's markdown tables, one per group."""
    fields = Settings.model_fields
    parts = []
    for title, why, names in GROUPS:
        rows = [
            f"### {title}",
            "",
            why,
            "",
            "| variable | default | meaning |",
            "| --- | --- | --- |",
        ]
        for name in names:
            default = fields[name].default
            shown = "" if default in ("", None) else str(default)
            rows.append(
                f"| `{ENV_PREFIX + name.upper()}` | `{shown}` | {fields[name].description} |"
            )
        parts.append("\n".join(rows))
    return "\n\n".join(parts)


if __name__ == "__main__":
    print(markdown_table())
