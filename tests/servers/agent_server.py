"""The three tools of the S7.3 agent workflow, for the lab's scenario tests.

Served by ``millimcp serve tests.servers.agent_server:server``. The server keeps a log of
the ids each tool saw (read with ``seen``, cleared with ``reset``), so a test can check that
values really travelled from one step to the next.
"""

from __future__ import annotations

import asyncio

import msgspec

from millimcp import Server, ServerConfig, ToolError

server = Server("agent-test-server", version="1.0.0", config=ServerConfig(state_key=b"a" * 32))

_log: dict[str, list[int]] = {"orders": [], "customers": [], "recs": [], "profiles": []}


class Order(msgspec.Struct):
    order_id: int
    customer_id: int
    total: float


class Profile(msgspec.Struct):
    customer_id: int
    name: str


def customer_of(order_id: int) -> int:
    """The customer an order belongs to (a pure function, so tests can recompute it)."""
    return 10_000 + (order_id * 7919) % 5_000


@server.tool(annotations={"readOnlyHint": True})
async def get_order(order_id: int) -> Order:
    if order_id <= 0:
        raise ToolError(f"no order {order_id}")
    customer = customer_of(order_id)
    _log["orders"].append(order_id)
    _log["customers"].append(customer)
    return Order(order_id=order_id, customer_id=customer, total=order_id / 100)


@server.tool(annotations={"readOnlyHint": True}, structured=False)
async def get_recommendations(customer_id: int) -> str:
    """Answers JSON as plain text (no structuredContent): the scenario parses it."""
    _log["recs"].append(customer_id)
    picks = [f"sku-{(customer_id + offset) % 97}" for offset in range(3)]
    return msgspec.json.encode({"customer_id": customer_id, "skus": picks}).decode()


@server.tool(annotations={"readOnlyHint": True})
async def get_profile(customer_id: int) -> Profile:
    _log["profiles"].append(customer_id)
    return Profile(customer_id=customer_id, name=f"customer {customer_id}")


@server.tool()
async def echo(value: str) -> str:
    """Plain text, not JSON: a later step sees the string itself."""
    return value


_meetings: dict[str, tuple[asyncio.Event, list[int]]] = {}


@server.tool()
async def meet(key: str, expected: int) -> dict[str, bool]:
    """Waits (up to 10 s) until ``expected`` calls with this ``key`` have arrived: only calls
    that really run at the same time all meet; the others fail."""
    event, arrived = _meetings.setdefault(key, (asyncio.Event(), []))
    arrived.append(1)
    if len(arrived) >= expected:
        event.set()
    try:
        await asyncio.wait_for(event.wait(), 10.0)
    except TimeoutError:
        raise ToolError(f"only {len(arrived)} of {expected} calls met") from None
    return {"met": True}


@server.tool(annotations={"readOnlyHint": True})
async def seen() -> dict[str, list[int]]:
    return _log


@server.tool()
async def reset() -> str:
    for ids in _log.values():
        ids.clear()
    _meetings.clear()
    return "ok"
