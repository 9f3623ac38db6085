"""The order database: URLs and engines (sync and async), and a database made ready for a
configuration: seeded (``orders.seeding``), with the covering index or without it.

The embedded default is SQLite in the data folder (``.demo/`` at the repository root); the same
code runs on PostgreSQL (psycopg) and MariaDB/MySQL (PyMySQL, aiomysql) given their URL. The
tables are ``orders.schema``'s: 200,000 orders by default (1,000,000 by flag) with their lines,
one customer per 100 orders, seeded on first run; a database whose ``seed_info`` row matches is
reused.

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
prints how long it took (``python -m orders.queries`` times each read, naive vs tuned).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.schema import CreateIndex

from orders.schema import COVERING_INDEX, covering
from orders.seeding import customers_for, is_seeded, seed_schema

__all__ = [
    "Seeded",
    "async_engine",
    "async_url",
    "covering_url",
    "ensure_database",
    "ignores_index",
    "sync_engine",
    "sync_url",
]


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


# -- preparing a database ----------------------------------------------------------------


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
        fresh = not is_seeded(engine, orders, seed)
        if fresh:
            seconds = seed_schema(engine, orders, seed)
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
            if not path.exists() or not is_seeded(engine, orders, seed):
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
            stale = fresh or not copy.exists() or not is_seeded(copy_engine, orders, seed)
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
        seconds = seed_schema(engine, orders, seed)
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
