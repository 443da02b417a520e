"""Where the server may be reached: the Host header checked against ``CODERAG_ALLOWED_HOSTS``
(DNS rebinding lets a web page reach a laptop's 127.0.0.1 under another name), and no listening
beyond loopback without API tokens."""

from __future__ import annotations

import ipaddress
import secrets
from typing import Any

from coderag.settings import Settings, get_settings
from coderag_app.asgi import send_error

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
"""Host names accepted by default on a server listening on loopback."""


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` reaches only this machine."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_hosts(settings: Settings) -> set[str] | None:
    """Host names the Host header may carry; None for any."""
    if settings.allowed_hosts is None:
        return set(LOOPBACK_NAMES) if is_loopback(settings.host) else None
    names = {h.strip().strip("[]").lower() for h in settings.allowed_hosts.split(",") if h.strip()}
    return None if "*" in names else names


def host_name(header: str) -> str:
    """The name part of a Host header value: no port, no IPv6 brackets, lower case."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class HostCheckMiddleware:
    """Answer 400 to a request whose Host header names a host that is not allowed."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        """Check the Host header, then hand the request on."""
        if scope["type"] in ("http", "websocket"):
            allowed = allowed_hosts(get_settings())
            raw = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if allowed is not None and host_name(raw) not in allowed:
                detail = (
                    f"Host header {raw!r} is not one this server answers to; add the name to "
                    "CODERAG_ALLOWED_HOSTS if it is yours"
                )
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await send_error(send, 400, detail, path=scope.get("path", ""))
                return
        await self.app(scope, receive, send)


def listen_token(host: str, settings: Settings, whole_app: bool) -> str | None:
    """Check that listening on ``host`` is safe: on loopback, or with API tokens. Without tokens
    the all-in-one server gets a fresh admin token (returned, to be printed and put in the
    environment); a single service cannot, since its peers would not know it: ValueError."""
    if is_loopback(host) or settings.principals():
        return None
    if not whole_app:
        raise ValueError(
            f"refusing to listen on {host} without API tokens: anyone on the network could "
            "read the indexed code; set CODERAG_API_TOKENS (user:token:admin,...) or listen on "
            "127.0.0.1"
        )
    return secrets.token_urlsafe(24)
