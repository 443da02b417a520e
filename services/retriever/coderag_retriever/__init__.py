"""Retriever service: hybrid search over a repository's units."""
