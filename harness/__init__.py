"""Helpers that the tests and the benchmarks share: real processes (Redis, Chroma, workers),
a PostgreSQL server, and a snapshot of what the index holds. Neither ``tests`` nor ``bench``
imports the other; both import this."""
