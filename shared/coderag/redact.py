"""Secret values in indexed text, replaced by a marker before anything is stored, embedded, shown
or put in a prompt.

The rules are detect-secrets' detectors (cloud keys, tokens, basic-auth URLs, JWTs, ``password =
"..."`` assignments by its keyword list, private-key headers), the maintained rule set of a secret
scanner rather than a hand list. Its entropy detectors are left out: in code they match every
hash and test vector. No detector's ``verify`` is ever called (that would reach the network).
Line count and line numbers are kept, so citations of redacted files stay exact.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

MARK = "[REDACTED]"
"""What a secret value is replaced with."""

MIN_GROUP = 8
"""A captured group this long is the secret value itself, not a prefix of it."""

LEFT_OUT = ("IPPublicDetector",)
"""Regex detectors not used: a public IP address in code is configuration, not a credential
(private keys are KEY_BLOCK's: the whole block goes, not only its header)."""

KEY_BLOCK = re.compile(
    r"(-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY( BLOCK|)-----)(.*?)(-----END \2PRIVATE KEY\3-----|\Z)",
    re.DOTALL,
)
"""A PEM, OpenSSH or PGP private-key block: its body goes line by line, to the end of the text
when the END line is missing (detect-secrets' private-key detector only flags the header)."""


@cache
def _detectors() -> tuple[list[Any], Any, re.Pattern[str]]:
    """(regex detectors, the keyword detector, a cheap test for lines it can match)."""
    from detect_secrets.plugins import (
        artifactory,
        aws,
        azure_storage_key,
        base,
        basic_auth,
        cloudant,
        discord,
        github_token,
        gitlab_token,
        ibm_cloud_iam,
        ibm_cos_hmac,
        jwt,
        keyword,
        mailchimp,
        npm,
        openai,
        pypi_token,
        sendgrid,
        slack,
        softlayer,
        square_oauth,
        stripe,
        telegram_token,
        twilio,
    )

    modules = (
        artifactory, aws, azure_storage_key, basic_auth, cloudant, discord, github_token,
        gitlab_token, ibm_cloud_iam, ibm_cos_hmac, jwt, mailchimp, npm, openai,
        pypi_token, sendgrid, slack, softlayer, square_oauth, stripe, telegram_token, twilio,
    )  # fmt: skip
    regex = [
        cls()
        for module in modules
        for cls in vars(module).values()
        if isinstance(cls, type)
        and issubclass(cls, base.RegexBasedDetector)
        and cls is not base.RegexBasedDetector
        and cls.__module__ == module.__name__
        and cls.__name__ not in LEFT_OUT
    ]
    hint = re.compile("|".join(keyword.DENYLIST), re.IGNORECASE)
    return regex, keyword.KeywordDetector(), hint


def warm() -> None:
    """Import the detectors now (about a second on a busy machine), so that the first one-file
    update after a start does not pay for it."""
    _detectors()


def _keyword_groups(path: str) -> Any:
    """The keyword detector's assignment patterns for the file's type (quotes required in code)."""
    from detect_secrets.plugins import keyword
    from detect_secrets.util.filetype import determine_file_type

    return keyword.REGEX_BY_FILETYPE.get(
        determine_file_type(path), keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP
    )


def _blank_key_body(m: re.Match[str]) -> str:
    body = "\n".join(MARK if line.strip() else line for line in m.group(4).split("\n"))
    return m.group(1) + body + m.group(5)


def _secret_of(m: re.Match[str]) -> str:
    """The secret in a detector's match: its captured value (an AWS secret key, a URL's
    password) when the group is one, else the whole match (a group such as ``(ghp|gho)`` is only
    the token's prefix)."""
    groups = [g for g in m.groups() if g]
    best = max(groups, key=len, default="")
    return best if len(best) >= MIN_GROUP else m.group(0)


def redact(text: str, path: str = "") -> tuple[str, int]:
    """``text`` with every secret value replaced by MARK, and how many values were replaced;
    ``path`` picks the keyword rules of the file's type."""
    text, blocks = KEY_BLOCK.subn(_blank_key_body, text)
    regex, words, hint = _detectors()
    found: set[str] = set()
    for detector in regex:
        for pattern in detector.denylist:
            found.update(_secret_of(m) for m in pattern.finditer(text))
    groups = None
    for line in text.split("\n") if hint.search(text) else ():
        if hint.search(line):
            groups = groups if groups is not None else _keyword_groups(path)
            found.update(v for v in words.analyze_string(line, groups) if v)
    found.discard(MARK)
    count = blocks
    for value in sorted(found, key=len, reverse=True):  # a longer value before its substrings
        if "\n" in value or len(value) < 4:
            continue
        count += text.count(value)
        text = text.replace(value, MARK)
    return text, count
