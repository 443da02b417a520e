"""Schemathesis over the OpenAPI schema against the real app (SQLite, embedded Chroma, the packaged
encoder, the extractive backend): every operation, data that fits the schema and data that does
not, then again with repository names bound to throw-away repositories so that search, ask,
reindex and delete act on real data. Every check must pass: no 5xx, every status and body the
one the schema declares, schema-valid requests accepted, invalid ones rejected."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation.modes import GenerationMode

from coderag.settings import get_settings
from coderag_app.server import create_app
from tests.conftest import commit_all, wait_ready

EXAMPLES = 12
"""Cases per operation, mode and schema variant: ~700 requests, under two minutes on 2 cores."""

NAMES = ("shop", "shop2", "gone")
"""Throw-away repositories the bound variant names (``gone`` is never registered)."""


UNSAYABLE = {"POST /repos/{name}/history"}
"""Operations whose rules JSON Schema cannot state (a range's end_line >= its start_line), so
schema-valid bodies are rightly refused; their 4xx paths are tested in tests/test_answers.py."""


def _throwaway(root: Path) -> dict[str, Path]:
    import git

    out = {}
    for name in NAMES:
        path = root / name
        path.mkdir(parents=True)
        (path / "orders.py").write_text(
            "def create_order(user_id: str, total: int) -> dict:\n"
            '    """Create an order for a user."""\n'
            '    return {"user": user_id, "total": total}\n'
        )
        commit_all(git.Repo.init(path), "init")
        out[name] = path
    return out


def _bound(raw: dict[str, Any], paths: dict[str, Path]) -> dict[str, Any]:
    """The schema with every repository name an enum of the throw-away names, and registration
    paths one of their directories (urls kept: only loopback hosts are allowed)."""
    schema = copy.deepcopy(raw)
    names = {"type": "string", "enum": list(NAMES)}
    for item in schema["paths"].values():
        for op in item.values():
            for param in op.get("parameters", []):
                if param["name"] == "name" and param["in"] == "path":
                    param["schema"] = names
    comps = schema["components"]["schemas"]
    for model in ("SearchRequest", "AskRequest"):
        comps[model]["properties"]["repo"] = names
    create = comps["RepoCreate"]
    create["properties"]["name"] = names
    create["oneOf"][0]["properties"]["path"] = {
        "type": "string",
        "enum": [str(p) for p in paths.values()],
    }
    return schema


@pytest.mark.slow
def test_openapi_fuzz(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _throwaway(tmp_path / "repos")
    for key, value in {
        "REPO_ROOTS": str(tmp_path / "repos"),
        "URL_HOSTS": "127.0.0.1",  # a generated https URL never leaves the machine
        "GIT_TIMEOUT": "5",
        "EMBED_MODEL_2": "",
        "WEBHOOK_SECRET": "fuzz-secret",
    }.items():
        monkeypatch.setenv(f"CODERAG_{key}", value)
    get_settings.cache_clear()
    app = create_app()
    failures: list[str] = []
    with TestClient(app) as client:
        for name in ("shop", "shop2"):
            client.post("/repos", json={"name": name, "path": str(paths[name])})
            assert wait_ready(client, name)["status"] == "ready"
        raw = client.get("/openapi.json").json()
        variants = [
            ("published", raw, (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)),
            ("bound", _bound(raw, paths), (GenerationMode.POSITIVE,)),
        ]
        for variant, spec, modes in variants:
            schema = schemathesis.openapi.from_dict(spec)
            schema.app = app
            for result in schema.get_all_operations():
                op = result.ok()
                if op.label in UNSAYABLE:
                    continue
                for mode in modes:
                    failures += _fuzz(op, mode, f"{variant}/{mode.value}")
    assert not failures, "\n\n".join(failures)


def _fuzz(op: Any, mode: GenerationMode, label: str) -> list[str]:
    found: list[str] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=op.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        response = case.call()
        if response.status_code == 413:
            return  # the body cap answers before the schema is read: a rejection all the same
        try:
            case.validate_response(response)
        except (Exception, BaseExceptionGroup) as exc:
            if len(found) < 3:
                found.append(f"{label} {op.label}:\n{exc}")

    try:
        run()
    except Unsatisfiable:  # nothing to get wrong: an operation without parameters or body
        assert mode is GenerationMode.NEGATIVE, op.label
    # a schema's string may hold U+0000, which coderag refuses by design (issue 45); filtered
    # here, not in run(): derandomize seeds the examples with a hash of run's source
    return [f for f in found if "holds a NUL character" not in f]
