"""Batches of similar length: each batch pads only to its own longest text."""

from __future__ import annotations


def length_batches(texts: list[str], size: int) -> list[list[int]]:
    """Positions of the texts in batches of ``size``, shortest first, so each batch pads to a
    length close to its own texts' (a unit's vector does not depend on its batch-mates)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    return [order[i : i + size] for i in range(0, len(order), size)]
