"""``[checkpoints] witnesses`` in overt.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from overt.config import file as config_file
from overt.errors import ConfigError
from overt.witness.notes import WitnessSigner
from tests import needs

needs.module("cryptography")


def _write(tmp_path: Path, vkey: str) -> Path:
    path = tmp_path / "overt.toml"
    path.write_text('[checkpoints]\nprivate_key = "k"\nwitness_dir = "w"\n'
                    f'[[checkpoints.witnesses]]\nurl = "http://127.0.0.1:1"\nvkey = "{vkey}"\n')
    return path


def test_a_configured_witness_becomes_a_cosigner_with_its_key(tmp_path: Path):
    key = WitnessSigner("w1.example", b"\x03" * 32).public
    config = config_file.load(path=str(_write(tmp_path, key.encode())))
    [cosigner] = config.checkpoints.cosigners  # type: ignore[attr-defined]
    assert (cosigner.url, cosigner.key) == ("http://127.0.0.1:1", key)


def test_a_log_key_given_as_a_witness_vkey_is_a_config_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="witnesses"):
        config_file.load(path=str(_write(tmp_path, "log.example+12345678+AQ" + "A" * 42 + "=")))
