"""The wire contract of git history over line ranges (X7): the parser's history route and the
who/when answers that read it."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class LineRange(BaseModel):
    """Lines ``start_line..end_line`` of one file of a repository."""

    file: str = Field(..., min_length=1, max_length=1000)
    start_line: int = Field(..., ge=1)
    end_line: int = Field(..., ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> LineRange:
        if self.end_line < self.start_line:
            raise ValueError("end_line must not be before start_line")
        if self.file.startswith("/") or ".." in self.file.split("/"):
            raise ValueError("file must be a path inside the repository")
        return self


class HistoryRequest(BaseModel):
    """Line ranges whose git history is wanted; with ``log``, the commits that changed them,
    within ``since``/``until`` (ISO 8601 author dates) when given."""

    ranges: list[LineRange] = Field(..., min_length=1, max_length=20)
    log: bool = False
    since: str | None = None
    until: str | None = None
    oldest_first: bool = Field(
        False, description="the log from the oldest commit (who added it) instead of the newest"
    )
    pickaxe: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="with log: the commits that added or removed this text (git log -S)",
    )


class CommitFact(BaseModel):
    """One commit as git facts name it: short hash, author, ISO 8601 author date, subject."""

    commit: str
    author: str
    date: str
    summary: str = ""


class RangeChange(CommitFact):
    """A commit that changed a range, with the ``[first, last]`` lines it changed there (or, for
    a folder, the indexed ``files`` it changed there)."""

    ranges: list[list[int]] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)


class RangeHistory(BaseModel):
    """One range's last commit and, when asked, the commits that changed it (newest first); a
    range naming a folder (``folder``) is answered for the indexed files inside it."""

    file: str
    start_line: int
    end_line: int
    last: CommitFact | None = None
    changes: list[RangeChange] = Field(default_factory=list)
    folder: bool = False


class HistoryResponse(BaseModel):
    """Per range, its history; ``has_history`` is False when the repository has no git history."""

    repo: str
    has_history: bool
    ranges: list[RangeHistory]
