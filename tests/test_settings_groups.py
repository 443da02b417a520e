"""Settings grouped by concern (issue 32): the groups name every setting once, in the order the
class declares them, and ``coderag settings`` prints each one's environment variable."""

from __future__ import annotations

import typing
from pathlib import Path

from coderag import spaces
from coderag.settings import ENV_PREFIX, Settings
from coderag_app.settings_groups import GROUPS, markdown_table
from coderag_embedder.api import EmbedRequest


def test_groups_name_every_setting_once_in_declaration_order() -> None:
    grouped = [name for _, _, names in GROUPS for name in names]
    assert grouped == list(Settings.model_fields)


def test_the_table_shows_every_environment_variable_under_its_group() -> None:
    table = markdown_table()
    for title, _, names in GROUPS:
        assert f"### {title}" in table
        for name in names:
            assert f"| `{ENV_PREFIX}{name.upper()}` |" in table
    assert table.count("| `CODERAG_") == len(Settings.model_fields)


def test_the_embed_api_names_the_registered_spaces() -> None:
    literal = EmbedRequest.model_fields["space"].annotation
    # a Literal in the schema, kept in step; the unsafe reader's query-only space last
    assert typing.get_args(literal) == (*spaces.NAMES, spaces.UNSAFE)
    assert EmbedRequest.model_fields["space"].default == spaces.MAIN


def test_the_readme_lists_each_setting_as_coderag_settings_prints_it() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text("utf-8")
    shown = {line for line in readme.splitlines() if line.startswith(f"| `{ENV_PREFIX}")}
    printed = {
        line for line in markdown_table().splitlines() if line.startswith(f"| `{ENV_PREFIX}")
    }
    # the README is edited by hand: a setting whose text changed in one place only fails here
    assert shown == printed, sorted(shown ^ printed)
