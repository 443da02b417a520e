"""Secrets never reach the index: credential files are excluded by default, and secret values
inside indexed files are redacted (detect-secrets' rules) before they are stored, embedded, shown,
put in a prompt or written to the audit log."""

from __future__ import annotations

from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient

from coderag.redact import MARK, redact
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag_app.server import create_app
from tests.conftest import commit_all, wait_ready

# Shaped like real credentials (the providers' documented example formats), valid nowhere.
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
PASSWORD = "correct-horse-battery-staple-42"
URL_PASSWORD = "s3cr3tPassw0rdInUrl"
KEY_BODY = "MIIEowIBAAKCAQEA7bq98gRO1xTN3x5kMZu0s1Ui0pPBZrL4eXyHn2cHAdIs8cQh"
SECRETS = (AWS_ID, AWS_SECRET, GITHUB, SLACK, STRIPE, PASSWORD, URL_PASSWORD, KEY_BODY)

SETTINGS_PY = f'''"""Service settings."""

AWS_ACCESS_KEY_ID = "{AWS_ID}"
aws_secret_access_key = "{AWS_SECRET}"
GITHUB_TOKEN = "{GITHUB}"
SLACK_BOT = "{SLACK}"
STRIPE_KEY = "{STRIPE}"
password = "{PASSWORD}"
DATABASE_URL = "postgres://orders:{URL_PASSWORD}@db.internal:5432/orders"

PRIVATE_KEY = """-----BEGIN RSA PRIVATE KEY-----
{KEY_BODY}
{KEY_BODY[::-1]}
-----END RSA PRIVATE KEY-----"""


def connect_to_billing_database(retries=3):
    """Open the billing database connection with the configured password."""
    return open_connection(DATABASE_URL, password, retries)
'''

SECRET_FILES = {
    ".env": f"DB_PASSWORD={PASSWORD}\n",
    ".env.production": f"STRIPE={STRIPE}\n",
    "deploy/server.pem": f"-----BEGIN PRIVATE KEY-----\n{KEY_BODY}\n-----END PRIVATE KEY-----\n",
    "deploy/id_rsa": f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----",
    "deploy/tls.key": KEY_BODY + "\n",
    "config/secrets.yaml": f"token: {GITHUB}\n",
    "config/aws_credentials.json": f'{{"key": "{AWS_ID}"}}\n',
    "infra/prod.tfvars": f'db_password = "{PASSWORD}"\n',
    ".npmrc": f"//registry.npmjs.org/:_authToken={GITHUB}\n",
    ".pypirc": f"[pypi]\npassword = {PASSWORD}\n",
}


@pytest.fixture(autouse=True)
def one_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """One encoder is enough here; the second would only double the time."""
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()


def test_redact_replaces_each_secret_and_keeps_every_line() -> None:
    text, count = redact(SETTINGS_PY, "app/settings.py")
    for secret in SECRETS:
        assert secret not in text, secret
    assert count >= len(SECRETS)
    assert text.count("\n") == SETTINGS_PY.count("\n"), "line numbers (citations) unchanged"
    assert "def connect_to_billing_database(retries=3):" in text
    assert "-----BEGIN RSA PRIVATE KEY-----" in text and MARK in text


def test_redact_leaves_ordinary_code_alone() -> None:
    code = (
        "def check_password(user, password):\n"
        "    digest = hashlib.sha256(password.encode()).hexdigest()\n"
        "    return digest == user.password_hash  # 9f86d081884c7d659a2feaa0c55ad015\n"
    )
    assert redact(code, "auth.py") == (code, 0)


def test_secrets_never_reach_the_index_a_search_or_the_audit_log(tmp_path: Path) -> None:
    root = tmp_path / "svc"
    (root / "app").mkdir(parents=True)
    (root / "app" / "settings.py").write_text(SETTINGS_PY)
    for rel, text in SECRET_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    commit_all(git.Repo.init(root), "settings and deploy files")

    with TestClient(create_app()) as client:
        client.post("/repos", json={"name": "svc", "path": str(root)})
        assert wait_ready(client, "svc")["status"] == "ready"
        assert set(get_catalog().file_shas("svc")) == {"app/settings.py"}
        stored = "\n".join(u.text + u.signature + u.doc for u in get_catalog().units("svc"))
        assert "connect_to_billing_database" in stored
        queries = [*SECRETS, "aws secret access key", "github token", "database password"]
        for query in queries:
            r = client.post("/search", json={"query": query, "repo": "svc", "top_k": 50})
            assert r.status_code == 200, r.text
            for secret in SECRETS:
                assert secret not in r.text and secret not in stored, (query, secret)
            r = client.post("/ask", json={"query": f"what is {query}?", "repo": "svc"})
            assert r.status_code == 200, r.text
            for secret in SECRETS:  # an answer may repeat the question's words, nothing else
                assert secret in query or secret not in r.text, (query, secret)
        audit = "\n".join(str(tuple(r)) for r in get_catalog().db.read("SELECT * FROM audit"))
        assert "svc" in audit
        for secret in (AWS_ID, GITHUB, SLACK, STRIPE):  # the values a pasted query may carry
            assert secret not in audit, secret
        csv = client.get("/audit/export.csv").text
        assert all(s not in csv for s in (AWS_ID, GITHUB, SLACK, STRIPE))
