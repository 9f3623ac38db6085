"""The service's switches: parsing ``--set``, names, and which tools run on the thread pool."""

from __future__ import annotations

import dataclasses

import pytest
from orders.auth import Verifier, mint
from orders.config import FLAGS, NAIVE, TUNED, parse_setting, with_settings
from orders.server import build_server

from millimcp import ToolError


def test_presets_differ_in_every_flag() -> None:
    assert NAIVE.flags() == dict.fromkeys(FLAGS, False)
    assert TUNED.flags() == dict.fromkeys(FLAGS, True)
    assert (NAIVE.name, TUNED.name) == ("naive", "tuned")
    assert NAIVE.recommender_latency_ms == 400.0
    assert NAIVE.recs_ttl_s == 300.0


def test_settings_are_parsed_and_typed() -> None:
    config = with_settings(
        NAIVE, ["covering_index=true", "async-db=on", "orders=20_000", "db_url=sqlite:///x.db"]
    )
    assert config.covering_index
    assert config.async_db
    assert config.orders == 20_000
    assert config.db_url == "sqlite:///x.db"
    assert config.name == "naive+async_db+covering_index"
    assert with_settings(TUNED, ["trimmed=0"]).trimmed is False
    assert parse_setting("recs_ttl_s=2.5") == ("recs_ttl_s", 2.5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("trimmed", "expected name=value"),
        ("shiny=true", "unknown setting 'shiny'"),
        ("trimmed=maybe", "takes true or false"),
    ],
)
def test_bad_settings_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_setting(text)


@pytest.mark.parametrize(
    ("settings", "blocking"),
    [
        ((), True),  # naive: plain def tools on the thread pool, like FastAPI's def endpoints
        (("trimmed=true", "compression=true", "fast_codec=true"), True),
        (("async_db=true",), False),
        (("async_recs=true",), False),
        (("recs_cache=true",), False),  # the cache store is asyncio's: async tools
    ],
)
def test_tools_are_sync_only_when_nothing_async_is_on(
    settings: tuple[str, ...], blocking: bool
) -> None:
    server = build_server(with_settings(NAIVE, settings))
    tools = server._tools
    assert set(tools) == {
        "get_order",
        "list_orders",
        "analyze_orders",
        "get_recommendations",
        "get_profile",
        "create_order",
    }
    assert {entry.is_async for entry in tools.values()} == {not blocking}
    assert tools["create_order"].invalidates is not None
    assert tools["get_profile"].args.context_param == "ctx"
    server.close()


def test_tokens_are_checked_before_anything_else() -> None:
    verifier = Verifier("s3cret")

    class Ctx:
        class headers:
            raw = [(b"authorization", f"Bearer {mint('s3cret', 'a', customers=[4])}".encode())]

    caller = verifier.caller(Ctx())
    caller.check(4)
    with pytest.raises(ToolError, match="may not access customer 5"):
        caller.check(5)
    dataclasses.replace(caller, customers=None).check(5)
