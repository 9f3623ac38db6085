"""millimcp.server.notify: a ``subscriptions/listen`` stream gets what it asked for, and only
that; a stream too far behind is closed; ``close()`` ends every stream with its result."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from millimcp import Context
from millimcp.protocol.types import SubscriptionFilter
from millimcp.server.notify import Notifier


class Stream:
    """A listener's request: its context, and the notifications sent on it."""

    def __init__(self, notifier: Notifier, wanted: SubscriptionFilter, request_id: int) -> None:
        self.sent: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()

        async def emit(data: bytes) -> None:
            self.sent.append(json.loads(data))
            self.arrived.set()

        ctx = Context(request_id=request_id, method="subscriptions/listen", meta=None, _emit=emit)
        self.task = asyncio.create_task(notifier.listen(wanted, ctx))

    async def next(self) -> dict[str, Any]:
        while not self.sent:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 5)
        return self.sent.pop(0)


def tag(request_id: int) -> dict[str, Any]:
    return {"io.modelcontextprotocol/subscriptionId": request_id}


async def test_each_stream_gets_what_it_asked_for() -> None:
    notifier = Notifier(queue_size=8)
    tools = Stream(notifier, SubscriptionFilter(tools_list_changed=True), 1)
    docs = Stream(notifier, SubscriptionFilter(resource_subscriptions=["file:///a"]), 2)
    ack = await tools.next()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"toolsListChanged": True}
    assert ack["params"]["_meta"] == tag(1)
    assert (await docs.next())["params"]["notifications"] == {
        "resourceSubscriptions": ["file:///a"]
    }
    assert len(notifier) == 2

    notifier.list_changed("prompts")  # nobody asked
    notifier.resource_updated("file:///b")  # nobody asked
    notifier.list_changed("tools")
    notifier.resource_updated("file:///a")
    assert await tools.next() == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": tag(1)},
    }
    assert await docs.next() == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "file:///a", "_meta": tag(2)},
    }
    notifier.close()
    assert await asyncio.wait_for(tools.task, 5) == tag(1)
    assert await asyncio.wait_for(docs.task, 5) == tag(2)
    assert tools.sent == []
    assert docs.sent == []
    assert len(notifier) == 0


async def test_templates_and_resources_share_one_notification() -> None:
    notifier = Notifier(queue_size=8)
    stream = Stream(notifier, SubscriptionFilter(resources_list_changed=True), 7)
    await stream.next()
    notifier.list_changed("templates")
    notifier.list_changed("resources")
    for _ in range(2):
        assert (await stream.next())["method"] == "notifications/resources/list_changed"
    notifier.close()
    await asyncio.wait_for(stream.task, 5)


async def test_a_stream_too_far_behind_is_closed() -> None:
    notifier = Notifier(queue_size=2)
    stream = Stream(notifier, SubscriptionFilter(tools_list_changed=True), 3)
    await stream.next()
    for _ in range(3):  # one more than the queue holds, before the stream reads any
        notifier.list_changed("tools")
    assert len(notifier) == 0  # dropped from the fan-out at once
    assert await asyncio.wait_for(stream.task, 5) == tag(3)
    assert len(stream.sent) == 1  # what was queued before the overflow, then the end
