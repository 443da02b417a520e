"""The wire contract: request and response bodies of every service, one family per resource."""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.config import JsonDict

REPO_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$")
"""Repository names: 1-64 letters, digits, '.', '_' or '-', starting and ending alphanumeric."""

RepoStatus = Literal["queued", "indexing", "ready", "error"]


REPO_NAME_PATTERN = r"^(?!.*\.\.)[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$"
"""``REPO_NAME`` without '..', as the OpenAPI schema states it."""


_PORT = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?"
_USER = r"[A-Za-z0-9._~][A-Za-z0-9._~-]{0,63}"
_CH = r"[^\u0000-\u0020\u007f]"
GIT_URL_PATTERN = (
    rf"^(?:https?://{_HOST}(?::{_PORT})?(?:/{_CH}*)?"
    rf"|ssh://(?:{_USER}@)?{_HOST}(?::{_PORT})?(?:/{_CH}*)?"
    r"|file:///[^\u0000-\u0020\u007f%]*"
    rf"|{_USER}@{_HOST}:(?!.*://){_CH}*)$"
)
"""Git URLs ``POST /repos`` reads: https/http without credentials, ssh:// or user@host:path,
file:///path. Which kinds and hosts a server allows is a setting (403 otherwise)."""

BRANCH_PATTERN = (
    r"^(?!-)(?!\.)(?!HEAD$)(?!.*\.\.)(?!.*//)(?!.*@\{)(?!.*\.lock(?:/|$))(?!.*/\.)"
    r"(?!.*[/.]$)[^\u0000-\u0020\u007f~^:?*\[\\]{1,255}$"
)
"""Branch names ``git check-ref-format --branch`` accepts."""

MAX_REFS = 64
"""Refs one repository may index beside its own branch."""

SESSION_ID_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
"""Session ids: 1-128 letters, digits, '.', '_' or '-'."""

QUERY_PATTERN = r"\S"
"""A query has at least one character that is not white space."""


def check_repo_name(name: str) -> str:
    """Return ``name`` if it is a valid repository name, else raise ValueError."""
    if not REPO_NAME.fullmatch(name) or ".." in name:
        raise ValueError(
            "name must be 1-64 characters of letters, digits, '.', '_' or '-', "
            "starting and ending with a letter or digit, without '..'"
        )
    return name


def unit_id(repo: str, file: str, start_line: int, end_line: int, symbol: str) -> str:
    """The id of the unit of ``repo`` (a repository or ref key) at ``file:start-end``."""
    raw = f"{repo}\0{file}\0{start_line}\0{end_line}\0{symbol}"
    return hashlib.sha1(raw.encode()).hexdigest()[:20]


class Unit(BaseModel):
    """One indexed piece of code: a function, method, class or text block."""

    repo: str
    file: str
    start_line: int
    end_line: int
    symbol: str
    kind: str
    language: str
    signature: str = ""
    doc: str = ""
    text: str
    is_test: bool = False
    facts: dict[str, Any] = Field(default_factory=dict)
    last_commit: str | None = None
    last_author: str | None = None
    last_date: str | None = None

    @property
    def id(self) -> str:
        """Stable identity of the unit across reindexing."""
        return unit_id(self.repo, self.file, self.start_line, self.end_line, self.symbol)

    @property
    def content_hash(self) -> str:
        """Hash of what the embedder sees; equal hashes are never embedded twice."""
        raw = f"{self.kind}\0{self.symbol}\0{self.signature}\0{self.doc}\0{self.text}"
        return hashlib.sha256(raw.encode()).hexdigest()


_ONE_SOURCE: JsonDict = {
    "oneOf": [
        {"required": ["path"], "properties": {"path": {"type": "string", "minLength": 1}}},
        {"required": ["url"], "properties": {"url": {"type": "string", "minLength": 1}}},
    ]
}


class RepoCreate(BaseModel):
    """Register a repository by local path or clone URL (exactly one of them)."""

    model_config = ConfigDict(json_schema_extra=_ONE_SOURCE)

    name: str = Field(
        json_schema_extra={"pattern": REPO_NAME_PATTERN},
        description="1-64 letters, digits, '.', '_' or '-', starting and ending with a letter "
        "or digit, without '..' (400 otherwise).",
    )
    path: str | None = Field(
        None,
        json_schema_extra={"pattern": r"^[^\u0000]+$"},
        description="A directory on the server under CODERAG_REPO_ROOTS ('~' and symlinks "
        "resolved first).",
    )
    url: str | None = Field(
        None,
        json_schema_extra={"pattern": GIT_URL_PATTERN},
        description="A git URL of a kind CODERAG_URL_SCHEMES allows (https by default) and a "
        "host CODERAG_URL_HOSTS allows (403 otherwise), without credentials.",
    )
    branch: str | None = Field(
        None,
        json_schema_extra={"pattern": BRANCH_PATTERN},
        description="A name `git check-ref-format --branch` accepts.",
    )
    refs: list[Annotated[str, Field(json_schema_extra={"pattern": BRANCH_PATTERN})]] = Field(
        default_factory=list,
        max_length=MAX_REFS,
        description=f"Other branches or tags to index beside `branch` (at most {MAX_REFS}); "
        "each is searched with `ref`, and shares the units it has in common with the others.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> RepoCreate:
        if bool(self.path) == bool(self.url):
            raise ValueError("give exactly one of 'path' (a local directory) or 'url'")
        return self


class StageProgress(BaseModel):
    """Vectors one space owes for the index in progress."""

    done: int = 0
    total: int | None = None


class RepoOut(BaseModel):
    """A repository's indexing state."""

    name: str
    status: RepoStatus
    path: str | None = None
    url: str | None = None
    branch: str | None = None
    commit: str | None = None
    files: int = 0
    units: int = 0
    skipped: int = 0
    skipped_by_reason: dict[str, int] = Field(
        default_factory=dict,
        description="Files left out, by reason: unsupported_type, too_large, binary, not_utf8, "
        "generated, minified, unreadable, symlink, too_deep, parse_error, parser_crash.",
    )
    indexed_at: str | None = None
    error: str | None = None
    error_detail: str | None = Field(
        None,
        description="Admins only: the whole error when `error` stands in for git's own output "
        "(which can quote a file the repository links to and names the server's paths).",
    )
    progress: str | None = None
    complete: bool = Field(
        False,
        description="True once every stage is done (vectors included); `ready` with "
        "`complete` false means keyword, symbol and exact search work while vectors fill in.",
    )
    stages: dict[str, StageProgress] = Field(
        default_factory=dict,
        description="Vectors written per space (`vector`, `vector2`) by the index in progress.",
    )
    eta_s: float | None = Field(
        None, description="Rough seconds until `complete`, from the vectors' rate so far."
    )
    searchable_at: str | None = Field(
        None, description="When the last index's keyword stage was published."
    )
    refs: list[RefOut] = Field(
        default_factory=list,
        description="Other branches and tags indexed for this repository "
        "(POST /repos/{name}/refs).",
    )


class RefCreate(BaseModel):
    """Index another branch or tag of a registered repository."""

    ref: str = Field(
        json_schema_extra={"pattern": BRANCH_PATTERN},
        description="A branch or tag name `git check-ref-format --branch` accepts.",
    )


class RefOut(BaseModel):
    """A branch or tag's indexing state (the fields of a repository's state)."""

    ref: str
    status: RepoStatus
    commit: str | None = None
    files: int = 0
    units: int = 0
    skipped: int = 0
    indexed_at: str | None = None
    error: str | None = None
    error_detail: str | None = Field(
        None,
        description="Admins only: the whole error when `error` stands in for git's own output "
        "(which can quote a file the repository links to and names the server's paths).",
    )
    progress: str | None = None
    complete: bool = False
    stages: dict[str, StageProgress] = Field(default_factory=dict)
    eta_s: float | None = None
    searchable_at: str | None = None


class SearchRequest(BaseModel):
    """A retrieval query."""

    query: str = Field(
        min_length=1,
        json_schema_extra={"pattern": QUERY_PATTERN},
        description="Not blank; at most CODERAG_MAX_QUERY_CHARS characters.",
    )
    repo: str
    top_k: int = Field(10, ge=1, description="At most CODERAG_MAX_TOP_K.")
    ref: str | None = Field(
        None,
        description="A branch or tag registered for the repository (POST /repos/{name}/refs); "
        "default: the branch the repository was registered with.",
    )


class SearchHit(BaseModel):
    """One retrieved unit, best first."""

    file: str
    start_line: int
    end_line: int
    symbol: str
    kind: str
    language: str
    score: float
    confidence: float | None = Field(
        None,
        description="How likely this hit answers the query (0-1), from the learned ranker; "
        "null when the fused order is used.",
    )
    signature: str = ""
    routes: dict[str, int] = Field(default_factory=dict)
    last_commit: str | None = None
    last_author: str | None = None
    last_date: str | None = None
    text: str | None = None


class Hit(SearchHit):
    """A retrieved unit as the generator reads it, filled once by the retriever (/retrieve):
    the /search hit with its code, the unit's id, doc comment, the parser's facts and whether it
    is test code; its vector similarity to the question (second encoder when it runs, else the
    main one); the hits among the others it calls (``calls``), the symbols of units that call it
    (``callers``) and whether test code calls it (``tested``, None when unknown); for the first
    few, the file lines of the statement that best does what the question asks (``focus_start``
    to ``focus_end``, None when the unit is too short to choose)."""

    similarity: float | None = None
    calls: list[str] = Field(default_factory=list)
    id: str = ""
    doc: str = ""
    facts: dict[str, Any] = Field(default_factory=dict)
    is_test: bool = False
    callers: list[str] = Field(default_factory=list)
    tested: bool | None = None
    focus_start: int | None = None
    focus_end: int | None = None

    def search_hit(self) -> SearchHit:
        """The /search form: no code, similarity or what the generator reads."""
        return SearchHit(**self.model_dump(include=set(SearchHit.model_fields)) | {"text": None})


class SearchResponse(BaseModel):
    """Ranked hits and the time taken."""

    results: list[SearchHit]
    took_ms: float
    below_gate: bool = Field(
        False,
        description="True when even the best hit is under the score gate: the code probably "
        "does not answer the query (/ask would refuse). Results still come back, best first.",
    )
    routes_ready: list[str] = Field(
        default_factory=list, description="Routes that ran with all their data in place."
    )
    routes_missing: list[str] = Field(
        default_factory=list,
        description="Routes still waiting for vectors (the repository is not `complete`); they "
        "search the batches written so far.",
    )


class RetrieveResponse(BaseModel):
    """Hits with code for the generator, ranked by the routes that have all their data."""

    results: list[Hit]
    took_ms: float
    below_gate: bool = Field(
        False,
        description="True when the code probably does not answer the query: /ask refuses "
        "(decided by the retriever, as /search's ``below_gate``).",
    )
    looked_for: list[str] = Field(
        default_factory=list,
        description="What the search looked for: the question's content words, a Chinese word "
        "with its English (what a refusal tells the user).",
    )
    unsafe: bool = Field(
        False,
        description="True when the learned rule reads the question as a request to get around a "
        "security control or at a secret's value: /ask declines it (G5).",
    )
    routes_missing: list[str] = Field(
        default_factory=list,
        description="Routes left out because their vectors are still being written.",
    )
    doubtful: bool = Field(
        False,
        description="Not below the gate, but the refusal rule still doubts that the code holds "
        "the answer: /ask's answer says the code may not contain it.",
    )
    weak: bool = Field(
        True,
        description="The hits are weak enough (the refusal rule's probability at least "
        "CODERAG_ABSENT_TERM_FLOOR, or no learned rule read them) that a word of the question "
        "none of them mentions refuses it; else /ask answers it with the doubt sentence first.",
    )


class AskRequest(BaseModel):
    """A question about a repository."""

    query: str = Field(
        min_length=1,
        json_schema_extra={"pattern": QUERY_PATTERN},
        description="Not blank; at most CODERAG_MAX_QUERY_CHARS characters.",
    )
    repo: str
    ref: str | None = Field(
        None,
        description="A branch or tag registered for the repository (POST /repos/{name}/refs); "
        "default: the branch the repository was registered with.",
    )
    session_id: str | None = Field(
        None,
        json_schema_extra={"pattern": SESSION_ID_PATTERN},
        description="Continue (or start) a conversation; it belongs to the user who started it.",
    )


class Citation(BaseModel):
    """A checked ``FILE:start-end`` range, with the last commit that touched its lines (X7) when
    the repository has history."""

    file: str
    start_line: int
    end_line: int
    last_commit: str | None = None
    last_author: str | None = None
    last_date: str | None = None


class Freshness(BaseModel):
    """The commit an index was built from and, when the repository's HEAD has moved since, how
    far (``commits_behind``), as numbers and in words."""

    indexed_commit: str | None = Field(None, description="Null for a folder without git.")
    head_commit: str | None = Field(
        None, description="HEAD now (a ref's tip); null where unread (a repository by URL)."
    )
    commits_behind: int | None = Field(
        None, description="Commits of HEAD the index lacks: 0 when current, null if unknown."
    )
    note: str = Field("", description="E.g. 'indexed at abc1234, 3 commits behind HEAD (...)'.")


class AskResponse(BaseModel):
    """An answer with the citations that passed the check."""

    answer: str
    citations: list[Citation]
    refused: bool
    took_ms: float
    clarify: bool = Field(
        False, description="The question was too vague; the answer asks what is meant."
    )
    reason: str = Field(
        "",
        description="Why the answer was decided without the model or refused: unsafe, vague, "
        "no_hits, score_gate, absent_term, model, no_citation, no_history, no_antecedent (a "
        'clarifying answer: "it" with no earlier turn), premise (the answer corrects the '
        "question's premise); empty for an answer.",
    )
    backend: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    session_id: str | None = None
    routes_missing: list[str] = Field(
        default_factory=list,
        description="Routes left out of this answer because the repository's vectors are "
        "still being written (the answer says so in a last line); empty once it is complete.",
    )
    doubtful: bool = Field(
        False,
        description="Answered, but the refusal rule still doubts that the code holds what was "
        "asked: the answer says first that the indexed code may not contain it.",
    )
    freshness: Freshness | None = Field(
        None, description="The commit the index was built from and how far HEAD has moved since."
    )


RepoOut.model_rebuild()  # refs: RefOut is defined after it
