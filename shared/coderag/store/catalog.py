"""The catalog: the store's one face. Code outside ``coderag.store`` reads and writes the
database only through it: its own methods for repositories, files and units (``repos``,
``files``, ``units``, one module per noun), and one object per other table (``sessions``,
``symbols``, ``clusters``, ``embed_cache``, ``deliveries``, ``audit_log``, ``stats``,
``chains``) and a fresh call graph per request (``graph()``)."""

from __future__ import annotations

from pathlib import Path

from coderag.store.audit_log import AuditLog
from coderag.store.chain_rows import ChainRows
from coderag.store.clusters import Clusters
from coderag.store.database import Database
from coderag.store.deliveries import Deliveries
from coderag.store.embed_cache import EmbedCache
from coderag.store.files import Files
from coderag.store.graph import Graph
from coderag.store.repos import Repos
from coderag.store.sessions import Sessions
from coderag.store.stats import Stats
from coderag.store.symbols import Symbols
from coderag.store.units import Units


class Catalog(Repos, Files, Units):
    """Reads and writes of every table of the catalog's database."""

    db: Database
    """The database (``coderag.store``'s modules only: everything else calls a method)."""
    sessions: Sessions
    """Chat sessions: owners and turns."""
    symbols: Symbols
    """The symbol table."""
    clusters: Clusters
    """The cluster route's labels."""
    embed_cache: EmbedCache
    """The embedder's vectors by content hash."""
    deliveries: Deliveries
    """Webhook deliveries already acted on."""
    audit_log: AuditLog
    """One row per search, ask, retrieve or MCP call."""
    stats: Stats
    """Index statistics for health reports."""
    chains: ChainRows
    """The indexing chain's lease, stages and vectors mark."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.sessions = Sessions(db)
        self.symbols = Symbols(db)
        self.clusters = Clusters(db)
        self.embed_cache = EmbedCache(db)
        self.deliveries = Deliveries(db)
        self.audit_log = AuditLog(db)
        self.stats = Stats(db)
        self.chains = ChainRows(db)

    @classmethod
    def open(cls, target: Path | str) -> Catalog:
        """A catalog over its own connection to a SQLite file or a database URL."""
        return cls(Database(target))

    def graph(self) -> Graph:
        """A call graph that remembers what it read (make one per request or job)."""
        return Graph(self.db)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.db.dialect

    def ping(self) -> None:
        """Check that the database answers (DatabaseDown when it does not)."""
        self.db.ping()

    def close(self) -> None:
        """Close the catalog's connections."""
        self.db.close()
