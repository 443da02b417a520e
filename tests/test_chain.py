"""One stage context (issue 22): every service's job runs through ``coderag.chain.run``, which
checks the registration, takes or renews the chain's lease, skips, records failures and queues
the next job, on a real SQLite catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from coderag import chain
from coderag.chain import Skip, Stage
from coderag.errors import NotFound
from coderag.jobs import EmbedFiles, IndexRepo, Job, Result, Skipped
from coderag.store import get_catalog

DELETED = Skipped(repo="svc", skipped="deleted")
"""What a stage of the deleted repository answers."""


class Leased(Result):
    """A stage's result in these tests: the lease token it ran under."""

    token: str | None


def leased(stage: Stage) -> Leased:
    """A stage that only says which lease it ran under."""
    return Leased(repo=stage.repo, token=stage.token)


@pytest.fixture
def repo(tmp_path: Path) -> str:
    catalog = get_catalog()
    catalog.create_repo("svc", str(tmp_path), None, None)
    return catalog.registration("svc")


def test_the_first_stage_takes_the_lease_and_queues_the_next_job(
    repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued: list[Job] = []
    monkeypatch.setattr(chain, "enqueue", queued.append)

    def parse(stage: Stage) -> Leased:
        assert stage.registration == repo and stage.token
        with stage.renewing():
            stage.next(EmbedFiles(repo=stage.repo, registration=repo, lease=stage.token))
        return Leased(repo=stage.repo, token=stage.token)

    out = chain.run(IndexRepo(repo="svc"), parse, first=True)
    assert isinstance(out, Leased)
    assert queued == [EmbedFiles(repo="svc", registration=repo, lease=out.token)]
    # while that chain holds the lease, a new chain waits; its next stage goes on
    assert chain.run(IndexRepo(repo="svc"), parse, first=True) == Skipped(
        repo="svc", skipped="running"
    )
    assert chain.run(queued[0], leased) == Leased(repo="svc", token=out.token)
    assert chain.run(EmbedFiles(repo="svc", lease="an-older-chain"), leased) == Skipped(
        repo="svc", skipped="superseded"
    )


def test_a_deleted_repository_skips_the_stage_and_cleans_up(repo: str) -> None:
    cleaned: list[str | None] = []

    def gone(stage: Stage) -> Result:
        get_catalog().delete_repo(stage.repo)
        raise NotFound("deleted while it ran")

    job = EmbedFiles(repo="svc", registration=repo)
    assert chain.run(job, gone, on_deleted=cleaned.append) == DELETED
    assert cleaned == [repo]
    assert chain.run(job, leased, on_deleted=cleaned.append) == Skipped(
        repo="svc", skipped="deleted"
    )
    assert cleaned == [repo, repo]


def test_another_registration_of_the_name_is_left_alone(repo: str) -> None:
    cleaned: list[str | None] = []
    job = EmbedFiles(repo="svc", registration="an-earlier-registration")
    assert chain.run(job, leased, on_deleted=cleaned.append) == Skipped(
        repo="svc", skipped="deleted"
    )
    assert cleaned == []


def test_a_stage_may_skip_itself(repo: str) -> None:
    def published_elsewhere(stage: Stage) -> Result:
        raise Skip("deleted")

    out = chain.run(IndexRepo(repo="svc"), published_elsewhere, first=True)
    assert out == DELETED


def test_a_failing_stage_marks_the_repository_and_raises(repo: str) -> None:
    def broken(stage: Stage) -> Result:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        chain.run(IndexRepo(repo="svc"), broken, first=True)
    state = get_catalog().get_repo("svc")
    assert state.status == "error" and state.error == "RuntimeError: disk full"
    # the lease was let go: the retry starts at once
    again = chain.run(IndexRepo(repo="svc"), leased, first=True)
    assert isinstance(again, Leased) and again.token
