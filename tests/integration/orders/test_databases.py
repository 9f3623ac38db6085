"""The order service on the machine's PostgreSQL and MariaDB (skipped when unreachable).

Each run seeds 20,000 orders into a schema (PostgreSQL) or database (MariaDB) of its own,
made and dropped here, serves it naive then tuned (the covering index is dropped, then made,
in place), and checks that the answers are the ones the SQLite service gives: the seed is
the same, so the data is too. On MariaDB, as the demo's ``--db mariadb://...`` runs them,
naive and tuned share one database: the index tuned made stays, and naive's queries tell the
server to ignore it (checked on the server's own EXPLAIN).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from orders.db import ensure_database
from orders.schema import COVERING_INDEX
from sqlalchemy import create_engine, inspect, text

from tests.integration.orders.conftest import SMALL, Launcher
from tests.integration.orders.test_service import READS, assert_subset, call

SUFFIX = f"orders_test_{os.getpid()}"


def _reachable(url: str) -> str | None:
    """None when a connection works, else why not."""
    try:
        engine = create_engine(url, connect_args={"connect_timeout": 3})
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        finally:
            engine.dispose()
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return None


@pytest.fixture(scope="module")
def postgresql() -> Iterator[str]:
    admin = os.environ.get(
        "ORDERS_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    reason = _reachable(admin)
    if reason is not None:
        pytest.skip(f"PostgreSQL at {admin} is unreachable ({reason})")
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f"CREATE SCHEMA {SUFFIX}"))
        yield f"{admin}?options=-csearch_path%3D{SUFFIX}"
    finally:
        with engine.connect() as conn:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {SUFFIX} CASCADE"))
        engine.dispose()


@pytest.fixture(scope="module")
def mariadb() -> Iterator[str]:
    admin = os.environ.get("ORDERS_TEST_MARIADB", "mysql+pymysql://root@127.0.0.1:3306/test")
    reason = _reachable(admin)
    if reason is not None:
        pytest.skip(f"MariaDB at {admin} is unreachable ({reason})")
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {SUFFIX}"))
        yield admin.rsplit("/", 1)[0] + f"/{SUFFIX}"
    finally:
        with engine.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {SUFFIX}"))
        engine.dispose()


def _has_index(url: str) -> bool:
    engine = create_engine(url)
    try:
        return any(i["name"] == COVERING_INDEX for i in inspect(engine).get_indexes("orders"))
    finally:
        engine.dispose()


async def _answers(url: str, token: str) -> list[dict[str, Any]]:
    return [await call(url, tool, arguments, token) for tool, arguments in READS]


@pytest.mark.parametrize("server", ["postgresql", "mariadb"])
async def test_the_service_runs_on_a_server_database(
    server: str, request: pytest.FixtureRequest, launch: Launcher, token: str
) -> None:
    url = request.getfixturevalue(server)
    seeded = ensure_database(url, orders=SMALL, covering=False)
    assert seeded.seeded_now
    assert not _has_index(url)

    embedded = await _answers(launch("tuned"), token)
    naive_url = launch("naive", db=url)
    naive = await _answers(naive_url, token)
    launch.stop(naive_url)  # the index is changed in place: one configuration at a time
    tuned_url = launch("tuned", db=url)
    assert _has_index(url)
    tuned = await _answers(tuned_url, token)

    for (tool, _), full, trimmed, sqlite in zip(READS, naive, tuned, embedded, strict=True):
        assert_subset(trimmed, full)
        assert trimmed == sqlite, f"{tool} differs between {server} and SQLite"

    created = await call(
        tuned_url,
        "create_order",
        {"customer_id": 5, "items": [{"product_id": 9, "quantity": 3}]},
        token,
    )
    listed = await call(tuned_url, "list_orders", {"customer_id": 5, "limit": 1}, token)
    assert listed["orders"][0] == created["order"]
    launch.stop(tuned_url)


def _plans(url: str, ignore_index: bool) -> list[str]:
    """What MariaDB's EXPLAIN says of the customer/date query each path sends, as sent."""
    from datetime import datetime

    from orders.db import sync_engine
    from orders.queries import Offload, OrmQueries
    from sqlalchemy import event

    engine = sync_engine(url)
    sent: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "FROM orders" in statement:
            sent.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        queries = OrmQueries(engine, Offload(None), ignore_index=ignore_index)
        queries._orders(5, datetime(2025, 1, 1), None, 20)
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None
            cursor = raw.cursor()
            plans = []
            for statement, parameters in sent:
                cursor.execute("EXPLAIN " + statement, parameters)
                plans += [" ".join(str(cell) for cell in row) for row in cursor.fetchall()]
            return plans
    finally:
        engine.dispose()


def test_on_mariadb_naive_ignores_the_index_tuned_made(mariadb: str) -> None:
    """The demo runs naive and tuned side by side on one MariaDB database: the index is made
    in place by tuned and never dropped there; naive's queries tell the server to ignore it."""
    from orders.db import ignores_index

    ensure_database(mariadb, orders=SMALL, covering=True)
    ensure_database(mariadb, orders=SMALL, covering=False)  # naive starting after tuned
    assert _has_index(mariadb)
    assert ignores_index(mariadb, covering=False)
    assert not ignores_index(mariadb, covering=True)
    naive, tuned = _plans(mariadb, ignore_index=True), _plans(mariadb, ignore_index=False)
    assert naive
    assert tuned
    assert not any(COVERING_INDEX in plan for plan in naive), naive
    assert any(COVERING_INDEX in plan for plan in tuned), tuned
