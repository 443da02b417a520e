"""Who is calling and what they may do: API tokens with roles, parsed from
``CODERAG_API_TOKENS`` (``user:token`` or ``user:token:role``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

ROLES = ("admin", "reader")
"""Roles a token can carry: ``admin`` may also register, reindex and delete repositories and
export the audit log; ``reader`` may search, ask and read repository state."""

DEFAULT_ROLE = "admin"
"""Role of a token written in the older ``user:token`` form, which could do everything."""

_USER = re.compile(r"^[^\s:,]{1,128}$")


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: the user written to the audit log and their role."""

    user: str
    role: str

    def may(self, role: str) -> bool:
        """Whether this caller holds ``role`` (an admin holds every role)."""
        return self.role == "admin" or self.role == role


def parse_tokens(spec: str) -> dict[str, Principal]:
    """Map each token of a ``CODERAG_API_TOKENS`` value to its principal; ValueError naming the
    entry that is not ``user:token`` or ``user:token:role``."""
    out: dict[str, Principal] = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        parts = item.split(":")
        if len(parts) == 2:
            user, token, role = parts[0], parts[1], DEFAULT_ROLE
        elif len(parts) == 3:
            user, token, role = parts
        else:
            raise ValueError(
                f"CODERAG_API_TOKENS entry {_shown(item)} is not user:token or user:token:role "
                "(tokens cannot contain ':' or ',')"
            )
        if not _USER.match(user) or not token.strip() or token != token.strip():
            raise ValueError(
                f"CODERAG_API_TOKENS entry {_shown(item)} needs a user name (no spaces) and a "
                "non-empty token without surrounding spaces"
            )
        if role not in ROLES:
            raise ValueError(
                f"CODERAG_API_TOKENS entry for user {user!r} has role {role!r}; roles: "
                + ", ".join(ROLES)
            )
        if token in out:
            raise ValueError(f"CODERAG_API_TOKENS gives user {user!r} a token already in use")
        out[token] = Principal(user, role)
    return out


def _shown(item: str) -> str:
    """The entry with its token hidden, so a start-up error never prints a secret."""
    user = item.split(":", 1)[0]
    return repr(f"{user}:…") if ":" in item else repr(item[:2] + "…")
