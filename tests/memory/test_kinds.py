"""Node kinds, link rules, and kinds added by config."""

from __future__ import annotations

import re
from typing import Any

import pytest

from overt.config import file as config_file
from overt.errors import ConfigError
from overt.memory.kinds import BUILTIN_NODE_KINDS, DOMAIN_KINDS, MemoryKinds
from overt.memory.tools import memory_tools
from tests.conftest import run
from tests.memory.helpers import code, context


def test_there_are_eighteen_built_in_node_kinds_the_domain_ones_and_note() -> None:
    assert len(DOMAIN_KINDS) == 17 and len(set(BUILTIN_NODE_KINDS)) == 18
    assert BUILTIN_NODE_KINDS[-1] == "Note"
    assert MemoryKinds.builtin().node_kinds == BUILTIN_NODE_KINDS


def test_link_rules_say_which_kinds_a_link_may_join() -> None:
    kinds = MemoryKinds.builtin()
    assert kinds.allows("verifies", "AcceptanceTest", "Ticket")
    assert not kinds.allows("verifies", "Note", "Ticket")
    assert kinds.allows("relates_to", "Note", "Schema")  # * on both sides
    assert not kinds.allows("nonsense", "Note", "Note")
    assert "Project" in kinds.targets("part_of", "Component")


def test_extending_adds_node_kinds_and_link_pairs() -> None:
    kinds = MemoryKinds.builtin().extended(["Incident"], {
        "mitigates": [["Decision", "Incident"]], "verifies": [["AcceptanceTest", "Incident"]]})
    assert kinds.node_kinds[-1] == "Incident"
    assert kinds.allows("mitigates", "Decision", "Incident")
    assert kinds.allows("verifies", "AcceptanceTest", "Incident")
    assert kinds.allows("verifies", "AcceptanceTest", "Ticket")  # built-in pairs kept
    assert MemoryKinds.builtin().node_kinds == BUILTIN_NODE_KINDS  # unchanged


@pytest.mark.parametrize(("kinds", "links", "problem"), [
    (["incident"], {}, "not a node kind"),
    ([], {"Mitigates": [["Note", "Note"]]}, "not a link kind"),
    ([], {"mitigates": [["Note", "Incident"]]}, "unknown node kind 'Incident'"),
    ([], {"mitigates": [["Note"]]}, "not a [from kind, to kind] pair"),
])
def test_malformed_extensions_are_config_errors(kinds: list[str], links: Any,
                                                problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)):
        MemoryKinds.builtin().extended(kinds, links)


def test_the_config_file_memory_table_becomes_the_memory_kinds() -> None:
    parsed = config_file.parse('[memory]\nkinds = ["Incident"]\n'
                               'links = { mitigates = [["Decision", "Incident"]] }\n')
    kinds = config_file.values(parsed)["memory"]
    assert isinstance(kinds, MemoryKinds) and "Incident" in kinds.node_kinds
    assert kinds.allows("mitigates", "Decision", "Incident")
    assert "memory" not in config_file.values(config_file.parse(""))
    with pytest.raises(config_file.ConfigFileError, match=r"memory\.links"):
        config_file.parse('[memory]\nlinks = { x = [["A", "B", "C"]] }\n')


def test_tools_built_over_extended_kinds_accept_them(ledger: Any) -> None:
    kinds = MemoryKinds.builtin().extended(["Incident"], {"mitigates": [["Decision",
                                                                          "Incident"]]})
    tools = {t.name: t for t in memory_tools(kinds)}
    ctx = context(ledger)
    incident = run(tools["node_create"].run({"kind": "Incident", "title": "Outage",
                                             "body": "db down"}, ctx))
    decision = run(tools["node_create"].run({"kind": "Decision", "title": "Failover",
                                             "body": "add a replica"}, ctx))
    linked = run(tools["link_create"].run({"kind": "mitigates", "from_id": decision["node"]["id"],
                                           "to_id": incident["node"]["id"]}, ctx))
    assert linked["ok"] is True
    assert "Incident" in tools["node_create"].input_schema["properties"]["kind"]["enum"]
    builtin = {t.name: t for t in memory_tools()}
    assert code(run(builtin["node_create"].run({"kind": "Incident", "title": "t", "body": "b"},
                                               ctx))) == "unknown_kind"
