"""The order service (examples/orders) as real processes: naive, tuned and one mix.

Each tool in both presets; the trimmed answer is a subset of the untrimmed one with equal
values; create_order drops the customer's cached recommendations; auth refuses what it
must, saying why; the recommender's latency is paid on a miss and skipped on a hit.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from typing import Any

import httpx
import pytest
from orders.auth import READ, mint
from orders.config import NAIVE

from millimcp import Client
from tests.integration.http.conftest import body_for, headers_for
from tests.integration.orders.conftest import LATENCY_MS, Launcher, recommender_stats

PRESETS = ["naive", "tuned"]

READS: list[tuple[str, dict[str, Any]]] = [
    ("get_order", {"order_id": 4321}),
    ("list_orders", {"customer_id": 11}),
    ("analyze_orders", {"customer_id": 11}),
    ("get_recommendations", {"customer_id": 11}),
    ("get_profile", {"customer_id": 11}),
]


async def call(url: str, tool: str, arguments: dict[str, Any], token: str) -> dict[str, Any]:
    """The tool's JSON answer; fails the test on a tool error."""
    text, is_error = await call_text(url, tool, arguments, token)
    assert not is_error, text
    parsed: dict[str, Any] = json.loads(text)
    return parsed


async def call_text(
    url: str, tool: str, arguments: dict[str, Any], token: str | None
) -> tuple[str, bool]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with Client.over_http(url, headers=headers, retry=None) as client:
        result = await client.call_tool(tool, arguments)
    block = result.content[0]
    return str(getattr(block, "text", "")), bool(result.is_error)


def assert_subset(small: Any, big: Any, path: str = "$") -> None:
    """Every value of ``small`` is in ``big`` at the same place, equal."""
    if isinstance(small, dict):
        assert isinstance(big, dict), path
        for key, value in small.items():
            assert key in big, f"{path}.{key} missing from the untrimmed answer"
            assert_subset(value, big[key], f"{path}.{key}")
    elif isinstance(small, list):
        assert isinstance(big, list), path
        assert len(small) == len(big), path
        for i, (a, b) in enumerate(zip(small, big, strict=True)):
            assert_subset(a, b, f"{path}[{i}]")
    else:
        assert small == big, f"{path}: {small!r} != {big!r}"


@pytest.mark.parametrize("preset", PRESETS)
async def test_every_tool_answers(launch: Launcher, token: str, preset: str) -> None:
    url = launch(preset)
    found = await call(url, "get_order", {"order_id": 4321}, token)
    order = found["order"]
    assert order["id"] == 4321
    assert order["lines"]
    assert sum(line["quantity"] for line in order["lines"]) == order["item_count"]
    recent = [o["created_at"] for o in found["recent_orders"]]
    assert len(recent) == 20
    assert recent == sorted(recent, reverse=True)

    listed = await call(url, "list_orders", {"customer_id": 11, "days": 200, "limit": 5}, token)
    assert 0 < len(listed["orders"]) <= 5
    assert all(o["created_at"] >= listed["since"] for o in listed["orders"])
    delivered = await call(url, "list_orders", {"customer_id": 11, "status": "delivered"}, token)
    assert {o["status"] for o in delivered["orders"]} == {"delivered"}

    analysis = await call(url, "analyze_orders", {"customer_id": 11}, token)
    assert analysis["totals"]["orders"] == sum(analysis["by_status"].values())
    assert analysis["totals"]["spend_cents"] == sum(m["spend_cents"] for m in analysis["by_month"])
    assert analysis["top_categories"]
    assert len(analysis["suggestions"]) == 10

    recs = await call(url, "get_recommendations", {"customer_id": 11, "limit": 4}, token)
    assert [s["product_id"] for s in recs["suggestions"]] == [
        s["product_id"] for s in analysis["suggestions"][:4]
    ]

    profile = (await call(url, "get_profile", {"customer_id": 11}, token))["profile"]
    assert profile["id"] == 11
    assert profile["orders"]["count"] > 0
    assert ("debug" in analysis) is (preset == "naive")


async def test_trimmed_answers_are_subsets_with_equal_values(launch: Launcher, token: str) -> None:
    naive, tuned = launch("naive"), launch("tuned")
    for tool, arguments in READS:
        full = await call(naive, tool, arguments, token)
        trimmed = await call(tuned, tool, arguments, token)
        assert_subset(trimmed, full)
        assert "debug" in full, tool
        assert "debug" not in trimmed, tool


async def test_the_analysis_is_about_60_kb_untrimmed_and_12_kb_trimmed(
    launch: Launcher, token: str
) -> None:
    sizes = {}
    for preset in PRESETS:
        text, _ = await call_text(launch(preset), "analyze_orders", {"customer_id": 12}, token)
        sizes[preset] = len(text.encode())
    assert 45_000 < sizes["naive"] < 80_000, sizes
    assert 8_000 < sizes["tuned"] < 18_000, sizes


async def test_flags_apply_one_by_one(launch: Launcher, token: str, recommender: str) -> None:
    """naive + recs_cache + trimmed: trimmed answers, the cache in front of the blocking
    recommender (async handlers offload the blocking parts to the pool)."""
    url = launch("naive", "recs_cache=true", "trimmed=true")
    before = recommender_stats(recommender)["by_customer"].get("13", 0)
    first = await call(url, "get_recommendations", {"customer_id": 13}, token)
    second = await call(url, "get_recommendations", {"customer_id": 13}, token)
    assert first == second
    assert "debug" not in first
    assert recommender_stats(recommender)["by_customer"]["13"] == before + 1


async def test_create_order_drops_the_customers_cached_recommendations(
    launch: Launcher, token: str, recommender: str
) -> None:
    url = launch("tuned")
    customer, key = 21, "21"

    def asked() -> int:
        return int(recommender_stats(recommender)["by_customer"].get(key, 0))

    analysis = await call(url, "analyze_orders", {"customer_id": customer}, token)
    profile = (await call(url, "get_profile", {"customer_id": customer}, token))["profile"]
    assert asked() == 1
    await call(url, "get_recommendations", {"customer_id": customer}, token)
    assert asked() == 1  # a hit: the recommender was not asked

    created = await call(
        url,
        "create_order",
        {"customer_id": customer, "items": [{"product_id": 3, "quantity": 2}, {"product_id": 7}]},
        token,
    )
    new = created["order"]
    assert new["status"] == "processing"
    assert new["item_count"] == 3

    after = await call(url, "analyze_orders", {"customer_id": customer}, token)
    assert asked() == 2  # invalidated: asked again
    assert after["totals"]["orders"] == analysis["totals"]["orders"] + 1
    assert after["orders"][0]["id"] == new["id"]
    listed = await call(url, "list_orders", {"customer_id": customer, "limit": 1}, token)
    assert listed["orders"][0] == new
    now = (await call(url, "get_profile", {"customer_id": customer}, token))["profile"]
    assert now["orders"]["count"] == profile["orders"]["count"] + 1
    assert now["orders"]["spend_cents"] == profile["orders"]["spend_cents"] + new["total_cents"]


async def test_the_recommenders_latency_is_paid_on_every_naive_call(
    launch: Launcher, token: str, recommender: str
) -> None:
    url = launch("naive")
    before = recommender_stats(recommender)["by_customer"].get("31", 0)
    for _ in range(2):
        started = time.perf_counter()
        await call(url, "get_recommendations", {"customer_id": 31}, token)
        assert time.perf_counter() - started >= 0.9 * LATENCY_MS / 1000
    assert recommender_stats(recommender)["by_customer"]["31"] == before + 2


@pytest.mark.parametrize("preset", PRESETS)
async def test_auth_refuses_with_a_clear_reason(launch: Launcher, preset: str) -> None:
    url = launch(preset)
    secret = NAIVE.auth_secret
    cases: list[tuple[str | None, str, dict[str, Any], str]] = [
        (None, "get_profile", {"customer_id": 1}, "unauthenticated: send 'Authorization"),
        (mint("not-the-secret", "x"), "get_profile", {"customer_id": 1}, "bad token signature"),
        (mint(secret, "x", ttl_s=-5), "get_profile", {"customer_id": 1}, "expired"),
        (
            mint(secret, "x", customers=[1, 2]),
            "get_profile",
            {"customer_id": 3},
            "may not access customer 3",
        ),
        (
            mint(secret, "x", customers=[1]),
            "get_order",
            {"order_id": 4321},
            "may not access customer",
        ),
        (
            mint(secret, "x", scopes=[READ]),
            "create_order",
            {"customer_id": 1, "items": [{"product_id": 1}]},
            "lacks the orders:write scope",
        ),
    ]
    for token, tool, arguments, reason in cases:
        text, is_error = await call_text(url, tool, arguments, token)
        assert is_error, (tool, text)
        assert reason in text, (tool, text)
    allowed = mint(secret, "x", customers=[1, 2])
    text, is_error = await call_text(url, "get_profile", {"customer_id": 2}, allowed)
    assert not is_error, text


def test_compression_follows_the_flag(launch: Launcher, token: str) -> None:
    arguments = {"name": "analyze_orders", "arguments": {"customer_id": 14}}
    headers = headers_for("tools/call", "analyze_orders")
    headers.update({"Authorization": f"Bearer {token}", "Accept-Encoding": "gzip"})
    codings = {}
    with httpx.Client(timeout=30) as client:
        for preset in PRESETS:
            with client.stream(
                "POST", launch(preset), content=body_for("tools/call", arguments), headers=headers
            ) as response:
                raw = b"".join(response.iter_raw())
            codings[preset] = response.headers.get("content-encoding")
            body = gzip.decompress(raw) if codings[preset] == "gzip" else raw
            assert not json.loads(body)["result"].get("isError")
            if preset == "tuned":
                assert len(raw) < len(body) / 3
    assert codings == {"naive": None, "tuned": "gzip"}


async def test_logging_follows_the_flag(launch: Launcher, token: str) -> None:
    for preset in PRESETS:
        await call(launch(preset), "get_profile", {"customer_id": 15}, token)
    naive = launch.logs[launch("naive")].read_text()
    # the queue thread writes a moment later
    for _ in range(100):
        tuned = launch.logs[launch("tuned")].read_text()
        if "tool=get_profile" in tuned:
            break
        await asyncio.sleep(0.05)
    assert "DEBUG orders response tool=get_profile body={" in naive
    assert "INFO orders tool=get_profile bytes=" in tuned
    assert "body=" not in tuned
