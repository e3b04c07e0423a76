"""What only the PostgreSQL backend does."""

from __future__ import annotations

import pytest

from overt.errors import UsageError
from overt.ledger.postgres import _safe, parse_url


def test_the_schema_parameter_is_overts_and_is_not_passed_to_libpq() -> None:
    assert parse_url("postgresql://h:5432/db?schema=audit&sslmode=disable") == (
        "postgresql://h:5432/db?sslmode=disable", "audit")
    assert parse_url("postgresql://h/db") == ("postgresql://h/db", "public")


def test_a_schema_name_that_is_not_a_plain_identifier_is_refused() -> None:
    with pytest.raises(UsageError, match="invalid ledger schema"):
        parse_url('postgresql://h/db?schema=x";drop')


def test_passwords_never_appear_in_messages() -> None:
    assert _safe("postgresql://u:hunter2@h/db") == "postgresql://u:***@h/db"


def test_an_unreachable_server_is_a_clear_ledger_error_without_the_password() -> None:
    from overt.errors import LedgerError
    from overt.ledger import open_ledger

    with pytest.raises(LedgerError, match="Connection refused") as excinfo:
        open_ledger("postgresql://u:hunter2@127.0.0.1:1/x")
    assert "hunter2" not in str(excinfo.value) and "u:***@" in str(excinfo.value)
