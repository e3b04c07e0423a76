from __future__ import annotations

import inspect

import pluggy

import overt.hooks
from overt.hooks import specs

FIRST_RESULT = {"pre_api_request", "pre_tool_list_finalized", "post_llm_call_can_reissue",
                "transform_llm_output", "pre_tool_call", "pre_tool_call_can_provide_result",
                "transform_tool_result"}


def test_every_hook_is_in_one_file_with_a_docstring() -> None:
    declared = {name for name, fn in vars(specs).items()
                if callable(fn) and hasattr(fn, "overt_spec")}
    assert declared == set(specs.HOOK_NAMES)
    for name in specs.HOOK_NAMES:
        doc = inspect.getdoc(getattr(specs, name)) or ""
        assert len(doc.splitlines()) >= 3, name


def test_first_non_none_wins_exactly_where_the_contract_says() -> None:
    marked = {name for name in specs.HOOK_NAMES
              if getattr(specs, name).overt_spec["firstresult"]}
    assert marked == FIRST_RESULT


def test_the_marker_project_is_overt() -> None:
    assert specs.hookimpl.project_name == "overt"
    assert isinstance(specs.hookimpl, pluggy.HookimplMarker)


def test_every_name_the_hooks_package_exports_exists() -> None:
    for name in overt.hooks.__all__:
        assert hasattr(overt.hooks, name)
