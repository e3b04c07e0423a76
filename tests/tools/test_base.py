from __future__ import annotations

import threading
from typing import Literal

import pytest

from overt.errors import ToolArgumentError, UsageError
from overt.tools.base import ToolContext, make_tool, tool
from overt.tools.registry import ToolRegistry
from tests.conftest import run


def test_the_schema_comes_from_type_hints_and_the_docstring() -> None:
    @tool(read_only=True, capability="weather.read")
    def forecast(city: str, days: int = 3, unit: Literal["c", "f"] = "c") -> str:
        """Forecast the weather.

        More detail that is not the description.

        Args:
            city: the city to forecast,
                by its English name.
            days: how many days ahead.
        """
        return city

    assert forecast.description == "Forecast the weather."
    schema = forecast.input_schema
    assert schema["required"] == ["city"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["city"] == {
        "type": "string", "description": "the city to forecast, by its English name."}
    assert schema["properties"]["days"]["default"] == 3
    assert schema["properties"]["unit"]["enum"] == ["c", "f"]
    assert forecast.read_only and forecast.capability == "weather.read"


def test_arguments_are_validated_before_the_call() -> None:
    calls: list[int] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        calls.append(1)
        return a + b

    assert run(add.run({"a": 1, "b": "2"}, None)) == 3
    with pytest.raises(ToolArgumentError, match="c") as excinfo:
        run(add.run({"a": 1, "b": 2, "c": 3}, None))
    assert isinstance(excinfo.value, TypeError)
    with pytest.raises(ToolArgumentError, match="b"):
        run(add.run({"a": 1}, None))
    with pytest.raises(ToolArgumentError):
        run(add.run({"a": "one", "b": 2}, None))
    with pytest.raises(ToolArgumentError, match="object"):
        run(add.run(["a"], None))  # type: ignore[arg-type]
    assert calls == [1]


def test_a_context_parameter_is_injected_and_not_in_the_schema() -> None:
    @tool
    async def whoami(ctx: ToolContext) -> str:
        """Which turn."""
        return ctx.turn_id

    assert whoami.input_schema["properties"] == {}
    context = ToolContext(None, "T1", "S", "cli", "cli:S", "C", "")  # type: ignore[arg-type]
    assert run(whoami.run({}, context)) == "T1"


def test_sync_tools_run_in_a_worker_thread_unless_inline() -> None:
    @tool
    def threaded() -> int:
        """Which thread."""
        return threading.get_ident()

    @tool(inline=True)
    def inline() -> int:
        """Which thread."""
        return threading.get_ident()

    async def both() -> tuple[int, int, int]:
        return threading.get_ident(), await threaded.run({}, None), await inline.run({}, None)

    loop_thread, threaded_thread, inline_thread = run(both())
    assert threaded_thread != loop_thread and inline_thread == loop_thread


def test_a_parameter_without_a_type_hint_is_a_usage_error() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(UsageError, match="type hint"):
        make_tool(untyped)


def test_an_invalid_tool_name_is_a_usage_error() -> None:
    def f() -> None:
        """F."""

    with pytest.raises(UsageError, match="invalid tool name"):
        make_tool(f, name="has spaces")


def test_the_registry_refuses_a_name_twice_and_anything_not_a_tool() -> None:
    @tool
    def once() -> None:
        """Once."""

    registry = ToolRegistry([once])
    with pytest.raises(UsageError, match="already registered"):
        registry.register(once)
    with pytest.raises(UsageError, match="@tool"):
        registry.register(lambda: None)  # type: ignore[arg-type]
    assert "once" in registry and registry.specs()[0].name == "once"
