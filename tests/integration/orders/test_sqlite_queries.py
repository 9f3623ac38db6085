"""The tuned service's SQLite path (``orders.sqlite_queries``: sqlite3, reads on the event
loop or on a small thread pool) asks the same questions as SQLAlchemy's async Core path and
gets the same answers, trimmed and full, on the tests' seeded database (with the covering
index)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from orders.db import async_engine, covering_url
from orders.queries import CoreQueries, since_for
from orders.sqlite_queries import SqliteQueries, sqlite_path


@pytest.mark.parametrize("threads", [0, 2])
@pytest.mark.parametrize("full", [False, True])
async def test_every_read_matches_the_core_path(orders_db: str, full: bool, threads: int) -> None:
    url = covering_url(orders_db, True)
    path = sqlite_path(url)
    assert path is not None
    fast = SqliteQueries(path, full=full, threads=threads)
    core = CoreQueries(async_engine(url), full=full)
    try:
        since = since_for(365)
        for order_id in (1, 777, 19_999):
            order = await fast.order(order_id)
            assert order is not None
            assert order == await core.order(order_id)
            assert order["lines"]
            customer = order["customer_id"]
            assert await fast.orders(customer, since, None, 20) == await core.orders(
                customer, since, None, 20
            )
            assert await fast.orders(customer, since_for(3650), "delivered", 5) == (
                await core.orders(customer, since_for(3650), "delivered", 5)
            )
            assert await fast.categories(customer, since) == await core.categories(customer, since)
            assert await fast.profile(customer) == await core.profile(customer)
        assert await fast.order(10**9) is None
        assert await fast.profile(10**9) is None
        assert await fast.products([3, 1, 3, 2]) == await core.products([3, 1, 2])
        assert await fast.products([]) == {}
        # inline: the reads ran on this thread's connection, no other opened; on the pool: one
        # connection per thread that read (a pool thread may start and find the queue empty:
        # the executor starts one when the last read's result is out before its thread is idle)
        readers = {thread for thread in threading.enumerate() if thread.name.startswith("sqlite_")}
        assert (not readers) if threads == 0 else len(readers) <= threads
        assert 1 <= len(fast._connections) <= (1 if threads == 0 else len(readers))
    finally:
        await fast.close()
        await core.close()
    assert repr(fast).startswith("<SqliteQueries ")
    assert sqlite_path("postgresql://x@127.0.0.1/db") is None


async def test_a_new_order_is_seen_by_the_core_path(orders_db: str, tmp_path: Path) -> None:
    source = sqlite_path(covering_url(orders_db, True))
    assert source is not None
    copy = tmp_path / "orders.db"
    shutil.copyfile(source, copy)  # the session's database stays as seeded
    fast = SqliteQueries(str(copy), full=False)
    core = CoreQueries(async_engine(f"sqlite:///{copy}"), full=False)
    try:
        before = await core.profile(5)
        assert before is not None
        created = await fast.create(5, [(9, 3), (4, 1)], "api")
        listed = await core.orders(5, since_for(1), None, 1)
        assert listed == [created]
        order = await core.order(created["id"])
        assert order is not None
        assert [(line["product_id"], line["quantity"]) for line in order["lines"]] == [
            (9, 3),
            (4, 1),
        ]
        after = await core.profile(5)
        assert after is not None
        assert after["orders"]["count"] == before["orders"]["count"] + 1
        assert after["orders"]["spend_cents"] == (
            before["orders"]["spend_cents"] + created["total_cents"]
        )
    finally:
        await fast.close()
        await core.close()
