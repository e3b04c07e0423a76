from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from overt.cli import export_cmd
from overt.ledger.base import Ledger
from overt.ledger.canonical import canonical_json
from overt.ledger.sqlite import SqliteLedger
from overt.models.fake import ScriptedModel
from tests import needs
from tests.conftest import RuntimeFactory, cli_message, run


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="overt ledger")
    sub = p.add_subparsers(dest="ledger_command", required=True)
    export_cmd.add_parser(sub)
    return p


def export(ledger: Ledger, *argv: str) -> int:
    args = parser().parse_args(["export", *argv])
    code: int = run(export_cmd.run(args, ledger))
    return code


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[SqliteLedger]:
    """One backend is enough here: tests/ledger/test_export.py runs the export on both."""
    opened = SqliteLedger.open(tmp_path / "ledger.db")
    yield opened
    opened.close_sync()


@pytest.fixture
def turns(make_runtime: RuntimeFactory) -> None:
    for session in ("a", "b"):
        model = ScriptedModel([{"tool_calls": [{"name": "get_usage", "arguments": {}}]}, "done"])
        run(make_runtime(model).respond(cli_message(session=session)))


def json_objects(text: str) -> list[Any]:
    decoder, found = json.JSONDecoder(), []
    text = text.strip()
    while text:
        value, end = decoder.raw_decode(text)
        found.append(value)
        text = text[end:].lstrip()
    return found


def otel_needed() -> None:
    needs.module("opentelemetry.sdk.trace")


def test_export_writes_the_audit_entries_as_json_lines_to_stdout_by_default(
    ledger: Ledger, turns: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert export(ledger) == 0
    out, err = capsys.readouterr()
    entries = run(ledger.entries())
    assert out.splitlines() == [canonical_json(e.to_dict()) for e in entries]
    assert f"exported {len(entries)} entries" in err


def test_export_writes_to_output_and_filters_by_session(
    ledger: Ledger, turns: None, tmp_path: Path
) -> None:
    path = tmp_path / "audit.jsonl"
    assert export(ledger, "--session", "cli:b", "--output", str(path)) == 0
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 8 and {e["session_id"] for e in lines} == {"cli:b"}


def test_since_and_until_take_durations_and_iso_times(
    ledger: Ledger, turns: None, capsys: pytest.CaptureFixture[str]
) -> None:
    total = len(run(ledger.entries()))
    assert export(ledger, "--since", "24h") == 0
    assert len(capsys.readouterr().out.splitlines()) == total
    assert export(ledger, "--until", "2000-01-01") == 0
    assert capsys.readouterr().out == ""
    assert export(ledger, "--since", "today", "--until", "2999-01-01T00:00:00Z") == 0
    assert len(capsys.readouterr().out.splitlines()) == total


@pytest.mark.parametrize("argv, complaint", [
    (["--since", "yesterday-ish"], "--since: unknown period"),
    (["--since", "2025-06-02", "--until", "2025-06-01"], "must be before --until"),
    (["--exporter", "console"], "for --format otel"),
    (["--endpoint", "http://x"], "for --format otel"),
    (["--format", "otel", "--exporter", "file"], "needs --output"),
    (["--format", "otel", "--output", "spans.json"], "for --exporter file"),
    (["--format", "otel", "--endpoint", "http://x"], "for --exporter otlp"),
])
def test_arguments_that_do_not_fit_exit_2_with_a_reason(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger: Any = None  # never read: the arguments are refused first
    assert export(ledger, *argv) == 2
    assert complaint in capsys.readouterr().err


def test_otel_to_the_console_prints_one_span_per_step_of_each_turn(
    ledger: Ledger, turns: None, capsys: pytest.CaptureFixture[str]
) -> None:
    otel_needed()
    assert export(ledger, "--format", "otel", "--session", "cli:a") == 0
    out, err = capsys.readouterr()
    spans = json_objects(out)  # the console exporter prints indented JSON objects
    assert [s["name"] for s in spans] == [
        "invoke_agent overt", "chat scripted", "execute_tool get_usage", "chat scripted"]
    assert "exported 4 spans of 1 turns" in err


def test_otel_to_a_file_writes_json_lines(
    ledger: Ledger, turns: None, tmp_path: Path
) -> None:
    otel_needed()
    path = tmp_path / "spans.jsonl"
    assert export(ledger, "--format", "otel", "--exporter", "file", "--output", str(path)) == 0
    spans = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(spans) == 8
    assert {s["attributes"]["gen_ai.conversation.id"] for s in spans} == {"cli:a", "cli:b"}


def test_an_exporter_that_fails_exits_5(
    ledger: Ledger, turns: None, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    otel_needed()
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    refusing = InMemorySpanExporter()
    refusing.shutdown()
    monkeypatch.setattr(export_cmd, "make_span_exporter", lambda *a, **k: refusing)
    assert export(ledger, "--format", "otel", "--exporter", "otlp") == 5
    assert "otlp exporter failed to send 8 spans" in capsys.readouterr().err


def test_otel_without_the_extra_exits_2_naming_it(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    assert export(ledger, "--format", "otel") == 2
    assert "overt[otel]" in capsys.readouterr().err


def test_the_usage_text_names_every_option_and_shows_examples() -> None:
    sub = parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
    text = sub.choices["export"].format_help()
    for flag in ("--session", "--since", "--until", "--format", "--exporter", "--output",
                 "--endpoint"):
        assert flag in text
    assert "overt ledger export --format otel --exporter file --output spans.jsonl" in text
    assert "never message text" in text
