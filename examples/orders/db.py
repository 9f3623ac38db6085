"""The order database: SQLAlchemy 2 models, deterministic seeding, sync and async engines.

The embedded default is SQLite in the data folder (``.demo/`` at the repository root); the same
code runs on PostgreSQL (psycopg) and MariaDB/MySQL (PyMySQL, aiomysql) given their URL.

Seeding is deterministic (a fixed ``random.Random(seed)``): 200,000 orders by default
(1,000,000 by flag) with their lines, one customer per 100 orders, on first run, in one
transaction, in batches of executemany. A ``seed_info`` row records what was seeded; a
database whose row matches is reused.

The covering index of S6.3 (``ix_orders_customer_cover``: customer, date, and the columns the
queries read) exists only where a configuration asks for it. For SQLite that is a second file
next to the first (``orders.covering.db``, a copy of the file plus the index), so a
configuration with the index and one without can run side by side on the same data. On
MySQL and MariaDB the index is created in place by the first configuration that asks for it
and the others tell the server to ignore it (``IGNORE INDEX``), so they too run side by side
(the demo's ``--db mariadb://...``). On PostgreSQL, which takes no such hint, the index is
created or dropped in place at start-up: run configurations that differ in
``covering_index`` one after another there.

``python -m orders.db seed [--db URL] [--orders N] [--covering]`` seeds ahead of time and
prints how long it took; ``python -m orders.db explain`` prints the query plans.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import queue
import random
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    DateTime,
    Engine,
    ForeignKey,
    Index,
    Integer,
    String,
    create_engine,
    event,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.schema import CreateIndex

__all__ = [
    "AS_OF",
    "COVERING_INDEX",
    "Customer",
    "Order",
    "OrderLine",
    "Product",
    "Profile",
    "SeedInfo",
    "Seeded",
    "async_engine",
    "ensure_database",
    "ignores_index",
    "sync_engine",
]

SCHEMA_VERSION = 2
AS_OF = datetime(2026, 1, 1)
"""The seeded history ends here; analysis windows count back from it."""
HISTORY_DAYS = 730
ORDERS_PER_CUSTOMER = 100
PRODUCTS = 500
BATCH = 20_000
COVERING_INDEX = "ix_orders_customer_cover"

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


class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "customers"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(80))
    email: Mapped[str] = mapped_column(String(120))
    region: Mapped[str] = mapped_column(String(16))
    segment: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime)


class Profile(Base):
    __tablename__ = "profiles"
    customer_id: Mapped[int] = mapped_column(
        ForeignKey("customers.id"), primary_key=True, autoincrement=False
    )
    tier: Mapped[str] = mapped_column(String(16))
    preferred_categories: Mapped[str] = mapped_column(String(120))
    marketing_opt_in: Mapped[int] = mapped_column(Integer)
    credit_limit_cents: Mapped[int] = mapped_column(Integer)
    notes: Mapped[str] = mapped_column(String(400))
    order_count: Mapped[int] = mapped_column(Integer)
    """Kept with every order (seeding, ``create_order``): a profile read is one row."""
    spend_cents: Mapped[int] = mapped_column(Integer)
    last_order_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class Product(Base):
    __tablename__ = "products"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(80))
    category: Mapped[str] = mapped_column(String(24))
    price_cents: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(String(400))


class Order(Base):
    """One order. ``customer_id`` has no foreign key on purpose: MariaDB would index it."""

    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    customer_id: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    status: Mapped[str] = mapped_column(String(12))
    channel: Mapped[str] = mapped_column(String(12))
    currency: Mapped[str] = mapped_column(String(3))
    item_count: Mapped[int] = mapped_column(Integer)
    subtotal_cents: Mapped[int] = mapped_column(Integer)
    shipping_cents: Mapped[int] = mapped_column(Integer)
    tax_cents: Mapped[int] = mapped_column(Integer)
    total_cents: Mapped[int] = mapped_column(Integer)
    warehouse: Mapped[str] = mapped_column(String(8))
    risk_score: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(DateTime)
    lines: Mapped[list[OrderLine]] = relationship(back_populates="order", order_by="OrderLine.id")


class OrderLine(Base):
    __tablename__ = "order_lines"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), index=True)
    product_id: Mapped[int] = mapped_column(ForeignKey("products.id"))
    quantity: Mapped[int] = mapped_column(Integer)
    unit_price_cents: Mapped[int] = mapped_column(Integer)
    discount_cents: Mapped[int] = mapped_column(Integer)
    order: Mapped[Order] = relationship(back_populates="lines")
    product: Mapped[Product] = relationship(lazy="joined")


class SeedInfo(Base):
    """What was seeded: a database is reused while this row matches the request."""

    __tablename__ = "seed_info"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    version: Mapped[int] = mapped_column(Integer)
    orders: Mapped[int] = mapped_column(Integer)
    customers: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)
    seconds_ms: Mapped[int] = mapped_column(Integer)


covering = Index(
    COVERING_INDEX,
    Order.customer_id,
    Order.created_at,
    Order.status,
    Order.total_cents,
    Order.item_count,
)
Order.__table__.indexes.discard(covering)  # created on demand, never by create_all


# -- URLs and engines -----------------------------------------------------------------------

_SYNC = {"sqlite": "sqlite+pysqlite", "postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql"}
_ASYNC = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+psycopg",
    "mysql": "mysql+aiomysql",
}


def _backend(url: URL) -> str:
    name = url.get_backend_name()
    return "mysql" if name == "mariadb" else name


def sync_url(url: str | URL) -> URL:
    parsed = make_url(url)
    return parsed.set(drivername=_SYNC[_backend(parsed)])


def async_url(url: str | URL) -> URL:
    parsed = make_url(url)
    return parsed.set(drivername=_ASYNC[_backend(parsed)])


def covering_url(url: str, covering: bool) -> str:
    """The SQLite file of a configuration: ``x.db`` without the index, ``x.covering.db``
    with it. Server URLs are returned unchanged (the index is made in place)."""
    parsed = make_url(url)
    if _backend(parsed) != "sqlite" or not covering or not parsed.database:
        return url
    path = Path(parsed.database)
    return parsed.set(database=str(path.with_suffix(".covering" + path.suffix))).render_as_string(
        hide_password=False
    )


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA cache_size=-65536")  # 64 MiB per connection
    cursor.execute("PRAGMA temp_store=MEMORY")
    cursor.close()


def sync_engine(url: str, *, pool_size: int = 10, max_overflow: int = 30) -> Engine:
    """A sync engine (the naive ORM path); SQLite connections get the same PRAGMAs as the
    async engine's, so the two differ only in how they are driven."""
    parsed = sync_url(url)
    if _backend(parsed) == "sqlite":
        engine = create_engine(parsed, pool_size=pool_size, max_overflow=max_overflow)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(
        parsed, pool_size=pool_size, max_overflow=max_overflow, pool_pre_ping=False
    )


def async_engine(url: str, *, pool_size: int = 10, max_overflow: int = 30) -> AsyncEngine:
    parsed = async_url(url)
    engine = create_async_engine(parsed, pool_size=pool_size, max_overflow=max_overflow)
    if _backend(parsed) == "sqlite":
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


# -- seeding ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Seeded:
    """What :func:`ensure_database` found or made."""

    url: str
    orders: int
    customers: int
    seeded_now: bool
    seconds: float
    """Seconds this call spent seeding (0 when the database was reused)."""
    index_seconds: float = 0.0


def customers_for(orders: int) -> int:
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


def _seed(engine: Engine, orders: int, seed: int) -> float:
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


def _seeded(engine: Engine, orders: int, seed: int) -> bool:
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


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """One seeder at a time per data folder (two servers may start together)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _has_covering(engine: Engine) -> bool:
    return any(i["name"] == COVERING_INDEX for i in inspect(engine).get_indexes("orders"))


def ignores_index(url: str, covering: bool) -> bool:
    """Whether a configuration without the index (``covering`` False) must tell the server
    to ignore it: on MySQL and MariaDB, where a configuration with it made it in place."""
    if covering or _backend(make_url(url)) != "mysql":
        return False
    engine = sync_engine(url)
    try:
        return _has_covering(engine)
    finally:
        engine.dispose()


def _set_index(engine: Engine, present: bool) -> None:
    """Create the covering index or drop it; on MySQL and MariaDB it is never dropped: a
    configuration without it ignores it there (``OrmQueries(ignore_index=True)``), so both
    can serve from one database at once."""
    exists = _has_covering(engine)
    if present and not exists:
        covering.create(engine)
    elif not present and exists and engine.dialect.name != "mysql":
        covering.drop(engine)


def ensure_database(url: str, *, orders: int, seed: int = 42, covering: bool = False) -> Seeded:
    """Seed ``url`` unless it already holds this seed; give it the covering index or not.

    Returns the URL to serve from (for SQLite with ``covering``: the indexed copy).
    """
    parsed = sync_url(url)
    if _backend(parsed) == "sqlite" and parsed.database not in (None, "", ":memory:"):
        return _ensure_sqlite(url, Path(str(parsed.database)), orders, seed, covering)
    engine = sync_engine(url)
    try:
        seconds = 0.0
        fresh = not _seeded(engine, orders, seed)
        if fresh:
            seconds = _seed(engine, orders, seed)
        started = time.perf_counter()
        _set_index(engine, covering)
        return Seeded(
            url, orders, customers_for(orders), fresh, seconds, time.perf_counter() - started
        )
    finally:
        engine.dispose()


def _ensure_sqlite(url: str, path: Path, orders: int, seed: int, covering: bool) -> Seeded:
    path = path.resolve()
    with _lock(path.with_suffix(".lock")):
        seconds = 0.0
        fresh = False
        engine = sync_engine(f"sqlite:///{path}")
        try:
            if not path.exists() or not _seeded(engine, orders, seed):
                fresh = True
                engine.dispose()
                seconds = _seed_sqlite_file(path, orders, seed)
        finally:
            engine.dispose()
        if not covering:
            return Seeded(
                str(sync_url(f"sqlite:///{path}")), orders, customers_for(orders), fresh, seconds
            )
        copy = Path(make_url(covering_url(f"sqlite:///{path}", True)).database or "")
        index_seconds = 0.0
        copy_engine = sync_engine(f"sqlite:///{copy}")
        try:
            stale = fresh or not copy.exists() or not _seeded(copy_engine, orders, seed)
        finally:
            copy_engine.dispose()
        if stale:
            started = time.perf_counter()
            _indexed_copy(path, copy)
            index_seconds = time.perf_counter() - started
        return Seeded(
            f"sqlite:///{copy}", orders, customers_for(orders), fresh, seconds, index_seconds
        )


def _seed_sqlite_file(path: Path, orders: int, seed: int) -> float:
    """Seed into a temporary file with the journal off, then move it into place."""
    temp = path.with_suffix(".seeding")
    for leftover in (temp, Path(f"{path}-wal"), Path(f"{path}-shm")):
        leftover.unlink(missing_ok=True)
    engine = create_engine(f"sqlite:///{temp}", poolclass=_single_pool())

    @event.listens_for(engine, "connect")
    def _load_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=OFF")
        cursor.execute("PRAGMA synchronous=OFF")
        cursor.execute("PRAGMA cache_size=-262144")
        cursor.execute("PRAGMA temp_store=MEMORY")
        cursor.execute("PRAGMA locking_mode=EXCLUSIVE")
        cursor.close()

    try:
        seconds = _seed(engine, orders, seed)
    finally:
        engine.dispose()
    _to_wal(temp)
    os.replace(temp, path)
    return seconds


def _indexed_copy(path: Path, copy: Path) -> None:
    """``copy``: ``path`` with the covering index. A copy of the file (sequential I/O; the
    seeded file has no WAL pending: :func:`_to_wal` checkpointed it), then the index, built
    with the journal off, and its statistics alone (the rest were gathered before the copy)."""
    import shutil
    import sqlite3

    temp = copy.with_suffix(".seeding")
    temp.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(path)) as source:
        source.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        shutil.copyfile(path, temp)
    with contextlib.closing(sqlite3.connect(temp)) as conn:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA cache_size=-262144")
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute(str(CreateIndex(covering).compile(dialect=_sqlite_dialect())))
        conn.execute(f"ANALYZE {COVERING_INDEX}")
        conn.commit()
        conn.execute("PRAGMA journal_mode=WAL")
    for leftover in (Path(f"{copy}-wal"), Path(f"{copy}-shm")):
        leftover.unlink(missing_ok=True)
    os.replace(temp, copy)


def _to_wal(path: Path) -> None:
    """Readers and the one writer (``create_order``) proceed side by side in WAL mode."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("ANALYZE")
        conn.commit()


def _sqlite_dialect() -> Any:
    from sqlalchemy.dialects import sqlite

    return sqlite.dialect()


def _single_pool() -> Any:
    from sqlalchemy.pool import NullPool

    return NullPool


# -- command line ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orders.db", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    seed = commands.add_parser("seed", help="seed the database unless already seeded")
    seed.add_argument("--db", default=None, help="SQLAlchemy URL (default: .demo/orders.db)")
    seed.add_argument("--orders", type=int, default=1_000_000)
    seed.add_argument("--seed", type=int, default=42)
    seed.add_argument("--covering", action="store_true", help="also make the indexed copy")
    args = parser.parse_args(argv)
    from orders.config import default_db_url

    url = args.db or default_db_url()
    seeded = ensure_database(url, orders=args.orders, seed=args.seed, covering=False)
    print(
        f"{seeded.url}: {seeded.orders:,} orders, {seeded.customers:,} customers; "
        + (f"seeded in {seeded.seconds:.1f} s" if seeded.seeded_now else "reused")
    )
    if args.covering:
        indexed = ensure_database(url, orders=args.orders, seed=args.seed, covering=True)
        print(f"{indexed.url}: covering index ready ({indexed.index_seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
