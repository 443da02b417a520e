"""Embedder service: unit vectors in Chroma, through a content-hash cache."""
