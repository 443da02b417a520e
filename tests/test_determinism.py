"""The same question ranks the same way in every process: Python salts string hashes per process,
so a route that walks a set of query words breaks score ties differently each time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = """
import importlib
import json
from types import SimpleNamespace

symbol = importlib.import_module("coderag_retriever.routes.symbol")

words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
index = SimpleNamespace(
    by_symbol_token={w: [i] for i, w in enumerate(words)},
    symbol_tokens=[frozenset({w}) for w in words],
    units=[SimpleNamespace(symbol=f"{w}_handler") for w in words],
)
query = SimpleNamespace(tokens=list(reversed(words)), lowered=" ".join(words))
print(json.dumps(symbol.rank(query, index, 8)))
"""


def _ranking(seed: int) -> list:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_symbol_route_breaks_ties_the_same_in_every_process() -> None:
    rankings = [_ranking(seed) for seed in (1, 2, 3, 4, 5)]
    assert all(r == rankings[0] for r in rankings), rankings
    # every word matches one unit equally well: ties fall to the units' order in the index
    assert [pos for pos, _ in rankings[0]] == list(range(8))
