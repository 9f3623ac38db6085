"""Properties of the body readers over any chunking, limit and budget (hypothesis)."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from millimcp import HttpConfig
from millimcp.transports.body import BodyBudget, Refusal, read_more, read_writable

CONFIG = HttpConfig(body_timeout_s=5.0, body_min_rate=0)
chunkings = st.lists(st.binary(max_size=64), min_size=1, max_size=12)


def receiver(chunks: list[bytes]) -> Any:
    queue = list(chunks)

    async def receive() -> MutableMapping[str, Any]:
        chunk = queue.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(queue)}

    return receive


@settings(max_examples=150, deadline=None)
@given(chunkings, st.integers(0, 400), st.integers(0, 400), st.integers(0, 1000))
def test_readers_return_the_body_or_a_refusal_and_count_exactly(
    chunks: list[bytes], limit: int, budget_limit: int, declared: int
) -> None:
    whole = b"".join(chunks)
    expected = 200
    size = 0
    for chunk in chunks:  # limit first, then budget, chunk by chunk (as the readers do)
        size += len(chunk)
        if size > limit:
            expected = 413
            break
        if size > budget_limit:
            expected = 503
            break

    async def run() -> None:
        budget = BodyBudget(budget_limit)
        more = await read_more(receiver(chunks[1:] or [b""]), chunks[0], limit, budget, CONFIG)
        other = BodyBudget(budget_limit)
        writable = await read_writable(receiver(chunks), limit, declared, other, CONFIG)
        for result in (more, writable):
            if isinstance(result, Refusal):
                assert result.status == expected
            else:
                assert expected == 200
                assert bytes(result) == whole
        assert budget.held == (len(whole) if expected == 200 else 0)
        assert other.held == (len(whole) if expected == 200 else 0)

    asyncio.run(run())
