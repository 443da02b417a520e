"""What the retriever's in-memory index holds for one file: its units, their keyword documents
(entered in the BM25 postings), symbol tokens and names. A one-file update reads and tokenizes
that file's shard only; the rest of the repository's shards are reused as they are."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from coderag.schemas import Unit
from coderag.store import Catalog
from coderag.store.symbols import Definition
from coderag_retriever.postings import Postings
from coderag_retriever.text import code_tokens, split_identifier, stem


@dataclass(frozen=True)
class FileShard:
    """One indexed file: its version (``Catalog.file_versions``) and, per unit in line order,
    the unit, its keyword document, its BM25 slot, its symbol tokens and the lower-cased names
    it defines."""

    sha: str
    units: tuple[Unit, ...]
    documents: tuple[list[str], ...]
    slots: tuple[int, ...]
    symbols: tuple[frozenset[str], ...]
    names: tuple[frozenset[str], ...]


def keyword_document(unit: Unit) -> list[str]:
    """Tokens BM25 indexes for a unit: path, symbol (twice: names matter), doc and code."""
    symbol = code_tokens(unit.symbol)
    return code_tokens(unit.file) + symbol + symbol + code_tokens(unit.doc) + code_tokens(unit.text)


def symbol_token_set(unit: Unit) -> frozenset[str]:
    """Stemmed parts of a unit's qualified name (``Session.resolve_redirects`` -> session,
    resolve, redirect)."""
    words: set[str] = set()
    for piece in unit.symbol.replace("(", " ").replace(")", " ").replace("*", " ").split("."):
        for part in split_identifier(piece.strip()):
            words.add(stem(part))
    return frozenset(w for w in words if len(w) > 1)


def _plain(name: str) -> str:
    return name.replace("(", "").replace(")", "").replace("*", "")


def unit_names(unit: Unit, symbol_rows: Iterable[tuple[str, str]]) -> frozenset[str]:
    """Lower-cased names a unit defines: its qualified symbol and last component (not for blocks
    and files), and the symbol-table names (constants, variables) inside it."""
    names: set[str] = set()
    if unit.kind not in ("block", "file"):
        sym = _plain(unit.symbol.split("[part")[0])
        names.update((sym.lower(), sym.rsplit(".", 1)[-1].lower()))
    for name, qualified in symbol_rows:
        names.update((name.lower(), _plain(qualified.lower())))
    return frozenset(names)


def named_tokens(names: Iterable[str]) -> set[str]:
    """Stemmed parts of the names' last components: constants inside blocks join the symbol
    route too."""
    return {
        stem(part)
        for name in names
        for part in split_identifier(name.rsplit(".", 1)[-1])
        if len(part) > 1
    }


def make_shard(
    sha: str,
    units: list[Unit],
    symbol_rows: dict[str, list[tuple[str, str]]],
    postings: Postings,
    known: FileShard | None = None,
) -> FileShard:
    """A file's shard, its documents entered in ``postings``; ``known`` is the file's previous
    shard, whose documents are reused for units whose content did not change."""
    # line order, ties broken the same way whichever query read the rows
    units = sorted(units, key=lambda u: (u.start_line, u.end_line, u.symbol, u.id))
    reuse = {}
    if known is not None:
        reuse = {u.content_hash: d for u, d in zip(known.units, known.documents, strict=True)}
    documents = tuple(reuse.get(u.content_hash) or keyword_document(u) for u in units)
    names = tuple(unit_names(u, symbol_rows.get(u.id, ())) for u in units)
    return FileShard(
        sha=sha,
        units=tuple(units),
        documents=documents,
        slots=tuple(postings.add(d) for d in documents),
        symbols=tuple(
            symbol_token_set(u) | named_tokens(n) for u, n in zip(units, names, strict=True)
        ),
        names=names,
    )


def drop_shard(shard: FileShard, postings: Postings) -> None:
    """Take a shard's documents out of the postings."""
    for slot, doc in zip(shard.slots, shard.documents, strict=True):
        postings.remove(slot, doc)


def _symbol_rows(rows: Iterable[Definition]) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for r in rows:
        out[r.unit_id].append((r.name, r.qualified))
    return out


def read_all(catalog: Catalog, repo: str, postings: Postings) -> dict[str, FileShard]:
    """Every file's shard, from one read of the units and one of the symbol table."""
    shas = catalog.file_versions(repo)
    by_file: dict[str, list[Unit]] = {path: [] for path in shas}
    for u in catalog.units(repo):
        by_file.setdefault(u.file, []).append(u)
    rows = _symbol_rows(catalog.symbols.defined(repo))
    return {
        path: make_shard(shas.get(path, ""), units, rows, postings)
        for path, units in sorted(by_file.items())
    }


def read_file(
    catalog: Catalog, repo: str, path: str, sha: str, postings: Postings, known: FileShard | None
) -> FileShard:
    """One file's shard, from that file's rows only."""
    rows = _symbol_rows(catalog.symbols.defined_in(repo, path))
    return make_shard(sha, catalog.units(repo, [path]), rows, postings, known)
