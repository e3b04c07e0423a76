"""schemathesis against the served OpenAPI document: no 500s, responses as documented."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings

from overt.channels.http import create_app
from overt.channels.transcript import Transcript
from overt.ledger import open_ledger
from overt.models.fake import FunctionModel
from overt.runtime import Runtime
from tests.channels.helpers import OPERATOR, TOKENS, auth


def _app(db: Path) -> Any:
    runtime = Runtime(model=FunctionModel(lambda request: "Noted."),
                      ledger=open_ledger(str(db)),
                      transcript=Transcript(db.parent / "transcript.jsonl"))
    return create_app(runtime, TOKENS, max_body_bytes=10_000,
                      close_on_shutdown=False)


# schemathesis parametrizes at import, so the app is built then, on its own ledger
# (schemathesis.pytest.from_fixture does not work with this pytest).
_DB = Path(tempfile.mkdtemp(prefix="overt-openapi-")) / "ledger.db"
schema = schemathesis.openapi.from_asgi("/openapi.json", _app(_DB))


@schema.parametrize()
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_the_api_keeps_to_its_openapi_document(case: Any) -> None:
    # follow=false: a stream of a live turn would never end under a fuzzer
    if case.path.endswith("/events"):
        case.query = {**(case.query or {}), "follow": "false"}
    # negative_data_rejection is left out: the API ignores unknown query parameters
    # (as most do), and a case that drops the token gets ours back from `headers`
    case.call_and_validate(headers=auth(OPERATOR),
                           excluded_checks=[schemathesis.checks.negative_data_rejection])
