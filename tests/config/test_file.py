"""overt.toml: every problem named by line and field, what the file fills, and precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from overt.config import file as config_file
from overt.config.file import ConfigFileError, parse
from overt.config.lines import key_lines, line_of
from overt.engine.budget import Budget
from overt.errors import ConfigError

GOOD = """\
db = "ledger.db"
route = "cheap"

[limits]
max_tool_calls = 3
tool_timeout_s = 12.5

[models.cheap]
spec = "openai:qwen2.5-coder-0.5b"
base_url = "http://127.0.0.1:8080/v1"

[models.strong]
spec = "anthropic:claude-sonnet-4-5"
api_key_env = "MY_ANTHROPIC_KEY"

[routes.cheap]
model = "cheap"
escalate_to = "strong"
fallback = ["local"]
tools = ["get_usage"]
budget = { session_usd = 0.5 }

[routes.cheap.escalation]
extra_hedges = ["\\\\bperhaps\\\\b"]
confidence_below = 0.4
tool_error_streak = 3

[routes.deep]
model = "strong"

[prices."claude-sonnet-4-5"]
input = 3.0
output = 15.0

[budget]
day_usd = 5.0
session_tokens = 100000

[plugins]
enabled = ["example"]
disabled = ["builtin"]
files = ["plugins/mine.py"]

[providers.openai]
base_url = "http://127.0.0.1:9999/v1"
api_key_env = "LOCAL_OPENAI_KEY"
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigFileError) as caught:
        parse(text, "overt.toml")
    return [str(p) for p in caught.value.problems]


def test_a_good_file_validates() -> None:
    cfg = parse(GOOD)
    assert cfg.routes["cheap"].escalate_to == "strong"
    assert cfg.routes["cheap"].escalation.confidence_below == 0.4


def test_an_unknown_escalation_model_names_its_line_field_and_the_known_models() -> None:
    text = GOOD.replace('escalate_to = "strong"', 'escalate_to = "strongg"')
    assert problems(text) == [
        "overt.toml:18: routes.cheap.escalate_to: unknown model 'strongg' (known: cheap, "
        "strong, local, scripted:FILE, anthropic:NAME, openai:NAME)"]


def test_every_problem_is_reported_in_line_order_not_only_the_first() -> None:
    text = GOOD.replace("max_tool_calls = 3", "max_tool_calls = 0").replace(
        'fallback = ["local"]', 'fallback = ["local", "nope"]').replace(
        "output = 15.0", "").replace('db = "ledger.db"', 'db = "ledger.db"\ncolour = "blue"')
    found = problems(text)
    assert [p.split(": ")[0:2] for p in found] == [
        ["overt.toml:2", "colour"],
        ["overt.toml:6", "limits.max_tool_calls"],
        ["overt.toml:20", "routes.cheap.fallback[1]"],
        ["overt.toml:32", "prices.claude-sonnet-4-5.output"],
    ]
    assert "unknown key (allowed: db, model, route" in found[0]
    assert found[3].endswith("is required")


def test_an_unknown_key_in_a_table_lists_the_keys_allowed_there() -> None:
    text = GOOD.replace('api_key_env = "MY_ANTHROPIC_KEY"', 'api_key = "sk-123"')
    assert problems(text) == [
        "overt.toml:14: models.strong.api_key: unknown key (allowed: base_url, api_key_env, "
        "timeout_s, max_retries, max_tokens, temperature, seed, fold_tool_results, spec)"]


def test_a_value_of_the_wrong_type_names_what_it_got() -> None:
    found = problems(GOOD.replace("tool_timeout_s = 12.5", 'tool_timeout_s = "12"'))
    assert found == ["overt.toml:6: limits.tool_timeout_s: Input should be a valid number, "
                     "got str '12'"]


def test_an_invalid_hedge_regex_names_its_line() -> None:
    found = problems(GOOD.replace('extra_hedges = ["\\\\bperhaps\\\\b"]',
                                  'extra_hedges = ["(unclosed"]'))
    assert len(found) == 1
    assert found[0].startswith("overt.toml:24: routes.cheap.escalation.extra_hedges: "
                               "'(unclosed' is not a valid regex")


def test_a_negative_budget_in_an_inline_table_names_its_line() -> None:
    found = problems(GOOD.replace("session_usd = 0.5", "session_usd = -1"))
    assert found == ["overt.toml:21: routes.cheap.budget.session_usd: Input should be "
                     "greater than or equal to 0"]


def test_a_model_alias_with_an_unknown_scheme_is_named() -> None:
    found = problems(GOOD.replace('spec = "openai:qwen2.5-coder-0.5b"', 'spec = "vllm:qwen"'))
    assert found == ["overt.toml:9: models.cheap.spec: unknown scheme 'vllm' (known: local, "
                     "scripted, anthropic, openai)"]


def test_a_route_that_escalates_to_its_own_model_is_an_error() -> None:
    found = problems(GOOD.replace('escalate_to = "strong"', 'escalate_to = "cheap"'))
    assert found == ["overt.toml:18: routes.cheap.escalate_to: names the route's own model"]


def test_the_chosen_route_must_be_defined_when_there_are_routes() -> None:
    found = problems(GOOD.replace('route = "cheap"', 'route = "chep"'))
    assert found == ["overt.toml:2: route: no route 'chep' in [routes] (known: cheap, deep); "
                     "set route = one of them"]


def test_without_a_route_key_the_default_route_must_exist() -> None:
    found = problems(GOOD.replace('route = "cheap"\n', ""))
    assert found[0].startswith("overt.toml:15: routes: no route 'default' in [routes]")


def test_a_syntax_error_names_its_line() -> None:
    found = problems(GOOD.replace("max_tool_calls = 3", "max_tool_calls = = 3"))
    assert len(found) == 1 and found[0].startswith("overt.toml:5: not valid TOML: ")


def test_a_missing_required_field_points_at_its_table() -> None:
    assert problems('[models.x]\nbase_url = "http://h"\n') == [
        "overt.toml:1: models.x.spec: is required"]


def test_the_key_scanner_finds_dotted_quoted_inline_and_multiline_keys() -> None:
    text = ('a.b = 1\n"q.k" = 2\n[t]\nx = { y = 1, z = { w = 2 } }\n'
            'arr = [\n  1,\n  2, # two\n]\ns = """x\nfake = 1\n"""\n'
            '[[aot]]\nk = 1\n[[aot]]\nk = 2\n')
    lines = key_lines(text)
    assert lines[("a", "b")] == 1 and lines[("q.k",)] == 2
    assert lines[("t", "x", "z", "w")] == 4
    assert lines[("t", "arr", 1)] == 7
    assert ("t", "fake") not in lines
    assert lines[("aot", 1, "k")] == 15
    assert line_of(lines, ("t", "arr", 1, "deeper")) == 7


def write(tmp_path: Path, text: str = GOOD) -> Path:
    path = tmp_path / "overt.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_file_fills_the_config_and_keys_come_from_the_variables_it_names(
    tmp_path: Path,
) -> None:
    path = write(tmp_path)
    config = config_file.load({"MY_ANTHROPIC_KEY": "sk-a", "OPENAI_API_KEY": "sk-conv",
                               "LOCAL_OPENAI_KEY": "sk-local"}, path=path)
    assert config.db == str(tmp_path / "ledger.db")  # relative to the file's folder
    assert config.model == "cheap" and config.route == "cheap"
    assert config.max_tool_calls == 3 and config.tool_timeout_s == 12.5
    assert config.model_aliases["strong"].settings == {"api_key": "sk-a"}
    assert config.providers["openai"] == {"base_url": "http://127.0.0.1:9999/v1",
                                          "api_key": "sk-local"}
    assert config.prices == {"claude-sonnet-4-5": (3.0, 15.0)}
    assert config.budget == Budget(session_tokens=100000, day_usd=5.0)
    assert config.effective_budget == Budget(session_usd=0.5)  # the route's own
    assert config.plugins_enabled == ("example",)
    assert config.plugin_files == (str(tmp_path / "plugins/mine.py"),)
    route = config.routes["cheap"]
    assert route.fallback == ("local",) and route.tools == ("get_usage",)
    assert route.escalation.tool_error_streak == 3
    assert r"\bperhaps\b" in route.escalation.hedges
    assert config.config_file == str(path)


def test_flags_win_over_variables_which_win_over_the_file_which_wins_over_defaults(
    tmp_path: Path,
) -> None:
    path = write(tmp_path)
    from_file = config_file.load({}, path=path)
    assert from_file.db.endswith("ledger.db") and from_file.model == "cheap"
    env = {"OVERT_DB": "env.db", "OVERT_MODEL": "local", "OVERT_MAX_TOOL_CALLS": "7",
           "OVERT_ROUTE": "deep"}
    from_env = config_file.load(env, path=path)
    assert (from_env.db, from_env.model, from_env.max_tool_calls, from_env.route) == (
        "env.db", "local", 7, "deep")
    flagged = config_file.load(env, path=path, db="flag.db", model="scripted:x.jsonl",
                               route="cheap")
    assert (flagged.db, flagged.model, flagged.route) == ("flag.db", "scripted:x.jsonl",
                                                          "cheap")
    assert from_file.tool_timeout_s == 12.5 and from_file.pre_tool_call_timeout_s == 5.0


def test_a_route_s_model_is_used_unless_a_model_is_given(tmp_path: Path) -> None:
    path = write(tmp_path)
    assert config_file.load({"OVERT_ROUTE": "deep"}, path=path).model == "strong"


def test_the_file_is_found_by_flag_then_variable_then_the_working_folder(
    tmp_path: Path,
) -> None:
    path = write(tmp_path)
    assert config_file.find(None, {}, cwd=tmp_path) == tmp_path / "overt.toml"
    assert config_file.find(None, {"OVERT_CONFIG": str(path)}, cwd="/") == path
    assert config_file.find(None, {}, cwd=tmp_path / "nowhere") is None
    with pytest.raises(ConfigError, match="does not exist"):
        config_file.find(str(tmp_path / "missing.toml"), {})


def test_no_file_leaves_the_environment_and_defaults(tmp_path: Path) -> None:
    config = config_file.load({"OVERT_DB": "x.db"}, cwd=tmp_path)
    assert config.db == "x.db" and config.routes == {} and config.config_file is None


def test_a_file_without_route_is_used_with_a_route_named_by_a_flag_or_variable(
        tmp_path: Path) -> None:
    path = tmp_path / "overt.toml"
    path.write_text('[models.m]\nspec = "local"\n[routes.r]\nmodel = "m"\n')
    assert config_file.load({}, path=path, route="r").route == "r"  # was: no route 'default'
    assert config_file.load({"OVERT_ROUTE": "r"}, path=path).route == "r"
    with pytest.raises(ConfigError, match="no route 'default' in \\[routes\\]"):
        config_file.load({}, path=path)
    with pytest.raises(ConfigError, match="route 'zz' is not defined"):
        config_file.load({}, path=path, route="zz")


def test_a_route_named_by_a_variable_must_be_defined(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="route 'nope' is not defined"):
        config_file.load({"OVERT_ROUTE": "nope"}, path=write(tmp_path))


POLICY = '''
operator = "alice"

[policy]
approval_ttl_s = 600

[[policy.rules]]
name = "no-prod-deletes"
priority = 100
tools = ["delete_*"]
effect = "deny"
reason_code = "prod_delete"
message = "not in production"
when = [{ arg = "target.env", op = "eq", value = "prod" }]

[capabilities]
"agent:support" = ["usage.read"]
'''


def test_policy_rules_and_capabilities_fill_the_config(tmp_path: Path) -> None:
    path = tmp_path / "overt.toml"
    path.write_text(POLICY, encoding="utf-8")
    config = config_file.load({}, path=path)
    rule = config.policy.rules[0]
    assert (rule.name, rule.effect, rule.priority, rule.tools) == (
        "no-prod-deletes", "deny", 100, ("delete_*",))
    assert rule.when[0].holds({"target": {"env": "prod"}})
    assert config.policy.approval_ttl_s == 600 and config.policy.defaults
    assert config.capabilities == {"agent:support": ("usage.read",)}
    assert config.operator == "alice"


def test_a_malformed_policy_rule_names_its_line_and_field() -> None:
    found = problems(POLICY.replace('effect = "deny"', 'effect = "maybe"'))
    assert len(found) == 1 and found[0].startswith("overt.toml:11: policy.rules[0].effect")
    found = problems(POLICY.replace('op = "eq"', 'op = "almost"'))
    assert len(found) == 1 and "policy.rules[0].when[0].op" in found[0]


def test_mcp_servers_fill_the_config_and_need_exactly_one_of_command_or_url(
        tmp_path: Path) -> None:
    path = tmp_path / "overt.toml"
    path.write_text('[mcp_servers.notes]\ncommand = ["notes-server", "--stdio"]\n'
                    'read_only = ["add"]\n[mcp_servers.web]\nurl = "http://127.0.0.1:9/mcp"\n',
                    encoding="utf-8")
    config = config_file.load({}, path=path)
    notes, web = config.mcp_servers
    assert (notes.name, notes.command, notes.read_only) == (
        "notes", ("notes-server", "--stdio"), ("add",))
    assert (web.name, web.url) == ("web", "http://127.0.0.1:9/mcp")
    path.write_text('[mcp_servers.bad]\nread_only = []\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="exactly one of command or url"):
        config_file.load({}, path=path)


def test_a_byte_order_mark_is_named_rather_than_an_invalid_statement(tmp_path: Path) -> None:
    """Editors on Windows save one; tomllib's message was "Invalid statement" at line 1."""
    path = tmp_path / "overt.toml"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    with pytest.raises(ConfigFileError, match="byte-order mark"):
        config_file.read(path)
