"""The tuned service's reads on SQLite, without a driver thread per connection.

Profiling the tuned service (``async_db``: SQLAlchemy's async engine on aiosqlite) under the
agents' load put most of its CPU in aiosqlite's worker threads and the hand-offs around them:
each query is a job queued to a thread of its connection, SQLAlchemy's greenlet bridge, and
result rows processed into objects, for lookups that SQLite itself answers from an index in
tens of microseconds.

:class:`SqliteQueries` asks the same questions (same columns, same order, the same plain
dicts as :class:`orders.queries.CoreQueries`) through the standard library's ``sqlite3``:
SQL written out once (``sqlite3`` keeps each connection's prepared statements in its
statement cache, so a query is parsed once per connection), rows turned into dicts by hand.

Reads run on a pool of two threads (``threads``), one connection each: SQLite reads do not
need more here, and the event loop never waits on a query, nor on a page the query has to
read from disk. ``threads=0`` runs them on the event loop itself instead: with the covering
index each is an index lookup of tens of microseconds, less than the hand-off to a thread and
back costs (a profile of the tuned service put a fifth of its samples in
``ThreadPoolExecutor.submit``, the condition variable's notify and the worker's wake-up), but
a read that misses the page cache then stalls every request; on this shared machine the two
did not differ measurably in CPU per call, so the pool stays the default. Writes
(``create_order``, which may wait for another process's write lock) go to one thread of their
own either way.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from orders.queries import (
    ORDER_COLUMNS,
    SUMMARY_COLUMNS,
    Queries,
    _new_order,
    _priced,
    _profile_summary,
)

__all__ = ["SqliteQueries", "sqlite_path"]

T = TypeVar("T")

_STORED = "%Y-%m-%d %H:%M:%S.%f"
"""How SQLAlchemy stores a DateTime in SQLite (text)."""
_DATES = frozenset({"created_at", "updated_at", "last_order_at"})

_LINES = (
    "SELECT l.product_id, l.quantity, l.unit_price_cents, l.discount_cents, p.name, p.category"
    "{extra} FROM order_lines AS l JOIN products AS p ON p.id = l.product_id "
    "WHERE l.order_id = ? ORDER BY l.id"
)
_CATEGORIES = (
    "SELECT p.category, sum((l.unit_price_cents - l.discount_cents) * l.quantity) AS spend, "
    "sum(l.quantity) AS items FROM orders AS o JOIN order_lines AS l ON l.order_id = o.id "
    "JOIN products AS p ON p.id = l.product_id WHERE o.customer_id = ? AND o.created_at >= ? "
    "GROUP BY p.category ORDER BY spend DESC, p.category"
)
_PROFILE_COLUMNS = (
    "c.id",
    "c.name",
    "c.email",
    "c.region",
    "c.segment",
    "c.created_at",
    "p.tier",
    "p.preferred_categories",
    "p.marketing_opt_in",
    "p.order_count",
    "p.spend_cents",
    "p.last_order_at",
)


def sqlite_path(url: str) -> str | None:
    """The database file of a ``sqlite:///`` URL; None for any other database."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    return parsed.database


def _stored(value: datetime) -> str:
    return value.strftime(_STORED)


def _iso(value: Any) -> Any:
    """A stored DateTime as the ISO text the other query paths return."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).isoformat()
    return value


def _rows(cursor: sqlite3.Cursor, names: Sequence[str]) -> list[dict[str, Any]]:
    dated = [i for i, name in enumerate(names) if name in _DATES]
    out = []
    for row in cursor:
        item = dict(zip(names, row, strict=True))
        for i in dated:
            name = names[i]
            item[name] = _iso(item[name])
        out.append(item)
    return out


class SqliteQueries(Queries):
    """``sqlite3``: reads on ``threads`` threads (0: on the event loop), writes on a thread
    of their own (see the module); one connection per thread."""

    def __init__(self, path: str, *, full: bool, threads: int = 2) -> None:
        self.path = path
        self.full = full
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-write")
        self._pool = (
            ThreadPoolExecutor(max_workers=threads, thread_name_prefix="sqlite")
            if threads > 0
            else None
        )
        columns = ORDER_COLUMNS if full else SUMMARY_COLUMNS
        self._summary_names = columns
        listed = ", ".join(columns)
        self._order_sql = f"SELECT {', '.join(ORDER_COLUMNS)} FROM orders WHERE id = ?"
        self._lines_names = (
            "product_id",
            "quantity",
            "unit_price_cents",
            "discount_cents",
            "name",
            "category",
            *(("id", "description") if full else ()),
        )
        self._lines_sql = _LINES.format(extra=", l.id, p.description" if full else "")
        where = "FROM orders WHERE customer_id = ? AND created_at >= ?"
        order = "ORDER BY created_at DESC, id DESC LIMIT ?"
        self._orders_sql = f"SELECT {listed} {where} {order}"
        self._orders_status_sql = f"SELECT {listed} {where} AND status = ? {order}"
        profile_columns = [*_PROFILE_COLUMNS]
        if full:
            profile_columns += ["p.credit_limit_cents", "p.notes"]
        self._profile_names = tuple(c.split(".", 1)[1] for c in profile_columns)
        self._profile_sql = (
            f"SELECT {', '.join(profile_columns)} FROM customers AS c "
            "JOIN profiles AS p ON p.customer_id = c.id WHERE c.id = ?"
        )
        self._product_names = ("id", "name", "category", "price_cents") + (
            ("description",) if full else ()
        )

    def __repr__(self) -> str:
        return f"<SqliteQueries {self.path} full={self.full}>"

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=10.0, cached_statements=64, check_same_thread=False
            )
            for pragma in ("synchronous=NORMAL", "cache_size=-65536", "temp_store=MEMORY"):
                conn.execute(f"PRAGMA {pragma}")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A read: here, on the loop's own connection, or on the pool's."""
        if self._pool is None:
            return fn(self._connection())
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(self._connection()))

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer, lambda: fn(self._connection()))

    async def order(self, order_id: int) -> dict[str, Any] | None:
        def read(conn: sqlite3.Connection) -> dict[str, Any] | None:
            found = _rows(conn.execute(self._order_sql, (order_id,)), ORDER_COLUMNS)
            if not found:
                return None
            out = found[0]
            out["lines"] = _rows(conn.execute(self._lines_sql, (order_id,)), self._lines_names)
            return out

        return await self._run(read)

    async def orders(
        self, customer_id: int, since: datetime, status: str | None, limit: int
    ) -> list[dict[str, Any]]:
        args: tuple[int | str, ...]
        if status is None:
            sql, args = self._orders_sql, (customer_id, _stored(since), limit)
        else:
            sql, args = self._orders_status_sql, (customer_id, _stored(since), status, limit)
        return await self._run(lambda conn: _rows(conn.execute(sql, args), self._summary_names))

    async def categories(self, customer_id: int, since: datetime) -> list[dict[str, Any]]:
        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = conn.execute(_CATEGORIES, (customer_id, _stored(since)))
            return [
                {"category": category, "spend_cents": int(spend), "items": int(items)}
                for category, spend, items in rows
            ]

        return await self._run(read)

    async def profile(self, customer_id: int) -> dict[str, Any] | None:
        def read(conn: sqlite3.Connection) -> dict[str, Any] | None:
            found = _rows(conn.execute(self._profile_sql, (customer_id,)), self._profile_names)
            if not found:
                return None
            found[0]["marketing_opt_in"] = bool(found[0]["marketing_opt_in"])
            return _profile_summary(found[0])

        return await self._run(read)

    def _products(self, conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Any]:
        wanted = list(dict.fromkeys(int(i) for i in ids))
        if not wanted:
            return {}
        marks = ", ".join("?" * len(wanted))
        sql = f"SELECT {', '.join(self._product_names)} FROM products WHERE id IN ({marks})"
        return {row["id"]: row for row in _rows(conn.execute(sql, wanted), self._product_names)}

    async def products(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        return await self._run(lambda conn: self._products(conn, ids))

    async def create(
        self, customer_id: int, items: Sequence[tuple[int, int]], channel: str
    ) -> dict[str, Any]:
        def write(conn: sqlite3.Connection) -> dict[str, Any]:
            products = self._products(conn, [p for p, _ in items])
            lines, subtotal, count = _priced(products, items)
            values = _new_order(customer_id, subtotal, count, channel)
            stored = {k: _stored(v) if isinstance(v, datetime) else v for k, v in values.items()}
            with conn:  # one transaction
                names = list(stored)
                cursor = conn.execute(
                    f"INSERT INTO orders ({', '.join(names)}) "
                    f"VALUES ({', '.join('?' * len(names))})",
                    [stored[n] for n in names],
                )
                order_id = int(cursor.lastrowid or 0)
                conn.executemany(
                    "INSERT INTO order_lines (order_id, product_id, quantity, unit_price_cents,"
                    " discount_cents) VALUES (?, ?, ?, ?, ?)",
                    [
                        (
                            order_id,
                            line["product_id"],
                            line["quantity"],
                            line["unit_price_cents"],
                            line["discount_cents"],
                        )
                        for line in lines
                    ],
                )
                conn.execute(
                    "UPDATE profiles SET order_count = order_count + 1, "
                    "spend_cents = spend_cents + ?, last_order_at = ? WHERE customer_id = ?",
                    (values["total_cents"], stored["created_at"], customer_id),
                )
            summary = {k: values[k] for k in SUMMARY_COLUMNS[1:]}
            summary["created_at"] = summary["created_at"].isoformat()
            return {"id": order_id, **summary}

        return await self._write(write)

    async def close(self) -> None:
        self._writer.shutdown(wait=True)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
