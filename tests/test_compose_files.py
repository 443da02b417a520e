"""The compose files themselves, read without an engine: what the suite's test override must keep
true for tests/test_compose.py to mean anything, and Redis's password in every file."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _urls(environment: object) -> dict[str, str]:
    items = environment.items() if isinstance(environment, dict) else []
    return {k: str(v) for k, v in items if k.endswith("_URL")}


def test_the_test_override_points_every_service_url_at_loopback() -> None:
    """A URL the base file gives a service by its compose host name does not resolve on the host
    network, so the test override must replace each one with a loopback address."""
    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    test = yaml.safe_load((ROOT / "deploy" / "compose.test.yml").read_text(encoding="utf-8"))
    for name, service in base["services"].items():
        wanted = _urls(service.get("environment"))
        given = _urls(test["services"].get(name, {}).get("environment"))
        for key in wanted:
            assert key in given, f"{name}: compose.test.yml does not override {key}"
            url = re.sub(r"^redis://:[^@]*@", "redis://", given[key])  # Redis's password
            assert url.startswith(("http://127.0.0.1:", "redis://127.0.0.1:")), given[key]


COMPOSE_FILES = [
    ROOT / "docker-compose.yml",
    ROOT / "docker-compose.override.yml",
    *sorted((ROOT / "deploy").glob("*.yml")),
]
"""Every compose file the project ships."""

PASSWORD = "${CODERAG_REDIS_PASSWORD:?"
"""How a compose file names Redis's one password setting (required: no default)."""


def _command(service: dict) -> list[str]:
    command = service.get("command") or []
    return command.split() if isinstance(command, str) else [str(c) for c in command]


def test_redis_has_a_password_that_every_service_and_worker_host_uses() -> None:
    """Whoever can write to Redis runs code on every worker (rq's jobs are pickles): each Redis
    a compose file starts takes --requirepass from CODERAG_REDIS_PASSWORD and never runs with
    protected mode off without one, and each REDIS_URL carries that password, or is the worker
    host's required REDIS_URL, whose example carries one (the settings refuse a Redis on another
    host without a password)."""
    servers = urls = 0
    for path in COMPOSE_FILES:
        text = path.read_text(encoding="utf-8")
        doc = yaml.safe_load(text) or {}
        for name, service in (doc.get("services") or {}).items():
            command = _command(service)
            where = f"{path.name}: {name}"
            if command[:1] == ["redis-server"]:
                servers += 1
                assert "--requirepass" in command, f"{where} starts Redis without a password"
                given = command[command.index("--requirepass") + 1]
                assert given.startswith(PASSWORD), f"{where}: --requirepass {given}"
                if "--protected-mode" in command:
                    assert command[command.index("--protected-mode") + 1] != "no", where
            env = service.get("environment")
            url = env.get("REDIS_URL") if isinstance(env, dict) else None
            if url is not None:
                urls += 1
                if url.startswith("${REDIS_URL:?"):
                    assert "redis://:PASSWORD@" in url, f"{where}: the example needs a password"
                else:
                    assert url.startswith(f"redis://:{PASSWORD}"), f"{where}: REDIS_URL {url}"
    assert servers >= 2 and urls >= 3, (servers, urls)  # the suite's, the test override's
