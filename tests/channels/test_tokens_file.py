"""The tokens file of ``overt serve``: what it refuses rather than misread."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overt.channels.auth import Tokens, add_token, token_digest
from overt.errors import ConfigError
from overt.policy.actors import Actor

TOKEN = "ovt_example"


def test_a_digest_listed_twice_is_refused_not_the_last_one_taken(tmp_path: Path) -> None:
    digest = token_digest(TOKEN)
    path = tmp_path / "tokens.json"
    path.write_text(f'{{"{digest}": "operator:alice", "{digest}": "mcp_client:bot"}}')
    with pytest.raises(ConfigError, match="listed twice"):
        Tokens.load(path)
    with pytest.raises(ConfigError, match="listed twice"):  # nor rewritten by --add-token
        add_token(path, Actor.parse("operator:bob"))
    assert path.read_text().count(digest) == 2


def test_a_digest_written_in_upper_case_hex_still_authenticates(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    digest = token_digest(TOKEN)
    path.write_text(json.dumps({"sha256:" + digest[7:].upper(): "operator:alice"}))
    assert Tokens.load(path).actor(TOKEN) == Actor.parse("operator:alice")


def test_a_digest_that_is_not_hex_is_refused_not_a_token_that_never_matches(
        tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"sha256:" + "z" * 64: "operator:alice"}))
    with pytest.raises(ConfigError, match="not sha256:<64 hex>"):
        Tokens.load(path)


def test_the_same_digest_in_two_cases_is_listed_twice() -> None:
    digest = token_digest(TOKEN)
    with pytest.raises(ConfigError, match="listed twice"):
        Tokens({digest: "operator:alice", "sha256:" + digest[7:].upper(): "operator:bob"})
