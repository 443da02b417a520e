"""Incremental reindexing on a real git history: after any sequence of updates the index equals a
full index of the same commit; renames keep their vectors; units carry their last commit."""

from __future__ import annotations

import shutil
from pathlib import Path

import git

from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.store import get_catalog
from coderag_embedder.encoder import get_encoders
from harness.snapshot import snapshot
from tests.conftest import FIXTURES, commit_all, parse


def test_incremental_updates_equal_a_full_index(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    for d in ("python", "go", "java", "typescript"):
        src = next(p for p in (FIXTURES / d).iterdir() if p.name != "expected.json")
        (root / d).mkdir(parents=True)
        shutil.copy(src, root / d / src.name)
    repo = git.Repo.init(root)
    first = commit_all(repo, "first")
    cat = get_catalog()
    cat.create_repo("inc", str(root), None, None)
    out = parse("inc")
    assert out.full_walk and cat.get_repo("inc").commit == first
    cached = lambda: cat.db.read("SELECT COUNT(*) FROM embed_cache")[0][0]  # noqa: E731

    # 1. edit one Go method
    go = root / "go" / "sample.go"
    go.write_text(go.read_text().replace('return "orders"', 'return "orders-v2"'))
    edit = commit_all(repo, "rename the service")
    before = cached()
    out = parse("inc")
    assert not out.full_walk and out.files == ["go/sample.go"]
    assert cached() == before + len(get_encoders())  # only the edited method was encoded
    name_unit = next(u for u in cat.units("inc", ["go/sample.go"]) if u.symbol == "Service.Name")
    assert name_unit.last_commit == edit and name_unit.last_author == "Ada"
    other = next(u for u in cat.units("inc", ["go/sample.go"]) if u.symbol == "NewService")
    assert other.last_commit == first

    # 2. add a file, delete one, rename one (content unchanged): no unit is re-encoded
    (root / "python" / "refunds.py").write_text("def refund(order):\n    return order.total\n")
    repo.index.remove(["java/Sample.java"], working_tree=True)
    repo.git.mv("typescript/sample.ts", "typescript/client.ts")
    commit_all(repo, "refunds, drop java, rename client")
    before = cached()
    out = parse("inc")
    assert not out.full_walk
    assert sorted(out.files) == ["python/refunds.py", "typescript/client.ts"]
    assert out.removed == ["java/Sample.java", "typescript/sample.ts"]
    # only refund() is encoded (by each encoder): the renamed file's units hit the cache
    assert cached() == before + len(get_encoders())
    assert {u.symbol for u in cat.units("inc", ["typescript/client.ts"])} >= {"UserClient.load"}

    # 3. uncommitted edits are indexed, and reverting them is noticed
    py = root / "python" / "sample.py"
    original = py.read_text()
    py.write_text(original.replace("empty order", "no items"))
    run_now(IndexRepo(repo="inc"))
    assert "no items" in "".join(u.text for u in cat.units("inc", ["python/sample.py"]))
    py.write_text(original)
    run_now(IndexRepo(repo="inc"))
    assert "no items" not in "".join(u.text for u in cat.units("inc", ["python/sample.py"]))

    # 4. a .gitignore change excludes a directory: a full walk drops its files
    (root / ".gitignore").write_text("go/\n")
    commit_all(repo, "ignore go")
    out = parse("inc")
    assert out.full_walk and "go/sample.go" in out.removed

    incremental = snapshot("inc")
    cat.create_repo("full", str(root), None, None)
    run_now(IndexRepo(repo="full"))
    assert snapshot("full") == incremental
    assert cat.get_repo("full").units == cat.get_repo("inc").units
