"""The compose files themselves, read without an engine: what the suite's test override must keep
true for tests/test_compose.py to mean anything."""

from __future__ import annotations

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
            assert given[key].startswith(("http://127.0.0.1:", "redis://127.0.0.1:")), given[key]
