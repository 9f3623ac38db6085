"""The three tools of the agent workload (examples/scenarios/agent.toml), for trying the lab.

Serve it from the repository's root with::

    millimcp serve examples.scenarios.agent_server:server --port 8000
    millimcp serve examples.scenarios.agent_server:cached --port 8001   # recommendations cached

``get_recommendations`` waits on a slow downstream (a 20 ms recommender); ``cached`` keeps its
results for 30 s (``Cache(ttl=30)``), so a lab comparison of the two shows what the cache buys.
"""

from __future__ import annotations

import asyncio

import msgspec

from millimcp import Cache, Server

RECOMMENDER_S = 0.020
PROFILE_STORE_S = 0.002


class Order(msgspec.Struct):
    order_id: int
    customer_id: int
    status: str
    total: float


class Recommendations(msgspec.Struct):
    customer_id: int
    skus: list[str]


class Profile(msgspec.Struct):
    customer_id: int
    name: str
    tier: str


def build_server(*, cache_recommendations: bool) -> Server:
    """The agent tools; ``cache_recommendations`` caches ``get_recommendations`` for 30 s."""
    server = Server("agent-example", version="1.0.0")

    @server.tool(annotations={"readOnlyHint": True})
    async def get_order(order_id: int) -> Order:
        """An order and the customer who placed it."""
        return Order(order_id, 10_000 + order_id % 500, "shipped", order_id % 997 / 10)

    @server.tool(
        annotations={"readOnlyHint": True},
        cache=Cache(ttl=30) if cache_recommendations else None,
    )
    async def get_recommendations(customer_id: int) -> Recommendations:
        """Products to suggest to a customer (asks a slow recommender)."""
        await asyncio.sleep(RECOMMENDER_S)
        return Recommendations(customer_id, [f"sku-{(customer_id * k) % 907}" for k in (3, 5, 7)])

    @server.tool(annotations={"readOnlyHint": True})
    async def get_profile(customer_id: int) -> Profile:
        """A customer's profile."""
        await asyncio.sleep(PROFILE_STORE_S)
        return Profile(customer_id, f"customer {customer_id}", "gold" if customer_id % 7 else "new")

    return server


server = build_server(cache_recommendations=False)
cached = build_server(cache_recommendations=True)
