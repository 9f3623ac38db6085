"""The service's reads and its one write, two ways (S6.3 step 3).

``OrmQueries`` is the naive path: the sync ORM loading whole entities, each call on a
thread. ``CoreQueries`` is the tuned one: async SQLAlchemy (aiosqlite, psycopg async,
aiomysql) selecting only the columns the response needs, which the covering index holds.

Both return the same plain dicts (datetimes as ISO text), so every value a response carries
is identical whichever path produced it. With ``full=True`` (an untrimmed response) the
async path selects every column too.

Their methods are coroutines either way; the ORM's run their blocking body through an
``Offload``: on the server's thread pool from an async handler, or inline when the handler
itself is a sync function already running on that pool.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Select, func, insert, select, update
from sqlalchemy.engine import Engine, RowMapping
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session, selectinload

from orders.schema import AS_OF, COVERING_INDEX, Customer, Order, OrderLine, Product, Profile

__all__ = ["CoreQueries", "Offload", "OrmQueries", "Queries", "since_for"]

T = TypeVar("T")

SUMMARY_COLUMNS = ("id", "created_at", "status", "total_cents", "item_count")
"""What an order summary carries: the columns of the covering index (plus the key)."""
ORDER_COLUMNS = (
    *SUMMARY_COLUMNS,
    "customer_id",
    "channel",
    "currency",
    "subtotal_cents",
    "shipping_cents",
    "tax_cents",
    "warehouse",
    "risk_score",
    "updated_at",
)


def since_for(days: int) -> datetime:
    """The start of a window of ``days`` ending at the seeded history's end (new orders,
    made after it, fall in every window)."""
    return AS_OF - timedelta(days=days)


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _row(mapping: RowMapping | dict[str, Any]) -> dict[str, Any]:
    return {key: _plain(value) for key, value in mapping.items()}


def _entity(obj: Any, columns: Sequence[str]) -> dict[str, Any]:
    return {name: _plain(getattr(obj, name)) for name in columns}


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


class Offload:
    """Runs blocking work: on ``executor`` (from the event loop), or inline (None)."""

    def __init__(self, executor: Executor | None) -> None:
        self.executor = executor

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        if self.executor is None:
            return fn(*args)  # already on a worker thread: never suspends
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)


class Queries:
    """What the tools ask of the database."""

    async def order(self, order_id: int) -> dict[str, Any] | None:
        raise NotImplementedError

    async def orders(
        self, customer_id: int, since: datetime, status: str | None, limit: int
    ) -> list[dict[str, Any]]:
        """The customer's orders since ``since``, newest first."""
        raise NotImplementedError

    async def categories(self, customer_id: int, since: datetime) -> list[dict[str, Any]]:
        """Spend and items per product category since ``since``, largest spend first."""
        raise NotImplementedError

    async def profile(self, customer_id: int) -> dict[str, Any] | None:
        """The customer with its profile, and its order count, spend and last order (kept
        in the profile row)."""
        raise NotImplementedError

    async def products(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        raise NotImplementedError

    async def create(
        self, customer_id: int, items: Sequence[tuple[int, int]], channel: str
    ) -> dict[str, Any]:
        """Insert an order of ``(product_id, quantity)`` items; returns its summary."""
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


def _orders_query(columns: Any, customer_id: int, since: datetime, status: str | None) -> Any:
    query = select(*columns) if isinstance(columns, tuple) else select(columns)
    query = query.where(Order.customer_id == customer_id, Order.created_at >= since)
    if status is not None:
        query = query.where(Order.status == status)
    return query.order_by(Order.created_at.desc(), Order.id.desc())


def _hinted(query: Any, ignore_index: bool) -> Any:
    """``query`` telling MySQL and MariaDB not to use the covering index, if so asked (other
    databases render no hint)."""
    if not ignore_index:
        return query
    return query.with_hint(Order, f"IGNORE INDEX ({COVERING_INDEX})", "mysql")


def _categories_query(customer_id: int, since: datetime) -> Select[str, int, int]:
    spend = func.sum(
        (OrderLine.unit_price_cents - OrderLine.discount_cents) * OrderLine.quantity
    ).label("spend_cents")
    return (
        select(Product.category, spend, func.sum(OrderLine.quantity).label("items"))
        .select_from(Order)
        .join(OrderLine, OrderLine.order_id == Order.id)
        .join(Product, Product.id == OrderLine.product_id)
        .where(Order.customer_id == customer_id, Order.created_at >= since)
        .group_by(Product.category)
        .order_by(spend.desc(), Product.category)
    )


def _category_rows(rows: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {"category": r.category, "spend_cents": int(r.spend_cents), "items": int(r.items)}
        for r in rows
    ]


def _profile_summary(out: dict[str, Any]) -> dict[str, Any]:
    """Move the profile's order counters into ``out["orders"]``."""
    out["orders"] = {
        "count": out.pop("order_count"),
        "spend_cents": out.pop("spend_cents"),
        "last_order_at": out.pop("last_order_at"),
    }
    return out


def _profile_update(customer_id: int, total_cents: int, created: datetime) -> Any:
    p = Profile.__table__.c
    return (
        update(Profile.__table__)
        .where(p.customer_id == customer_id)
        .values(
            order_count=p.order_count + 1,
            spend_cents=p.spend_cents + total_cents,
            last_order_at=created,
        )
    )


def _priced(
    products: dict[int, dict[str, Any]], items: Sequence[tuple[int, int]]
) -> tuple[list[dict[str, Any]], int, int]:
    lines, subtotal, count = [], 0, 0
    for product_id, quantity in items:
        price = int(products[product_id]["price_cents"])
        lines.append(
            {
                "product_id": product_id,
                "quantity": quantity,
                "unit_price_cents": price,
                "discount_cents": 0,
            }
        )
        subtotal += price * quantity
        count += quantity
    return lines, subtotal, count


def _new_order(customer_id: int, subtotal: int, count: int, channel: str) -> dict[str, Any]:
    shipping = 0 if subtotal >= 5_000 else 499
    tax = subtotal * 8 // 100
    created = now()
    return {
        "customer_id": customer_id,
        "created_at": created,
        "status": "processing",
        "channel": channel,
        "currency": "EUR",
        "item_count": count,
        "subtotal_cents": subtotal,
        "shipping_cents": shipping,
        "tax_cents": tax,
        "total_cents": subtotal + shipping + tax,
        "warehouse": "AMS1",
        "risk_score": 0,
        "updated_at": created,
    }


class OrmQueries(Queries):
    """The sync ORM on a thread: sessions, whole entities, identity map.

    ``ignore_index``: the customer/date queries tell MySQL and MariaDB not to use the covering
    index (``IGNORE INDEX``), so that a configuration without it and one with it can share a
    server database that has it (the demo runs them side by side)."""

    def __init__(self, engine: Engine, offload: Offload, *, ignore_index: bool = False) -> None:
        self.engine = engine
        self.offload = offload
        self.ignore_index = ignore_index

    def __repr__(self) -> str:
        return f"<OrmQueries {self.engine.url.render_as_string()}>"

    async def order(self, order_id: int) -> dict[str, Any] | None:
        return await self.offload(self._order, order_id)

    def _order(self, order_id: int) -> dict[str, Any] | None:
        with Session(self.engine) as session:
            order = session.get(
                Order,
                order_id,
                options=[selectinload(Order.lines).joinedload(OrderLine.product)],
            )
            if order is None:
                return None
            out = _entity(order, ORDER_COLUMNS)
            out["lines"] = [
                {
                    "id": line.id,
                    "product_id": line.product_id,
                    "quantity": line.quantity,
                    "unit_price_cents": line.unit_price_cents,
                    "discount_cents": line.discount_cents,
                    "name": line.product.name,
                    "category": line.product.category,
                    "description": line.product.description,
                }
                for line in order.lines
            ]
            return out

    async def orders(
        self, customer_id: int, since: datetime, status: str | None, limit: int
    ) -> list[dict[str, Any]]:
        return await self.offload(self._orders, customer_id, since, status, limit)

    def _orders(
        self, customer_id: int, since: datetime, status: str | None, limit: int
    ) -> list[dict[str, Any]]:
        with Session(self.engine) as session:
            query = _orders_query(Order, customer_id, since, status).limit(limit)
            query = _hinted(query, self.ignore_index)
            return [_entity(o, ORDER_COLUMNS) for o in session.scalars(query)]

    async def categories(self, customer_id: int, since: datetime) -> list[dict[str, Any]]:
        return await self.offload(self._categories, customer_id, since)

    def _categories(self, customer_id: int, since: datetime) -> list[dict[str, Any]]:
        with Session(self.engine) as session:
            query = _hinted(_categories_query(customer_id, since), self.ignore_index)
            return _category_rows(session.execute(query).all())

    async def profile(self, customer_id: int) -> dict[str, Any] | None:
        return await self.offload(self._profile, customer_id)

    def _profile(self, customer_id: int) -> dict[str, Any] | None:
        with Session(self.engine) as session:
            customer = session.get(Customer, customer_id)
            profile = session.get(Profile, customer_id)
            if customer is None or profile is None:
                return None
            out = _entity(customer, ("id", "name", "email", "region", "segment", "created_at"))
            out.update(
                _entity(
                    profile,
                    (
                        "tier",
                        "preferred_categories",
                        "marketing_opt_in",
                        "credit_limit_cents",
                        "notes",
                        "order_count",
                        "spend_cents",
                        "last_order_at",
                    ),
                )
            )
            return _profile_summary(out)

    async def products(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        return await self.offload(self._products, ids)

    def _products(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        with Session(self.engine) as session:
            found = session.scalars(select(Product).where(Product.id.in_(list(ids))))
            return {
                p.id: _entity(p, ("id", "name", "category", "price_cents", "description"))
                for p in found
            }

    async def create(
        self, customer_id: int, items: Sequence[tuple[int, int]], channel: str
    ) -> dict[str, Any]:
        return await self.offload(self._create, customer_id, items, channel)

    def _create(
        self, customer_id: int, items: Sequence[tuple[int, int]], channel: str
    ) -> dict[str, Any]:
        products = self._products([p for p, _ in items])
        lines, subtotal, count = _priced(products, items)
        with Session(self.engine) as session, session.begin():
            order = Order(**_new_order(customer_id, subtotal, count, channel))
            order.lines = [OrderLine(**line) for line in lines]
            session.add(order)
            session.flush()
            session.execute(_profile_update(customer_id, order.total_cents, order.created_at))
            return _entity(order, SUMMARY_COLUMNS)

    async def close(self) -> None:
        self.engine.dispose()


class CoreQueries(Queries):
    """Async SQLAlchemy Core: one pooled connection per query, only the needed columns."""

    def __init__(self, engine: AsyncEngine, *, full: bool, ignore_index: bool = False) -> None:
        self.engine = engine
        self.full = full
        self.ignore_index = ignore_index
        """As :class:`OrmQueries`'s."""
        columns = ORDER_COLUMNS if full else SUMMARY_COLUMNS
        self._order_columns = tuple(Order.__table__.c[name] for name in columns)

    def __repr__(self) -> str:
        return f"<CoreQueries {self.engine.url.render_as_string()} full={self.full}>"

    async def order(self, order_id: int) -> dict[str, Any] | None:
        order_table = Order.__table__
        line = OrderLine.__table__
        product = Product.__table__
        line_columns = [
            line.c.product_id,
            line.c.quantity,
            line.c.unit_price_cents,
            line.c.discount_cents,
            product.c.name,
            product.c.category,
        ]
        if self.full:
            line_columns += [line.c.id, product.c.description]
        async with self.engine.connect() as conn:
            found = (
                await conn.execute(
                    select(*(order_table.c[name] for name in ORDER_COLUMNS)).where(
                        order_table.c.id == order_id
                    )
                )
            ).first()
            if found is None:
                return None
            lines = await conn.execute(
                select(*line_columns)
                .join(product, product.c.id == line.c.product_id)
                .where(line.c.order_id == order_id)
                .order_by(line.c.id)
            )
            out = _row(found._mapping)
            out["lines"] = [_row(r._mapping) for r in lines]
        return out

    async def orders(
        self, customer_id: int, since: datetime, status: str | None, limit: int
    ) -> list[dict[str, Any]]:
        query = _orders_query(self._order_columns, customer_id, since, status).limit(limit)
        query = _hinted(query, self.ignore_index)
        async with self.engine.connect() as conn:
            return [_row(r._mapping) for r in await conn.execute(query)]

    async def categories(self, customer_id: int, since: datetime) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            query = _hinted(_categories_query(customer_id, since), self.ignore_index)
            rows = (await conn.execute(query)).all()
        return _category_rows(rows)

    async def profile(self, customer_id: int) -> dict[str, Any] | None:
        c, p = Customer.__table__.c, Profile.__table__.c
        columns = [c.id, c.name, c.email, c.region, c.segment, c.created_at]
        columns += [p.tier, p.preferred_categories, p.marketing_opt_in]
        columns += [p.order_count, p.spend_cents, p.last_order_at]
        if self.full:
            columns += [p.credit_limit_cents, p.notes]
        query = select(*columns).join_from(
            Customer.__table__, Profile.__table__, p.customer_id == c.id
        )
        async with self.engine.connect() as conn:
            found = (await conn.execute(query.where(c.id == customer_id))).first()
        return None if found is None else _profile_summary(_row(found._mapping))

    async def products(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        t = Product.__table__
        columns = [t.c.id, t.c.name, t.c.category, t.c.price_cents]
        if self.full:
            columns.append(t.c.description)
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(*columns).where(t.c.id.in_(list(ids))))
            return {r.id: _row(r._mapping) for r in rows}

    async def create(
        self, customer_id: int, items: Sequence[tuple[int, int]], channel: str
    ) -> dict[str, Any]:
        products = await self.products([p for p, _ in items])
        lines, subtotal, count = _priced(products, items)
        values = _new_order(customer_id, subtotal, count, channel)
        async with self.engine.begin() as conn:
            result = await conn.execute(insert(Order.__table__).values(**values))
            key = result.inserted_primary_key
            if key is None:  # a one-row INSERT always has its key
                raise RuntimeError("the database returned no key for the new order")
            order_id = int(key[0])
            await conn.execute(
                insert(OrderLine.__table__), [{**line, "order_id": order_id} for line in lines]
            )
            await conn.execute(
                _profile_update(customer_id, values["total_cents"], values["created_at"])
            )
        return {"id": order_id, **{k: _plain(values[k]) for k in SUMMARY_COLUMNS[1:]}}

    async def close(self) -> None:
        await self.engine.dispose()


# -- measuring the queries alone ---------------------------------------------------------------


async def _time_queries(url: str, orders: int, runs: int) -> list[str]:
    """Median milliseconds of each read, naive path (sync ORM, no index) vs tuned (async Core,
    covering index), on the same customers."""
    import random
    import statistics

    from orders.db import async_engine, ensure_database, sync_engine
    from orders.seeding import customers_for

    plain = ensure_database(url, orders=orders, covering=False)
    covered = ensure_database(url, orders=orders, covering=True)
    naive = OrmQueries(sync_engine(plain.url), Offload(None))
    tuned = CoreQueries(async_engine(covered.url), full=False)
    rng = random.Random(7)
    ids = [rng.randrange(1, customers_for(orders) + 1) for _ in range(runs)]
    since = since_for(365)
    reads: dict[str, Callable[[Queries, int], Any]] = {
        "orders of a customer (get_order...)": lambda q, c: q.orders(c, since, None, 20),
        "categories (analyze_orders)": lambda q, c: q.categories(c, since),
        "order by id (get_order)": lambda q, c: q.order(c * 37),
        "profile (get_profile)": lambda q, c: q.profile(c),
    }
    lines = [f"{'query':34} {'naive ms':>10} {'tuned ms':>10} {'ratio':>7}"]
    try:
        for name, read in reads.items():
            medians = []
            for queries in (naive, tuned):
                await read(queries, ids[0])  # warm the pool and the page cache
                samples = []
                for customer in ids:
                    started = time.perf_counter()
                    await read(queries, customer)
                    samples.append((time.perf_counter() - started) * 1000)
                medians.append(statistics.median(samples))
            lines.append(
                f"{name:34} {medians[0]:10.2f} {medians[1]:10.2f} {medians[0] / medians[1]:6.1f}x"
            )
    finally:
        await naive.close()
        await tuned.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    import argparse

    from orders.config import DEFAULT_ORDERS, default_db_url

    parser = argparse.ArgumentParser(
        prog="python -m orders.queries", description="Time each read alone, naive vs tuned."
    )
    parser.add_argument("--db", default=None, help="SQLAlchemy URL (default: .demo/orders.db)")
    parser.add_argument("--orders", type=int, default=DEFAULT_ORDERS)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args(argv)
    url = args.db or default_db_url()
    for line in asyncio.run(_time_queries(url, args.orders, args.runs)):
        print(line)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
