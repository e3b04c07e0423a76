"""The cockpit under a real browser: Debian's chromium driven by Playwright, against a
real uvicorn serving the API and the cockpit over a SQLite file, with a model that
computes its replies (no hosted model).

Browser tests skip, saying why, when chromium or playwright is missing, except in
CI (env ``CI`` set), where they fail instead. No browser is ever downloaded.
Screenshots of each page go under the test's tmp dir, and to ``$OVERT_SCREENSHOTS``
when it is set.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import overt
from overt.channels.auth import Tokens, token_digest
from overt.channels.http import create_app
from overt.engine.budget import Budget
from overt.ledger import open_ledger
from overt.models.fake import FunctionModel
from overt.models.pricing import PriceTable
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Rule
from overt.runtime import Runtime
from overt.types import ModelRequest, ModelResponse, ToolCall, Usage
from overt.web import cockpit_routes
from tests import needs
from tests.channels.helpers import uvicorn_server as served

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
ASSETS = Path(__file__).parent / "assets"

OPERATOR = "ovt_operator-token"
AUDITOR = "ovt_auditor-token"
CLIENT = "ovt_client-token"
TOKENS = Tokens({token_digest(OPERATOR): "operator:alice",
                 token_digest(AUDITOR): "operator:auditor",
                 token_digest(CLIENT): "mcp_client:claude-code"})
GRANTS = {"operator:auditor": ["runtime.read", "sessions.read_any", "approvals.read",
                               "usage.read", "memory.read"]}
RULE = Rule("usage-is-private", "ask", "usage_is_private",
            "usage figures are shown after an operator approves", tools=("get_usage",))
CONFIG = """
[[policy.rules]]
name = "usage-is-private"
tools = ["get_usage"]
effect = "ask"
reason_code = "usage_is_private"
message = "usage figures are shown after an operator approves"
"""


def reply(request: ModelRequest) -> ModelResponse:
    """Reasons in bracketed steps, then echoes; a message naming ``usage`` first asks
    for get_usage, and answers with the figures once the tool has answered."""
    last = request.messages[-1]
    asked = [m.content for m in request.messages if m.role == "user"][-1]
    usage = Usage(120 + len(asked), 30)
    if last.role == "tool":
        return ModelResponse(f"Usage figures: {last.content[:60]}", usage=usage,
                             reasoning="[execute] the figures came back; reporting them")
    if "usage" in asked.lower():
        return ModelResponse("", tool_calls=(ToolCall("call-" + str(len(request.messages)),
                                                      "get_usage", {"period": "today"}),),
                             usage=usage, reasoning="[thinking] the operator wants figures\n"
                                                    "[plan] 1. call get_usage")
    return ModelResponse(f"re: {asked}", usage=usage,
                         reasoning="[thinking] a plain question\n[plan] 1. answer it")


def cli_env(db: Path) -> dict[str, str]:
    """The environment of an ``overt`` process on ``db``, importing this checkout's overt
    (whatever the working directory)."""
    source = str(Path(overt.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "OVERT_DB": str(db), "OVERT_TRANSCRIPT": "", "PYTHONPATH": path}


def browser_missing() -> str | None:
    """Why browser tests cannot run here (``None``: they can)."""
    if not Path(CHROMIUM).exists():
        return f"no chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; never playwright install)"
    return None


def need_browser() -> None:
    """Skip the calling test module, saying why, when no browser can run here; in CI
    (env ``CI`` set), fail instead."""
    missing = browser_missing()
    if missing is not None:
        needs.missing(missing)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    need_browser()
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@contextmanager
def uvicorn_server(app: Any) -> Iterator[str]:
    """``app`` served by a real uvicorn on a free port, in a thread; its base URL. Open
    event streams are cut after two seconds at shutdown (as ``overt serve`` cuts them
    after thirty)."""
    with served(app, graceful_shutdown_s=2) as base:
        yield base


class Cockpit:
    """A running server: its base URL, its runtime, the ledger file, a project dir the
    CLI can run in against the same ledger."""

    def __init__(self, base: str, runtime: Runtime, db: Path, project: Path) -> None:
        self.base, self.runtime, self.db, self.project = base, runtime, db, project


@pytest.fixture(scope="module")
def cockpit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cockpit]:
    project = tmp_path_factory.mktemp("cockpit")
    (project / "overt.toml").write_text(CONFIG, encoding="utf-8")
    db = project / "ledger.db"
    ledger = open_ledger(str(db))
    gate = Gate(Policy([RULE]), Capabilities(GRANTS))
    runtime = Runtime(model=FunctionModel(reply, name="function"), ledger=ledger, gate=gate,
                      prices=PriceTable({"function": (3.0, 15.0)}))
    app = create_app(runtime, TOKENS, extra_routes=cockpit_routes(
        runtime, TOKENS, budget=Budget(day_tokens=100_000, day_usd=5.0)))
    with uvicorn_server(app) as base:
        yield Cockpit(base, runtime, db, project)


@pytest.fixture
def shots(tmp_path: Path) -> Iterator[Any]:
    """``shot(page, name)``: a full-page screenshot into tmp_path/screenshots (and
    ``$OVERT_SCREENSHOTS``)."""
    folder = tmp_path / "screenshots"
    folder.mkdir()
    also = os.environ.get("OVERT_SCREENSHOTS")

    def shot(page: Any, name: str) -> Path:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        if also:
            Path(also).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(also) / path.name)
        return path
    yield shot
