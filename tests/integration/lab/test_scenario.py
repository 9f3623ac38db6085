"""millimcp.lab.scenario: the file format, the templates, and runs against a real server."""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from millimcp import Client
from millimcp.client import ToolResult
from millimcp.errors import ConfigurationError
from millimcp.lab.cli import main as lab_main
from millimcp.lab.recording import decode_histogram
from millimcp.lab.results import load_run
from millimcp.lab.scenario import (
    COOLDOWN_NOTE,
    Call,
    Parallel,
    Scenario,
    format_outcome,
    load_scenario,
    parse_scenario,
    run_scenario,
    step_value,
    to_run,
)
from millimcp.protocol.types import TextContent
from tests.conftest import ROOT, free_port, start_server, stop_server
from tests.servers.agent_server import customer_of

AGENT_TOML = ROOT / "examples" / "scenarios" / "agent.toml"


def one_call(args: str, *, before: str = "") -> Call:
    """The last call of a scenario whose earlier steps are ``before``."""
    text = f'{before}\n[[step]]\nname = "probe"\ntool = "t"\nargs = {args}\n'
    step = parse_scenario(text).steps[-1]
    assert isinstance(step, Call)
    return step


ORDER_STEP = '[[step]]\nname = "order"\ntool = "get_order"\n'


# -- the file format --------------------------------------------------------------------------


def test_the_agent_example_parses_into_a_sequence_and_a_fan_out() -> None:
    scenario = load_scenario(AGENT_TOML)
    assert scenario.name == "agent"
    assert scenario.seed == 7
    order, recs, profiles = scenario.steps
    assert isinstance(order, Call)
    assert order.tool == "get_order"
    assert isinstance(recs, Call)
    assert recs.tool == "get_recommendations"
    assert isinstance(profiles, Parallel)
    assert profiles.name == "profiles"
    assert [call.tool for call in profiles.calls] == ["get_profile"] * 3
    assert scenario.stat_names == (
        "order",
        "recs",
        "profiles",
        "profile_1",
        "profile_2",
        "profile_3",
    )
    assert scenario.width == 3
    assert scenario.referenced == {"order"}  # only the order's result is ever decoded


def test_a_whole_string_template_keeps_the_type_and_a_partial_one_formats() -> None:
    call = one_call(
        '{ id = "{{ order.customer_id }}", label = "c-{{ order.customer_id }}", '
        'nested = { list = ["{{ order.tags }}", 3, "plain"] }, raw = "{{ order }}x" }',
        before=ORDER_STEP,
    )
    order = {"customer_id": 12, "tags": ["a", "b"]}
    assert call.render({"order": order}) == {
        "id": 12,
        "label": "c-12",
        "nested": {"list": [["a", "b"], 3, "plain"]},
        "raw": '{"customer_id":12,"tags":["a","b"]}x',
    }


def test_references_read_fields_indexes_and_keys() -> None:
    call = one_call(
        '{ a = "{{ order.items[1].sku }}", b = "{{ order[\\"odd key\\"] }}", '
        'c = "{{ order.items[-1].sku }}", d = "{{ len(order.items) }}" }',
        before=ORDER_STEP,
    )
    order = {"items": [{"sku": "x"}, {"sku": "y"}, {"sku": "z"}], "odd key": True}
    assert call.render({"order": order}) == {"a": "y", "b": True, "c": "z", "d": 3}


def test_a_missing_field_is_a_lookup_failure_not_python_attribute_access() -> None:
    call = one_call('{ a = "{{ order.__class__ }}" }', before=ORDER_STEP)
    with pytest.raises(LookupError, match="no such field"):
        call.render({"order": {"customer_id": 1}})
    call = one_call('{ a = "{{ order.items[5] }}" }', before=ORDER_STEP)
    with pytest.raises(LookupError, match=r"order\.items\[5\]"):
        call.render({"order": {"items": [1]}})


def test_generators_are_seeded_and_the_builtins_are_readable() -> None:
    text = """
seed = 3
[vars]
regions = ["eu", "us", "ap"]
[[step]]
name = "probe"
tool = "t"
[step.args]
n = "{{ random_int(1, 6) }}"
f = "{{ random_float(-1.5, 1.5) }}"
r = "{{ choice(vars.regions) }}"
s = "{{ choice('a', 'b') }}"
u = "{{ uuid() }}"
who = "agent-{{ agent }}/{{ iteration }}"
i = "{{ int('42') }}"
x = "{{ float(2) }}"
t = "{{ str(7) }}"
neg = "{{ -5 }}"
lit = "{{ [1, 'two'] }}"
"""
    scenario = parse_scenario(text)
    (call,) = scenario.calls
    first = call.render(rng=random.Random(1), vars=scenario.vars, agent=2, iteration=9)
    again = call.render(rng=random.Random(1), vars=scenario.vars, agent=2, iteration=9)
    other = call.render(rng=random.Random(2), vars=scenario.vars, agent=2, iteration=9)
    assert first == again
    assert first != other
    assert 1 <= first["n"] <= 6
    assert -1.5 <= first["f"] <= 1.5
    assert first["r"] in ("eu", "us", "ap")
    assert first["s"] in ("a", "b")
    assert len(first["u"]) == 36
    assert first["u"][14] == "4"
    assert first["who"] == "agent-2/9"
    assert (first["i"], first["x"], first["t"], first["neg"]) == (42, 2.0, "7", -5)
    assert first["lit"] == [1, "two"]


def test_text_without_templates_is_sent_as_written() -> None:
    call = one_call('{ q = "no {templates} here", n = 4, on = true }')
    assert call.render() == {"q": "no {templates} here", "n": 4, "on": True}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ('{ a = "{{ ordr.id }}" }', "unknown name 'ordr'"),
        ('{ a = "{{ later.id }}" }', "'later' is not a call that ran before"),
        ("{ a = \"{{ __import__('os') }}\" }", "the functions are"),
        ('{ a = "{{ order.id + 1 }}" }', "is not allowed"),
        ('{ a = "{{ (lambda: 1)() }}" }', "the functions are"),
        ('{ a = "{{ [x for x in order] }}" }', "is not allowed"),
        ('{ a = "{{ random_int(1) }}" }', "takes 2 argument"),
        ('{ a = "{{ choice(*order) }}" }', "positional arguments only"),
        ('{ a = "{{ order.id" }', "unterminated template"),
        ('{ a = "{{ order..id }}" }', "cannot parse"),
        ("{ a = \"{{ b'x' }}\" }", "is not allowed"),
    ],
)
def test_bad_expressions_are_refused_when_the_file_loads(args: str, message: str) -> None:
    text = f'{ORDER_STEP}[[step]]\nname = "probe"\ntool = "t"\nargs = {args}\n'
    text += '[[step]]\nname = "later"\ntool = "t"\n'
    with pytest.raises(ConfigurationError, match=message) as caught:
        parse_scenario(text)
    assert "step 'probe' args" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = 'x'\n", "no steps"),
        ("[[step]\n", "not valid TOML"),
        ('colour = 1\n[[step]]\nname = "a"\ntool = "t"\n', "unknown key"),
        ('[[step]]\nname = "a"\ntool = "t"\nretries = 2\n', r"unknown key\(s\) retries"),
        ('[[step]]\ntool = "t"\n', "needs a name"),
        ('[[step]]\nname = "a"\n', "tool must be"),
        ('[[step]]\nname = "a b"\ntool = "t"\n', "must be an identifier"),
        ('[[step]]\nname = "agent"\ntool = "t"\n', "reserved"),
        ('[[step]]\nname = "a"\ntool = "t"\n[[step]]\nname = "a"\ntool = "t"\n', "already"),
        ('[[step]]\nname = "a"\ntool = "t"\nargs = 3\n', "args must be a table"),
        ('[[step]]\nname = "a"\ntool = "t"\ntimeout = -1\n', "positive"),
        ('[[step]]\nname = "g"\nparallel = []\n', "non-empty list"),
        ("seed = 'x'\n[[step]]\nname = 'a'\ntool = 't'\n", "seed must be an integer"),
    ],
)
def test_bad_files_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_scenario(text)


def test_calls_of_one_fan_out_cannot_read_each_other_and_a_fan_out_has_no_value() -> None:
    sibling = """
[[step]]
name = "g"
parallel = [ { name = "a", tool = "t" }, { name = "b", tool = "t", args = { x = "{{ a }}" } } ]
"""
    with pytest.raises(ConfigurationError, match="'a' is not a call that ran before"):
        parse_scenario(sibling)
    group = sibling.replace('"{{ a }}"', '"1"') + '[[step]]\nname = "c"\ntool = "t"\n'
    group += 'args = { x = "{{ g }}", y = "{{ b }}" }\n'
    with pytest.raises(ConfigurationError, match="'g' is not a call that ran before"):
        parse_scenario(group)
    parse_scenario(group.replace('"{{ g }}"', '"{{ a }}"'))  # after the fan-out: fine


def test_a_scenario_file_names_itself_after_its_stem(tmp_path: Path) -> None:
    path = tmp_path / "checkout.toml"
    path.write_text('[[step]]\nname = "a"\ntool = "t"\n')
    assert load_scenario(path).name == "checkout"
    with pytest.raises(ConfigurationError, match="cannot read scenario"):
        load_scenario(tmp_path / "missing.toml")


def test_a_step_value_is_structured_content_else_json_text_else_text() -> None:
    def result(text: str, structured: object = None) -> ToolResult:
        return ToolResult([TextContent(text=text)], structured)

    assert step_value(result('{"a": 1}', {"b": 2})) == {"b": 2}
    assert step_value(result('{"a": 1}')) == {"a": 1}
    assert step_value(result("[1, 2]")) == [1, 2]
    assert step_value(result("hello")) == "hello"


# -- runs against a real server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    """tests/servers/agent_server.py (get_order, get_recommendations, get_profile...)."""
    port = free_port()
    process = start_server(
        ["-m", "millimcp", "serve", "tests.servers.agent_server:server", "--port", str(port)],
        port,
    )
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


@pytest.fixture
async def client(agent_url: str) -> AsyncIterator[Client]:
    async with Client.over_http(agent_url, retry=None) as opened:
        await opened.call_tool("reset", {})
        yield opened


async def seen(client: Client) -> dict[str, list[int]]:
    result = await client.call_tool("seen", {})
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_the_agent_scenario_passes_each_orders_customer_to_the_later_steps(
    client: Client,
) -> None:
    scenario = load_scenario(AGENT_TOML)
    outcome = await run_scenario(scenario, client, concurrency=4, iterations=40)

    assert outcome.iterations == 40
    assert not outcome.errors
    assert {name: series.calls for name, series in outcome.steps.items()} == dict.fromkeys(
        scenario.stat_names, 40
    )
    log = await seen(client)
    assert len(log["orders"]) == 40
    # The customer each order belongs to (only the server knows it) is the one the
    # recommendations and the three profile lookups were asked about.
    customers = Counter(customer_of(order_id) for order_id in log["orders"])
    assert Counter(log["customers"]) == customers
    assert Counter(log["recs"]) == customers
    assert Counter(log["profiles"]) == Counter({c: 3 * n for c, n in customers.items()})


async def test_a_seeded_agent_draws_the_same_order_ids_every_run(client: Client) -> None:
    scenario = load_scenario(AGENT_TOML)
    await run_scenario(scenario, client, concurrency=1, iterations=6)
    first = (await seen(client))["orders"]
    await client.call_tool("reset", {})
    await run_scenario(scenario, client, concurrency=1, iterations=6)
    assert (await seen(client))["orders"] == first
    rng = random.Random("7:0")  # agent 0 of seed 7, as the module docstring says
    assert first == [rng.randint(1, 1_000_000) for _ in range(6)]
    await client.call_tool("reset", {})
    await run_scenario(scenario, client, concurrency=1, iterations=6, seed=8)
    assert (await seen(client))["orders"] != first


async def test_values_from_text_json_and_plain_text_results_travel_too(client: Client) -> None:
    scenario = parse_scenario(
        """
[[step]]
name = "recs"
tool = "get_recommendations"
args = { customer_id = 10042 }
[[step]]
name = "sku"
tool = "echo"
args = { value = "{{ recs.skus[2] }}" }
[[step]]
name = "again"
tool = "echo"
args = { value = "got {{ sku }} for {{ recs.customer_id }}" }
[[step]]
name = "profile"
tool = "get_profile"
args = { customer_id = "{{ recs.customer_id }}" }
"""
    )
    outcome = await run_scenario(scenario, client, iterations=2)
    assert outcome.iterations == 2, outcome.first_error
    assert (await seen(client))["profiles"] == [10042, 10042]
    result = await client.call_tool("echo", {"value": "x"})
    assert result.text == "x"
    assert scenario.referenced == {"recs", "sku"}


async def test_a_fan_out_really_runs_its_calls_at_once(client: Client) -> None:
    meeting = '{ name = "mN", tool = "meet", args = { key = "{{ agent }}-{{ iteration }}", '
    meeting += "expected = 3 } }"
    calls = ", ".join(meeting.replace("mN", f"m{index}") for index in range(3))
    text = f"[[step]]\nname = 'together'\nparallel = [ {calls} ]\n"
    outcome = await run_scenario(parse_scenario(text), client, concurrency=2, iterations=4)
    assert outcome.iterations == 4, outcome.first_error
    assert outcome.steps["together"].calls == 4


async def test_a_failing_step_ends_the_iteration_and_is_counted_by_kind(client: Client) -> None:
    text = AGENT_TOML.read_text().replace("random_int(1, 1000000)", "choice(0, 0)")
    outcome = await run_scenario(parse_scenario(text), client, concurrency=2, iterations=5)
    assert outcome.iterations == 0
    assert outcome.errors == {"tool_error": 5}
    assert outcome.steps["order"].errors == {"tool_error": 5}
    assert outcome.steps["recs"].calls == 0
    assert not outcome.steps["recs"].errors
    assert "no order 0" in outcome.first_error["tool_error"]
    assert (await seen(client))["recs"] == []
    run = to_run(outcome, target="http://x/mcp", transport="http", era="modern")
    printed = format_outcome(outcome, run)
    assert "5 failed with tool_error; first: order: no order 0" in printed
    recs_line = next(line for line in printed.splitlines() if line.startswith("  recs "))
    assert recs_line.split() == ["recs", "0", "0", "-", "-", "-", "-", "-"]


async def test_a_reference_the_result_cannot_satisfy_fails_that_step(client: Client) -> None:
    text = AGENT_TOML.read_text().replace('order.customer_id }}" }\n', 'order.nope }}" }\n', 1)
    outcome = await run_scenario(parse_scenario(text), client, iterations=3)
    assert outcome.errors == {"reference": 3}
    assert outcome.steps["order"].calls == 3
    assert outcome.steps["recs"].errors == {"reference": 3}
    assert "order.nope: no such field" in outcome.first_error["reference"]


async def test_protocol_errors_count_under_their_code(client: Client) -> None:
    text = '[[step]]\nname = "x"\ntool = "no_such_tool"\n'
    outcome = await run_scenario(parse_scenario(text), client, iterations=2)
    assert outcome.errors == {"jsonrpc_-32602": 2}


async def test_a_timed_run_records_only_after_the_warm_up(client: Client) -> None:
    scenario = load_scenario(AGENT_TOML)
    outcome = await run_scenario(scenario, client, concurrency=3, duration_s=1.0, warmup_s=0.3)
    log = await seen(client)
    assert outcome.iterations > 0
    assert len(log["orders"]) > outcome.iterations  # the warm-up's iterations ran too
    assert outcome.duration_s >= 1.0
    assert all(0 <= ended <= outcome.duration_s for ended in outcome.ended_s)


async def test_a_cooldown_keeps_the_load_on_until_the_recorded_iterations_end(
    client: Client,
) -> None:
    scenario = load_scenario(AGENT_TOML)
    outcome = await run_scenario(scenario, client, concurrency=3, duration_s=1.0, cooldown=True)
    log = await seen(client)
    recorded = outcome.iterations + sum(outcome.errors.values())
    assert outcome.iterations > 0
    assert outcome.duration_s == 1.0  # the window: what started in it is recorded
    assert all(0 <= started < 1.0 for started in outcome.started_s)
    assert len(log["orders"]) > recorded  # iterations that started later ran, unrecorded
    run = to_run(outcome, target="http://x/mcp", transport="http", era="modern")
    assert COOLDOWN_NOTE in run.notes
    assert sum(point.calls for point in run.timeline) == outcome.iterations
    assert "load kept on to the end" in format_outcome(outcome, run)


async def test_the_run_file_holds_the_scenario_and_its_steps(
    client: Client, tmp_path: Path
) -> None:
    from millimcp.lab.results import save_run

    scenario = load_scenario(AGENT_TOML)
    outcome = await run_scenario(scenario, client, concurrency=2, iterations=30)
    run = to_run(outcome, target="http://x/mcp", transport="http", era="modern", server="s/1")
    save_run(run, tmp_path / "run.json")
    loaded = load_run(tmp_path / "run.json")
    assert loaded.kind == "scenario"
    assert loaded.calls == 30
    assert loaded.errors == {}
    assert loaded.args == {"scenario": "agent", "seed": 7}
    assert loaded.steps is not None
    assert list(loaded.steps) == list(scenario.stat_names)
    assert all(step.calls == 30 and step.errors == 0 for step in loaded.steps.values())
    assert len(loaded.samples_ms) == 30
    assert loaded.latency_ms["max"] == max(loaded.samples_ms)
    assert sum(point.calls for point in loaded.timeline) == 30
    assert loaded.histogram is not None
    histogram = decode_histogram(loaded.histogram)
    assert histogram.get_total_count() == 30
    assert histogram.get_max_value() / 1000 == pytest.approx(loaded.latency_ms["max"], rel=0.01)
    # The end-to-end latency covers the steps: no iteration is faster than its first call.
    assert loaded.latency_ms["min"] >= loaded.steps["order"].latency_ms["min"]


# -- the command ------------------------------------------------------------------------------


def test_the_command_runs_a_scenario_and_exports_the_run(
    agent_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "agent.json"
    status = lab_main(
        ["scenario", str(AGENT_TOML), agent_url, "-c", "2", "-n", "8", "--export-json", str(out)]
    )
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "8 iterations" in printed
    for name in ("order", "recs", "profiles (fan-out)", "  profile_3"):
        assert name in printed
    run = load_run(out)
    assert (run.kind, run.calls, run.concurrency, run.era) == ("scenario", 8, 2, "modern")
    assert run.server == "agent-test-server/1.0.0"


def test_the_command_cools_down_on_request(
    agent_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cooled.json"
    command = ["scenario", str(AGENT_TOML), agent_url, "-c", "2", "-d", "1", "--cooldown"]
    status = lab_main([*command, "--export-json", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "load kept on to the end" in printed
    assert COOLDOWN_NOTE in load_run(out).notes


def test_the_command_runs_over_stdio_in_the_handshake_era(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "stdio.json"
    command = f"{sys.executable} -m millimcp serve tests.servers.agent_server:server --stdio"
    status = lab_main(
        [
            "scenario",
            str(AGENT_TOML),
            command,
            "--era",
            "handshake",
            "-n",
            "3",
            "--export-json",
            str(out),
        ]
    )
    assert status == 0, capsys.readouterr()
    run = load_run(out)
    assert (run.transport, run.era, run.calls) == ("stdio", "handshake", 3)


def test_the_command_explains_a_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[step]]\nname = "a"\ntool = "t"\nargs = { x = "{{ nope }}" }\n')
    assert lab_main(["scenario", str(bad), "http://127.0.0.1:9/mcp", "-n", "1"]) == 2
    assert "bad.toml: step 'a' args: unknown name 'nope'" in capsys.readouterr().err


def test_a_scenario_object_is_plain_data() -> None:
    scenario = load_scenario(AGENT_TOML)
    assert isinstance(scenario, Scenario)
    assert scenario.calls[1].args == {"customer_id": "{{ order.customer_id }}"}


def test_the_example_server_runs_the_agent_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    target = "examples.scenarios.agent_server:cached"
    process = start_server(["-m", "millimcp", "serve", target, "--port", str(port)], port)
    try:
        status = lab_main(
            ["scenario", str(AGENT_TOML), f"http://127.0.0.1:{port}/mcp", "-c", "2", "-n", "6"]
        )
    finally:
        stop_server(process)
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "6 iterations" in printed
    assert "agent-example/1.0.0" in printed
