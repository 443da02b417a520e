"""Training pairs mined from a repository's git history: the before/after versions of a changed
function, same-file negatives with no call relation to it, and the retriever's confusers, split
into train and held-out sets by function."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coderag.settings import get_settings
from coderag_embedder.encoder import unit_text
from coderag_parser.languages import has_grammar, language_of
from coderag_parser.units import parse_source
from coderag_retriever.search import rank

HardNegatives = Callable[[str], list[str]]
"""Given an anchor's text, texts that look close to it but are other code (the confusers)."""

FUNCTION_KINDS = frozenset({"function", "method"})
"""Unit kinds that form positive pairs."""

MAX_BLOB_BYTES = 1_000_000
"""Larger file versions are skipped while mining (generated or vendored code)."""

HARD_QUERY_CHARS = 1000
"""How much of an anchor's text the retriever sees when asked for confusers."""


@dataclass(frozen=True)
class Pair:
    """A changed function: its text before and after one commit, and texts that must not match."""

    file: str
    symbol: str
    commit: str
    anchor: str
    positive: str
    negatives: tuple[str, ...] = ()
    negative_symbols: tuple[str, ...] = ()
    hard_negatives: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Identity of the function across commits: file and qualified symbol."""
        return f"{self.file}::{self.symbol}"

    def all_negatives(self) -> tuple[str, ...]:
        """Same-file negatives followed by hard negatives."""
        return self.negatives + self.hard_negatives


@dataclass
class _Version:
    """The function units of one version of a file, with their call facts."""

    units: dict[str, Any] = field(default_factory=dict)
    callees: dict[str, set[str]] = field(default_factory=dict)
    duplicated: set[str] = field(default_factory=set)


def short_name(symbol: str) -> str:
    """The bare name of a qualified symbol (``Store.save`` -> ``save``)."""
    return symbol.rsplit(".", 1)[-1]


def head_of(text: str) -> str:
    """First line of a ``unit_text`` (language, kind, symbol): the identity used for masking."""
    return text.split("\n", 1)[0]


def _version(repo: str, path: str, language: str, source: str) -> _Version:
    """Parse one version of a file into its function units and who-calls-what."""
    parsed = parse_source(repo, path, language, source)
    out = _Version()
    by_id: dict[str, str] = {}
    for unit in parsed.units:
        if unit.kind not in FUNCTION_KINDS or "[part " in unit.symbol:
            continue
        if unit.symbol in out.units:
            out.duplicated.add(unit.symbol)  # overloads, property setters: ambiguous
        out.units[unit.symbol] = unit
        out.callees.setdefault(unit.symbol, set())
        by_id[unit.id] = unit.symbol
    for call in parsed.calls:
        caller = by_id.get(call["caller"])
        if caller is not None:
            out.callees[caller].add(call["callee"])
    for symbol in out.duplicated:
        out.units.pop(symbol, None)
    return out


def _related(a: str, b: str, *versions: _Version) -> bool:
    """Whether ``a`` calls ``b`` or ``b`` calls ``a`` in any of the versions (by bare name)."""
    return any(
        short_name(b) in v.callees.get(a, set()) or short_name(a) in v.callees.get(b, set())
        for v in versions
    )


def _normalised(text: str) -> str:
    return " ".join(text.split())


def _blob_text(blob: Any) -> str | None:
    if blob is None or blob.size > MAX_BLOB_BYTES:
        return None
    data = blob.data_stream.read()
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "replace")


def _stable_rng(*parts: str) -> random.Random:
    return random.Random(hashlib.sha1("\0".join(parts).encode()).hexdigest())


def mine_pairs(
    repo_path: str | Path,
    max_commits: int | None = 1000,
    *,
    rev: str = "HEAD",
    max_negatives: int = 4,
    hard_negatives: HardNegatives | None = None,
    max_hard_negatives: int = 4,
) -> list[Pair]:
    """Before/after pairs of the functions changed in the last ``max_commits`` commits of ``rev``
    (first-parent diffs), with same-file negatives that have no call relation to the pair."""
    import git

    repo = git.Repo(str(repo_path))
    name = Path(repo_path).resolve().name
    pairs: list[Pair] = []
    commits = list(repo.iter_commits(rev, max_count=max_commits))
    for commit in reversed(commits):  # oldest first: a stable, chronological order
        if not commit.parents:
            continue
        for diff in commit.parents[0].diff(commit):
            if diff.a_blob is None or diff.b_blob is None or diff.a_blob == diff.b_blob:
                continue  # added, deleted, or only a mode change
            path = diff.b_path or diff.a_path
            language = language_of(path)
            if language is None or not has_grammar(language):
                continue
            before_src, after_src = _blob_text(diff.a_blob), _blob_text(diff.b_blob)
            if before_src is None or after_src is None:
                continue
            before = _version(name, diff.a_path or path, language, before_src)
            after = _version(name, path, language, after_src)
            for symbol in sorted(before.units.keys() & after.units.keys()):
                old, new = before.units[symbol], after.units[symbol]
                if _normalised(old.text) == _normalised(new.text):
                    continue
                candidates = [
                    other
                    for other in sorted(after.units)
                    if other != symbol and not _related(symbol, other, before, after)
                ]
                picked = sorted(
                    _stable_rng(commit.hexsha, path, symbol).sample(
                        candidates, min(max_negatives, len(candidates))
                    )
                )
                anchor, positive = unit_text(old), unit_text(new)
                hard: tuple[str, ...] = ()
                if hard_negatives is not None:
                    own = head_of(anchor)
                    seen: list[str] = []
                    for text in hard_negatives(anchor):
                        if head_of(text) != own and text not in (anchor, positive, *seen):
                            seen.append(text)
                    hard = tuple(seen[:max_hard_negatives])
                pairs.append(
                    Pair(
                        file=path,
                        symbol=symbol,
                        commit=commit.hexsha,
                        anchor=anchor,
                        positive=positive,
                        negatives=tuple(unit_text(after.units[s]) for s in picked),
                        negative_symbols=tuple(picked),
                        hard_negatives=hard,
                    )
                )
    return pairs


def retriever_hard_negatives(repo_name: str, k: int = 5) -> HardNegatives:
    """Confusers from the retriever: the top-``k`` units ``rank`` returns for an anchor's text
    over the indexed repository ``repo_name``, other than units of the anchor's own symbol."""

    def confusers(text: str) -> list[str]:
        own = head_of(text)
        ranked = rank(repo_name, text[:HARD_QUERY_CHARS], k + 3, get_settings())
        out = [unit_text(r.unit) for r in ranked]
        return [t for t in out if head_of(t) != own][:k]

    return confusers


def split_by_symbol(
    pairs: Sequence[Pair], held_out: float = 0.2, seed: int = 0
) -> tuple[list[Pair], list[Pair]]:
    """Train and held-out pairs, split by function (every version of a function on one side);
    train negatives that are held-out functions are dropped, so no held-out text is trained on."""
    keys = sorted({p.key for p in pairs})
    random.Random(seed).shuffle(keys)
    n_held = min(max(1, round(len(keys) * held_out)), len(keys) - 1) if held_out > 0 else 0
    held = set(keys[:n_held])
    held_heads = {head_of(p.anchor) for p in pairs if p.key in held}
    train_pairs: list[Pair] = []
    for p in pairs:
        if p.key in held:
            continue
        kept = [
            (t, s)
            for t, s in zip(p.negatives, p.negative_symbols, strict=True)
            if f"{p.file}::{s}" not in held
        ]
        train_pairs.append(
            Pair(
                p.file,
                p.symbol,
                p.commit,
                p.anchor,
                p.positive,
                tuple(t for t, _ in kept),
                tuple(s for _, s in kept),
                tuple(t for t in p.hard_negatives if head_of(t) not in held_heads),
            )
        )
    return train_pairs, [p for p in pairs if p.key in held]
