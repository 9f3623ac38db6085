"""Deterministic seeding of the order database.

A fixed ``random.Random(seed)`` makes the same rows every time: products, one customer per
100 orders with their profiles, then the orders with their lines, in one transaction, in
batches of executemany (made in a thread while the database writes the previous one). A
``seed_info`` row records what was seeded; :func:`is_seeded` tells whether a database holds
a given seed.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, insert, inspect, select, text

from orders.schema import (
    AS_OF,
    HISTORY_DAYS,
    SCHEMA_VERSION,
    Base,
    Customer,
    Order,
    OrderLine,
    Product,
    Profile,
    SeedInfo,
)

__all__ = ["customers_for", "is_seeded", "seed_schema"]

ORDERS_PER_CUSTOMER = 100
PRODUCTS = 500
BATCH = 20_000

STATUSES = ("delivered",) * 16 + ("shipped", "shipped", "processing", "cancelled", "returned")
CHANNELS = ("web", "web", "web", "app", "app", "phone", "agent")
WAREHOUSES = ("AMS1", "FRA2", "LHR1", "IAD3", "SFO1", "NRT2")
REGIONS = ("eu-west", "eu-central", "us-east", "us-west", "ap-north")
SEGMENTS = ("consumer", "consumer", "consumer", "smb", "enterprise")
TIERS = ("bronze", "bronze", "silver", "silver", "gold", "platinum")
CATEGORIES = (
    "books",
    "electronics",
    "kitchen",
    "garden",
    "toys",
    "sports",
    "beauty",
    "grocery",
    "office",
    "pets",
    "outdoor",
    "music",
)
ADJECTIVES = ("compact", "classic", "deluxe", "eco", "smart", "travel", "pro", "mini", "family")
NOUNS = ("kettle", "lamp", "notebook", "backpack", "speaker", "bottle", "drill", "puzzle", "mat")
FIRST = ("Ada", "Ben", "Chen", "Dara", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jun", "Kofi")
LAST = ("Ng", "Okafor", "Silva", "Berg", "Kowalski", "Tanaka", "Moreau", "Ali", "Novak")


def customers_for(orders: int) -> int:
    """How many customers a seed of ``orders`` orders has."""
    return max(10, orders // ORDERS_PER_CUSTOMER)


def _products(rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    for pid in range(1, PRODUCTS + 1):
        category = CATEGORIES[pid % len(CATEGORIES)]
        name = f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {pid}"
        rows.append(
            {
                "id": pid,
                "name": name,
                "category": category,
                "price_cents": rng.randrange(299, 25_000),
                "description": f"A {name} from our {category} range. "
                + "Sturdy, well reviewed and easy to return within 30 days. " * 3,
            }
        )
    return rows


def _customers(rng: random.Random, count: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    customers, profiles = [], []
    start = AS_OF - timedelta(days=HISTORY_DAYS + 365)
    for cid in range(1, count + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        customers.append(
            {
                "id": cid,
                "name": f"{first} {last}",
                "email": f"{first.lower()}.{last.lower()}.{cid}@example.com",
                "region": rng.choice(REGIONS),
                "segment": rng.choice(SEGMENTS),
                "created_at": start + timedelta(seconds=rng.randrange(365 * 86_400)),
            }
        )
        preferred = rng.sample(CATEGORIES, 3)
        profiles.append(
            {
                "customer_id": cid,
                "tier": rng.choice(TIERS),
                "preferred_categories": ",".join(preferred),
                "marketing_opt_in": rng.randrange(2),
                "credit_limit_cents": rng.randrange(50, 500) * 10_000,
                "notes": f"Prefers {preferred[0]}; contact by email. Segment review pending.",
            }
        )
    return customers, profiles


@dataclass(slots=True)
class _Totals:
    """Per customer (index = id): orders, spend and the last order's second."""

    count: list[int]
    spend: list[int]
    last: list[int]


def _order_batches(
    rng: random.Random,
    orders: int,
    customers: int,
    prices: list[int],
    sqlite: bool,
    totals: _Totals,
) -> Iterator[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """Batches of (order rows, line rows), tuples in column order; ``totals`` is filled in
    as they go.

    The hot loop avoids ``randrange`` and ``strftime`` (both cost microseconds a call):
    ``int(random() * n)`` and timestamps glued from precomputed day and time strings.
    """
    start = AS_OF - timedelta(days=HISTORY_DAYS)
    span = HISTORY_DAYS * 86_400
    if sqlite:
        days: list[Any] = [
            (start + timedelta(days=d)).strftime("%Y-%m-%d ") for d in range(HISTORY_DAYS + 5)
        ]
        clock: list[Any] = [
            f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}.000000" for s in range(86_400)
        ]

        def stamp(second: int) -> Any:
            # the text SQLAlchemy's SQLite DateTime writes and parses
            return days[second // 86_400] + clock[second % 86_400]
    else:

        def stamp(second: int) -> Any:
            return start + timedelta(seconds=second)

    r = rng.random
    n_products = len(prices) - 1
    n_statuses, n_channels, n_warehouses = len(STATUSES), len(CHANNELS), len(WAREHOUSES)
    count, spend, last = totals.count, totals.spend, totals.last
    line_id = oid = 0
    while oid < orders:
        order_rows: list[tuple[Any, ...]] = []
        line_rows: list[tuple[Any, ...]] = []
        for _ in range(min(BATCH, orders - oid)):
            oid += 1
            second = int(r() * span)
            subtotal = items = 0
            for _ in range(1 + int(r() * r() * 6)):
                line_id += 1
                product = int(r() * n_products) + 1
                quantity = 1 + int(r() * r() * 4)
                price = prices[product]
                discount = price // 10 if r() < 0.15 else 0
                subtotal += (price - discount) * quantity
                items += quantity
                line_rows.append((line_id, oid, product, quantity, price, discount))
            shipping = 0 if subtotal >= 5_000 else 499
            tax = subtotal * 8 // 100
            customer = int(r() * customers) + 1
            count[customer] += 1
            spend[customer] += subtotal + shipping + tax
            if second > last[customer]:
                last[customer] = second
            order_rows.append(
                (
                    oid,
                    customer,
                    stamp(second),
                    STATUSES[int(r() * n_statuses)],
                    CHANNELS[int(r() * n_channels)],
                    "EUR",
                    items,
                    subtotal,
                    shipping,
                    tax,
                    subtotal + shipping + tax,
                    WAREHOUSES[int(r() * n_warehouses)],
                    int(r() * 100),
                    stamp(second + 3_600 * (1 + int(r() * 95))),
                )
            )
        yield order_rows, line_rows


def _prefetched(batches: Iterator[Any], depth: int = 2) -> Iterator[Any]:
    """Make the next batches in a thread while the database writes this one (the driver
    releases the GIL while SQLite works)."""
    slots: queue.Queue[Any] = queue.Queue(depth)
    done = object()

    def produce() -> None:
        try:
            for batch in batches:
                slots.put(batch)
        except BaseException as exc:  # handed to the consumer
            slots.put(exc)
        slots.put(done)

    worker = threading.Thread(target=produce, name="orders-seed", daemon=True)
    worker.start()
    while (item := slots.get()) is not done:
        if isinstance(item, BaseException):
            raise item
        yield item
    worker.join()


_ORDER_COLUMNS = (
    "id",
    "customer_id",
    "created_at",
    "status",
    "channel",
    "currency",
    "item_count",
    "subtotal_cents",
    "shipping_cents",
    "tax_cents",
    "total_cents",
    "warehouse",
    "risk_score",
    "updated_at",
)
_LINE_COLUMNS = ("id", "order_id", "product_id", "quantity", "unit_price_cents", "discount_cents")


def seed_schema(engine: Engine, orders: int, seed: int) -> float:
    """Create the schema and fill it; returns the seconds it took."""
    started = time.perf_counter()
    sqlite = engine.dialect.name == "sqlite"
    rng = random.Random(seed)
    n_customers = customers_for(orders)
    Base.metadata.drop_all(engine)
    Base.metadata.create_all(engine)
    products = _products(rng)
    prices = [0] + [p["price_cents"] for p in products]
    customers, profiles = _customers(rng, n_customers)
    totals = _Totals([0] * (n_customers + 1), [0] * (n_customers + 1), [-1] * (n_customers + 1))
    order_table, line_table = Order.__table__, OrderLine.__table__
    with engine.begin() as conn:
        if sqlite:
            conn.exec_driver_sql("PRAGMA synchronous=OFF")
        conn.execute(insert(Product.__table__), products)
        conn.execute(insert(Customer.__table__), customers)
        batches = _order_batches(rng, orders, n_customers, prices, sqlite, totals)
        for order_rows, line_rows in _prefetched(batches):
            if sqlite:  # the DBAPI's executemany directly: no per-row processing
                conn.exec_driver_sql(_insert_sql(order_table.name, _ORDER_COLUMNS), order_rows)
                conn.exec_driver_sql(_insert_sql(line_table.name, _LINE_COLUMNS), line_rows)
            else:
                conn.execute(
                    insert(order_table),
                    [dict(zip(_ORDER_COLUMNS, r, strict=True)) for r in order_rows],
                )
                conn.execute(
                    insert(line_table),
                    [dict(zip(_LINE_COLUMNS, r, strict=True)) for r in line_rows],
                )
        start = AS_OF - timedelta(days=HISTORY_DAYS)
        for profile in profiles:
            cid = profile["customer_id"]
            profile["order_count"] = totals.count[cid]
            profile["spend_cents"] = totals.spend[cid]
            second = totals.last[cid]
            profile["last_order_at"] = None if second < 0 else start + timedelta(seconds=second)
        conn.execute(insert(Profile.__table__), profiles)
        seconds = time.perf_counter() - started
        conn.execute(
            insert(SeedInfo.__table__),
            [
                {
                    "id": 1,
                    "version": SCHEMA_VERSION,
                    "orders": orders,
                    "customers": n_customers,
                    "seed": seed,
                    "seconds_ms": int(seconds * 1000),
                }
            ],
        )
    if not sqlite and engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            for table in ("orders", "order_lines"):  # the ids were given: move the sequences on
                conn.execute(
                    text(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT max(id) FROM {table}))"
                    )
                )
            conn.execute(text("ANALYZE"))  # the planner's statistics
    return time.perf_counter() - started


def _insert_sql(table: str, columns: tuple[str, ...]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def is_seeded(engine: Engine, orders: int, seed: int) -> bool:
    """Whether ``engine``'s database holds ``orders`` orders of ``seed`` at this schema."""
    if not inspect(engine).has_table(SeedInfo.__tablename__):
        return False
    with engine.connect() as conn:
        row = conn.execute(select(SeedInfo).where(SeedInfo.id == 1)).first()
    return (
        row is not None
        and row.version == SCHEMA_VERSION
        and row.orders == orders
        and row.seed == seed
    )
