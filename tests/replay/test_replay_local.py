"""``overt replay --model local``: turns the embedded model answered (real weights, real
llama.cpp, greedy decoding) are asked again, request by request, and every answer
comes back byte for byte. Skips when ``llama_cpp`` is not installed or the model is
not prepared (``overt model prepare local``); a few minutes on a 2-core CPU."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from overt.cli.main import main
from overt.models.assets import DEFAULT_ASSET, is_prepared
from tests import needs

needs.module("llama_cpp", reason="llama_cpp is not installed: pip install 'overt[local]'")

pytestmark = pytest.mark.real_model

QUESTIONS = ("How many turns has the agent run today, and what is my token burn?",
             "Say hello in three words.")


def test_turns_the_embedded_model_answered_are_answered_again_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not is_prepared(DEFAULT_ASSET, os.environ.get("OVERT_CACHE_DIR") or None):
        needs.missing("the embedded model is not prepared: overt model prepare local")
    for name in ("OVERT_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OVERT_ROUTE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no overt.toml of the developer's
    db = str(tmp_path / "l.db")
    for question in QUESTIONS:
        assert main(["--db", db, "ask", question, "--model", "local", "--json"]) == 0
    capsys.readouterr()
    code = main(["--db", db, "replay", "--since", "1d", "--model", "local", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["turns"] == [] and code == 0, json.dumps(out["turns"], indent=1)
    assert out["summary"]["turns"] == 2 and out["summary"]["divergences"] == 0
    assert out["summary"]["asked"] >= 2  # every inference asked again (one or more a turn)
    code = main(["--db", db, "replay", "--since", "1d", "--model", "local"])
    assert code == 0 and "0 diverge" in capsys.readouterr().out
